// Declares nothing: what the tests read is an #include of it written between a head and its loss.
#pragma once
