-- bench/layer_norm_backward.lua: LayerNorm backward (dx, dweight, dbias), float32, against
-- a same-run copy ceiling and PyTorch's backward kernel.
--
-- For each shape R x D: median device time (lumus.gpu_time) of one layer_norm_backward
-- with weight into preallocated outputs (dx, dweight, dbias: every stage of the op);
-- GB/s counting x and dy read and dx written, 3 * 4*R*D bytes (the partial rows,
-- weight and the statistics are not counted: the op's own overhead); the ceiling is the
-- same run's lumus.copy of x (2 * 4*R*D bytes over its median time); % of copy is the
-- ratio of the two. The op and the copy are timed in turn --rounds times (3 on a GPU),
-- each a median of --iters calls, and each takes the median of its rounds, so a clock
-- or power change during one round moves neither; "copy spread" is the copy rounds'
-- (max - min) / median. A check of two rows of dx against lumus.reference. Given the CSV of
-- bench/torch_layer_norm_backward.py, PyTorch's time and its % of its own copy ceiling.
--
--   lua5.4 bench/layer_norm_backward.lua [--shapes 8192x768,...] [--sweep N] [--iters N]
--       [--warmup N] [--baseline torch_lnb.csv] [--csv out.csv] [--seed N]
--       [--plans] [--plans-csv plans.csv] [--rounds N] [--forms fused,rows,columns,split,quad]
--       [--warm SECONDS] [--device-data | --host-data]
--
-- --plans also times a grid of forced plans per shape (lumus.tune.layer_norm_backward:
-- workgroup, rows at once, row blocks; 15 timed calls each) and reports the best beside
-- the automatic one, for choosing the planner's numbers on a new GPU. --forms also times
-- each named form forced (lumus.tune.layer_norm_backward{form=}; "-" where it does not
-- fit the shape) on the same data, as % of the same copy ceiling. --device-data (the
-- default on a GPU) draws x and dy with lumus.randn (seeded) instead of on the host
-- (seconds for the sweep's 1 GB tensors), --host-data on the host; --warm
-- sets the back-to-back warm-up before each timing (bench/common.lua's WARM_SECONDS).
-- --sweep N adds N random shapes (seeded; D from 64 to 65536, a multiple of 4 in three of
-- four, R*D from 2^20 to 2^28). LUA_PATH/LUA_CPATH as in bench/run_h200.sh.
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"

local USAGE = [==[
usage: lua5.4 bench/layer_norm_backward.lua [--shapes RxD,...] [--sweep N] [--iters N]
  [--warmup N] [--baseline torch_lnb.csv] [--csv FILE] [--seed N] [--plans]
  [--plans-csv FILE] [--rounds N] [--forms fused,rows,columns,split,quad] [--warm SECONDS]
  [--device-data | --host-data]]==]
local known = {}
for name in ("shapes sweep iters warmup baseline csv seed plans plans-csv rounds forms warm device-data host-data"):gmatch("%S+") do
  known[name] = true
end
local opt = common.parse_args(arg, known, { plans = true, ["device-data"] = true, ["host-data"] = true }, USAGE)
if opt.warm then
  local w = tonumber(opt.warm)
  if not w or w < 0 then io.stderr:write("bench: --warm wants seconds >= 0\n", USAGE, "\n"); os.exit(2) end
  common.WARM_SECONDS = w
end

local lumus = common.load_lumus()
local ref = common.load_reference()
local dev_line, dev = common.device_line(lumus)
local cpu = dev.kind == "cpu"

local DEFAULT = cpu and "256x768,64x4096,8x65536" or "8192x768,4096x4096,16384x4096,65536x768,4096x65536"
local shapes = common.parse_shapes(opt.shapes or DEFAULT)
local iters = common.int_opt(opt.iters, cpu and 3 or 100)
local warmup = common.int_opt(opt.warmup, cpu and 1 or 10)
local seed = common.int_opt(opt.seed, 20261203)
local sweep = common.int_opt(opt.sweep, cpu and 0 or 12)
local rounds = common.int_opt(opt.rounds, cpu and 1 or 3)
local device_data = opt.device_data or (not cpu and not opt.host_data)
local forms = {}
for f in (opt.forms or ""):gmatch("[^,]+") do
  if f ~= "fused" and f ~= "rows" and f ~= "columns" and f ~= "split" and f ~= "quad" then
    io.stderr:write("bench: unknown form '", f, "' in --forms\n", USAGE, "\n")
    os.exit(2)
  end
  forms[#forms + 1] = f
end

-- The random sweep (the same shapes as bench/torch_layer_norm_backward.py's for a seed).
local rng = ref.rng(seed)
for _ = 1, sweep do
  local d = math.floor(2 ^ (6 + 10 * rng.uniform()))
  if rng.uniform() < 0.75 then d = math.max(4, d - d % 4) end
  local total = 2 ^ (20 + 8 * rng.uniform())
  local r = math.max(1, math.floor(total / d))
  shapes[#shapes + 1] = { r, d, name = r .. "x" .. d }
end

local baseline = {}
if opt.baseline then
  local header, rows = chart.read_csv(opt.baseline)
  if header then for _, row in ipairs(rows) do baseline[tostring(row.shape)] = row end
  else io.stderr:write("bench: warning: cannot read ", opt.baseline, "\n") end
end

local function device_time(fn) return (common.device_time(lumus, fn, iters, warmup)) end
local unpack_list = table.unpack or unpack

-- Median of 15 gpu_time samples after 3 untimed calls: the plan grid's quick measure.
local function quick_time(fn)
  for _ = 1, 3 do fn() end
  local ts = {}
  for i = 1, 15 do ts[i] = lumus.gpu_time(fn) end
  return common.median(ts)
end

local plan_csv = { "shape,form,wg,items,segment,rows_at_once,prefetch,groups,us,pct_copy" }
-- The forced plans for rows of D: workgroups (multiples of 32) with at most 8 vectors
-- per thread, rows at once, and row blocks around the multiprocessor count; the rows
-- form with its workgroups, lane targets (items) and rows at once (plans that come out
-- alike are timed once).
local function plan_grid(D)
  local n = D % 4 == 0 and D / 4 or D
  local sms = (lumus.device().sm_count or 0) > 0 and lumus.device().sm_count or 132
  local list = {}
  local fused = n <= 4096
  local wgs = fused and { 64, 128, 192, 256, 384, 512, 768, 1024 } or { 128, 256, 512, 1024 }
  for _, wg in ipairs(wgs) do
    local items = fused and math.ceil(n / wg) or 1
    if items <= 8 and (not fused or wg < 2 * n) then
      for _, k in ipairs { 1, 2, 4 } do
        for _, pf in ipairs(fused and { false, true } or { false }) do
          if k * items * (pf and 2 or 1) <= 8 then
            for _, g in ipairs(fused and { 0, sms, 2 * sms, 4 * sms } or { 0, 4, 8, 16, 32 }) do
              list[#list + 1] = { form = fused and "fused" or "columns", wg = wg, items = fused and items or 0,
                                  rows_at_once = k, groups = g, prefetch = pf }
            end
          end
        end
      end
    end
  end
  for _, wg in ipairs { 128, 256, 512 } do
    for _, items in ipairs { 0, 2, 8 } do
      for _, k in ipairs { 0, 1, 2, 4 } do
        for _, g in ipairs { 0, sms, 2 * sms, 4 * sms } do
          list[#list + 1] = { form = "rows", wg = wg, items = items, rows_at_once = k, groups = g }
        end
      end
    end
  end
  return list
end

local function best_plan(name, R, D, run, copy_t)
  local best, best_t = nil, math.huge
  local seen = {}
  for _, p in ipairs(plan_grid(D)) do
    local q = lumus.tune.layer_norm_backward(D, R, p)
    local key = table.concat({ q.form, q.workgroup, q.items, q.segment or 0, q.rows_at_once, tostring(q.prefetch), q.groups }, " ")
    if q.form == p.form and not seen[key] then
      seen[key] = true
      local ok, t = pcall(quick_time, run)
      if ok then
        plan_csv[#plan_csv + 1] = table.concat({ name, q.form, q.workgroup, q.items, q.segment or "", q.rows_at_once,
          tostring(q.prefetch), q.groups, t * 1e6, 100 * (3 / 2) * copy_t / t }, ",")
        if t < best_t then best, best_t = q, t end
      end
    end
  end
  lumus.tune.layer_norm_backward(D, R, { form = "auto" })
  return best, best_t
end

print("## layer_norm_backward (float32, with weight) vs copy" .. (opt.baseline and " and PyTorch" or ""))
print()
print(dev_line)
print()
local header = { "shape", "plan", "lumus µs", "GB/s", "copy GB/s", "copy spread", "% of copy", "torch µs",
                 "torch % of its copy", "speedup", "dx max err" }
for _, f in ipairs(forms) do header[#header + 1] = f .. " % of copy" end
if opt.plans then header[#header + 1] = "best forced plan"; header[#header + 1] = "its % of copy" end
local csv_head = "shape,plan,lumus_us,gbs,copy_gbs,copy_spread,pct_copy,torch_us,torch_pct_copy,max_err"
for _, f in ipairs(forms) do csv_head = csv_head .. ",pct_copy_" .. f end
local rows_out, csv = {}, { csv_head }
local function write_lines(path, lines)
  if not path then return end
  local f = assert(io.open(path, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end
local gen = common.normal_gen(seed, ref)
if device_data then lumus.manual_seed(seed) end
for _, s in ipairs(shapes) do
  local R, D = s[1], s[2]
  local x, dy
  if device_data then
    x, dy = lumus.randn({ R, D }), lumus.randn({ R, D })
  else
    x = lumus.from_bytes((common.matrix_bytes(gen, R, D)), { R, D })
    dy = lumus.from_bytes((common.matrix_bytes(gen, R, D)), { R, D })
  end
  local w = lumus.from_bytes(common.random_bytes(gen, D, 0.1, 1.0), { D })
  local _, mean, invstd = lumus.layer_norm_forward(x, w)
  local dx, dw, db = lumus.empty({ R, D }), lumus.empty({ D }), lumus.empty({ D })
  local o = { out = dx, dweight = dw, dbias = db }
  local run = function() lumus.layer_norm_backward(dy, x, mean, invstd, w, o) end
  local y = lumus.empty({ R, D })
  local copy = function() lumus.copy(x, { out = y }) end
  local ts, tcs = {}, {}
  for i = 1, rounds do
    ts[i] = device_time(run)
    tcs[i] = device_time(copy)
  end
  local t, tc = common.median(ts), common.median(tcs)
  local spread = (math.max(unpack_list(tcs)) - math.min(unpack_list(tcs))) / tc
  local bytes = 3 * 4 * R * D
  local gbs, copy_gbs = bytes / t / 1e9, 2 * 4 * R * D / tc / 1e9
  -- each forced form on the same data ("-" where it does not fit)
  local form_pct = {}
  for i, f in ipairs(forms) do
    if lumus.tune.layer_norm_backward(D, R, { form = f }).form == f then
      form_pct[i] = 100 * (bytes / device_time(run) / 1e9) / copy_gbs
    end
  end
  lumus.tune.layer_norm_backward(D, R, { form = "auto" })
  -- two rows of dx against the reference
  local err = 0
  for _, r in ipairs { 1, R } do
    local row = function(t2) return common.unpack_floats(t2:to_bytes((r - 1) * D + 1, D), 0, D) end
    local m = common.unpack_floats(mean:to_bytes(r, 1), 0, 1)[1]
    local is = common.unpack_floats(invstd:to_bytes(r, 1), 0, 1)[1]
    local want = ref.layer_norm_backward(row(dy), row(x), { m }, { is }, common.unpack_floats(w:to_bytes(), 0, D))
    local got = row(dx)
    for i = 1, D do err = math.max(err, math.abs(got[i] - want[i]) / math.max(1, math.abs(want[i]))) end
  end
  local plan = lumus.tune.layer_norm_backward(D, R)
  local plan_s = ("%s/%dx%d%s k%d%s g%d"):format(plan.form, plan.workgroup, plan.items,
    plan.segment and (" s" .. plan.segment) or "", plan.rows_at_once, plan.prefetch and " pf" or "", plan.groups)
  local b = baseline[s.name]
  local tt = b and tonumber(b.torch_us)
  local tpct = b and tonumber(b.torch_gbs) and tonumber(b.torch_copy_gbs)
    and 100 * tonumber(b.torch_gbs) / tonumber(b.torch_copy_gbs)
  local row = { s.name, plan_s, common.fmt(t * 1e6, 1), common.fmt(gbs, 0), common.fmt(copy_gbs, 0),
    ("%.1f%%"):format(100 * spread), common.fmt(100 * gbs / copy_gbs, 1), tt and common.fmt(tt, 1) or "-",
    tpct and common.fmt(tpct, 1) or "-", tt and common.fmt(tt / (t * 1e6), 2) or "-", ("%.1e"):format(err) }
  local line = { s.name, plan_s, t * 1e6, gbs, copy_gbs, spread, 100 * gbs / copy_gbs, tt or "", tpct or "", err }
  for i = 1, #forms do
    row[#row + 1] = form_pct[i] and common.fmt(form_pct[i], 1) or "-"
    line[#line + 1] = form_pct[i] or ""
  end
  rows_out[#rows_out + 1] = row
  csv[#csv + 1] = table.concat(line, ",")
  if opt.plans then
    local p, bt = best_plan(s.name, R, D, run, tc)
    row[#row + 1] = p and ("%s wg=%d items=%d%s k=%d%s groups=%d"):format(p.form, p.workgroup, p.items,
      p.segment and (" seg=" .. p.segment) or "", p.rows_at_once, p.prefetch and " prefetch" or "", p.groups) or "-"
    row[#row + 1] = p and common.fmt(100 * (bytes / bt / 1e9) / copy_gbs, 1) or "-"
  end
  x:free(); dy:free(); dx:free(); y:free()
  collectgarbage()
  -- the CSVs so far, after every shape: a run cut short by a time limit keeps its rows
  write_lines(opt.plans_csv, plan_csv)
  write_lines(opt.csv, csv)
end
print(common.markdown_table(header, rows_out))
