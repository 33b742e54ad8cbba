#!/usr/bin/env bash
# Installs, from Debian's packages, what lmfuse needs and the machine lacks; does nothing when all is there.
set -euo pipefail

packages=(cmake ninja-build g++ libclang-19-dev llvm-19-dev clang-19 libfmt-dev catch2 libtorch-dev libgloo-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "lmfuse setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
# The LibTorch 2.x headers the real-LibTorch tests also run against, in a cache folder of the build.
"$(dirname "$0")/fetch_libtorch2.sh"
