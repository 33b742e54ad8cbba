// Read twice, this header would define ONCE_READ_TWICE, which changes the loss (once/model.cpp).
#pragma once
#ifdef ONCE_READ
#define ONCE_READ_TWICE 1
#endif
#define ONCE_READ 1
