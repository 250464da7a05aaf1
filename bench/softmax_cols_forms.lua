-- bench/softmax_cols_forms.lua: softmax over a non-last dimension, the streaming form
-- (x read twice; tune.softmax_cols "stream") against the automatic choice (the held
-- form, x read once, where r fits it), on the reductions' fixed shapes and a seeded
-- random sweep of [outer, r, inner] shapes of about n elements, float32 and float16,
-- with the same-run copy of the same tensor as the ceiling.
--
--   lua5.4 bench/softmax_cols_forms.lua [--n ELEMENTS] [--reps N] [--sweep K] [--seed S]
local lumus = require "lumus"
local ref = require "lumus.reference"

local args = {}
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or not arg[i + 1] then
      io.stderr:write("usage: lua5.4 bench/softmax_cols_forms.lua [--n N] [--reps N] [--sweep K] [--seed S]\n")
      os.exit(2)
    end
    args[k] = arg[i + 1]
    i = i + 2
  end
end
local cpu = lumus.device().kind == "cpu"
local n0 = math.tointeger(tonumber(args.n or "")) or (cpu and 1 << 20 or 64 << 20)
local reps = math.tointeger(tonumber(args.reps or "")) or (cpu and 3 or 30)
local sweep = math.tointeger(tonumber(args.sweep or "")) or 12
local g = ref.rng(math.tointeger(tonumber(args.seed or "")) or 2026)

local function median(xs) table.sort(xs) return xs[(#xs + 1) // 2] end
local function time(fn)
  fn(); fn(); lumus.synchronize()
  local ts = {}
  for i = 1, reps do ts[i] = lumus.gpu_time(fn) end
  return median(ts)
end
local function int(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end

-- {outer, r, inner}, softmax over r (dim 2)
local cases = {
  { 1, 64, n0 // 64 }, { 64, 1024, n0 // (64 * 1024) }, { 1, 16384, n0 // 16384 }, { 1, 1048576 // 16, n0 // 65536 },
}
for _ = 1, sweep do
  local r = int(2, 2500)
  local inner = 1 << int(2, 12)
  if int(0, 3) == 0 then inner = int(2, 5000) end   -- some odd inners (one column per thread)
  local outer = math.max(1, n0 // (r * inner))
  cases[#cases + 1] = { outer, r, inner }
end

local block = {}
for i = 1, 4096 do block[i] = ref.f32(g.normal() * 3) end
local bytes = string.pack("<" .. ("f"):rep(4096), table.unpack(block))
local all_bytes = bytes:rep(n0 // 4096 + 1)   -- every case takes a prefix (n <= n0 + 4096 * 1024)
local function base_of(n)
  if 4 * n > #all_bytes then all_bytes = bytes:rep(n // 4096 + 1) end
  return lumus.from_bytes(all_bytes:sub(1, 4 * n), { n })
end

print(("# softmax over a non-last dim: streaming form against the automatic choice, %s"):format(lumus.device().name or "?"))
print(("median of %d device-time samples; %% of copy against lumus.copy of the same tensor in this run."):format(reps))
print()
print("| dtype | outer x r x inner | stream µs | stream % of copy | auto µs | auto % of copy | auto/stream max abs diff |")
print("|---|---|--:|--:|--:|--:|--:|")
for _, dt in ipairs { "float32", "float16" } do
  for _, c in ipairs(cases) do
    local n = c[1] * c[2] * c[3]
    local base = base_of(n)
    local x = (dt == "float32" and base or base:half()):view({ c[1], c[2], c[3] })
    local y = lumus.empty({ c[1], c[2], c[3] }, { dtype = dt })
    local tcopy = time(function() lumus.copy(x, { out = y }) end)
    lumus.tune.softmax_cols({ form = "stream" })
    local ts = time(function() lumus.softmax(x, { dim = 2, out = y }) end)
    local ys = lumus.softmax(x, { dim = 2 }):float()
    lumus.tune.softmax_cols({ form = "auto" })
    local ta = time(function() lumus.softmax(x, { dim = 2, out = y }) end)
    local ya = lumus.softmax(x, { dim = 2 }):float()
    local diff = lumus.sub(ya, ys):abs():max():item()
    print(("| %s | %dx%dx%d | %.1f | %.1f | %.1f | %.1f | %.2g |"):format(dt, c[1], c[2], c[3],
      ts * 1e6, 100 * tcopy / ts, ta * 1e6, 100 * tcopy / ta, diff))
    x:free(); y:free(); base:free(); ys:free(); ya:free()
  end
end

-- Few long rows (softmax over the last dim): the row kernel against the column kernel's
-- split form (tune.softmax_cols long_rows), around the multiprocessor count.
print()
print("| dtype | rows x d | row kernel µs | row % of copy | column split µs | cols % of copy | auto picks | max abs diff |")
print("|---|---|--:|--:|--:|--:|---|--:|")
local row_cases = {}
for _, rows in ipairs { 8, 64, 100, 132, 200 } do row_cases[#row_cases + 1] = { rows, n0 // rows } end
for _ = 1, 3 do
  local rows = int(2, 256)
  row_cases[#row_cases + 1] = { rows, n0 // rows }
end
for _, dt in ipairs { "float32", "float16" } do
  for _, c in ipairs(row_cases) do
    local n = c[1] * c[2]
    local base = base_of(n)
    local x = (dt == "float32" and base or base:half()):view({ c[1], c[2] })
    local y = lumus.empty({ c[1], c[2] }, { dtype = dt })
    local tcopy = time(function() lumus.copy(x, { out = y }) end)
    lumus.tune.softmax_cols({ long_rows = "row" })
    local tr = time(function() lumus.softmax(x, { out = y }) end)
    local yr = lumus.softmax(x):float()
    lumus.tune.softmax_cols({ long_rows = "cols" })
    local tc = time(function() lumus.softmax(x, { out = y }) end)
    local yc = lumus.softmax(x):float()
    lumus.tune.softmax_cols({ long_rows = "auto" })
    lumus.tune.host_profile({ on = true })
    lumus.softmax(x, { out = y })
    local picks = lumus.tune.host_profile().records == 2 and "cols" or "row"
    lumus.tune.host_profile({})
    local diff = lumus.sub(yr, yc):abs():max():item()
    print(("| %s | %dx%d | %.1f | %.1f | %.1f | %.1f | %s | %.2g |"):format(dt, c[1], c[2],
      tr * 1e6, 100 * tcopy / tr, tc * 1e6, 100 * tcopy / tc, picks, diff))
    x:free(); y:free(); base:free(); yr:free(); yc:free()
  end
end
