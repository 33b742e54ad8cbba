// Configured, never built (see CMakeLists.txt).
#include <public_include.h>

int publicIncludeAnswer() { return kPublicIncludeAnswer; }
