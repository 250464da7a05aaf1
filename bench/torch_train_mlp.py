"""PyTorch side of the training parity benchmark (bench/train_mlp.lua), same GPU, same run.

    python3 bench/torch_train_mlp.py [--tokens 8192] [--steps 200] [--lr 1e-3]
        [--weight-decay 0.01] [--adamw-numel 67108864] [--csv torch_train.csv]
        [--variant chunked --chunks 2] [--compare torch_train.csv]

The pre-norm MLP block (LayerNorm(768), Linear 768 -> 3072, tanh GELU, Linear 3072 -> 768,
residual) on `tokens` tokens, float32, TF32 off, trained for `steps` AdamW steps
(torch.optim.AdamW's default implementation) on the MSE against a fixed target. The
initial weights, x and the target come from bench/train_data.lua (run here with lua5.4
into a temporary file), the same values bench/train_mlp.lua makes. Per step: the loss
and the step's time (zero_grad, forward, backward, optimizer step, then
torch.cuda.synchronize(); host clock). The CSV has step,loss,ms; bench/train_mlp.lua
--baseline reads it and reports the loss difference per step.

--variant chunked: the same training computed in --chunks micro-batches of the tokens
(forward and backward per chunk, each chunk's mean loss weighted by its share, gradients
accumulated; the loss reported is the weighted sum): the same mathematics with other but
equally valid float32 summation orders (the weight and bias gradients are sums over the
tokens, now taken per chunk and then added). --compare FILE reads another run's CSV and
prints the relative loss difference per step against it (max, where, steps above 1e-4):
PyTorch against itself, the yardstick for what float32 rounding alone does to 200 AdamW
steps (bench/train_mlp.lua's parity target).

Also: the device time of one AdamW step over one float32 parameter of --adamw-numel
elements (foreach and fused implementations), with bytes moved counted as
bench/train_mlp.lua does (param r/w, grad r, exp_avg r/w, exp_avg_sq r/w: 28 bytes per
element), against a copy of the same bytes.
"""
import argparse
import math
import os
import statistics
import subprocess
import tempfile
import time

import torch

D, HIDDEN = 768, 3072


def load_data(tokens):
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "train_data.bin")
        subprocess.run(["lua5.4", os.path.join(here, "train_data.lua"), "--tokens", str(tokens), "--out", path],
                       check=True)
        raw = open(path, "rb").read()
    flat = torch.frombuffer(bytearray(raw), dtype=torch.float32)
    sizes = [("fc1.weight", (HIDDEN, D)), ("fc1.bias", (HIDDEN,)), ("fc2.weight", (D, HIDDEN)), ("fc2.bias", (D,)),
             ("x", (tokens, D)), ("target", (tokens, D))]
    out, at = {}, 0
    for name, shape in sizes:
        n = math.prod(shape)
        out[name] = flat[at:at + n].reshape(shape).clone()
        at += n
    assert at == flat.numel(), (at, flat.numel())
    return out


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(D)
        self.fc1 = torch.nn.Linear(D, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, D)

    def forward(self, x):
        h = self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x)), approximate="tanh"))
        return x + h


def device_us(fn, iters=50, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--adamw-numel", type=int, default=64 * 2**20)
    ap.add_argument("--csv")
    ap.add_argument("--variant", choices=["default", "chunked"], default="default")
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--compare")
    a = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    data = load_data(a.tokens)
    model = Block().to(dev)
    with torch.no_grad():
        model.fc1.weight.copy_(data["fc1.weight"])
        model.fc1.bias.copy_(data["fc1.bias"])
        model.fc2.weight.copy_(data["fc2.weight"])
        model.fc2.bias.copy_(data["fc2.bias"])
    x, target = data["x"].to(dev), data["target"].to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)

    print(f"## PyTorch training: pre-norm MLP block, {a.tokens} tokens, float32 (TF32 off), "
          f"{a.steps} AdamW steps (lr {a.lr}, weight_decay {a.weight_decay}), MSE loss"
          + (f", in {a.chunks} micro-batches" if a.variant == "chunked" else ""))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    rows = []
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if a.variant == "chunked":
            loss = 0.0
            for xc, tc in zip(x.chunk(a.chunks), target.chunk(a.chunks)):
                part = torch.nn.functional.mse_loss(model(xc), tc) * (xc.shape[0] / a.tokens)
                part.backward()
                loss = loss + part.detach()
        else:
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
        opt.step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        rows.append((step, loss.item(), ms))
    times = [r[2] for r in rows[5:]] or [r[2] for r in rows]
    print(f"loss: step 1 {rows[0][1]:.7g}, step {a.steps} {rows[-1][1]:.7g}")
    print(f"median time per training step (forward + backward + AdamW, synchronized): {statistics.median(times):.3f} ms")

    # One AdamW step over one big parameter, against a copy of the same bytes.
    n = a.adamw_numel
    p = torch.randn(n, device=dev, requires_grad=True)
    p.grad = torch.randn(n, device=dev)
    moved = 28 * n
    src = torch.empty(moved // 8, device=dev)       # a copy reads and writes: 2 * 4 * (moved / 8)
    dst = torch.empty_like(src)
    copy_us = device_us(lambda: dst.copy_(src))
    print()
    print(f"| AdamW step, {n} float32 elements | µs | GB/s (28 B/element) | % of copy |")
    print("|---|---|---|---|")
    print(f"| copy of the same bytes | {copy_us:.1f} | {moved / copy_us / 1e3:.0f} | 100 |")
    for label, kw in (("foreach", {"foreach": True}), ("fused", {"fused": True})):
        try:
            o = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, **kw)
            us = device_us(o.step)
            print(f"| torch AdamW {label} | {us:.1f} | {moved / us / 1e3:.0f} | {100 * copy_us / us:.1f} |")
        except Exception as e:  # an implementation this torch lacks
            print(f"| torch AdamW {label} | - ({e}) | | |")

    if a.compare:
        base = {}
        with open(a.compare) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) == 3 and parts[0].isdigit():
                    base[int(parts[0])] = float(parts[1])
        worst, at, above = 0.0, 0, 0
        for s, l, _ in rows:
            if s in base:
                d = abs(l - base[s]) / abs(base[s])
                if d > worst:
                    worst, at = d, s
                above += d > 1e-4
        print()
        print(f"vs {a.compare}: max relative loss difference {worst:.3g} at step {at} "
              f"({above} of {len(rows)} steps above 1e-4)")

    if a.csv:
        with open(a.csv, "w") as f:
            f.write("step,loss,ms\n")
            for s, l, ms in rows:
                f.write(f"{s},{l!r},{ms:.4f}\n")


if __name__ == "__main__":
    main()
