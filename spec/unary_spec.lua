-- The unary elementwise ops, one table entry each: the GPU result against the float64
-- reference (lumus.reference) at the entry's bound, on lengths that take the vec4 path,
-- the scalar tail and both, through the function, the method and {out=} (in place too).
-- A new unary op adds one line to OPS.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

-- name, reference (a flat list -> a flat list), bound (checks.close options), input range,
-- the result for NaN where it is not NaN, and true where the inputs are taken as |x|
-- ("plus1": |x| + 1)
local OPS = {
  { "neg", ref.neg, {}, 100 },                                   -- exact
  { "relu", ref.relu, {}, 100 },                                 -- exact
  { "abs", ref.abs, {}, 100 },                                   -- exact
  { "erf", function(t) return ref.map(t, ref.erf) end, { abs = 2e-7 }, 6 },
  { "gelu_erf", function(t) return ref.gelu(t, "none") end, { mixed = 2e-6 }, 10 },
  { "gelu_tanh", function(t) return ref.gelu(t, "tanh") end, { mixed = 2e-6 }, 10 },
  -- n ulp of float32 as a relative bound (n * 2^-23 >= n ulp); spec/elementwise_ops_spec
  -- checks these in ulps on wider sweeps, with NaN/inf tables.
  { "exp", ref.exp, { rel = 2 * 2 ^ -23 }, 80 },
  { "log", ref.log, { rel = 2 * 2 ^ -23 }, 100 },
  { "sqrt", ref.sqrt, { rel = 2 * 2 ^ -23 }, 100 },
  { "rsqrt", ref.rsqrt, { rel = 2 * 2 ^ -23 }, 100 },
  { "tanh", ref.tanh, { rel = 3 * 2 ^ -23 }, 10 },
  { "sigmoid", ref.sigmoid, { rel = 3 * 2 ^ -23 }, 20 },
  { "silu", ref.silu, { rel = 4 * 2 ^ -23 }, 20 },
  { "square", ref.square, { rel = 2 ^ -24 }, 100 },              -- one rounding
  { "reciprocal", ref.reciprocal, { rel = 3 * 2 ^ -23 }, 100 },  -- Vulkan's division: 2.5 ulp
  { "floor", ref.floor, {}, 100 },                               -- exact
  { "ceil", ref.ceil, {}, 100 },
  { "round", ref.round, {}, 100 },
  { "trunc", ref.trunc, {}, 100 },
  { "sign", ref.sign, {}, 100, 0 },                              -- sign(NaN) = 0, as PyTorch
  { "sin", ref.sin, { rel = 2 * 2 ^ -23, abs = 1e-45 }, 1e4 },   -- 2 ulp; spec/elementwise_ops_spec
  { "cos", ref.cos, { rel = 2 * 2 ^ -23, abs = 1e-45 }, 1e4 },   -- sweeps the whole range
  { "expm1", ref.expm1, { rel = 2 * 2 ^ -23 }, 20 },
  { "log1p", function(t) return ref.log1p(ref.map(t, math.abs)) end, { rel = 3 * 2 ^ -23 }, 100, nil, true },
  { "exp2", ref.exp2, { rel = 2 * 2 ^ -23 }, 100 },
  { "log2", function(t) return ref.log2(ref.map(t, math.abs)) end, { rel = 2 * 2 ^ -23 }, 100, nil, true },
  { "log10", function(t) return ref.log10(ref.map(t, math.abs)) end, { rel = 2 * 2 ^ -23 }, 100, nil, true },
  { "tan", ref.tan, { rel = 4 * 2 ^ -23, abs = 1e-45 }, 1e4 },
  { "atan", ref.atan, { rel = 3 * 2 ^ -23, abs = 1e-45 }, 1e4 },
  { "asin", ref.asin, { rel = 4 * 2 ^ -23, abs = 1e-45 }, 1 },
  { "acos", ref.acos, { rel = 4 * 2 ^ -23, abs = 1e-45 }, 1 },
  { "sinh", ref.sinh, { rel = 3 * 2 ^ -23, abs = 1e-45 }, 90 },
  { "cosh", ref.cosh, { rel = 3 * 2 ^ -23 }, 90 },
  { "asinh", ref.asinh, { rel = 3 * 2 ^ -23, abs = 1e-45 }, 1e6 },
  { "acosh", ref.acosh, { rel = 3 * 2 ^ -23 }, 1e3, nil, "plus1" },
  { "atanh", ref.atanh, { rel = 3 * 2 ^ -23, abs = 1e-45 }, 1 },
}

