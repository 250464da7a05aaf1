-- lumus.reference (lua/lumus/reference.lua) against hand-computed values. Needs no
-- device: the reference is the float64 ground truth the GPU specs rely on, so it is
-- checked on its own first.
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

-- |a - b| <= tol for numbers, element by element for (nested) tables.
local function near(want, got, tol)
  if type(want) ~= "table" then want, got = { want }, { got } end
  checks.close(got, want, { abs = tol or 1e-12 })
end

-- The message of the error that f raises.
local error_of = checks.error_of

describe("reference.shape", function()
  it("infers the shape of nested tables", function()
    assert.are.same({ 3 }, ref.shape({ 1, 2, 3 }))
    assert.are.same({ 2, 3 }, ref.shape({ { 1, 2, 3 }, { 4, 5, 6 } }))
    assert.are.same({ 2, 1, 2 }, ref.shape({ { { 1, 2 } }, { { 3, 4 } } }))
  end)

  it("rejects ragged, empty and non-number tables, naming the element", function()
    assert.matches("element %[2%] has 1 entries where 2 were expected %(ragged%)",
      error_of(function() ref.shape({ { 1, 2 }, { 3 } }) end))
    assert.matches("element %[2%]%[1%] is number, a table of 1 expected %(ragged%)",
      error_of(function() ref.shape({ { { 1 } }, { 2 } }) end))
    assert.matches("element %[2%] is table, number expected",
      error_of(function() ref.shape({ 1, { 2 } }) end))
    assert.matches("element %[1%]%[2%] is string, number expected",
      error_of(function() ref.shape({ { 1, "a" } }) end))
    assert.matches("empty table at top level", error_of(function() ref.shape({}) end))
    assert.matches("empty table at %[1%]", error_of(function() ref.shape({ {} }) end))
    assert.matches("table expected, got number", error_of(function() ref.shape(5) end))
  end)
end)

describe("reference.flatten and reference.nest", function()
  it("flatten lists the numbers row-major", function()
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, ref.flatten({ { 1, 2, 3 }, { 4, 5, 6 } }))
    assert.are.same({ 1, 2, 3, 4 }, ref.flatten({ { { 1, 2 } }, { { 3, 4 } } }))
    assert.are.same({ 7, 8 }, ref.flatten({ 7, 8 }))
  end)

  it("flatten returns a new list and rejects ragged tables", function()
    local t = { 1, 2 }
    assert.are_not.equal(t, ref.flatten(t))
    assert.has_error(function() ref.flatten({ { 1 }, { 2, 3 } }) end)
  end)

  it("nest is the inverse of flatten", function()
    local t = { { { 1, 2 }, { 3, 4 }, { 5, 6 } }, { { 7, 8 }, { 9, 10 }, { 11, 12 } } }
    assert.are.same(t, ref.nest(ref.flatten(t), { 2, 3, 2 }))
    assert.are.same({ 1, 2, 3 }, ref.nest({ 1, 2, 3 }, { 3 }))
    assert.has_error(function() ref.nest({ 1, 2, 3 }, { 2, 2 }) end)
  end)
end)

