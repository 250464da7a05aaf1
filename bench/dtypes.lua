-- bench/dtypes.lua: copies and conversions between dtypes against the same-run float32
-- copy ceiling; GB/s count bytes read + written (a float32 -> float16 conversion of n
-- elements moves 4n + 2n bytes). Median device time (lumus.gpu_time) into preallocated
-- outputs; a few elements of each result are checked against lumus.reference.
-- Usage: lua5.4 bench/dtypes.lua [n] (elements; default 64M on a GPU, 8M on a CPU device).
local lumus = require "lumus"
local ref = require "lumus.reference"

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

local dev = lumus.device()
local n = tonumber(arg[1]) or (dev.kind == "cpu" and 8 << 20 or 64 << 20)
local reps = dev.kind == "cpu" and 5 or 30
print(("device: %s, n = %d elements, narrow_storage = %s"):format(dev.name or "?", n, tostring(dev.narrow_storage)))

-- Values with fractions, negatives and float16 overflow: i % 1000 * 0.37 - 100 (and a
-- few 1e5).
local src = lumus.empty({ n })
do
  local block = {}
  for i = 1, 4096 do block[i] = ref.round_float32((i % 1000) * 0.37 - 100 + (i % 997 == 0 and 1e5 or 0)) end
  local bytes = string.pack("<" .. ("f"):rep(#block), table.unpack(block))
  for first = 1, n, 4096 do
    local count = math.min(4096, n - first + 1)
    src:write_bytes(bytes:sub(1, 4 * count), first)
  end
end

local size = { float32 = 4, float16 = 2, bfloat16 = 2, int32 = 4, bool = 1 }
local cases = {
  { "copy float32", "float32", "float32" },
  { "copy float16", "float16", "float16" },
  { "copy bool", "bool", "bool" },
  { "to(float16) from float32", "float32", "float16" },
  { "to(float32) from float16", "float16", "float32" },
  { "to(bfloat16) from float32", "float32", "bfloat16" },
  { "to(int32) from float32", "float32", "int32" },
  { "to(bool) from float32", "float32", "bool" },
}
local inputs = { float32 = src, float16 = src:half(), bool = src:bool() }
local ceiling
print("| case | GB/s | % of float32 copy | check |")
print("|---|---|---|---|")
for _, c in ipairs(cases) do
  local name, from, to = c[1], c[2], c[3]
  local a = inputs[from]
  local out = lumus.empty({ n }, { dtype = to })
  local t
  if from == to then
    t = time(function() lumus.copy(a, { out = out }) end, reps)
  else
    t = time(function() a:to(to, { out = out }) end, reps)
  end
  local gbs = n * (size[from] + size[to]) / t / 1e9
  if name == "copy float32" then ceiling = gbs end
  -- check the first 64 and the last elements
  local ok = true
  for _, first in ipairs { 1, n - 63 } do
    local want_src = a:narrow(1, first, 64):to_table()
    local got = out:narrow(1, first, 64):to_table()
    for i = 1, 64 do
      local w = ref.to_dtype(want_src[i], to)
      if got[i] ~= w then ok = false end
    end
  end
  print(("| %s | %.1f | %.0f%% | %s |"):format(name, gbs, 100 * gbs / ceiling, ok and "ok" or "WRONG"))
end
