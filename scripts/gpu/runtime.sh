#!/usr/bin/env bash
# One GPU-machine measurement of the CUDA runtime: configure (tool and LibTorch parts off), build with
# -j16, run the CUDA tests, run lmfuse-bench and lmfuse-gemm-bench; logs go to $OUT. Needs catch.hpp (v2) under .carry/catch2/.
# Usage: scripts/gpu/runtime.sh [tests|bench|all|profile|sanitize|checked]   (environment: LMFUSE_BENCH_* of lmfuse-bench)
# sanitize: the CUDA test binary under compute-sanitizer's memcheck and initcheck (whole binary), racecheck and
# synccheck (lmfuse's kernels only, list by list: see below), one log each ($OUT/sanitize-<name>.log), each
# tool's summary printed; fails on any error but the tools' own failures named below (racecheck wherever a
# cuBLASLt product runs, both tools in the numerators redo), and there on any report naming an lmfuse kernel.
# LMFUSE_SANITIZE_TIMEOUT bounds each tool's run (seconds, default 240); LMFUSE_SANITIZE_TOOLS picks tools
# (default all four). checked: tests, then sanitize.
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
targets=(lmfuse-bench lmfuse-gemm-bench)
[[ $what == tests || $what == all || $what == sanitize || $what == checked ]] && targets+=(lmfuse_runtime_cuda_tests)
cmake --build "$build" -j16 --target "${targets[@]}" >"$out/build.log" 2>&1 || { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
status=0
if [[ $what == tests || $what == all || $what == checked ]]; then
  "$build/tests/runtime_cuda/lmfuse_runtime_cuda_tests" 2>&1 | tee "$out/tests.log" | tail -60
  status=${PIPESTATUS[0]}
fi
if [[ $what == sanitize || $what == checked ]]; then
  bin="$build/tests/runtime_cuda/lmfuse_runtime_cuda_tests"
  compute-sanitizer --version 2>&1 | tail -1
  # One tool over the test binary (or some of its tests): its summary and the distinct kernel locations of
  # its reports printed; exit status 0 only with 0 errors and every test passed. Leaks are not errors
  # here (the per-device state lives for the process).
  sanitize() {  # name tool [options...] -- [test spec...]
    local name=$1 tool=$2 options=() code
    shift 2
    while [[ $# -gt 0 && $1 != -- ]]; do options+=("$1"); shift; done
    shift
    timeout "${LMFUSE_SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 0 \
      "${options[@]}" "$bin" "$@" >"$out/sanitize-$name.log" 2>&1
    code=$?
    echo "compute-sanitizer $tool [$name]: exit $code; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|All tests passed|test cases:|SIGSEGV|Internal Sanitizer Error' "$out/sanitize-$name.log" | sort -u | tr '\n' ' ')"
    grep -E '^=========     at ' "$out/sanitize-$name.log" | sed 's/+0x[0-9a-f]*//' | sort | uniq -c | sort -rn | head -8
    return $code
  }
  tools=${LMFUSE_SANITIZE_TOOLS:-memcheck initcheck racecheck synccheck}
  # memcheck and initcheck: the whole binary, every kernel (cuBLASLt's too), one tool after the other:
  # sanitized processes sharing the GPU have met illegal addresses that none meets alone (NOTES.md).
  for tool in memcheck initcheck; do
    [[ " $tools " == *" $tool "* ]] || continue
    sanitize "$tool" "$tool" -- || status=1
  done
  # racecheck and synccheck: only lmfuse's own kernels are instrumented (--kernel-name kns=lmfuse: every one
  # is in namespace lmfuse::detail::cuda); cuBLASLt's kernels run uninstrumented, and so does the numerators'
  # redoConditionKernel (one thread setting a graph condition: no barrier, no shared memory, no warp
  # operation, nothing for either tool to check), which synccheck instrumented fails with its own errors
  # wherever it runs inside a conditional node's body (a split pass in a compaction branch, NOTES.md).
  # Gated: the tests whose GPU work is lmfuse's kernels alone: each backend kernel launched directly ([kernels]), a plain captured graph
  # ([plain]), a graph with a SWITCH node ([conditional]), the vocabulary-parallel passes ([vocab_parallel],
  # plain kernels of shard.cu), and the host-only plan tests. Reported apart: the tests that also run
  # cuBLASLt's products ([gemm] alone, [uncompacted], [lean] and [numerators] calls) and lmfuse's own Hopper
  # product alone ([tile_gemm]: TMA and wgmma, instrumented). synccheck must pass each of them too; racecheck
  # ends in its own "Internal Sanitizer Error" wherever a cuBLASLt product runs (NOTES.md), so there only a
  # report that names an lmfuse kernel fails the script. So too for the numerators redo ([redo]: a chunk redone
  # inside a conditional node's body, alone or nested in compaction's): both tools fail the call there with their own
  # errors ("overflow of tracked cuda::barrier structures", then a launch failure; racecheck a SIGSEGV or its
  # cuBLASLt error); synccheck fails the uncompacted case with only the barrier-free unitScaleKernel instrumented,
  # and the compacted one even with that kernel uninstrumented too (NOTES.md).
  ours=(--kernel-name kns=lmfuse --kernel-name-exclude kns=redoConditionKernel)
  apart() {  # tool tag spec
    LMFUSE_SANITIZE_TIMEOUT=${LMFUSE_SANITIZE_APART_TIMEOUT:-120} sanitize "$1-$2" "$1" "${ours[@]}" -- "$3" ||
      if [[ ($1 == synccheck && $2 != redo) || $2 == tile_gemm ]] ||
        grep -qE '^=========     at .*lmfuse' "$out/sanitize-$1-$2.log"; then status=1; fi
  }
  for tool in racecheck synccheck; do
    [[ " $tools " == *" $tool "* ]] || continue
    sanitize "$tool" "$tool" "${ours[@]}" -- "[kernels],[plain],[conditional],[vocab_parallel],[plan]" || status=1
    for tag in gemm tile_gemm uncompacted lean; do apart "$tool" "$tag" "[$tag]"; done
    apart "$tool" numerators "[numerators]~[redo]"
    apart "$tool" redo "[redo]"
  done
fi
if [[ $what == bench || $what == all ]]; then
  "$build/runtime/bench/lmfuse-bench" 2>&1 | tee "$out/bench.log"
  "$build/runtime/bench/lmfuse-gemm-bench" 2>&1 | tee "$out/gemm-bench.log"
fi
if [[ $what == profile ]]; then
  # Kernels inside graphs with conditional nodes are not profiled by ncu: the "no compaction" and "low-memory
  # uncompacted" rows show all.
  LMFUSE_BENCH_REPEATS=${LMFUSE_BENCH_REPEATS:-1} ncu --clock-control none --csv \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
    "$build/runtime/bench/lmfuse-bench" >"$out/kernels.csv" 2>"$out/profile.log"
  status=$?
  grep -c nvjet "$out/kernels.csv"
fi
exit $status
