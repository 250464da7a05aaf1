"""PyTorch baseline for bench/random.lua, run on the same GPU in the same session.

    python3 bench/torch_random.py [--n FLOATS] [--iters 50] [--warmup 5] [--csv torch_random.csv]

Median device time per call (CUDA events, calls queued back to back behind a spin kernel:
device_time_us of torch_layer_norm.py) of, on n float32 values in a preallocated tensor:
  fill     t.fill_(1.5)            (the write ceiling: 4n bytes written)
  rand     t.uniform_()            (torch.rand's kernel, into t)
  randn    t.normal_()             (torch.randn's kernel, into t)
and of torch.multinomial(probs [64, 50257], 1, replacement=True) (one token per row of a
GPT-2 vocabulary). GB/s counts the 4n bytes written. --csv writes op,shape,torch_us,torch_gbs
for bench/random.lua --baseline.
"""
import argparse
import csv
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402  (same timing method)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64 << 20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv")
    a = ap.parse_args()
    torch.manual_seed(20261203)
    t = torch.empty(a.n, device="cuda")
    probs = torch.rand(64, 50257, device="cuda")
    rows = []
    print(f"# PyTorch {torch.__version__} random numbers, float32, {torch.cuda.get_device_name()}")
    print()
    print("| op | shape | torch µs | torch GB/s written |")
    print("|:---|:---|---:|---:|")
    cases = [("fill (write ceiling)", lambda: t.fill_(1.5)), ("rand", lambda: t.uniform_()),
             ("randn", lambda: t.normal_())]
    for name, fn in cases:
        us = device_time_us(fn, a.iters, a.warmup)
        gbs = 4 * a.n / (us * 1e-6) / 1e9
        rows.append({"op": name.split(" ")[0], "shape": str(a.n), "torch_us": us, "torch_gbs": gbs})
        print(f"| {name} | {a.n} | {us:.1f} | {gbs:.0f} |")
    us = device_time_us(lambda: torch.multinomial(probs, 1, replacement=True), a.iters, a.warmup)
    rows.append({"op": "multinomial", "shape": "64x50257", "torch_us": us, "torch_gbs": 4 * 64 * 50257 / (us * 1e-6) / 1e9})
    print(f"| multinomial, 1 sample per row | 64x50257 | {us:.1f} | - |")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["op", "shape", "torch_us", "torch_gbs"])
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
