-- bench/losses.lua: the fused cross entropy (forward kernel; backward kernel) and the
-- deterministic index_add (embedding's gradient), device time per call, with PyTorch's
-- figures from bench/torch_losses.py when given (--baseline torch_losses.csv).
--
--   lua5.4 bench/losses.lua [--ce 4096x50257,...] [--ia 65x384x4096,...] [--reps 20]
--       [--csv out.csv] [--baseline torch_losses.csv]
--
-- cross entropy NxC: logits [N, C] float32, N targets; "ce forward" is
-- lumus.cross_entropy_forward (per-row losses), "ce backward" lumus.cross_entropy_backward;
-- GB/s count the logits read once (forward) and read + written (backward). index_add
-- VxDxR: R random ids into a V x D zero table (src R x D); GB/s count src read + table
-- written. Each figure is the median over 7 rounds of `reps` back-to-back calls.
local lumus = require "lumus"

local opts = { ce = "4096x50257,8192x32000,16384x1024,65536x10", ia = "65x384x4096,1024x768x4096,50257x768x1024",
               reps = 20 }
local i = 1
while i <= #arg do
  local k = arg[i]:match("^%-%-(.+)$")
  if not k or not arg[i + 1] then io.stderr:write("usage: see the header of bench/losses.lua\n"); os.exit(2) end
  opts[k] = arg[i + 1]
  i = i + 2
end
local reps = tonumber(opts.reps)

local baseline = {}
if opts.baseline then
  local f = io.open(opts.baseline)
  if f then
    f:read("l")
    for line in f:lines() do
      local op, shape, us = line:match("^([^,]+),([^,]+),([^,]+)")
      if op then baseline[op .. " " .. shape] = tonumber(us) end
    end
    f:close()
  end
end

local function median(xs) table.sort(xs) return xs[(#xs + 1) // 2] end
local function time_us(fn)
  fn(); lumus.synchronize()
  local ts = {}
  for r = 1, 7 do ts[r] = lumus.gpu_time(function() for _ = 1, reps do fn() end end) / reps end
  return median(ts) * 1e6
end

local function ids(n, v, seed)
  local parts, x = {}, seed
  for j = 1, n do
    x = (x * 6364136223846793005 + 1442695040888963407) & 0x7fffffffffffffff
    parts[j] = string.pack("<i4", (x >> 20) % v + 1)
  end
  return lumus.from_bytes(table.concat(parts), { n }, { dtype = "int32" })
end

local rows = {}
local function report(op, shape, us, bytes)
  local b = baseline[op .. " " .. shape]
  print(("| %s | %s | %.1f | %.0f | %s | %s |"):format(op, shape, us, bytes / us / 1e3,
    b and ("%.1f"):format(b) or "-", b and ("%.2f"):format(us / b) or "-"))
  rows[#rows + 1] = ("%s,%s,%.3f"):format(op, shape, us)
end

print(("device: %s"):format(lumus.device().name or "?"))
print("| op | shape | µs | GB/s | torch µs | lumus / torch |")
print("|:---|:---|---:|---:|---:|---:|")
for item in opts.ce:gmatch("[^,]+") do
  local n, c = item:match("^(%d+)x(%d+)$")
  n, c = tonumber(n), tonumber(c)
  local x = lumus.randn({ n, c })
  local t = ids(n, c, 7)
  local _, lse = lumus.cross_entropy_forward(x, t)
  local g = lumus.ones({ n })
  report("ce forward", item, time_us(function() lumus.cross_entropy_forward(x, t) end), n * c * 4)
  report("ce backward", item, time_us(function() lumus.cross_entropy_backward(g, x, t, lse) end), 2 * n * c * 4)
  x:free()
end
for item in opts.ia:gmatch("[^,]+") do
  local v, d, r = item:match("^(%d+)x(%d+)x(%d+)$")
  v, d, r = tonumber(v), tonumber(d), tonumber(r)
  local table_ = lumus.zeros({ v, d })
  local src = lumus.randn({ r, d })
  local id = ids(r, v, 11)
  report("index_add", item, time_us(function() lumus.index_add(table_, 1, id, src, { out = table_ }) end),
    (r * d + v * d) * 4)
  table_:free(); src:free()
end
if opts.csv then
  local f = assert(io.open(opts.csv, "w"))
  f:write("op,shape,lumus_us\n", table.concat(rows, "\n"), "\n")
  f:close()
end
