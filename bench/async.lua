--- bench/async.lua: asynchronous execution of many small ops (64x768 layer_norm_forward).
-- (a) 1000 dependent calls (each on the last output), one synchronize at the end;
-- (b) 1000 independent calls on 1000 different inputs, one synchronize;
-- (c) as (a) with a synchronize after each call.
-- Reports the median host time for a call to return and the total per op.
local lumus = require "lumus"
local N = 1000
local shape = { 64, 768 }
local function median(t) table.sort(t); return t[(#t + 1) // 2] end

local inputs = {}
for i = 1, N do inputs[i] = lumus.full(shape, i % 17) end
local outs, means, invs = {}, {}, {}
for i = 1, N do outs[i], means[i], invs[i] = lumus.empty(shape), lumus.empty({ 64 }), lumus.empty({ 64 }) end
local x0 = lumus.full(shape, 1.5)
lumus.layer_norm_forward(x0); lumus.synchronize()

local function run(kind)
  local ret = {}
  lumus.synchronize()
  collectgarbage(); collectgarbage("stop")
  local t0 = lumus.clock()
  local prev = x0
  for i = 1, N do
    local src = kind == "b" and inputs[i] or prev
    local c0 = lumus.clock()
    lumus.layer_norm_forward(src, nil, nil, 1e-5, { out = outs[i], mean = means[i], invstd = invs[i] })
    ret[i] = lumus.clock() - c0
    prev = outs[i]
    if kind == "c" then lumus.synchronize() end
  end
  lumus.synchronize()
  local total = lumus.clock() - t0
  collectgarbage("restart")
  return median(ret) * 1e6, total / N * 1e6
end

local dev = lumus.device()
print(("# async: %d layer_norm_forward calls on 64x768 — %s, %s"):format(N, dev.name, os.date("!%Y-%m-%d")))
print("| case | call returns µs (median) | total µs per op |")
print("|---|---|---|")
for _, k in ipairs { { "a", "(a) dependent, one synchronize" }, { "b", "(b) independent, one synchronize" },
                     { "c", "(c) dependent, synchronize each" } } do
  for _ = 1, 2 do run(k[1]) end   -- warm
  local r, t = run(k[1])
  print(("| %s | %.2f | %.2f |"):format(k[2], r, t))
end
