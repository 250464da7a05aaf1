#!/usr/bin/env bash
# bench/run_h200.sh: the whole benchmark run on the GPU machine, from a build made here
# (build/lumus/core.so and .gpu/ carried along). From the repository root there:
#
#   . .gpu/setup.sh; bash bench/run_h200.sh "$OUT"
#
# Writes into the folder given (default /tmp/out):
#   run.log                     everything below, with nvidia-smi and timings per step
#   torch.md / torch.csv / torch_small.csv      bench/torch_layer_norm.py (PyTorch baseline)
#   layer_norm.md / .csv / .svg / layer_norm_small.csv   bench/layer_norm.lua
#   torch_elementwise.md / .csv bench/torch_elementwise.py (PyTorch's elementwise ops, float32/float16)
#   elementwise.md / .csv       bench/elementwise.lua (add, gelu, softmax, sum vs copy; the ops of
#                               issue 15 in float32 and float16 vs copy and PyTorch)
#   async.md, transfer.md       bench/async.lua, bench/transfer.lua
#   dtypes.md                   bench/dtypes.lua (float16/bool copies, to() conversions vs copy)
#   torch_reductions.md / .csv, reductions.md / .csv   bench/torch_reductions.py, bench/reductions.lua
#                               (reductions, softmax, log_softmax over any dim, float32/float16, topk)
#   torch_matmul.md / .csv, matmul.md / .csv   bench/torch_matmul.py, bench/matmul.lua
#   torch_random.md / .csv, random.md / .csv   bench/torch_random.py, bench/random.lua
#   torch_index.md / .csv, index.md / .csv     bench/torch_index.py, bench/index.lua
#   sweep_shapes.csv, torch_sweep.md / .csv, sweep.md / .csv, sweep-<kernel>.svg   the random
#                               shape sweep (bench/sweep.lua, bench/torch_sweep.py: LayerNorm,
#                               softmax, log_softmax, sum, max, gelu in float32 and float16;
#                               SWEEP_SEED=N repeats a run's shapes)
#   frame_torch.md / .csv, frame.md / .csv     bench/frame_torch.py, bench/frame.lua (frame times)
#   summary.md                  the Markdown of all steps, in order
#   torch_lnb.md / .csv, layer_norm_backward.md / .csv   bench/torch_layer_norm_backward.py,
#                               bench/layer_norm_backward.lua
#   frame_ops.md / .csv         bench/frame_ops.lua (device time per op of the frame)
#   torch_train.md / .csv, train.md / .csv   bench/torch_train_mlp.py, bench/train_mlp.lua
#                               (training parity, time per step, fused AdamW vs copy, memory)
#   torch_losses.md / .csv, losses.md / .csv   bench/torch_losses.py, bench/losses.lua
#                               (fused cross entropy forward/backward, index_add)
#   torch_attention.md / .csv, attention.md / .csv   bench/torch_attention.py, bench/attention.lua
#   transpose.md               bench/transpose.lua (transposing copies per form vs copy)
#   half_pack.md               bench/half_pack.lua (float16 elementwise: software vs device packing)
#   ln_ab.md / .csv             bench/ln_ab.lua (LayerNorm forward: new forms against old, forced variants)
#   ln_params_ab.md / .csv      bench/tune_ab.lua over the sweep's shapes: LayerNorm's weight and bias
#                               in place against per-call float32 copies (shifted_params)
#   ln_split2_items_ab.md / .csv  the same shapes under the two-stage split's slices of 4, 6, 8 vectors
#   ln_masked_aligned_ab.md / .csv, ln_masked_aligned_affine_ab.md / .csv   LayerNorm on neighbouring
#                               masked and aligned shapes, aligned ones also through the masked path
#   pipeline_ir.md, ir/         bench/pipeline_ir.lua: those shapes' LayerNorm pipelines, their driver
#                               statistics and (where the driver gives them) internal representations
#   clocks.csv                  nvidia-smi's SM/memory clocks, power and throttle reasons (200 ms)
#   first_call.md / .csv        bench/first_call.lua (a GPT-2 forward's first call in fresh processes:
#                               pipeline cache off, empty, loaded, loaded + warm_up; vs a warm call)
#   gpt2_weights.md, torch_gpt2.md / .csv, gpt2.md / .csv   GPT-2 small with random weights
#                               (bench/gpt2_make_weights.py into $GPT2_DIR, default /tmp/gpt2),
#                               PyTorch's logits, greedy ids and decode rate
#                               (bench/torch_gpt2.py), lumus's against them (bench/gpt2.lua)
#   gpt2_dtypes.md              bench/gpt2_decode_dtypes.lua (GPT-2 decode float16 against float32:
#                               replay rate and device time, eager host time per op)
#   gpt2_graph_ops.md           bench/gpt2_decode_graph_ops.lua (each op kind of the decode step and
#                               the whole step, eager device time against replays, float32 and float16)
#   device_checks.md            bench/device_checks.lua (memory, NaN/inf, matmul paths vs float64)
#   op_profile.md               bench/op_profile.lua over bench/profile_train_step.lua and
#                               bench/profile_gpt2.lua (device time per op; host time unwrapped)
#   train_profile.md / .csv     bench/train_profile.lua (one training step: phases, counts, per-op device time)
#   torch_train_chunked.md / .csv   bench/torch_train_mlp.py --variant chunked against torch_train.csv
#   layer_norm_half.md / .csv   bench/layer_norm_half.lua (LayerNorm on float16/bfloat16 x vs copy)
#   linear_small.md / .csv      bench/linear_small.lua (linear's kernels and fused forms, frames' device time)
# ONLY="torch_matmul matmul" runs just the steps named.
# Each step has a time limit (about 12 minutes in all; a normal run takes 3-4); a step that
# fails or times out is reported and the others still run; the exit status is non-zero if
# any failed.
set -u -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
out=${1:-/tmp/out}
mkdir -p "$out"
log="$out/run.log"
: > "$log"

