-- bench/elementwise.lua: elementwise ops, softmax and sum, float32, against a same-run
-- copy ceiling.
--
-- For each case: median device time (lumus.gpu_time, timestamp queries) of one op into a
-- preallocated output; GB/s counting each tensor read once and each output written once
-- (add: 3 x 4n bytes, unary ops: 2 x 4n, softmax: 2 x 4RD, sum: 4RD + 4R); "% of copy"
-- against lumus.copy of n floats (2 x 4n bytes) timed in the same run (the faster of a
-- run before and one after the elementwise cases); and a check of
-- sample elements (first and last rows or 4096 elements) against lumus.reference.
--
--   lua5.4 bench/elementwise.lua [--preset h200|lavapipe] [--n FLOATS] [--rows-d RxD]
--       [--softmax RxD,...] [--iters N] [--warmup N] [--csv FILE] [--baseline FILE]
--       [--ops PATTERN,...]
--
-- --ops keeps only the cases whose name contains one of the comma-separated (plain)
-- patterns, e.g. --ops 'pow,log,tanh,column,n - 3'; the copy ceilings always run.
--
-- Then exp, log, tanh, sigmoid, silu, pow, maximum, clamp, gt, where, a column broadcast,
-- sin, cos, expm1, log1p, exp2, log2, log10, tan, atan, atan2, floor, round, sign, square, reciprocal
-- and a length that is not a multiple of 4, in float32 and float16, each against the
-- copy of its own dtype, with PyTorch's GB/s from --baseline (bench/torch_elementwise.py's
-- CSV of the same run) beside them.
--
-- Presets (explicit options override them): h200 (64M floats, softmax 8192x4096 and
-- more; well under a minute there) is the default on a GPU, lavapipe (8M floats, rows of
-- 8M floats) on a CPU device. LUA_PATH/LUA_CPATH as in bench/run_h200.sh; without them the checkout's
-- lua/ and build/ are used.

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"

local fmt = common.fmt

local USAGE = [==[
usage: lua5.4 bench/elementwise.lua [--preset h200|lavapipe] [--n FLOATS] [--rows-d RxD]
  [--softmax RxD,...] [--iters N] [--warmup N] [--csv FILE] [--baseline torch_elementwise.csv]
  [--ops PATTERN,...]]==]

local known = {}
for name in ("preset n rows-d softmax iters warmup csv seed baseline ops"):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, {}, USAGE)

local lumus = common.load_lumus()
local ref = common.load_reference()
local dev_line, dev = common.device_line(lumus)

local PRESETS = {
  -- 64M floats = 256 MiB per tensor: far past every cache, as FACTS.md's PyTorch runs.
  h200 = { n = 64 << 20, rows_d = "16384x4096", softmax = "8192x4096,65536x128,1024x65536",
           iters = 50, warmup = 5 },
  -- 8M floats = 32 MiB per tensor, past the CPU's caches.
  lavapipe = { n = 8 << 20, rows_d = "2048x4096", softmax = "2048x4096,16384x128,64x65536",
               iters = 5, warmup = 2 },
}
local preset_name = opt.preset or (dev.kind == "cpu" and "lavapipe") or "h200"
local preset = PRESETS[preset_name]
if not preset then io.stderr:write("unknown preset ", preset_name, "\n", USAGE, "\n"); os.exit(2) end
local N = common.int_opt(opt.n, preset.n)
local ROWS_D = common.parse_shapes(opt.rows_d or preset.rows_d)[1]
local SOFTMAX = common.parse_shapes(opt.softmax or preset.softmax)
local iters = common.int_opt(opt.iters, preset.iters)
local warmup = common.int_opt(opt.warmup, preset.warmup)
local gen = common.normal_gen(common.int_opt(opt.seed, 20261202), ref)

local function device_time(fn) return (common.device_time(lumus, fn, iters, warmup)) end

-- Whether the case `name` runs (--ops).
local function wanted(name)
  if not opt.ops then return true end
  for pat in opt.ops:gmatch("[^,]+") do
    if name:find(pat, 1, true) then return true end
  end
  return false
end

-- An R x D tensor of N(0,1)-ish values (rows repeat a random block: see common.matrix_bytes)
-- and a function giving the float32 values of row r (0-based).
local function matrix(R, D)
  local bytes, block, k = common.matrix_bytes(gen, R, D)
  local t = lumus.from_bytes(bytes, { R, D })
  return t, function(r) return common.unpack_floats(block, (r % k) * D, D) end
end

local function read_row(t, D, r) return common.unpack_floats(t:to_bytes(r * D + 1, D)) end

