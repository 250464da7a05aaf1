"""PyTorch baseline for bench/frame.lua, run on the same GPU in the same session.

    python3 bench/frame_torch.py [--frames 2000] [--warmup 200] [--shapes 64x256x8,128x512x16]
        [--csv frame_torch.csv]

The same frame as bench/frame.lua: for shape RxDxL, L x (LayerNorm(D), Linear(D, D),
GELU tanh) on an R x D float32 input, then Linear(D, 1), then the R floats of the head
copied to the host (.cpu(), which waits for the device). TF32 is off (float32 products, as
lumus computes). Modes, each --frames frames host-timed one by one after --warmup:
  eager       model(x) then .cpu(), under torch.inference_mode()
  cuda_graph  the forward captured once with torch.cuda.graph, g.replay() then .cpu()
Reports median, p90, p99 and max frame time in microseconds (Markdown; --csv writes
shape,mode,ops,median_us,p90_us,p99_us,max_us as bench/frame.lua does).
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def percentile(ts, p):
    s = sorted(ts)
    k = max(1, min(len(s), -(-p * len(s) // 100)))
    return s[int(k) - 1]


def build(rows, width, depth):
    torch.manual_seed(21)
    mods = []
    for _ in range(depth):
        mods += [nn.LayerNorm(width), nn.Linear(width, width), nn.GELU(approximate="tanh")]
    mods.append(nn.Linear(width, 1))
    model = nn.Sequential(*mods).cuda().eval()
    x = torch.randn(rows, width, device="cuda")
    return model, x


def time_frames(frame, frames):
    ts = []
    for _ in range(frames):
        t0 = time.perf_counter()
        frame()
        ts.append(time.perf_counter() - t0)
    return ts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--shapes", default="64x256x8,128x512x16")
    ap.add_argument("--csv")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    print("# frame (PyTorch): L x (LayerNorm, Linear DxD, GELU tanh) on R x D, Linear D->1, R floats to the host")
    print()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    print(f"frames {args.frames} (after {args.warmup} warm-up), host-timed with time.perf_counter; microseconds")
    print()
    print("| frame RxDxL | mode | ops | median | p90 | p99 | max | p99/median |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    csv_rows = []
    for shape in args.shapes.split(","):
        rows, width, depth = (int(v) for v in shape.lower().split("x"))
        model, x = build(rows, width, depth)
        ops = 3 * depth + 1
        with torch.inference_mode():
            def eager():
                return model(x).cpu()

            ref = eager()
            # CUDA graph capture: warm up on a side stream first, as PyTorch documents.
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = model(x)

            def replay():
                g.replay()
                return y.cpu()

            for name, frame in (("eager", eager), ("cuda_graph", replay)):
                for _ in range(args.warmup):
                    frame()
                torch.cuda.synchronize()
                ts = time_frames(frame, args.frames)
                out = frame()
                if not torch.equal(out, ref):
                    print(f"WARNING: {shape} {name}: result differs from eager (max abs diff "
                          f"{(out - ref).abs().max().item():.3g})")
                us = [t * 1e6 for t in ts]
                med, p90, p99, mx = statistics.median(us), percentile(us, 90), percentile(us, 99), max(us)
                print(f"| {shape} | {name} | {ops} | {med:.1f} | {p90:.1f} | {p99:.1f} | {mx:.1f} | {p99 / med:.2f} |")
                csv_rows.append(f"{shape},{name},{ops},{med:.2f},{p90:.2f},{p99:.2f},{mx:.2f}")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("shape,mode,ops,median_us,p90_us,p99_us,max_us\n" + "\n".join(csv_rows) + "\n")


if __name__ == "__main__":
    main()
