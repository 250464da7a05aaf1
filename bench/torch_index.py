"""PyTorch baseline for bench/index.lua, run on the same GPU in the same session.

    python3 bench/torch_index.py [--shapes 50257x768x4096,...] [--iters 50] [--csv out.csv]

For each V x D x R: a V x D float32 table and R random ids; median device time per call
(CUDA events, calls queued back to back, as bench/torch_layer_norm.py) of
  index_select   torch.index_select(table, 0, ids, out=y)
  embedding      F.embedding(ids, table)
  copy           y.copy_(src) of the same R x D bytes (the bytes-moved ceiling)
GB/s count bytes read + written (2 R D 4). --csv writes op,shape,torch_us for
bench/index.lua --baseline.
"""
import argparse
import csv
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402

DEFAULT_SHAPES = "50257x768x4096,50257x768x1024,50257x768x16384,32000x4096x4096"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv")
    args = ap.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(20261203)
    rows = []
    print("| op | V x D x rows | torch µs | torch GB/s |")
    print("|:---|:---|---:|---:|")
    for item in args.shapes.split(","):
        v, d, r = (int(x) for x in item.split("x"))
        table = torch.randn(v, d, device="cuda", generator=gen)
        ids = torch.randint(0, v, (r,), device="cuda", generator=gen)
        y = torch.empty(r, d, device="cuda")
        src = torch.randn(r, d, device="cuda", generator=gen)
        nbytes = 2 * r * d * 4
        for op, fn in (("index_select", lambda: torch.index_select(table, 0, ids, out=y)),
                       ("embedding", lambda: F.embedding(ids, table)),
                       ("copy", lambda: y.copy_(src))):
            us = device_time_us(fn, args.iters, args.warmup)
            rows.append((op, item, us))
            print(f"| {op} | {item} | {us:.1f} | {nbytes / us / 1e3:.0f} |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["op", "shape", "torch_us"])
            for row in rows:
                w.writerow([row[0], row[1], f"{row[2]:.3f}"])


if __name__ == "__main__":
    main()
