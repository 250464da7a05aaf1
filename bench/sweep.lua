-- bench/sweep.lua: kernels over a seeded random sweep of shapes, each against the copy
-- ceiling measured in the same process (lumus.copy of x into a tensor of x's size, 2 x
-- bytes of x moved, as bench/layer_norm.lua measures it).
--
-- Shapes (rows x D, float32), drawn from --seed (printed; the same seed gives the same
-- list on any machine):
--   --count shapes: D log-uniform in 1..--max-d (2^20), every fourth D moved up to a
--     prime and every fourth made odd; rows so that x is log-uniform in
--     --min-mib..--max-mib (4 MiB..1 GiB);
--   --few shapes with fewer rows than the device's multiprocessors (lumus.device()'s
--     sm_count, else --sms): rows uniform in 1..SMs-1, D log-uniform in 2^14..--max-d.
-- The list goes to --write-shapes (CSV: seed,rows,D), which bench/torch_sweep.py reads,
-- so PyTorch runs the same shapes; --shapes FILE reads such a list instead of drawing.
--
-- Kernels (KERNELS below; --kernels picks some by name): LayerNorm forward, softmax,
-- log_softmax, sum and max with indices over the last dim, gelu over every element, in
-- float32, and LayerNorm, softmax, sum, max and gelu on x converted to float16. Each is
-- measured against the copy of x in its own dtype (same process), and gets a table and,
-- with --svg, a chart of its own. Adding one is an entry: its dtype, its bytes, and how to
-- prepare a call for a shape.
--
--   lua5.4 bench/sweep.lua [--seed N] [--count N] [--few N] [--sms N] [--min-mib N]
--       [--max-mib N] [--max-d N] [--kernels layer_norm,...] [--iters N] [--warmup N]
--       [--rounds N] [--write-shapes FILE] [--shapes FILE] [--shapes-only]
--       [--baseline torch_sweep.csv] [--csv FILE] [--svg FILE] [--check-rows N]
--       [--warm-seconds S]
--
-- LUA_PATH/LUA_CPATH as in bench/run_h200.sh; without them the checkout's lua/ and
-- build/ are used.

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"

local fmt = common.fmt

local USAGE = [==[
usage: lua5.4 bench/sweep.lua [--seed N] [--count N] [--few N] [--sms N] [--min-mib N]
  [--max-mib N] [--max-d N] [--kernels NAME,...] [--iters N] [--warmup N] [--rounds N]
  [--write-shapes FILE] [--shapes FILE] [--shapes-only] [--baseline torch_sweep.csv]
  [--csv FILE] [--svg FILE] [--check-rows N] [--warm-seconds S]]==]

local known = {}
for name in ([[seed count few sms min-mib max-mib max-d kernels iters warmup rounds
  write-shapes shapes shapes-only baseline csv svg check-rows warm-seconds]]):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, { ["shapes-only"] = true }, USAGE)

local lumus = common.load_lumus()
local ref = common.load_reference()
local dev_line, dev = common.device_line(lumus)

local MIB = 1024 * 1024
local seed = common.int_opt(opt.seed, os.time() % 1000000)
local count = common.int_opt(opt.count, 32)
local few = common.int_opt(opt.few, 6)
local sms = common.int_opt(opt.sms, (dev.sm_count and dev.sm_count > 0) and dev.sm_count or 132)
local min_mib = tonumber(opt.min_mib or 4)
local max_mib = tonumber(opt.max_mib or 1024)
local max_d = common.int_opt(opt.max_d, 1 << 20)
local cpu = dev.kind == "cpu"
local iters = common.int_opt(opt.iters, cpu and 3 or 30)
local warmup = common.int_opt(opt.warmup, cpu and 1 or 5)
local rounds = common.int_opt(opt.rounds, cpu and 1 or 2)
local check_rows = common.int_opt(opt.check_rows, 2)
-- Back-to-back calls before each measurement: the rounds alternate kernels without a
-- pause, so the clocks stay up and a short warm phase does (the default 0.25 s per call
-- made a 38-shape sweep of 13 kernel and copy timings take over 5 minutes).
common.WARM_SECONDS = tonumber(opt.warm_seconds or 0.05)
local EPS = 1e-5

---------------------------------------------------------------------------------------
-- Shapes
---------------------------------------------------------------------------------------

local function is_prime(n)
  if n < 2 then return false end
  if n % 2 == 0 then return n == 2 end
  for f = 3, math.floor(math.sqrt(n)), 2 do
    if n % f == 0 then return false end
  end
  return true
