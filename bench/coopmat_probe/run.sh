#!/bin/bash
# The tensor-core probe on the H200 (BENCHMARKS.md, 2026-12-04 session 8): products on
# operands in registers and fed from shared memory, through VK_NV_ and
# VK_KHR_cooperative_matrix, and shaders/matmul_coop.comp's forms through each. Run from
# the repository root after `make` (the build's matmul_coop*.spv), with glslang-khr
# (tools/glslang_khr.sh) for the KHR shaders:  bash bench/coopmat_probe/run.sh [OUTDIR]
set -e
out=${1:-build/coopmat_probe}
mkdir -p "$out"
P=bench/coopmat_probe
cc -std=c11 -O2 -Wall -Wextra -pedantic -o "$out/probe" $P/probe.c -lvulkan -lm
nv() { glslc --target-env=vulkan1.3 -O -Ishaders "$@"; }
khr() { glslang-khr -V --target-env vulkan1.3 -Ishaders '-P#extension GL_GOOGLE_include_directive : require' -DCOOP_KHR=1 "$@" >/dev/null; }
for ext in nv khr; do
  $ext $P/mma.comp -o "$out/mma_$ext.spv"
  $ext $P/smem.comp -o "$out/smem_$ext.spv"
  $ext -DCOLB=1 $P/smem.comp -o "$out/smem_colb_$ext.spv"
  $ext -DPAD=0 $P/smem.comp -o "$out/smem_pad0_$ext.spv"
done
for s in mma_nv mma_khr; do "$out/probe" mma "$out/$s.spv" 2 4 2048 2112 2>/dev/null; done
for s in smem_nv smem_khr smem_colb_nv smem_colb_khr smem_pad0_nv smem_pad0_khr; do
  "$out/probe" smem "$out/$s.spv" 2 4 2048 1056 2>/dev/null
done
for f in matmul_coop matmul_coop_khr; do   # form 1: 2 x 2 subgroups of 4 x 4 accumulators
  for t in 0 1; do "$out/probe" mm build/shaders/$f.spv 4096 4096 4096 $t 128 128 128 20 2>/dev/null; done
done
