"""PyTorch baseline for bench/elementwise.lua's elementwise cases, on the same GPU in the same
run: the same ops on the same sizes, float32 and float16, with a copy ceiling of its own.

    python3 bench/torch_elementwise.py [--n ELEMENTS] [--iters 50] [--warmup 5] [--csv FILE]

For each op: median device time per call by CUDA events (device_time_us of
torch_layer_norm.py), GB/s counting every input read once and the output written once,
and % of torch's own copy (x.copy_ into a preallocated tensor) of the same dtype. The CSV
(op,dtype,us,gbs,pct_of_copy) is bench/elementwise.lua --baseline's input; op names
match its rows.
"""
import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402


def cases(x, y, out, mask, bout, col):
    """name, bytes moved per element of x (in units of its element size; bool 1 byte
    counted as a fraction), the call."""
    es = x.element_size()
    xb = x * 2500.0  # sin's large-argument row, made once as lumus's
    return [
        ("copy (ceiling)", 2, lambda: out.copy_(x)),
        ("add", 3, lambda: torch.add(x, y, out=out)),
        ("exp", 2, lambda: torch.exp(x, out=out)),
        ("log", 2, lambda: torch.log(x, out=out)),
        ("tanh", 2, lambda: torch.tanh(x, out=out)),
        ("sigmoid", 2, lambda: torch.sigmoid(x, out=out)),
        ("silu", 2, lambda: torch.ops.aten.silu.out(x, out=out)),
        ("pow 1.7", 2, lambda: torch.pow(x, 1.7, out=out)),
        ("maximum", 3, lambda: torch.maximum(x, y, out=out)),
        ("clamp", 2, lambda: torch.clamp(x, -1, 1, out=out)),
        ("gt (bool out)", 2 + 1 / es, lambda: torch.gt(x, y, out=bout)),
        ("where", 3 + 1 / es, lambda: torch.where(mask, x, y, out=out)),
        ("add [R,1] column", 2, lambda: torch.add(x, col, out=out)),
        ("sin", 2, lambda: torch.sin(x, out=out)),
        ("cos", 2, lambda: torch.cos(x, out=out)),
        ("sin, |x| up to 1e4", 2, lambda: torch.sin(xb, out=out)),
        ("expm1", 2, lambda: torch.expm1(x, out=out)),
        ("log1p", 2, lambda: torch.log1p(x, out=out)),
        ("exp2", 2, lambda: torch.exp2(x, out=out)),
        ("log2", 2, lambda: torch.log2(x, out=out)),
        ("log10", 2, lambda: torch.log10(x, out=out)),
        ("tan", 2, lambda: torch.tan(x, out=out)),
        ("atan", 2, lambda: torch.atan(x, out=out)),
        ("atan2", 3, lambda: torch.atan2(x, y, out=out)),
        ("floor", 2, lambda: torch.floor(x, out=out)),
        ("round", 2, lambda: torch.round(x, out=out)),
        ("sign", 2, lambda: torch.sign(x, out=out)),
        ("square", 2, lambda: torch.square(x, out=out)),
        ("reciprocal", 2, lambda: torch.reciprocal(x, out=out)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64 << 20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv")
    args = ap.parse_args()
    d = 4096
    r = args.n // d
    rows = []
    print(f"# PyTorch {torch.__version__} elementwise ops, {torch.cuda.get_device_name()}")
    print(f"{r}x{d} elements; median device time of {args.iters} calls (CUDA events); "
          "% of copy against torch's copy of the same dtype in this run.\n")
    print("| op | dtype | µs | GB/s | % of copy |")
    print("|:---|:---|---:|---:|---:|")
    gen = torch.Generator(device="cuda").manual_seed(20261202)
    for dtype in (torch.float32, torch.float16):
        x = torch.randn(r, d, device="cuda", generator=gen).abs().to(dtype) + 0.1
        y = torch.randn(r, d, device="cuda", generator=gen).to(dtype)
        out = torch.empty(r, d, device="cuda", dtype=dtype)
        bout = torch.empty(r, d, device="cuda", dtype=torch.bool)
        mask = y > 0
        col = torch.randn(r, 1, device="cuda", generator=gen).to(dtype)
        es = x.element_size()
        copy_gbs = None
        name = str(dtype).replace("torch.", "")
        for op, units, fn in cases(x, y, out, mask, bout, col):
            us = device_time_us(fn, args.iters, args.warmup)
            gbs = units * es * args.n / (us * 1e-6) / 1e9
            if copy_gbs is None:
                copy_gbs = gbs
            pct = 100 * gbs / copy_gbs
            rows.append({"op": op, "dtype": name, "us": us, "gbs": gbs, "pct_of_copy": pct})
            print(f"| {op} | {name} | {us:.1f} | {gbs:.0f} | {pct:.1f} |")
        del x, y, out, bout, mask, col
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["op", "dtype", "us", "gbs", "pct_of_copy"])
            w.writeheader()
            for row in rows:
                w.writerow(row)


if __name__ == "__main__":
    main()
