"""PyTorch float32 baseline for bench/matmul.lua, run on the same GPU in the same session.

    python3 bench/torch_matmul.py [--shapes 4096x4096x4096,...] [--iters 30] [--warmup 5]
        [--tokens 8192] [--csv torch_matmul.csv] [--extra h200|none]

TF32 is off (torch.backends.cuda.matmul.allow_tf32 = False, matmul precision "highest"),
so these are true float32 products, as lumus computes. For each shape M x K x N:
  matmul   a [M, K] @ b [K, N] into a preallocated output (torch.matmul(out=))
  linear   F.linear(x [M, K], weight [N, K], bias [N])
median device time per call by CUDA events, the calls queued behind a spin kernel so that
they run back to back (see device_time_us in torch_layer_norm.py), and TFLOP/s counting
2*M*N*K. Then the pre-norm MLP block y = x + fc2(gelu_tanh(fc1(LayerNorm(x)))) (D 768,
hidden 3072) on --tokens tokens: device time and host end-to-end time (call +
synchronize). Prints Markdown tables; --csv writes op,shape,torch_ms,... for
bench/matmul.lua --baseline. Takes ~10 s on an H200.
"""
import argparse
import csv
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_layer_norm import device_time_us  # noqa: E402  (same timing method as layer_norm)

DEFAULT_SHAPES = "4096x4096x4096,8192x768x3072,8192x3072x768"
# The extra shapes of bench/matmul.lua (its EXTRA table; keep the two in step): small-M
# products, a seeded random sweep (same 31-bit LCG), float16 and bfloat16 products.
EXTRA = {
    "h200": {"small": "1x768x50257,1x4096x4096,2x4096x4096,4x4096x4096,8x4096x4096,16x4096x4096,"
                      "64x256x256,64x768x3072",
             "sweep": 12, "sweep_max": 8192,
             "half": "4096x4096x4096,8192x768x3072,8192x3072x768,1x768x50257", "bf16": "4096x4096x4096"},
    "none": {"small": "", "sweep": 0, "sweep_max": 1, "half": "", "bf16": ""},
}
SWEEP_SEED = 20261203


def sweep_shapes(count, top_size):
    """M, K, N log-uniform in 1..top_size from a 31-bit LCG (as bench/matmul.lua)."""
    state = SWEEP_SEED

    def nxt():
        nonlocal state
        state = (state * 1103515245 + 12345) % 2147483648
        return state

    top = 0
    while 2 ** (top + 1) <= top_size:
        top += 1

    def size():
        lo = 2 ** (nxt() % (top + 1))
        return min(top_size, lo + nxt() % lo)

    out = []
    while len(out) < count:
        m, k, n = size(), size(), size()
        if m * k * n <= 2 ** 33:
            out.append((m, k, n))
    return out
D, HIDDEN = 768, 3072


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        item = item.strip()
        if item:
            m, k, n = (int(v) for v in item.lower().split("x"))
            shapes.append((m, k, n))
    return shapes


SUFFIX = {torch.float32: "", torch.float16: " f16", torch.bfloat16: " bf16"}


def bench_products(shapes, iters, warmup):
    """shapes: (m, k, n) or (m, k, n, dtype) tuples."""
    rows = []
    print("| op | M x K x N | torch ms | torch TFLOP/s | GB/s |")
    print("|:---|:---|---:|---:|---:|")
    gen = torch.Generator(device="cuda").manual_seed(20261202)
    for shape in shapes:
        m, k, n = shape[:3]
        dt = shape[3] if len(shape) > 3 else torch.float32
        a = torch.randn(m, k, device="cuda", generator=gen).to(dt)
        b = torch.randn(k, n, device="cuda", generator=gen).to(dt)
        w = torch.randn(n, k, device="cuda", generator=gen).to(dt)
        bias = (0.1 * torch.randn(n, device="cuda", generator=gen)).to(dt)
        out = torch.empty(m, n, device="cuda", dtype=dt)
        flops = 2 * m * n * k
        nbytes = (m * k + k * n + n + m * n) * a.element_size()
        for op, fn in (("matmul", lambda: torch.matmul(a, b, out=out)),
                       ("linear", lambda: F.linear(a, w, bias))):
            us = device_time_us(fn, iters, warmup)
            row = {"op": op, "shape": f"{m}x{k}x{n}{SUFFIX[dt]}", "M": m, "K": k, "N": n,
                   "torch_ms": us / 1e3, "torch_tflops": flops / (us * 1e-6) / 1e12}
            rows.append(row)
            print(f"| {op} | {row['shape']} | {row['torch_ms']:.3f} | {row['torch_tflops']:.1f} | "
                  f"{nbytes / (us * 1e-6) / 1e9:.0f} |", flush=True)
        del a, b, w, bias, out
        torch.cuda.empty_cache()
    return rows


