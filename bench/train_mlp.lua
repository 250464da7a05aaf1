-- bench/train_mlp.lua: training with lumus (nn, autograd, optim) against PyTorch in the
-- same run, and the fused AdamW kernel against a copy.
--
--   lua5.4 bench/train_mlp.lua [--tokens 8192] [--steps 200] [--lr 1e-3] [--weight-decay 0.01]
--       [--baseline torch_train.csv] [--csv train.csv] [--adamw-numel N] [--memory-steps N]
--
-- 1. Parity: the pre-norm MLP block (LayerNorm(768), Linear 768 -> 3072, tanh GELU,
--    Linear 3072 -> 768, residual; float32) on `tokens` tokens, from the initial weights
--    and data of bench/train_data.lua (bench/torch_train_mlp.py starts from the same
--    values), trained `steps` AdamW steps on the MSE against the target. Per step the
--    loss and the step's time (zero_grad, forward, loss, backward, optimizer step, then
--    lumus.synchronize(); host clock, as the PyTorch side measures). With --baseline
--    (the PyTorch CSV) it reports the relative loss difference per step, max and where,
--    against the 1e-4 target, and exits 1 past it.
-- 2. The fused AdamW step (lumus.adam_step_, one dispatch) over one parameter of
--    --adamw-numel elements: median device time (lumus.gpu_time), GB/s counting 28 bytes
--    per element (param r/w, grad r, exp_avg r/w, exp_avg_sq r/w) and % of a same-run
--    copy moving the same bytes.
-- 3. Memory: --memory-steps steps (default 10000; 300 on a CPU device) of the
--    examples/train_mlp.lua classifier (3 spirals, MLP 2 -> 64 -> 64 -> 3, AdamW),
--    lumus.memory().in_use read after a full garbage collection every tenth of the run;
--    exits 1 if it grew after the first tenth.
-- LUA_PATH/LUA_CPATH as in bench/run_h200.sh.
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local train_data = require "train_data"

local USAGE = [==[
usage: lua5.4 bench/train_mlp.lua [--tokens N] [--steps N] [--lr X] [--weight-decay X]
  [--baseline torch_train.csv] [--csv FILE] [--adamw-numel N] [--memory-steps N]]==]
local known = {}
for name in ("tokens steps lr weight-decay baseline csv adamw-numel memory-steps"):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, {}, USAGE)

local lumus = common.load_lumus()
local dev_line, dev = common.device_line(lumus)
local cpu = dev.kind == "cpu"
local nn, optim = lumus.nn, lumus.optim

local TOKENS = common.int_opt(opt.tokens, cpu and 64 or 8192)
local STEPS = common.int_opt(opt.steps, cpu and 10 or 200)
local LR = tonumber(opt.lr or "1e-3")
local WD = tonumber(opt.weight_decay or "0.01")
local ADAMW_N = common.int_opt(opt.adamw_numel, cpu and 2 ^ 20 or 64 * 2 ^ 20)
local MEM_STEPS = common.int_opt(opt.memory_steps, cpu and 300 or 10000)
local TARGET = 1e-4

-- mean((a - b)^2) over every element: lumus.mse_loss where the build has it.
local mse = lumus.mse_loss or function(a, b)
  local d = lumus.sub(a, b)
  return lumus.mean(lumus.mul(d, d):reshape({ d:numel() }))
end

print(("## lumus training: pre-norm MLP block, %d tokens, float32, %d AdamW steps (lr %g, weight_decay %g), MSE loss")
  :format(TOKENS, STEPS, LR, WD))
print(dev_line)

---------------------------------------------------------------------------------------
-- 1. parity and time per step
local block, x, target = train_data.block(lumus, TOKENS)
collectgarbage("collect")
local opt_w = optim.AdamW(block:parameters(), { lr = LR, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = WD })

local losses, times = {}, {}
for step = 1, STEPS do
  local t0 = lumus.clock()
  opt_w:zero_grad()
  local loss = mse(block(x), target)
  loss:backward()
  opt_w:step()
  lumus.synchronize()
  times[step] = lumus.clock() - t0
  losses[step] = loss:to_table()[1]
