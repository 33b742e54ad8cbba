#!/bin/sh
# A compiler launcher that adds a flag of its own to every compile (as a wrapper or a cache might).
exec "$@" -DCAPPED_BY_LAUNCHER
