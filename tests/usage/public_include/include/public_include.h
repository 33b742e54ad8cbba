// A header in the library's public include folder (see ../CMakeLists.txt).
#pragma once

constexpr int kPublicIncludeAnswer = 42;
