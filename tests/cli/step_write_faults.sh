#!/usr/bin/env bash
# The build step behind lmfuse_rewrite() under a full disk (a small tmpfs as its mirror folder; root only,
# else skipped with a message): the tool's staged copy fits, the copy into the mirror does not. The step must
# fail through its one error path: no copy of a source is left (a build tool would take a cut copy for up to
# date), the audit is this run's or none, and the message names the copy.
#   step_write_faults.sh <LmfuseRewriteStep.cmake> <lmfuse tool> <patterns file>
set -uo pipefail
step=$1 tool=$2 patterns=$3
work=$(mktemp -d)
mounted=""
cleanup() { [[ -n $mounted ]] && umount "$mounted"; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/src" "$work/out"
if [[ $(id -u) != 0 ]] || ! mount -t tmpfs -o size=96k tmpfs "$work/out" 2>/dev/null; then
  echo "full disk: skipped (needs root to mount a small tmpfs)"
  exit 0
fi
mounted="$work/out"
# A source of about 60 KiB: its staged copy fits in the 96 KiB folder, a second copy does not.
{ echo "int value() { return 1; }"; for i in $(seq 1 800); do echo "// padding line $i of a large source file, here only to fill the disk"; done; } > "$work/src/big.cpp"
printf -- '-std=c++17\n' > "$work/flags.txt"
echo "$work/src/big.cpp" > "$work/sources.txt"
: > "$work/extra.txt"
: > "$work/library.txt"
echo "$work/out/big.cpp" > "$work/units.txt"
cmake -DMODE=tool -DTARGET=t "-DTOOL=$tool" "-DPATTERNS=$patterns" "-DCOMPILE_COMMANDS=" "-DFLAGS_FILE=$work/flags.txt" \
  "-DSOURCES_FILE=$work/sources.txt" "-DEXTRA_ARGS_FILE=$work/extra.txt" "-DLIBRARY_INCLUDES_FILE=$work/library.txt" "-DCOPIES=$work/out/big.cpp" \
  "-DSOURCE_ROOT=$work/src" "-DEDIT_ROOT=$work/src" "-DOUT_DIR=$work/out" "-DAUDIT=$work/audit.json" -DEXPECT_PATCHED= \
  "-DCXX=${CXX:-c++}" "-DDEPFILE=$work/rewrite.d" "-DUNITS_FILE=$work/units.txt" "-DBINARY_DIR=$work/build" \
  -P "$step" > "$work/log" 2>&1
status=$?
flat=$(tr -s ' \n' ' ' < "$work/log")
failures=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; failures=$((failures + 1)); fi; }
check "the step fails" "[[ $status != 0 ]]"
check "its message names the copy it could not make" "[[ \"\$flat\" == *'cannot write '*'/out/big.cpp'* ]]"
check "no copy of the source is left" "[[ ! -e $work/out/big.cpp ]]"
check "an audit left is this run's (it names the source)" "[[ ! -e $work/audit.json ]] || grep -q big.cpp $work/audit.json"
[[ $failures == 0 ]] || cat "$work/log"
exit $((failures > 0))
