-- bench/chart.lua: CSV files and a self-contained SVG grouped bar chart, in pure Lua.
--
--   local chart = require "chart"
--   chart.write_csv("out.csv", {"shape", "gbs"}, { {"8192x768", 3712.5}, ... })
--   local header, rows = chart.read_csv("torch.csv")      -- rows keyed by header names
--   chart.write_svg("out.svg", {          -- or write_svg(path, title, y_label, cats, series)
--     title = "LayerNorm forward, float32", subtitle = "NVIDIA H200 — 2026-12-02",
--     categories = {"8192x768", "4096x4096"},
--     series = { {name = "lumus", values = {3712, 3950}},
--                {name = "copy ceiling", values = {4050, 4100}} },
--     y_label = "GB/s", x_label = "shape (rows x D)",
--     note = "bytes = x read + y written + ...",            -- optional footnote
--   })
--
-- Missing values (nil or NaN) draw no bar. The SVG uses only inline attributes (no CSS,
-- scripts or external fonts), so it renders the same in browsers, rsvg and GitHub.

local M = {}

---------------------------------------------------------------------------------------
-- CSV
---------------------------------------------------------------------------------------

local function csv_field(v)
  if v == nil then return "" end
  if type(v) == "number" then
    if v ~= v then return "" end
    if math.type(v) == "integer" then return tostring(v) end
    return string.format("%.6g", v)
  end
  local s = tostring(v)
  if s:find('[,"\r\n]') then s = '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- Writes a CSV file: a header line, then one line per row. A row is either a list
-- (values in header order) or a table keyed by header names.
function M.write_csv(path, header, rows)
  local f = assert(io.open(path, "w"))
  local cells = {}
  for i, h in ipairs(header) do cells[i] = csv_field(h) end
  f:write(table.concat(cells, ","), "\n")
  for _, r in ipairs(rows) do
    cells = {}
    for i, h in ipairs(header) do
      local v = r[i]
      if v == nil then v = r[h] end
      cells[i] = csv_field(v)
    end
    f:write(table.concat(cells, ","), "\n")
  end
  f:close()
end