describe("reference.compare", function()
  it("computes max abs, max relative and relative L2 errors", function()
    local c = ref.compare({ 1, 2, 3 }, { 1, 2, 4 })
    near(1, c.max_abs)
    near(0.25, c.max_rel)                      -- 1 / max(|4|, 1)
    near(1 / math.sqrt(1 + 4 + 16), c.rel_l2)
    assert.are.equal(3, c.worst)
    assert.are.equal(3, c.n)
  end)

  it("measures errors near zero absolutely in max_rel", function()
    local c = ref.compare({ 0.5e-3 }, { 1e-4 })
    near(4e-4, c.max_abs)
    near(4e-4, c.max_rel)                      -- divided by max(1e-4, 1) = 1
  end)

  it("is zero for identical inputs, nested or flat in any mix", function()
    local t = { { 1, -2 }, { 3.5, 0 } }
    for _, c in ipairs { ref.compare(t, t), ref.compare(t, { 1, -2, 3.5, 0 }), ref.compare({ 1, -2, 3.5, 0 }, t) } do
      assert.are.same({ max_abs = 0, max_rel = 0, rel_l2 = 0, worst = 1, n = 4 }, c)
    end
    assert.are.equal(0, ref.compare({ 0, 0 }, { 0, 0 }).rel_l2)
    assert.are.equal(math.huge, ref.compare({ 1, 0 }, { 0, 0 }).rel_l2)
  end)

  it("treats an unexpected NaN or infinity as infinitely wrong", function()
    local nan = 0 / 0
    for _, got in ipairs { { 1, nan, 3 }, { 1, math.huge, 3 }, { 1, -math.huge, 3 } } do
      local c = ref.compare(got, { 1, 2, 3 })
      assert.are.equal(math.huge, c.max_abs)
      assert.are.equal(math.huge, c.max_rel)
      assert.are.equal(math.huge, c.rel_l2)
      assert.are.equal(2, c.worst)
    end
    assert.are.equal(math.huge, ref.compare({ 1 }, { nan }).max_abs)
    -- shared NaN and equal infinities are equal
    assert.are.equal(0, ref.compare({ nan, math.huge }, { nan, math.huge }).max_abs)
  end)

  it("rejects inputs of different sizes", function()
    assert.matches("3 elements against 2", error_of(function() ref.compare({ 1, 2, 3 }, { 1, 2 }) end))
  end)
end)

