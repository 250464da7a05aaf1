-- bench/op_profile.lua: device time per op of any lumus script, for finding where a
-- model's time goes.
--
--   lua5.4 bench/op_profile.lua SCRIPT [args...]
--
-- Every function of lumus.core and every Tensor method is wrapped in lumus.gpu_time
-- (calls made from inside another wrapped call are not wrapped again), so each top-level
-- op is synchronized and timed alone: its time includes its launch latency but no
-- overlap with neighbours, and the host runs far slower than unwrapped. matmul, linear,
-- attention, LayerNorm, add, copy and contiguous are keyed by their tensors' shapes and
-- boolean options. SCRIPT sees a global PROFILE with reset() and report(title, per)
-- (per: divide counts and times by it, e.g. the number of steps run). With NOWRAP=1 set
-- nothing is wrapped and report() prints only the title: the same script then gives
-- unwrapped host times to compare with.
local core = require "lumus.core"
local unpack = table.unpack or unpack
local stats, active = {}, false
local gpu_time = core.gpu_time
local NOWRAP = os.getenv("NOWRAP")
local KEYED = { matmul = true, linear = true, contiguous = true, copy = true, add = true,
  scaled_dot_product_attention = true, layer_norm_forward = true, layer_norm_backward = true }

-- "name shape,shape,option": attention by its query's shape only (decode's key length varies).
local function key_of(name, ...)
  local bare = name:gsub("^:", "")
  if not KEYED[bare] then return name end
  local parts = {}
  for i = 1, select("#", ...) do
    local a = select(i, ...)
    if getmetatable(a) == core.Tensor then
      if not (bare == "scaled_dot_product_attention" and #parts > 0) then
        parts[#parts + 1] = table.concat(a:shape(), "x")
      end
    elseif type(a) == "table" then
      for k, v in pairs(a) do if v == true then parts[#parts + 1] = k end end
    end
  end
  return name .. " " .. table.concat(parts, ",")
end

local function wrap(name, f)
  return function(...)
    if active then return f(...) end
    active = true
    local r = { n = select("#", ...) + 2, pcall(gpu_time, f, ...) }
    r.n = #r   -- results end at the last non-nil value; ops return tensors, not nils
    active = false
    if not r[1] then error(r[2], 0) end
    local key = key_of(name, ...)
    local s = stats[key] or { n = 0, t = 0 }
    stats[key] = s
    s.n, s.t = s.n + 1, s.t + r[2]
    return unpack(r, 3, r.n)
  end
end

if not NOWRAP then
  local skip = { gpu_time = true, synchronize = true, clock = true, memory = true, device = true,
    capture = true, manual_seed = true }
  for k, v in pairs(core) do
    if type(v) == "function" and not skip[k] then core[k] = wrap(k, v) end
  end
  local host_only = { shape = true, dtype = true, numel = true, dim = true, stride = true,
    is_contiguous = true, size = true, to_table = true, to_bytes = true, item = true,
    is_freed = true, _version = true }
  local m = core.Tensor.methods
  for k, v in pairs(m) do
    if type(v) == "function" and not host_only[k] then m[k] = wrap(":" .. k, v) end
  end
end

PROFILE = {}
function PROFILE.reset() stats = {} end
function PROFILE.report(title, per)
  per = per or 1
  if NOWRAP then print("### " .. title .. " (NOWRAP: unwrapped)") return end
  local rows, total = {}, 0
  for k, s in pairs(stats) do rows[#rows + 1] = { k, s.n, s.t }; total = total + s.t end
  table.sort(rows, function(a, b) return a[3] > b[3] end)
  print(("### %s: device time by op, total %.3f ms"):format(title, total * 1e3 / per))
  print("| op | calls | ms | % |")
  print("|:---|---:|---:|---:|")
  for _, r in ipairs(rows) do
    print(("| %s | %g | %.3f | %.1f |"):format(r[1], r[2] / per, r[3] * 1e3 / per,
      total > 0 and 100 * r[3] / total or 0))
  end
end

local script = arg[1]
if not script then
  io.stderr:write("usage: lua5.4 bench/op_profile.lua SCRIPT [args...]\n")
  os.exit(2)
end
local args = { [0] = script }
for i = 2, #arg do args[#args + 1] = arg[i] end
arg = args
dofile(script)