# Lua 5.4 and the Vulkan loader come from .gpu/ on that machine (see shared/gpu/FACTS.md).
if ! command -v lua5.4 >/dev/null 2>&1 && [ -f .gpu/setup.sh ]; then
  # shellcheck disable=SC1091
  . .gpu/setup.sh
fi
# NVIDIA's ICD under /usr/share may point at a GLX library that cannot create instances.
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# lumus from this checkout: lua/lumus/*.lua, and lumus.core -> build/lumus/core.so.
export LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;;"
export LUA_CPATH="$root/build/?.so;;"

{
  echo "# lumus benchmark run, $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
  echo "checkout: $(git describe --always --dirty 2>/dev/null || echo 'unknown (no .git)')"
  echo "nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,pstate --format=csv,noheader 2>&1 | head -n 4)"
  echo "python3: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1)"
  echo "lua: $(lua5.4 -v 2>&1)"
  echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
} | tee -a "$log"

if [ ! -f build/lumus/core.so ]; then
  echo "build/lumus/core.so is missing: run make before taking the build along" | tee -a "$log"
  exit 2
fi
# core.so links libjansson.so.4 (safetensors headers): its Debian package (libjansson4) must
# be among the .gpu/ packages that setup.sh unpacks on that machine.
if ldd build/lumus/core.so 2>/dev/null | grep -q 'not found'; then
  echo "build/lumus/core.so cannot load, libraries missing here:" | tee -a "$log"
  ldd build/lumus/core.so | grep 'not found' | tee -a "$log"
  echo "(carry their Debian packages in .gpu/, e.g. apt-get download libjansson4)" | tee -a "$log"
  exit 2
fi

# Clocks, power and throttle reasons every 200 ms, to tell a slow phase's cause.
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,pstate,clocks_throttle_reasons.active \
    --format=csv -lms 200 > "$out/clocks.csv" 2>&1 &
  clocks_pid=$!
  trap 'kill $clocks_pid 2>/dev/null' EXIT
fi

failed=()
ran=()   # the steps run, in order, for the summary
# step NAME LIMIT_SECONDS COMMAND...: runs COMMAND under a time limit, its output to
# $out/NAME.md and the log.
step() {
  local name=$1 limit=$2
  shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  echo | tee -a "$log"
  echo "== $name ($(date -u '+%H:%M:%S UTC'), limit ${limit}s): $*" | tee -a "$log"
  local t0=$SECONDS rc=0
  ran+=("$name")
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$out/$name.md" | tee -a "$log" || rc=$?
  echo "== $name: rc=$rc, $((SECONDS - t0)) s" | tee -a "$log"
  if [ "$rc" -ne 0 ]; then failed+=("$name (rc $rc)"); fi
}

step torch 150 python3 bench/torch_layer_norm.py --iters 100 \
  --csv "$out/torch.csv" --small-csv "$out/torch_small.csv"

