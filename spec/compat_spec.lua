-- lumus.compat (docs/compat.md): the same bytes, float32 bits and random numbers on Lua
-- 5.4, 5.3, 5.1 and LuaJIT. The expected values are fixed numbers (from the Lua 5.4
-- implementations with string.pack and 64-bit integers that compat replaces), so a run
-- under any version checks it against them.
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

describe("lumus.compat byte packing", function()
  it("writes little-endian bytes of each kind", function()
    assert.are.equal("0000c03f00000080", hex(compat.pack_bytes("f32", { 1.5, compat.negative_zero })))
    assert.are.equal("000000000000f03f", hex(compat.pack_bytes("f64", { 1 })))
    assert.are.equal("fbffffffffffff7f", hex(compat.pack_bytes("i32", { -5, 2147483647 })))
    assert.are.equal("ffffffffffffffff0000000000010000", hex(compat.pack_bytes("i64", { -1, 2 ^ 40 })))
    assert.are.equal("78563412", hex(compat.pack_bytes("u32", { 0x12345678 })))
    assert.are.equal("ff7f0100", hex(compat.pack_bytes("u16", { 0x7fff, 1 })))
    assert.are.equal("00ff", hex(compat.pack_bytes("u8", { 0, 255 })))
    assert.are.equal("", compat.pack_bytes("f32", {}))
    assert.are.equal("0000803f", hex(compat.pack_bytes("f32", { 1, 2, 3 }, 1)))   -- n = 1
  end)

  it("reads them back, from a position and for a count", function()
    local s = compat.pack_bytes("i32", { 7, -8, 9 })
    assert.are.same({ 7, -8, 9 }, compat.unpack_bytes("i32", s))
    assert.are.same({ -8 }, compat.unpack_bytes("i32", s, 5, 1))
    assert.are.same({ 4294967288, 9 }, compat.unpack_bytes("u32", s, 5))
    assert.are.same({ 1.5, -2.25 }, compat.unpack_bytes("f32", compat.pack_bytes("f32", { 1.5, -2.25 })))
    assert.are.same({ -1, 2 ^ 40 }, compat.unpack_bytes("i64", compat.pack_bytes("i64", { -1, 2 ^ 40 })))
    assert.are.same({}, compat.unpack_bytes("u16", "\1", 1))   -- no whole element
    assert.is_true(compat.is_integer_type(compat.unpack_bytes("i32", s)[1]))
  end)

  it("refuses fractions, out-of-range values, non-numbers and unknown kinds by message", function()
    checks.errors(compat.pack_bytes, "element 2 %(2.5%) does not fit i32", "i32", { 1, 2.5 })
    checks.errors(compat.pack_bytes, "element 1 %(2147483648%.?0?%) does not fit i32", "i32", { 2 ^ 31 })
    checks.errors(compat.pack_bytes, "element 1 %(%-1%) does not fit u32", "u32", { -1 })
    checks.errors(compat.pack_bytes, "element 1 %(65536%) does not fit u16", "u16", { 65536 })
    checks.errors(compat.pack_bytes, "element 1 %(inf%) does not fit i64", "i64", { math.huge })
    checks.errors(compat.pack_bytes, "element 2 is a string, not a number", "f32", { 1, "2" })
    checks.errors(compat.pack_bytes, "unknown kind 'f16'", "f16", { 1 })
    checks.errors(compat.unpack_bytes, "position 9 is outside the 4 bytes", "f32", "abcd", 9)
    checks.errors(compat.unpack_bytes, "2 values do not fit in the bytes from position 1", "f32", "abcd", 1, 2)
  end)
end)

