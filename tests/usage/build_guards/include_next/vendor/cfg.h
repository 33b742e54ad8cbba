// The vendor's cfg.h, which the project's app/inc/cfg.h wraps (#include_next).
#pragma once
#define VENDOR_HIDDEN_SCALE 1.0
