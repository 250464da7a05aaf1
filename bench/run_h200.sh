#!/usr/bin/env bash
# The benchmark run on the GPU machine, from the repository root, after a build here:
#   . .gpu/setup.sh; bash bench/run_h200.sh "$OUT"
# Writes logs, CSV and SVG into the folder given (default /tmp/lumus-bench).
set -o pipefail
out="${1:-/tmp/lumus-bench}"
mkdir -p "$out"
export LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;"
# NVIDIA's ICD under /usr/share may point at a GLX library that cannot create instances.
[ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
python3 bench/torch_layer_norm.py --csv "$out/torch.csv" 2>&1 | tee "$out/torch.md"
lua5.4 bench/layer_norm.lua --baseline "$out/torch.csv" --csv "$out/layer_norm.csv" --svg "$out/layer_norm.svg" 2>&1 | tee "$out/layer_norm.md"
lua5.4 bench/async.lua 2>&1 | tee "$out/async.md"
lua5.4 bench/transfer.lua 2>&1 | tee "$out/transfer.md"
