#!/usr/bin/env bash
# One GPU-machine measurement of the CUDA runtime: configure (tool and LibTorch parts off), build with
# -j16, run the CUDA tests, run lmfuse-bench; logs go to $OUT. Needs catch.hpp (v2) under .carry/catch2/.
# Usage: scripts/gpu/runtime.sh [tests|bench|all|profile|sanitize|checked]   (environment: LMFUSE_BENCH_* of lmfuse-bench)
# sanitize: the CUDA test binary under compute-sanitizer's memcheck, racecheck, initcheck and synccheck, one
# log each ($OUT/sanitize-<tool>.log), each tool's error summary printed; fails unless all report 0 errors.
# LMFUSE_SANITIZE_TIMEOUT bounds each tool's run (seconds, default 240). checked: tests, then sanitize.
# profile: every kernel of one bench run timed alone by Nsight Compute (ncu, kernels serialised), written
# to $OUT/kernels.csv: duration, grid and block size per launch, to place the time the pipeline adds.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
what=${1:-all}
out=${OUT:-$root/build-gpu-out}
mkdir -p "$out"
build=$root/build-gpu-runtime  # its own folder: other GPU scripts configure build-gpu differently
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
cmake -S "$root" -B "$build" -G Ninja -DLMFUSE_TOOL=OFF -DLMFUSE_TORCH=OFF -DLMFUSE_CUDA=ON -DLMFUSE_TESTS=ON -DLMFUSE_CATCH2_INCLUDE_DIR="$root/.carry" \
  -DLMFUSE_CUDA_ARCHITECTURES=90 >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
targets=(lmfuse-bench)
[[ $what == tests || $what == all || $what == sanitize || $what == checked ]] && targets+=(lmfuse_runtime_cuda_tests)
cmake --build "$build" -j16 --target "${targets[@]}" >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
status=0
if [[ $what == tests || $what == all || $what == checked ]]; then
  "$build/tests/runtime_cuda/lmfuse_runtime_cuda_tests" 2>&1 | tee "$out/tests.log" | tail -60
  status=${PIPESTATUS[0]}
fi
if [[ $what == sanitize || $what == checked ]]; then
  # The whole binary under each tool; the host-only plan tests run too (cheaply). --error-exitcode makes
  # any finding fail the script; leaks are not errors here (the per-device state lives for the process).
  for tool in memcheck racecheck initcheck synccheck; do
    timeout "${LMFUSE_SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 0 \
      "$build/tests/runtime_cuda/lmfuse_runtime_cuda_tests" >"$out/sanitize-$tool.log" 2>&1
    code=$?
    echo "compute-sanitizer $tool: exit $code; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|test cases' "$out/sanitize-$tool.log" | tr '\n' ' ')"
    # Where the findings are: each distinct kernel location, with its count.
    grep -E '^=========     at ' "$out/sanitize-$tool.log" | sed 's/+0x[0-9a-f]*//' | sort | uniq -c | sort -rn | head -8
    [[ $code == 0 ]] || status=1
  done
fi
if [[ $what == bench || $what == all ]]; then
  "$build/runtime/bench/lmfuse-bench" 2>&1 | tee "$out/bench.log"
fi
if [[ $what == profile ]]; then
  # Kernels inside graphs with conditional nodes are not profiled by ncu: the "no compaction" rows show all.
  LMFUSE_BENCH_REPEATS=${LMFUSE_BENCH_REPEATS:-1} ncu --clock-control none --csv \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
    "$build/runtime/bench/lmfuse-bench" >"$out/kernels.csv" 2>"$out/profile.log"
  status=$?
  grep -c nvjet "$out/kernels.csv"
fi
exit $status
