#!/usr/bin/env bash
# The several-GPU run of the multi-process fused loss, in one call on a machine with 2 or 4 GPUs (LibTorch
# from its PyTorch, NCCL): builds lmfuse with the launcher and the measurement program, then
#   (1) the vocabulary-parallel loss at the Llama-3-8B head (N=8192, D=4096, V=128256, bf16) on 1 (a one-rank
#       NCCL group), 2 and 4 GPUs: per rank its time (forward + backward captured in a CUDA graph), the
#       one-GPU call's time, its collectives alone and its share of the three GEMMs, and the loss and
#       gradients against the one-GPU call (tests/distributed/vocab_parallel_gpu.cpp); a small shape first;
#   (2) training of examples/gpt on 2 GPUs against one GPU on the whole batch (bf16, the realistic head of
#       torch_proof.sh, prompts masked with --ignore-prefix), data parallel and vocabulary parallel: the
#       loss curves, a plot.
# Writes the CSVs, vp.md, dp.md, dp.png and the logs under $OUT (default: ./multi-gpu-out).
#   scripts/gpu/multi_gpu.sh [smoke]     smoke: the small shape only, 5 training steps
set -euo pipefail
# NVLink multicast (NVLS) stays off in this process and every rank it starts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$root/multi-gpu-out}
mode=${1:-full}
build=${LMFUSE_GPU_BUILD:-$root/build-gpu}
mkdir -p "$out"
cd "$root"

prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
catch=()
[ -f .carry/catch2/catch.hpp ] && catch=(-DLMFUSE_CATCH2_INCLUDE_DIR="$root/.carry")  # Catch2 v2, carried
{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
  nvidia-smi topo -m || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DLMFUSE_TOOL=OFF -DLMFUSE_TORCH=ON -DLMFUSE_CUDA=ON -DLMFUSE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLMFUSE_TESTS=ON "${catch[@]}"
  cmake --build "$build" --target lmfuse_torch lmfuse_launch lmfuse_vocab_parallel_gpu gpt_train -j "$(nproc)"
} >"$out/build.log" 2>&1 || { tail -60 "$out/build.log"; exit 1; }
head -8 "$out/build.log"
launch="$build/tests/distributed/lmfuse_launch"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)

# (1) vocabulary parallel: rank r on GPU r; each rank's CSV line in $out/vp-<shape>-<R>.<r>.
shapes=("small 1024 1024 32000 10")
[ "$mode" = smoke ] || shapes+=("llama3-8b 8192 4096 128256 20")
for shape in "${shapes[@]}"; do
  read -r name tokens dim vocab iters <<<"$shape"
  for ranks in 1 2 4; do
    [ "$ranks" -le "$gpus" ] || { echo "vp $name: $ranks GPUs asked, $gpus present: skipped"; continue; }
    echo "== vocabulary parallel, $name, $ranks GPU(s)"
    "$launch" --ranks "$ranks" --timeout 240 --stdout "$out/vp-$name-$ranks" -- \
      "$build/tests/distributed/lmfuse_vocab_parallel_gpu" --tokens "$tokens" --dim "$dim" --vocab "$vocab" \
      --iters "$iters" --ignore 0.1 2>"$out/vp-$name-$ranks.err" || { echo "failed:"; tail -20 "$out/vp-$name-$ranks.err"; }
    cat "$out/vp-$name-$ranks".* 2>/dev/null || true
  done
done
python3 - "$out" <<'PY' | tee "$out/vp.md"
import csv, glob, os, sys
rows = []
for path in sorted(glob.glob(os.path.join(sys.argv[1], "vp-*-*.[0-9]"))):
    for row in csv.reader(open(path)):
        if row and row[0].isdigit():
            rows.append([os.path.basename(path).split("-")[1]] + row)
print("| shape | rank | GPUs | V_rank | one GPU ms | rank ms (graph) | collectives ms | rank's 3 GEMMs ms | loss rel | grad_hidden rel | grad_weight rel |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    shape, rank, gpus, _, _, _, rows_, one, mine, coll, gemm, l, gh, gw = r
    print(f"| {shape} | {rank} | {gpus} | {rows_} | {one} | {mine} | {coll} | {gemm} | {l} | {gh} | {gw} |")
PY

# (2) training of the example: one GPU on the whole batch, then 2 ranks with half of it each (data
# parallel), then 2 ranks holding half of the head's rows each (vocabulary parallel, an untied head).
steps=50
args=(--device cuda --dtype bf16 --vocab 32000 --dim 1024 --layers 2 --heads 16 --seq 1024 --batch 8 --ignore-prefix)
[ "$mode" = smoke ] && { steps=5; args=(--device cuda --dtype bf16 --vocab 4096 --dim 256 --seq 128 --batch 8 --ignore-prefix); }
if [ "$gpus" -ge 2 ]; then
  echo "== training: ${args[*]} --steps $steps"
  "$build/examples/gpt/gpt_train" "${args[@]}" --steps "$steps" >"$out/dp-one-gpu.csv"
  for parallel in data vocab; do
    "$launch" --ranks 2 --timeout 240 --stdout "$out/$parallel-two-gpus" -- \
      "$build/examples/gpt/gpt_train" "${args[@]}" --steps "$steps" --parallel "$parallel" \
      2>"$out/$parallel-two-gpus.err" || { echo "$parallel parallel failed:"; tail -20 "$out/$parallel-two-gpus.err"; }
  done
  python3 - "$out/dp-one-gpu.csv" "$out/data-two-gpus.0" "$out/vocab-two-gpus.0" "$out/dp.png" <<'PY' | tee "$out/dp.md"
import csv, os, sys
def curve(path):
    if not os.path.exists(path):
        return None
    return [(int(r["step"]), float(r["loss"]), float(r["ms"])) for r in csv.DictReader(open(path))]
one = curve(sys.argv[1])
runs = [("data parallel", curve(sys.argv[2])), ("vocabulary parallel", curve(sys.argv[3]))]
median = lambda c: sorted(x[2] for x in c)[len(c) // 2]
print(f"examples/gpt bf16, 1 GPU on the whole batch: step-1 loss {one[0][1]:.6f}, median step {median(one):.1f} ms")
for name, two in runs:
    if not two:
        print(f"{name}, 2 GPUs: no output")
        continue
    worst = max(abs(a[1] - b[1]) / abs(a[1]) for a, b in zip(one, two))
    print(f"{name}, 2 GPUs: step-1 loss {two[0][1]:.6f}, max relative loss difference over {len(two)} steps "
          f"{worst:.2e}, median step {median(two):.1f} ms")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.plot([x[0] for x in one], [x[1] for x in one], label="1 GPU, whole batch")
    for (name, two), style in zip(runs, ["--", ":"]):
        if two:
            plt.plot([x[0] for x in two], [x[1] for x in two], style, label=f"2 GPUs, {name}")
    plt.xlabel("step"); plt.ylabel("loss"); plt.legend(); plt.savefig(sys.argv[4], dpi=120)
except ImportError:
    print("(matplotlib missing: no plot)")
PY
else
  echo "training: needs 2 GPUs, $gpus present: skipped"
fi