local function max_err(got, want)
  local e = 0
  for i = 1, #want do
    local d = math.abs(got[i] - want[i]) / math.max(1, math.abs(want[i]))
    if d ~= d then return math.huge end
    if d > e then e = d end
  end
  return e
end

local results = {}
local function record(r) results[#results + 1] = r; collectgarbage() end

-- Elementwise cases on N floats, viewed as rows of 4096 for the sample checks.
local D = 4096
local R = N // D
local x, xrow = matrix(R, D)
local y, yrow = matrix(R, D)
local out = lumus.empty({ R, D })
local cp = lumus.empty({ R, D })

-- The ceiling is timed before and after the elementwise cases and the faster time kept,
-- so a clock ramp or a busy moment (lavapipe shares its CPU) does not lower it.
local function copy_time() return device_time(function() lumus.copy(x, { out = cp }) end) end
local t_copy = copy_time()

-- name, bytes moved, the op, the reference of one row from its inputs.
local CASES = {
  { "add", 3, function() lumus.add(x, y, { out = out }) end,
    function(a, b) return ref.add(a, b) end },
  { "mul by a number", 2, function() lumus.mul(x, 1.5, { out = out }) end,
    function(a) return ref.mul(a, 1.5) end },
  { "relu", 2, function() lumus.relu(x, { out = out }) end, function(a) return ref.relu(a) end },
  { "gelu (erf)", 2, function() lumus.gelu(x, { out = out }) end, function(a) return ref.gelu(a) end },
  { "gelu (tanh)", 2, function() lumus.gelu(x, { approximate = "tanh", out = out }) end,
    function(a) return ref.gelu(a, "tanh") end },
}
for _, c in ipairs(CASES) do
  if not wanted(c[1]) then goto next_case end
  local t = device_time(c[3])
  local gbs = c[2] * 4 * N / t / 1e9
  local e = 0
  if ref then
    for _, r in ipairs { 0, R - 1 } do e = math.max(e, max_err(read_row(out, D, r), c[4](xrow(r), yrow(r)))) end
  end
  record({ op = c[1], shape = R .. "x" .. D, us = t * 1e6, gbs = gbs, err = ref and e or nil })
  ::next_case::
end
t_copy = math.min(t_copy, copy_time())
local copy_gbs = 2 * 4 * N / t_copy / 1e9
table.insert(results, 1, { op = "copy (ceiling)", shape = R .. "x" .. D, us = t_copy * 1e6, gbs = copy_gbs,
                           err = max_err(read_row(cp, D, R - 1), xrow(R - 1)) })

-- The elementwise ops of issue 15 in float32 and float16, each against the copy of its
-- own dtype (timed before and after, the faster kept), on positive inputs (log, pow):
-- GB/s counts inputs and the output once (a bool element as one byte).
local baseline = {}
if opt.baseline then
  local f = assert(io.open(opt.baseline))
  f:read("l")
  for line in f:lines() do
    local op, dtype, _, gbs = line:match("^([^,]*),([^,]*),([^,]*),([^,]*)")
    if op then baseline[op .. "|" .. dtype] = tonumber(gbs) end
  end
  f:close()
end
local ew_rows, ew_csv = {}, {}
do
  local xa = lumus.add(lumus.abs(x), 0.1)
  for _, dtype in ipairs { "float32", "float16" } do
    local es = dtype == "float32" and 4 or 2
    local xd = dtype == "float32" and xa or xa:half()
    local yd = dtype == "float32" and y or y:half()
    local od = lumus.empty({ R, D }, { dtype = dtype })
    local cpd = lumus.empty({ R, D }, { dtype = dtype })
    local bout = lumus.empty({ R, D }, { dtype = "bool" })
    local mask = lumus.gt(yd, 0)
    local col = xd:narrow(2, 1, 1):contiguous()                     -- [R, 1]
    local flat_n = N - 3                                             -- the vec4 body and a 1-3 tail
    -- arguments past pi/4 up to 1e4: sin's reduction in integers for most elements
    -- (made before timing, as bench/torch_elementwise.py does)
    local xbig = lumus.mul(xd, 2500)
    local xflat, oflat = xd:view({ N }):narrow(1, 1, flat_n), od:view({ N }):narrow(1, 1, flat_n)
    local function ceiling() return device_time(function() lumus.copy(xd, { out = cpd }) end) end
    local t_c = ceiling()
    local cases = {
      { "add", 3, function() lumus.add(xd, yd, { out = od }) end },
      { "exp", 2, function() lumus.exp(xd, { out = od }) end },
      { "log", 2, function() lumus.log(xd, { out = od }) end },
      { "tanh", 2, function() lumus.tanh(xd, { out = od }) end },
      { "sigmoid", 2, function() lumus.sigmoid(xd, { out = od }) end },
      { "silu", 2, function() lumus.silu(xd, { out = od }) end },
      { "pow 1.7", 2, function() lumus.pow(xd, 1.7, { out = od }) end },
      { "maximum", 3, function() lumus.maximum(xd, yd, { out = od }) end },
      { "clamp", 2, function() lumus.clamp(xd, -1, 1, { out = od }) end },
      { "gt (bool out)", 2 + 1 / es, function() lumus.gt(xd, yd, { out = bout }) end },
      { "where", 3 + 1 / es, function() lumus.where(mask, xd, yd, { out = od }) end },
      { "add [R,1] column", 2, function() lumus.add(xd, col, { out = od }) end },
      { "mul, n - 3 elements", 2, function() lumus.mul(xflat, 1.5, { out = oflat }) end },
      { "sin", 2, function() lumus.sin(xd, { out = od }) end },
      { "cos", 2, function() lumus.cos(xd, { out = od }) end },
      { "sin, |x| up to 1e4", 2, function() lumus.sin(xbig, { out = od }) end },
      { "expm1", 2, function() lumus.expm1(xd, { out = od }) end },
      { "log1p", 2, function() lumus.log1p(xd, { out = od }) end },
      { "exp2", 2, function() lumus.exp2(xd, { out = od }) end },
      { "log2", 2, function() lumus.log2(xd, { out = od }) end },
      { "log10", 2, function() lumus.log10(xd, { out = od }) end },
      { "tan", 2, function() lumus.tan(xd, { out = od }) end },
      { "atan", 2, function() lumus.atan(xd, { out = od }) end },
      { "atan2", 3, function() lumus.atan2(xd, yd, { out = od }) end },
      { "floor", 2, function() lumus.floor(xd, { out = od }) end },
      { "round", 2, function() lumus.round(xd, { out = od }) end },
      { "sign", 2, function() lumus.sign(xd, { out = od }) end },
      { "square", 2, function() lumus.square(xd, { out = od }) end },
      { "reciprocal", 2, function() lumus.reciprocal(xd, { out = od }) end },
    }
    local kept = {}
    for _, c in ipairs(cases) do
      if wanted(c[1]) then kept[#kept + 1] = c end
    end
    cases = kept
    local timed = {}
    for i, c in ipairs(cases) do timed[i] = device_time(c[3]) end
    t_c = math.min(t_c, ceiling())
    local copy_d = 2 * es * N / t_c / 1e9
    ew_rows[#ew_rows + 1] = { "copy (ceiling)", dtype, fmt(t_c * 1e6), fmt(copy_d), "100.0",
                              baseline["copy (ceiling)|" .. dtype] and fmt(baseline["copy (ceiling)|" .. dtype]) or "-" }
    for i, c in ipairs(cases) do
      local gbs = c[2] * es * N / timed[i] / 1e9
      local tb = baseline[c[1] .. "|" .. dtype]
      ew_rows[#ew_rows + 1] = { c[1], dtype, fmt(timed[i] * 1e6), fmt(gbs), fmt(100 * gbs / copy_d, 1), tb and fmt(tb) or "-" }
      ew_csv[#ew_csv + 1] = ("%s,%s,%.3f,%.1f,%.1f,%s\n"):format(c[1], dtype, timed[i] * 1e6, gbs, 100 * gbs / copy_d,
                                                                 tb and ("%.1f"):format(tb) or "")
    end
    -- a sample check: the last row of exp against the reference on the values used
    lumus.exp(xd, { out = od })
    local xs = xd:narrow(1, R, 1):to_table()[1]
    local got = od:narrow(1, R, 1):to_table()[1]
    local e = max_err(got, ref and ref.exp(xs) or got)
    ew_rows[#ew_rows + 1] = { "(exp, last row)", dtype, "-", "-", "-", ("max err %.1e"):format(e) }
    for _, t in ipairs { od, cpd, bout, mask, col } do t:free() end
    if dtype == "float16" then xd:free(); yd:free() end
  end
  xa:free()
end

x:free(); y:free(); out:free(); cp:free()

-- Bias add: [R, D] + [D] (the bias read once from memory, then from cache).
if wanted("add [D] bias") or wanted("sum") then
  local br, bd = ROWS_D[1], ROWS_D[2]
  local a, arow = matrix(br, bd)
  local bbytes = common.random_bytes(gen, bd)
  local b = lumus.from_bytes(bbytes, { bd })
  local o = lumus.empty({ br, bd })
  local t = device_time(function() lumus.add(a, b, { out = o }) end)
  local bv = common.unpack_floats(bbytes)
  local e = ref and max_err(read_row(o, bd, br - 1), ref.add(arow(br - 1), bv)) or nil
  record({ op = "add [D] bias", shape = br .. "x" .. bd, us = t * 1e6,
           gbs = 4 * (2 * br * bd + bd) / t / 1e9, err = e })
  -- sum over rows of the same tensor: reads 4RD, writes 4R.
  local s = lumus.empty({ br })
  local ts = device_time(function() lumus.sum(a, { dim = -1, out = s }) end)
  local want = ref and ref.sum(arow(br - 1))[1]
  local got = common.unpack_floats(s:to_bytes(br, 1))[1]
  record({ op = "sum", shape = br .. "x" .. bd, us = ts * 1e6, gbs = 4 * (br * bd + br) / ts / 1e9,
           err = ref and math.abs(got - want) / math.max(1, math.abs(want)) or nil })
  a:free(); b:free(); o:free(); s:free()
end

for _, sh in ipairs(wanted("softmax") and SOFTMAX or {}) do
  local sr, sd = sh[1], sh[2]
  local a, arow = matrix(sr, sd)
  local o = lumus.empty({ sr, sd })
  local t = device_time(function() lumus.softmax(a, { out = o }) end)
  local e = 0
  if ref then
    for _, r in ipairs { 0, sr - 1 } do e = math.max(e, max_err(read_row(o, sd, r), ref.softmax(arow(r)))) end
  end
  local cfg = lumus.tune.rows(sd)
  local variant = cfg.rows_per_group > 1 and ("subgroup x%d"):format(cfg.items)
    or ("group %dx%d%s"):format(cfg.workgroup, cfg.items, cfg.workgroup * cfg.items * cfg.vec < sd and " stream" or "")
  record({ op = "softmax", shape = sh.name, variant = variant,
           us = t * 1e6, gbs = 2 * 4 * sr * sd / t / 1e9, err = ref and e or nil })
  a:free(); o:free()
end

print(("# lumus elementwise ops, softmax and sum, float32 — %s"):format(dev_line))
print(("preset %s; median of %d device-time samples (lumus.gpu_time) after %d warm-up calls and %.2f s of back-to-back calls."):format(
  preset_name, iters, warmup, common.WARM_SECONDS))
print("GB/s counts every input read once and the output written once; % of copy against lumus.copy of "
  .. (N / 2 ^ 20) .. "M floats in this run; max err is max |got - ref| / max(1, |ref|) over the first and last rows (float64 reference).")
print()
local rows = {}
for _, r in ipairs(results) do
  rows[#rows + 1] = { r.op, r.shape, r.variant or "-", fmt(r.us), fmt(r.gbs), fmt(100 * r.gbs / copy_gbs, 1),
                      r.err and string.format("%.1e", r.err) or "-" }
end
print(common.markdown_table({ "op", "shape", "softmax form x vectors/thread", "µs", "GB/s", "% of copy", "max err" }, rows,
  { "l", "l", "l", "r", "r", "r", "r" }))
print()
print("Elementwise ops in float32 and float16 (" .. (N / 2 ^ 20) .. "M elements); % of the copy of the same dtype in this run; "
  .. "PyTorch from --baseline (same run).")
print()
print(common.markdown_table({ "op", "dtype", "µs", "GB/s", "% of copy", "PyTorch GB/s" }, ew_rows,
  { "l", "l", "r", "r", "r", "r" }))
if preset_name == "h200" then
  print()
  print("PyTorch 2.11 on the same H200 (shared/gpu/FACTS.md, 2026-12-02, not this run): x + y over 64M floats 4171 GB/s, "
    .. "gelu 4003 GB/s, softmax 8192x4096 2356 GB/s; copy 4181 GB/s.")
end

if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("op,shape,variant,us,gbs,pct_of_copy,max_err\n")
  for _, r in ipairs(results) do
    f:write(("%s,%s,%s,%.3f,%.1f,%.1f,%s\n"):format(r.op, r.shape, r.variant or "", r.us, r.gbs,
      100 * r.gbs / copy_gbs, r.err and string.format("%.3g", r.err) or ""))
  end
  f:write("\nop,dtype,us,gbs,pct_of_own_copy,torch_gbs\n")
  for _, line in ipairs(ew_csv) do f:write(line) end
  f:close()
end
