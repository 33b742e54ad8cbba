#!/usr/bin/env bash
# Fetches the LibTorch 2.x headers (Debian trixie's libtorch-dev) into a cache folder of the build, so that
# the real-LibTorch tests run against them as well as against the installed 1.13. Nothing is installed and
# the system's apt sources are not changed: apt's own client runs on private lists, cache and state, and the
# package is unpacked with dpkg -x. The archive is the Debian mirror the system already uses for its own
# release (asked from apt itself), with the suite trixie.
#
#   scripts/fetch_libtorch2.sh [cache folder]    default: ${LMFUSE_BUILD_DIR:-build}/libtorch2
#
# A second run does nothing (the folder's READY file says what it holds; delete the folder to fetch again).
# Without network it says so and exits 0: the libtorch2.* tests then report themselves skipped. It is only
# ever run here, in the setup step: the build and the tests never download anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${1:-${LMFUSE_BUILD_DIR:-$root/build}/libtorch2}
suite=trixie
# libtorch-dev alone: every header <torch/torch.h> of 2.x reaches is in it or in the C++ and C libraries
# (clang -H says so); its dependencies (libtorch2.6, python3-dev, libprotobuf-dev) are not needed to parse.
packages=(libtorch-dev)

say() { echo "lmfuse setup: $*" >&2; }
give_up() {
  say "LibTorch 2.x headers not fetched ($1); the libtorch2.* tests will be skipped"
  exit 0
}

if [ -f "$cache/READY" ]; then
  exit 0
fi
# Whatever fails below only costs the 2.x tests, never the setup.
trap 'give_up "a step failed (line $LINENO)"' ERR
command -v apt-get >/dev/null && command -v dpkg >/dev/null || give_up "no apt-get or dpkg on this machine"

# The mirror the system uses for its own release: the first InRelease apt would fetch for it.
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}" || true)
[ -n "$codename" ] || give_up "no VERSION_CODENAME in /etc/os-release"
empty=$(mktemp -d)
mirror=$(apt-get -o Debug::NoLocking=1 -o Dir::State::Lists="$empty" update --print-uris 2>/dev/null |
  sed -n "s#^'\(.*\)/dists/$codename/InRelease'.*#\1#p" | head -n 1 || true)
rm -rf "$empty"
[ -n "$mirror" ] || give_up "no apt source for $codename in the system's configuration"

work="$cache/apt"
rm -rf "$work"
mkdir -p "$work/sources.list.d" "$work/preferences.d" "$work/state/lists/partial" "$work/cache/archives/partial" \
  "$work/debs"
touch "$work/state/status"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
options=""
[ -f "$keyring" ] && options="[signed-by=$keyring] "
echo "deb $options$mirror $suite main" >"$work/sources.list"
if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then
  # apt downloads as _apt when run as root; let it write where it downloads.
  chown _apt "$work/state/lists/partial" "$work/cache/archives/partial" "$work/debs"
fi
apt=(apt-get -q
  -o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts="$work/sources.list.d"
  -o Dir::Etc::Preferences="$work/preferences" -o Dir::Etc::PreferencesParts="$work/preferences.d"
  -o Dir::State="$work/state" -o Dir::State::Lists="$work/state/lists" -o Dir::State::Status="$work/state/status"
  -o Dir::Cache="$work/cache" -o Debug::NoLocking=1
  -o APT::Architectures::="$(dpkg --print-architecture)" -o Acquire::Languages=none)

say "fetching LibTorch 2.x headers (${packages[*]}, $suite) from $mirror into $cache"
first_error() { { grep -m 1 -A 1 -E '^(E|W|Err):' "$1" || tail -n 1 "$1"; } | paste -sd ' ' | tr -s ' '; }
"${apt[@]}" update --error-on=any >"$work/update.log" 2>&1 ||
  give_up "apt-get update failed, offline? $(first_error "$work/update.log")"
(cd "$work/debs" && "${apt[@]}" download "${packages[@]}") >"$work/download.log" 2>&1 ||
  give_up "apt-get download failed: $(first_error "$work/download.log")"

# Only the headers are kept (the package's libraries and CMake files belong to a LibTorch that is not here).
unpacked="$work/unpacked"
versions=""
for deb in "$work/debs"/*.deb; do
  dpkg -x "$deb" "$unpacked"
  versions+="$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) "
done
[ -f "$unpacked/usr/include/torch/csrc/api/include/torch/torch.h" ] ||
  give_up "the package holds no torch/csrc/api/include/torch/torch.h"
rm -rf "$cache/root"
mkdir -p "$cache/root/usr"
mv "$unpacked/usr/include" "$cache/root/usr/include"
echo "$versions($suite, $mirror)" >"$cache/READY"
rm -rf "$work"
say "LibTorch 2.x headers ready: $(cat "$cache/READY")"
