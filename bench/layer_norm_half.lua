-- bench/layer_norm_half.lua: layer_norm_forward on float16 and bfloat16 x against a
-- same-run copy of the same bytes (issue 18: >= 90% of copy for x >= 64 MiB).
--
--   lua5.4 bench/layer_norm_half.lua [--iters 50] [--csv out.csv] [--quick]
--
-- For each dtype and row length D (rows chosen so x is 128 MiB; --quick: 8 MiB), the
-- median device time (lumus.gpu_time) of layer_norm_forward(x, w, b) out of place, and
-- of x:copy() into a preallocated tensor of x's size (reads and writes the bytes that
-- LayerNorm reads and writes, less weight, bias and the statistics). Also float32 at the
-- same element count, for reference. Prints a Markdown table: GB/s of each (bytes read +
-- written / time) and LayerNorm's share of copy.
local script_dir = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()

local iters, csv_path, quick = 50, nil, false
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--iters" then iters = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--csv" then csv_path = arg[i + 1]; i = i + 1
  elseif a == "--quick" then quick = true
  else io.stderr:write("bench/layer_norm_half.lua: unknown argument " .. a .. "\n"); os.exit(2) end
  i = i + 1
end
if quick then iters = math.min(iters, 5) end

local function median(fn)
  fn(); fn()
  local t = {}
  for k = 1, iters do t[k] = lumus.gpu_time(fn) end
  table.sort(t)
  return t[math.floor((#t + 1) / 2)]
end

local BYTES = (quick and 8 or 128) * 2 ^ 20
local rows_out = {}
print(("## layer_norm_forward in float16/bfloat16 vs copy, x of %d MiB, on %s\n"):format(BYTES / 2 ^ 20,
  lumus.device().name))
print("| dtype | D | rows | plan | LayerNorm GB/s | copy GB/s | LN / copy |")
print("|:---|---:|---:|:---|---:|---:|---:|")
for _, dt in ipairs({ "float16", "bfloat16", "float32" }) do
  local size = dt == "float32" and 4 or 2
  for _, d in ipairs({ 768, 1024, 4096, 16384 }) do
    local rows = math.floor(BYTES / (size * d))
    local x = lumus.randn({ rows, d }):to(dt)
    local w, b = lumus.ones({ d }, { dtype = dt }), lumus.zeros({ d }, { dtype = dt })
    local y = lumus.empty({ rows, d }, { dtype = dt })
    local m, r = lumus.empty({ rows }), lumus.empty({ rows })
    local c = lumus.empty({ rows, d }, { dtype = dt })
    local opts = { out = y, mean = m, invstd = r }
    local t_ln = median(function() lumus.layer_norm_forward(x, w, b, 1e-5, opts) end)
    local t_cp = median(function() c:copy(x) end)
    local moved = 2 * rows * d * size
    local plan = dt == "float32" and lumus.tune.layer_norm(d, nil, rows).variant or "half: subgroup/group/stream"
    print(("| %s | %d | %d | %s | %.0f | %.0f | %.1f%% |"):format(dt, d, rows, plan, moved / t_ln / 1e9,
      moved / t_cp / 1e9, 100 * t_cp / t_ln))
    rows_out[#rows_out + 1] = { dt, d, rows, t_ln, t_cp }
    for _, t in ipairs({ x, w, b, y, m, r, c }) do t:free() end
  end
end
if csv_path then
  local f = assert(io.open(csv_path, "w"))
  f:write("dtype,d,rows,ln_s,copy_s\n")
  for _, r in ipairs(rows_out) do f:write(("%s,%d,%d,%.9f,%.9f\n"):format(r[1], r[2], r[3], r[4], r[5])) end
  f:close()
end
