-- bench/layer_norm_half.lua: layer_norm_forward on float16 and bfloat16 x against a
-- same-run copy of the same bytes (issue 18: >= 90% of copy for x >= 64 MiB).
--
--   lua5.4 bench/layer_norm_half.lua [--iters 50] [--csv out.csv] [--quick]
--       [--shapes 36782x6867,124x157741] [--forms auto,stream,split2] [--dtypes float16]
--       [--tunes "{items_target=4};{scalar=true}"]
--
-- For each dtype, shape and form, the median device time (lumus.gpu_time) of
-- layer_norm_forward(x, w, b) out of place, and of x:copy() into a preallocated tensor of
-- x's size (reads and writes the bytes that LayerNorm reads and writes, less weight,
-- bias and the statistics). Without --shapes: rows of D = 768, 1024, 4096, 16384 with x
-- of 128 MiB (--quick: 8 MiB). A form other than auto is forced through
-- lumus.tune.layer_norm (where it cannot run, the plan falls back; the plan column says
-- what ran); each of --tunes (Lua tables for lumus.tune.layer_norm, ';' between them) is
-- one more row per shape. Prints a Markdown table: GB/s of each (bytes read + written / time) and
-- LayerNorm's share of copy.
local script_dir = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()

local USAGE = "usage: lua5.4 bench/layer_norm_half.lua [--iters N] [--csv FILE] [--quick] [--shapes RxD,...] "
  .. "[--forms auto,group,subgroup,stream,split2,tile] [--dtypes float16,bfloat16,float32] [--tunes \"{k=v};...\"]"
local args = common.parse_args(arg, { iters = true, csv = true, quick = true, shapes = true, forms = true, dtypes = true,
  tunes = true },
  { quick = true }, USAGE)
local quick = args.quick
local iters = common.int_opt(args.iters, 50)
if quick then iters = math.min(iters, 5) end
local function list(s, default)
  local t = {}
  for item in (s or default):gmatch("[^,%s]+") do t[#t + 1] = item end
  return t
end
local forms = list(args.forms, "auto")
local dtypes = list(args.dtypes, "float16,bfloat16,float32")
local known_forms = { auto = true, group = true, subgroup = true, stream = true, split2 = true, tile = true }
-- { name, tune table } per row of a shape
local tunes = {}
for _, f in ipairs(forms) do
  if not known_forms[f] then io.stderr:write("unknown form ", f, "\n", USAGE, "\n"); os.exit(2) end
  tunes[#tunes + 1] = { f, f == "auto" and {} or { form = f } }
end
for text in (args.tunes or ""):gmatch("[^;]+") do
  local chunk = load("return " .. text, "--tunes", "t", {})
  local ok, t = pcall(chunk or error)
  if not (ok and type(t) == "table") then io.stderr:write("bad --tunes entry ", text, "\n", USAGE, "\n"); os.exit(2) end
  tunes[#tunes + 1] = { (text:gsub("[%s,]+", " ")), t }
end

local function median(fn)
  fn(); fn()
  local t = {}
  for k = 1, iters do t[k] = lumus.gpu_time(fn) end
  table.sort(t)
  return t[math.floor((#t + 1) / 2)]
end

local BYTES = (quick and 8 or 128) * 2 ^ 20
local function shapes_for(size)
  if args.shapes then return common.parse_shapes(args.shapes) end
  local t = {}
  for _, d in ipairs({ 768, 1024, 4096, 16384 }) do t[#t + 1] = { math.floor(BYTES / (size * d)), d } end
  return t
end

local rows_out = {}
print(("## layer_norm_forward in float16/bfloat16 vs copy on %s\n"):format(lumus.device().name))
print("| dtype | D | rows | MiB | form or tune | plan | LayerNorm GB/s | copy GB/s | LN / copy |")
print("|:---|---:|---:|---:|:---|:---|---:|---:|---:|")
for _, dt in ipairs(dtypes) do
  local size = dt == "float32" and 4 or 2
  for _, shape in ipairs(shapes_for(size)) do
    local rows, d = shape[1], shape[2]
    local x = lumus.randn({ rows, d }):to(dt)
    local w, b = lumus.ones({ d }, { dtype = dt }), lumus.zeros({ d }, { dtype = dt })
    local y = lumus.empty({ rows, d }, { dtype = dt })
    local m, r = lumus.empty({ rows }), lumus.empty({ rows })
    local c = lumus.empty({ rows, d }, { dtype = dt })
    local opts = { out = y, mean = m, invstd = r }
    local t_cp = median(function() c:copy(x) end)
    local moved = 2 * rows * d * size
    for _, tune in ipairs(tunes) do
      local form = tune[1]
      lumus.tune.layer_norm(1, tune[2])
      local t_ln = median(function() lumus.layer_norm_forward(x, w, b, 1e-5, opts) end)
      local p = lumus.tune.layer_norm(d, nil, rows, dt)
      local plan = ("%s/%dx%d%s%s"):format(p.variant, p.workgroup, p.items, p.masked and "/masked" or "",
        p.parts and ("/" .. p.parts .. " parts") or "")
      print(("| %s | %d | %d | %.1f | %s | %s | %.0f | %.0f | %.1f%% |"):format(dt, d, rows, rows * d * size / 2 ^ 20,
        form, plan, moved / t_ln / 1e9, moved / t_cp / 1e9, 100 * t_cp / t_ln))
      rows_out[#rows_out + 1] = { dt, d, rows, form, plan, t_ln, t_cp }
    end
    lumus.tune.layer_norm(1, {})
    for _, t in ipairs({ x, w, b, y, m, r, c }) do t:free() end
  end
end
if args.csv then
  common.write_csv(args.csv, "dtype,d,rows,form,plan,ln_s,copy_s", "%s,%d,%d,%s,%s,%.9f,%.9f", rows_out)
end
