-- bench/tune_ab.lua: one op under several tunings against a same-run copy of the same x,
-- back to back: the A/B behind a change of an automatic plan.
--
--   lua5.4 bench/tune_ab.lua --op layer_norm --shapes 64173x907,14029x10142
--       [--dtypes float16,bfloat16,float32] [--tunes "{};{lean_masks=false}"]
--       [--iters 15] [--rounds 2] [--csv out.csv]
--
-- --shapes @FILE takes a CSV's rows and D columns: the seeded random sweep that
-- `lua5.4 bench/sweep.lua --seed N --write-shapes FILE --shapes-only` writes.
--
-- Ops and the tuning hook each tune table goes to (lumus.tune.<hook>(...)):
--   layer_norm           layer_norm_forward(x, weight, bias) out of place   layer_norm (as (1, t))
--   layer_norm_plain     the same without weight and bias                  layer_norm
--   softmax              softmax over the last dim into a preallocated y    softmax_cols (as (t))
--   sum, max             over the last dim (max: values and indices)        reduce (as (t))
--   layer_norm_backward  dx, dweight, dbias into preallocated outputs       layer_norm_backward (as (4, nil, t))
--   layer_norm_backward_plain  dx only (weight nil: no column sums)        layer_norm_backward
-- "{}" is the automatic plan. Each round times the copy (x into a preallocated tensor of
-- its size) and then every tuning, each the median of --iters lumus.gpu_time samples
-- after back-to-back warm-up calls (bench/common.lua's device_time); a figure is the best
-- of --rounds rounds, so a slow clock phase of the GPU spoils no single column. % of copy:
-- copy time over the op's time for layer_norm and softmax (each reads and writes x's
-- bytes), half the copy time over the op's for sum and max (they read x once), 1.5 times
-- it for layer_norm_backward (it reads x and dy and writes dx).
-- For layer_norm the plan column gives each tuning's plan (variant/workgroup x items,
-- masked, lean masks, parts, float32 parameter copies: /c4 or /c1); for
-- layer_norm_backward form/workgroup x items, /p parts, /pf prefetch, /g groups and /fold
-- where the column sums' reduce is folded into the main dispatch.
local script_dir = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()

local USAGE = "usage: lua5.4 bench/tune_ab.lua --op layer_norm|layer_norm_plain|softmax|sum|max|layer_norm_backward|layer_norm_backward_plain --shapes RxD,... "
  .. "[--dtypes float16,bfloat16,float32] [--tunes \"{k=v};...\"] [--iters N] [--rounds N] [--csv FILE]"
local args = common.parse_args(arg, { op = true, shapes = true, dtypes = true, tunes = true, iters = true,
  rounds = true, csv = true }, {}, USAGE)
local function fail(msg) io.stderr:write(msg, "\n", USAGE, "\n"); os.exit(2) end

local HOOKS = { layer_norm = "layer_norm", layer_norm_plain = "layer_norm", softmax = "softmax_cols",
                sum = "reduce", max = "reduce", layer_norm_backward = "layer_norm_backward",
                layer_norm_backward_plain = "layer_norm_backward" }