describe("reference.layer_norm_forward", function()
  -- Row {1, 2, 3, 4}: mean 2.5, deviations -1.5 -0.5 0.5 1.5, squared sum 5,
  -- biased variance 5 / 4 = 1.25.
  local row = { 1, 2, 3, 4 }

  it("normalizes a row by hand: mean 2.5, variance 1.25", function()
    local y, mean, invstd = ref.layer_norm_forward({ row }, nil, nil, 1e-300)
    near({ 2.5 }, mean)
    near({ 1 / math.sqrt(1.25) }, invstd)      -- 0.894427190999916
    local s = 1 / math.sqrt(1.25)
    near({ { -1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s } }, y)
    near(-1.3416407864998738, y[1][1], 1e-15)
  end)

  it("uses eps = 1e-5 by default and adds eps to the variance", function()
    local _, _, invstd = ref.layer_norm_forward({ row })
    near(1 / math.sqrt(1.25 + 1e-5), invstd[1], 1e-15)
    local y, _, r = ref.layer_norm_forward({ row }, nil, nil, 0.75)   -- var + eps = 2
    near(1 / math.sqrt(2), r[1], 1e-15)
    near(-1.5 / math.sqrt(2), y[1][1], 1e-15)
  end)

  it("gives y = bias and invstd = 1/sqrt(eps) for a constant row", function()
    local y, mean, invstd = ref.layer_norm_forward({ { 2, 2, 2 } }, nil, { 1, 2, 3 }, 0.25)
    near({ 2 }, mean)
    near({ 2 }, invstd)                        -- 1 / sqrt(0 + 0.25)
    near({ { 1, 2, 3 } }, y)
  end)

  it("applies weight and bias per column", function()
    local s = 1 / math.sqrt(1.25 + 1e-5)
    local w, b = { 2, -1, 0, 0.5 }, { 10, 20, 30, 40 }
    local y = ref.layer_norm_forward({ row }, w, b)
    near({ { 10 - 3 * s, 20 + 0.5 * s, 30, 40 + 0.75 * s } }, y)
    near({ { -3 * s, 0.5 * s, 0, 0.75 * s } }, (ref.layer_norm_forward({ row }, w, nil)))
    near({ { 10 - 1.5 * s, 20 - 0.5 * s, 30 + 0.5 * s, 40 + 1.5 * s } }, (ref.layer_norm_forward({ row }, nil, b)))
  end)

  it("returns mean and invstd as lists of one number for a 1-D x", function()
    local y, mean, invstd = ref.layer_norm_forward(row)
    assert.are.same({ 4 }, ref.shape(y))
    assert.are.same({ 1 }, ref.shape(mean))
    assert.are.same({ 1 }, ref.shape(invstd))
    near(2.5, mean[1])
  end)

  it("keeps the nesting of deeper inputs", function()
    local x = { { row, { 4, 4, 4, 4 } }, { { 0, 0, 0, 8 }, { -1, 1, -1, 1 } } }   -- {2, 2, 4}
    local y, mean, invstd = ref.layer_norm_forward(x, nil, nil, 1)
    assert.are.same({ 2, 2, 4 }, ref.shape(y))
    assert.are.same({ 2, 2 }, ref.shape(mean))
    assert.are.same({ 2, 2 }, ref.shape(invstd))
    near({ { 2.5, 4 }, { 2, 0 } }, mean)
    -- variances 1.25, 0, 12 (deviations -2 -2 -2 6), 1; eps = 1
    near({ { 1 / math.sqrt(2.25), 1 }, { 1 / math.sqrt(13), 1 / math.sqrt(2) } }, invstd)
    near({ 0, 0, 0, 0 }, y[1][2])
    -- depth 4 and depth 1 agree row by row
    local y4 = ref.layer_norm_forward({ x })
    near((ref.layer_norm_forward(row)), y4[1][1][1])
  end)

  it("stays exact for rows with a large common offset", function()
    -- E[x^2] - E[x]^2 would lose every digit here; two passes lose none.
    for _, offset in ipairs { 1e4, 1e8, -3e10 } do
      local shifted = {}
      for i = 1, 4 do shifted[i] = offset + row[i] end
      local y, mean, invstd = ref.layer_norm_forward({ shifted }, nil, nil, 1e-300)
      near(offset + 2.5, mean[1], 0)
      near(1 / math.sqrt(1.25), invstd[1], 1e-15)
      near((ref.layer_norm_forward({ row }, nil, nil, 1e-300)), y, 1e-15)
    end
  end)

  it("is shift invariant for 1e4 + noise rows", function()
    local g = ref.rng(7)
    local noise, shifted = {}, {}
    for i = 1, 1000 do
      noise[i] = g.normal()
      shifted[i] = 1e4 + noise[i]
    end
    local y0, m0, r0 = ref.layer_norm_forward(noise)
    local y1, m1, r1 = ref.layer_norm_forward(shifted)
    near(m0[1] + 1e4, m1[1], 1e-9)
    near(r0[1], r1[1], 1e-9 * r0[1])
    assert.is_true(ref.compare(y1, y0).max_abs < 1e-9)
  end)

  it("rejects bad arguments", function()
    assert.matches("ragged", error_of(function() ref.layer_norm_forward({ { 1, 2 }, { 3 } }) end))
    assert.matches("weight must be a list of 4 numbers",
      error_of(function() ref.layer_norm_forward({ row }, { 1, 2, 3 }) end))
    assert.matches("bias must be a list of 4 numbers",
      error_of(function() ref.layer_norm_forward({ row }, nil, { { 1, 2, 3, 4 } }) end))
    assert.matches("weight must be a list", error_of(function() ref.layer_norm_forward({ row }, 2) end))
    for _, eps in ipairs { 0, -1e-5, 0 / 0, math.huge, "1e-5" } do
      assert.matches("eps must be a positive finite number",
        error_of(function() ref.layer_norm_forward({ row }, nil, nil, eps) end))
    end
  end)
end)

