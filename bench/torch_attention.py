"""PyTorch baseline for bench/attention.lua, run on the same GPU in the same session.

    python3 bench/torch_attention.py [--iters 30] [--warmup 5] [--csv torch_attention.csv]

F.scaled_dot_product_attention(q, k, v, is_causal=...) on q, k, v [B, H, T, hd]
(B 8, H 12, hd 64) for T 1024 and 4096, causal and not, float32 and float16 (PyTorch
picks its backend: flash for float16, memory-efficient for float32; TF32 is off), into a
new tensor as PyTorch returns; median device time per call by CUDA events (the calls
queued behind a spin kernel, as torch_layer_norm.py), TFLOP/s counting 4*B*H*T^2*hd
(halved when causal). Then the decode shape: one query over 1024 keys, B 1, H 12 (no
causal mask: with Tq = 1 PyTorch's top-left is_causal would leave only key 0, lumus's
bottom-right mask sees every key, so both run unmasked), in µs. Prints a Markdown table;
--csv writes case,dtype,torch_us,torch_tflops for bench/attention.lua --baseline.
"""
import argparse
import csv
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402  (same timing method as layer_norm)

B, H, HD = 8, 12, 64
DTYPES = {"float32": torch.float32, "float16": torch.float16}


def cases():
    for dtype in ("float32", "float16"):
        for t in (1024, 4096):
            for causal in (False, True):
                yield f"B{B} H{H} T{t} hd{HD}{' causal' if causal else ''}", dtype, B, H, t, t, causal
        yield "decode B1 H12 Tq1 Tk1024 hd64", dtype, 1, 12, 1, 1024, False
        yield "prefill B1 H12 T512 hd64 causal", dtype, 1, 12, 512, 512, True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--csv")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator(device="cuda").manual_seed(20261203)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print()
    print("| case | dtype | torch µs | torch TFLOP/s |")
    print("|:---|:---|---:|---:|")
    rows = []
    for name, dtype, b, h, tq, tk, causal in cases():
        dt = DTYPES[dtype]
        q = torch.randn(b, h, tq, HD, device="cuda", generator=gen).to(dt)
        k = torch.randn(b, h, tk, HD, device="cuda", generator=gen).to(dt)
        v = torch.randn(b, h, tk, HD, device="cuda", generator=gen).to(dt)
        us = device_time_us(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), args.iters, args.warmup)
        flops = 4 * b * h * tq * tk * HD / (2 if causal else 1)
        tflops = flops / (us * 1e-6) / 1e12
        print(f"| {name} | {dtype} | {us:.1f} | {tflops:.1f} |")
        rows.append({"case": name, "dtype": dtype, "torch_us": f"{us:.3f}", "torch_tflops": f"{tflops:.3f}"})
        del q, k, v
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["case", "dtype", "torch_us", "torch_tflops"])
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
