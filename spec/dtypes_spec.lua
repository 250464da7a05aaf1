-- dtypes: factories, host transfers, conversions (bitwise against lumus.reference on edge
-- values), copies and views in every dtype, write_bytes, and errors by message.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local error_of = checks.error_of

local DTYPES = { "float32", "float16", "bfloat16", "int32", "bool" }
local SIZE = { float32 = 4, float16 = 2, bfloat16 = 2, int32 = 4, bool = 1 }

-- Hex of a byte string, for messages.
local function hex(s) return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end

local function same_bytes(want, got, what)
  if want ~= got then
    -- the first differing element, for the message
    error(("%s: bytes differ\n want %s\n  got %s"):format(what, hex(want), hex(got)), 2)
  end
end

-- float32 values at the edges of every conversion (each exact in float32).
local F32_EDGES = {
  0.0, -0.0, 1, -1, 1.5, -2.5, 2.7, -2.7, 0.1,
  1 + 2 ^ -11, 1 + 3 * 2 ^ -11, 1 + 2 ^ -8, 1 + 3 * 2 ^ -8, 1 + 2 ^ -8 + 2 ^ -20,   -- ties of float16 and bfloat16
  65504, 65519, 65520, -65520, 65536, 2 ^ 16 - 2 ^ 4, 1e5,                       -- float16's top
  2 ^ -14, 2 ^ -15 + 2 ^ -20, 2 ^ -24, 2 ^ -25, 2 ^ -25 + 2 ^ -40, 3 * 2 ^ -26, 1e-8, -- float16 subnormals
  2 ^ -126, 2 ^ -149, -2 ^ -140, 3.4028234663852886e38, -3.4028234663852886e38,      -- float32's ends
  2 ^ 31, -2 ^ 31, 2147483520, -2147483904, 1e10, -1e10, 16777217 - 1,               -- int32's ends
  math.huge, -math.huge, 0 / 0,
}
for i, v in ipairs(F32_EDGES) do F32_EDGES[i] = ref.round_float32(v) end

local I32_EDGES = { 0, 1, -1, 7, 2047, 2049, 65504, 65519, 65520, 16777216, 16777217, -16777217,
                    33554435, 2147483647, -2147483648, 123456789 }