class MLPBlock(torch.nn.Module):
    """x + fc2(gelu_tanh(fc1(LayerNorm(x)))), as examples/mlp_block.lua builds it."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(D)
        self.fc1 = torch.nn.Linear(D, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, D)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x)), approximate="tanh"))


def bench_mlp(tokens, iters, warmup):
    torch.manual_seed(1)
    block = MLPBlock().cuda()
    x = torch.randn(tokens, D, device="cuda")
    with torch.no_grad():
        us = device_time_us(lambda: block(x), iters, warmup)
        host = []
        for _ in range(iters):
            t0 = time.perf_counter()
            block(x)
            torch.cuda.synchronize()
            host.append(time.perf_counter() - t0)
    flops = 2 * 2 * tokens * D * HIDDEN
    row = {"op": "mlp", "shape": f"{tokens}x{D}x{HIDDEN}", "M": tokens, "K": D, "N": HIDDEN,
           "torch_ms": us / 1e3, "torch_tflops": flops / (us * 1e-6) / 1e12,
           "torch_host_ms": statistics.median(host) * 1e3}
    print()
    print(f"| MLP block, {tokens} tokens (LayerNorm, Linear {D}->{HIDDEN}, tanh GELU, "
          f"Linear {HIDDEN}->{D}, residual) | device ms | host end-to-end ms | TFLOP/s (matmuls) |")
    print("|:---|---:|---:|---:|")
    print(f"| torch, no_grad | {row['torch_ms']:.3f} | {row['torch_host_ms']:.3f} | "
          f"{row['torch_tflops']:.1f} |", flush=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxKxN,...")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--csv", help="results for bench/matmul.lua --baseline")
    p.add_argument("--extra", default="h200", choices=sorted(EXTRA),
                   help="small-M, random-sweep and float16/bfloat16 shapes (as bench/matmul.lua)")
    a = p.parse_args()

    if not torch.cuda.is_available():
        sys.exit("torch_matmul.py: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    props = torch.cuda.get_device_properties(0)
    print(f"# PyTorch {torch.__version__} (CUDA {torch.version.cuda}) float32 matmul, TF32 off "
          f"— {props.name}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"median of {a.iters} calls after {a.warmup} warm-up (CUDA events, calls back to back); "
          "TFLOP/s counts 2*M*N*K")
    print()
    ex = EXTRA[a.extra]
    shapes = parse_shapes(a.shapes) + parse_shapes(ex["small"])
    shapes += sweep_shapes(ex["sweep"], ex["sweep_max"])
    shapes += [s + (torch.float16,) for s in parse_shapes(ex["half"])]
    shapes += [s + (torch.bfloat16,) for s in parse_shapes(ex["bf16"])]
    print(f"random sweep: seed {SWEEP_SEED}, {ex['sweep']} shapes; f16 / bf16 shapes run in that dtype "
          "(tensor cores)")
    print()
    rows = bench_products(shapes, a.iters, a.warmup)
    rows.append(bench_mlp(a.tokens, a.iters, a.warmup))
    if a.csv:
        fields = ["op", "shape", "M", "K", "N", "torch_ms", "torch_tflops", "torch_host_ms"]
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            for row in rows:
                w.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in row.items()})


if __name__ == "__main__":
    main()
