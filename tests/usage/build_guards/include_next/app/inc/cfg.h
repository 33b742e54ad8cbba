// The project's wrapper around the vendor's cfg.h of the same name: the vendor's settings, plus one
// registration of the project's. Read twice, it registers twice.
#include_next <cfg.h>
#include "registry.h"
APP_REGISTER_SCALE()
