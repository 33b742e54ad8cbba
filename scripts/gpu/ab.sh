#!/usr/bin/env bash
# Several builds of the CUDA runtime's benches side by side on the GPU machine, in one call: lmfuse-gemm-bench
# and lmfuse-bench of each build in turn, alternating for a number of rounds, so every comparison comes from
# the same machine start (METHOD.md: rerun the baseline in the same run). Each build folder holds
# lmfuse-gemm-bench and lmfuse-bench (built elsewhere and carried, or by runtime.sh). Logs go to
# $OUT/<LMFUSE_AB_NAME, default ab-logs>.tgz (gemm-<name>-<round>.log, bench-<name>-<round>.log); the end of
# the output is a short table of each run's rows.
# Usage: scripts/gpu/ab.sh DIR...   (names: the folders' last components)
# Environment: LMFUSE_AB_ROUNDS (default 3); LMFUSE_AB_GEMM=0 skips lmfuse-gemm-bench, LMFUSE_AB_BENCH=0
# lmfuse-bench; the benches' own variables pass through (defaults here: LMFUSE_GEMM_BENCH_ONLY=logits,
# LMFUSE_BENCH_MODES=default, LMFUSE_BENCH_SHAPES=0,1,3); LMFUSE_AB_TIMEOUT bounds each run (seconds,
# default 180).
set -uo pipefail
dirs=("$@") rounds=${LMFUSE_AB_ROUNDS:-3}
out=${OUT:-$PWD/ab-out}
logs=$(mktemp -d)
export LMFUSE_GEMM_BENCH_ONLY=${LMFUSE_GEMM_BENCH_ONLY-logits} LMFUSE_BENCH_MODES=${LMFUSE_BENCH_MODES-default}
export LMFUSE_BENCH_SHAPES=${LMFUSE_BENCH_SHAPES-0,1,3}
limit=${LMFUSE_AB_TIMEOUT:-180}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
status=0
for ((round = 1; round <= rounds; ++round)); do
  for dir in "${dirs[@]}"; do
    name=$(basename "$dir")
    if [[ ${LMFUSE_AB_GEMM:-1} != 0 ]]; then
      timeout "$limit" "$dir/lmfuse-gemm-bench" >"$logs/gemm-$name-$round.log" 2>&1 || { echo "gemm $name $round: exit $?"; status=1; }
    fi
    if [[ ${LMFUSE_AB_BENCH:-1} != 0 ]]; then
      timeout "$limit" "$dir/lmfuse-bench" >"$logs/bench-$name-$round.log" 2>&1 || { echo "bench $name $round: exit $?"; status=1; }
    fi
  done
  tar -czf "$out/${LMFUSE_AB_NAME:-ab-logs}.tgz" -C "$logs" .  # after each round: what ran comes back if the call is cut off
done
# Summary: the logits products (tile ms), the numerators / statistics products, the pipeline's rows.
for f in "$logs"/gemm-*.log; do
  [[ -f $f ]] || continue
  echo "== $(basename "$f" .log)"
  grep -E '^\| (Llama|Gemma|Qwen)' "$f" | awk -F'|' 'NF > 8 {printf "  %s |%s|%s|%s|%s\n", $2, $3, $4, $5, $6}'
done
for f in "$logs"/bench-*.log; do
  [[ -f $f ]] || continue
  echo "== $(basename "$f" .log)"
  grep -E '^  \S' "$f" | head -8
done
exit $status
