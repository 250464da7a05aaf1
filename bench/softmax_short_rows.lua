-- bench/softmax_short_rows.lua: softmax over short rows of the last dimension, the row
-- kernel (a subgroup or more per row; tune.softmax_cols short_rows = "row") against the
-- tile form (runs of whole rows through shared memory; "tile"), on listed and seeded
-- random row lengths d of 1..512 with about n elements each, float32 and float16, with
-- the same-run copy of the same tensor as the ceiling; "auto" names the automatic pick.
--
--   lua5.4 bench/softmax_short_rows.lua [--n ELEMENTS] [--reps N] [--sweep K] [--seed S]
local lumus = require "lumus"
local ref = require "lumus.reference"

local args = {}
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or not arg[i + 1] then
      io.stderr:write("usage: lua5.4 bench/softmax_short_rows.lua [--n N] [--reps N] [--sweep K] [--seed S]\n")
      os.exit(2)
    end
    args[k] = arg[i + 1]
    i = i + 2
  end
end
local cpu = lumus.device().kind == "cpu"
local n0 = math.tointeger(tonumber(args.n or "")) or (cpu and 1 << 18 or 64 << 20)
local reps = math.tointeger(tonumber(args.reps or "")) or (cpu and 3 or 20)
local sweep = math.tointeger(tonumber(args.sweep or "")) or 8
local seed = math.tointeger(tonumber(args.seed or "")) or 2026
local g = ref.rng(seed)

local function median(xs) table.sort(xs) return xs[(#xs + 1) // 2] end
local function time(fn)
  fn(); fn(); lumus.synchronize()
  local ts = {}
  for i = 1, reps do ts[i] = lumus.gpu_time(fn) end
  return median(ts)
end

local ds = { 1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 23, 32, 48, 64, 100, 128, 200, 256, 273, 512 }
for _ = 1, sweep do ds[#ds + 1] = math.max(1, math.floor(math.exp(g.uniform() * math.log(512)) + 0.5)) end

local block = {}
for i = 1, 4096 do block[i] = ref.f32(g.normal() * 3) end
local bytes = string.pack("<" .. ("f"):rep(4096), table.unpack(block))
local all = lumus.from_bytes(bytes:rep(n0 // 4096 + 1), { (n0 // 4096 + 1) * 4096 })

print(("# softmax over short rows: row kernel against the tile form, %s (seed %d)"):format(lumus.device().name or "?", seed))
print(("median of %d device-time samples; %% of copy against lumus.copy of the same tensor in this run."):format(reps))
print()
print("| dtype | op | rows x d | row µs | row % of copy | tile µs | tile % of copy | tile/row speed | auto picks | max abs diff |")
print("|---|---|---|--:|--:|--:|--:|--:|---|--:|")
for _, dt in ipairs { "float32", "float16" } do
  for i, d in ipairs(ds) do
    local rows = n0 // d
    local flat = all:narrow(1, 1, rows * d)
    local x = (dt == "float32" and flat:contiguous() or flat:half()):view({ rows, d })
    local y = lumus.empty({ rows, d }, { dtype = dt })
    local tcopy = time(function() lumus.copy(x, { out = y }) end)
    for _, op in ipairs(i % 3 == 0 and { "softmax", "log_softmax" } or { "softmax" }) do
      local f = lumus[op]
      lumus.tune.softmax_cols({ short_rows = "row" })
      local tr = time(function() f(x, { out = y }) end)
      local yr = f(x):float()
      local ok = pcall(lumus.tune.softmax_cols, { short_rows = "tile" })
      local tt = time(function() f(x, { out = y }) end)
      local yt = f(x):float()
      lumus.tune.softmax_cols({ short_rows = "auto" })
      local ta = time(function() f(x, { out = y }) end)
      local picks = math.abs(ta - tt) < math.abs(ta - tr) and "tile" or "row"
      local diff = lumus.sub(yr, yt):abs():max():item()
      print(("| %s | %s | %dx%d | %.1f | %.1f | %.1f | %.1f | %.2f | %s | %.2g |"):format(dt, op, rows, d,
        tr * 1e6, 100 * tcopy / tr, tt * 1e6, 100 * tcopy / tt, tr / tt, ok and picks or "?", diff))
      yr:free(); yt:free()
    end
    x:free(); y:free()
  end
end