describe("reference.rng", function()
  it("is SplitMix64: matches the published test vectors", function()
    -- Outputs for seed 1234567 (6457827717110365317, 3203168211198807973, ...) as
    -- (z >> 11) * 2^-53.
    local g = ref.rng(1234567)
    near(0.3500795420214081, g(), 0)
    near(0.17364409667091263, g(), 0)
    near(0.5322073040624192, g.uniform(), 0)
    near(0.24900765738229136, g:uniform(), 0)
    near(0.889529490618583, g(), 0)
    -- and the bucket counts of 100,000 draws from seed 987654321
    local g2, counts = ref.rng(987654321), { 0, 0, 0, 0, 0 }
    for _ = 1, 100000 do
      local k = math.floor(g2() * 5) + 1
      counts[k] = counts[k] + 1
    end
    assert.are.same({ 20027, 19892, 20073, 19978, 20030 }, counts)
  end)

  it("repeats for a seed and differs between seeds", function()
    local a, b, c = ref.rng(42), ref.rng(42), ref.rng(43)
    local same, differ = true, false
    for _ = 1, 100 do
      local x, y, z = a(), b(), c()
      same = same and x == y
      differ = differ or x ~= z
      assert.is_true(x >= 0 and x < 1)
    end
    assert.is_true(same)
    assert.is_true(differ)
    assert.has_error(function() ref.rng(1.5) end)
  end)

  it("draws standard normals", function()
    local g = ref.rng(3)
    local n, s, q = 20000, 0, 0
    for _ = 1, n do
      local v = g.normal()
      s = s + v
      q = q + v * v
    end
    local mean = s / n
    assert.is_true(math.abs(mean) < 0.03, "mean " .. mean)
    assert.is_true(math.abs(q / n - mean * mean - 1) < 0.05, "variance " .. (q / n - mean * mean))
  end)
end)

describe("reference.random_table and reference.f32", function()
  it("rounds to float32", function()
    assert.are.equal(1.5, ref.f32(1.5))
    assert.are_not.equal(0.1, ref.f32(0.1))
    near(0.1, ref.f32(0.1), 1e-8)
    assert.are.equal(ref.f32(0.1), ref.f32(ref.f32(0.1)))
  end)

  it("fills a shape reproducibly with float32 values", function()
    local t = ref.random_table({ 3, 2, 5 }, ref.rng(9))
    assert.are.same({ 3, 2, 5 }, ref.shape(t))
    assert.are.same(t, ref.random_table({ 3, 2, 5 }, ref.rng(9)))
    for _, v in ipairs(ref.flatten(t)) do assert.are.equal(ref.f32(v), v) end
    local g = ref.rng(1)
    local u = ref.random_table(4, function() return 1e4 + g() end)
    assert.are.same({ 4 }, ref.shape(u))
    for _, v in ipairs(u) do assert.is_true(v >= 1e4 and v <= 1e4 + 1) end
    assert.has_error(function() ref.random_table({ 2 }, 5) end)
  end)
end)

describe("reference elementwise ops", function()
  it("add, sub, mul, div pair equal shapes and take numbers on either side", function()
    assert.are.same({ { 11, 22 }, { 33, 44 } }, ref.add({ { 1, 2 }, { 3, 4 } }, { { 10, 20 }, { 30, 40 } }))
    assert.are.same({ -1, 0, 1 }, ref.sub({ 1, 2, 3 }, 2))
    assert.are.same({ 1, 0, -1 }, ref.sub(2, { 1, 2, 3 }))
    assert.are.same({ 2, 1, 0.5 }, ref.div(2, { 1, 2, 4 }))
    assert.are.same({ 3, 8 }, ref.mul({ 1.5, 4 }, 2))
  end)

  it("repeat a trailing shape over the leading dimensions, from either side", function()
    local x = { { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } } }    -- 2x2x2
    assert.are.same({ { { 11, 22 }, { 13, 24 } }, { { 15, 26 }, { 17, 28 } } }, ref.add(x, { 10, 20 }))
    assert.are.same({ { { 9, 18 }, { 7, 16 } }, { { 5, 14 }, { 3, 12 } } }, ref.sub({ 10, 20 }, x))
    assert.are.same({ { { 1, 4 }, { 9, 16 } }, { { 5, 12 }, { 21, 32 } } },
      ref.mul(x, { { 1, 2 }, { 3, 4 } }))
  end)

  it("reject shapes that do not broadcast, naming both", function()
    assert.matches("reference.add: shapes 2 and 3 do not match", error_of(function() ref.add({ 1, 2 }, { 1, 2, 3 }) end))
    assert.matches("shapes 2x2 and 3x1 do not match",
      error_of(function() ref.mul({ { 1, 2 }, { 3, 4 } }, { { 1 }, { 2 }, { 3 } }) end))
  end)

  it("scale, neg, relu", function()
    assert.are.same({ { -2, 4 } }, ref.scale({ { 1, -2 } }, -2))
    assert.are.same({ -1, 2 }, ref.neg({ 1, -2 }))
    local r = ref.relu({ -1, 0, 2.5, 0 / 0 })
    assert.are.same({ 0, 0, 2.5 }, { r[1], r[2], r[3] })
    assert.is_true(r[4] ~= r[4], "relu keeps NaN")
  end)
