-- bench/half_pack.lua: float16 elementwise ops with their results packed by the shader's
-- software rounding and by the device's packHalf2x16 (lumus.tune.elementwise{hw_half=}),
-- side by side in one run, each as % of the same-run float16 copy; plus float32 pow for
-- reference, and float32 pow with exact products by Dekker's split vs by fma. Median of lumus.gpu_time samples (bench/common.lua's device_time).
--
--   lua5.4 bench/half_pack.lua [--n ELEMENTS] [--iters N]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local opt = common.parse_args(arg, { n = true, iters = true }, {},
  "usage: lua5.4 bench/half_pack.lua [--n ELEMENTS] [--iters N]")
local lumus = common.load_lumus()
local dev_line, dev = common.device_line(lumus)
local N = common.int_opt(opt.n, dev.kind == "cpu" and (4 << 20) or (64 << 20))
local iters = common.int_opt(opt.iters, dev.kind == "cpu" and 3 or 30)
local function device_time(fn) return (common.device_time(lumus, fn, iters, 2)) end

local x = lumus.randn({ N }):to("float16")
local y = lumus.randn({ N }):to("float16")
local mask = lumus.randn({ N }):gt(0)
local out = lumus.empty({ N }, { dtype = "float16" })
local pos = lumus.randn({ N }):abs():add(0.01):to("float16")

local cases = {
  { "exp", 2, function() lumus.exp(x, { out = out }) end },
  { "tanh", 2, function() lumus.tanh(x, { out = out }) end },
  { "silu", 2, function() lumus.silu(x, { out = out }) end },
  { "log", 2, function() lumus.log(pos, { out = out }) end },
  { "clamp(-0.5, 0.5)", 2, function() lumus.clamp(x, -0.5, 0.5, { out = out }) end },
  { "where(mask, x, y)", 3.5, function() lumus.where(mask, x, y, { out = out }) end },
  { "add", 3, function() lumus.add(x, y, { out = out }) end },
  { "pow(x, 1.7)", 2, function() lumus.pow(pos, 1.7, { out = out }) end },
}

local saved = lumus.tune.elementwise().hw_half
local t_copy = device_time(function() lumus.copy(x, { out = out }) end)
local copy_gbs = 2 * 2 * N / t_copy / 1e9
print(("# float16 elementwise, software vs device packing — %s"):format(dev_line))
print(("%s; %d elements; median of %d; copy %.1f µs = %.0f GB/s; default hw_half = %s")
  :format(os.date("!%Y-%m-%d %H:%M UTC"), N, iters, t_copy * 1e6, copy_gbs, tostring(saved)))
print()
print("| op (float16) | software µs | % of copy | device µs | % of copy |")
print("|:---|---:|---:|---:|---:|")
for _, c in ipairs(cases) do
  local name, words, fn = c[1], c[2], c[3]
  local row = { name }
  for _, hw in ipairs({ false, true }) do
    lumus.tune.elementwise({ hw_half = hw })
    local t = device_time(fn)
    local gbs = words * 2 * N / t / 1e9
    row[#row + 1] = ("%.1f"):format(t * 1e6)
    row[#row + 1] = ("%.1f"):format(100 * gbs / copy_gbs)
  end
  print("| " .. table.concat(row, " | ") .. " |")
end
lumus.tune.elementwise({ hw_half = saved })

-- float32 pow: exact products by Dekker's split vs by fma (lumus.tune.elementwise{fused_fma=}),
-- against the float32 copy; x > 0 (the common path) and x of both signs with integral y.
local x32 = lumus.randn({ N }):abs():add(0.01)
local s32 = lumus.randn({ N })
local o32 = lumus.empty({ N })
local t_copy32 = device_time(function() lumus.copy(x32, { out = o32 }) end)
local saved_fma = lumus.tune.elementwise().fused_fma
print()
print(("float32 copy %.1f µs; default fused_fma = %s"):format(t_copy32 * 1e6, tostring(saved_fma)))
print()
print("| op (float32) | Dekker µs | % of copy | fma µs | % of copy |")
print("|:---|---:|---:|---:|---:|")
for _, c in ipairs({ { "pow(x, 1.7), x > 0", function() lumus.pow(x32, 1.7, { out = o32 }) end },
                     { "pow(x, 5), any sign", function() lumus.pow(s32, 5, { out = o32 }) end },
                     { "pow(2.5, x)", function() lumus.pow(2.5, s32, { out = o32 }) end } }) do
  local row = { c[1] }
  for _, on in ipairs({ false, true }) do
    lumus.tune.elementwise({ fused_fma = on })
    local t = device_time(c[2])
    row[#row + 1] = ("%.1f"):format(t * 1e6)
    row[#row + 1] = ("%.1f"):format(100 * t_copy32 / t)
  end
  print("| " .. table.concat(row, " | ") .. " |")
end
lumus.tune.elementwise({ fused_fma = saved_fma })
