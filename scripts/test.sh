#!/usr/bin/env bash
# Installs what is missing, builds everything, and runs the whole test suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${LMFUSE_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j "${LMFUSE_JOBS:-$(nproc)}"
