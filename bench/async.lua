-- bench/async.lua: many small ops, recorded asynchronously (layer_norm_forward on 64x768).
--
--   lua5.4 bench/async.lua [--calls 1000] [--rows 64] [--D 768] [--repeats 3]
--                          [--sync-calls 2000] [--sync-D 4096]
--
-- Cases, each `--calls` calls of lumus.layer_norm_forward(x, nil, nil, 1e-5, opts):
--   (a) dependent: each call's input is the previous call's output (two buffers used in
--       turn), one lumus.synchronize() at the end
--   (b) independent: 1000 different inputs into 1000 different outputs, one synchronize
--   (c) as (a), with lumus.synchronize() after every call
--   (d) as (b), but without opts: every call allocates fresh y, mean and invstd
-- Reported per case (the best of --repeats runs by total, after one warm-up run):
--   call returns   median host time for layer_norm_forward to return
--   p90            its 90th percentile
--   total per op   host time from before the first call to after the final synchronize,
--                  divided by the number of calls
--   device per op  lumus.gpu_time over the same loop (a separate run), per call; not for (c),
--                  whose loop synchronizes inside
-- Then one small call + synchronize, --sync-calls times: layer_norm_forward on 1 x
-- --sync-D into fixed outputs, then lumus.synchronize(); the host time of each pair
-- (median, p10, p90): the latency of one frame's host-device round trip.
-- Host times use lumus.clock() (monotonic); without it, os.clock() (CPU time) with a warning.

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"

local USAGE = "usage: lua5.4 bench/async.lua [--calls 1000] [--rows 64] [--D 768] [--repeats 3]"
  .. " [--sync-calls 2000] [--sync-D 4096]"
local opt = common.parse_args(arg, { calls = true, rows = true, D = true, repeats = true,
                                     ["sync-calls"] = true, ["sync-D"] = true }, nil, USAGE)
local N = common.int_opt(opt.calls, 1000)
local R = common.int_opt(opt.rows, 64)
local D = common.int_opt(opt.D, 768)
local repeats = common.int_opt(opt.repeats, 3)
local SYNC_N = common.int_opt(opt.sync_calls, 2000)
local SYNC_D = common.int_opt(opt.sync_D, 4096)
local EPS = 1e-5

local lumus = common.load_lumus()
local clock, clock_name = common.make_clock(lumus)
local dev_line = common.device_line(lumus)
local ln = lumus.layer_norm_forward

-- Inputs: N different R x D matrices, windows into one random block (cheap to make).
local gen = common.normal_gen(11)
local block = common.random_bytes(gen, R * D + N, 1.0, 0.5)
local inputs = {}
for i = 1, N do inputs[i] = lumus.from_bytes(block:sub(4 * (i - 1) + 1, 4 * (i - 1 + R * D)), { R, D }) end
local x0 = inputs[1]

-- Outputs for (b): one set per call. For (a)/(c): two buffers in turn, one mean/invstd.
local outs, means, invstds = {}, {}, {}
for i = 1, N do outs[i], means[i], invstds[i] = lumus.empty({ R, D }), lumus.empty({ R }), lumus.empty({ R }) end
local ping, pong = lumus.empty({ R, D }), lumus.empty({ R, D })
local chain_m, chain_r = lumus.empty({ R }), lumus.empty({ R })
lumus.synchronize()

-- The loop of each case; `per` (optional) receives the host time of each call.
local loops = {}
loops.a = function(per, sync_each)
  local src, dst = x0, ping
  for i = 1, N do
    local t0 = per and clock()
    ln(src, nil, nil, EPS, { out = dst, mean = chain_m, invstd = chain_r })
    if per then per[i] = clock() - t0 end
    if sync_each then lumus.synchronize() end
    src, dst = dst, (dst == ping) and pong or ping
  end
  return src          -- the last output
end
loops.c = function(per) return loops.a(per, true) end
loops.b = function(per)
  for i = 1, N do
    local t0 = per and clock()
    ln(inputs[i], nil, nil, EPS, { out = outs[i], mean = means[i], invstd = invstds[i] })
    if per then per[i] = clock() - t0 end
  end