baseline=()
[ -s "$out/torch.csv" ] && baseline+=(--baseline "$out/torch.csv")
[ -s "$out/torch_small.csv" ] && baseline+=(--baseline-small "$out/torch_small.csv")
step layer_norm 200 lua5.4 bench/layer_norm.lua --iters 100 --warmup 10 ${baseline[@]+"${baseline[@]}"} \
  --csv "$out/layer_norm.csv" --svg "$out/layer_norm.svg" --small-csv "$out/layer_norm_small.csv"

step torch_elementwise 90 python3 bench/torch_elementwise.py --csv "$out/torch_elementwise.csv"
ew_baseline=()
[ -s "$out/torch_elementwise.csv" ] && ew_baseline+=(--baseline "$out/torch_elementwise.csv")
step elementwise 180 lua5.4 bench/elementwise.lua ${ew_baseline[@]+"${ew_baseline[@]}"} --csv "$out/elementwise.csv"
step async 45 lua5.4 bench/async.lua
step transfer 60 lua5.4 bench/transfer.lua
step dtypes 60 lua5.4 bench/dtypes.lua

step torch_reductions 120 python3 bench/torch_reductions.py --csv "$out/torch_reductions.csv"
red_baseline=()
[ -s "$out/torch_reductions.csv" ] && red_baseline+=(--torch "$out/torch_reductions.csv")
step reductions 180 lua5.4 bench/reductions.lua ${red_baseline[@]+"${red_baseline[@]}"} --csv "$out/reductions.csv"

step torch_matmul 180 python3 bench/torch_matmul.py --csv "$out/torch_matmul.csv"
mm_baseline=()
[ -s "$out/torch_matmul.csv" ] && mm_baseline+=(--baseline "$out/torch_matmul.csv")
step matmul 240 lua5.4 bench/matmul.lua ${mm_baseline[@]+"${mm_baseline[@]}"} --csv "$out/matmul.csv"

step torch_random 60 python3 bench/torch_random.py --csv "$out/torch_random.csv"
rnd_baseline=()
[ -s "$out/torch_random.csv" ] && rnd_baseline+=(--baseline "$out/torch_random.csv")
step random 90 lua5.4 bench/random.lua ${rnd_baseline[@]+"${rnd_baseline[@]}"} --csv "$out/random.csv"
step torch_index 60 python3 bench/torch_index.py --csv "$out/torch_index.csv"
ix_baseline=()
[ -s "$out/torch_index.csv" ] && ix_baseline+=(--baseline "$out/torch_index.csv")
step index 90 lua5.4 bench/index.lua ${ix_baseline[@]+"${ix_baseline[@]}"} --csv "$out/index.csv"
# The random shape sweep (bench/sweep.lua): the shapes drawn once (SWEEP_SEED, default a
# new one per run, printed), PyTorch over the same list, then lumus against the same-run
# copy with PyTorch's figures beside it (sweep.md / .csv / .svg).
sweep_seed=${SWEEP_SEED:-$(( $(date +%s) % 1000000 ))}
step sweep_shapes 60 lua5.4 bench/sweep.lua --seed "$sweep_seed" --write-shapes "$out/sweep_shapes.csv" --shapes-only
if [ -s "$out/sweep_shapes.csv" ]; then
  step torch_sweep 300 python3 bench/torch_sweep.py --shapes "$out/sweep_shapes.csv" --csv "$out/torch_sweep.csv"
  sweep_baseline=()
  [ -s "$out/torch_sweep.csv" ] && sweep_baseline+=(--baseline "$out/torch_sweep.csv")
  step sweep 420 lua5.4 bench/sweep.lua --shapes "$out/sweep_shapes.csv" ${sweep_baseline[@]+"${sweep_baseline[@]}"} \
    --csv "$out/sweep.csv" --svg "$out/sweep.svg"
  # LayerNorm's parameters read in place against per-call float32 copies, on the same shapes.
  step ln_params_ab 240 lua5.4 bench/tune_ab.lua --op layer_norm --dtypes float32,float16,bfloat16 \
    --shapes "@$out/sweep_shapes.csv" --tunes "{};{shifted_params=true}" --rounds 1 --iters 10 --csv "$out/ln_params_ab.csv"
  # ... and the two-stage split's slices of 4 (the default), 6 and 8 vectors per thread
  # (the other forms' plans do not change: their rows time the same kernel thrice).
  step ln_split2_items_ab 300 lua5.4 bench/tune_ab.lua --op layer_norm --dtypes float32,float16,bfloat16 \
    --shapes "@$out/sweep_shapes.csv" --tunes "{};{split2_items=6};{split2_items=8}" --rounds 1 --iters 10 \
    --csv "$out/ln_split2_items_ab.csv"
