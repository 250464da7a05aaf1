-- bench/ln_ab.lua: LayerNorm forward, the planner's current choice ("new") against the
-- choice it made before the forms of issue 18 ("old", the same build with those forms
-- switched off through lumus.tune.layer_norm) and a few forced variants, each against
-- the copy ceiling measured in the same process (x read + x written, as bench/sweep.lua).
-- One A/B run on the H200 tells which forms to keep.
--
-- Shapes: the headline shapes, then bench/sweep.lua's seeded random sweep (--shapes FILE,
-- the CSV that sweep.lua --write-shapes writes, or --seed N, which runs sweep.lua
-- --shapes-only to draw the same list).
--
--   lua5.4 bench/ln_ab.lua [--seed N | --shapes FILE] [--iters N] [--warmup N]
--       [--only NAME,...] [--no-headline] [--no-backward] [--backward-shapes RxD,...]
--       [--budget S (170: forward shapes past it are skipped)] [--csv FILE]
--
-- Then layer_norm_backward on a few shapes, the plan now against the plan before.
-- Variants (columns): new = automatic; old = automatic with OLD below; the others only
-- where they differ from both (see VARIANTS).

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"
local fmt = common.fmt

local USAGE = [==[
usage: lua5.4 bench/ln_ab.lua [--seed N | --shapes FILE] [--iters N] [--warmup N]
  [--only VARIANT,...] [--no-headline] [--no-backward] [--backward-shapes RxD,...] [--budget S]
  [--csv FILE]]==]
local known = {}
for name in ("seed shapes iters warmup only no-headline no-backward backward-shapes budget csv"):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, { ["no-headline"] = true, ["no-backward"] = true }, USAGE)

local lumus = common.load_lumus()
local ref = common.load_reference()
local dev_line, dev = common.device_line(lumus)
local config = lumus.tune.layer_norm
local cpu = dev.kind == "cpu"
local iters = common.int_opt(opt.iters, cpu and 2 or 15)
local warmup = common.int_opt(opt.warmup, cpu and 1 or 3)
common.WARM_SECONDS = cpu and 0 or 0.08
local sms = (dev.sm_count and dev.sm_count > 0) and dev.sm_count or 132
local MIB = 1024 * 1024
local EPS = 1e-5
local t_start = os.time()
local budget = common.int_opt(opt.budget, 170)

-- The planner as it was before the new forms: each switch turns one off.
local OLD = { masked_loads = "guarded", tile = false, split2 = false, long_split = false }

