--- bench/chart.lua: CSV and a self-contained SVG grouped bar chart, in plain Lua.
local M = {}

function M.write_csv(path, header, rows)
  local f = assert(io.open(path, "w"))
  f:write(table.concat(header, ","), "\n")
  for _, r in ipairs(rows) do
    local cells = {}
    for i, h in ipairs(header) do cells[i] = tostring(r[h] == nil and "" or r[h]) end
    f:write(table.concat(cells, ","), "\n")
  end
  f:close()
end

local function esc(s) return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;")) end

--- groups: list of labels; series: list of {name=, color=, values={...}} (nil = absent).
function M.write_svg(path, title, ylabel, groups, series)
  local W, H, left, right, top, bottom = 960, 480, 70, 20, 50, 90
  local pw, ph = W - left - right, H - top - bottom
  local maxv = 0
  for _, s in ipairs(series) do for _, v in pairs(s.values) do if v > maxv then maxv = v end end end
  local step = 10 ^ math.floor(math.log(maxv > 0 and maxv or 1, 10))
  if maxv / step < 3 then step = step / 2 end
  local ymax = math.ceil(maxv / step) * step
  local out = {}
  local function add(fmt, ...) out[#out + 1] = fmt:format(...) end
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="Helvetica,Arial,sans-serif">', W, H)
  add('<rect width="100%%" height="100%%" fill="white"/>')
  add('<text x="%d" y="28" font-size="17" font-weight="bold">%s</text>', left, esc(title))
  for v = 0, ymax + 1e-9, step do
    local y = top + ph - v / ymax * ph
    add('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>', left, left + pw, y, y)
    add('<text x="%d" y="%.1f" font-size="11" text-anchor="end">%g</text>', left - 6, y + 4, v)
  end
  add('<text x="16" y="%d" font-size="12" transform="rotate(-90 16 %d)" text-anchor="middle">%s</text>',
    top + ph // 2, top + ph // 2, esc(ylabel))
  local gw = pw / #groups
  local bw = gw * 0.8 / #series
  for gi, g in ipairs(groups) do
    local x0 = left + (gi - 1) * gw + gw * 0.1
    for si, s in ipairs(series) do
      local v = s.values[gi]
      if v then
        local h = v / ymax * ph
        add('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.0f</title></rect>',
          x0 + (si - 1) * bw, top + ph - h, bw - 1, h, s.color, esc(s.name), esc(g), v)
      end
    end
    add('<text x="%.1f" y="%d" font-size="11" text-anchor="end" transform="rotate(-35 %.1f %d)">%s</text>',
      x0 + gw * 0.4, top + ph + 16, x0 + gw * 0.4, top + ph + 16, esc(g))
  end
  add('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#333"/>', left, left + pw, top + ph, top + ph)
  for si, s in ipairs(series) do
    local x = left + 10 + (si - 1) * 170
    add('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>', x, H - 22, s.color)
    add('<text x="%d" y="%d" font-size="12">%s</text>', x + 17, H - 12, esc(s.name))
  end
  add('</svg>')
  local f = assert(io.open(path, "w"))
  f:write(table.concat(out, "\n"), "\n")
  f:close()
end

return M
