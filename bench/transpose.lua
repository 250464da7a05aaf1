-- bench/transpose.lua: t:transpose(1, 2):contiguous() (the strided copy's tiled form) and
-- the generic strided form against the same-run vec4 copy of the same bytes; GB/s count
-- bytes read + written. Usage: lua5.4 bench/transpose.lua [n ...] (default 8192).
local lumus = require "lumus"

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local function time(fn, reps)
  fn(); lumus.synchronize()
  local ts = {}
  for i = 1, reps do ts[i] = lumus.gpu_time(fn) end
  return median(ts)
end

local sizes = {}
for i = 1, #arg do sizes[#sizes + 1] = tonumber(arg[i]) end
if #sizes == 0 then sizes = { 8192 } end
print(("device: %s"):format(lumus.device().name or "?"))
print("| n x n float32 | copy GB/s | transpose():contiguous() GB/s | ratio | narrow col copy GB/s |")
print("|---|---|---|---|---|")
for _, n in ipairs(sizes) do
  local x = lumus.empty({ n, n })
  x:fill(1)
  local y = lumus.empty({ n, n })
  local t = x:transpose(1, 2)
  local bytes = 2 * 4 * n * n
  local reps = 20
  local tc = time(function() lumus.copy(x, { out = y }) end, reps)
  local tt = time(function() lumus.copy(t, { out = y }) end, reps)
  -- generic form: every other column of x into a contiguous half
  local half = lumus.empty({ n, n // 2 })
  local cols = x:view({ n, n // 2, 2 }):select(3, 1)
  local tg = time(function() lumus.copy(cols, { out = half }) end, reps)
  print(("| %d | %.0f | %.0f | %.2f | %.0f |"):format(n, bytes / tc / 1e9, bytes / tt / 1e9, tc / tt,
    bytes / 2 / tg / 1e9))
  -- check a corner of the transpose
  local ok = true
  x:narrow(1, 1, 2):narrow(2, 1, 3):copy(lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }))
  lumus.copy(t, { out = y })
  local got = y:narrow(1, 1, 3):narrow(2, 1, 2):to_table()
  ok = got[1][1] == 1 and got[1][2] == 4 and got[3][2] == 6
  if not ok then print("WRONG transpose values") end
end
