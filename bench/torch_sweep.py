"""PyTorch over bench/sweep.lua's shape list, on the same GPU in the same session.

    python3 bench/torch_sweep.py --shapes sweep_shapes.csv [--csv torch_sweep.csv]
        [--kernels layer_norm,...] [--iters 30] [--warmup 5]

The shape list is the CSV bench/sweep.lua writes with --write-shapes (seed,rows,D): the
shapes are drawn in one place, so both sides run the same ones. For each shape and
kernel (KERNELS below, by the names bench/sweep.lua uses):
  <kernel>_us    median device time per call (CUDA events, calls queued behind a spin
                 kernel: bench/torch_layer_norm.py's device_time_us)
  <kernel>_gbs   the bytes the kernel must move (as bench/sweep.lua counts them) / time
  <kernel>_pct   100 * <kernel>_gbs / copy_gbs
  copy_us, copy_gbs   y.copy_(x), 2 x bytes of x, same run: PyTorch's own ceiling
"""
import argparse
import csv
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402

EPS = 1e-5


def layer_norm_kernel(r, d, x):
    """F.layer_norm with weight and bias; x read, y written, weight/bias read,
    mean/invstd written (as bench/sweep.lua counts)."""
    w = torch.randn(d, device="cuda") * 0.1 + 1.0
    b = torch.randn(d, device="cuda") * 0.1
    return (lambda: F.layer_norm(x, (d,), w, b, EPS)), 4 * (2 * r * d + 2 * d + 2 * r)


# name -> prepare(rows, D, x) -> (call, bytes moved). Add softmax, sum, ... here.
KERNELS = {
    "layer_norm": layer_norm_kernel,
}


def read_shapes(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    seed = rows[0].get("seed") if rows else None
    return seed, [(int(r["rows"]), int(r["D"])) for r in rows]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", required=True, help="seed,rows,D CSV from bench/sweep.lua --write-shapes")
    p.add_argument("--csv", help="results: rows,D,copy_us,copy_gbs,<kernel>_us,<kernel>_gbs,<kernel>_pct")
    p.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated names")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    names = [k for k in a.kernels.split(",") if k]
    for k in names:
        if k not in KERNELS:
            p.error(f"unknown kernel {k} (known: {', '.join(KERNELS)})")
    seed, shapes = read_shapes(a.shapes)
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"# PyTorch shape sweep — {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"seed {seed}, {len(shapes)} shapes from {a.shapes}; median of {a.iters} device-time samples")
    print()
    head = ["rows", "D", "MiB", "copy GB/s"]
    for k in names:
        head += [f"{k} µs", f"{k} GB/s", f"{k} % of copy"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---:" for _ in head) + "|")
    out = []
    for r, d in shapes:
        row = {"rows": r, "D": d}
        try:
            x = torch.randn(r, d, device="cuda")
            y = torch.empty_like(x)
            t_copy = device_time_us(lambda: y.copy_(x), a.iters, a.warmup)
            row["copy_us"] = t_copy
            row["copy_gbs"] = 2 * 4 * r * d / t_copy / 1e3
            cells = [str(r), str(d), f"{4 * r * d / 2**20:.1f}", f"{row['copy_gbs']:.0f}"]
            for k in names:
                fn, nbytes = KERNELS[k](r, d, x)
                t = device_time_us(fn, a.iters, a.warmup)
                row[f"{k}_us"] = t
                row[f"{k}_gbs"] = nbytes / t / 1e3
                row[f"{k}_pct"] = 100 * row[f"{k}_gbs"] / row["copy_gbs"]
                cells += [f"{t:.2f}", f"{row[f'{k}_gbs']:.0f}", f"{row[f'{k}_pct']:.1f}"]
                del fn
            del x, y
        except RuntimeError as e:   # out of memory on a smaller GPU: report and go on
            cells = [str(r), str(d), "error: " + str(e).splitlines()[0]]
        torch.cuda.empty_cache()
        print("| " + " | ".join(cells) + " |", flush=True)
        out.append(row)
    if a.csv:
        fields = ["rows", "D", "copy_us", "copy_gbs"]
        for k in names:
            fields += [f"{k}_us", f"{k}_gbs", f"{k}_pct"]
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            for row in out:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


if __name__ == "__main__":
    main()