end)

describe("reference.erf and reference.erfc", function()
  -- Values to 17 digits from Python's math.erf / math.erfc (C99 libm).
  local erf_values = { { 0.25, 0.27632639016823696 }, { 0.5, 0.52049987781304652 }, { 1, 0.84270079294971489 },
                       { 1.5, 0.96610514647531076 }, { 2, 0.99532226501895271 }, { 3, 0.99997790950300136 } }
  local erfc_values = { { 1, 0.15729920705028513 }, { 2, 0.0046777349810472654 }, { 3, 2.2090496998585438e-05 },
                        { 5, 1.5374597944280351e-12 }, { 10, 2.0884875837625449e-45 } }

  it("match libm to 1e-15 (erf) and 1e-14 relative (erfc, also where it is tiny)", function()
    for _, p in ipairs(erf_values) do
      near(p[2], ref.erf(p[1]), 1e-15)
      near(-p[2], ref.erf(-p[1]), 1e-15)
    end
    for _, p in ipairs(erfc_values) do
      local e = math.abs(ref.erfc(p[1]) / p[2] - 1)
      assert(e <= 1e-14, ("erfc(%g): relative error %.3g"):format(p[1], e))
      near(2 - p[2], ref.erfc(-p[1]), 1e-15)
    end
    assert.are.equal(0, ref.erf(0))
    assert.are.equal(1, ref.erfc(0))
    assert.is_true(ref.erf(0 / 0) ~= ref.erf(0 / 0))
  end)

  it("gelu in both forms matches hand-computed values", function()
    -- x/2 (1 + erf(x/sqrt 2)) and x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), Python.
    local x = { -3, -1, 0.5, 2 }
    local want_erf = { -0.00404969409489031, -0.15865525393145707, 0.34573123063700656, 1.9544997361036416 }
    local want_tanh = { -0.0036373920817729943, -0.15880800939172324, 0.34571400982514394, 1.954597694087775 }
    near(want_erf, ref.gelu(x), 1e-15)
    near(want_erf, ref.gelu(x, "none"), 1e-15)
    near(want_tanh, ref.gelu(x, "tanh"), 1e-15)
    assert.matches("approximate must be", error_of(function() ref.gelu(x, "fast") end))
  end)
end)

describe("reference row ops", function()
  it("softmax over the last dimension, stable for large inputs", function()
    local e1, e2 = math.exp(1), math.exp(2)
    near({ 1 / (1 + e1 + e2), e1 / (1 + e1 + e2), e2 / (1 + e1 + e2) }, ref.softmax({ 1, 2, 3 }), 1e-15)
    near({ { 0.5, 0.5 }, { 1, 0 } }, ref.softmax({ { 1000, 1000 }, { -1000, -3000 } }), 1e-15)
  end)

  it("sum and mean drop the last dimension; a 1-D input gives a list of one", function()
    assert.are.same({ 6 }, ref.sum({ 1, 2, 3 }))
    assert.are.same({ { 3, 7 } }, ref.sum({ { { 1, 2 }, { 3, 4 } } }, { dim = -1 }))
    assert.are.same({ 2.5, 6 }, ref.mean({ { 1, 4 }, { 5, 7 } }, { dim = -1 }))
  end)
end)
