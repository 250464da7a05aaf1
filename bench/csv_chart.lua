--- bench/csv_chart.lua: redraws the GB/s chart from a results CSV with columns
-- shape, copy_gbs, lumus_gbs and (optionally) torch_gbs.
--   lua5.4 bench/csv_chart.lua results.csv out.svg "title"
package.path = "bench/?.lua;" .. package.path
local chart = require "chart"
local path, out, title = arg[1], arg[2], arg[3] or "LayerNorm forward, float32"
local header, rows = nil, {}
for line in io.lines(path) do
  local cells = {}
  for c in (line .. ","):gmatch("([^,]*),") do cells[#cells + 1] = c end
  if not header then header = cells else
    local r = {}
    for i, h in ipairs(header) do r[h] = cells[i] end
    rows[#rows + 1] = r
  end
end
local groups, l, c, t = {}, {}, {}, {}
for i, r in ipairs(rows) do
  groups[i], l[i], c[i], t[i] = r.shape, tonumber(r.lumus_gbs), tonumber(r.copy_gbs), tonumber(r.torch_gbs)
end
local series = { { name = "lumus layer_norm_forward", color = "#2b6cb0", values = l },
                 { name = "copy ceiling (same run)", color = "#a0aec0", values = c } }
if next(t) then series[3] = { name = "PyTorch F.layer_norm", color = "#dd6b20", values = t } end
chart.write_svg(out, title, "GB/s (x read + y written + weight/bias + mean/invstd)", groups, series)
