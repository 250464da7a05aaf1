"""PyTorch baseline for bench/reductions.lua, run on the same GPU in the same session.

    python3 bench/torch_reductions.py [--n ELEMENTS] [--iters 30] [--warmup 5] [--csv FILE]

The same cases as bench/reductions.lua (sum, mean, var, max with indices, argmax,
softmax, log_softmax over every element, the last and a non-last dimension of n-element
tensors, float32 and float16), into preallocated outputs where PyTorch takes out=;
median device time by CUDA events (device_time_us of torch_layer_norm.py), GB/s counting
each input element read once and each output written once, and % of PyTorch's own copy
(Tensor.copy_) of the same tensor. --csv writes op,dtype,shape,dim,gbs,pct_of_copy for
bench/reductions.lua --torch.
"""
import argparse
import csv
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402

OPS = ["sum", "mean", "var", "max", "argmax", "softmax", "log_softmax"]


def shapes(n):
    side = int(math.floor(math.sqrt(n) + 0.5))
    return [
        ((n,), [None]),
        ((n // 4096, 4096), [2, 1]),
        ((side, n // side), [2, 1]),
        ((64, n // 64), [2, 1]),
        ((n // 64, 64), [2, 1]),
        ((64, n // (64 * 1024), 1024), [2]),
    ]


def call(op, x, dim):
    d = None if dim is None else dim - 1      # lumus dims are 1-based
    if op in ("softmax", "log_softmax"):
        return getattr(torch, op)(x, dim=d)
    if op == "var":
        return x.var() if d is None else x.var(dim=d)
    if op == "max":
        return x.max() if d is None else torch.max(x, dim=d)
    if op == "argmax":
        return x.argmax() if d is None else x.argmax(dim=d)
    return getattr(x, op)() if d is None else getattr(x, op)(dim=d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64 << 20)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv")
    args = ap.parse_args()
    n = args.n
    rows = []
    print(f"# PyTorch {torch.__version__} reductions and softmax on {torch.cuda.get_device_name()}, n = {n >> 20}M elements")
    print("median device time (CUDA events); GB/s count every input read once and every output written once "
          "(indices as int64, PyTorch's); % of Tensor.copy_ of the same tensor.")
    print()
    print("| op | dtype | shape | dim | µs | GB/s | % of copy |")
    print("|---|---|---|---|--:|--:|--:|")
    g = torch.Generator(device="cuda").manual_seed(20261203)
    for dt_name, dt in (("float32", torch.float32), ("float16", torch.float16)):
        size = torch.tensor([], dtype=dt).element_size()
        flat = (torch.randn(n, device="cuda", generator=g) * 3).to(dt)
        for shape, dims in shapes(n):
            x = flat.view(shape)
            dst = torch.empty_like(x)
            tcopy = device_time_us(lambda: dst.copy_(x), args.iters, args.warmup)
            copy_gbs = 2 * size * n / tcopy / 1e3
            del dst
            for dim in dims:
                for op in OPS:
                    if op in ("softmax", "log_softmax") and dim is None:
                        continue
                    res = call(op, x, dim)
                    t = device_time_us(lambda: call(op, x, dim), args.iters, args.warmup)
                    if op in ("softmax", "log_softmax"):
                        nbytes = 2 * size * n
                    elif op == "max" and dim is not None:
                        nbytes = size * n + res.values.numel() * (size + 8)
                    elif op == "argmax":
                        nbytes = size * n + res.numel() * 8
                    else:
                        nbytes = size * n + res.numel() * size
                    gbs = nbytes / t / 1e3
                    shape_name = "x".join(str(s) for s in shape)
                    dim_name = "all" if dim is None else str(dim)
                    rows.append((op, dt_name, shape_name, dim_name, gbs, 100 * gbs / copy_gbs))
                    print(f"| {op} | {dt_name} | {shape_name} | {dim_name} | {t:.1f} | {gbs:.0f} | {100 * gbs / copy_gbs:.1f} |")
        del flat
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "dtype", "shape", "dim", "gbs", "pct_of_copy"])
            for r in rows:
                w.writerow([r[0], r[1], r[2], r[3], f"{r[4]:.1f}", f"{r[5]:.1f}"])


if __name__ == "__main__":
    main()