describe("factories with {dtype=}", function()
  it("make zeros, ones, full and empty in every dtype", function()
    local one = { float32 = 1, float16 = 1, bfloat16 = 1, int32 = 1, bool = true }
    local zero = { float32 = 0, float16 = 0, bfloat16 = 0, int32 = 0, bool = false }
    for _, d in ipairs(DTYPES) do
      for _, n in ipairs { 1, 3, 5, 8, 1031 } do   -- tails of 1..3 bytes and whole words
        local z, o = lumus.zeros({ n }, { dtype = d }), lumus.ones(n, { dtype = d })
        assert.are.equal(d, z:dtype())
        assert.are.equal(n * SIZE[d], #z:to_bytes())
        local zt, ot = z:to_table(), o:to_table()
        for i = 1, n do
          assert.are.equal(zero[d], zt[i]); assert.are.equal(one[d], ot[i])
        end
      end
      assert.are.equal(d, lumus.empty({ 2, 3 }, { dtype = d }):dtype())
    end
    assert.are.same({ 7, 7, 7 }, lumus.full({ 3 }, 7, { dtype = "int32" }):to_table())
    assert.are.same({ -2.5, -2.5 }, lumus.full({ 2 }, -2.5, { dtype = "bfloat16" }):to_table())
    assert.are.same({ true, true }, lumus.full({ 2 }, 0.5, { dtype = "bool" }):to_table())
    assert.are.same({ true }, lumus.full({ 1 }, 0 / 0, { dtype = "bool" }):to_table())   -- NaN ~= 0
    assert.are.same({ false }, lumus.full({ 1 }, false, { dtype = "bool" }):to_table())
    assert.are.same({ math.huge, -math.huge }, lumus.tensor({ 70000, -1e6 }, { dtype = "float16" }):to_table())
    assert.are.same({ 0.0999755859375 }, lumus.full({ 1 }, 0.1, { dtype = "float16" }):to_table())
  end)

  it("give int32 elements as Lua integers and bool ones as booleans", function()
    local t = lumus.tensor({ { 1, -2 }, { 3, 2147483647 } }, { dtype = "int32" }):to_table()
    assert.are.same({ { 1, -2 }, { 3, 2147483647 } }, t)
    assert.are.equal("integer", math.type(t[2][2]))
    assert.are.same({ true, false, true }, lumus.tensor({ true, false, 5 }, { dtype = "bool" }):to_table())
    assert.are.equal(-7, lumus.tensor({ -7 }, { dtype = "int32" }):item())
    assert.are.equal("integer", math.type(lumus.tensor({ -7 }, { dtype = "int32" }):item()))
    assert.are.equal(true, lumus.tensor({ 1 }, { dtype = "bool" }):item())
    assert.are.equal(2 ^ -24, lumus.tensor({ 2 ^ -24 }, { dtype = "float16" }):item())
    assert.are.equal(3.140625, lumus.tensor({ 3.14159 }, { dtype = "bfloat16" }):item())
  end)

  it("raise for unknown dtypes and values a dtype cannot hold, naming them", function()
    assert.matches("bad argument #2 to 'lumus.zeros' %(dtype 'float64' is not supported %(float32, float16, bfloat16, int32 or bool%)%)",
      error_of(lumus.zeros, { 2 }, { dtype = "float64" }))
    assert.matches("bad argument #3 to 'lumus.from_bytes' %(dtype 'uint8' is not supported",
      error_of(lumus.from_bytes, "ab", { 2 }, { dtype = "uint8" }))
    assert.matches("dtype must be a string", error_of(lumus.ones, { 2 }, { dtype = true }))
    assert.matches("bad argument #2 to 'lumus.full' %(value 1.5 is a fraction %(int32 holds integers",
      error_of(lumus.full, { 2 }, 1.5, { dtype = "int32" }))
    assert.matches("value 3000000000.0 is out of the int32 range", error_of(lumus.full, { 2 }, 3e9, { dtype = "int32" }))
    assert.matches("value %-?nan is NaN or inf", error_of(lumus.full, { 2 }, 0 / 0, { dtype = "int32" }))
    assert.matches("element %[2%] is a fraction", error_of(lumus.tensor, { 1, 2.5 }, { dtype = "int32" }))
    assert.matches("element %[1%] is string, number or boolean expected", error_of(lumus.tensor, { "x" }, { dtype = "bool" }))
    assert.matches("bad argument #2 to 'lumus.fill' %(value 0.5 is a fraction",
      error_of(lumus.fill, lumus.zeros({ 2 }, { dtype = "int32" }), 0.5))
    assert.matches("tensor has 2 elements %(item needs exactly one%)", error_of(lumus.zeros({ 2 }).item, lumus.zeros({ 2 })))
  end)
end)

describe("host transfers in every dtype", function()
  it("round-trip from_bytes / to_bytes / to_table", function()
    local bytes = {
      float32 = string.pack("<fff", 1.5, -0.0, 1 / 0),
      float16 = string.pack("<I2I2I2", 0x3c00, 0x8001, 0x7bff),
      bfloat16 = string.pack("<I2I2I2", 0x3f80, 0x0001, 0xff80),
      int32 = string.pack("<i4i4i4", -5, 2147483647, -2147483648),
      bool = "\1\0\1",
    }
    local values = {
      float32 = { 1.5, -0.0, math.huge }, float16 = { 1, -2 ^ -24, 65504 },
      bfloat16 = { 1, 2 ^ -133, -math.huge }, int32 = { -5, 2147483647, -2147483648 }, bool = { true, false, true },
    }
    for _, d in ipairs(DTYPES) do
      local t = lumus.from_bytes(bytes[d], { 3 }, { dtype = d })
      assert.are.equal(d, t:dtype())
      same_bytes(bytes[d], t:to_bytes(), d)
      assert.are.same(values[d], t:to_table())
      same_bytes(bytes[d]:sub(SIZE[d] + 1, 2 * SIZE[d]), t:to_bytes(2, 1), d .. " element 2")
      same_bytes(bytes[d], lumus.tensor(values[d], { dtype = d }):to_bytes(), d .. " from a table")
      same_bytes(ref.dtype_bytes(values[d], d), bytes[d], d .. " reference bytes")
    end
  end)

  it("check byte counts against the dtype, and bool bytes", function()
    assert.matches("expected 6 bytes %(2 per float16%) for shape 3, got 4",
      error_of(lumus.from_bytes, "abcd", { 3 }, { dtype = "float16" }))
    assert.matches("byte 2 is 2: bool elements are the bytes 0 and 1",
      error_of(lumus.from_bytes, "\1\2", { 2 }, { dtype = "bool" }))
  end)
end)

describe("conversions", function()
  local function check_from(values, src_dtype)
    local x = lumus.tensor(values, { dtype = src_dtype })
    for _, d in ipairs(DTYPES) do
      local y = x:to(d)
      assert.are.equal(d, y:dtype())
      same_bytes(ref.dtype_bytes(values, d), y:to_bytes(), src_dtype .. " -> " .. d)
    end
  end

  it("float32 -> every dtype, bitwise against the reference on edge values", function()
    check_from(F32_EDGES, "float32")
  end)

  it("int32 and bool -> every dtype, bitwise", function()
    check_from(I32_EDGES, "int32")
    check_from({ true, false, true, true, false }, "bool")
  end)

  it("float16 and bfloat16 -> every dtype (widening is exact), bitwise", function()
    for _, d in ipairs { "float16", "bfloat16" } do
      local narrow = {}
      for i, v in ipairs(F32_EDGES) do narrow[i] = ref.to_dtype(v, d) end
      check_from(narrow, d)
    end
  end)

  it("methods name the dtypes; to(same dtype) returns the tensor itself", function()
    local x = lumus.tensor({ 1.25, -3.75, 2.5 })
    assert.are.same({ 1, -3, 2 }, x:int():to_table())
    assert.are.same({ true, true, true }, x:bool():to_table())
    assert.are.same({ 1.25, -3.75, 2.5 }, x:half():float():to_table())
    assert.are.same({ 1.25, -3.75, 2.5 }, x:bfloat16():to_table())
    assert.are.equal(x, x:to("float32"))
    assert.are.equal(x, x:float())
    local h = x:half()
    assert.are.equal(h, h:half())
    assert.are.equal("float16", lumus.to(x, "float16"):dtype())
  end)

  it("write into out, and raise on a wrong out or dtype", function()
    local x = lumus.tensor({ 1.5, 2.5 })
    local o = lumus.zeros({ 2 }, { dtype = "int32" })
    assert.are.equal(o, x:to("int32", { out = o }))
    assert.are.same({ 1, 2 }, o:to_table())
    assert.matches("out must be float16 %(the dtype converted to%), got int32", error_of(x.to, x, "float16", { out = o }))
    assert.matches("out must have shape 2, got 3", error_of(x.to, x, "int32", { out = lumus.zeros({ 3 }, { dtype = "int32" }) }))
    assert.matches("bad argument #2 to 'lumus.to' %(dtype 'double' is not supported", error_of(lumus.to, x, "double"))
    assert.matches("unknown option 'outt'", error_of(x.half, x, { outt = 1 }))
  end)
end)
