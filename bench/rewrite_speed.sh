#!/usr/bin/env bash
# Speed of the lmfuse tool (a benchmark, not a test): over the examples' translation units, parsed with
# the real LibTorch headers, it times in one run
#   1. clang++-19 -fsyntax-only on each unit (the floor: what any Clang-based tool must at least pay),
#   2. lmfuse --out-dir on the same units with an empty output folder (parse + analysis + re-parse check),
#   3. lmfuse again over the unchanged units (the content-hash cache in the output folder),
# each ROUNDS times (best kept), and prints a table with the ratios. Targets: (2)/(1) <= 1.3, (3)/(2) <= 5%.
#
#   bench/rewrite_speed.sh [lmfuse binary]     (default: build/tool/lmfuse)
#   env: ROUNDS (default 1), JOBS (lmfuse -j, default 1 so both sides use one core),
#        LMFUSE_BENCH_FLAGS (compile flags; default: C++17 + Debian libtorch-dev and lmfuse include folders)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lmfuse=${1:-$root/build/tool/lmfuse}
rounds=${ROUNDS:-1}
jobs=${JOBS:-1}
clang=${CLANGXX:-clang++-19}
# The examples include the adapter's headers (<lmfuse/distributed.h>), as their build does.
read -r -a flags <<<"${LMFUSE_BENCH_FLAGS:--std=c++17 -isystem /usr/include/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=1 -I$root/torch/include -I$root/runtime/include}"

[ -x "$lmfuse" ] || { echo "rewrite_speed: no lmfuse binary at $lmfuse (build it, or pass its path)" >&2; exit 2; }
command -v "$clang" >/dev/null || { echo "rewrite_speed: $clang not found" >&2; exit 2; }
shopt -s nullglob
units=("$root"/examples/gpt/*.cpp "$root"/examples/gallery/*.cpp)
((${#units[@]})) || { echo "rewrite_speed: no translation units under examples/" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }
elapsed() { calc "$2 - $1"; }
best() { if [ -z "$1" ] || [ "$(calc "($2 < $1) ? 1 : 0")" = 1 ]; then echo "$2"; else echo "$1"; fi; }

clang_best="" first_best="" cached_best="" status=0
for ((round = 1; round <= rounds; round++)); do
  start=$(now)
  for unit in "${units[@]}"; do
    "$clang" -fsyntax-only "${flags[@]}" "$unit" 2>/dev/null || echo "rewrite_speed: clang failed on $unit" >&2
  done
  clang_best=$(best "$clang_best" "$(elapsed "$start" "$(now)")")

  rm -rf "$work/out"
  start=$(now)
  "$lmfuse" -j "$jobs" --out-dir "$work/out" --edit-root "$root/examples" --audit "$work/audit.json" --summary \
    "${units[@]}" -- "${flags[@]}" 2>"$work/first.err" || status=$?
  first_best=$(best "$first_best" "$(elapsed "$start" "$(now)")")

  start=$(now)
  "$lmfuse" -j "$jobs" --out-dir "$work/out" --edit-root "$root/examples" --audit "$work/audit.json" --summary \
    "${units[@]}" -- "${flags[@]}" 2>"$work/cached.err" || status=$?
  cached_best=$(best "$cached_best" "$(elapsed "$start" "$(now)")")
done

echo "lmfuse rewrite speed: ${#units[@]} translation units, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), best of $rounds, lmfuse -j $jobs"
printf '%-44s %10s %8s\n' "run" "seconds" "ratio"
printf '%-44s %10.2f %8s\n' "clang++-19 -fsyntax-only (each unit)" "$clang_best" "1.00"
printf '%-44s %10.2f %8.2f   (target <= 1.30 x clang)\n' "lmfuse --out-dir, empty output folder" "$first_best" \
  "$(calc "$first_best / $clang_best")"
printf '%-44s %10.2f %7.1f%%   (target <= 5%% of the first run)\n' "lmfuse --out-dir, unchanged inputs (cache)" \
  "$cached_best" "$(calc "100 * $cached_best / $first_best")"
echo "first run:  $(grep '^lmfuse:' "$work/first.err" | tail -1)"
echo "second run: $(grep '^lmfuse:' "$work/cached.err" | tail -1)"
[ "$status" = 0 ] || echo "note: lmfuse exited with status $status (see the audit's failed sites)"
