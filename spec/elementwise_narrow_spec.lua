-- float16 and bfloat16 results of exp, tanh, sigmoid, silu and pow, which take cheaper
-- float32 paths than float32 results (shaders/elementwise.comp, NARROW): over each
-- format's whole useful range (overflow, subnormal results, tiny arguments), every
-- result within one ulp of its format (one subnormal spacing below the normal range) of
-- the float64 reference rounded to that format.
local lumus = require("lumus")
local compat = require "lumus.compat"
local ref = require("lumus.reference")

local abs, inf = math.abs, math.huge

local FORMATS = {
  float16 = { round = ref.round_float16, frac = 10, emin = -14, lo = -20, hi = 12 },
  bfloat16 = { round = ref.round_bfloat16, frac = 7, emin = -126, lo = -105, hi = 90 },
}

local spacing = dofile("spec/support/narrow_exhaustive.lua").spacing   -- (w, fmt)

local function within_one_ulp(got, want, fmt, what, xs)
  local g = got:to_table()
  assert.are.equal(#want, #g, what .. ": element count")
  for i = 1, #want do
    local x, w = g[i], fmt.round(want[i])
    local ok
    if w ~= w then ok = x ~= x
    elseif abs(w) == inf then ok = x == w
    elseif x ~= x or abs(x) == inf then ok = false
    else ok = abs(x - w) <= spacing(w, fmt) end
    if not ok then
      error(("%s: element %d (x = %.9g) is %.9g, want %.9g"):format(what, i, xs[i], x, w), 2)
    end
  end
end

describe("16-bit results of exp, tanh, sigmoid, silu, pow", function()
  for dtype, fmt in pairs(FORMATS) do
    -- A sweep over the range, tiny arguments of both signs, the special values.
    local xs = {}
    local steps = 3000
    for i = 0, steps do xs[#xs + 1] = fmt.lo + (fmt.hi - fmt.lo) * i / steps end
    for e = -30, -1 do xs[#xs + 1] = 2.0 ^ e * 1.37; xs[#xs + 1] = -(2.0 ^ e) * 1.37 end
    for _, v in ipairs { 0, compat.negative_zero, inf, -inf, 0 / 0, 0.1, -0.1, 0.0999, 1e4, -1e4 } do xs[#xs + 1] = v end
    local x = lumus.tensor(xs, { dtype = dtype })
    local xv = x:to_table()      -- the values as stored

    it(dtype .. ": exp, tanh, sigmoid and silu within one " .. dtype .. " ulp", function()
      for _, name in ipairs { "exp", "tanh", "sigmoid", "silu" } do
        within_one_ulp(lumus[name](x), ref[name](xv), fmt, dtype .. " " .. name, xv)
      end
    end)

    it(dtype .. ": pow within one " .. dtype .. " ulp, special cases as float32's", function()
      local bases = {}
      for i = 0, 400 do bases[#bases + 1] = 2.0 ^ (-12 + 24 * i / 400) end
      for _, v in ipairs { 0, compat.negative_zero, 1, inf, -inf, 0 / 0, -2, -0.5, -3, 1.001, 0.999 } do bases[#bases + 1] = v end
      local b = lumus.tensor(bases, { dtype = dtype })
      local bv = b:to_table()
      for _, y in ipairs { 1.7, -2.5, 0.5, 3, -2, 7.3, -0.3, 0, 1, 41 } do
        within_one_ulp(lumus.pow(b, y), ref.pow(bv, ref.f32(y)), fmt, ("%s pow(t, %g)"):format(dtype, y), bv)
      end
      -- number ^ tensor and tensor ^ tensor over the sweep's exponents
      local ys = lumus.tensor(ref.map(xv, function(v) return v / 4 end), { dtype = dtype })
      local yv = ys:to_table()
      within_one_ulp(lumus.pow(2.5, ys), ref.pow(2.5, yv), fmt, dtype .. " pow(2.5, t)", yv)
      within_one_ulp(lumus.pow(-2, ys), ref.pow(-2, yv), fmt, dtype .. " pow(-2, t)", yv)
      local bt = lumus.tensor(ref.map(xv, function(v) return abs(v) * 0.3 + 0.01 end), { dtype = dtype })
      local btv = bt:to_table()
      within_one_ulp(lumus.pow(bt, ys), ref.pow(btv, yv), fmt, dtype .. " pow(t, t)", btv)
    end)
  end
end)