end

-- The nearest prime at or above n, or below it where that passes `hi`.
local function prime_near(n, hi)
  local p = n
  while not is_prime(p) do p = p + 1 end
  if p <= hi then return p end
  p = n
  while p > 2 and not is_prime(p) do p = p - 1 end
  return p
end

-- Draws the shape list from `seed` with Lua's own generator (xoshiro256**, the same
-- sequence on every machine for a seed).
local function draw_shapes()
  math.randomseed(seed)
  local function log_uniform(lo, hi) return math.exp(math.log(lo) + math.random() * (math.log(hi) - math.log(lo))) end
  local function shape_d(i, lo)
    local d = math.min(max_d, math.max(1, math.floor(log_uniform(lo, max_d + 1))))
    if i % 4 == 1 then d = prime_near(d, max_d)
    elseif i % 4 == 2 then d = d | 1; if d > max_d then d = d - 2 end end
    return math.max(1, d)
  end
  local list = {}
  local lo_bytes, hi_bytes = min_mib * MIB, max_mib * MIB
  for i = 1, count do
    local d = shape_d(i, 1)
    local r = math.floor(log_uniform(lo_bytes, hi_bytes) / (4 * d) + 0.5)
    if 4 * r * d > hi_bytes then r = hi_bytes // (4 * d) end
    if 4 * r * d < lo_bytes then r = -(-lo_bytes // (4 * d)) end
    list[#list + 1] = { math.max(1, math.floor(r)), d }
  end
  for j = 1, few do
    local r = math.random(1, math.max(1, sms - 1))
    list[#list + 1] = { r, shape_d(j, math.min(1 << 14, max_d)), few_rows = true }
  end
  return list
end

local function read_shapes(path)
  local header, rows = chart.read_csv(path)
  if not header then io.stderr:write("sweep: cannot read ", path, ": ", tostring(rows), "\n"); os.exit(2) end
  local list = {}
  for _, r in ipairs(rows) do
    list[#list + 1] = { math.tointeger(r.rows), math.tointeger(r.D) }
    if r.seed then seed = math.tointeger(r.seed) end
  end
  return list
end

local shapes = opt.shapes and read_shapes(opt.shapes) or draw_shapes()
for _, s in ipairs(shapes) do
  s.rows, s.D = s[1], s[2]
  s.mib = 4 * s.rows * s.D / MIB
  s.few_rows = s.rows < sms
  s.name = s.rows .. "x" .. s.D
end
table.sort(shapes, function(a, b)
  if a.few_rows ~= b.few_rows then return b.few_rows end
  return a.mib < b.mib
end)

if opt.write_shapes then
  chart.write_csv(opt.write_shapes, { "seed", "rows", "D" },
    (function() local t = {} for i, s in ipairs(shapes) do t[i] = { seed, s.rows, s.D } end return t end)())
end
print(("# lumus shape sweep — %s"):format(dev_line))
local n_few = 0
for _, s in ipairs(shapes) do if s.few_rows then n_few = n_few + 1 end end
print(("seed %d (--seed %d repeats it): %d shapes, %d of them with fewer rows than the %d multiprocessors"):format(
  seed, seed, #shapes, n_few, sms))
if opt.shapes_only then
  for _, s in ipairs(shapes) do print(("%s (%.1f MiB)"):format(s.name, s.mib)) end
  os.exit(0)
end

---------------------------------------------------------------------------------------
-- Kernels: name, bytes moved, and prepare(shape, x, data) -> { run = fn, form = string,
-- check = fn -> max error or nil, close = fn }. `data` holds x's random block.
---------------------------------------------------------------------------------------

local config_fn = lumus.tune and lumus.tune.layer_norm

-- Row i (0-based) of x's values as Lua numbers: float32 rows from the random block, others
-- read back through a float32 conversion (the values the kernel saw).
local function input_row(data, dtype, row)
  if dtype == "float32" then return common.unpack_floats(data.block, (row % data.k) * data.D, data.D) end
  return common.unpack_floats(data.x_of(dtype):narrow(1, row + 1, 1):to("float32"):to_bytes())
end

local function output_row(t, row)
  return common.unpack_floats(t:narrow(1, row + 1, 1):to("float32"):to_bytes())
end

-- Rows spread from the first to the last, --check-rows of them.
local function check_rows_of(R)
  local rows, nc = {}, math.min(check_rows, R)
  for j = 0, nc - 1 do rows[#rows + 1] = nc > 1 and (j * (R - 1)) // (nc - 1) or 0 end
  return rows
end

-- The largest |got - want| over the checked rows (inf for a NaN where a number was due).
local function max_error(R, rowfn)
  local e = 0
  for _, row in ipairs(check_rows_of(R)) do
    local got, want = rowfn(row)
    for i = 1, #want do
      local d = math.abs(got[i] - want[i])
      if d ~= d then return math.huge end
      if d > e then e = d end
    end
  end
  return e
end

local SIZE = { float32 = 4, float16 = 2 }

-- A kernel's name: the op's for float32, with the dtype after it otherwise.
local function kernel_name(base, dtype) return dtype == "float32" and base or base .. "_" .. dtype end

local function layer_norm_kernel(dtype)
  local es = SIZE[dtype]
  return {
    name = kernel_name("layer_norm", dtype),
    title = "LayerNorm forward, " .. dtype,
    dtype = dtype,
    -- x read, y written, weight and bias read, float32 mean and invstd written.
    bytes = function(R, D) return es * (2 * R * D + 2 * D) + 8 * R end,
    prepare = function(s, x, data)
      local R, D = s.rows, s.D
      local wbytes = common.random_bytes(data.gen, D, 0.1, 1.0)
      local bbytes = common.random_bytes(data.gen, D, 0.1, 0.0)
      local w, b = lumus.from_bytes(wbytes, { D }):to(dtype), lumus.from_bytes(bbytes, { D }):to(dtype)
      local y, m, r = data.out(dtype), data.vec("float32", 1), data.vec("float32", 2)
      local opts = { out = y, mean = m, invstd = r }
      local form = "-"
      if config_fn and dtype == "float32" then
        local c = config_fn(D, nil, R)
        form = c.variant .. "/" .. c.workgroup .. "x" .. c.items .. (c.parts and ("/p" .. c.parts) or "")
          .. (c.masked and "/masked" or (c.vec == 1 and "/scalar" or ""))
      end
      local k = { form = form }
      function k.run() lumus.layer_norm_forward(x, w, b, EPS, opts) end
      function k.check()
        if not ref then return nil end
        local wv = common.unpack_floats(w:to("float32"):to_bytes())
        local bv = common.unpack_floats(b:to("float32"):to_bytes())
        return max_error(R, function(row)
          return output_row(y, row), ref.layer_norm_forward(input_row(data, dtype, row), wv, bv, EPS)
        end)
      end
      function k.close() w:free(); b:free() end
      return k
    end,
  }
end

-- An op whose output has x's shape (x read, y written), checked row by row against
-- ref[fname]: softmax and log_softmax over the last dim, gelu over every element (a count
-- that need not be a multiple of 4).
local function map_kernel(fname, title, extra, dtype)
  local es = SIZE[dtype]
  return {
    name = kernel_name(fname, dtype),
    title = title .. ", " .. dtype,
    dtype = dtype,
    bytes = function(R, D) return 2 * es * R * D end,
    prepare = function(s, x, data)
      local y = data.out(dtype)
      local opts = { out = y }
      for key, v in pairs(extra) do opts[key] = v end
      local k = { form = "-" }
      function k.run() lumus[fname](x, opts) end
      function k.check()
        if not ref then return nil end
        return max_error(s.rows, function(row) return output_row(y, row), ref[fname](input_row(data, dtype, row)) end)
      end
      function k.close() end
      return k
    end,
  }
end

-- sum over the last dim (x read, R sums written); checked against the float64 sum, error
-- relative to the sum of |x| (the bound compensated summation keeps).
local function sum_kernel(dtype)
  local es = SIZE[dtype]
  return {
    name = kernel_name("sum", dtype),
    title = "sum over the last dim, " .. dtype,
    dtype = dtype,
    bytes = function(R, D) return es * (R * D + R) end,
    prepare = function(s, x, data)
      local y = data.vec(dtype, 1)
      local opts = { dim = 2, out = y }
      local k = { form = "-" }
      function k.run() lumus.sum(x, opts) end
      function k.check()
        return max_error(s.rows, function(row)
          local v, t, a = input_row(data, dtype, row), 0, 0
          for i = 1, #v do t, a = t + v[i], a + math.abs(v[i]) end
          return { (output_row(y, row)[1] - t) / math.max(a, 1e-30) }, { 0 }
        end)
      end
      function k.close() end
      return k
    end,
  }
end

-- max over the last dim with indices: x read, R values and R int32 indices written;
-- the check counts a wrong index as error 1.
local function max_kernel(dtype)
  local es = SIZE[dtype]
  return {
    name = kernel_name("max", dtype),
    title = "max with indices over the last dim, " .. dtype,
    dtype = dtype,
    bytes = function(R, D) return es * (R * D + R) + 4 * R end,
    prepare = function(s, x, data)
      local v, ix = data.vec(dtype, 1), data.vec("int32", 1)
      local opts = { dim = 2, out = v, indices = ix }
      local k = { form = "-" }
      function k.run() lumus.max(x, opts) end
      function k.check()
        return max_error(s.rows, function(row)
          local xs = input_row(data, dtype, row)
          local best = 1
          for i = 2, #xs do if xs[i] > xs[best] then best = i end end
          local got_i = string.unpack("<i4", ix:to_bytes(row + 1, 1))
          return { output_row(v, row)[1], got_i == best and 0 or 1 }, { xs[best], 0 }
        end)
      end
      function k.close() end
      return k
    end,
  }
end

local function softmax_kernel(dtype) return map_kernel("softmax", "softmax over the last dim", { dim = 2 }, dtype) end
local function log_softmax_kernel(dtype)
  return map_kernel("log_softmax", "log_softmax over the last dim", { dim = 2 }, dtype)
end
local function gelu_kernel(dtype) return map_kernel("gelu", "gelu (erf) over every element", {}, dtype) end

local KERNELS = {
  layer_norm_kernel("float32"), softmax_kernel("float32"), log_softmax_kernel("float32"),
  sum_kernel("float32"), max_kernel("float32"), gelu_kernel("float32"),
  layer_norm_kernel("float16"), softmax_kernel("float16"), sum_kernel("float16"),
  max_kernel("float16"), gelu_kernel("float16"),
}

local selected = {}
do
  local want = {}
  for name in tostring(opt.kernels or ""):gmatch("[^,%s]+") do want[name] = true end
  for _, kern in ipairs(KERNELS) do
    if not opt.kernels or want[kern.name] then selected[#selected + 1] = kern; want[kern.name] = nil end
  end
  local unknown = next(want)
  if unknown then io.stderr:write("sweep: unknown kernel ", unknown, "\n"); os.exit(2) end
end

-- PyTorch's figures (bench/torch_sweep.py) keyed by shape name.
local baseline = {}
if opt.baseline then
  local header, rows = chart.read_csv(opt.baseline)
  if header then
    for _, r in ipairs(rows) do baseline[tostring(r.rows) .. "x" .. tostring(r.D)] = r end
  else
    io.stderr:write("sweep: warning: cannot read ", opt.baseline, ": ", tostring(rows), "\n")
  end
end

---------------------------------------------------------------------------------------
-- Measurement
---------------------------------------------------------------------------------------

local gen = common.normal_gen(seed, ref)

local function measure(s)
  local R, D = s.rows, s.D
  local xbytes, block, k = common.matrix_bytes(gen, R, D)
  local x = lumus.from_bytes(xbytes, { R, D })
  xbytes = nil                                                -- luacheck: ignore
  collectgarbage()
  -- x in each dtype the selected kernels take, and outputs shared by the kernels of a shape
  -- (one [R, D] tensor per dtype, [R] vectors per dtype and slot), made on first use.
  local xs, pool = { float32 = x }, {}
  local data = { gen = gen, block = block, k = k, D = D }
  function data.x_of(dtype)
    xs[dtype] = xs[dtype] or x:to(dtype)
    return xs[dtype]
  end
  local function pooled(key, shape, dtype)
    pool[key] = pool[key] or lumus.empty(shape, { dtype = dtype })
    return pool[key]
  end
  function data.out(dtype) return pooled("out " .. dtype, { R, D }, dtype) end
  function data.vec(dtype, slot) return pooled(("vec %s %d"):format(dtype, slot), { R }, dtype) end
  -- The copy ceiling of each dtype: lumus.copy of x in that dtype, 2 x its bytes moved.
  local copies, prepared = {}, {}
  for i, kern in ipairs(selected) do
    local xd = data.x_of(kern.dtype)
    if not copies[kern.dtype] then
      local c = pooled("copy " .. kern.dtype, { R, D }, kern.dtype)
      copies[kern.dtype] = { run = function() lumus.copy(xd, { out = c }) end, t = math.huge,
                             bytes = 2 * SIZE[kern.dtype] * R * D }
    end
    prepared[i] = kern.prepare(s, xd, data)
  end
  -- Alternating rounds of the copies and each kernel, each keeping its best median: a
  -- phase that slows one round alone cannot skew the ratios.
  local t = {}
  for _ = 1, rounds do
    for _, c in pairs(copies) do c.t = math.min(c.t, (common.device_time(lumus, c.run, iters, warmup))) end
    for i, p in ipairs(prepared) do
      t[i] = math.min(t[i] or math.huge, (common.device_time(lumus, p.run, iters, warmup)))
    end
  end
  s.copy_us, s.copy_gbs = {}, {}
  for dtype, c in pairs(copies) do
    s.copy_us[dtype] = c.t * 1e6
    s.copy_gbs[dtype] = c.bytes / c.t / 1e9
  end
  s.results = {}
  for i, kern in ipairs(selected) do
    local p = prepared[i]
    p.run()
    local res = { form = p.form, us = t[i] * 1e6 }
    res.gbs = kern.bytes(R, D) / t[i] / 1e9
    res.pct = 100 * res.gbs / s.copy_gbs[kern.dtype]
    res.err = p.check and p.check() or nil
    local bl = baseline[s.name]
    if bl and type(bl[kern.name .. "_us"]) == "number" then
      res.torch_us = bl[kern.name .. "_us"]
      res.torch_pct = bl[kern.name .. "_pct"]
      res.speedup = res.torch_us / res.us
    end
    s.results[kern.name] = res
    p.close()
  end
  for _, tensor in pairs(pool) do tensor:free() end
  for _, tensor in pairs(xs) do tensor:free() end
  collectgarbage()
end

---------------------------------------------------------------------------------------
-- Report
---------------------------------------------------------------------------------------

print(("%s; median of %d device-time samples (lumus.gpu_time) after %d warm-up calls, best of %d "
  .. "rounds alternating copy and kernels"):format(os.date("!%Y-%m-%d %H:%M UTC"), iters, warmup, rounds))
print("% of copy: the kernel's GB/s (bytes it must move) over the copy's (x read + x written), same run; "
  .. "PyTorch's % is of its own same-run copy (bench/torch_sweep.py).")
print()

for i, s in ipairs(shapes) do
  local ok, err = pcall(measure, s)
  if not ok then
    s.error = tostring(err)
    io.stderr:write(("sweep: %s failed: %s\n"):format(s.name, s.error))
    collectgarbage()
  end
  -- Each shape's figures as it finishes, so a run cut short still reports them.
  local parts = {}
  for _, kern in ipairs(selected) do
    local r = s.results and s.results[kern.name]
    parts[#parts + 1] = ("%s %s%%"):format(kern.name, r and fmt(r.pct, 1) or "-")
  end
  io.stderr:write(("sweep: %d/%d %s: %s\n"):format(i, #shapes, s.name, table.concat(parts, ", ")))
end

-- x's MiB in a kernel's dtype (the buckets below are by the bytes the kernel reads).
local function kernel_mib(kern, s) return s.mib * SIZE[kern.dtype] / 4 end

-- One table per kernel, rows the shapes.
local header = { "#", "rows", "D", "x MiB", "copy GB/s", "µs", "GB/s", "% of copy", "form", "max err",
                 "torch µs", "torch % of copy", "speedup" }
for _, kern in ipairs(selected) do
  print(("## %s"):format(kern.title))
  print()
  local lines = {}
  for i, s in ipairs(shapes) do
    local r = s.results and s.results[kern.name] or {}
    lines[#lines + 1] = { i, s.rows, s.D, fmt(kernel_mib(kern, s), 1), fmt(s.copy_gbs and s.copy_gbs[kern.dtype]),
      fmt(r.us), fmt(r.gbs), fmt(r.pct, 1), r.form or (s.error and "error") or "-",
      r.err and string.format("%.2g", r.err) or "-", fmt(r.torch_us), fmt(r.torch_pct, 1),
      r.speedup and string.format("%.2fx", r.speedup) or "-" }
  end
  print(common.markdown_table(header, lines))
  print()
end

-- Per kernel: the targets' buckets (x >= 64 MiB, 4-64 MiB, fewer rows than SMs).
for _, kern in ipairs(selected) do
  local buckets = {
    { "x >= 64 MiB", function(s) return not s.few_rows and kernel_mib(kern, s) >= 64 end },
    { "4 MiB <= x < 64 MiB", function(s) local m = kernel_mib(kern, s) return not s.few_rows and m >= 4 and m < 64 end },
    { ("rows < %d SMs"):format(sms), function(s) return s.few_rows end },
  }
  print(("%s:"):format(kern.title))
  for _, b in ipairs(buckets) do
    local n, lo, lo_name, sum = 0, math.huge, "-", 0
    for _, s in ipairs(shapes) do
      local r = s.results and s.results[kern.name]
      if r and b[2](s) then
        n, sum = n + 1, sum + r.pct
        if r.pct < lo then lo, lo_name = r.pct, s.name end
      end
    end
    if n > 0 then
      print(("  %-22s %2d shapes: min %.1f%% of copy (%s), mean %.1f%%"):format(b[1], n, lo, lo_name, sum / n))
    end
  end
  local slower = {}
  for _, s in ipairs(shapes) do
    local r = s.results and s.results[kern.name]
    if r and r.speedup and r.speedup < 1 then slower[#slower + 1] = ("%s %.2fx"):format(s.name, r.speedup) end
  end
  if next(baseline) then
    print(("  slower than PyTorch on %d shapes%s"):format(#slower, #slower > 0 and (": " .. table.concat(slower, ", ")) or ""))
  end
end

if opt.csv then
  local cols, dtypes = { "rows", "D", "mib" }, {}
  for _, kern in ipairs(selected) do
    if not dtypes[kern.dtype] then
      dtypes[kern.dtype] = true
      cols[#cols + 1] = "copy_" .. kern.dtype .. "_us"
      cols[#cols + 1] = "copy_" .. kern.dtype .. "_gbs"
    end
  end
  for _, kern in ipairs(selected) do
    for _, h in ipairs { "us", "gbs", "pct", "form", "max_err", "torch_us", "torch_pct", "speedup" } do
      cols[#cols + 1] = kern.name .. "_" .. h
    end
  end
  local out = {}
  for i, s in ipairs(shapes) do
    local row = { rows = s.rows, D = s.D, mib = s.mib }
    for dtype in pairs(dtypes) do
      row["copy_" .. dtype .. "_us"] = s.copy_us and s.copy_us[dtype]
      row["copy_" .. dtype .. "_gbs"] = s.copy_gbs and s.copy_gbs[dtype]
    end
    for _, kern in ipairs(selected) do
      local r = s.results and s.results[kern.name] or {}
      local p = kern.name .. "_"
      row[p .. "us"], row[p .. "gbs"], row[p .. "pct"], row[p .. "form"] = r.us, r.gbs, r.pct, r.form
      row[p .. "max_err"], row[p .. "torch_us"], row[p .. "torch_pct"], row[p .. "speedup"] = r.err, r.torch_us, r.torch_pct, r.speedup
    end
    out[i] = row
  end
  chart.write_csv(opt.csv, cols, out)
end

-- One chart per kernel: --svg FILE itself when one kernel is selected, else FILE with
-- "-<kernel>" before its extension for each.
local function svg_path(kern)
  if #selected == 1 then return opt.svg end
  local stem, ext = opt.svg:match("^(.*)(%.[^./]*)$")
  return (stem or opt.svg) .. "-" .. kern.name .. (ext or ".svg")
end

if opt.svg then
  local cats = {}
  for i, s in ipairs(shapes) do cats[i] = s.name end
  for _, kern in ipairs(selected) do
    local lum, tor, any = {}, {}, false
    for i, s in ipairs(shapes) do
      local r = s.results and s.results[kern.name] or {}
      lum[i] = r.pct
      tor[i] = type(r.torch_pct) == "number" and r.torch_pct or nil
      any = any or tor[i] ~= nil
    end
    local series = { { name = "lumus " .. kern.name, values = lum, color = "#2f6db5" } }
    if any then series[2] = { name = "PyTorch " .. kern.name, values = tor, color = "#e07b39" } end
    chart.write_svg(svg_path(kern), {
      title = "Shape sweep, " .. kern.title .. " — " .. tostring(dev.name or "unknown device"),
      subtitle = ("%s · seed %d · median device time of %d calls"):format(os.date("!%Y-%m-%d %H:%M UTC"), seed, iters),
      categories = cats, series = series,
      y_label = "% of same-run copy", x_label = ("shape (rows x D), by size; the last %d have fewer rows than SMs"):format(n_few),
      note = "Each bar: the kernel's GB/s (bytes it must move) over the copy's GB/s (x read + x written, x in the "
        .. "kernel's dtype) measured in the same process; PyTorch against its own copy (y.copy_(x)).",
    })
  end
end