end
local fresh = {}
loops.d = function(per)
  for i = 1, N do
    local t0 = per and clock()
    local y, m, r = ln(inputs[i], nil, nil, EPS)
    if per then per[i] = clock() - t0 end
    fresh[#fresh + 1] = y; fresh[#fresh + 1] = m; fresh[#fresh + 1] = r
  end
end
local function free_fresh()
  for i = 1, #fresh do fresh[i]:free() end
  fresh = {}
end

-- One timed run of a case: per-call host times and total host time per op.
local function run(case)
  lumus.synchronize()
  collectgarbage(); collectgarbage("stop")
  local per = {}
  local t0 = clock()
  local last = loops[case](per)
  lumus.synchronize()
  local total = clock() - t0
  collectgarbage("restart")
  free_fresh()
  return per, total / N, last
end

local CASES = {
  { "a", "(a) dependent, one synchronize" },
  { "b", "(b) independent, one synchronize" },
  { "c", "(c) dependent, synchronize after each" },
  { "d", "(d) independent, fresh outputs, one synchronize" },
}

print(("# async: %d layer_norm_forward calls on %dx%d — %s"):format(N, R, D, dev_line))
print(("%s; best of %d runs after a warm-up; host clock %s")
  :format(os.date("!%Y-%m-%d %H:%M UTC"), repeats, clock_name))
print()
print("| case | call returns µs (median) | p90 µs | total µs per op | device µs per op |")
print("|:---|---:|---:|---:|---:|")
local last_chain
for _, c in ipairs(CASES) do
  local key, label = c[1], c[2]
  run(key)                                           -- warm-up
  local best_per, best_total
  for _ = 1, repeats do
    local per, total, last = run(key)
    if not best_total or total < best_total then best_per, best_total = per, total end
    if key == "a" then last_chain = last end
  end
  local dev_per_op
  if key ~= "c" then
    local secs = lumus.gpu_time(function() loops[key]() end)
    free_fresh()
    dev_per_op = secs / N
  end
  print(("| %s | %.2f | %.2f | %.2f | %s |"):format(label, common.median(best_per) * 1e6,
    common.percentile(best_per, 90) * 1e6, best_total * 1e6,
    dev_per_op and ("%.2f"):format(dev_per_op * 1e6) or "-"))
  io.stdout:flush()
end

-- One small call + synchronize per iteration (after 100 untimed ones).
do
  local x = lumus.from_bytes(block:sub(1, 4 * SYNC_D), { 1, SYNC_D })
  local y, m, r = lumus.empty({ 1, SYNC_D }), lumus.empty({ 1 }), lumus.empty({ 1 })
  local o = { out = y, mean = m, invstd = r }
  local per = {}
  collectgarbage(); collectgarbage("stop")
  for i = -99, SYNC_N do
    local t0 = clock()
    ln(x, nil, nil, EPS, o)
    lumus.synchronize()
    if i >= 1 then per[i] = clock() - t0 end
  end
  collectgarbage("restart")
  print()
  print(("one call + synchronize (layer_norm_forward 1x%d, %d times): median %.1f µs, p10 %.1f, p90 %.1f")
    :format(SYNC_D, SYNC_N, common.median(per) * 1e6, common.percentile(per, 10) * 1e6,
      common.percentile(per, 90) * 1e6))
  x:free(); y:free(); m:free(); r:free()
end

-- Sanity of the chain: without affine, call k maps a row of variance v to
-- (x - mean) / sqrt(v + eps), so after N calls row 1 should be (x0 - mean) * scale with
-- scale the product of those factors (computed here in float64).
do
  local xr = common.unpack_floats(x0:to_bytes(1, D))
  local yr = common.unpack_floats(last_chain:to_bytes(1, D))
  local s = 0
  for i = 1, D do s = s + xr[i] end
  local mean = s / D
  local q = 0
  for i = 1, D do q = q + (xr[i] - mean) ^ 2 end
  local v, scale = q / D, 1
  for _ = 1, N do
    local f = 1 / math.sqrt(v + EPS)
    scale, v = scale * f, v * f * f
  end
  local err = 0
  for i = 1, D do err = math.max(err, math.abs(yr[i] - (xr[i] - mean) * scale)) end
  print()
  print(("chain check: row 1 after %d dependent calls against the float64 recurrence: "
    .. "max |diff| %.2e"):format(N, err))
end

for i = 1, N do inputs[i]:free(); outs[i]:free(); means[i]:free(); invstds[i]:free() end
