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
  copy_<dtype>_us, copy_<dtype>_gbs   y.copy_(x) with x in that dtype, 2 x bytes of x,
                 same run: PyTorch's own ceiling for the kernels of that dtype
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


SIZE = {torch.float32: 4, torch.float16: 2}


def layer_norm_kernel(r, d, x):
    """F.layer_norm with weight and bias in x's dtype; x read, y written, weight/bias read,
    float32 mean/invstd written (as bench/sweep.lua counts)."""
    w = (torch.randn(d, device="cuda") * 0.1 + 1.0).to(x.dtype)
    b = (torch.randn(d, device="cuda") * 0.1).to(x.dtype)
    es = SIZE[x.dtype]
    return (lambda: F.layer_norm(x, (d,), w, b, EPS)), es * (2 * r * d + 2 * d) + 8 * r


def softmax_kernel(fn):
    """torch.softmax / torch.log_softmax over the last dim (out of place, as models call
    them: the caching allocator hands back the same block each call)."""
    def prepare(r, d, x):
        return (lambda: fn(x, 1)), 2 * SIZE[x.dtype] * r * d
    return prepare


def sum_kernel(r, d, x):
    y = torch.empty(r, device="cuda", dtype=x.dtype)
    return (lambda: torch.sum(x, 1, out=y)), SIZE[x.dtype] * (r * d + r)


def max_kernel(r, d, x):
    # PyTorch's indices are int64; the bytes counted are lumus's (int32), as bench/sweep.lua.
    v = torch.empty(r, device="cuda", dtype=x.dtype)
    i = torch.empty(r, device="cuda", dtype=torch.int64)
    return (lambda: torch.max(x, 1, out=(v, i))), SIZE[x.dtype] * (r * d + r) + 4 * r


def gelu_kernel(r, d, x):
    return (lambda: F.gelu(x)), 2 * SIZE[x.dtype] * r * d


# name -> (dtype, prepare(rows, D, x) -> (call, bytes moved)), by bench/sweep.lua's names.
KERNELS = {
    "layer_norm": (torch.float32, layer_norm_kernel),
    "softmax": (torch.float32, softmax_kernel(torch.softmax)),
    "log_softmax": (torch.float32, softmax_kernel(torch.log_softmax)),
    "sum": (torch.float32, sum_kernel),
    "max": (torch.float32, max_kernel),
    "gelu": (torch.float32, gelu_kernel),
    "layer_norm_float16": (torch.float16, layer_norm_kernel),
    "softmax_float16": (torch.float16, softmax_kernel(torch.softmax)),
    "sum_float16": (torch.float16, sum_kernel),
    "max_float16": (torch.float16, max_kernel),
    "gelu_float16": (torch.float16, gelu_kernel),
}


def read_shapes(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    seed = rows[0].get("seed") if rows else None
    return seed, [(int(r["rows"]), int(r["D"])) for r in rows]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", required=True, help="seed,rows,D CSV from bench/sweep.lua --write-shapes")
    p.add_argument("--csv", help="results: rows,D,copy_<dtype>_us/_gbs,<kernel>_us,<kernel>_gbs,<kernel>_pct")
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
    dtypes = sorted({KERNELS[k][0] for k in names}, key=lambda t: -SIZE[t])
    head = ["rows", "D", "MiB"] + [f"copy {str(dt).replace('torch.', '')} GB/s" for dt in dtypes]
    for k in names:
        head += [f"{k} µs", f"{k} GB/s", f"{k} % of copy"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---:" for _ in head) + "|")
    out = []
    for r, d in shapes:
        row = {"rows": r, "D": d}
        try:
            x32 = torch.randn(r, d, device="cuda")
            xs = {torch.float32: x32}
            cells = [str(r), str(d), f"{4 * r * d / 2**20:.1f}"]
            copy_gbs = {}
            for dt in dtypes:
                x = xs.setdefault(dt, x32.to(dt))
                y = torch.empty_like(x)
                t_copy = device_time_us(lambda: y.copy_(x), a.iters, a.warmup)
                name = str(dt).replace("torch.", "")
                row[f"copy_{name}_us"] = t_copy
                copy_gbs[dt] = row[f"copy_{name}_gbs"] = 2 * SIZE[dt] * r * d / t_copy / 1e3
                cells.append(f"{copy_gbs[dt]:.0f}")
                del y
            for k in names:
                dt, prepare = KERNELS[k]
                fn, nbytes = prepare(r, d, xs[dt])
                t = device_time_us(fn, a.iters, a.warmup)
                row[f"{k}_us"] = t
                row[f"{k}_gbs"] = nbytes / t / 1e3
                row[f"{k}_pct"] = 100 * row[f"{k}_gbs"] / copy_gbs[dt]
                cells += [f"{t:.2f}", f"{row[f'{k}_gbs']:.0f}", f"{row[f'{k}_pct']:.1f}"]
                del fn
            del x32, xs, x
        except RuntimeError as e:   # out of memory on a smaller GPU: report and go on
            cells = [str(r), str(d), "error: " + str(e).splitlines()[0]]
        torch.cuda.empty_cache()
        print("| " + " | ".join(cells) + " |", flush=True)
        out.append(row)
    if a.csv:
        fields = ["rows", "D"]
        for dt in dtypes:
            name = str(dt).replace("torch.", "")
            fields += [f"copy_{name}_us", f"copy_{name}_gbs"]
        for k in names:
            fields += [f"{k}_us", f"{k}_gbs", f"{k}_pct"]
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            for row in out:
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


if __name__ == "__main__":
    main()