-- Seeded inputs in [-range, range], float32-rounded, with zeros and both signs.
local function inputs(n, range, seed)
  local g = ref.rng(seed)
  local xs = {}
  for i = 1, n do xs[i] = ref.f32((g.uniform() * 2 - 1) * range) end
  xs[1] = 0
  if n > 1 then xs[2] = compat.negative_zero end
  return xs
end

describe("unary ops", function()
  for k, op in ipairs(OPS) do
    local name, want_of, bound, range, nonneg = op[1], op[2], op[3], op[4], op[6]
    it(name .. " matches the float64 reference (function, method, out=, in place)", function()
      for _, n in ipairs { 1, 3, 4, 12, 15, 1027 } do
        local xs = inputs(n, range, 1000 * k + n)
        if nonneg == "plus1" then xs = ref.map(xs, function(v) return ref.f32(math.abs(v) + 1) end)
        elseif nonneg then xs = ref.map(xs, math.abs) end
        local want = want_of(xs)
        local what = ("%s over %d"):format(name, n)
        local x = lumus.tensor(xs)
        checks.close(lumus[name](x), want, { what = what, rel = bound.rel, abs = bound.abs, mixed = bound.mixed })
        checks.close(x[name](x), want, { what = what .. " (method)", rel = bound.rel, abs = bound.abs, mixed = bound.mixed })
        local out = lumus.full({ n }, 0 / 0)
        assert.are.equal(out, lumus[name](x, { out = out }))
        checks.close(out, want, { what = what .. " (out=)", rel = bound.rel, abs = bound.abs, mixed = bound.mixed })
        lumus[name](x, { out = x })
        checks.close(x, want, { what = what .. " (in place)", rel = bound.rel, abs = bound.abs, mixed = bound.mixed })
      end
    end)

    it(name .. (op[5] and " maps NaN to " .. op[5] or " keeps NaN") .. " and refuses bad arguments by name", function()
      local got = checks.flat(lumus[name](lumus.tensor { 0 / 0, 1, 0 / 0, 2, 0 / 0 }))
      if op[5] then
        assert.are.same({ op[5], op[5], op[5] }, { got[1], got[3], got[5] })
      else
        assert.is_true(got[1] ~= got[1] and got[3] ~= got[3] and got[5] ~= got[5], name .. "(NaN) is NaN")
      end
      checks.errors(function() lumus[name](3) end, "bad argument #1 to 'lumus%." .. name .. "' %(tensor expected, got number%)")
      checks.errors(function() lumus[name](lumus.zeros { 2 }, { outt = 1 }) end, "unknown option 'outt'")
      checks.errors(function() lumus[name](lumus.zeros { 2 }, { out = lumus.zeros { 3 } }) end, "out must have shape 2, got 3")
    end)
  end
end)

