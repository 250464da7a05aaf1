"""Host instructions per frame and per op on the frame path, counted by callgrind.

    python3 bench/frame_callgrind.py [--modes nn,frame,replay] [--frames 20,120] [--small] [--keep DIR]

Runs bench/frame_profile.lua under valgrind --tool=callgrind twice per mode (with the two
frame counts given) and takes the difference, so setup (pipeline compiles, allocation of
the model) cancels out and what is left is the cost of the extra frames. Only the main
thread counts (lavapipe runs the kernels on its own threads). Prints, per frame and per op
(the ops the frame records, as frame_profile.lua reports them), the instructions
inclusive of:
  op calls      the C op functions (argument checks, output checks, recording)
  record        lm_record_dispatch: pipeline lookup, hazards, commands into the buffer
  hazards       lm_stream_hazards (barrier decisions), of record
  driver cmds   vkCmd* calls (the driver recording), of record
  tensor checks lm_test_tensor, luaL_testudata (every tensor argument and method call)
  alloc         malloc/free/realloc (Lua tables and strings, driver)
  submit        vkQueueSubmit;  wait  vkWaitSemaphores/vkGetSemaphoreCounterValue
  read back     m_to_bytes
  replay        g_replay
  Lua and rest  the total less the op calls, read back and replay: the Lua code of the
                nn modules and the benchmark loop, and Lua/C call overhead
Needs valgrind and callgrind_annotate; takes a few minutes on lavapipe.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GROUPS = [
    ("op calls", r"^(lm_op_\w+|l_gelu|l_relu)$"),
    ("record", r"^lm_record_dispatch$"),
    ("hazards", r"^lm_stream_hazards$"),
    ("driver cmds", r"^vkCmd\w+$"),
    ("tensor checks", r"^(luaL_testudata|lm_test_tensor)$"),
    ("alloc", r"^(malloc|free|realloc|calloc)$"),
    ("submit", r"^vkQueueSubmit$"),
    ("wait", r"^(vkWaitSemaphores|vkGetSemaphoreCounterValue)$"),
    ("read back", r"^m_to_bytes$"),
    ("replay", r"^g_replay$"),
]


def run(mode, n, outdir, reuse=False, small=False):
    out = os.path.join(outdir, f"cg.{mode}.{n}")
    if reuse:
        return out + "-01" if os.path.exists(out + "-01") else out
    env = dict(os.environ, LUA_PATH=f"{ROOT}/lua/?.lua;{ROOT}/lua/?/init.lua;;", LUA_CPATH=f"{ROOT}/build/?.so;;")
    r = subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}",
                        "lua5.4", os.path.join(ROOT, "bench/frame_profile.lua"), str(n), mode] + (["small"] if small else []),
                       env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    with open(out + ".ops", "w") as f:
        f.write(r.stdout)
    main = out + "-01"
    return main if os.path.exists(main) else out


def ops_of(outdir, mode, n):
    """The frame's op count that frame_profile.lua printed ("ops N"), else 25."""
    try:
        with open(os.path.join(outdir, f"cg.{mode}.{n}.ops")) as f:
            m = re.search(r"ops (\d+)", f.read())
            return int(m.group(1)) if m else 25
    except OSError:
        return 25


def inclusive(path):
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    total, funcs = 0, {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if not m:
            continue
        v = int(m.group(1).replace(",", ""))
        name = m.group(2).strip()
        if "PROGRAM TOTALS" in name:
            total = v
            continue
        name = re.sub(r"\s*\[.*\]$", "", name).split(":")[-1]
        name = re.sub(r"'\d+$", "", name)   # recursion levels count once (the outermost)
        if "'" not in m.group(2):
            funcs[name] = max(funcs.get(name, 0), v)
    return total, funcs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="nn,frame,replay")
    ap.add_argument("--frames", default="20,120")
    ap.add_argument("--small", action="store_true",
                    help="linear's small-model kernel, so the frame runs layer_norm_linear as on the H200")
    ap.add_argument("--keep", help="folder for the callgrind files (default: a new temporary one)")
    ap.add_argument("--reuse", action="store_true", help="read the files already in --keep instead of running")
    a = ap.parse_args()
    n0, n1 = (int(v) for v in a.frames.split(","))
    outdir = a.keep or tempfile.mkdtemp(prefix="frame_cg.")
    os.makedirs(outdir, exist_ok=True)
    print(f"# host instructions per frame (callgrind, main thread, {n1} - {n0} frames)")
    print()
    print("| mode | what | per frame | per op |")
    print("|---|---|---:|---:|")
    for mode in a.modes.split(","):
        t0, f0 = inclusive(run(mode, n0, outdir, a.reuse, a.small))
        t1, f1 = inclusive(run(mode, n1, outdir, a.reuse, a.small))
        frames = n1 - n0
        ops = ops_of(outdir, mode, n1)
        total = (t1 - t0) / frames
        rows = [("total", total)]
        for label, pat in GROUPS:
            v = sum(f1.get(k, 0) - f0.get(k, 0) for k in f1 if re.match(pat, k)) / frames
            rows.append((label, v))
        d = dict(rows)
        rows.append(("Lua and rest", total - d["op calls"] - d["read back"] - d["replay"]))
        for label, v in rows:
            if v >= 1 or label == "total":
                print(f"| {mode} | {label} | {v:,.0f} | {v / ops:,.0f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
