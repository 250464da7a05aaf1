"""PyTorch baseline for bench/losses.lua, run on the same GPU in the same session.

    python3 bench/torch_losses.py [--ce 4096x50257,...] [--ia 65x384x4096,...] [--csv out.csv]

ce forward   F.cross_entropy(x, t, reduction="none")
ce backward  the backward of F.cross_entropy(x, t, reduction="sum") (torch.autograd.grad)
index_add    table.index_add_(0, ids, src) (PyTorch's atomics: not deterministic)
Median device time per call; --csv writes op,shape,torch_us for bench/losses.lua --baseline.
"""
import argparse
import csv
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ce", default="4096x50257,8192x32000,16384x1024,65536x10")
    ap.add_argument("--ia", default="65x384x4096,1024x768x4096,50257x768x1024")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--csv")
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(20261203)
    rows = []
    print("| op | shape | torch µs |")
    print("|:---|:---|---:|")
    for item in args.ce.split(","):
        n, c = (int(v) for v in item.split("x"))
        x = torch.randn(n, c, device="cuda", generator=gen).requires_grad_(True)
        t = torch.randint(0, c, (n,), device="cuda", generator=gen)
        us = device_time_us(lambda: F.cross_entropy(x, t, reduction="none"), args.iters, args.warmup)
        rows.append(("ce forward", item, us))
        loss = F.cross_entropy(x, t, reduction="sum")
        us_b = device_time_us(lambda: torch.autograd.grad(loss, x, retain_graph=True), args.iters, args.warmup)
        rows.append(("ce backward", item, us_b))
    for item in args.ia.split(","):
        v, d, r = (int(x) for x in item.split("x"))
        table = torch.zeros(v, d, device="cuda")
        src = torch.randn(r, d, device="cuda", generator=gen)
        ids = torch.randint(0, v, (r,), device="cuda", generator=gen)
        rows.append(("index_add", item, device_time_us(lambda: table.index_add_(0, ids, src), args.iters, args.warmup)))
    for op, shape, us in rows:
        print(f"| {op} | {shape} | {us:.1f} |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "shape", "torch_us"])
            for op, shape, us in rows:
                w.writerow([op, shape, f"{us:.3f}"])


if __name__ == "__main__":
    main()
