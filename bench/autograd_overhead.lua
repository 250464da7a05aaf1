-- bench/autograd_overhead.lua: what autograd's wrapping costs a call that records nothing.
--
-- lumus wraps its ops in Lua only after the first requires_grad(true); from then on an op
-- whose tensor arguments require no grad goes through a Lua function that looks each of
-- them up in a weak table and calls the C function. This measures host time per call of
-- lumus.add(a, b) and t:transpose(1, 2) on small tensors: the C functions (before
-- wrapping), the wrappers with untracked operands, and, for scale, one Lua table lookup.
-- Host CPU time (os.clock) over N calls, the best of 3, synchronizing every 1000 so the
-- stream stays short. On a CPU device (lavapipe) os.clock also counts the device's
-- threads, so there only the views (no device work) measure the wrapper alone.
--
--   lua5.4 bench/autograd_overhead.lua [--calls N]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local opt = common.parse_args(arg, { calls = true }, {}, "usage: lua5.4 bench/autograd_overhead.lua [--calls N]")
local lumus = common.load_lumus()
local N = common.int_opt(opt.calls, 20000)

local a, b = lumus.ones({ 4, 4 }), lumus.ones({ 4, 4 })
local function per_call(fn)
  fn()
  lumus.synchronize()
  local best = math.huge
  for _ = 1, 5 do
    local t0 = os.clock()
    for i = 1, N do
      fn()
      if i % 1000 == 0 then lumus.synchronize() end
    end
    lumus.synchronize()
    best = math.min(best, (os.clock() - t0) / N)
  end
  return best
end

local raw_add = per_call(function() return lumus.add(a, b) end)
local raw_t = per_call(function() return a:transpose(1, 2) end)
lumus.ones({ 1 }):requires_grad(true)   -- installs the wrappers
assert(lumus.add ~= require("lumus.core").add, "wrappers not installed")
local wrapped_add = per_call(function() return lumus.add(a, b) end)
local wrapped_t = per_call(function() return a:transpose(1, 2) end)
local weak = setmetatable({}, { __mode = "k" })
local lookup = per_call(function() return weak[a] end)

print("## autograd: cost of the wrappers on calls that record nothing")
print()
print((common.device_line(lumus)))
print()
print(common.markdown_table({ "call", "C function µs", "wrapped µs", "difference µs", "one weak-table lookup µs" }, {
  { "lumus.add(a, b)", common.fmt(raw_add * 1e6, 3), common.fmt(wrapped_add * 1e6, 3),
    common.fmt((wrapped_add - raw_add) * 1e6, 3), common.fmt(lookup * 1e6, 3) },
  { "a:transpose(1, 2)", common.fmt(raw_t * 1e6, 3), common.fmt(wrapped_t * 1e6, 3),
    common.fmt((wrapped_t - raw_t) * 1e6, 3), common.fmt(lookup * 1e6, 3) },
}))
