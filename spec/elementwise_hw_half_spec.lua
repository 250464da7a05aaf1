-- float16 results of the elementwise kernel packed by the device's packHalf2x16
-- (lumus.tune.elementwise{hw_half = true}, the default on NVIDIA devices) against the
-- shader's software rounding to nearest even: the same bits for all 65536 float16
-- inputs through ops whose results tie, overflow, and fall into subnormals, in the vec4,
-- vec8 and strided forms (bench/device_checks.lua makes the same check on a GPU).
local lumus = require("lumus")
local compat = require "lumus.compat"

local function is_nan16(u) return math.floor(u / 0x400) % 32 == 31 and u % 0x400 ~= 0 end   -- exponent all ones, fraction not 0

describe("elementwise float16 packing by the device", function()
  local saved, x
  setup(function()
    saved = lumus.tune.elementwise().hw_half
    local parts = {}
    for b = 0, 65535 do parts[#parts + 1] = compat.pack_bytes("u16", { b }) end
    x = lumus.from_bytes(table.concat(parts), { 65536 }, { dtype = "float16" })
  end)
  teardown(function() lumus.tune.elementwise({ hw_half = saved }) end)

  local function same_bits(f, what)
    lumus.tune.elementwise({ hw_half = false })
    local a = f():to_bytes()
    lumus.tune.elementwise({ hw_half = true })
    local b = f():to_bytes()
    assert.are.equal(#a, #b)
    local bad, first = 0, nil
    for i = 1, #a, 2 do
      local u, v = compat.unpack_bytes("u16", a, i, 1)[1], compat.unpack_bytes("u16", b, i, 1)[1]
      if u ~= v and not (is_nan16(u) and is_nan16(v)) then
        bad = bad + 1
        first = first or ("input %04x: software %04x, device %04x"):format(math.floor((i - 1) / 2), u, v)
      end
    end
    assert.are.equal(0, bad, what .. ": " .. tostring(first))
  end

  it("rounds ties, overflow and subnormal results as the software path", function()
    same_bits(function() return x:mul(1 / 3) end, "x * (1/3)")
    same_bits(function() return x:mul(1e-3) end, "x * 1e-3")
    same_bits(function() return x:mul(1000) end, "x * 1000")
    same_bits(function() return x:add(3.3e-5) end, "x + 3.3e-5")
  end)

  it("gives the software path's bits for exp, log, silu, tanh, pow and clamp", function()
    same_bits(function() return x:exp() end, "exp")
    same_bits(function() return x:log() end, "log")
    same_bits(function() return x:silu() end, "silu")
    same_bits(function() return x:tanh() end, "tanh")
    same_bits(function() return lumus.pow(x, 1.7) end, "pow")
    same_bits(function() return x:clamp(-2, 3) end, "clamp")
  end)

  it("in the partial-vector tail and the strided form", function()
    local odd = x:narrow(1, 1, 65533)
    same_bits(function() return odd:mul(1 / 3) end, "tail")
    same_bits(function() return x:view({ 256, 256 }):transpose(1, 2):mul(0.3) end, "strided")
  end)

  it("reads and restores the setting; rejects bad values", function()
    assert.is_true(lumus.tune.elementwise({ hw_half = true }).hw_half)
    assert.is_false(lumus.tune.elementwise({ hw_half = false }).hw_half)
    assert.are.equal(lumus.device().vendor_id == 0x10DE, lumus.tune.elementwise({}).hw_half)
    assert.has_error(function() lumus.tune.elementwise({ hw_half = 1 }) end,
      "bad argument #1 to 'elementwise' (hw_half must be a boolean, got number)")
    assert.has_error(function() lumus.tune.elementwise({ fused_fma = "yes" }) end,
      "bad argument #1 to 'elementwise' (fused_fma must be a boolean, got string)")
    local trap = setmetatable({}, { __index = function(_, k) error("metamethod ran for " .. tostring(k)) end })
    assert.is_table(lumus.tune.elementwise(trap))
    assert.has_error(function() lumus.tune.elementwise({ half = true }) end)
  end)
end)
