-- bench/short_rows.lua: softmax, log_softmax and the reductions over short rows of the last
-- dimension, the row kernels (a subgroup or more per row for softmax, tune.softmax_cols
-- short_rows = "row"; the subgroup form or the lanes' tree for reductions, tune.reduce
-- rows) against the tile forms (runs of whole rows through shared memory), on listed and
-- seeded random row lengths d of 1..512 with about n elements each, float32 and float16,
-- with the same-run copy of the same tensor as the ceiling; "auto" names the automatic
-- pick (the form whose time it is nearer). layer_norm_forward (rows of up to 64): its other
-- forms (tune.layer_norm tile = false) against its tile form.
--
--   lua5.4 bench/short_rows.lua [--n ELEMENTS] [--reps N] [--sweep K] [--seed S] [--items LIST]
--
-- --items 1,2,4 instead times softmax's tile form alone with each count of 16-byte units
-- per thread (tune.softmax_cols tile_items) against the row kernel, and on rows of up to
-- 16 layer_norm's (tune.layer_norm items_target) against its other forms.
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"

local USAGE = "usage: lua5.4 bench/short_rows.lua [--n N] [--reps N] [--sweep K] [--seed S] [--items LIST]"
local args = common.parse_args(arg, { n = true, reps = true, sweep = true, seed = true, items = true }, {}, USAGE)
local lumus = common.load_lumus()
local ref = common.load_reference()
local cpu = lumus.device().kind == "cpu"
local n0 = common.int_opt(args.n, cpu and 1 << 18 or 64 << 20)
local reps = common.int_opt(args.reps, cpu and 3 or 20)
local sweep = common.int_opt(args.sweep, 8)
local seed = common.int_opt(args.seed, 2026)
local g = ref.rng(seed)

-- Two untimed calls, then the median of `reps` device times (what the recorded runs used).
local function time(fn)
  fn(); fn(); lumus.synchronize()
  local ts = {}
  for i = 1, reps do ts[i] = lumus.gpu_time(fn) end
  return common.median(ts)
end

