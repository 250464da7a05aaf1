-- The unary elementwise ops, one table entry each: the GPU result against the float64
-- reference (lumus.reference) at the entry's bound, on lengths that take the vec4 path,
-- the scalar tail and both, through the function, the method and {out=} (in place too).
-- A new unary op adds one line to OPS.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

-- name, reference (a flat list -> a flat list), bound (checks.close options), input range
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
    local name, want_of, bound, range = op[1], op[2], op[3], op[4]
    it(name .. " matches the float64 reference (function, method, out=, in place)", function()
      for _, n in ipairs { 1, 3, 4, 12, 15, 1027 } do
        local xs = inputs(n, range, 1000 * k + n)
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

    it(name .. " keeps NaN and refuses bad arguments by name", function()
      local got = checks.flat(lumus[name](lumus.tensor { 0 / 0, 1, 0 / 0, 2, 0 / 0 }))
      assert.is_true(got[1] ~= got[1] and got[3] ~= got[3] and got[5] ~= got[5], name .. "(NaN) is NaN")
      checks.errors(function() lumus[name](3) end, "bad argument #1 to 'lumus%." .. name .. "' %(tensor expected, got number%)")
      checks.errors(function() lumus[name](lumus.zeros { 2 }, { outt = 1 }) end, "unknown option 'outt'")
      checks.errors(function() lumus[name](lumus.zeros { 2 }, { out = lumus.zeros { 3 } }) end, "out must have shape 2, got 3")
    end)
  end
end)