end
local steady = {}
for i = math.min(6, STEPS), STEPS do steady[#steady + 1] = times[i] end
print(("loss: step 1 %.7g, step %d %.7g"):format(losses[1], STEPS, losses[STEPS]))
print(("median time per training step (forward + backward + AdamW, synchronized): %.3f ms")
  :format(common.median(steady) * 1e3))

local failed = false
if opt.baseline then
  local f = io.open(opt.baseline)
  if not f then
    print("(no PyTorch baseline at " .. opt.baseline .. ")")
  else
    local base = {}
    for line in f:lines() do
      local s, l, ms = line:match("^(%d+),([^,]+),([^,]+)$")
      if s then base[tonumber(s)] = { loss = tonumber(l), ms = tonumber(ms) } end
    end
    f:close()
    local worst, at, above, tms = 0, 0, 0, {}
    for s = 1, STEPS do
      local b = base[s]
      if b then
        local d = math.abs(losses[s] - b.loss) / math.abs(b.loss)
        if d > worst then worst, at = d, s end
        if d > TARGET then above = above + 1 end
        if s >= math.min(6, STEPS) then tms[#tms + 1] = b.ms end
      end
    end
    print(("vs PyTorch: max relative loss difference %.3g at step %d (target %g; %d of %d steps above it)%s")
      :format(worst, at, TARGET, above, STEPS, above > 0 and "  FAIL" or "  ok"))
    if #tms > 0 then
      local mine, theirs = common.median(steady) * 1e3, common.median(tms)
      print(("time per step: lumus %.3f ms, PyTorch %.3f ms (lumus / PyTorch %.2f)"):format(mine, theirs, mine / theirs))
    end
    failed = failed or above > 0
  end
end
if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("step,loss,ms\n")
  for s = 1, STEPS do f:write(("%d,%.9g,%.4f\n"):format(s, losses[s], times[s] * 1e3)) end
  f:close()
end
block:free()
opt_w = nil
collectgarbage("collect")

---------------------------------------------------------------------------------------
-- 2. the fused AdamW step against a copy of the same bytes
do
  local n = ADAMW_N
  local p, g = lumus.randn({ n }), lumus.randn({ n })
  local m, v = lumus.zeros({ n }), lumus.zeros({ n })
  local moved = 28 * n
  local src, dst = lumus.empty({ moved // 8 }), lumus.empty({ moved // 8 })
  lumus.fill(src, 1)
  local step = 0
  local t_adam = common.device_time(lumus, function()
    step = step + 1
    lumus.adam_step_(p, g, { exp_avg = m, exp_avg_sq = v, step = step, lr = 1e-3, weight_decay = 0.01, decoupled = true })
  end, 50, 3)
  local t_copy = common.device_time(lumus, function() lumus.copy(src, { out = dst }) end, 50, 3)
  print()
  print(("| fused AdamW step, %d float32 elements | µs | GB/s (28 B/element) | %% of copy |"):format(n))
  print("|---|---|---|---|")
  print(("| copy of the same bytes | %.1f | %.0f | 100 |"):format(t_copy * 1e6, moved / t_copy / 1e9))
  print(("| lumus.adam_step_ (AdamW) | %.1f | %.0f | %.1f |"):format(t_adam * 1e6, moved / t_adam / 1e9, 100 * t_copy / t_adam))
  for _, t in ipairs { p, g, m, v, src, dst } do t:free() end
end

---------------------------------------------------------------------------------------
-- 3. memory over many steps of the classifier of examples/train_mlp.lua
do
  local ref = require "lumus.reference"
  local gen = ref.rng(1)
  local xs, labels = {}, {}
  for c = 1, 3 do
    for i = 1, 100 do
      local r = i / 100
      local theta = (c - 1) * 2 * math.pi / 3 + 4 * r + gen.normal() * 0.2
      xs[#xs + 1], labels[#labels + 1] = { r * math.sin(theta), r * math.cos(theta) }, c
    end
  end
  local cx = lumus.tensor(xs)
  local onehot = {}
  for i, c in ipairs(labels) do onehot[i] = { c == 1 and 1 or 0, c == 2 and 1 or 0, c == 3 and 1 or 0 } end
  local ct = lumus.tensor(onehot)
  nn.manual_seed(1)
  local model = nn.Sequential(nn.Linear(2, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 3))
  local o = optim.AdamW(model:parameters(), { lr = 0.01 })
  local every = math.max(1, MEM_STEPS // 10)
  local samples = {}
  local t0 = lumus.clock()
  for s = 1, MEM_STEPS do
    o:zero_grad()
    local loss = mse(model(cx), ct)
    loss:backward()
    o:step()
    if s % every == 0 then
      lumus.synchronize()
      collectgarbage("collect")
      samples[#samples + 1] = lumus.memory().in_use
    end
  end
  local wall = lumus.clock() - t0
  local grew = false
  for i = 2, #samples do if samples[i] > samples[1] then grew = true end end
  print()
  print(("memory over %d training steps of the spirals MLP (%.1f s, %.3f ms per step): lumus.memory().in_use every %d steps: %s -> %s"):format(
    MEM_STEPS, wall, wall / MEM_STEPS * 1e3, every, table.concat(samples, " "), grew and "GREW  FAIL" or "flat  ok"))
  failed = failed or grew
end

if failed then os.exit(1) end
