-- bench/index.lua: index_select / embedding of rows of a table against the same-run copy
-- of the same bytes (the bytes-moved ceiling: read rows * D + write rows * D floats), with
-- PyTorch's figures from bench/torch_index.py when given (--baseline torch_index.csv).
--
--   lua5.4 bench/index.lua [--shapes 50257x768x4096,...] [--reps 50] [--csv out.csv]
--       [--baseline torch_index.csv]
--
-- A shape VxDxR is a V x D float32 table and R random ids (1-based int32). Each figure is
-- the median over 7 rounds of the device time (lumus.gpu_time) of `reps` back-to-back
-- calls, divided by reps; GB/s count bytes read + written (2 R D 4).
local lumus = require "lumus"

local opts = { shapes = "50257x768x4096,50257x768x1024,50257x768x16384,32000x4096x4096", reps = 50 }
local i = 1
while i <= #arg do
  local k = arg[i]:match("^%-%-(.+)$")
  if not k or not arg[i + 1] then io.stderr:write("usage: see the header of bench/index.lua\n"); os.exit(2) end
  opts[k] = arg[i + 1]
  i = i + 2
end
local reps = tonumber(opts.reps)

local baseline = {}
if opts.baseline then
  local f = io.open(opts.baseline)
  if f then
    f:read("l")   -- header
    for line in f:lines() do
      local op, shape, us = line:match("^([^,]+),([^,]+),([^,]+)")
      if op then baseline[op .. " " .. shape] = tonumber(us) end
    end
    f:close()
  end
end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local function time_us(fn)
  fn(); lumus.synchronize()
  local ts = {}
  for r = 1, 7 do ts[r] = lumus.gpu_time(function() for _ = 1, reps do fn() end end) / reps end
  return median(ts) * 1e6
end

-- Deterministic ids (a 64-bit LCG), 1-based int32, as a tensor.
local function random_ids(n, v, seed)
  local parts, x = {}, seed
  for j = 1, n do
    x = (x * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
    parts[j] = string.pack("<i4", (x >> 20) % v + 1)
  end
  return lumus.from_bytes(table.concat(parts), { n }, { dtype = "int32" }), parts
end

print(("device: %s"):format(lumus.device().name or "?"))
print("| op | V x D x rows | µs | GB/s | copy µs | copy GB/s | % of copy | torch µs | torch GB/s |")
print("|:---|:---|---:|---:|---:|---:|---:|---:|---:|")
local csv = {}
for item in opts.shapes:gmatch("[^,]+") do
  local v, d, r = item:match("^(%d+)x(%d+)x(%d+)$")
  v, d, r = tonumber(v), tonumber(d), tonumber(r)
  local tbl = lumus.empty({ v, d })
  tbl:fill(0.5)
  tbl:narrow(1, v, 1):fill(2)                      -- the last row, to check a read of it
  local ids = random_ids(r, v, 20261203)
  local y = lumus.empty({ r, d })
  local src = lumus.empty({ r, d })
  src:fill(1)
  local bytes = 2 * r * d * 4
  local tc = time_us(function() lumus.copy(src, { out = y }) end)
  for _, op in ipairs { "index_select", "embedding" } do
    local fn = op == "index_select" and function() lumus.index_select(tbl, 1, ids, { out = y }) end
      or function() lumus.embedding(ids, tbl, { out = y }) end
    local t = time_us(fn)
    -- check: id v (the last row) gives 2s, others 0.5s
    local last = lumus.from_bytes(string.pack("<i4", v), { 1 }, { dtype = "int32" })
    local row = lumus.index_select(tbl, 1, last):to_table()[1]
    if row[1] ~= 2 or row[d] ~= 2 then print("WRONG values of the last row") end
    local tu = baseline[op .. " " .. item]
    print(("| %s | %s | %.1f | %.0f | %.1f | %.0f | %.0f%% | %s | %s |"):format(op, item, t, bytes / t / 1e3, tc,
      bytes / tc / 1e3, 100 * tc / t, tu and ("%.1f"):format(tu) or "-", tu and ("%.0f"):format(bytes / tu / 1e3) or "-"))
    csv[#csv + 1] = ("%s,%s,%.3f,%.3f,%.3f"):format(op, item, t, tc, tu or 0 / 0)
  end
  tbl:free(); y:free(); src:free()
end
if opts.csv then
  local f = assert(io.open(opts.csv, "w"))
  f:write("op,shape,lumus_us,copy_us,torch_us\n", table.concat(csv, "\n"), "\n")
  f:close()
end
