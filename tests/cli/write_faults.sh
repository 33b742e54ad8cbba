#!/usr/bin/env bash
# Faults around writes that need a real file system, root or signals; every written file must end complete
# or untouched, and no temporary may stay behind:
#   1. a full disk (a 64 KiB tmpfs; root only, else skipped with a message) under --in-place, --audit,
#      --export-fixes and --out-dir: the source and the previous audit are byte-identical, exit 1, no
#      "LLVM ERROR"; the dry-run diff into /dev/full likewise;
#   1c. a file-size limit (ulimit -f): reported like a full disk, not a crash;
#   2. an immutable source (chattr +i; skipped where the file system or the user cannot set it);
#   3. SIGINT and SIGTERM while a temporary exists, with -j 2 (LMFUSE_TEST_HOLD_TEMPORARY_MS holds each
#      complete temporary before its rename, so the signal lands while it exists);
#   4. SIGKILL while a temporary exists: the next write of that target removes it, but not one a live
#      writer holds;
#   5. the lock on a new temporary fails (an LD_PRELOAD shim): the write stops naming the lock, no
#      temporary stays.
#   write_faults.sh <lmfuse> <stub include folder>
set -uo pipefail
lmfuse=$1 stubs=$2
work=$(mktemp -d)
mounted=""
cleanup() { [[ -n $mounted ]] && umount "$mounted"; chattr -i "$work"/immutable/model.cpp 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
no_temporaries() {  # <folder> <what>
  local left
  left=$(find "$1" -name '*.lmfuse-tmp-*' -o -name '*.temp-stream-*' 2>/dev/null)
  [[ -z $left ]] || fail "$2: temporaries left behind: $left"
}

model() {  # <path>: the canonical site, padded to a few KiB
  mkdir -p "$(dirname "$1")"
  cat >"$1" <<'CPP'
#include <torch/torch.h>
namespace F = torch::nn::functional;
torch::Tensor loss_of(torch::nn::Linear &head, const torch::Tensor &h, c10::optional<torch::Tensor> labels) {
  torch::Tensor loss;
  auto logits = head(h);
  if (labels.has_value()) {
    loss = F::cross_entropy(logits.view({-1, logits.size(-1)}), labels->view(-1));
  }
  return loss;
}
CPP
  for i in $(seq 200); do echo "// padding line $i: the file is larger than one write of a few bytes" >>"$1"; done
}
flags=(--library-include "$stubs" -- -std=c++17 -I "$stubs")

# 1. Disk full.
if [[ $(id -u) == 0 ]] && mkdir -p "$work/full" && mount -t tmpfs -o size=64k tmpfs "$work/full" 2>/dev/null; then
  mounted="$work/full"
  model "$work/full/model.cpp"
  cp "$work/full/model.cpp" "$work/model.orig"
  echo '{"schema": "lmfuse-audit/3", "previous": "audit"}' >"$work/full/audit.json"  # an earlier audit: replaceable
  cp "$work/full/audit.json" "$work/audit.orig"
  dd if=/dev/zero of="$work/full/filler" bs=4k count=64 2>/dev/null  # fills the rest
  "$lmfuse" --in-place --audit "$work/full/audit.json" --export-fixes "$work/full/fixes.yaml" \
    "$work/full/model.cpp" "${flags[@]}" >"$work/out.txt" 2>"$work/err.txt"
  status=$?
  [[ $status == 1 ]] || fail "disk full, --in-place: exit $status, expected 1"
  cmp -s "$work/full/model.cpp" "$work/model.orig" || fail "disk full: the source changed"
  cmp -s "$work/full/audit.json" "$work/audit.orig" || fail "disk full: the previous audit changed"
  [[ ! -e $work/full/fixes.yaml ]] || fail "disk full: a partial fixes file exists"
  grep -q 'LLVM ERROR' "$work/err.txt" && fail "disk full: LLVM ERROR"
  grep -q 'No space left on device' "$work/err.txt" || fail "disk full: the error does not say why: $(cat "$work/err.txt")"
  no_temporaries "$work/full" "disk full, --in-place"
  # The same full disk as an output tree: every copy is complete or absent.
  model "$work/tree/model.cpp"
  "$lmfuse" --out-dir "$work/full/out" --audit "$work/out-audit.json" "$work/tree/model.cpp" "${flags[@]}" \
    >/dev/null 2>"$work/err.txt"
  status=$?
  [[ $status == 1 ]] || fail "disk full, --out-dir: exit $status, expected 1"
  grep -q 'LLVM ERROR' "$work/err.txt" && fail "disk full, --out-dir: LLVM ERROR"
  grep -q '"write-failed"' "$work/out-audit.json" || fail "disk full, --out-dir: no write-failed entry"
  if [[ -e $work/full/out/model.cpp ]]; then
    tail -n 1 "$work/full/out/model.cpp" | grep -q 'padding line 200:' || fail "disk full, --out-dir: a truncated copy"
  fi
  no_temporaries "$work/full" "disk full, --out-dir"
  umount "$work/full" && mounted=""
  echo "disk full: checked"
else
  echo "disk full: skipped (needs root to mount a small tmpfs)"
fi

# 1b. The diff on a full standard output (/dev/full): an error and exit 1, not "LLVM ERROR".
if [[ -w /dev/full ]]; then
  model "$work/stdout/model.cpp"
  "$lmfuse" "$work/stdout/model.cpp" "${flags[@]}" >/dev/full 2>"$work/err.txt"
  status=$?
  [[ $status == 1 ]] || fail "stdout full: exit $status, expected 1"
  grep -q 'LLVM ERROR' "$work/err.txt" && fail "stdout full: LLVM ERROR"
  grep -q 'cannot write the diff to standard output' "$work/err.txt" || fail "stdout full: $(cat "$work/err.txt")"
  echo "stdout full: checked"
fi

# 1c. A file-size limit (ulimit -f, for everyone): the writes fail with "File too large" and are reported
# like a full disk, not as a crash (SIGXFSZ would end the run in a stack dump).
mkdir -p "$work/limit"
model "$work/limit/model.cpp"
cp "$work/limit/model.cpp" "$work/limit.orig"
(ulimit -f 4; "$lmfuse" --in-place --audit "$work/limit/audit.json" "$work/limit/model.cpp" "${flags[@]}" \
  >"$work/out.txt" 2>"$work/err.txt")
status=$?
[[ $status == 1 ]] || fail "file-size limit: exit $status, expected 1"
cmp -s "$work/limit/model.cpp" "$work/limit.orig" || fail "file-size limit: the source changed"
grep -qE 'PLEASE submit|Stack dump|LLVM ERROR' "$work/err.txt" && fail "file-size limit: a crash report: $(cat "$work/err.txt")"
grep -q 'File too large' "$work/err.txt" || fail "file-size limit: the error does not say why: $(cat "$work/err.txt")"
no_temporaries "$work/limit" "file-size limit"
echo "file-size limit: checked"

# 2. Immutable source.
model "$work/immutable/model.cpp"
cp "$work/immutable/model.cpp" "$work/immutable.orig"
if chattr +i "$work/immutable/model.cpp" 2>/dev/null; then
  "$lmfuse" --in-place --audit "$work/immutable.json" "$work/immutable/model.cpp" "${flags[@]}" >/dev/null 2>"$work/err.txt"
  status=$?
  [[ $status == 1 ]] || fail "immutable: exit $status, expected 1"
  grep -q '"write-failed"' "$work/immutable.json" || fail "immutable: no write-failed entry"
  grep -q 'is immutable or append-only' "$work/err.txt" || fail "immutable: the error does not say so: $(cat "$work/err.txt")"
  chattr -i "$work/immutable/model.cpp"
  cmp -s "$work/immutable/model.cpp" "$work/immutable.orig" || fail "immutable: the source changed"
  no_temporaries "$work/immutable" "immutable"
  echo "immutable: checked"
else
  echo "immutable: skipped (chattr +i not permitted here)"
fi

# 3. Signals while temporaries exist, two units in parallel.
for signal in INT TERM; do
  dir="$work/signal-$signal"
  model "$dir/src/a.cpp"
  model "$dir/src/b.cpp"
  # A background job of a script starts with SIGINT ignored; give it the default disposition back.
  LMFUSE_TEST_HOLD_TEMPORARY_MS=2000 env --default-signal=INT,TERM "$lmfuse" -j 2 --out-dir "$dir/out" --audit "$dir/audit.json" \
    "$dir/src/a.cpp" "$dir/src/b.cpp" "${flags[@]}" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    [[ -n $(find "$dir" -name '*.lmfuse-tmp-*' 2>/dev/null) ]] && break
    sleep 0.05
  done
  [[ -n $(find "$dir" -name '*.lmfuse-tmp-*' 2>/dev/null) ]] || fail "SIG$signal: no temporary seen while writing"
  kill -"$signal" "$pid"
  wait "$pid"
  status=$?
  [[ $status -gt 128 ]] || fail "SIG$signal: exit $status, expected death by the signal"
  no_temporaries "$dir" "SIG$signal"
  for copy in "$dir"/out/*.cpp; do
    [[ -e $copy ]] || continue
    tail -n 1 "$copy" | grep -q 'padding line 200:' || fail "SIG$signal: truncated $copy"
  done
done
echo "signals: checked"

# 4. SIGKILL while a temporary exists: no handler runs, so it stays; the next write of that target removes
# it, and leaves one that a live writer holds (here `flock`, holding the lock as a writer does).
dir="$work/kill"
model "$dir/model.cpp"
cp "$dir/model.cpp" "$work/kill.orig"
LMFUSE_TEST_HOLD_TEMPORARY_MS=5000 "$lmfuse" --in-place "$dir/model.cpp" "${flags[@]}" >/dev/null 2>&1 &
pid=$!
for _ in $(seq 300); do
  [[ -n $(find "$dir" -name '*.lmfuse-tmp-*' 2>/dev/null) ]] && break
  sleep 0.05
done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
cmp -s "$dir/model.cpp" "$work/kill.orig" || fail "SIGKILL: the source changed"
[[ -n $(find "$dir" -name '*.lmfuse-tmp-*') ]] || fail "SIGKILL: no temporary was left to remove (the test did not kill a write)"
echo 'held by a live writer' >"$dir/model.cpp.lmfuse-tmp-held00"
flock -x "$dir/model.cpp.lmfuse-tmp-held00" sleep 30 >/dev/null 2>&1 &
holder=$!
for _ in $(seq 100); do flock -n -x "$dir/model.cpp.lmfuse-tmp-held00" true || break; sleep 0.05; done
"$lmfuse" --in-place "$dir/model.cpp" "${flags[@]}" >/dev/null 2>"$work/err.txt"
status=$?
[[ $status == 0 ]] || fail "after SIGKILL: exit $status, expected 0: $(cat "$work/err.txt")"
grep -q 'lmfuse::linear_cross_entropy' "$dir/model.cpp" || fail "after SIGKILL: the source was not rewritten"
left=$(find "$dir" -name '*.lmfuse-tmp-*' ! -name '*.lmfuse-tmp-held00')
[[ -z $left ]] || fail "after SIGKILL: the abandoned temporary is still there: $left"
[[ -e $dir/model.cpp.lmfuse-tmp-held00 ]] || fail "after SIGKILL: a temporary a live writer holds was removed"
pkill -P "$holder" 2>/dev/null
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
echo "SIGKILL: checked"

# 5. The lock on a new temporary fails (an LD_PRELOAD shim makes the first flock(2) fail with EIO): the write
# stops naming the lock and its error, the source is as it was and no temporary stays; the next run writes.
# Skipped without a C compiler.
if command -v cc >/dev/null 2>&1; then
  cat >"$work/flock_fault.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/file.h>
static int calls;
int flock(int fd, int operation) {
  const char *fails = getenv("FLOCK_FAILS");  /* how many of the first calls fail */
  if (fails && calls++ < atoi(fails)) { errno = EIO; return -1; }
  int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
  return real(fd, operation);
}
C
  if cc -shared -fPIC -o "$work/flock_fault.so" "$work/flock_fault.c" -ldl 2>"$work/cc.txt"; then
    dir="$work/flock"
    model "$dir/model.cpp"
    cp "$dir/model.cpp" "$work/flock.orig"
    FLOCK_FAILS=1 LD_PRELOAD="$work/flock_fault.so" "$lmfuse" --in-place --audit "$dir/audit.json" \
      "$dir/model.cpp" "${flags[@]}" >/dev/null 2>"$work/err.txt"
    status=$?
    [[ $status == 1 ]] || fail "flock fails: exit $status, expected 1"
    cmp -s "$dir/model.cpp" "$work/flock.orig" || fail "flock fails: the source changed"
    grep -q 'cannot lock the temporary file it made beside it: Input/output error' "$work/err.txt" ||
      fail "flock fails: the error does not name the lock: $(cat "$work/err.txt")"
    no_temporaries "$dir" "flock fails"
    "$lmfuse" --in-place --audit "$dir/audit.json" "$dir/model.cpp" "${flags[@]}" >/dev/null 2>"$work/err.txt" ||
      fail "flock fails, then a run without the fault: $(cat "$work/err.txt")"
    grep -q 'lmfuse::linear_cross_entropy' "$dir/model.cpp" || fail "flock fails, then a run without it: not rewritten"
    no_temporaries "$dir" "flock fails, then a run without it"
    echo "lock faults: checked"
  else
    echo "lock faults: skipped (the shim did not compile: $(head -n 1 "$work/cc.txt"))"
  fi
else
  echo "lock faults: skipped (no C compiler)"
fi

[[ $failures == 0 ]] || exit 1
echo "write faults: all checked"
