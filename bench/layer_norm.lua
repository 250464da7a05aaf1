-- bench/layer_norm.lua: LayerNorm forward, float32, against a same-run copy ceiling.
--
-- For each shape R x D: median device time (lumus.gpu_time, timestamp queries) of one
-- layer_norm_forward into preallocated outputs; GB/s counting x read + y written +
-- weight/bias read + mean/invstd written, i.e. 4 * (2*R*D + 2*D + 2*R) bytes; the ceiling
-- measured in the same run as the median device time of lumus.copy of x into a tensor of
-- the same size (a vec4 compute-shader copy, 2 * 4*R*D bytes moved); a correctness check
-- of sample rows (y, mean, invstd) against lumus.reference; and, given the CSV of
-- bench/torch_layer_norm.py, PyTorch's time and the speedup over it.
-- Then: small-call latency (1x4096, 64x768), host-timed end to end (call + synchronize),
-- beside device time; and lumus against the pure-Lua reference on 1024x768 in one run.
--
--   lua5.4 bench/layer_norm.lua [--shapes 8192x768,4096x4096] [--iters N] [--warmup N]
--       [--csv out.csv] [--svg out.svg] [--small-csv small.csv]
--       [--baseline torch.csv] [--baseline-small torch_small.csv]
--       [--check-rows N] [--preset h200|lavapipe|small | --lavapipe | --small]
--       [--latency-reps N] [--ref-shape 1024x768] [--ref-reps N] [--skip-latency]
--       [--skip-ref] [--seed N] [--rounds N]
--
-- Presets (explicit options override them): h200 is the default on a GPU, lavapipe on a
-- CPU device (smaller shapes, fewer iterations), small a seconds-long smoke run.
-- LUA_PATH/LUA_CPATH as in bench/run_h200.sh; without them the checkout's lua/ and
-- build/ are used.

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"

local fmt, median = common.fmt, common.median

local USAGE = [==[
usage: lua5.4 bench/layer_norm.lua [--shapes RxD,...] [--iters N] [--warmup N]
  [--csv FILE] [--svg FILE] [--small-csv FILE] [--baseline torch.csv]
  [--baseline-small torch_small.csv] [--check-rows N] [--preset h200|lavapipe|small]
  [--lavapipe] [--small] [--latency-reps N] [--ref-shape RxD] [--ref-reps N]
  [--skip-latency] [--skip-ref] [--vs-reference] [--seed N] [--rounds N]]==]

local known = {}
for name in ([[shapes iters warmup csv svg small-csv baseline baseline-small check-rows
  preset lavapipe small latency-reps small-iters ref-shape ref-reps skip-latency skip-ref
  vs-reference seed rounds]]):gmatch("%S+") do known[name] = true end
local flags = { lavapipe = true, small = true, ["skip-latency"] = true, ["skip-ref"] = true,
                ["vs-reference"] = true }
local opt = common.parse_args(arg, known, flags, USAGE)

local lumus = common.load_lumus()
local ref = common.load_reference()
local clock, clock_name = common.make_clock(lumus)
local dev_line, dev = common.device_line(lumus)

---------------------------------------------------------------------------------------
-- Settings
---------------------------------------------------------------------------------------

local PRESETS = {
  h200 = {
    shapes = "8192x768,8192x1024,4096x4096,2048x8192,32768x1024,65536x768,16384x4096,4096x65536",
    iters = 100, warmup = 10, latency_reps = 2000, ref_reps = 3, rounds = 3,
  },
  lavapipe = {
    shapes = "64x768,1024x768,4096x768,256x4096,1024x4096,16x65536",
    iters = 5, warmup = 2, latency_reps = 200, ref_reps = 3, rounds = 1,
  },
  small = {
    shapes = "64x768,1024x768",
    iters = 3, warmup = 1, latency_reps = 20, ref_reps = 1, rounds = 1,
  },
}
local preset_name = opt.preset
  or (opt.small and "small") or (opt.lavapipe and "lavapipe")
  or (dev.kind == "cpu" and "lavapipe") or "h200"
local preset = PRESETS[preset_name]
if not preset then io.stderr:write("unknown preset ", preset_name, "\n", USAGE, "\n"); os.exit(2) end

