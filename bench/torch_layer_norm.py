"""PyTorch baseline for bench/layer_norm.lua, run on the same GPU in the same session.

python3 bench/torch_layer_norm.py [--shapes 8192x768,...] [--iters 50] [--csv out.csv]
Median F.layer_norm float32 time by CUDA events; GB/s with lumus's byte count
(x read + y written + weight/bias + mean/invstd); a y.copy_(x) ceiling; and small calls
(1x4096, 64x768): per call + synchronize, and chained without synchronizing.
"""
import argparse, statistics, time
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--shapes", default="8192x768,8192x1024,4096x4096,2048x8192,32768x1024,65536x768,16384x4096,4096x65536")
p.add_argument("--iters", type=int, default=50)
p.add_argument("--csv", default=None)
a = p.parse_args()

def cuda_time_us(fn, iters):
    for _ in range(5):
        fn()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)

print(f"# PyTorch {torch.__version__} F.layer_norm on {torch.cuda.get_device_name()}")
print("| shape | torch µs | torch GB/s | torch copy GB/s |")
print("|---|---|---|---|")
rows = []
for shape in a.shapes.split(","):
    R, D = map(int, shape.split("x"))
    x = torch.randn(R, D, device="cuda"); w = torch.randn(D, device="cuda"); b = torch.randn(D, device="cuda")
    y = torch.empty_like(x)
    t = cuda_time_us(lambda: F.layer_norm(x, (D,), w, b, 1e-5), a.iters)
    tc = cuda_time_us(lambda: y.copy_(x), a.iters)
    byt = 4 * (2 * R * D + 2 * D + 2 * R)
    rows.append((shape, R, D, t, byt / t / 1e3, 8 * R * D / tc / 1e3))
    print(f"| {shape} | {t:.2f} | {byt / t / 1e3:.1f} | {8 * R * D / tc / 1e3:.1f} |")
    del x, y
if a.csv:
    with open(a.csv, "w") as f:
        f.write("shape,rows,D,torch_us,torch_gbs,torch_copy_gbs\n")
        for r in rows:
            f.write(f"{r[0]},{r[1]},{r[2]},{r[3]:.2f},{r[4]:.1f},{r[5]:.1f}\n")

print("\n| small call | per call + synchronize µs | chained, per call µs |")
print("|---|---|---|")
for R, D in [(1, 4096), (64, 768)]:
    x = torch.randn(R, D, device="cuda")
    for _ in range(100):
        F.layer_norm(x, (D,)); torch.cuda.synchronize()
    n = 2000
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); F.layer_norm(x, (D,)); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
    y = x
    t0 = time.perf_counter()
    for _ in range(1000):
        y = F.layer_norm(y, (D,))
    torch.cuda.synchronize()
    chained = (time.perf_counter() - t0) / 1000
    print(f"| {R}x{D} | {statistics.median(ts) * 1e6:.1f} | {chained * 1e6:.1f} |")
