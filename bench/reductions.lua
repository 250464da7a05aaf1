-- bench/reductions.lua: reductions, softmax and log_softmax over the last and a non-last
-- dimension, float32 and float16, and topk, against the same-run copy of the same tensor.
--
-- GB/s count each input element read once and each output written once (a reduction of
-- n elements to m: size * (n + m) bytes, plus 4m for int32 indices; softmax: 2 * size * n);
-- "% of copy" divides by lumus.copy of the input (2 * size * n bytes) timed in this run.
-- Median device time (lumus.gpu_time) into preallocated outputs; one output element of
-- each case is checked against lumus.reference where it is cheap (a column of <= 64K).
--
--   lua5.4 bench/reductions.lua [--n ELEMENTS] [--reps N] [--csv FILE] [--torch FILE]
--                               [--ops LIST] [--dtypes LIST] [--shapes LIST] [--topk 0]
--                               [--rows auto|lanes|subgroup]
--
-- --ops sum,max,... / --dtypes float32,float16 / --shapes 16384x4096,64x1048576 (names as
-- printed) run only those cases (the copy ceiling is timed for every shape run); --topk 0
-- leaves out topk.
-- n defaults to 64M on a GPU (256 MiB float32, past every cache), 4M on a CPU device.
-- --torch FILE: bench/torch_reductions.py's CSV from the same run, shown beside lumus.
-- --rows: the form of reductions over rows (lumus.tune.reduce; docs/tuning.md), printed.
local lumus = require "lumus"
local ref = require "lumus.reference"

local args = {}
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or not arg[i + 1] then
      io.stderr:write("usage: lua5.4 bench/reductions.lua [--n N] [--reps N] [--csv FILE] [--torch FILE] [--ops LIST] [--dtypes LIST] [--shapes LIST] [--topk 0] [--rows auto|lanes|subgroup]\n")
      os.exit(2)
    end
    args[k] = arg[i + 1]
    i = i + 2
  end
end

local dev = lumus.device()
local cpu = dev.kind == "cpu"
if args.rows and lumus.tune.reduce then
  local c = lumus.tune.reduce({ rows = args.rows })
  print(("reductions over rows: %s form%s"):format(c.rows,
    c.rows == "subgroup" and not c.subgroup and " (not allowed on this device: the lanes' tree runs)" or ""))
end
local n = math.tointeger(tonumber(args.n or "")) or (cpu and 4 << 20 or 64 << 20)
local reps = math.tointeger(tonumber(args.reps or "")) or (cpu and 3 or 30)
local size_of = { float32 = 4, float16 = 2 }

-- A comma-separated option as a set (nil: everything).
local function set_of(list)
  if not list then return nil end
  local t = {}
  for w in list:gmatch("[^,]+") do t[w] = true end
  return t
end
local only_ops, only_dtypes, only_shapes = set_of(args.ops), set_of(args.dtypes), set_of(args.shapes)

