#!/usr/bin/env bash
# Installs what is missing, builds, and runs lmfuse over the bundled example models (the GPT and the refusal
# gallery): the unified diff on stdout, the audit summary on stderr, the audit in build/quickstart-audit.json.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build=${LMFUSE_BUILD_DIR:-$root/build}
exec "$build/tool/lmfuse" -p "$build" --audit "$build/quickstart-audit.json" --summary \
  "$root/examples/gpt/model.cpp" "$root/examples/gallery/gallery.cpp"