-- The rounding ops at their edges: halves (to even for round), signed zeros, infinities,
-- and values from 2^23 up (already integral), in float32, float16 and bfloat16, against
-- results written out as PyTorch gives them.
describe("floor ceil round trunc sign", function()
  local nz, inf = compat.negative_zero, math.huge
  local xs = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.3, 0.3, 0, nz, inf, -inf, 8388609, -8388609.0, 3.75, -3.75 }
  local WANT = {
    floor = { -3, -2, -1, 0, 1, 2, -1, 0, 0, nz, inf, -inf, 8388609, -8388609, 3, -4 },
    ceil = { -2, -1, nz, 1, 2, 3, nz, 1, 0, nz, inf, -inf, 8388609, -8388609, 4, -3 },
    round = { -2, -2, nz, 0, 2, 2, nz, 0, 0, nz, inf, -inf, 8388609, -8388609, 4, -4 },
    trunc = { -2, -1, nz, 0, 1, 2, nz, 0, 0, nz, inf, -inf, 8388609, -8388609, 3, -3 },
    sign = { -1, -1, -1, 1, 1, 1, -1, 1, 0, 0, 1, -1, 1, -1, 1, -1 },
  }
  local function same_bits(got, want, what)
    for i = 1, #want do
      local ok = got[i] == want[i] and (want[i] ~= 0 or 1 / got[i] == 1 / want[i])
      assert(ok, ("%s: element %d (x = %s) is %s, want %s"):format(what, i, tostring(xs[i]), tostring(got[i]), tostring(want[i])))
    end
  end
  for _, name in ipairs { "floor", "ceil", "round", "trunc", "sign" } do
    it(name .. " gives PyTorch's results, signed zeros included, in every float dtype (reference too)", function()
      same_bits(ref[name](xs), WANT[name], "reference." .. name)
      for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
        local list, want = {}, {}
        for i, x in ipairs(xs) do
          -- 8388609 (2^23 + 1) is no float16 or bfloat16 value: those take 2^11 + 2 and
          -- 2^8 + 2, likewise past the last fractional values of their formats.
          local big = math.abs(x) == 8388609 and dtype ~= "float32"
          local b = dtype == "float16" and 2050 or 258
          list[i] = big and (x < 0 and -b or b) or x
          want[i] = big and (name == "sign" and WANT.sign[i] or list[i]) or WANT[name][i]
        end
        local t = lumus.tensor(list, { dtype = dtype })
        same_bits(lumus[name](t):float():to_table(), want, name .. " " .. dtype)
        -- a strided view takes the general kernel
        local pair = lumus.tensor({ list, list }, { dtype = dtype }):transpose(1, 2)
        local got = lumus[name](pair):float():to_table()
        local col = {}
        for i = 1, #got do col[i] = got[i][2] end
        same_bits(col, want, name .. " " .. dtype .. " (strided)")
      end
    end)
  end
end)

describe("square reciprocal", function()
  it("give PyTorch's results for NaN, infinities, signed zeros and the ends of the range", function()
    local nz, inf = compat.negative_zero, math.huge
    local xs = { 0 / 0, inf, -inf, 0, nz, 1e20, -1e20, 3e-39, 4 }
    local want = {
      square = { 0 / 0, inf, inf, 0, 0, inf, inf, 0, 16 },
      reciprocal = { 0 / 0, 0, nz, inf, -inf, ref.f32(1e-20), ref.f32(-1e-20), ref.f32(1 / ref.f32(3e-39)), 0.25 },
    }
    for name, w in pairs(want) do
      local got = lumus[name](lumus.tensor(xs)):to_table()
      local r = ref[name](ref.map(xs, ref.f32))
      for i = 1, #xs do
        for _, v in ipairs { got[i], r[i] } do
          local same = (v ~= v and w[i] ~= w[i]) or (v == w[i] and (w[i] ~= 0 or 1 / v == 1 / w[i]))
            or (w[i] ~= 0 and w[i] == w[i] and math.abs(v - w[i]) <= 3 * 2 ^ -23 * math.abs(w[i]))
            or (w[i] == 0 and math.abs(v) < 1e-45)   -- the float64 reference does not flush to 0
          assert(same, ("%s(%s) = %s, want %s"):format(name, tostring(xs[i]), tostring(v), tostring(w[i])))
        end
      end
    end
  end)
end)