-- Forced variants: name, tune table, and which shapes they run on (s: rows, D, n vectors).
local VARIANTS = {
  { "new", {} },
  { "old", OLD },
  { "clamped", { tile = false, split2 = false, long_split = false }, function(s) return s.D % 4 ~= 0 end },
  { "split", { form = "split" }, function(s) return s.D >= 4096 and s.rows >= sms end },
  { "stream", { form = "stream" }, function(s) return s.rows < sms end },
  { "old split", { form = "split" }, function(s) return s.rows < sms and s.D >= 8192 end },
  { "split2", { form = "split2" }, function(s) return s.D >= 8192 end },
  { "split2 x2", { form = "split2", items_target = 2 }, function(s) return s.rows < sms and s.D >= 8192 end },
  { "split2 x8", { form = "split2", items_target = 8 }, function(s) return s.rows < sms and s.D >= 8192 end },
  { "group", { form = "group" }, function(s) return s.D <= 512 or (s.D > 16384 and s.rows >= sms) end },
  { "tile", { form = "tile" }, function(s) return s.D <= 64 end },
  { "tile 256x4", { form = "tile", wg = 256, items_target = 4 }, function(s) return s.D <= 64 end },
}
if opt.only then
  local want = {}
  for name in opt.only:gmatch("[^,]+") do want[name] = true end
  local kept = {}
  for _, v in ipairs(VARIANTS) do if want[v[1]] then kept[#kept + 1] = v end end
  VARIANTS = kept
end

---------------------------------------------------------------------------------------
-- Shapes
---------------------------------------------------------------------------------------

local HEADLINE = { { 8192, 768 }, { 8192, 1024 }, { 4096, 4096 }, { 2048, 8192 }, { 32768, 1024 },
                   { 65536, 768 }, { 16384, 4096 }, { 4096, 65536 } }

local function read_shapes(path)
  local header, rows = chart.read_csv(path)
  if not header then io.stderr:write("ln_ab: cannot read ", path, ": ", tostring(rows), "\n"); os.exit(2) end
  local list = {}
  for _, r in ipairs(rows) do list[#list + 1] = { math.tointeger(r.rows), math.tointeger(r.D) } end
  return list
end

local shapes = {}
if not opt.no_headline then
  for _, h in ipairs(HEADLINE) do shapes[#shapes + 1] = { h[1], h[2], headline = true } end
end
local sweep_list = {}
if opt.shapes then
  sweep_list = read_shapes(opt.shapes)
elseif opt.seed then
  local tmp = os.tmpname()
  local cmd = ("lua5.4 %s/sweep.lua --seed %d --sms %d --write-shapes %s --shapes-only >/dev/null"):format(
    here, common.int_opt(opt.seed, 1), sms, tmp)
  if not os.execute(cmd) then io.stderr:write("ln_ab: ", cmd, " failed\n"); os.exit(2) end
  sweep_list = read_shapes(tmp)
  os.remove(tmp)
end
for _, s in ipairs(sweep_list) do shapes[#shapes + 1] = s end
for _, s in ipairs(shapes) do
  s.rows, s.D = s[1], s[2]
  s.mib = 4 * s.rows * s.D / MIB
  s.few_rows = s.rows < sms
  s.name = s.rows .. "x" .. s.D
end

---------------------------------------------------------------------------------------
-- Measurement
---------------------------------------------------------------------------------------

local function form_of(c)
  return c.variant .. "/" .. c.workgroup .. "x" .. c.items .. (c.parts and ("/p" .. c.parts) or "")
    .. (c.rows_per_group and c.rows_per_group > 1 and ("/r" .. c.rows_per_group) or "")
    .. (c.segment and ("/s" .. c.segment) or "")
    .. (c.masked and ("/" .. (c.loads or "masked")) or (c.vec == 1 and "/scalar" or ""))
end

local gen = common.normal_gen(20261203, ref)

-- Max |y - ref| over the first and last rows (nil without the reference).
local function check(y, data, wbytes, bbytes, R, D)
  if not ref or D > 1 << 20 then return nil end
  local wv, bv = common.unpack_floats(wbytes), common.unpack_floats(bbytes)
  local e = 0
  for _, row in ipairs { 0, R - 1 } do
    local xrow = common.unpack_floats(data.block, (row % data.k) * D, D)
    local want = ref.layer_norm_forward(xrow, wv, bv, EPS)
    local got = common.unpack_floats(y:to_bytes(row * D + 1, D))
    for i = 1, D do
      local d = math.abs(got[i] - want[i])
      if d ~= d then return math.huge end
      if d > e then e = d end
    end
  end
  return e
end

local function measure(s)
  local R, D = s.rows, s.D
  local xbytes, block, k = common.matrix_bytes(gen, R, D)
  local x = lumus.from_bytes(xbytes, { R, D })
  xbytes = nil                                                -- luacheck: ignore
  collectgarbage()
  local data = { block = block, k = k }
  local wbytes = common.random_bytes(gen, D, 0.1, 1.0)
  local bbytes = common.random_bytes(gen, D, 0.1, 0.0)
  local w, b = lumus.from_bytes(wbytes, { D }), lumus.from_bytes(bbytes, { D })
  local y, m, r = lumus.empty({ R, D }), lumus.empty({ R }), lumus.empty({ R })
  local opts = { out = y, mean = m, invstd = r }
  local function cp() lumus.copy(x, { out = y }) end
  s.copy_s = common.device_time(lumus, cp, iters, warmup)
  s.copy_gbs = 2 * 4 * R * D / s.copy_s / 1e9
  s.res = {}
  local seen = {}
  for _, v in ipairs(VARIANTS) do
    local name, tune, applies = v[1], v[2], v[3]
    if not applies or applies(s) then
      config(1, tune)
      local form = form_of(config(D, nil, R))
      -- A forced variant the planner already runs as new or old adds nothing.
      if not seen[form] or name == "new" or name == "old" then
        local t = common.device_time(lumus, function() lumus.layer_norm_forward(x, w, b, EPS, opts) end, iters, warmup)
        local bytes = 4 * (2 * R * D + 2 * D + 2 * R)
        local res = { form = form, us = t * 1e6, pct = 100 * bytes / t / 1e9 / s.copy_gbs }
        if name == "new" then res.err = check(y, data, wbytes, bbytes, R, D) end
        s.res[name] = res
        seen[form] = true
      end
      config(1, {})
    end
  end
  for _, t in ipairs { x, w, b, y, m, r } do t:free() end
  collectgarbage()
end

print(("# LayerNorm forward A/B — %s"):format(dev_line))
print(("%s; %d shapes (%s); median of %d device-time samples after %d warm-up calls; %% of the same-run copy"):format(
  os.date("!%Y-%m-%d %H:%M UTC"), #shapes, opt.shapes or (opt.seed and ("seed " .. opt.seed)) or "headline only",
  iters, warmup))
print("old = " .. common.describe(OLD) .. "; others: forced through lumus.tune.layer_norm, listed where their form differs")
print()

-- Rows are printed as they are measured (a run cut short keeps what it has); past
-- --budget seconds the remaining shapes are skipped, leaving time for the backward.
local HEADER = { "#", "shape (* headline, f few rows)", "MiB", "copy GB/s", "new %", "new form", "new err",
  "old %", "old form", "new vs old", "forced variants" }
print((common.markdown_table(HEADER, {})))
io.stdout:flush()
local csv_rows = {}
for i, s in ipairs(shapes) do
  if os.time() - t_start > budget then
    io.stderr:write(("ln_ab: budget of %d s spent, %d shapes skipped\n"):format(budget, #shapes - i + 1))
    print(("| - | %d shapes skipped (--budget %d s) | | | | | | | | | |"):format(#shapes - i + 1, budget))
    break
  end
  local ok, err = pcall(measure, s)
  if not ok then io.stderr:write(("ln_ab: %s failed: %s\n"):format(s.name, tostring(err))); config(1, {}) end
  local res = s.res or {}
  local n, o = res.new or {}, res.old or {}
  local others = {}
  for _, v in ipairs(VARIANTS) do
    local r = res[v[1]]
    if r and v[1] ~= "new" and v[1] ~= "old" then others[#others + 1] = ("%s %s%% (%s)"):format(v[1], fmt(r.pct, 1), r.form) end
  end
  local line = { i, s.name .. (s.headline and " *" or (s.few_rows and " f" or "")), fmt(s.mib, 1), fmt(s.copy_gbs),
    fmt(n.pct, 1), n.form or (ok and "-" or "error"), n.err and string.format("%.1g", n.err) or "-",
    fmt(o.pct, 1), o.form or "-", (n.pct and o.pct) and string.format("%.2fx", o.us / n.us) or "-",
    table.concat(others, "; ") }
  print((common.markdown_table(HEADER, { line }):gsub("^[^\n]*\n[^\n]*\n", "")))
  io.stdout:flush()
  csv_rows[#csv_rows + 1] = { rows = s.rows, D = s.D, mib = s.mib, copy_gbs = s.copy_gbs,
    new_pct = n.pct, new_us = n.us, new_form = n.form, new_err = n.err, old_pct = o.pct, old_us = o.us, old_form = o.form,
    others = table.concat(others, "; ") }
  io.stderr:write(("ln_ab: %d/%d %s done (%ds)\n"):format(i, #shapes, s.name, os.time() - t_start))
end
print()

-- The targets' buckets, new and old.
local buckets = {
  { "headline", function(s) return s.headline end },
  { "x >= 64 MiB", function(s) return not s.headline and not s.few_rows and s.mib >= 64 end },
  { "4 MiB <= x < 64 MiB", function(s) return not s.headline and not s.few_rows and s.mib < 64 end },
  { ("rows < %d SMs"):format(sms), function(s) return not s.headline and s.few_rows end },
}
for _, which in ipairs { "new", "old" } do
  print(which .. ":")
  for _, b in ipairs(buckets) do
    local n, lo, lo_name, sum = 0, math.huge, "-", 0
    for _, s in ipairs(shapes) do
      local r = s.res and s.res[which]
      if r and r.pct and b[2](s) then
        n, sum = n + 1, sum + r.pct
        if r.pct < lo then lo, lo_name = r.pct, s.name end
      end
    end
    if n > 0 then print(("  %-22s %2d shapes: min %.1f%% of copy (%s), mean %.1f%%"):format(b[1], n, lo, lo_name, sum / n)) end
  end
end
print(("ln_ab: %d s"):format(os.time() - t_start))

-- layer_norm_backward (with weight): the plan now against the plan before
-- (float_items = 4, stat_parts = 1), x and dy read and dx written over the same-run
-- copy's GB/s.
local BWD = { { 8192, 768 }, { 4096, 4096 }, { 16384, 4096 }, { 65536, 768 }, { 4096, 65536 }, { 959742, 88 },
              { 919501, 104 }, { 94713, 803 }, { 6571, 332 }, { 26577, 1132 }, { 643775, 364 }, { 2048, 768 }, { 5106, 4934 }, { 3033, 51988 }, { 34, 33968 },
              { 343, 25576 }, { 356, 65526 } }
if opt.backward_shapes then BWD = common.parse_shapes(opt.backward_shapes) end
local btune = lumus.tune.layer_norm_backward
if btune and not opt.no_backward then
  local blines = {}
  for _, sh in ipairs(BWD) do
    local R, D = sh[1], sh[2]
    local ok, err = pcall(function()
      local x = lumus.from_bytes((common.matrix_bytes(gen, R, D)), { R, D })
      local dy = lumus.from_bytes((common.matrix_bytes(gen, R, D)), { R, D })
      local w = lumus.from_bytes(common.random_bytes(gen, D, 0.1, 1.0), { D })
      local y0, mean, invstd = lumus.layer_norm_forward(x, w, nil, EPS)
      y0:free()
      local dx, dw, db = lumus.empty({ R, D }), lumus.empty({ D }), lumus.empty({ D })
      local o = { out = dx, dweight = dw, dbias = db }
      local tc = common.device_time(lumus, function() lumus.copy(x, { out = dx }) end, iters, warmup)
      local copy_gbs = 2 * 4 * R * D / tc / 1e9
      local row = { R .. "x" .. D, fmt(copy_gbs) }
      local results = {}
      for _, v in ipairs { { "new", { form = "auto" } }, { "old", { form = "auto", float_items = 4, stat_parts = 1 } } } do
        local plan = btune(D, R, v[2])
        local t = common.device_time(lumus, function() lumus.layer_norm_backward(dy, x, mean, invstd, w, o) end, iters, warmup)
        local pct = 100 * 3 * 4 * R * D / t / 1e9 / copy_gbs
        results[v[1]] = t
        row[#row + 1] = fmt(pct, 1)
        row[#row + 1] = ("%s/%dx%d k%d g%d%s"):format(plan.form, plan.workgroup, plan.items, plan.rows_at_once, plan.groups,
          plan.stat_parts and ("/s" .. plan.stat_parts) or "")
      end
      btune(D, R, { form = "auto" })
      row[#row + 1] = ("%.2fx"):format(results.old / results.new)
      blines[#blines + 1] = row
      for _, t in ipairs { x, dy, w, dx, dw, db, mean, invstd } do t:free() end
      collectgarbage()
    end)
    if not ok then io.stderr:write(("ln_ab: backward %dx%d failed: %s\n"):format(R, D, tostring(err))); btune(D, R, { form = "auto" }) end
    io.stderr:write(("ln_ab: backward %dx%d done (%ds)\n"):format(R, D, os.time() - t_start))
  end
  print()
  print("layer_norm_backward (weight; x, dy read + dx written over the same-run copy):")
  print(common.markdown_table({ "shape", "copy GB/s", "new %", "new plan", "old %", "old plan", "new vs old" }, blines))
  print(("ln_ab: %d s"):format(os.time() - t_start))
end

if opt.csv then
  chart.write_csv(opt.csv, { "rows", "D", "mib", "copy_gbs", "new_pct", "new_us", "new_form", "new_err",
    "old_pct", "old_us", "old_form", "others" }, csv_rows)
end