local ds = { 1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 23, 32, 48, 64, 100, 128, 200, 256, 273, 512 }
for _ = 1, sweep do ds[#ds + 1] = math.max(1, math.floor(math.exp(g.uniform() * math.log(512)) + 0.5)) end

local block = {}
for i = 1, 4096 do block[i] = ref.f32(g.normal() * 3) end
local bytes = string.pack("<" .. ("f"):rep(4096), table.unpack(block))
local all = lumus.from_bytes(bytes:rep(n0 // 4096 + 1), { (n0 // 4096 + 1) * 4096 })

-- Rows of d (about n0 elements) in dtype dt: rows, x, an output y like x, and the copy's time.
local function case(dt, d)
  local rows = n0 // d
  local flat = all:narrow(1, 1, rows * d)
  local x = (dt == "float32" and flat:contiguous() or flat:half()):view({ rows, d })
  local y = lumus.empty({ rows, d }, { dtype = dt })
  return rows, x, y, time(function() lumus.copy(x, { out = y }) end)
end

if args.items then
  local items = {}
  for k in args.items:gmatch("%d+") do items[#items + 1] = math.tointeger(tonumber(k)) end
  print(("# softmax over short rows: the tile form's units per thread, %s (seed %d)"):format(lumus.device().name or "?", seed))
  print(("median of %d device-time samples; %% of copy against lumus.copy of the same tensor in this run."):format(reps))
  print()
  local head = "| dtype | rows x d | row % of copy |"
  for _, k in ipairs(items) do head = head .. (" tile %d %% |"):format(k) end
  print(head)
  print("|---|---|--:|" .. ("--:|"):rep(#items))
  for _, dt in ipairs { "float32", "float16" } do
    for _, d in ipairs(ds) do
      local rows, x, y, tcopy = case(dt, d)
      lumus.tune.softmax_cols({ short_rows = "row" })
      local line = ("| %s | %dx%d | %.1f |"):format(dt, rows, d, 100 * tcopy / time(function() lumus.softmax(x, { out = y }) end))
      for _, k in ipairs(items) do
        lumus.tune.softmax_cols({ short_rows = "tile", tile_items = k })
        line = line .. (" %.1f |"):format(100 * tcopy / time(function() lumus.softmax(x, { out = y }) end))
      end
      lumus.tune.softmax_cols({ short_rows = "auto", tile_items = 0 })
      print(line)
      if d <= 16 then   -- layer_norm's tile form with the same unit counts (tune.layer_norm items_target)
        lumus.tune.layer_norm(d, { tile = false })
        line = ("| %s layer_norm | %dx%d | %.1f |"):format(dt, rows, d, 100 * tcopy / time(function() lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = y }) end))
        for _, k in ipairs(items) do
          lumus.tune.layer_norm(d, { form = "tile", items_target = k })
          line = line .. (" %.1f |"):format(100 * tcopy / time(function() lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = y }) end))
        end
        lumus.tune.layer_norm(d, {})
        print(line)
      end
      x:free(); y:free()
    end
  end
  os.exit(0)
end

print(("# short rows: the row kernels against the tile forms, %s (seed %d)"):format(lumus.device().name or "?", seed))
print(("median of %d device-time samples; %% of copy: bytes moved (x read, the result written) per second against"):format(reps))
print("lumus.copy of the same tensor in this run. softmax: tune.softmax_cols short_rows row | tile;")
print("reductions over the last dim: tune.reduce rows subgroup (var: lanes, as auto before the tile form) | tile.")
print()
print("| dtype | op | rows x d | row µs | row % of copy | tile µs | tile % of copy | tile/row speed | auto picks | max abs diff |")
print("|---|---|---|--:|--:|--:|--:|--:|---|--:|")
local function softmax_setter(form) return function() lumus.tune.softmax_cols({ short_rows = form }) end end
local function reduce_setter(form) return function() lumus.tune.reduce({ rows = form }) end end
local ops = {
  { name = "softmax", f = lumus.softmax, row = softmax_setter("row"), tile = softmax_setter("tile"), auto = softmax_setter("auto"), full = true },
  { name = "log_softmax", f = lumus.log_softmax, row = softmax_setter("row"), tile = softmax_setter("tile"), auto = softmax_setter("auto"), full = true, every = 3 },
  { name = "sum", f = function(x) return lumus.sum(x, { dim = 2 }) end, row = reduce_setter("subgroup"), tile = reduce_setter("tile"), auto = reduce_setter("auto") },
  { name = "max", f = function(x) return lumus.max(x, { dim = 2 }) end, row = reduce_setter("subgroup"), tile = reduce_setter("tile"), auto = reduce_setter("auto"), idx = true },
  { name = "argmax", f = function(x) return lumus.argmax(x, { dim = 2 }) end, row = reduce_setter("subgroup"), tile = reduce_setter("tile"), auto = reduce_setter("auto"), int = true, every = 3 },
  { name = "var", f = function(x) return lumus.var(x, { dim = 2 }) end, row = reduce_setter("lanes"), tile = reduce_setter("tile"), auto = reduce_setter("auto"), every = 3 },
  -- (its mean and invstd, 8 bytes a row, are left out of the bytes moved)
  { name = "layer_norm", f = function(x) return lumus.layer_norm_forward(x) end, full = true, upto = 64,
    row = function(d) lumus.tune.layer_norm(d, { tile = false }) end, tile = function(d) lumus.tune.layer_norm(d, { form = "tile" }) end,
    auto = function(d) lumus.tune.layer_norm(d, {}) end },
}
for _, dt in ipairs { "float32", "float16" } do
  local esize = dt == "float32" and 4 or 2
  for i, d in ipairs(ds) do
    local rows, x, y, tcopy = case(dt, d)
    local copy_rate = 2 * rows * d * esize / tcopy
    for _, op in ipairs(ops) do
      if (not op.every or i % op.every == 0) and (not op.upto or d <= op.upto) then
        local moved = rows * d * esize + (op.full and rows * d * esize or rows * ((op.int and 0 or esize) + ((op.idx or op.int) and 4 or 0)))
        local function pct(t) return 100 * (moved / t) / copy_rate end
        local f = op.f
        op.row(d)
        local tr = time(function() f(x) end)
        local yr = f(x):float()
        op.tile(d)
        local tt = time(function() f(x) end)
        local yt = f(x):float()
        op.auto(d)
        local ta = time(function() f(x) end)
        local picks = math.abs(ta - tt) < math.abs(ta - tr) and "tile" or "row"
        local diff = lumus.sub(yr, yt):abs():max():item()
        print(("| %s | %s | %dx%d | %.1f | %.1f | %.1f | %.1f | %.2f | %s | %.2g |"):format(dt, op.name, rows, d,
          tr * 1e6, pct(tr), tt * 1e6, pct(tt), tr / tt, picks, diff))
        yr:free(); yt:free()
      end
    end
    x:free(); y:free()
  end
end