local shapes = common.parse_shapes(opt.shapes or preset.shapes)
local iters = common.int_opt(opt.iters, preset.iters)
local warmup = common.int_opt(opt.warmup, preset.warmup)
local check_rows = common.int_opt(opt.check_rows, 4)
local latency_reps = common.int_opt(opt.latency_reps or opt.small_iters, preset.latency_reps)
local ref_reps = common.int_opt(opt.ref_reps, preset.ref_reps)
local rounds = common.int_opt(opt.rounds, preset.rounds)
local seed = common.int_opt(opt.seed, 20261202)
local EPS = 1e-5

local core = common.core_of(lumus)
-- (builds before lumus.tune had the hook as _layer_norm_config)
local config_fn = (lumus.tune and lumus.tune.layer_norm) or lumus._layer_norm_config or (core and core._layer_norm_config)

-- The kernel variant chosen for rows of D, as a short string ("group/128x2"), or nil.
local function variant_of(D)
  if type(config_fn) ~= "function" then return nil end
  local ok, cfg = pcall(config_fn, D)
  if not ok or type(cfg) ~= "table" then return nil end
  local s = tostring(cfg.variant or "?")
  if cfg.workgroup then s = s .. "/" .. cfg.workgroup .. (cfg.items and ("x" .. cfg.items) or "") end
  return s, cfg
end

---------------------------------------------------------------------------------------
-- Baselines from bench/torch_layer_norm.py
---------------------------------------------------------------------------------------

-- Reads a CSV keyed by its `shape` column; a missing file is a warning, not an error.
local function read_keyed(path)
  if not path then return {} end
  local header, rows = chart.read_csv(path)
  if not header then
    io.stderr:write("bench: warning: cannot read ", path, ": ", tostring(rows), "\n")
    return {}
  end
  local by = {}
  for _, r in ipairs(rows) do if r.shape then by[tostring(r.shape)] = r end end
  return by
end
local baseline = read_keyed(opt.baseline)
local baseline_small = read_keyed(opt.baseline_small)

---------------------------------------------------------------------------------------
-- Measurement helpers
---------------------------------------------------------------------------------------

local function device_time(fn, n, warm) return common.device_time(lumus, fn, n, warm) end

-- Error measures of `got` against `want` (flat lists): max |got - want|.
local function max_abs_err(got, want)
  local e = 0
  for i = 1, #want do
    local d = math.abs(got[i] - want[i])
    if d ~= d then return math.huge end   -- NaN in the output
    if d > e then e = d end
  end
  return e
end

