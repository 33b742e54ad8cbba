"""Compares the per-step CSVs (step,loss,ms,peak_mem) of the plain and the lmfuse-rewritten trainer:
prints the summary table (markdown) and draws both loss curves and the peak memory per step to a PNG.

    python3 plot_proof.py plain.csv fused.csv proof.png --model NAME --dims TEXT
"""
import argparse
import csv
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return {key: [float(r[key]) for r in rows] for key in ("step", "loss", "ms", "peak_mem")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plain")
    parser.add_argument("fused")
    parser.add_argument("png")
    parser.add_argument("--model", default="")
    parser.add_argument("--dims", default="")
    parser.add_argument("--logits-bytes", type=float, default=0, help="size of one step's logits, for the table")
    args = parser.parse_args()
    plain, fused = read(args.plain), read(args.fused)
    assert plain["step"] == fused["step"], "the two runs have different steps"

    diffs = [abs(a - b) for a, b in zip(plain["loss"], fused["loss"])]
    gib = 1 << 30
    # Step times without the first steps (allocator warm-up, cuBLAS heuristics).
    warm = slice(min(5, len(plain["ms"]) - 1), None)
    table = [
        "| model | dims | peak mem plain | peak mem fused | step plain (median) | step fused (median) "
        "| step-1 loss plain / fused | step-1 diff | max loss diff | memory saved | logits size |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {args.model} | {args.dims} | {max(plain['peak_mem']) / gib:.2f} GiB | {max(fused['peak_mem']) / gib:.2f} GiB "
        f"| {statistics.median(plain['ms'][warm]):.1f} ms | {statistics.median(fused['ms'][warm]):.1f} ms "
        f"| {plain['loss'][0]:.5f} / {fused['loss'][0]:.5f} | {diffs[0]:.2e} | {max(diffs):.2e} "
        f"| {(max(plain['peak_mem']) - max(fused['peak_mem'])) / gib:.2f} GiB | {args.logits_bytes / gib:.2f} GiB |",
    ]
    print("\n".join(table))

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.plot(plain["step"], plain["loss"], label="plain LibTorch", linewidth=2)
    left.plot(fused["step"], fused["loss"], label="lmfuse rewritten", linestyle="--")
    left.set_xlabel("step")
    left.set_ylabel("training loss")
    left.set_title("loss per step")
    left.legend()
    right.plot(plain["step"], [m / gib for m in plain["peak_mem"]], label="plain LibTorch")
    right.plot(fused["step"], [m / gib for m in fused["peak_mem"]], label="lmfuse rewritten")
    right.set_xlabel("step")
    right.set_ylabel("peak GPU memory in the step (GiB)")
    right.set_title("peak memory per step")
    right.legend()
    fig.suptitle(f"{args.model}  {args.dims}")
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)


if __name__ == "__main__":
    main()
