-- bench/elementwise_sizes.lua: float32 copy, relu, exp, gelu (erf) and gelu (tanh) device
-- time over a range of sizes in one process (lumus.gpu_time, median of 30 calls, best of
-- 2 rounds), to show where an op falls behind the copy of the same bytes: a compute-bound
-- kernel's extra time shows at the small and mid sizes.
--
--   lua5.4 bench/elementwise_sizes.lua [--quick]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()
common.WARM_SECONDS = 0.05
local opt = common.parse_args(arg or {}, { quick = true }, { quick = true },
                              "usage: lua5.4 bench/elementwise_sizes.lua [--quick]")
local sizes = opt.quick and { 1000, 4097 } or
  { 1 << 20, 1155000, 2 << 20, 4 << 20, 6000001, 8 << 20, 16 << 20, 32 << 20, 64 << 20 }
local ops = {
  copy = function(x, y) lumus.copy(x, { out = y }) end,
  relu = function(x, y) lumus.relu(x, { out = y }) end,
  exp = function(x, y) lumus.exp(x, { out = y }) end,
  gelu = function(x, y) lumus.gelu(x, { out = y }) end,
  gelu_tanh = function(x, y) lumus.gelu(x, { approximate = "tanh", out = y }) end,
}
local names = { "copy", "relu", "exp", "gelu", "gelu_tanh" }
print("# float32 elementwise device time by size — " .. common.device_line(lumus))
print()
print("| n | " .. table.concat(names, " us | ") .. " us |")
print("|---:|" .. ("---:|"):rep(#names))
for _, n in ipairs(sizes) do
  local x, y = lumus.randn({ n }), lumus.empty({ n })
  local row = {}
  for i, name in ipairs(names) do
    local best = math.huge
    for _ = 1, 2 do best = math.min(best, (common.device_time(lumus, function() ops[name](x, y) end, 30, 5))) end
    row[i] = ("%.2f"):format(best * 1e6)
  end
  print(("| %d | %s |"):format(n, table.concat(row, " | ")))
  x:free(); y:free()
end