local op = args.op
if not HOOKS[op] then fail("--op must be one of layer_norm, layer_norm_plain, softmax, sum, max, layer_norm_backward, layer_norm_backward_plain") end
if not args.shapes then fail("--shapes is required") end
local shapes = common.parse_shapes(args.shapes)
local iters = common.int_opt(args.iters, 15)
local rounds = common.int_opt(args.rounds, 2)
local dtypes = {}
for dt in (args.dtypes or "float16,float32"):gmatch("[^,%s]+") do dtypes[#dtypes + 1] = dt end
local tunes = {}
for text in (args.tunes or "{}"):gmatch("[^;]+") do
  local chunk = load("return " .. text, "--tunes", "t", {})
  local ok, t = pcall(chunk or error)
  if not (ok and type(t) == "table") then fail("bad --tunes entry " .. text) end
  tunes[#tunes + 1] = { text = (text:gsub("^%s+", ""):gsub("%s+$", "")), t = t }
end

local hook = lumus.tune[HOOKS[op]]
local function apply(t)
  if HOOKS[op] == "layer_norm" then hook(1, t)
  elseif HOOKS[op] == "layer_norm_backward" then hook(4, nil, t)
  else hook(t) end
end

-- The call to time for x of `dtype` and shape {rows, d}, and the tensors to free after.
local function prepare(x, rows, d, dtype)
  if op == "layer_norm" or op == "layer_norm_plain" then
    local w, b
    if op == "layer_norm" then w, b = lumus.randn({ d }):to(dtype), lumus.randn({ d }):to(dtype) end
    local y = lumus.empty({ rows, d }, { dtype = dtype })
    local m, r = lumus.empty({ rows }), lumus.empty({ rows })
    local opts = { out = y, mean = m, invstd = r }
    return function() lumus.layer_norm_forward(x, w, b, 1e-5, opts) end, { w, b, y, m, r }
  elseif HOOKS[op] == "layer_norm_backward" then
    local plain = op == "layer_norm_backward_plain"
    local w, dy = lumus.randn({ d }), lumus.randn({ rows, d })
    local _, m, r = lumus.layer_norm_forward(x, w)
    local dx = lumus.empty({ rows, d })
    if plain then
      return function() lumus.layer_norm_backward(dy, x, m, r, nil, { out = dx }) end, { w, dy, m, r, dx }
    end
    local dw, db = lumus.empty({ d }), lumus.empty({ d })
    local opts = { out = dx, dweight = dw, dbias = db }
    return function() lumus.layer_norm_backward(dy, x, m, r, w, opts) end, { w, dy, m, r, dx, dw, db }
  elseif op == "softmax" then
    local y = lumus.empty({ rows, d }, { dtype = dtype })
    return function() lumus.softmax(x, { out = y }) end, { y }
  elseif op == "sum" then
    local y = lumus.empty({ rows }, { dtype = dtype })
    return function() lumus.sum(x, { dim = 2, out = y }) end, { y }
  end
  local y, ix = lumus.empty({ rows }, { dtype = dtype }), lumus.empty({ rows }, { dtype = "int32" })
  return function() lumus.max(x, { dim = 2, out = y, indices = ix }) end, { y, ix }
end

local function plan_of(rows, d, dtype)
  if HOOKS[op] == "layer_norm_backward" then
    local p = lumus.tune.layer_norm_backward(d, rows)
    return ("%s/%dx%d%s%s/g%d%s"):format(p.form, p.workgroup, p.items, p.parts and ("/p" .. p.parts) or "",
      p.prefetch and "/pf" or "", p.groups, p.reduce == "fold" and "/fold" or "")
  end
  if HOOKS[op] ~= "layer_norm" then return "-" end
  local p = lumus.tune.layer_norm(d, nil, rows, dtype)
  return ("%s/%dx%d%s%s%s%s"):format(p.variant, p.workgroup, p.items, p.masked and "/masked" or "",
    p.lean_masks and "/lean" or "", p.parts and ("/p" .. p.parts) or "",
    (p.param_copies or 0) > 0 and ("/c" .. p.param_copies) or "")
end

local share = (op == "sum" or op == "max") and 0.5 or HOOKS[op] == "layer_norm_backward" and 1.5 or 1
local header = { "dtype", "rows x D", "MiB", "copy µs" }
for _, t in ipairs(tunes) do header[#header + 1] = t.text .. " % of copy" end
local with_plans = HOOKS[op] == "layer_norm" or HOOKS[op] == "layer_norm_backward"
if with_plans then header[#header + 1] = "plans" end
print(("## %s under %d tunings on %s, %s"):format(op, #tunes, common.device_line(lumus), os.date("!%Y-%m-%d %H:%M UTC")))
print(("median of %d device-time samples after warm-up, best of %d rounds alternating the copy and the tunings\n"):format(iters, rounds))
local rows_out, csv_rows = {}, {}
for _, dtype in ipairs(dtypes) do
  for _, s in ipairs(shapes) do
    local rows, d = s[1], s[2]
    local x = lumus.randn({ rows, d }):to(dtype)
    local c = lumus.empty({ rows, d }, { dtype = dtype })
    local run, extra = prepare(x, rows, d, dtype)
    local t_copy, best = math.huge, {}
    for _ = 1, rounds do
      t_copy = math.min(t_copy, (common.device_time(lumus, function() c:copy(x) end, iters, 3)))
      for k, t in ipairs(tunes) do
        apply(t.t)
        best[k] = math.min(best[k] or math.huge, (common.device_time(lumus, run, iters, 3)))
      end
    end
    local cells = { dtype, ("%dx%d"):format(rows, d), ("%.1f"):format(rows * d * (dtype == "float32" and 4 or 2) / 2 ^ 20),
                    ("%.2f"):format(t_copy * 1e6) }
    local plans = {}
    for k, t in ipairs(tunes) do
      cells[#cells + 1] = ("%.1f"):format(100 * share * t_copy / best[k])
      apply(t.t)
      plans[k] = plan_of(rows, d, dtype)
      csv_rows[#csv_rows + 1] = { dtype, rows, d, t.text, plans[k], best[k], t_copy }
    end
    apply({})
    if with_plans then cells[#cells + 1] = table.concat(plans, " ") end
    rows_out[#rows_out + 1] = cells
    x:free(); c:free()
    for _, t in pairs(extra) do t:free() end
    collectgarbage()
  end
end
print(common.markdown_table(header, rows_out, { "l", "l" }))
if args.csv then
  common.write_csv(args.csv, "dtype,rows,d,tune,plan,op_s,copy_s", '%s,%d,%d,"%s",%s,%.9f,%.9f', csv_rows)
end