-- Rows to check: n of them spread evenly over 0..R-1 (first and last always included).
local function check_row_list(R, n)
  local list, seen = {}, {}
  n = math.min(n, R)
  for k = 0, n - 1 do
    local r = (n == 1) and 0 or ((k * (R - 1)) // (n - 1))
    if not seen[r] then seen[r] = true; list[#list + 1] = r end
  end
  return list
end

---------------------------------------------------------------------------------------
-- One shape
---------------------------------------------------------------------------------------

local gen = common.normal_gen(seed, ref)

local function bench_shape(R, D)
  local res = { shape = R .. "x" .. D, rows = R, D = D }
  res.variant = variant_of(D)

  -- Inputs from bytes made here, so checked rows need not be read back from the device.
  local xbytes, block, k = common.matrix_bytes(gen, R, D)
  local x <close> = lumus.from_bytes(xbytes, { R, D })
  xbytes = nil                                                -- luacheck: ignore
  collectgarbage()
  local wbytes = common.random_bytes(gen, D, 0.1, 1.0)        -- weight ~ 1 + 0.1 N(0,1)
  local bbytes = common.random_bytes(gen, D, 0.1, 0.0)        -- bias ~ 0.1 N(0,1)
  local w <close> = lumus.from_bytes(wbytes, { D })
  local b <close> = lumus.from_bytes(bbytes, { D })
  local y <close> = lumus.empty({ R, D })
  local m <close> = lumus.empty({ R })
  local r <close> = lumus.empty({ R })
  local c <close> = lumus.empty({ R, D })   -- the copy's destination
  local opts = { out = y, mean = m, invstd = r }

  -- LayerNorm and the ceiling (a copy of x into a tensor of the same size) in
  -- alternating rounds; each keeps its best round's median. On the H200 whole phases of
  -- a run were seen at ~40% speed, copy included; a phase that slows one round alone
  -- then cannot skew the ratio.
  local function ln() lumus.layer_norm_forward(x, w, b, EPS, opts) end
  local function cp() lumus.copy(x, { out = c }) end
  local t_ln, t_cp = math.huge, math.huge
  res.rounds_ln, res.rounds_cp = {}, {}
  for round = 1, rounds do
    local a = device_time(ln, iters, warmup)
    local b2 = device_time(cp, iters, warmup)
    res.rounds_ln[round], res.rounds_cp[round] = a, b2
    t_ln, t_cp = math.min(t_ln, a), math.min(t_cp, b2)
  end
  res.lumus_us = t_ln * 1e6
  res.lumus_gbs = 4 * (2 * R * D + 2 * D + 2 * R) / t_ln / 1e9
  res.copy_us = t_cp * 1e6
  res.copy_gbs = 2 * 4 * R * D / t_cp / 1e9
  res.pct_of_copy = 100 * res.lumus_gbs / res.copy_gbs
  ln()   -- the checked outputs come from a plain call after the timed ones

  -- Correctness of the last call's outputs on sample rows.
  if ref and check_rows > 0 then
    local wv, bv = common.unpack_floats(wbytes), common.unpack_floats(bbytes)
    local e_y, e_m, e_r = 0, 0, 0
    local means = common.unpack_floats(m:to_bytes())
    local invstds = common.unpack_floats(r:to_bytes())
    for _, row in ipairs(check_row_list(R, check_rows)) do
      local xrow = common.unpack_floats(block, (row % k) * D, D)
      local want_y, want_m, want_r = ref.layer_norm_forward(xrow, wv, bv, EPS)
      local got_y = common.unpack_floats(y:to_bytes(row * D + 1, D))
      e_y = math.max(e_y, max_abs_err(got_y, want_y))
      e_m = math.max(e_m, math.abs(means[row + 1] - want_m[1]))
      -- invstd relative: it scales like 1/std, so absolute error says little.
      e_r = math.max(e_r, math.abs(invstds[row + 1] - want_r[1]) / math.abs(want_r[1]))
    end
    res.max_err, res.mean_err, res.invstd_rel_err = e_y, e_m, e_r
  end

  local bl = baseline[res.shape]
  if bl then
    res.torch_us, res.torch_gbs, res.torch_copy_gbs = bl.torch_us, bl.torch_gbs, bl.torch_copy_gbs
    if type(bl.torch_us) == "number" then res.speedup = bl.torch_us / res.lumus_us end
  end
  return res
end

---------------------------------------------------------------------------------------
-- Main table
---------------------------------------------------------------------------------------

local date = os.date("!%Y-%m-%d %H:%M UTC")
print(("# lumus layer_norm_forward, float32 — %s"):format(dev_line))
print(("%s; preset %s; median of %d device-time samples (lumus.gpu_time) after %d warm-up calls "
  .. "and %.2f s of back-to-back calls, best of %d rounds alternating LayerNorm and copy; "
  .. "host clock: %s"):format(date, preset_name, iters, warmup, common.WARM_SECONDS, rounds, clock_name))
print("GB/s counts x read + y written + weight/bias read + mean/invstd written; "
  .. "copy = lumus.copy of x (2 x bytes of x moved), same run.")
print()

local HEADER = { "shape", "variant", "lumus µs", "lumus GB/s", "copy GB/s", "% of copy",
                 "torch µs", "torch GB/s", "speedup", "max err" }
print("| " .. table.concat(HEADER, " | ") .. " |")
print("|:---|:---|" .. string.rep("---:|", #HEADER - 2))
io.stdout:flush()

local results = {}
for _, s in ipairs(shapes) do
  local R, D = s[1], s[2]
  local ok, res = pcall(bench_shape, R, D)
  collectgarbage()
  if not ok then
    res = { shape = s.name, rows = R, D = D, error = tostring(res) }
    print(("| %s | error: %s |"):format(s.name, tostring(res.error):gsub("[\r\n|]", " ")))
  else
    print(("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"):format(res.shape,
      res.variant or "-", fmt(res.lumus_us), fmt(res.lumus_gbs), fmt(res.copy_gbs),
      fmt(res.pct_of_copy, 1), fmt(res.torch_us), fmt(res.torch_gbs),
      res.speedup and string.format("%.2fx", res.speedup) or "-",
      res.max_err and string.format("%.2e", res.max_err) or "-"))
  end
  io.stdout:flush()
  results[#results + 1] = res
end
if ref and check_rows > 0 then
  local em, er = 0, 0
  for _, res in ipairs(results) do
    em = math.max(em, res.mean_err or 0); er = math.max(er, res.invstd_rel_err or 0)
  end
  print(("\nChecked up to %d rows per shape against lumus.reference (float64), spread from first to last: max err is max |y - ref|; "
    .. "worst mean error %.2e, worst invstd relative error %.2e."):format(check_rows, em, er))
end

---------------------------------------------------------------------------------------
-- Small calls: latency of one call, end to end
---------------------------------------------------------------------------------------

local small_results = {}
if not opt.skip_latency then
  print()
  print(("## Small calls: %d calls each, host-timed with %s"):format(latency_reps, clock_name))
  print()
  print("| shape | call + synchronize µs (median) | p10 | p90 | call returns µs (median) "
    .. "| device µs (gpu_time) | torch call + sync µs | torch chained µs/call |")
  print("|:---|---:|---:|---:|---:|---:|---:|---:|")
  for _, s in ipairs({ { 1, 4096 }, { 64, 768 } }) do
    local R, D = s[1], s[2]
    local x <close> = lumus.from_bytes(common.random_bytes(gen, R * D), { R, D })
    local w <close> = lumus.ones({ D })
    local b <close> = lumus.zeros({ D })
    local y <close> = lumus.empty({ R, D })
    local m <close> = lumus.empty({ R })
    local r <close> = lumus.empty({ R })
    local opts = { out = y, mean = m, invstd = r }
    for _ = 1, math.max(10, latency_reps // 20) do
      lumus.layer_norm_forward(x, w, b, EPS, opts); lumus.synchronize()
    end
    local e2e, ret = {}, {}
    collectgarbage(); collectgarbage("stop")   -- keep GC pauses out of the samples
    for i = 1, latency_reps do
      local t0 = clock()
      lumus.layer_norm_forward(x, w, b, EPS, opts)
      local t1 = clock()
      lumus.synchronize()
      local t2 = clock()
      e2e[i], ret[i] = t2 - t0, t1 - t0
    end
    collectgarbage("restart")
    local dt = device_time(function() lumus.layer_norm_forward(x, w, b, EPS, opts) end,
                           math.max(5, math.min(200, latency_reps // 10)))
    local name = R .. "x" .. D
    local bl = baseline_small[name] or {}
    local row = { shape = name, rows = R, D = D, e2e_us = median(e2e) * 1e6,
                  e2e_p10_us = common.percentile(e2e, 10) * 1e6,
                  e2e_p90_us = common.percentile(e2e, 90) * 1e6,
                  return_us = median(ret) * 1e6, device_us = dt * 1e6,
                  torch_sync_us = bl.sync_us, torch_chained_us = bl.chained_us }
    small_results[#small_results + 1] = row
    print(("| %s | %s | %s | %s | %s | %s | %s | %s |"):format(name, fmt(row.e2e_us),
      fmt(row.e2e_p10_us), fmt(row.e2e_p90_us), fmt(row.return_us), fmt(row.device_us),
      fmt(row.torch_sync_us), fmt(row.torch_chained_us)))
    io.stdout:flush()
  end
end

---------------------------------------------------------------------------------------
-- Against the pure-Lua reference, one run
---------------------------------------------------------------------------------------

local vs_ref
if ref and not opt.skip_ref then
  local s = common.parse_shapes(opt.ref_shape or "1024x768")[1]
  local R, D = s[1], s[2]
  -- Nested tables for the reference; the same float32 values for lumus.
  local xbytes = common.random_bytes(gen, R * D)
  local wbytes, bbytes = common.random_bytes(gen, D, 0.1, 1.0), common.random_bytes(gen, D, 0.1)
  local flat = common.unpack_floats(xbytes)
  local xt = {}
  for i = 1, R do xt[i] = table.move(flat, (i - 1) * D + 1, i * D, 1, {}) end
  flat = nil                                                  -- luacheck: ignore
  local wt, bt = common.unpack_floats(wbytes), common.unpack_floats(bbytes)
  local x <close> = lumus.from_bytes(xbytes, { R, D })
  local w <close> = lumus.from_bytes(wbytes, { D })
  local b <close> = lumus.from_bytes(bbytes, { D })
  local y <close> = lumus.empty({ R, D })
  local m <close> = lumus.empty({ R })
  local r <close> = lumus.empty({ R })
  local opts = { out = y, mean = m, invstd = r }
  lumus.layer_norm_forward(x, w, b, EPS, opts); lumus.synchronize()   -- warm (pipeline)

  local lt = {}
  local n_lumus = math.max(5, ref_reps * 5)
  for i = 1, n_lumus do
    local t0 = clock()
    lumus.layer_norm_forward(x, w, b, EPS, opts)
    lumus.synchronize()
    lt[i] = clock() - t0
  end
  local rt, want = {}, nil
  for i = 1, ref_reps do
    collectgarbage()
    local t0 = clock()
    want = ref.layer_norm_forward(xt, wt, bt, EPS)
    rt[i] = clock() - t0
  end
  -- Check the whole output while we have it.
  local got = common.unpack_floats(y:to_bytes())
  local err = 0
  for i = 1, R do
    local wr = want[i]
    for j = 1, D do
      local d = math.abs(got[(i - 1) * D + j] - wr[j])
      if d > err or d ~= d then err = d end
    end
  end
  vs_ref = { shape = s.name, lumus_ms = median(lt) * 1e3, ref_ms = median(rt) * 1e3, max_err = err }
  vs_ref.speedup = vs_ref.ref_ms / vs_ref.lumus_ms
  print()
  print(("## Against the pure-Lua reference (%s, weight and bias, one run)"):format(s.name))
  print()
  print("| | ms (median) | runs |")
  print("|:---|---:|---:|")
  print(("| lumus call + synchronize | %s | %d |"):format(fmt(vs_ref.lumus_ms, 3), n_lumus))
  print(("| lumus.reference.layer_norm_forward | %s | %d |"):format(fmt(vs_ref.ref_ms, 1), ref_reps))
  print()
  print(("speedup %.1fx (target >= 30x on lavapipe: %s); max |y - ref| over all %d values %.2e")
    :format(vs_ref.speedup, vs_ref.speedup >= 30 and "met" or "NOT met", R * D, err))
end

---------------------------------------------------------------------------------------
-- Files
---------------------------------------------------------------------------------------

local CSV_HEADER = { "shape", "rows", "D", "variant", "lumus_us", "lumus_gbs", "copy_us",
  "copy_gbs", "pct_of_copy", "torch_us", "torch_gbs", "torch_copy_gbs", "speedup", "max_err",
  "mean_err", "invstd_rel_err", "error" }
if opt.csv then chart.write_csv(opt.csv, CSV_HEADER, results) end
if opt.small_csv and #small_results > 0 then
  chart.write_csv(opt.small_csv, { "shape", "rows", "D", "e2e_us", "e2e_p10_us", "e2e_p90_us",
    "return_us", "device_us", "torch_sync_us", "torch_chained_us" }, small_results)
end

if opt.svg then
  local cats, lum, cpy, tor, any_torch = {}, {}, {}, {}, false
  for i, res in ipairs(results) do
    cats[i], lum[i], cpy[i] = res.shape, res.lumus_gbs, res.copy_gbs
    tor[i] = type(res.torch_gbs) == "number" and res.torch_gbs or nil
    any_torch = any_torch or tor[i] ~= nil
  end
  local series = {
    { name = "lumus layer_norm_forward", values = lum, color = "#2f6db5" },
    { name = "copy ceiling (lumus.copy, same run)", values = cpy, color = "#9aa4b0" },
  }
  if any_torch then
    series[3] = { name = "PyTorch F.layer_norm", values = tor, color = "#e07b39" }
  end
  chart.write_svg(opt.svg, {
    title = "LayerNorm forward, float32 — " .. tostring(dev.name or "unknown device"),
    subtitle = ("%s · driver %s · median device time of %d calls · preset %s")
      :format(date, tostring(dev.driver_version or dev.driver or "?"), iters, preset_name),
    categories = cats, series = series,
    y_label = "GB/s", x_label = "shape (rows x D)",
    note = "GB/s counts x read + y written + weight/bias read + mean/invstd written; "
      .. "the copy moves x read + x written.",
  })
end
