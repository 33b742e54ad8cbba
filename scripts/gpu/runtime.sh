#!/usr/bin/env bash
# One GPU-machine measurement of the CUDA runtime: configure (tool and LibTorch parts off), build with
# -j16, run the CUDA tests, run lmfuse-bench and lmfuse-gemm-bench; logs go to $OUT. Needs catch.hpp (v2) under .carry/catch2/.
# Usage: scripts/gpu/runtime.sh [tests|bench|all|profile|sanitize|checked]   (environment: LMFUSE_BENCH_* of lmfuse-bench)
# sanitize: the CUDA test binary under compute-sanitizer's memcheck and initcheck (whole binary, calls recorded
# as graphs), racecheck and synccheck (calls run eagerly, list by list or test case by test case: see
# below), one log each ($OUT/sanitize-<name>.log), each tool's summary printed; fails on any error but
# racecheck's reports inside cuBLASLt's own kernels, and on any crash or timeout.
# LMFUSE_SANITIZE_TIMEOUT bounds each tool's run (seconds, default 240), LMFUSE_SANITIZE_APART_TIMEOUT each
# list's or test case's (default 240); LMFUSE_SANITIZE_TOOLS picks tools (default all four);
# LMFUSE_RACECHECK_UNITS=first-last runs racecheck over those units only (about 15 minutes for all of them
# on an H100, so two runs of under 10 minutes: 1-23 and 24-30, say). checked: tests, then sanitize.
# profile: every kernel of one bench run timed alone by Nsight Compute (ncu, kernels serialised; the calls run
# eagerly, LMFUSE_CUDA_EAGER=1, since ncu profiles no kernel of a graph with conditional nodes), written
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
    local name=$1 tool=$2 options=() code began=$SECONDS
    shift 2
    while [[ $# -gt 0 && $1 != -- ]]; do options+=("$1"); shift; done
    shift
    timeout "${LMFUSE_SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 0 \
      "${options[@]}" "$bin" "$@" >"$out/sanitize-$name.log" 2>&1
    code=$?
    echo "compute-sanitizer $tool [$name]: exit $code in $((SECONDS - began)) s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|All tests passed|test cases:|SIGSEGV|Internal Sanitizer Error' "$out/sanitize-$name.log" | sort -u | tr '\n' ' ')"
    grep -E '^=========     at |^=========.* access at ' "$out/sanitize-$name.log" | sed 's/+0x[0-9a-f]*//' | sort | uniq -c |
      sort -rn | head -8
    return $code
  }
  tools=${LMFUSE_SANITIZE_TOOLS:-memcheck initcheck racecheck synccheck}
  # memcheck and initcheck: the whole binary, every kernel (cuBLASLt's too), one tool after the other:
  # sanitized processes sharing the GPU have met illegal addresses that none meets alone (NOTES.md).
  for tool in memcheck initcheck; do
    [[ " $tools " == *" $tool "* ]] || continue
    sanitize "$tool" "$tool" -- || status=1
  done
  # racecheck and synccheck follow no conditional node of a CUDA graph (a kernel inside one fails them with
  # the tools' own errors: synccheck's "overflow of tracked cuda::barrier structures", racecheck's SIGSEGV;
  # NOTES.md), so they run every call eagerly: LMFUSE_CUDA_EAGER=1 (conditional.h: each choice read back by
  # the host, the same kernels in the same order) and LMFUSE_TEST_NO_GRAPHS=1 (the tests skip what builds
  # such graphs on purpose: captured calls, graph-against-eager comparisons; harness.h).
  # synccheck instruments lmfuse's kernels only (--kernel-name kns=lmfuse: every one is in namespace
  # lmfuse::detail::cuda; with cuBLASLt's kernels instrumented it overflows its barrier tracking), list by
  # list, every list gated. racecheck instruments lmfuse's kernels only where no cuBLASLt product runs
  # (the gated list without the vocabulary-parallel passes: each backend kernel launched directly, a plain
  # captured graph, a graph with a SWITCH node, the plan tests; and lmfuse's own Hopper product, [tile_gemm]):
  # with a cuBLASLt kernel uninstrumented it ends in "Internal Sanitizer Error: The Sanitizer failed to
  # handle a hardware exception". Every other test case runs cuBLASLt's products: racecheck instruments
  # everything there, one test case per process, and reports hazards inside some of cuBLASLt's own kernels
  # (nvjet_*, depending on the algorithm the shape gets; NOTES.md): those are counted and printed, and the
  # test case fails on any other report or error, on a crash or on a timeout.
  export LMFUSE_CUDA_EAGER=1 LMFUSE_TEST_NO_GRAPHS=1
  ours=(--kernel-name kns=lmfuse)
  gated="[kernels],[plain],[conditional],[vocab_parallel],[plan]"
  if [[ " $tools " == *" synccheck "* ]]; then
    sanitize synccheck synccheck "${ours[@]}" -- "$gated" || status=1
    for tag in gemm tile_gemm uncompacted lean numerators; do
      LMFUSE_SANITIZE_TIMEOUT=${LMFUSE_SANITIZE_APART_TIMEOUT:-240} sanitize "synccheck-$tag" synccheck "${ours[@]}" -- "[$tag]" ||
        status=1
    done
    LMFUSE_SANITIZE_TIMEOUT=${LMFUSE_SANITIZE_APART_TIMEOUT:-240} sanitize synccheck-rest synccheck "${ours[@]}" -- \
      "[cuda]~[gemm]~[tile_gemm]~[uncompacted]~[lean]~[numerators]~[kernels]~[plain]~[conditional]~[vocab_parallel]" ||
      status=1
  fi
  if [[ " $tools " == *" racecheck "* ]]; then
    sanitize racecheck racecheck "${ours[@]}" -- "[kernels],[plain],[conditional],[plan]" || status=1
    LMFUSE_SANITIZE_TIMEOUT=${LMFUSE_SANITIZE_APART_TIMEOUT:-240} sanitize racecheck-tile_gemm racecheck "${ours[@]}" -- \
      "[tile_gemm]" || status=1
    # Every test case where cuBLASLt's products run, one process each (a whole list does not finish in the
    # time given under racecheck), and the fp64-reference table in parts of 8 of its entries
    # (LMFUSE_TEST_CASE_INDEX). LMFUSE_RACECHECK_UNITS=first-last runs only those of these units (numbered
    # from 1 as printed), to spread racecheck over several runs.
    reference="CUDA matches the fp64 reference for every option and dtype"
    units=()
    while IFS= read -r name; do
      [[ -n $name && $name != "$reference" ]] && units+=("$name|")
    done < <("$bin" --list-test-names-only "[cuda]~[kernels]~[plain]~[conditional]~[plan]~[tile_gemm]")
    entries=$(LMFUSE_TEST_CASE_INDEX=1000000000 "$bin" "$reference" | sed -n 's/.*no case at index [0-9]* of \([0-9]*\).*/\1/p')
    for ((first = 0; first < ${entries:-0}; first += 8)); do units+=("$reference|$first-$((first + 7))"); done
    range=${LMFUSE_RACECHECK_UNITS:-1-${#units[@]}}
    (( ${#units[@]} > 1 && ${entries:-0} > 0 )) || { echo "racecheck: test cases not found"; status=1; }
    for ((unit = ${range%-*}; unit <= ${range#*-} && unit <= ${#units[@]}; ++unit)); do
      name=${units[unit - 1]%|*} part=${units[unit - 1]##*|}
      spec=$(printf '%s' "$name" | sed -e 's/\\/\\\\/g' -e 's/[],[]/\\&/g')  # Catch's escapes
      log="$out/sanitize-racecheck-unit$unit.log"
      echo "racecheck unit $unit of ${#units[@]}: $name${part:+ (table entries $part)}"
      LMFUSE_TEST_CASE_INDEX=$part LMFUSE_SANITIZE_TIMEOUT=${LMFUSE_SANITIZE_APART_TIMEOUT:-240} \
        sanitize "racecheck-unit$unit" racecheck -- "$spec"
      code=$?
      # Tolerated: exit 99 whose every error is a race report with both accesses in nvjet_* kernels, as many
      # reports as the summary's errors. Anything else fails: another error, an access elsewhere, a crash,
      # a test case that did not run.
      races=$(grep -c '^========= Error: Race reported between' "$log")
      errors=$(sed -n 's/.*RACECHECK SUMMARY: .* (\([0-9]*\) error.*/\1/p' "$log" | tail -1)
      if ! grep -qE 'All tests passed \([0-9]+ assertions? in 1 test case\)|test cases: +1 \| +1 passed' "$log" ||
        [[ $code != 0 && $code != 99 ]] ||
        grep -E '^=========.* access at ' "$log" | grep -qv ' access at nvjet_' ||
        grep -E '^========= (Error|Program hit|Internal)' "$log" | grep -qv 'Error: Race reported between' ||
        [[ $races != "${errors:-0}" ]]; then
        status=1
      elif [[ $code == 99 ]]; then
        echo "  $races reports, each between two accesses inside cuBLASLt's own nvjet_* kernels"
      fi
    done
  fi
fi
if [[ $what == bench || $what == all ]]; then
  "$build/runtime/bench/lmfuse-bench" 2>&1 | tee "$out/bench.log"
  "$build/runtime/bench/lmfuse-gemm-bench" 2>&1 | tee "$out/gemm-bench.log"
fi
if [[ $what == profile ]]; then
  # ncu profiles no kernel of a graph that has conditional nodes: the calls run eagerly (conditional.h).
  LMFUSE_CUDA_EAGER=1 LMFUSE_BENCH_REPEATS=${LMFUSE_BENCH_REPEATS:-1} ncu --clock-control none --csv \
    --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size \
    "$build/runtime/bench/lmfuse-bench" >"$out/kernels.csv" 2>"$out/profile.log"
  status=$?
  grep -c nvjet "$out/kernels.csv"
fi
exit $status
