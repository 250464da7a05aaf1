-- bench/softmax_rows_forms.lua: softmax over the last dimension under forced forms of the
-- row kernel, each against the same-run copy of the same tensor, float32 and float16:
--   auto       the automatic choice
--   row        a workgroup per row (tune.softmax_cols{long_rows = "row"})
--   split      rows split over workgroups (long_rows = "split")
--   scalar     rows whose D is not a multiple of 4 read an element at a time
--              (tune.rows{scalar = true}; rows of a multiple of 4: skipped)
--   wg512, wg1024   the row kernel's workgroup forced (tune.rows{wg = k})
-- on a shape list: bench/sweep.lua's shape file (--shapes FILE, rows with D >= --min-d)
-- or --list "RxD,RxD".
--
--   lua5.4 bench/softmax_rows_forms.lua (--shapes FILE [--min-d 1] | --list LIST)
--       [--forms auto,row,split,scalar,wg512,wg1024] [--dtypes float32,float16] [--iters 20]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"
local lumus = common.load_lumus()
common.WARM_SECONDS = 0.05   -- forms alternate back to back: the clocks stay up

local USAGE = "usage: lua5.4 bench/softmax_rows_forms.lua (--shapes FILE [--min-d N] | --list RxD,...) " ..
              "[--forms LIST] [--dtypes LIST] [--iters N]"
local opt = common.parse_args(arg or {}, { shapes = true, ["min-d"] = true, list = true, forms = true, dtypes = true,
                                           iters = true }, {}, USAGE)
local iters = common.int_opt(opt.iters, lumus.device().kind == "cpu" and 3 or 20)
local min_d = common.int_opt(opt.min_d, 1)

local shapes = {}
if opt.shapes then
  local header, rows = chart.read_csv(opt.shapes)
  if not header then io.stderr:write("cannot read ", opt.shapes, ": ", tostring(rows), "\n"); os.exit(2) end
  for _, r in ipairs(rows) do
    if r.D >= min_d then shapes[#shapes + 1] = { math.tointeger(r.rows), math.tointeger(r.D) } end
  end
else
  for r, d in tostring(opt.list or ""):gmatch("(%d+)x(%d+)") do shapes[#shapes + 1] = { tonumber(r), tonumber(d) } end
end
if #shapes == 0 then io.stderr:write(USAGE, "\n"); os.exit(2) end

local FORMS = {
  auto = { cols = {}, rows = {} },
  row = { cols = { long_rows = "row" }, rows = {} },
  split = { cols = { long_rows = "split" }, rows = {} },
  scalar = { cols = {}, rows = { scalar = true }, odd_only = true },
  wg512 = { cols = {}, rows = { wg = 512 } },
  wg1024 = { cols = {}, rows = { wg = 1024 } },
}
local forms = {}
for f in tostring(opt.forms or "auto,row,split,scalar,wg512,wg1024"):gmatch("[^,%s]+") do
  if not FORMS[f] then io.stderr:write("unknown form ", f, "\n"); os.exit(2) end
  forms[#forms + 1] = f
end
local dtypes = {}
for d in tostring(opt.dtypes or "float32,float16"):gmatch("[^,%s]+") do dtypes[#dtypes + 1] = d end

local function set_form(f)
  lumus.tune.softmax_cols({ long_rows = FORMS[f].cols.long_rows or "auto" })
  lumus.tune.rows(1, FORMS[f].rows)
end

print(("# softmax over the last dim under forced row-kernel forms, %% of the same-run copy — %s"):format(
  common.device_line(lumus)))
print(("%s; median of %d calls (lumus.gpu_time)"):format(os.date("!%Y-%m-%d %H:%M UTC"), iters))
print()
local header = { "shape", "dtype", "MiB" }
for _, f in ipairs(forms) do header[#header + 1] = f .. " %" end
local out = {}
for _, s in ipairs(shapes) do
  local R, D = s[1], s[2]
  local x32 = lumus.randn({ R, D })
  for _, dtype in ipairs(dtypes) do
    local x = dtype == "float32" and x32 or x32:to(dtype)
    local y, c = lumus.empty({ R, D }, { dtype = dtype }), lumus.empty({ R, D }, { dtype = dtype })
    local copy_t = common.device_time(lumus, function() lumus.copy(x, { out = c }) end, iters, 3)
    local row = { ("%dx%d"):format(R, D), dtype, ("%.1f"):format(R * D * (dtype == "float32" and 4 or 2) / 2 ^ 20) }
    for _, f in ipairs(forms) do
      if FORMS[f].odd_only and D % 4 == 0 then
        row[#row + 1] = "-"
      else
        set_form(f)
        local t = common.device_time(lumus, function() lumus.softmax(x, { out = y }) end, iters, 3)
        row[#row + 1] = ("%.1f"):format(100 * copy_t / t)
      end
    end
    set_form("auto")
    out[#out + 1] = row
    y:free(); c:free()
    if x ~= x32 then x:free() end
  end
  x32:free()
end
print(common.markdown_table(header, out))