describe("lumus.compat float32", function()
  it("rounds to nearest even, overflowing to inf past the rounding midpoint", function()
    assert.are.equal(0.100000001490116119384765625, compat.f32(0.1))
    assert.are.equal(1, compat.f32(1 + 2 ^ -24))                  -- a tie: to even
    assert.are.equal(1 + 2 ^ -22, compat.f32(1 + 3 * 2 ^ -24))    -- a tie: to even, up
    local max = (2 - 2 ^ -23) * 2 ^ 127
    assert.are.equal(max, compat.f32(2 ^ 128 - 2 ^ 103 - 2 ^ 80))
    assert.are.equal(math.huge, compat.f32(2 ^ 128 - 2 ^ 103))
    assert.are.equal(-math.huge, compat.f32(-1e300))
    assert.are.equal(2 ^ -149, compat.f32(2 ^ -149))
    assert.are.equal(0, compat.f32(2 ^ -151))
    local z = compat.f32(compat.negative_zero)
    assert.is_true(z == 0 and 1 / z < 0)
    local n = compat.f32(0 / 0)
    assert.is_true(n ~= n)
  end)

  it("gives a float32's bits and the float32 of bits", function()
    assert.are.equal(0x3fc00000, compat.float_bits(1.5))
    assert.are.equal(0x80000000, compat.float_bits(compat.negative_zero))
    assert.are.equal(0x7f800000, compat.float_bits(math.huge))
    assert.are.equal(0x3dcccccd, compat.float_bits(0.1))
    assert.are.equal(1.5, compat.bits_float(0x3fc00000))
    assert.are.equal(2 ^ -149, compat.bits_float(1))
    checks.errors(compat.bits_float, "a 32%-bit word", -1)
    checks.errors(compat.bits_float, "a 32%-bit word", 2 ^ 32)
  end)
end)

describe("lumus.compat random numbers", function()
  it("Philox4x32-10 gives the Random123 known answers", function()
    assert.are.same({ 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 }, { compat.philox(0, 0, 0, 0, 0, 0) })
    assert.are.same({ 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
      { compat.philox(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff) })
    -- lumus's generator: block 0 of seed 0, offset 0 is the zero counter under the zero key
    assert.are.same({ compat.philox(0, 0, 0, 0, 0, 0) }, { compat.philox_block(0, 0, 0) })
    -- seed and offset split into 32-bit words, low first; negative seeds are two's complement
    assert.are.same({ compat.philox(5, 0, 7, 1, 0xffffffff, 0xffffffff) }, { compat.philox_block(-1, 2 ^ 32 + 7, 5) })
  end)

  it("reference.rng (SplitMix64) gives the same doubles on every version", function()
    local want = {
      [42] = { 0.74156487877182331, 0.1599103928769201, -0.45084987571886009 },
      [-1] = { 0.89394292028318445, 0.91259720359445318, -0.6297152468309084 },
      [0x6c756d7573] = { 0.14925965271539121, 0.54138373250475635, -0.68523094466648871 },
    }
    for seed, w in pairs(want) do
      local g = ref.rng(seed)
      assert.are.same(w, { g(), g(), g.normal() }, "seed " .. seed)
    end
    assert.are.equal(0.74156487877182331, compat.splitmix64(42, 1))
    if compat.integers then   -- a seed beyond 2^53 (exact only with 64-bit integers)
      local g = ref.rng(compat.integer(2 ^ 60))
      assert.are.same({ 0.56529100464000936, 0.20823135572578144 }, { g(), g() })
    end
    checks.errors(ref.rng, "seed must be an integer, got 1.5", 1.5)
  end)
end)

describe("lumus.compat helpers", function()
  it("tell integers the same way on every version", function()
    assert.is_true(compat.is_integer(3))
    assert.is_true(compat.is_integer(3.0))
    assert.is_false(compat.is_integer(3.5))
    assert.is_false(compat.is_integer(math.huge))
    assert.is_false(compat.is_integer(0 / 0))
    assert.is_false(compat.is_integer("3"))
    assert.are.equal("3", tostring(compat.integer(3.0)))
    assert.is_nil(compat.integer(0.5))
    assert.are.equal(3, select("#", compat.unpack({ 1, nil, 3 }, 1, 3)))
    local p = compat.pack(1, nil, 3)
    assert.are.equal(3, p.n)
  end)

  it("load a chunk with an environment, and run a function when an object is collected", function()
    local f = assert(compat.load("return x + 1", "=chunk", { x = 41 }))
    assert.are.equal(42, f())
    assert.are.equal("function", assert(compat.load("return type(print)", "=globals"))())   -- no env: _G
    local ran = false
    compat.on_collect(function() ran = true end)
    collectgarbage(); collectgarbage()
    assert.is_true(ran)
    assert.is_true(compat.execute("true"))
    assert.is_false(compat.execute("false"))
  end)
end)
