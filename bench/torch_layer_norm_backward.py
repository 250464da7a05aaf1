"""PyTorch baseline for bench/layer_norm_backward.lua, on the same GPU in the same run.

    python3 bench/torch_layer_norm_backward.py [--shapes 8192x768,...] [--sweep 12]
        [--seed 20261203] [--iters 100] [--warmup 10] [--rounds 3] [--csv torch_lnb.csv]

For each shape R x D (float32, weight and bias): the median device time of
aten.native_layer_norm_backward (dx, dweight, dbias from the saved mean and rstd, the
kernels autograd runs for F.layer_norm's backward), by CUDA events queued behind a spin
kernel as bench/torch_layer_norm.py does; torch_gbs counts x and dy read and dx written
(3 * 4*R*D bytes), as the Lua side does; torch_copy_gbs is y.copy_(x), 2 * 4*R*D bytes.
As on the Lua side, the backward and the copy are timed in turn --rounds times (3), and
each takes the median of its rounds' medians.
--sweep N adds the same N random shapes as bench/layer_norm_backward.lua (the generator
below is lumus.reference.rng, splitmix64, reproduced).
"""
import argparse
import csv
import math
import statistics

import torch

DEFAULT_SHAPES = "8192x768,4096x4096,16384x4096,65536x768,4096x65536"
MASK = (1 << 64) - 1


class Rng:
    """lumus.reference.rng(seed).uniform, bit for bit."""

    def __init__(self, seed):
        self.state = seed & MASK

    def uniform(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z = z ^ (z >> 31)
        return (z >> 11) * 2.0 ** -53


def sweep_shapes(n, seed):
    rng = Rng(seed)
    out = []
    for _ in range(n):
        d = math.floor(2 ** (6 + 10 * rng.uniform()))
        if rng.uniform() < 0.75:
            d = max(4, d - d % 4)
        total = 2 ** (20 + 8 * rng.uniform())
        r = max(1, math.floor(total / d))
        out.append((r, d))
    return out


def device_time_us(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(int((0.002 + iters * 50e-6) * 2e9))
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--sweep", type=int, default=12)
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--csv")
    a = ap.parse_args()
    shapes = [tuple(int(v) for v in s.lower().split("x")) for s in a.shapes.split(",") if s.strip()]
    shapes += sweep_shapes(a.sweep, a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(a.seed)
    rows = []
    print("| shape | torch µs | torch GB/s | copy GB/s | % of copy |")
    print("|:---|---:|---:|---:|---:|")
    for r, d in shapes:
        x = torch.randn(r, d, device="cuda", generator=gen)
        dy = torch.randn(r, d, device="cuda", generator=gen)
        w = 1 + 0.1 * torch.randn(d, device="cuda", generator=gen)
        b = torch.zeros(d, device="cuda")
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [d], w, b, 1e-5)

        def bwd():
            return torch.ops.aten.native_layer_norm_backward(dy, x, [d], mean, rstd, w, b, [True, True, True])

        y = torch.empty_like(x)
        ts, tcs = [], []
        for _ in range(max(1, a.rounds)):
            ts.append(device_time_us(bwd, a.iters, a.warmup))
            tcs.append(device_time_us(lambda: y.copy_(x), a.iters, a.warmup))
        t, tc = statistics.median(ts), statistics.median(tcs)
        gbs = 3 * 4 * r * d / (t * 1e-6) / 1e9
        copy_gbs = 2 * 4 * r * d / (tc * 1e-6) / 1e9
        name = f"{r}x{d}"
        print(f"| {name} | {t:.1f} | {gbs:.0f} | {copy_gbs:.0f} | {100 * gbs / copy_gbs:.1f} |")
        rows.append({"shape": name, "torch_us": t, "torch_gbs": gbs, "torch_copy_gbs": copy_gbs})
        del x, dy, y, mean, rstd
        torch.cuda.empty_cache()
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            wr.writeheader()
            wr.writerows(rows)


if __name__ == "__main__":
    main()
