#!/usr/bin/env bash
# Configures and builds lmfuse in build/ (override with LMFUSE_BUILD_DIR); extra arguments go to CMake.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${LMFUSE_BUILD_DIR:-$root/build}
jobs=${LMFUSE_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja "$@" >&2
cmake --build "$build" -j "$jobs" >&2
