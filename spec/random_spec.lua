-- Random numbers (lumus.manual_seed, rand, randn, multinomial, uniform_, normal_,
-- get/set_rng_state) and lumus.arange. The device's numbers are checked bit for bit
-- against lumus.reference, which repeats the generator's integer and float32 steps
-- (docs/random.md); randn also against Box-Muller in float64 at a stated bound; and the
-- distributions by their moments and chi-square statistics on a million samples, at
-- bounds a correct generator fails with probability below 1e-6.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local function bits(t)   -- a tensor's elements as 32-bit words
  local s, out = t:to_bytes(), {}
  for i = 1, math.floor(#s / 4) do out[i] = compat.unpack_bytes("u32", s, 4 * i - 3, 1)[1] end
  return out
end
local function ints(t)
  local s, out = t:to_bytes(), {}
  for i = 1, math.floor(#s / 4) do out[i] = compat.unpack_bytes("i32", s, 4 * i - 3, 1)[1] end
  return out
end
local function float_bits(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = compat.unpack_bytes("u32", compat.pack_bytes("f32", { v }), 1, 1)[1] end
  return out
end
local function floats(t)
  local s, out = t:to_bytes(), {}
  for i = 1, math.floor(#s / 4) do out[i] = compat.unpack_bytes("f32", s, 4 * i - 3, 1)[1] end
  return out
end

-- Every word equal; the message names the first difference.
local function same_bits(got, want, what)
  assert.are.equal(#want, #got, what .. ": element count")
  for i = 1, #want do
    if got[i] ~= want[i] then
      error(("%s: element %d is 0x%08x, want 0x%08x"):format(what, i, got[i], want[i]), 2)
    end
  end
end

local function numel(shape)
  if type(shape) == "number" then return shape end
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local SHAPES = { 1, 2, 3, 4, 5, 7, 8, 13, { 3, 5 }, { 2, 3, 5, 7 }, 1021, 4099, { 17, 61 } }

describe("Philox4x32-10", function()
  it("reproduces Random123's known-answer vectors (the reference)", function()
    local kat = {
      { { 0, 0, 0, 0 }, { 0, 0 }, { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 } },
      { { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff }, { 0xffffffff, 0xffffffff },
        { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd } },
      { { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, { 0xa4093822, 0x299f31d0 },
        { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 } },
    }
    for _, v in ipairs(kat) do same_bits(ref.philox4x32_10(v[1], v[2]), v[3], "philox") end
  end)

  it("on the device: seed 0, first call, gives the zero vector's words as (w >> 8) 2^-24", function()
    lumus.manual_seed(0)
    local want = {}
    for i, w in ipairs { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 } do want[i] = math.floor(w / 256) * 2 ^ -24 end
    same_bits(bits(lumus.rand(4)), float_bits(want), "rand(4) after manual_seed(0)")
  end)
end)

describe("lumus.rand and lumus.randn", function()
  it("rand matches the reference bit for bit over shapes and seeds", function()
    for k, shape in ipairs(SHAPES) do
      lumus.manual_seed(k * 7919 - 40000)
      if k % 3 == 0 then lumus.rand(5) end   -- a later call of the stream, too
      local state = lumus.get_rng_state()
      local t = lumus.rand(shape)
      assert.are.same(type(shape) == "table" and shape or { shape }, t:shape())
      assert.are.equal("float32", t:dtype())
      same_bits(bits(t), float_bits(ref.flatten(ref.rand(shape, state))), "rand " .. k)
    end
  end)

  it("randn matches the reference bit for bit, and Box-Muller in float64 within 4e-7 max(1, |z|)", function()
    for k, shape in ipairs(SHAPES) do
      lumus.manual_seed(2 ^ 40 + k)
      local state = lumus.get_rng_state()
      local t = lumus.randn(shape)
      same_bits(bits(t), float_bits(ref.flatten(ref.randn(shape, state))), "randn " .. k)
      checks.close(t, ref.randn_float64(shape, state), { what = "randn " .. k, abs = 4e-7 * 1, rel = 4e-7 })
    end
  end)

  it("randn's float32 steps stay within the bound over 2^18 normals", function()
    lumus.manual_seed(99)
    local state = lumus.get_rng_state()
    local t = lumus.randn(2 ^ 18)
    local got, want = floats(t), ref.flatten(ref.randn_float64(2 ^ 18, state))
    local worst = 0
    for i = 1, #got do
      local e = math.abs(got[i] - want[i]) / math.max(1, math.abs(want[i]))
      if e > worst then worst = e end
    end
    assert.is_true(worst <= 4e-7, "worst error " .. worst)
  end)

  it("one seed gives one stream: the same after manual_seed, calls differ, state round-trips", function()
    lumus.manual_seed(1234)
    local a, b = bits(lumus.rand(1000)), bits(lumus.randn(1000))
    lumus.manual_seed(1234)
    same_bits(bits(lumus.rand(1000)), a, "rand after the same seed")
    same_bits(bits(lumus.randn(1000)), b, "randn after the same seed")
    local c = bits(lumus.rand(1000))
    local equal = 0
    for i = 1, 1000 do if c[i] == a[i] then equal = equal + 1 end end
    assert.is_true(equal < 5, "the next call repeats the first: " .. equal .. " equal elements")
    local s = lumus.get_rng_state()
    assert.are.same({ seed = 1234, offset = 3 }, s)
    local d = bits(lumus.randn({ 7, 3 }))
    lumus.rand(10)
    lumus.set_rng_state(s)
    same_bits(bits(lumus.randn({ 7, 3 })), d, "randn after set_rng_state")
    lumus.manual_seed(1235)
    local e, diff = bits(lumus.rand(1000)), 0
    for i = 1, 1000 do if e[i] ~= a[i] then diff = diff + 1 end end
    assert.is_true(diff > 990, "seeds 1234 and 1235 agree on " .. 1000 - diff .. " elements")
  end)

  it("seeds use all 64 bits, negative ones included, and get_rng_state gives them back", function()
    for _, seed in ipairs { -1, compat.mininteger, compat.maxinteger, 2 ^ 32, 2 ^ 32 + 1 } do
      seed = compat.integer(seed)
      lumus.manual_seed(seed)
      assert.are.same({ seed = seed, offset = 0 }, lumus.get_rng_state())
      local state = lumus.get_rng_state()
      same_bits(bits(lumus.rand(9)), float_bits(ref.rand(9, state)), "seed " .. seed)
    end
    lumus.manual_seed(2 ^ 32)
    local a = bits(lumus.rand(64))
    lumus.manual_seed(2 ^ 32 + 1)
    assert.are_not.same(a, bits(lumus.rand(64)))
  end)

  it("rand is uniform on [0, 1): range, moments and a 256-bin chi-square over 2^20 values", function()
    lumus.manual_seed(7)
    local n = 2 ^ 20
    local x = floats(lumus.rand(n))
    local sum, sq, bins = 0, 0, {}
    for b = 1, 256 do bins[b] = 0 end
    for i = 1, n do
      local v = x[i]
      if not (v >= 0 and v < 1) then error("value out of [0, 1): " .. v) end
      sum, sq = sum + v, sq + v * v
      local b = math.floor(v * 256) + 1
      bins[b] = bins[b] + 1
    end
    local mean, var = sum / n, sq / n - (sum / n) ^ 2
    -- sd of the mean: sqrt(1/12 / n); of the variance: sqrt(1/180 / n); 6 sd
    assert.is_true(math.abs(mean - 0.5) < 6 * math.sqrt(1 / 12 / n), "mean " .. mean)
    assert.is_true(math.abs(var - 1 / 12) < 6 * math.sqrt(1 / 180 / n), "variance " .. var)
    local e, chi = n / 256, 0
    for b = 1, 256 do chi = chi + (bins[b] - e) ^ 2 / e end
    -- 255 degrees of freedom: mean 255, sd 22.6; P(chi > 400) < 1e-8
    assert.is_true(chi < 400, "chi-square " .. chi)
  end)

  it("randn is standard normal: moments, tails and a 64-bin chi-square over 2^20 values", function()
    lumus.manual_seed(8)
    local n = 2 ^ 20
    local x = floats(lumus.randn(n))
    local sum, sq, q4, tail = 0, 0, 0, 0
    local edges, bins = {}, {}
    for b = 1, 63 do edges[b] = -4 + 8 * b / 64 end
    for b = 1, 64 do bins[b] = 0 end
    for i = 1, n do
      local v = x[i]
      sum, sq, q4 = sum + v, sq + v * v, q4 + v ^ 4
      if math.abs(v) > 1.959964 then tail = tail + 1 end
      local b = math.floor((v + 4) * 8) + 1
      if b < 1 then b = 1 elseif b > 64 then b = 64 end
      bins[b] = bins[b] + 1
    end
    local mean, var = sum / n, sq / n - (sum / n) ^ 2
    assert.is_true(math.abs(mean) < 6 / math.sqrt(n), "mean " .. mean)
    assert.is_true(math.abs(var - 1) < 6 * math.sqrt(2 / n), "variance " .. var)
    assert.is_true(math.abs(q4 / n - 3) < 6 * math.sqrt(96 / n), "fourth moment " .. q4 / n)
    assert.is_true(math.abs(tail / n - 0.05) < 6 * math.sqrt(0.05 * 0.95 / n), "two-sided 5% tail " .. tail / n)
    local function cdf(z) return 0.5 * ref.erfc(-z / math.sqrt(2)) end
    local chi = 0
    for b = 1, 64 do
      local lo = b == 1 and -math.huge or -4 + (b - 1) / 8
      local hi = b == 64 and math.huge or -4 + b / 8
      local e = n * (cdf(hi) - cdf(lo))
      chi = chi + (bins[b] - e) ^ 2 / e
    end
    -- 63 degrees of freedom: P(chi > 140) < 1e-7
    assert.is_true(chi < 140, "chi-square " .. chi)
  end)

  it("rand and randn of 2^24 + 6 elements: their first and last values are the reference's", function()
    local n = 2 ^ 24 + 6   -- a 64-bit block index is not needed, but 4 Mi blocks and a tail are
    for _, name in ipairs { "rand", "randn" } do
      lumus.manual_seed(5)
      local state = lumus.get_rng_state()
      local t = lumus[name](n)
      local head, tail = t:to_bytes(1, 6), t:to_bytes(n - 5, 6)
      local got = {}
      for i = 1, 6 do got[i] = compat.unpack_bytes("u32", head, 4 * i - 3, 1)[1] end
      for i = 1, 6 do got[6 + i] = compat.unpack_bytes("u32", tail, 4 * i - 3, 1)[1] end
      local want = float_bits(ref[name](6, state))
      for i, w in ipairs(float_bits(ref[name](6, state, n - 6))) do want[6 + i] = w end
      same_bits(got, want, name .. " head and tail")
      t:free()
    end
  end)

  it("float16 and bfloat16: rand with the bits they hold, randn rounded to nearest even", function()
    for _, dtype in ipairs { "float16", "bfloat16" } do
      for k, shape in ipairs { 1, 3, 4, 7, { 5, 13 }, 4099 } do
        lumus.manual_seed(300 + k)
        local state = lumus.get_rng_state()
        local t = lumus.rand(shape, { dtype = dtype })
        assert.are.equal(dtype, t:dtype())
        local want = ref.flatten(ref.rand(shape, state, 0, dtype))
        assert.are.equal(ref.dtype_bytes(want, dtype), t:to_bytes(), dtype .. " rand " .. k)
        for _, v in ipairs(want) do assert(v >= 0 and v < 1) end
        state = lumus.get_rng_state()
        local z = lumus.randn(shape, { dtype = dtype })
        assert.are.equal(ref.dtype_bytes(ref.flatten(ref.randn(shape, state, 0, dtype)), dtype), z:to_bytes(),
                         dtype .. " randn " .. k)
      end
    end
    -- every float16 value of rand is a multiple of 2^-11 below 1: 2^16 draws hit them all
    local seen, count = {}, 0
    for _, v in ipairs(ref.flatten(lumus.rand(2 ^ 16, { dtype = "float16" }):to_table())) do
      assert(v >= 0 and v < 1 and v * 2048 == math.floor(v * 2048), "float16 rand value " .. v)
      if not seen[v] then seen[v], count = true, count + 1 end
    end
    assert.are.equal(2048, count)
  end)

  it("errors: shapes, options and dtypes by message", function()
    checks.errors(lumus.rand, "#1 to 'lumus.rand'", "x")
    checks.errors(lumus.rand, "#1 to 'lumus.rand'", { 0 })
    checks.errors(lumus.randn, "unknown option 'out'", { 2 }, { out = lumus.zeros(2) })
    checks.errors(lumus.rand, "dtype 'int32' is not supported %(float32, float16 or bfloat16%)", { 2 }, { dtype = "int32" })
    checks.errors(lumus.randn, "dtype 'bool' is not supported", { 2 }, { dtype = "bool" })
    checks.errors(lumus.randn, "#2 to 'lumus.randn'", { 2 }, { dtype = "float64" })
    checks.errors(lumus.manual_seed, "#1 to 'lumus.manual_seed'", 1.5)
    checks.errors(lumus.manual_seed, "no more arguments expected", 1, 2)
    checks.errors(lumus.set_rng_state, "expected a table {seed =, offset =}", nil)
    checks.errors(lumus.set_rng_state, "offset is missing", { seed = 1 })
    checks.errors(lumus.set_rng_state, "seed is missing", { offset = 1 })
    checks.errors(lumus.set_rng_state, "unknown option 'state'", { seed = 1, offset = 2, state = 3 })
    checks.errors(lumus.set_rng_state, "seed must be an integer", { seed = 1.5, offset = 2 })
  end)
end)

describe("t:uniform_ and t:normal_", function()
  it("fill in place, views included, bit for bit as the reference", function()
    for k, shape in ipairs { 1, 5, { 3, 7 }, 1027 } do
      local t = lumus.full(shape, 42)
      local state = lumus.get_rng_state()
      assert.are.equal(t, t:uniform_(-2.5, 3))
      same_bits(bits(t), float_bits(ref.flatten(ref.uniform(shape, state, -2.5, 3))), "uniform_ " .. k)
      state = lumus.get_rng_state()
      lumus.normal_(t, 10, 0.25)
      same_bits(bits(t), float_bits(ref.flatten(ref.normal(shape, state, 10, 0.25))), "normal_ " .. k)
    end
    -- a transposed view: its elements in its own order; the rest untouched
    local base = lumus.zeros({ 4, 6 })
    local v = base:narrow(2, 2, 3):transpose(1, 2)
    local state = lumus.get_rng_state()
    v:uniform_()
    same_bits(bits(v:contiguous()), float_bits(ref.flatten(ref.rand({ 3, 4 }, state))), "uniform_ on a view")
    local rows = base:to_table()
    for r = 1, 4 do
      assert.are.equal(0, rows[r][1]); assert.are.equal(0, rows[r][5]); assert.are.equal(0, rows[r][6])
    end
  end)

  it("uniform_(a, b) stays in [a, b), also where a + (b - a) u rounds up to b", function()
    local t = lumus.zeros(100000)
    t:uniform_(1, 1 + 2 ^ -22)   -- four float32 values: the rounding reaches b often
    for _, v in ipairs(floats(t)) do assert(v >= 1 and v < 1 + 2 ^ -22, "out of range: " .. v) end
    t:uniform_(3, 3)
    for _, v in ipairs(floats(t)) do assert.are.equal(3, v) end
  end)

  it("errors by message", function()
    local t = lumus.zeros(4)
    checks.errors(t.uniform_, "to must be >= from", t, 2, 1)
    checks.errors(t.uniform_, "from must be a finite float32 value", t, 0 / 0, 1)
    checks.errors(t.uniform_, "to %- from overflows float32", t, -3e38, 3e38)
    checks.errors(t.normal_, "std must be >= 0", t, 0, -1)
    checks.errors(t.normal_, "mean must be a finite float32 value", t, 1e39, 1)
    checks.errors(t.normal_, "no more arguments expected", t, 0, 1, 2)
    checks.errors(lumus.normal_, "the tensor must be float32, got int32", lumus.arange(4), 0, 1)
    checks.errors(lumus.uniform_, "the tensor must be float32, got float16", lumus.zeros(4, { dtype = "float16" }))
    checks.errors(t:expand({ 3, 4 }).uniform_, "expanded", t:expand({ 3, 4 }))
  end)
end)

describe("lumus.multinomial", function()
  local g = ref.rng(31)
  local function weights(rows, ncat, zero_rate)
    local p = {}
    for r = 1, rows do
      p[r] = {}
      for k = 1, ncat do p[r][k] = g() < zero_rate and 0 or ref.f32(g() * 3) end
    end
    return p
  end

  it("matches the reference bit for bit, with and without replacement", function()
    local cases = { { 1, 1, 1, true }, { 1, 3, 5, true }, { 4, 7, 20, true }, { 3, 1000, 50, false },
                    { 2, 50257, 9, true }, { 2, 50257, 3, false }, { 5, 300, 200, false },
                    { 1, 257, 257, false }, { 37, 17, 1, true }, { 3, 4096, 600, true } }
    for k, c in ipairs(cases) do
      local rows, ncat, n, repl = c[1], c[2], c[3], c[4]
      local p = weights(rows, ncat, repl and 0.3 or 0)
      local state = lumus.get_rng_state()
      local got = lumus.multinomial(lumus.tensor(p), n, { replacement = repl })
      assert.are.equal("int32", got:dtype())
      assert.are.same({ rows, n }, got:shape())
      assert.are.same(ref.flatten(ref.multinomial(p, n, repl, state)), ints(got), "case " .. k)
    end
    for _, dtype in ipairs { "float16", "bfloat16" } do   -- 16-bit weights: as their float32 values
      local p = weights(3, 300, 0.2)
      local pt = lumus.tensor(p, { dtype = dtype })
      local pv = pt:to_table()
      for _, repl in ipairs { true, false } do
        local state = lumus.get_rng_state()
        local n = repl and 40 or 20
        assert.are.same(ref.flatten(ref.multinomial(pv, n, repl, state)),
                        ints(lumus.multinomial(pt, n, { replacement = repl })), dtype)
      end
    end
    local state = lumus.get_rng_state()
    local got = lumus.multinomial(lumus.tensor { 0, 2, 0, 1 }, 6, { replacement = true })
    assert.are.same({ 6 }, got:shape())
    assert.are.same(ref.multinomial({ 0, 2, 0, 1 }, 6, true, state), ints(got))
  end)

  it("into {out=}: an int32 tensor of the result's shape, reused across calls", function()
    local p = lumus.tensor { { 1, 2, 3, 0 }, { 0, 0, 5, 1 } }
    local out = lumus.full({ 2, 3 }, -7, { dtype = "int32" })
    for _, repl in ipairs { true, false } do
      local state = lumus.get_rng_state()
      assert.are.equal(out, lumus.multinomial(p, 3, { replacement = repl, out = out }))
      local want = ref.flatten(ref.multinomial(p:to_table(), 3, repl, state))
      assert.are.same(want, ints(out))
    end
  end)

  it("without replacement: distinct categories of weight > 0, all of them when n is their count", function()
    local p = { 0, 5, 0, 1, 2, 0, 0.5 }
    for _ = 1, 20 do
      local s = ints(lumus.multinomial(lumus.tensor(p), 4))
      table.sort(s)
      assert.are.same({ 2, 4, 5, 7 }, s)
    end
  end)

  it("with replacement follows the weights: chi-square over 2^20 samples", function()
    local w = { 1, 2, 3, 4, 0, 10, 0.5, 0.25, 7, 2.25 }
    local total = 0
    for _, v in ipairs(w) do total = total + v end
    local rows = {}
    for r = 1, 1024 do rows[r] = w end
    lumus.manual_seed(11)
    local s = ints(lumus.multinomial(lumus.tensor(rows), 1024, { replacement = true }))
    local count = {}
    for k = 1, #w do count[k] = 0 end
    for _, k in ipairs(s) do count[k] = count[k] + 1 end
    assert.are.equal(0, count[5])
    local chi = 0
    for k = 1, #w do
      if w[k] > 0 then
        local e = #s * w[k] / total
        chi = chi + (count[k] - e) ^ 2 / e
      end
    end
    -- 8 degrees of freedom: P(chi > 45) < 1e-6
    assert.is_true(chi < 45, "chi-square " .. chi)
  end)

  it("without replacement, the first pick follows the weights and the second the rest", function()
    local w = { 4, 3, 2, 1 }
    local rows = {}
    for r = 1, 8192 do rows[r] = w end
    lumus.manual_seed(12)
    local s = ints(lumus.multinomial(lumus.tensor(rows), 2))
    local first, second_after_1 = { 0, 0, 0, 0 }, { 0, 0, 0, 0 }
    local n1 = 0
    for r = 0, 8191 do
      local a, b = s[2 * r + 1], s[2 * r + 2]
      assert.are_not.equal(a, b)
      first[a] = first[a] + 1
      if a == 1 then n1 = n1 + 1; second_after_1[b] = second_after_1[b] + 1 end
    end
    local chi1, chi2 = 0, 0
    for k = 1, 4 do chi1 = chi1 + (first[k] - 8192 * w[k] / 10) ^ 2 / (8192 * w[k] / 10) end
    for k = 2, 4 do chi2 = chi2 + (second_after_1[k] - n1 * w[k] / 6) ^ 2 / (n1 * w[k] / 6) end
    -- 3 and 2 degrees of freedom: P(chi > 32) < 1e-6, P(chi > 28) < 1e-6
    assert.is_true(chi1 < 32, "first pick chi-square " .. chi1)
    assert.is_true(chi2 < 28, "second pick chi-square " .. chi2)
  end)

  it("a row with a negative, NaN or infinite weight, or all zero, gives 0s; the others are drawn", function()
    local p = lumus.tensor { { 1, -1, 2 }, { 0, 0, 0 }, { 1, 0 / 0, 1 }, { 1, 2, 3 }, { 1, 1 / 0, 1 }, { 0, 0, 7 } }
    local s = ints(lumus.multinomial(p, 2, { replacement = true }))
    assert.are.same({ 0, 0, 0, 0, 0, 0 }, { s[1], s[2], s[3], s[4], s[5], s[6] })
    assert.are.same({ 0, 0 }, { s[9], s[10] })
    assert.is_true(s[7] >= 1 and s[7] <= 3 and s[8] >= 1 and s[8] <= 3)
    assert.are.same({ 3, 3 }, { s[11], s[12] })
    -- without replacement, fewer nonzero weights than samples
    assert.are.same({ 0, 0, 0 }, ints(lumus.multinomial(lumus.tensor { { 1, 0, 0, 2 } }, 3)))
  end)

  it("errors by message", function()
    local p = lumus.tensor { { 1, 2, 3 } }
    checks.errors(lumus.multinomial, "cannot draw 4 samples without replacement from 3 categories", p, 4)
    checks.errors(lumus.multinomial, "number of samples must be >= 1", p, 0)
    checks.errors(lumus.multinomial, "#2 to 'lumus.multinomial'", p, 1.5)
    checks.errors(lumus.multinomial, "probs must be 1%-D or 2%-D, got 3 dimensions", lumus.ones { 2, 2, 2 }, 1)
    checks.errors(lumus.multinomial, "probs must be float32, float16 or bfloat16, got int32", lumus.arange(3), 1)
    checks.errors(lumus.multinomial, "unknown option 'dim'", p, 1, { dim = 1 })
    checks.errors(lumus.multinomial, "out must be int32, got float32", p, 2, { out = lumus.zeros { 1, 2 } })
    checks.errors(lumus.multinomial, "out must have shape 1x2, got 1x3", p, 2, { out = lumus.zeros({ 1, 3 }, { dtype = "int32" }) })
    checks.errors(lumus.multinomial, "out must be contiguous and 16%-byte aligned", p, 2,
                  { out = lumus.zeros({ 2, 4 }, { dtype = "int32" }):narrow(1, 1, 1):narrow(2, 2, 2) })
    checks.errors(lumus.multinomial, "replacement must be a boolean", p, 1, { replacement = 1 })
    if lumus.device().kind == "cpu" then
      checks.errors(lumus.multinomial, "exceed what a CPU device %(lavapipe%) runs", lumus.ones { 1, 100000 }, 5000)
    end
  end)
end)

describe("lumus.arange", function()
  it("integers give int32 from exact integer arithmetic", function()
    local cases = { { 5 }, { 2, 9 }, { 2, 9, 3 }, { 9, 2, -3 }, { -7, 8, 5 }, { 0, 1000003, 7 },
                    { 2147483640, 2147483647 }, { -2147483648, -2147483640, 3 } }
    for _, c in ipairs(cases) do
      local start, stop, step = c[1], c[2], c[3]
      if #c == 1 then start, stop = 0, c[1] end
      local t = lumus.arange(compat.unpack(c))
      assert.are.equal("int32", t:dtype())
      assert.are.same(ref.arange(start, stop, step, "int32"), ints(t))
    end
    assert.are.same({ 0, 1, 2 }, ints(lumus.arange(3)))
    assert.are.same({ 10, 7, 4, 1 }, ints(lumus.arange(10, 0, -3)))
  end)

  it("floats give float32: start + i step in float64, rounded once; PyTorch's count", function()
    local cases = { { 0.0, 1, 0.1 }, { 1, 2.5, 0.5 }, { -1, 1, 0.3 }, { 1e6, 1e6 + 10, 0.7 },
                    { 0, 1, 1 / 3 }, { 10, 9, -0.125 }, { 0, 100000, 0.5 } }
    if compat.integers then cases[#cases + 1] = { 5.0 } end   -- a float (5.3+): float32
    for _, c in ipairs(cases) do
      local start, stop, step = c[1], c[2], c[3]
      if #c == 1 then start, stop = 0, c[1] end
      local t = lumus.arange(compat.unpack(c))
      assert.are.equal("float32", t:dtype())
      same_bits(bits(t), float_bits(ref.arange(start, stop, step)), "arange " .. table.concat(c, ", "))
    end
    assert.are.equal(10, lumus.arange(0, 1, 0.1):numel())     -- ceil(1 / 0.1) = 10
    assert.are.equal(3, lumus.arange(1, 2.5, 0.5):numel())
    same_bits(bits(lumus.arange(4, { dtype = "float32" })), float_bits { 0, 1, 2, 3 }, "dtype float32")
    assert.are.same({ 0, 2, 4 }, ints(lumus.arange(0, 5, 2, { dtype = "int32" })))
  end)

  it("errors by message", function()
    checks.errors(lumus.arange, "#1 to 'lumus.arange' %(the range is empty", 0)
    checks.errors(lumus.arange, "the range is empty", 1.5, 1.5)
    checks.errors(lumus.arange, "#3 to 'lumus.arange' %(step must be nonzero", 0, 5, 0)
    checks.errors(lumus.arange, "step must be nonzero", 0, 5, 0.0)
    checks.errors(lumus.arange, "upper bound and lower bound inconsistent with step sign", 5, 0, 1)
    checks.errors(lumus.arange, "upper bound and lower bound inconsistent with step sign", 0, 5.0, -1)
    checks.errors(lumus.arange, "must be finite, got inf", 0, 1 / 0)
    checks.errors(lumus.arange, "must be finite", 0 / 0)
    checks.errors(lumus.arange, "do not fit int32", 2147483647, 2147483649)
    checks.errors(lumus.arange, "too many", 0, 2 ^ 40 + 0.5)
    checks.errors(lumus.arange, "overflow float32", 1e300, 1e301, 1e299)
    checks.errors(lumus.arange, "number expected %(stop%), got string", "5")
    checks.errors(lumus.arange, "number expected %(stop%), got no value")
    checks.errors(lumus.arange, "#4 to 'lumus.arange' %(number or options table expected", 1, 2, 3, 4)
    checks.errors(lumus.arange, "dtype must be \"float32\" or \"int32\"", 3, { dtype = "bool" })
    checks.errors(lumus.arange, "unknown option 'out'", 3, { out = 1 })
    checks.errors(lumus.arange, "dtype int32 needs integer start, stop and step", 0.5, { dtype = "int32" })
    checks.errors(lumus.arange, "within %+%-2%^61", 0, compat.integer(2 ^ 62))
  end)
end)