-- Splits one CSV line (RFC 4180 quoting, no embedded newlines) into fields.
local function split_csv_line(line)
  local fields, pos, n = {}, 1, #line
  while pos <= n + 1 do
    if line:sub(pos, pos) == '"' then
      local buf, i = {}, pos + 1
      while true do
        local q = line:find('"', i, true)
        if not q then buf[#buf + 1] = line:sub(i); pos = n + 2; break end
        buf[#buf + 1] = line:sub(i, q - 1)
        if line:sub(q + 1, q + 1) == '"' then
          buf[#buf + 1] = '"'; i = q + 2
        else
          pos = q + 2   -- skip the closing quote and the comma
          break
        end
      end
      fields[#fields + 1] = table.concat(buf)
    else
      local c = line:find(",", pos, true) or (n + 1)
      fields[#fields + 1] = line:sub(pos, c - 1)
      pos = c + 1
    end
  end
  return fields
end

-- Reads a CSV file written by write_csv (or Python's csv module). Returns the header list
-- and a list of rows keyed by header name; numeric-looking fields become numbers.
-- Returns nil and a message if the file cannot be opened.
function M.read_csv(path)
  local f, err = io.open(path, "r")
  if not f then return nil, err end
  local header, rows = nil, {}
  for line in f:lines() do
    line = line:gsub("\r$", "")
    if line ~= "" then
      local fields = split_csv_line(line)
      if not header then
        header = fields
      else
        local row = {}
        for i, h in ipairs(header) do
          local v = fields[i]
          row[h] = (v ~= nil and v ~= "" and tonumber(v)) or (v ~= "" and v or nil)
        end
        rows[#rows + 1] = row
      end
    end
  end
  f:close()
  return header or {}, rows
end

---------------------------------------------------------------------------------------
-- SVG bar chart
---------------------------------------------------------------------------------------

local FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
local PALETTE = { "#2f6db5", "#9aa4b0", "#e07b39", "#4a9c5d", "#8e5bb5", "#c44e52" }

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;",
                                        ['"'] = "&quot;" }))
end

local function num(v) return string.format("%.2f", v):gsub("%.?0+$", "") end

-- A "nice" axis: top >= vmax and a step of 1, 2, 2.5 or 5 times a power of ten,
-- giving about `target` intervals.
local function nice_axis(vmax, target)
  if not vmax or vmax <= 0 then return 1, 0.2 end
  local raw = vmax / (target or 5)
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step
  for _, m in ipairs({ 1, 2, 2.5, 5, 10 }) do
    step = m * mag
    if step >= raw then break end
  end
  return math.ceil(vmax / step - 1e-9) * step, step
end

local function tick_label(v)
  if v >= 1e6 then return num(v / 1e6) .. "M" end
  if v >= 1e4 then return num(v / 1e3) .. "k" end
  return num(v)
end

local function value_label(v)
  if v >= 100 then return string.format("%.0f", v) end
  if v >= 10 then return string.format("%.1f", v) end
  return string.format("%.2f", v)
end

local function is_value(v) return type(v) == "number" and v == v and v >= 0 end

-- Rough text width in pixels for a sans-serif font (for layout only).
local function text_w(s, size) return #tostring(s) * size * 0.58 end

-- Returns the SVG document as a string. See the file header for `opts`.
function M.bar_svg(opts)
  local cats = opts.categories or {}
  local series = opts.series or {}
  local ncat, nser = #cats, math.max(1, #series)

  -- Geometry: the plot grows with the number of bars so they stay readable.
  local bar_w = opts.bar_width or 24
  local group_gap = opts.group_gap or 26
  local group_w = nser * bar_w + group_gap
  local margin = { left = 78, right = 28, top = 92, bottom = 86 }
  if opts.note then margin.bottom = margin.bottom + 20 end
  local plot_w = math.max(opts.min_plot_width or 560, ncat * group_w)
  -- Wide enough for the title, subtitle, note and legend too (text is never clipped).
  local legend_w = 0
  for _, s in ipairs(series) do legend_w = legend_w + 41 + text_w(s.name, 12.5) end
  for _, rl in ipairs(opts.reference_lines or {}) do
    legend_w = legend_w + 44 + text_w(rl.label or "", 12.5)
  end
  local text_need = math.max(text_w(opts.title or "", 19) * 1.08, text_w(opts.subtitle or "", 12.5),
                             text_w(opts.note or "", 11), legend_w)
  plot_w = math.ceil(math.max(plot_w, text_need - margin.right + 8))
  group_w = plot_w / math.max(1, ncat)   -- spread the groups over the plot
  if not opts.bar_width then              -- and let bars widen (up to 44 px) into the room
    bar_w = math.floor(math.max(bar_w, math.min(44, (group_w - group_gap) * 0.7 / nser)))
  end
  local plot_h = opts.plot_height or 340
  local W = margin.left + plot_w + margin.right
  local H = margin.top + plot_h + margin.bottom
  local x0, y0 = margin.left, margin.top + plot_h   -- plot origin (bottom-left)

  -- Y axis: leave headroom above the tallest bar for its value label.
  local vmax = 0
  for _, s in ipairs(series) do
    for i = 1, ncat do
      local v = s.values[i]
      if is_value(v) and v > vmax then vmax = v end
    end
  end
  for _, rl in ipairs(opts.reference_lines or {}) do
    if is_value(rl.value) and rl.value > vmax then vmax = rl.value end
  end
  local top, step = nice_axis(vmax * 1.08, opts.ticks or 6)
  local function ypix(v) return y0 - v / top * plot_h end

  local out = {}
  local function add(...) out[#out + 1] = table.concat({ ... }) end

  add('<?xml version="1.0" encoding="UTF-8"?>\n')
  add('<svg xmlns="http://www.w3.org/2000/svg" width="', W, '" height="', H,
      '" viewBox="0 0 ', W, ' ', H, '" font-family="', FONT, '">\n')
  add('<rect x="0" y="0" width="', W, '" height="', H, '" fill="#ffffff"/>\n')

  -- Title, subtitle.
  add('<text x="', x0, '" y="30" font-size="19" font-weight="bold" fill="#1d2733">',
      esc(opts.title or ""), '</text>\n')
  if opts.subtitle then
    add('<text x="', x0, '" y="52" font-size="12.5" fill="#56606b">', esc(opts.subtitle),
        '</text>\n')
  end

  -- Legend: one row of swatches above the plot, left-aligned with it.
  local lx = x0
  for si, s in ipairs(series) do
    local color = s.color or PALETTE[(si - 1) % #PALETTE + 1]
    add('<rect x="', lx, '" y="66" width="13" height="13" rx="2" fill="', color, '"/>\n')
    add('<text x="', lx + 19, '" y="77" font-size="12.5" fill="#1d2733">', esc(s.name),
        '</text>\n')
    lx = lx + 19 + text_w(s.name, 12.5) + 22
  end

  -- Gridlines and y tick labels.
  local v = 0
  while v <= top + step * 1e-6 do
    local y = ypix(v)
    local stroke = (v == 0) and '#5b6570' or '#e3e7eb'
    add('<line x1="', x0, '" y1="', num(y), '" x2="', x0 + plot_w, '" y2="', num(y),
        '" stroke="', stroke, '" stroke-width="1"/>\n')
    add('<text x="', x0 - 8, '" y="', num(y + 4), '" font-size="12" fill="#56606b" ',
        'text-anchor="end">', tick_label(v), '</text>\n')
    v = v + step
  end

  -- Optional dashed reference lines (e.g. a published bandwidth figure), named in the
  -- legend rather than on the plot, where their text would collide with value labels.
  for _, rl in ipairs(opts.reference_lines or {}) do
    if is_value(rl.value) then
      local color = rl.color or "#c44e52"
      local y = ypix(rl.value)
      add('<line x1="', x0, '" y1="', num(y), '" x2="', x0 + plot_w, '" y2="', num(y),
          '" stroke="', color, '" stroke-width="1.2" stroke-dasharray="6 4"/>\n')
      add('<line x1="', lx, '" y1="72.5" x2="', lx + 16, '" y2="72.5" stroke="', color,
          '" stroke-width="1.5" stroke-dasharray="4 3"/>\n')
      add('<text x="', lx + 22, '" y="77" font-size="12.5" fill="#1d2733">', esc(rl.label or ""),
          '</text>\n')
      lx = lx + 22 + text_w(rl.label or "", 12.5) + 22
    end
  end

  -- Bars, value labels (vertical when they would not fit across a bar), category labels.
  local vertical_labels = bar_w < 30
  for ci = 1, ncat do
    local gx = x0 + (ci - 1) * group_w + (group_w - nser * bar_w) / 2
    for si, s in ipairs(series) do
      local val = s.values[ci]
      if is_value(val) then
        local color = s.color or PALETTE[(si - 1) % #PALETTE + 1]
        local bx = gx + (si - 1) * bar_w
        local by = ypix(val)
        add('<rect x="', num(bx + 1), '" y="', num(by), '" width="', bar_w - 2, '" height="',
            num(y0 - by), '" fill="', color, '"><title>', esc(s.name), ' ', esc(cats[ci]),
            ': ', value_label(val), '</title></rect>\n')
        if opts.value_labels ~= false then
          local cx = bx + bar_w / 2
          if vertical_labels then
            add('<text transform="translate(', num(cx + 3.5), ',', num(by - 4),
                ') rotate(-90)" font-size="10" fill="#36404a">', value_label(val), '</text>\n')
          else
            add('<text x="', num(cx), '" y="', num(by - 4), '" font-size="10" fill="#36404a" ',
                'text-anchor="middle">', value_label(val), '</text>\n')
          end
        end
      end
    end
    local cx = gx + nser * bar_w / 2
    add('<text x="', num(cx), '" y="', y0 + 18, '" font-size="12" fill="#1d2733" ',
        'text-anchor="middle">', esc(cats[ci]), '</text>\n')
  end

  -- Axis titles.
  if opts.x_label then
    add('<text x="', num(x0 + plot_w / 2), '" y="', y0 + 46, '" font-size="13" fill="#1d2733" ',
        'text-anchor="middle">', esc(opts.x_label), '</text>\n')
  end
  if opts.y_label then
    local cy = margin.top + plot_h / 2
    add('<text transform="translate(20,', num(cy), ') rotate(-90)" font-size="13" ',
        'fill="#1d2733" text-anchor="middle">', esc(opts.y_label), '</text>\n')
  end
  if opts.note then
    add('<text x="', x0, '" y="', H - 14, '" font-size="11" fill="#6b7580">', esc(opts.note),
        '</text>\n')
  end

  add('</svg>\n')
  return table.concat(out)
end

-- Writes bar_svg(opts) to `path`. The older positional form
-- write_svg(path, title, y_label, categories, series) is accepted too.
function M.write_svg(path, opts, y_label, categories, series)
  if type(opts) ~= "table" then
    opts = { title = opts, y_label = y_label, categories = categories, series = series }
  end
  local f = assert(io.open(path, "w"))
  f:write(M.bar_svg(opts))
  f:close()
end

return M