local function median(xs) table.sort(xs) return xs[(#xs + 1) // 2] end
local function time(fn)
  fn(); fn(); lumus.synchronize()
  local ts = {}
  for i = 1, reps do ts[i] = lumus.gpu_time(fn) end
  return median(ts)
end

-- PyTorch's GB/s for the same cases, when given (op,dtype,shape,dim,gbs,pct_of_copy).
local torch = {}
if args.torch then
  local f = io.open(args.torch)
  if f then
    for line in f:lines() do
      local op, dt, shape, dim, gbs, pct = line:match("^([^,]+),([^,]+),([^,]+),([^,]+),([^,]+),([^,]+)$")
      if op and op ~= "op" then torch[table.concat({ op, dt, shape, dim }, "|")] = { tonumber(gbs), tonumber(pct) } end
    end
    f:close()
  end
end

-- Shapes of n elements: everything as one row, rows of 4096..65536, a middle dimension.
local function shapes()
  local side = math.floor(math.sqrt(n) + 0.5)
  return {
    { { n }, { nil } },
    { { n // 4096, 4096 }, { 2, 1 } },
    { { side, n // side }, { 2, 1 } },
    { { 64, n // 64 }, { 2, 1 } },
    { { n // 64, 64 }, { 2, 1 } },
    { { 64, n // (64 * 1024), 1024 }, { 2 } },
  }
end

-- A tensor of n values with fractions and signs (a repeated 4096-value block).
local base32
do
  local block = {}
  local g = ref.rng(20261203)
  for i = 1, 4096 do block[i] = ref.f32(g.normal() * 3) end
  local bytes = string.pack("<" .. ("f"):rep(4096), table.unpack(block))
  base32 = lumus.from_bytes(bytes:rep(n // 4096), { n })
end

local results = {}
local function record(r) results[#results + 1] = r end

print(("# lumus reductions, softmax, topk — %s, n = %dM elements"):format(dev.name or "?", n >> 20))
print(("median of %d device-time samples (lumus.gpu_time); GB/s count every input read once and every output written once; %% of copy against lumus.copy of the same tensor in this run."):format(reps))
print()

local OPS = { "sum", "mean", "var", "max", "argmax", "softmax", "log_softmax" }
if only_ops then
  local kept = {}
  for _, op in ipairs(OPS) do if only_ops[op] then kept[#kept + 1] = op end end
  OPS = kept
end
for _, dt in ipairs { "float32", "float16" } do
  if (dt == "float32" or dev.narrow_storage) and (not only_dtypes or only_dtypes[dt]) then
    local size = size_of[dt]
    local flat = dt == "float32" and base32 or base32:half()
    for _, case in ipairs(shapes()) do
      local shape = case[1]
      if not only_shapes or only_shapes[table.concat(shape, "x")] then
        local x = flat:view(shape)
        local cout = lumus.empty(shape, { dtype = dt })
        local tcopy = time(function() lumus.copy(x, { out = cout }) end)
        local copy_gbs = 2 * size * n / tcopy / 1e9
        cout:free()
        for _, dim in ipairs(case[2]) do
          for _, op in ipairs(OPS) do
            local soft = op == "softmax" or op == "log_softmax"
            if not (soft and dim == nil) then
              local opts = { dim = dim }
              local probe = lumus[op](x, opts)   -- the result's shape and dtype
              local out = lumus.empty(probe:shape(), { dtype = probe:dtype() })
              local m = out:numel()
              local fn
              if op == "max" then
                local idx = dim and lumus.empty(probe:shape(), { dtype = "int32" }) or nil
                fn = function() lumus.max(x, { dim = dim, out = out, indices = idx }) end
              else
                fn = function() lumus[op](x, { dim = dim, out = out }) end
              end
              local t = time(fn)
              local bytes = soft and 2 * size * n or size * n + out:numel() * (op == "argmax" and 4 or size)
              if op == "max" and dim then bytes = bytes + 4 * m end
              local shape_name = table.concat(shape, "x")
              local dim_name = dim and tostring(dim) or "all"
              local tk = torch[table.concat({ op, dt, shape_name, dim_name }, "|")]
              record({ op = op, dtype = dt, shape = shape_name, dim = dim_name, us = t * 1e6,
                       gbs = bytes / t / 1e9, pct = 100 * (bytes / t / 1e9) / copy_gbs, copy_gbs = copy_gbs,
                       torch_gbs = tk and tk[1], torch_pct = tk and tk[2] })
              probe:free(); out:free()
            end
          end
        end
      end
    end
  end
end

-- topk over vocabulary-sized rows.
if args.topk ~= "0" then
  local rows = cpu and 16 or 4096
  local x = base32:narrow(1, 1, rows * 50257 <= n and rows * 50257 or (n // 50257) * 50257):view({ -1, 50257 })
  for _, k in ipairs { 1, 50, 1024 } do
    local v, i = lumus.topk(x, k)
    local t = time(function() lumus.topk(x, k, { out = v, indices = i }) end)
    local bytes = 4 * x:numel() + 8 * v:numel()
    record({ op = "topk k=" .. k, dtype = "float32", shape = table.concat(x:shape(), "x"), dim = "2", us = t * 1e6,
             gbs = bytes / t / 1e9, pct = 0 / 0, copy_gbs = 0 / 0 })
  end
end

print("| op | dtype | shape | dim | µs | GB/s | % of copy | PyTorch GB/s | PyTorch % of its copy |")
print("|---|---|---|---|--:|--:|--:|--:|--:|")
for _, r in ipairs(results) do
  print(("| %s | %s | %s | %s | %.1f | %.0f | %s | %s | %s |"):format(r.op, r.dtype, r.shape, r.dim, r.us, r.gbs,
    r.pct == r.pct and ("%.1f"):format(r.pct) or "-", r.torch_gbs and ("%.0f"):format(r.torch_gbs) or "-",
    r.torch_pct and ("%.1f"):format(r.torch_pct) or "-"))
end

if args.csv then
  local f = assert(io.open(args.csv, "w"))
  f:write("op,dtype,shape,dim,us,gbs,pct_of_copy,copy_gbs\n")
  for _, r in ipairs(results) do
    f:write(("%s,%s,%s,%s,%.3f,%.1f,%.1f,%.1f\n"):format(r.op, r.dtype, r.shape, r.dim, r.us, r.gbs, r.pct, r.copy_gbs))
  end
  f:close()
end