fi
# LayerNorm's masked rows: neighbouring shapes of D % 4 != 0 and == 0, each plain and with
# the aligned rows forced through the masked path (masked_aligned), without and with
# weight and bias: what the masking's instructions cost apart from the rows' alignment.
ln_pairs=4043x65482,4096x65536,2050x110459,2050x110460,54047x871,54047x872,269578x95,269578x96
step ln_masked_aligned_ab 240 lua5.4 bench/tune_ab.lua --op layer_norm_plain --dtypes float32,float16 \
  --shapes "$ln_pairs" --tunes "{};{masked_aligned=true}" --rounds 1 --iters 10 --csv "$out/ln_masked_aligned_ab.csv"
step ln_masked_aligned_affine_ab 240 lua5.4 bench/tune_ab.lua --op layer_norm --dtypes float32,float16 \
  --shapes "$ln_pairs" --tunes "{};{masked_aligned=true};{shifted_params=true};{masked_aligned=true,shifted_params=true}" \
  --rounds 1 --iters 10 --csv "$out/ln_masked_aligned_affine_ab.csv"
# The same pipelines' driver statistics and internal representations (stderr; files under ir/).
mkdir -p "$out/ir"
step pipeline_ir 180 env LUMUS_PIPELINE_CACHE=off LUMUS_PIPELINE_STATS=1 LUMUS_PIPELINE_IR="$out/ir" \
  lua5.4 bench/pipeline_ir.lua
# A model in a frame (issue 21): PyTorch eager and CUDA graph, then lumus eager and replayed.
step frame_torch 180 python3 bench/frame_torch.py --csv "$out/frame_torch.csv"
step frame 300 lua5.4 bench/frame.lua --csv "$out/frame.csv"
# LayerNorm backward: PyTorch's kernel, then lumus's against it and the copy ceiling.
step torch_lnb 120 python3 bench/torch_layer_norm_backward.py --csv "$out/torch_lnb.csv"
lnb_baseline=()
[ -s "$out/torch_lnb.csv" ] && lnb_baseline+=(--baseline "$out/torch_lnb.csv")
step layer_norm_backward 150 lua5.4 bench/layer_norm_backward.lua ${lnb_baseline[@]+"${lnb_baseline[@]}"} \
  --csv "$out/layer_norm_backward.csv"
# Losses and index_add (issue 16): PyTorch, then lumus against it.
step torch_losses 120 python3 bench/torch_losses.py --csv "$out/torch_losses.csv"
loss_baseline=()
[ -s "$out/torch_losses.csv" ] && loss_baseline+=(--baseline "$out/torch_losses.csv")
step losses 180 lua5.4 bench/losses.lua ${loss_baseline[@]+"${loss_baseline[@]}"} --csv "$out/losses.csv"

# Device time per op of the frame, each op chained on its predecessor and independent.
step frame_ops 120 lua5.4 bench/frame_ops.lua --csv "$out/frame_ops.csv"
# The first-call hitch (issue 17): fresh processes with the pipeline cache off, empty,
# loaded and loaded + warm_up, against a warm forward in the same process.
step first_call 300 lua5.4 bench/first_call.lua --csv "$out/first_call.csv"
# Training (issue 16): PyTorch's 200 AdamW steps of the MLP block from bench/train_data.lua's
# weights and data, then lumus's from the same ones against it (loss per step within 1e-4,
# time per step), the fused AdamW kernel vs copy, and 10,000 steps with flat memory.
step torch_train 240 python3 bench/torch_train_mlp.py --csv "$out/torch_train.csv"
train_baseline=()
[ -s "$out/torch_train.csv" ] && train_baseline+=(--baseline "$out/torch_train.csv")
step train 420 lua5.4 bench/train_mlp.lua ${train_baseline[@]+"${train_baseline[@]}"} --csv "$out/train.csv"

