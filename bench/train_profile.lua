-- bench/train_profile.lua: where one training step of the pre-norm MLP block (the step of
-- bench/train_mlp.lua) spends its time.
--
--   lua5.4 bench/train_profile.lua [--tokens 8192] [--warm 5] [--steps 20] [--csv FILE]
--
-- 1. Host time per phase of an ordinary step (zero_grad, forward + loss, backward,
--    optimizer step, the final synchronize), medians over --steps steps, and the counts
--    per step: dispatches recorded, submits, host waits, device blocks taken from the
--    driver, garbage collections run by lumus, tensors made.
-- 2. Device time of a whole step (lumus.gpu_time around it: the sum of its batches).
-- 3. Device time per op: one step in which every lumus.core function call runs alone
--    inside lumus.gpu_time (so the host syncs after each; device times of the ops
--    themselves, not of the step's overlap), labelled with the phase and, in backward,
--    the autograd node whose backward made it ("engine" for the gradient sums between
--    nodes). Listed in order, then summed per label and per op. Ops that record no
--    device work (views, shapes) are left out.
-- 4. Wall time per step with lumus.tune.stream({submit_idle = k}) for a few k (the
--    stream submitting work while the host still records the rest of the step).
-- 5. Device time of the step's six matmul forms alone (as the plan runs them), fc1's weight
--    gradient with the split over K forced to 1, 2, 4, 8, and both weight-gradient forms
--    split over K from Lua (each K slice a batch of a batched matmul, then a sum).
-- The weights and data are those of bench/train_data.lua (as bench/train_mlp.lua).
-- LUA_PATH/LUA_CPATH as in bench/run_h200.sh.
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"

local USAGE = "usage: lua5.4 bench/train_profile.lua [--tokens N] [--warm N] [--steps N] [--csv FILE]"
local known = { tokens = true, warm = true, steps = true, csv = true }
local opt = common.parse_args(arg, known, {}, USAGE)

-- lumus.core is wrapped before lumus (and its autograd, which keeps the core functions in
-- a table of its own) loads, so every op any layer calls passes through `timed` below.
local ok_core, core = pcall(require, "lumus.core")
if not ok_core then
  local root = common.script_dir() .. "/.."
  package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
  package.cpath = root .. "/build/?.so;" .. package.cpath
  package.loaded["lumus.core"] = nil
  core = require "lumus.core"
end

local unpack = table.unpack or unpack   -- (Lua 5.1)
local function pack(...) return { n = select("#", ...), ... } end
local shape_of = core.Tensor.methods.shape
local Tensor = core.Tensor
local gpu_time = core.gpu_time
local profiling, inside = false, false
local label = "setup"
local records = {}
local made = 0   -- tensors returned by core functions while counting
local counting = false
-- Functions that never record device work (asked often; not worth a sync each).
local HOST_ONLY = {}
for n in ("shape size numel dtype ndim dim is_freed strides stride is_contiguous _version gpu_time clock "
  .. "synchronize pending memory device_info is_tensor reshape view transpose permute expand narrow select "
  .. "unsqueeze squeeze detach t"):gmatch("%S+") do HOST_ONLY[n] = true end

local function describe(args)
  local parts = {}
  for i = 1, args.n do
    local v = args[i]
    if getmetatable(v) == Tensor and not core.Tensor.methods.is_freed(v) then
      parts[#parts + 1] = table.concat(shape_of(v), "x")
    end
  end
  return table.concat(parts, " ")
end

local function count_made(...)
  if counting then
    for i = 1, select("#", ...) do
      if getmetatable((select(i, ...))) == Tensor then made = made + 1 end
    end
  end
  return ...
end

local function timed(name, f)
  return function(...)
    if not profiling or inside or HOST_ONLY[name] then return count_made(f(...)) end
    local args = pack(...)
    local shapes = describe(args)
    inside = true
    local res
    local ok, t = pcall(gpu_time, function() res = pack(f(unpack(args, 1, args.n))) end)
    inside = false
    if not ok then error(t, 0) end
    if t > 0 then records[#records + 1] = { label = label, op = name, shapes = shapes, t = t } end
    return count_made(unpack(res, 1, res.n))
  end
end

local function wrap_all(tbl)
  local names = {}
  for k, v in pairs(tbl) do if type(v) == "function" then names[#names + 1] = k end end
  for _, k in ipairs(names) do tbl[k] = timed(k, tbl[k]) end
end
wrap_all(core)
wrap_all(core.Tensor.methods)

local lumus = common.load_lumus()
local train_data = require "train_data"
local dev_line, dev = common.device_line(lumus)
local cpu = dev.kind == "cpu"
local nn, optim = lumus.nn, lumus.optim
local TOKENS = common.int_opt(opt.tokens, cpu and 256 or 8192)
local WARM = common.int_opt(opt.warm, cpu and 2 or 5)
local STEPS = common.int_opt(opt.steps, cpu and 3 or 20)
local D, H = train_data.D, train_data.HIDDEN

-- Label the backward of every autograd node with its op's name.
local autograd = lumus.autograd
for name, entry in pairs(autograd.ops) do
  local bw = entry.backward
  if type(bw) == "function" then
    entry.backward = function(...)
      local was = label
      label = "backward " .. name
      local r = pack(bw(...))
      label = was
      return unpack(r, 1, r.n)
    end
  end
end

print(("## lumus training step profile: pre-norm MLP block, %d tokens, float32, AdamW, MSE"):format(TOKENS))
print(dev_line)

local block, x, target = train_data.block(lumus, TOKENS)
collectgarbage("collect")
local opt_w = optim.AdamW(block:parameters(), { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0.01 })

-- One step in phases; host seconds of each into `into` when given.
local function step(into)
  local c = lumus.clock
  local t0 = c()
  label = "zero_grad"
  opt_w:zero_grad()
  local t1 = c()
  label = "forward"
  local loss = lumus.mse_loss(block(x), target)
  local t2 = c()
  label = "backward engine"
  loss:backward()
  local t3 = c()
  label = "optimizer"
  opt_w:step()
  local t4 = c()
  label = "synchronize"
  lumus.synchronize()
  local t5 = c()
  if into then
    local ph = { t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0 }
    for i = 1, #ph do into[i][#into[i] + 1] = ph[i] end
  end
  return loss
end

for _ = 1, WARM do step() end

-- 1. host time per phase and counts per step
local phases = { {}, {}, {}, {}, {}, {} }
local names = { "zero_grad", "forward + loss", "backward", "optimizer step", "synchronize (wait)", "whole step" }
local tune = lumus.tune
local s0, m0 = tune.stream_stats(), lumus.memory()
tune.host_profile({ on = true })
made, counting = 0, true
for _ = 1, STEPS do step(phases) end
counting = false
local hp = tune.host_profile()
tune.host_profile({})
local s1, m1 = tune.stream_stats(), lumus.memory()
print()
print(("| phase (host clock, median of %d steps) | ms |"):format(STEPS))
print("|---|---|")
for i = 1, #names do print(("| %s | %.3f |"):format(names[i], common.median(phases[i]) * 1e3)) end
print()
print("| per step | count |")
print("|---|---|")
print(("| dispatches recorded | %.1f |"):format(hp.records / STEPS))
print(("| host seconds recording them (ms) | %.3f |"):format(hp.record / STEPS * 1e3))
print(("| submits | %.1f |"):format(hp.submits / STEPS))
print(("| host waits | %.1f (%.3f ms) |"):format(hp.waits / STEPS, hp.wait / STEPS * 1e3))
print(("| tensors made by lumus.core calls | %.1f |"):format(made / STEPS))
print(("| device blocks taken from the driver | %.2f |"):format((s1.blocks_made - s0.blocks_made) / STEPS))
print(("| garbage collections run by lumus | %.2f |"):format((s1.gc_runs - s0.gc_runs) / STEPS))
print(("| memory in use after the steps / peak (MiB) | %.1f / %.1f |"):format(m1.in_use / 2 ^ 20, m1.peak / 2 ^ 20))

-- 2. device time of a whole step
local whole = {}
for i = 1, math.max(3, math.min(STEPS, 10)) do whole[i] = lumus.gpu_time(function() step() end) end
local step_dev = common.median(whole)
print()
print(("device time of a whole step (lumus.gpu_time, median of %d): %.3f ms"):format(#whole, step_dev * 1e3))

-- 3. device time per op
profiling = true
step()
profiling = false
local total = 0
for _, r in ipairs(records) do total = total + r.t end
print()
print(("### per op, one step, each op timed alone (sum %.3f ms)"):format(total * 1e3))
print()
print("| # | phase / node | op | tensor shapes | device µs | % of sum |")
print("|---|---|---|---|---|---|")
for i, r in ipairs(records) do
  print(("| %d | %s | %s | %s | %.1f | %.1f |"):format(i, r.label, r.op, r.shapes, r.t * 1e6, 100 * r.t / total))
end

local function summary(title, key)
  local sums, order = {}, {}
  for _, r in ipairs(records) do
    local k = key(r)
    if not sums[k] then sums[k] = { t = 0, n = 0 }; order[#order + 1] = k end
    sums[k].t, sums[k].n = sums[k].t + r.t, sums[k].n + 1
  end
  table.sort(order, function(a, b) return sums[a].t > sums[b].t end)
  print()
  print(("| %s | ops | device µs | %% of sum |"):format(title))
  print("|---|---|---|---|")
  for _, k in ipairs(order) do
    print(("| %s | %d | %.1f | %.1f |"):format(k, sums[k].n, sums[k].t * 1e6, 100 * sums[k].t / total))
  end
end
summary("phase / node", function(r) return r.label end)
summary("op", function(r) return r.op end)
summary("op and shapes", function(r) return r.op .. " " .. r.shapes end)

profiling = false

-- 4. wall time of a step (host clock, synchronized) as the stream submits: only at the
-- synchronize (submit_idle 0, the default) or every k ops while the device is idle.
print()
print(("| tune.stream submit_idle | wall ms per step (median of %d) | submits per step |"):format(STEPS))
print("|---|---|---|")
for _, k in ipairs { 0, 4, 16, 64 } do
  tune.stream({ submit_idle = k })
  step()
  local ts = {}
  local h0 = tune.stream_stats().submits
  for i = 1, STEPS do
    local t0 = lumus.clock()
    step()
    ts[i] = lumus.clock() - t0
  end
  print(("| %d | %.3f | %.1f |"):format(k, common.median(ts) * 1e3, (tune.stream_stats().submits - h0) / STEPS))
end
tune.stream({})

-- 5. the step's six matmul forms alone, and the weight-grad forms split over K (the
-- product of each K slice as a batch, then their sum over the slices).
do
  local a768, a3072 = lumus.randn({ TOKENS, D }), lumus.randn({ TOKENS, H })
  local w1, w2 = lumus.randn({ H, D }), lumus.randn({ D, H })
  local forms = {
    { "linear x[T,768] w1[3072,768]^T (fc1 forward)", function() return lumus.linear(a768, w1) end, TOKENS * D * H },
    { "linear h[T,3072] w2[768,3072]^T (fc2 forward)", function() return lumus.linear(a3072, w2) end, TOKENS * D * H },
    { "matmul g[T,768] w2[768,3072] (fc2 dx)", function() return lumus.matmul(a768, w2) end, TOKENS * D * H },
    { "matmul g[T,3072] w1[3072,768] (fc1 dx)", function() return lumus.matmul(a3072, w1) end, TOKENS * D * H },
    { "matmul g[T,768]^T h[T,3072] (fc2 dW, transpose_a)", function() return lumus.matmul(a768, a3072, { transpose_a = true }) end, TOKENS * D * H },
    { "matmul g[T,3072]^T x[T,768] (fc1 dW, transpose_a)", function() return lumus.matmul(a3072, a768, { transpose_a = true }) end, TOKENS * D * H },
  }
  for _, sp in ipairs { 1, 2, 4, 8 } do
    forms[#forms + 1] = { ("fc1 dW forced split %d (tune.matmul)"):format(sp), function()
      lumus.tune.matmul(H, D, TOKENS, { split = sp })
      local r = lumus.matmul(a3072, a768, { transpose_a = true })
      lumus.tune.matmul(1, 1, 1, {})
      return r
    end, TOKENS * D * H }
  end
  print()
  print(("automatic split over K of the weight gradients [%d x %d] x [%d x %d]: %d; of the forward: %d")
    :format(H, TOKENS, TOKENS, D, lumus.tune.matmul(H, D, TOKENS).split, lumus.tune.matmul(TOKENS, H, D).split))
  for _, sp in ipairs { 2, 4, 8 } do
    if TOKENS % (4 * sp) == 0 then
      local rows = TOKENS / sp
      forms[#forms + 1] = { ("fc1 dW split over K in %d (batched matmul + sum)"):format(sp), function()
        local p = lumus.matmul(a3072:reshape({ sp, rows, H }), a768:reshape({ sp, rows, D }), { transpose_a = true })
        return lumus.sum(p, { dim = 1 })
      end, TOKENS * D * H }
      forms[#forms + 1] = { ("fc2 dW split over K in %d (batched matmul + sum)"):format(sp), function()
        local p = lumus.matmul(a768:reshape({ sp, rows, D }), a3072:reshape({ sp, rows, H }), { transpose_a = true })
        return lumus.sum(p, { dim = 1 })
      end, TOKENS * D * H }
    end
  end
  print("| product | device ms | TFLOP/s |")
  print("|---|---|---|")
  for _, f in ipairs(forms) do
    local t = common.device_time(lumus, f[2], cpu and 2 or 20, 2)
    print(("| %s | %.3f | %.1f |"):format(f[1], t * 1e3, 2 * f[3] / t / 1e12))
  end
end

if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("index,label,op,shapes,us\n")
  for i, r in ipairs(records) do f:write(("%d,%s,%s,%s,%.3f\n"):format(i, r.label, r.op, r.shapes, r.t * 1e6)) end
  f:close()
end
block:free()
