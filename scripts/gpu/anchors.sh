#!/usr/bin/env bash
# Side-by-side measurement on the GPU machine: lmfuse's torch operator beside the anchor implementations
# (torch naive, three cuBLAS GEMMs, Liger FLCE, Apple CCE and its torch.compile variant),
# in one process per ignored-label fraction, so ratios come from the same run. Builds the operator
# library (LibTorch of the machine's PyTorch, CUDA for sm_90), then runs the harness anchors_flce.py.
# Needs (git-ignored, carried): .anchors/anchors_flce.py, .anchors/liger/src/liger_kernel,
# .anchors/cce/cut_cross_entropy. Results: $OUT/ignore-<fraction>/{anchors.log,anchors.json}. The harness runs
# through scripts/gpu/anchors_lean.py, which adds two rows (the operator's low-memory mode, "lmfuse low-memory",
# and CCE's exact mode, "cce filter_eps=None"), reprints the rows with peak memory in 4 decimals and compares
# the low-memory gradients with the default's.
#   scripts/gpu/anchors.sh [fractions...]     default: 0 0.1 0.5; SHAPES (harness) defaults to 0 (Llama-3)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/anchors-out}
build=${LMFUSE_GPU_BUILD:-$root/build-gpu-anchors}
mkdir -p "$out"
cd "$root"
[ -f .anchors/anchors_flce.py ] || { echo "anchors.sh: .anchors/anchors_flce.py is missing" >&2; exit 2; }

prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
{
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DLMFUSE_TOOL=OFF \
    -DLMFUSE_TORCH=ON -DLMFUSE_CUDA=ON -DLMFUSE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_ARCHITECTURES=90 -DLMFUSE_TESTS=OFF
  cmake --build "$build" --target lmfuse_torch -j "$(nproc)"
} >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }

fractions=("$@")
[ ${#fractions[@]} -gt 0 ] || fractions=(0 0.1 0.5)
for fraction in "${fractions[@]}"; do
  mkdir -p "$out/ignore-$fraction"
  OUT="$out/ignore-$fraction" IGNORE="$fraction" SHAPES="${SHAPES:-0}" ANCHORS="$root/.anchors" PYTHONUNBUFFERED=1 \
    LMFUSE_TORCH_LIB="$build/torch/liblmfuse_torch.so" python3 scripts/gpu/anchors_lean.py .anchors/anchors_flce.py 2>&1 |
    tee "$out/ignore-$fraction/anchors.log" | tail -${ANCHORS_TAIL:-16}
done
