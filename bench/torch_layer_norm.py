"""PyTorch baseline for bench/layer_norm.lua, run on the same GPU in the same session.

    python3 bench/torch_layer_norm.py [--shapes 8192x768,...] [--iters 100] [--warmup 10]
        [--csv torch.csv] [--small-csv torch_small.csv] [--small-reps 2000]

For each shape R x D (float32, weight and bias):
  torch_us         median F.layer_norm time per call by CUDA events. The stream is first
                   held by a spin kernel (torch.cuda._sleep) while all event pairs and calls
                   are queued, so each pair brackets one kernel running back to back, not
                   the host's launch overhead: the same thing lumus.gpu_time measures (two
                   timestamps around one dispatch in a busy command buffer).
  torch_us_synced  the same, but synchronizing after every call (an idle GPU waits for each
                   launch, so small shapes include launch latency): for comparison with
                   figures measured that way.
  torch_gbs        4 * (2*R*D + 2*D + 2*R) bytes / torch_us (as bench/layer_norm.lua counts)
  torch_copy_gbs   y.copy_(x) ceiling, 2 * 4*R*D bytes / median time (same method)
Small calls (1x4096, 64x768), host-timed with time.perf_counter:
  sync_us          one call + torch.cuda.synchronize(), median of --small-reps
  chained_us       1000 dependent calls then one synchronize, per call (median of 5 runs)
  device_us        device time per call, as torch_us
"""
import argparse
import csv
import statistics
import sys
import time

import torch
import torch.nn.functional as F

DEFAULT_SHAPES = ("8192x768,8192x1024,4096x4096,2048x8192,"
                  "32768x1024,65536x768,16384x4096,4096x65536")
EPS = 1e-5


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        item = item.strip()
        if item:
            r, d = item.lower().split("x")
            shapes.append((int(r), int(d)))
    return shapes


def ln_bytes(r, d):
    """Bytes LayerNorm must move: x read, y written, weight/bias read, mean/invstd written."""
    return 4 * (2 * r * d + 2 * d + 2 * r)


def _hold_stream(seconds):
    """Queue a spin kernel that keeps the GPU busy while the host queues the timed work."""
    if hasattr(torch.cuda, "_sleep"):
        # ~2 GHz SM clock; the exact length does not matter, only that it outlasts queueing.
        torch.cuda._sleep(int(seconds * 2e9))


def device_time_us(fn, iters, warmup):
    """Median device time of fn in µs: event pairs around each call, queued behind a spin
    kernel so that the calls run back to back and launch overhead is not counted."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    _hold_stream(0.002 + iters * 50e-6)   # generous: ~50 µs of host time per call
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends))


def synced_time_us(fn, iters, warmup):
    """Median per-call event time with a synchronize after every call (the GPU idles
    between calls, so each pair also spans the launch)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def bench_shapes(shapes, iters, warmup):
    rows = []
    print("| shape | torch µs | torch GB/s | torch µs (sync each) | copy µs | copy GB/s |")
    print("|:---|---:|---:|---:|---:|---:|")
    gen = torch.Generator(device="cuda").manual_seed(20261202)
    for r, d in shapes:
        x = torch.randn(r, d, device="cuda", generator=gen)
        w = 1 + 0.1 * torch.randn(d, device="cuda", generator=gen)
        b = 0.1 * torch.randn(d, device="cuda", generator=gen)
        y = torch.empty_like(x)

        def ln():
            # PyTorch's CUDA LayerNorm kernel writes mean and rstd as well as y (like lumus),
            # also when called through F.layer_norm, which returns only y.
            return F.layer_norm(x, (d,), w, b, EPS)

        t = device_time_us(ln, iters, warmup)
        t_sync = synced_time_us(ln, min(iters, 50), 2)
        t_copy = device_time_us(lambda: y.copy_(x), iters, warmup)
        row = {
            "shape": f"{r}x{d}", "rows": r, "D": d,
            "torch_us": t, "torch_gbs": ln_bytes(r, d) / t / 1e3,
            "torch_copy_gbs": 2 * 4 * r * d / t_copy / 1e3,
            "torch_us_synced": t_sync, "torch_copy_us": t_copy,
        }
        rows.append(row)
        print(f"| {row['shape']} | {t:.2f} | {row['torch_gbs']:.0f} | {t_sync:.2f} | "
              f"{t_copy:.2f} | {row['torch_copy_gbs']:.0f} |", flush=True)
        del x, w, b, y
        torch.cuda.empty_cache()
    return rows


def bench_small(reps, warmup=200):
    rows = []
    print()
    print(f"| small call | call + synchronize µs (median of {reps}) | "
          "chained µs/call (1000 calls, one sync) | device µs |")
    print("|:---|---:|---:|---:|")
    for r, d in [(1, 4096), (64, 768)]:
        x = torch.randn(r, d, device="cuda")
        w = torch.ones(d, device="cuda")
        b = torch.zeros(d, device="cuda")
        for _ in range(warmup):
            F.layer_norm(x, (d,), w, b, EPS)
            torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            F.layer_norm(x, (d,), w, b, EPS)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        chained = []
        for _ in range(5):
            y = x
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(1000):
                y = F.layer_norm(y, (d,), w, b, EPS)
            torch.cuda.synchronize()
            chained.append((time.perf_counter() - t0) / 1000)
        dev = device_time_us(lambda: F.layer_norm(x, (d,), w, b, EPS), 200, 10)
        row = {"shape": f"{r}x{d}", "rows": r, "D": d,
               "sync_us": statistics.median(ts) * 1e6,
               "chained_us": statistics.median(chained) * 1e6,
               "device_us": dev}
        rows.append(row)
        print(f"| {row['shape']} | {row['sync_us']:.1f} | {row['chained_us']:.1f} | "
              f"{dev:.2f} |", flush=True)
    return rows


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.3f}" if isinstance(v, float) else v) for k, v in row.items()})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default=DEFAULT_SHAPES)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--csv", help="per-shape results (shape,rows,D,torch_us,torch_gbs,torch_copy_gbs,...)")
    p.add_argument("--small-csv", help="small-call results (shape,rows,D,sync_us,chained_us,device_us)")
    p.add_argument("--small-reps", type=int, default=2000)
    p.add_argument("--skip-small", action="store_true")
    a = p.parse_args()

    if not torch.cuda.is_available():
        sys.exit("torch_layer_norm.py: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    print(f"# PyTorch {torch.__version__} (CUDA {torch.version.cuda}) F.layer_norm, "
          f"float32 — {props.name}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"median of {a.iters} calls after {a.warmup} warm-up; GB/s counts x read + y written "
          "+ weight/bias read + mean/invstd written")
    if not hasattr(torch.cuda, "_sleep"):
        print("warning: torch.cuda._sleep missing: device times include launch gaps")
    print()
    rows = bench_shapes(parse_shapes(a.shapes), a.iters, a.warmup)
    if a.csv:
        write_csv(a.csv, ["shape", "rows", "D", "torch_us", "torch_gbs", "torch_copy_gbs",
                          "torch_us_synced", "torch_copy_us"], rows)
    if not a.skip_small:
        small = bench_small(a.small_reps)
        if a.small_csv:
            write_csv(a.small_csv, ["shape", "rows", "D", "sync_us", "chained_us", "device_us"], small)


if __name__ == "__main__":
    main()
