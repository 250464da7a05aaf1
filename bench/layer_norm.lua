--- bench/layer_norm.lua: LayerNorm forward device time, GB/s against a same-run copy
-- ceiling, a check against the reference, small-call latency, and (on a CPU device) the
-- speedup over the pure-Lua reference.
--
--   lua5.4 bench/layer_norm.lua [--shapes 8192x768,...] [--iters 50] [--warmup 5]
--       [--csv out.csv] [--svg out.svg] [--baseline torch.csv] [--check-rows 4]
--       [--preset h200|lavapipe] [--small-iters 2000]
-- (run from the repository root with LUA_PATH/LUA_CPATH set; see bench/run_h200.sh)
package.path = "bench/?.lua;" .. package.path
local lumus = require "lumus"
local ref = require "lumus.reference"
local chart = require "chart"

local opt = { iters = 50, warmup = 5, ["check-rows"] = 4, preset = nil, ["small-iters"] = 2000 }
do
  local i = 1
  while arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    assert(k, "unexpected argument " .. arg[i])
    opt[k] = arg[i + 1]
    i = i + 2
  end
end
local presets = {
  h200 = "8192x768,8192x1024,4096x4096,2048x8192,32768x1024,65536x768,16384x4096,4096x65536",
  lavapipe = "64x768,1024x768,256x4096,4096x1024,16x65536",
}
local dev = lumus.device()
local preset = opt.preset or (dev.kind == "cpu" and "lavapipe" or "h200")
local shapes = {}
for r, d in (opt.shapes or presets[preset]):gmatch("(%d+)x(%d+)") do shapes[#shapes + 1] = { tonumber(r), tonumber(d) } end
local iters, warmup = tonumber(opt.iters), tonumber(opt.warmup)
if dev.kind == "cpu" and not opt.iters then iters = 5 end

local function median(t) table.sort(t); return t[(#t + 1) // 2] end
local function device_time(fn, n)
  for _ = 1, warmup do fn() end
  local ts = {}
  for i = 1, n do ts[i] = lumus.gpu_time(fn) end
  return median(ts)
end

-- Baseline CSV (bench/torch_layer_norm.py): shape -> {us=, gbs=}
local baseline = {}
if opt.baseline then
  for line in io.lines(opt.baseline) do
    local shape, _, _, us, gbs = line:match("^([%dx]+),(%d+),(%d+),([%d.]+),([%d.]+)")
    if shape then baseline[shape] = { us = tonumber(us), gbs = tonumber(gbs) } end
  end
end

print(("# lumus layer_norm_forward — %s (%s), %s, %s"):format(dev.name, dev.driver_info or dev.driver, os.date("!%Y-%m-%d"), preset))
print(("iters %d (median of device time per call, timestamp queries), float32"):format(iters))
print()
print("| shape | variant | lumus µs | lumus GB/s | copy GB/s | % of copy | torch µs | torch GB/s | speedup | max err |")
print("|---|---|---|---|---|---|---|---|---|---|")
local rows_out = {}
for _, s in ipairs(shapes) do
  local R, D = s[1], s[2]
  local label = R .. "x" .. D
  -- x from bytes we keep, so sample rows can be checked without reading x back
  local rng = ref.rng(R + D)
  local rowbytes = {}
  local nsample = 64    -- distinct rows, repeated over the tensor
  for k = 1, nsample do
    local vals = {}
    for j = 1, D do vals[j] = string.pack("<f", 2 + rng.normal()) end
    rowbytes[k] = table.concat(vals)
  end
  local parts = {}
  for r = 1, R do parts[r] = rowbytes[(r - 1) % nsample + 1] end
  local x = lumus.from_bytes(table.concat(parts), { R, D })
  parts = nil
  local w, b = lumus.full({ D }, 1.25), lumus.full({ D }, -0.5)
  local y, m, iv = lumus.empty({ R, D }), lumus.empty({ R }), lumus.empty({ R })
  local c = lumus.empty({ R, D })
  local o = { out = y, mean = m, invstd = iv }
  local t_ln = device_time(function() lumus.layer_norm_forward(x, w, b, 1e-5, o) end, iters)
  local t_cp = device_time(function() lumus.copy(x, { out = c }) end, iters)
  local bytes = 4 * (2 * R * D + 2 * D + 2 * R)
  local gbs, cgbs = bytes / t_ln / 1e9, 8 * R * D / t_cp / 1e9
  -- correctness on sample rows spread over the tensor
  local maxerr = 0
  local nchk = tonumber(opt["check-rows"])
  for k = 0, nchk - 1 do
    local r = math.floor(k * (R - 1) / math.max(nchk - 1, 1))
    local xr = { string.unpack(("<" .. ("f"):rep(D)), rowbytes[r % nsample + 1]) }
    xr[D + 1] = nil
    local wv, bv = {}, {}
    for j = 1, D do wv[j], bv[j] = 1.25, -0.5 end
    local want = ref.layer_norm_forward(xr, wv, bv, 1e-5)
    local got = { string.unpack(("<" .. ("f"):rep(D)), y:to_bytes(r * D + 1, D)) }
    got[D + 1] = nil
    local e = ref.compare(got, want).max_abs
    if e > maxerr then maxerr = e end
  end
  local bl = baseline[label]
  local cfg = lumus._layer_norm_config(D)
  local row = {
    shape = label, rows = R, D = D, variant = cfg.variant .. "/" .. cfg.workgroup .. "x" .. cfg.items,
    lumus_us = ("%.2f"):format(t_ln * 1e6), lumus_gbs = ("%.1f"):format(gbs), copy_gbs = ("%.1f"):format(cgbs),
    pct_of_copy = ("%.1f"):format(100 * gbs / cgbs), torch_us = bl and bl.us or "", torch_gbs = bl and bl.gbs or "",
    speedup = bl and ("%.2f"):format(bl.us / (t_ln * 1e6)) or "", max_err = ("%.2e"):format(maxerr),
    _gbs = gbs, _cgbs = cgbs, _tgbs = bl and bl.gbs,
  }
  rows_out[#rows_out + 1] = row
  print(("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"):format(row.shape, row.variant, row.lumus_us, row.lumus_gbs,
    row.copy_gbs, row.pct_of_copy, row.torch_us, row.torch_gbs, row.speedup, row.max_err))
  for _, t in ipairs { x, w, b, y, m, iv, c } do t:free() end
  collectgarbage()
end

-- Small calls, host-timed end to end: call, then synchronize.
print()
print("| small call | end to end µs (call + synchronize) | call returns µs | device µs |")
print("|---|---|---|---|")
local small_rows = {}
local n = tonumber(opt["small-iters"])
if dev.kind == "cpu" then n = math.min(n, 200) end
for _, s in ipairs { { 1, 4096 }, { 64, 768 } } do
  local x = lumus.full(s, 1.5)
  local y, m, iv = lumus.empty(s), lumus.empty({ s[1] }), lumus.empty({ s[1] })
  local o = { out = y, mean = m, invstd = iv }
  for _ = 1, 20 do lumus.layer_norm_forward(x, nil, nil, 1e-5, o); lumus.synchronize() end
  local e2e, ret = {}, {}
  for i = 1, n do
    local t0 = lumus.clock()
    lumus.layer_norm_forward(x, nil, nil, 1e-5, o)
    local t1 = lumus.clock()
    lumus.synchronize()
    local t2 = lumus.clock()
    e2e[i], ret[i] = t2 - t0, t1 - t0
  end
  local dt = device_time(function() lumus.layer_norm_forward(x, nil, nil, 1e-5, o) end, 50)
  local label = s[1] .. "x" .. s[2]
  small_rows[#small_rows + 1] = { shape = label, e2e_us = median(e2e) * 1e6, return_us = median(ret) * 1e6, device_us = dt * 1e6 }
  print(("| %s | %.1f | %.2f | %.2f |"):format(label, median(e2e) * 1e6, median(ret) * 1e6, dt * 1e6))
end

-- Against the pure-Lua reference, one run (the CPU-device target: >= 30x on 1024x768).
if dev.kind == "cpu" or opt["vs-reference"] then
  local R, D = 1024, 768
  local rng = ref.rng(7)
  local xt = ref.random_table({ R, D }, rng.normal)
  local wt = ref.random_table({ D }, rng.normal)
  local bt = ref.random_table({ D }, rng.normal)
  local x, w, b = lumus.tensor(xt), lumus.tensor(wt), lumus.tensor(bt)
  local y, m, iv = lumus.empty({ R, D }), lumus.empty({ R }), lumus.empty({ R })
  local o = { out = y, mean = m, invstd = iv }
  lumus.layer_norm_forward(x, w, b, 1e-5, o); lumus.synchronize()
  local ts = {}
  for i = 1, 5 do
    local t0 = lumus.clock()
    lumus.layer_norm_forward(x, w, b, 1e-5, o)
    lumus.synchronize()
    ts[i] = lumus.clock() - t0
  end
  local t0 = lumus.clock()
  ref.layer_norm_forward(xt, wt, bt, 1e-5)
  local tr = lumus.clock() - t0
  print()
  print(("1024x768 with weight and bias vs the pure-Lua reference: lumus %.2f ms (call + synchronize, median of 5), reference %.1f ms: %.1fx")
    :format(median(ts) * 1e3, tr * 1e3, tr / median(ts)))
end

if opt.csv then
  chart.write_csv(opt.csv, { "shape", "rows", "D", "variant", "lumus_us", "lumus_gbs", "copy_gbs", "pct_of_copy",
    "torch_us", "torch_gbs", "speedup", "max_err" }, rows_out)
end
if opt.svg then
  local groups, l, c, t = {}, {}, {}, {}
  local any_torch = false
  for i, r in ipairs(rows_out) do
    groups[i], l[i], c[i], t[i] = r.shape, r._gbs, r._cgbs, r._tgbs
    any_torch = any_torch or r._tgbs ~= nil
  end
  local series = { { name = "lumus layer_norm_forward", color = "#2b6cb0", values = l },
                   { name = "copy ceiling (same run)", color = "#a0aec0", values = c } }
  if any_torch then series[3] = { name = "PyTorch F.layer_norm", color = "#dd6b20", values = t } end
  chart.write_svg(opt.svg, ("LayerNorm forward, float32 — %s, %s"):format(dev.name, os.date("!%Y-%m-%d")),
    "GB/s (x read + y written + weight/bias + mean/invstd)", groups, series)
end