# Fused attention: PyTorch's F.scaled_dot_product_attention, then lumus's against it.
step torch_attention 120 python3 bench/torch_attention.py --csv "$out/torch_attention.csv"
attn_baseline=()
[ -s "$out/torch_attention.csv" ] && attn_baseline+=(--baseline "$out/torch_attention.csv")
step attention 180 lua5.4 bench/attention.lua ${attn_baseline[@]+"${attn_baseline[@]}"} --csv "$out/attention.csv"
# Transposing copies in each form of lumus.tune.transpose, % of the same-run copy.
step transpose 120 lua5.4 bench/transpose.lua
# float16 elementwise results packed in software vs by the device (lumus.tune.elementwise).
step half_pack 90 lua5.4 bench/half_pack.lua
# The semantics checks a GPU needs (NaN/inf, memory, float16 packing, pow's ulps).
step device_checks 120 lua5.4 bench/device_checks.lua
# LayerNorm forward A/B (issue 18): the planner's new forms against the old choices and
# forced variants, on the headline shapes and the sweep's shapes (its file, else its seed).
ab_shapes=(--seed "$sweep_seed")
[ -s "$out/sweep_shapes.csv" ] && ab_shapes=(--shapes "$out/sweep_shapes.csv")
step ln_ab 240 lua5.4 bench/ln_ab.lua "${ab_shapes[@]}" --csv "$out/ln_ab.csv"
# GPT-2 small (issue 17): weights made once by transformers, PyTorch's logits / greedy ids /
# decode rate, then lumus's checked against them (the large files stay in $GPT2_DIR).
gpt2_dir=${GPT2_DIR:-/tmp/gpt2}
step gpt2_weights 240 python3 bench/gpt2_make_weights.py --out "$gpt2_dir"
step torch_gpt2 240 python3 bench/torch_gpt2.py --dir "$gpt2_dir" --csv "$out/torch_gpt2.csv"
step gpt2 420 lua5.4 bench/gpt2.lua --dir "$gpt2_dir" --csv "$out/gpt2.csv"
step gpt2_dtypes 120 lua5.4 bench/gpt2_decode_dtypes.lua
step gpt2_graph_ops 120 lua5.4 bench/gpt2_decode_graph_ops.lua
# Device time per op (bench/op_profile.lua): a training step of the MLP block and GPT-2
# prefill/decode, each op synchronized and timed alone, then the same unwrapped.
step op_profile 300 bash -c 'for s in profile_train_step profile_gpt2; do
  lua5.4 bench/op_profile.lua bench/$s.lua && NOWRAP=1 lua5.4 bench/op_profile.lua bench/$s.lua || exit 1; done'

# The LÖVE example's model (examples/love) without LÖVE: frame cost replayed and eager.
step love_pattern 120 lua5.4 bench/love_pattern.lua --csv "$out/love_pattern.csv"
# Training step profile (issue 16): host time per phase, counts per step, device time per op.
step train_profile 240 lua5.4 bench/train_profile.lua --csv "$out/train_profile.csv"
# PyTorch against itself (issue 16's parity yardstick): the same 200 steps in two micro-batches
# (other float32 summation orders), compared step by step with torch_train's CSV.
torch_base=()
[ -s "$out/torch_train.csv" ] && torch_base+=(--compare "$out/torch_train.csv")
step torch_train_chunked 240 python3 bench/torch_train_mlp.py --variant chunked --adamw-numel 1048576 \
  ${torch_base[@]+"${torch_base[@]}"} --csv "$out/torch_train_chunked.csv"
# LayerNorm forward on float16/bfloat16 x of 128 MiB against copy (issue 18: >= 90%).
step layer_norm_half 120 lua5.4 bench/layer_norm_half.lua --csv "$out/layer_norm_half.csv"
# Device checks: memory, NaN/inf semantics, matmul on every path and dtype vs float64.
# Linear for small models (issue 21): each kernel and fused form per shape, and whole
# frames unfused / with fused activations / as layer_norm_linear blocks (device time).
step linear_small 240 lua5.4 bench/linear_small.lua --csv "$out/linear_small.csv"

# One Markdown file with every step's output.
{
  head -n 6 "$log"
  for name in ${ran[@]+"${ran[@]}"}; do
    [ -f "$out/$name.md" ] && { echo; cat "$out/$name.md"; }
  done
} > "$out/summary.md"

echo | tee -a "$log"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED steps: ${failed[*]}" | tee -a "$log"
  exit 1
fi
echo "all steps passed; results in $out" | tee -a "$log"
