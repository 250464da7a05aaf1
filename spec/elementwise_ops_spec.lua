-- The elementwise ops of shaders/elementwise.comp beyond add/sub/mul/div's basics:
-- exp log sqrt rsqrt tanh sigmoid silu pow maximum minimum clamp, the comparisons and
-- where; broadcasting by NumPy/PyTorch rules for all of them; views read by their
-- strides; float16 and bfloat16 operands; out= and its aliasing rules; errors.
--
-- Tolerances, against the float64 lumus.reference on the same float32 inputs, in ulps
-- of the float32 result (its spacing at the reference value; results in the subnormal
-- range are bounded absolutely, see ULPS_SUB):
--   add, sub, mul, maximum, minimum, clamp, comparisons, where: exact;
--   div: 3 ulp (Vulkan's 2.5);  exp, log, sqrt, rsqrt: 2;  tanh, sigmoid: 3;  silu, pow: 4.
-- (Measured on lavapipe: exp 0.93, log 1.14, sqrt 1.52, rsqrt 1.44, tanh 1.98, sigmoid
-- 1.87, silu 2.75, pow 1.7 over the sweeps below.) float16 and bfloat16 results: within
-- one ulp of their own format of the reference rounded to it (the float32 result is
-- rounded once on store; the double rounding can move a tie by one ulp).
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local nan, inf = 0 / 0, math.huge
local abs = math.abs

-- The spacing of float32 values at w (the subnormal spacing below 2^-126).
local function spacing(w, frac, emin)
  frac, emin = frac or 23, emin or -126
  local a = abs(w)
  if a < 2.0 ^ emin then return 2.0 ^ (emin - frac) end
  local e = math.floor(math.log(a) / math.log(2))   -- (5.1's math.log has no base)
  while 2.0 ^ e > a do e = e - 1 end
  while 2.0 ^ (e + 1) <= a do e = e + 1 end
  return 2.0 ^ (e - frac)
end

-- A flat list from a tensor or a nested table (of numbers or booleans).
local function flatten_any(t, out)
  out = out or {}
  for i = 1, #t do
    if type(t[i]) == "table" then flatten_any(t[i], out) else out[#out + 1] = t[i] end
  end
  return out
end

local function flat_of(v)
  if type(v) ~= "table" then v = v:to_table() end
  return flatten_any(v)
end

-- Results in the float32 subnormal range are bounded by this many subnormal spacings
-- per unit of |x| + 2 (silu multiplies a subnormal sigmoid by x).
local ULPS_SUB = 2

-- Every element of got within `bound` ulps of want (flat float64 list); NaN wants NaN,
-- an infinity the same infinity. `xs` (optional) names the inputs in the message.
local function within_ulps(got, want, bound, what, xs, frac, emin)
  local g = flat_of(got)
  assert.are.equal(#want, #g, what .. ": element count")
  for i = 1, #want do
    local x, w = g[i], want[i]
    local ok
    if w ~= w then ok = x ~= x
    elseif abs(w) == inf then ok = x == w
    elseif x ~= x or abs(x) == inf then ok = false
    else
      local sp = spacing(w, frac, emin)
      local lim = bound * sp
      if abs(w) < 2.0 ^ ((emin or -126)) then lim = ULPS_SUB * sp * (2 + (xs and abs(xs[i]) or 0)) end
      ok = abs(x - w) <= lim
    end
    if not ok then
      error(("%s: element %d%s is %.9g, want %.9g (bound %g ulp)"):format(what, i,
        xs and (" (x = %.9g)"):format(xs[i]) or "", x, w, bound), 2)
    end
  end
end

local function booleans_equal(got, want, what)
  local g = flat_of(got)
  local w = flatten_any(want)
  assert.are.equal(#w, #g, what .. ": element count")
  for i = 1, #w do
    if g[i] ~= w[i] then error(("%s: element %d is %s, want %s"):format(what, i, tostring(g[i]), tostring(w[i])), 2) end
  end
end

-- Seeded float32 inputs of a kind.
local function inputs(kind, n, seed)
  local g = ref.rng(seed)
  local xs = {}
  for i = 1, n do
    local u = g.uniform()
    local v
    if kind == "tiny" then v = (g.uniform() < 0.5 and -1 or 1) * 10 ^ (-38 + 32 * u)
    elseif kind == "mid" then v = (u * 2 - 1) * 10
    elseif kind == "big" then v = (u * 2 - 1) * 100
    elseif kind == "pos" then v = 10 ^ (-38 + 76 * u)
    elseif kind == "subnormal" then v = 2 ^ (-149 + 23 * u)   -- positive, below 2^-126
    else v = 1 + (u * 2 - 1) * 1e-3 end        -- near 1
    xs[i] = ref.f32(v)
  end
  return xs
end

local UNARY = { exp = 2, log = 2, sqrt = 2, rsqrt = 2, tanh = 3, sigmoid = 3, silu = 4, sin = 2, cos = 2, expm1 = 2, log1p = 3,
                exp2 = 2, log2 = 2, log10 = 2, tan = 4, atan = 3, asin = 4, acos = 4,
                sinh = 3, cosh = 3, asinh = 3, acosh = 3, atanh = 3 }
local UNARY_NAMES = { "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "sin", "cos", "expm1", "log1p",
                      "exp2", "log2", "log10", "tan", "atan", "asin", "acos",
                      "sinh", "cosh", "asinh", "acosh", "atanh" }

describe("elementwise math", function()
  for _, name in ipairs(UNARY_NAMES) do
    it(name .. " is within " .. UNARY[name] .. " ulp of float64 on tiny, moderate, large, near-1 and subnormal inputs", function()
      for k, kind in ipairs { "tiny", "mid", "big", "pos", "near1", "subnormal" } do
        local xs = inputs(kind, 2003, 100 * k + #name)
        within_ulps(lumus[name](lumus.tensor(xs)), ref[name](xs), UNARY[name], ("%s (%s)"):format(name, kind), xs)
      end
    end)
  end

  it("log2 and exp2 are exact at powers of 2 and integers, log10 at powers of 10", function()
    local p2, k2, p10, k10 = {}, {}, {}, {}
    for k = -149, 127 do p2[#p2 + 1], k2[#k2 + 1] = 2.0 ^ k, k end
    for k = 0, 10 do p10[#p10 + 1], k10[#k10 + 1] = 10.0 ^ k, k end
    assert.are.same(k2, lumus.log2(lumus.tensor(p2)):to_table())
    assert.are.same(p2, lumus.exp2(lumus.tensor(k2)):to_table())
    assert.are.same(k10, lumus.log10(lumus.tensor(p10)):to_table())
  end)

  it("atan2 is within 3 ulp over every quadrant and follows C's special cases", function()
    local g = ref.rng(77)
    local ys, xs = {}, {}
    for i = 1, 4001 do
      ys[i] = ref.f32((g.uniform() < 0.5 and -1 or 1) * 2 ^ (g.uniform() * 80 - 40))
      xs[i] = ref.f32((g.uniform() < 0.5 and -1 or 1) * 2 ^ (g.uniform() * 80 - 40))
    end
    within_ulps(lumus.atan2(lumus.tensor(ys), lumus.tensor(xs)), ref.atan2(ys, xs), 3, "atan2", ys)
    local nz, pi = compat.negative_zero, ref.f32(math.pi)
    local cases = { -- y, x, want
      { 0, 0, 0 }, { nz, 0, nz }, { 0, nz, pi }, { nz, nz, -pi }, { inf, inf, ref.f32(math.pi / 4) },
      { inf, -inf, ref.f32(3 * math.pi / 4) }, { -inf, inf, -ref.f32(math.pi / 4) }, { 1, inf, 0 }, { 1, -inf, pi },
      { -1, -inf, -pi }, { inf, 1, ref.f32(math.pi / 2) }, { 0, -1, pi }, { nan, 1, nan }, { 1, nan, nan },
    }
    local cy, cx, want = {}, {}, {}
    for i, c in ipairs(cases) do cy[i], cx[i], want[i] = c[1], c[2], c[3] end
    checks.close(lumus.atan2(lumus.tensor(cy), lumus.tensor(cx)), want, { what = "atan2 special" })
    checks.close(ref.atan2(cy, cx), want, { rel = 1e-7, what = "reference.atan2 special" })
    -- numbers on either side, and broadcasting
    checks.close(lumus.atan2(1, lumus.tensor({ 2, -2 })), ref.atan2({ 1, 1 }, { 2, -2 }), { rel = 2 ^ -22, what = "atan2(number, t)" })
    checks.close(lumus.tensor({ 2, -2 }):atan2(1), ref.atan2({ 2, -2 }, { 1, 1 }), { rel = 2 ^ -22, what = "t:atan2(number)" })
    checks.close(lumus.atan2(lumus.tensor({ { 1 }, { -1 } }), lumus.tensor({ 1, 2, -3 })), ref.atan2({ { 1 }, { -1 } }, { 1, 2, -3 }),
      { rel = 2 ^ -22, what = "atan2 broadcast" })
  end)

  it("tan stays within 4 ulp next to multiples of pi/2 and at huge arguments", function()
    local xs = {}
    for k = 1, 1500 do
      local v = ref.f32(k * math.pi / 2)
      for _, f in ipairs { 1, 1 + 2 ^ -23, 1 - 2 ^ -24, -1 } do xs[#xs + 1] = ref.f32(v * f) end
    end
    for _, v in ipairs { 16367173 * 2 ^ 72, -16367173 * 2 ^ 72, 2 ^ 127, 3.4028235e38, 0.78539819, 0.7853982 } do
      xs[#xs + 1] = ref.f32(v)
    end
    within_ulps(lumus.tan(lumus.tensor(xs)), ref.tan(xs), 4, "tan near k pi/2", xs)
  end)

  it("sin and cos stay within 2 ulp next to multiples of pi/2 and at huge arguments", function()
    -- the float32 neighbours of k pi/2 (the reduction's cancellation), and x = 16367173
    -- 2^72, the float32 closest to a multiple of pi/2 (remainder about 1.6e-9 of x's scale)
    local xs = {}
    for k = 1, 1500 do
      local v = ref.f32(k * math.pi / 2)
      for _, f in ipairs { 1, 1 + 2 ^ -23, 1 - 2 ^ -24, -1 } do xs[#xs + 1] = ref.f32(v * f) end
    end
    for _, v in ipairs { 16367173 * 2 ^ 72, -16367173 * 2 ^ 72, 2 ^ 127, 3.4028235e38, 8388608.5 * 4, 0.78539819, 0.7853982 } do
      xs[#xs + 1] = ref.f32(v)
    end
    for _, name in ipairs { "sin", "cos" } do
      within_ulps(lumus[name](lumus.tensor(xs)), ref[name](xs), 2, name .. " near k pi/2", xs)
      within_ulps(lumus[name](lumus.tensor({ xs, xs }):transpose(1, 2)):contiguous(),
        ref.flatten(ref.map(lumus.tensor({ xs, xs }):transpose(1, 2):to_table(), math[name])), 2, name .. " (strided)")
    end
  end)

  -- x, then the wanted result of each op (written out, as PyTorch gives them).
  local SPECIAL = {
    exp = { { nan, nan }, { inf, inf }, { -inf, 0 }, { 0, 1 }, { compat.negative_zero, 1 }, { 89, inf }, { -104, 0 }, { 1, ref.f32(math.exp(1)) } },
    log = { { nan, nan }, { inf, inf }, { -inf, nan }, { 0, -inf }, { compat.negative_zero, -inf }, { -1, nan }, { 1, 0 } },
    sqrt = { { nan, nan }, { inf, inf }, { -inf, nan }, { 0, 0 }, { compat.negative_zero, compat.negative_zero }, { -1, nan }, { 4, 2 } },
    rsqrt = { { nan, nan }, { inf, 0 }, { -inf, nan }, { 0, inf }, { compat.negative_zero, -inf }, { -1, nan }, { 4, 0.5 } },
    tanh = { { nan, nan }, { inf, 1 }, { -inf, -1 }, { 0, 0 }, { compat.negative_zero, compat.negative_zero }, { 20, 1 }, { -20, -1 }, { 1e-30, ref.f32(1e-30) } },
    sigmoid = { { nan, nan }, { inf, 1 }, { -inf, 0 }, { 0, 0.5 }, { 200, 1 }, { -200, 0 } },
    silu = { { nan, nan }, { inf, inf }, { -inf, nan }, { 0, 0 }, { 200, 200 }, { -200, 0 } },
    sin = { { nan, nan }, { inf, nan }, { -inf, nan }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
            { ref.f32(1e-30), ref.f32(1e-30) } },
    cos = { { nan, nan }, { inf, nan }, { -inf, nan }, { 0, 1 }, { compat.negative_zero, 1 },
            { ref.f32(1e-30), 1 } },
    expm1 = { { nan, nan }, { inf, inf }, { -inf, -1 }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
              { 89, inf }, { -20, -1 }, { ref.f32(1e-30), ref.f32(1e-30) } },
    log1p = { { nan, nan }, { inf, inf }, { -inf, nan }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
              { -1, -inf }, { -2, nan }, { ref.f32(1e-30), ref.f32(1e-30) } },
    exp2 = { { nan, nan }, { inf, inf }, { -inf, 0 }, { 0, 1 }, { compat.negative_zero, 1 }, { 128, inf },
             { -150, 0 }, { -149, 2 ^ -149 }, { 127, 2 ^ 127 }, { -3, 0.125 } },
    log2 = { { nan, nan }, { inf, inf }, { -inf, nan }, { 0, -inf }, { compat.negative_zero, -inf }, { -1, nan },
             { 1, 0 }, { 2 ^ -149, -149 }, { 2 ^ 127, 127 }, { 0.125, -3 } },
    log10 = { { nan, nan }, { inf, inf }, { -inf, nan }, { 0, -inf }, { compat.negative_zero, -inf }, { -1, nan },
              { 1, 0 }, { 1000, 3 }, { 1e10, 10 }, { 0.5, ref.f32(math.log(0.5) / math.log(10)) } },
    tan = { { nan, nan }, { inf, nan }, { -inf, nan }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
            { ref.f32(1e-30), ref.f32(1e-30) } },
    atan = { { nan, nan }, { inf, ref.f32(math.pi / 2) }, { -inf, -ref.f32(math.pi / 2) }, { 0, 0 },
             { compat.negative_zero, compat.negative_zero }, { 1, ref.f32(math.pi / 4) }, { ref.f32(1e-30), ref.f32(1e-30) } },
    asin = { { nan, nan }, { inf, nan }, { -inf, nan }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
             { 1, ref.f32(math.pi / 2) }, { -1, -ref.f32(math.pi / 2) }, { 1.5, nan }, { ref.f32(1e-30), ref.f32(1e-30) } },
    acos = { { nan, nan }, { inf, nan }, { -inf, nan }, { 0, ref.f32(math.pi / 2) }, { 1, 0 }, { -1, ref.f32(math.pi) },
             { -1.5, nan } },
    sinh = { { nan, nan }, { inf, inf }, { -inf, -inf }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
             { 90, inf }, { ref.f32(1e-30), ref.f32(1e-30) } },
    cosh = { { nan, nan }, { inf, inf }, { -inf, inf }, { 0, 1 }, { compat.negative_zero, 1 }, { -90, inf } },
    asinh = { { nan, nan }, { inf, inf }, { -inf, -inf }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
              { ref.f32(1e-30), ref.f32(1e-30) }, { 3e38, ref.f32(math.log(ref.f32(3e38)) + math.log(2)) } },
    acosh = { { nan, nan }, { inf, inf }, { -inf, nan }, { 1, 0 }, { 0, nan }, { 0.5, nan } },
    atanh = { { nan, nan }, { inf, nan }, { -inf, nan }, { 0, 0 }, { compat.negative_zero, compat.negative_zero },
              { 1, inf }, { -1, -inf }, { 1.5, nan }, { ref.f32(1e-30), ref.f32(1e-30) } },
  }

  it("give PyTorch's results for NaN, infinities, zeros and the ends of the range (reference too)", function()
    for _, name in ipairs(UNARY_NAMES) do
      local xs, want = {}, {}
      for i, row in ipairs(SPECIAL[name]) do xs[i], want[i] = row[1], row[2] end
      for _, n in ipairs { #xs, #xs + 4 } do      -- the vec4 body and the tail, and the strided form
        local xn, wn = {}, {}
        for i = 1, n do xn[i], wn[i] = xs[(i - 1) % #xs + 1], want[(i - 1) % #xs + 1] end
        checks.close(lumus[name](lumus.tensor(xn)), wn, { what = name })
        checks.close(lumus[name](lumus.tensor({ xn, xn }):transpose(1, 2)), ref.map(lumus.tensor({ xn, xn }):transpose(1, 2):to_table(),
          function(x)
            for i = 1, #xs do
              local xi = ref.f32(xs[i])
              if (xi == x and 1 / xi == 1 / x) or (x ~= x and xi ~= xi) then return want[i] end
            end
          end),
          { what = name .. " (strided)" })
        checks.close(ref[name](xn), wn, { rel = 1e-7, abs = 1e-45, what = "reference." .. name })
      end
    end
    -- signed zeros
    local z = lumus.tensor({ compat.negative_zero })
    assert.are.equal(-inf, 1 / lumus.sqrt(z):to_table()[1])
    assert.are.equal(-inf, 1 / lumus.tanh(z):to_table()[1])
    assert.are.equal(-inf, lumus.rsqrt(z):to_table()[1])
  end)

  it("silu is -0 far below the range of exp (x e^x underflows), not x times a clamped e^x", function()
    local got = lumus.silu(lumus.tensor { -121, -1e10, -8.30324518e+18, -3e38 }):to_table()
    for i, v in ipairs(got) do
      assert.are.equal(0, v)
      assert.are.equal(-inf, 1 / v)   -- the sign of -0
    end
  end)
end)

describe("pow", function()
  it("is within 4 ulp of float64 for tensor ^ tensor, tensor ^ number and number ^ tensor", function()
    local g = ref.rng(5)
    local xs, ys = {}, {}
    for i = 1, 3001 do
      xs[i] = ref.f32(10 ^ (-3 + 6 * g.uniform()))
      ys[i] = ref.f32((g.uniform() * 2 - 1) * 12)
      if i % 3 == 0 then xs[i] = -xs[i]; ys[i] = math.floor(ys[i]) + 0.0 end   -- negative bases, integral exponents
    end
    within_ulps(lumus.pow(lumus.tensor(xs), lumus.tensor(ys)), ref.pow(xs, ys), 4, "pow(t, t)", xs)
    for _, y in ipairs { 1.7, -3.3, 7, 2, 3, 0.5, -0.5, -1, -2, 1, 0 } do
      within_ulps(lumus.pow(lumus.tensor(xs), y), ref.pow(xs, ref.f32(y)), 4, "pow(t, " .. y .. ")", xs)
    end
    local pos = {}
    for i = 1, #ys do pos[i] = ys[i] end
    within_ulps(lumus.pow(2.5, lumus.tensor(pos)), ref.pow(2.5, pos), 4, "pow(2.5, t)", pos)
    within_ulps(lumus.pow(-2, lumus.tensor(pos)), ref.pow(-2, pos), 4, "pow(-2, t)", pos)
    -- results near the ends of float32's range
    local big = ref.map({ 127.9, 128.1, -149, -150, -126.5, 100.25 }, ref.f32)
    within_ulps(lumus.pow(2, lumus.tensor(big)), ref.pow(2, big), 4, "pow(2, t) near the range's ends", big)
  end)

  it("takes the short path (|y| <= 4, x normal, 2^-125 <= result < 2^126) and the long one alike", function()
    -- Vectors of 4 mixing elements on both sides of each bound, and ones wholly inside:
    -- |y| at 4 and just past it, at 2, x at the least normal and subnormal, exponents whose
    -- k is +-125 and +-126, m at both ends of [sqrt(1/2), sqrt(2)), negative bases.
    local g = ref.rng(21)
    local xs, ys = {}, {}
    local function add(x, y) xs[#xs + 1] = ref.f32(x); ys[#ys + 1] = ref.f32(y) end
    local just = ref.f32(4 + 2 ^ -21)
    for i = 1, 400 do
      local m = ({ 0.70710677, 0.70710683, 1.4142134, 1.4142137, 1 + 2 ^ -23, 1 - 2 ^ -24 })[i % 6 + 1]
      local e = math.floor(g.uniform() * 250) - 125
      local y = ({ 4, -4, just, -just, 2, 3.999999, -1.7, (g.uniform() * 2 - 1) * 4 })[math.floor(i / 6) % 8 + 1]
      add(m * 2.0 ^ e, y)
    end
    for _, x in ipairs { 2 ^ -126, 2 ^ -127, 2 ^ -149, 1.5 * 2 ^ -130, 2 ^ 62.5, 2 ^ 63, 2 ^ -62.5, 2 ^ -63, -3.5, -0.25 } do
      for _, y in ipairs { 4, -4, 2, -2, 3.9921875, -1.75, 1, -1, 0.5 } do add(x, y) end
    end
    within_ulps(lumus.pow(lumus.tensor(xs), lumus.tensor(ys)), ref.pow(xs, ys), 4, "pow(t, t) at the short path's bounds", xs)
    -- number exponents, vectors wholly on the short path
    local pos = {}
    for i = 1, 4001 do pos[i] = ref.f32(2 ^ ((g.uniform() * 2 - 1) * 120) * (0.5 + g.uniform())) end
    for _, y in ipairs { 1.7, -1.7, 2.4, -3.999999, -0.3, 1e-6 } do
      within_ulps(lumus.pow(lumus.tensor(pos), y), ref.pow(pos, ref.f32(y)), 4, "pow(t, " .. y .. ")", pos)
    end
  end)

  it("follows C's and PyTorch's special cases", function()
    local cases = {   -- x, y, want
      { nan, 0, 1 }, { inf, 0, 1 }, { -inf, 0, 1 }, { 0, 0, 1 }, { -1, 0, 1 },
      { 1, nan, 1 }, { 1, inf, 1 }, { 1, -inf, 1 },
      { -2, 3, -8 }, { -2, 2, 4 }, { -2, 0.5, nan }, { -8, 1 / 3, nan }, { -2, -1, -0.5 },
      { 0, -1, inf }, { compat.negative_zero, -1, -inf }, { compat.negative_zero, -2, inf }, { 0, 2.5, 0 }, { compat.negative_zero, 3, compat.negative_zero },
      { -inf, 3, -inf }, { -inf, 2, inf }, { -inf, -1, compat.negative_zero }, { inf, -1, 0 }, { -inf, 0.5, inf },
      { 0.5, inf, 0 }, { 2, inf, inf }, { -1, inf, 1 }, { -1, -inf, 1 }, { 0.5, -inf, inf }, { 2, -inf, 0 },
      { -0.5, inf, 0 }, { nan, 1.5, nan }, { 2, nan, nan }, { 2, 128, inf }, { 2, -149, 2 ^ -149 }, { 2, -150, 0 },
      { 10, 38.6, inf }, { -0.41, 4.6e18, 0 }, { -0.0253, 2 ^ 31, 0 }, { -7, 2 ^ 31, inf }, { 0.07, -2 ^ 31, inf }, { 10, 38.5, ref.f32(10 ^ ref.f32(38.5)) }, { 3, 20, ref.f32(3 ^ 20) },
    }
    local xs, ys, want = {}, {}, {}
    for i, c in ipairs(cases) do xs[i], ys[i], want[i] = c[1], c[2], c[3] end
    checks.close(lumus.pow(lumus.tensor(xs), lumus.tensor(ys)), want, { what = "pow(t, t)" })
    checks.close(ref.pow(xs, ys), want, { rel = 1e-7, abs = 1e-45, what = "reference.pow" })
    local strided = lumus.tensor({ xs, ys }):transpose(1, 2)
    checks.close(lumus.pow(strided:select(2, 1), strided:select(2, 2)), want, { what = "pow of strided views" })
    for i = 1, #xs do
      local got = lumus.pow(lumus.tensor({ xs[i] }), lumus.tensor({ ys[i] })):to_table()[1]
      assert.is_true(got == want[i] and (want[i] ~= 0 or 1 / got == 1 / want[i]) or (got ~= got and want[i] ~= want[i]),
        ("pow(%g, %g) = %g, want %g"):format(xs[i], ys[i], got, want[i]))
    end
    -- tensor ^ number: PyTorch's forms for 0.5 (sqrt), 2, 3, -0.5, -1, -2
    local t = lumus.tensor({ compat.negative_zero, -inf, -4, 2, nan, 0 })
    checks.close(lumus.pow(t, 0.5), { compat.negative_zero, nan, nan, ref.f32(math.sqrt(2)), nan, 0 }, { what = "pow(t, 0.5)" })
    assert.are.equal(-inf, 1 / lumus.pow(t, 0.5):to_table()[1], "pow(-0, 0.5) is -0 as sqrt")
    checks.close(lumus.pow(t, -1), { -inf, compat.negative_zero, -0.25, 0.5, nan, inf }, { what = "pow(t, -1)" })
    checks.close(lumus.pow(t, 2), { 0, inf, 16, 4, nan, 0 }, { what = "pow(t, 2)" })
    checks.close(lumus.pow(t, 0), { 1, 1, 1, 1, 1, 1 }, { what = "pow(t, 0)" })
    checks.close(ref.pow(t:to_table(), 0.5), { compat.negative_zero, nan, nan, math.sqrt(2), nan, 0 }, { what = "reference.pow(t, 0.5)" })
  end)
end)

describe("maximum, minimum, clamp", function()
  local xs = { 1, -2, nan, 3, inf, -inf, 0, 5 }
  local ys = { 2, -3, 1, nan, 1, 1, compat.negative_zero, 5 }

  it("propagate NaN (either operand) and broadcast", function()
    checks.close(lumus.maximum(lumus.tensor(xs), lumus.tensor(ys)), { 2, -2, nan, nan, inf, 1, 0, 5 }, { what = "maximum" })
    checks.close(lumus.minimum(lumus.tensor(xs), lumus.tensor(ys)), { 1, -3, nan, nan, 1, -inf, 0, 5 }, { what = "minimum" })
    checks.close(ref.maximum(xs, ys), { 2, -2, nan, nan, inf, 1, 0, 5 }, { what = "reference.maximum" })
    checks.close(lumus.maximum(lumus.tensor(xs), 2), ref.maximum(xs, 2), { what = "maximum(t, 2)" })
    checks.close(lumus.minimum(2, lumus.tensor(xs)), ref.minimum(2, xs), { what = "minimum(2, t)" })
    checks.close(lumus.maximum(lumus.tensor({ { 1 }, { 5 } }), lumus.tensor({ 0, 2, 7 })), { { 1, 2, 7 }, { 5, 5, 7 } },
      { what = "maximum broadcast" })
    checks.close(lumus.maximum(lumus.tensor(xs), nan), ref.maximum(xs, nan), { what = "maximum(t, NaN)" })
  end)

  it("clamp(t, min, max) takes nil for no bound; NaN in t or a bound gives NaN; min > max gives max", function()
    local t = lumus.tensor(xs)
    checks.close(lumus.clamp(t, -1, 2), ref.clamp(xs, -1, 2), { what = "clamp(t, -1, 2)" })
    checks.close(t:clamp(nil, 2), ref.clamp(xs, nil, 2), { what = "clamp(t, nil, 2)" })
    checks.close(t:clamp(0), ref.clamp(xs, 0), { what = "clamp(t, 0)" })
    checks.close(t:clamp(3, 1), { 1, 1, nan, 1, 1, 1, 1, 1 }, { what = "clamp(t, 3, 1)" })
    checks.close(t:clamp(nan, 1), { nan, nan, nan, nan, nan, nan, nan, nan }, { what = "clamp(t, NaN, 1)" })
    checks.close(ref.clamp(xs, 3, 1), { 1, 1, nan, 1, 1, 1, 1, 1 }, { what = "reference.clamp(t, 3, 1)" })
    local out = lumus.empty({ 8 })
    assert.are.equal(out, t:clamp(-1, 1, { out = out }))
    checks.close(out, ref.clamp(xs, -1, 1), { what = "clamp out=" })
    checks.errors(function() lumus.clamp(t) end, "bad argument #2 to 'clamp' %(at least one of min and max must be a number%)")
    checks.errors(function() lumus.clamp(t, "1", 2) end, "bad argument #2 to 'clamp' %(number or nil expected, got string%)")
    checks.errors(function() t:clamp(1, 2, { outt = 1 }) end, "unknown option 'outt'")
  end)
end)

describe("comparisons", function()
  local xs = { 1, 2, nan, inf, -inf, 0, compat.negative_zero, 3, nan }
  local ys = { 1, 3, 1, inf, 1, compat.negative_zero, 0, 2, nan }

  it("give bool tensors; NaN compares false except in ne; numbers on either side; broadcasting", function()
    local a, b = lumus.tensor(xs), lumus.tensor(ys)
    for _, op in ipairs { "eq", "ne", "lt", "le", "gt", "ge" } do
      local r = lumus[op](a, b)
      assert.are.equal("bool", r:dtype())
      booleans_equal(r, ref[op](xs, ys), op)
      booleans_equal(a[op](a, 2), ref[op](xs, 2), op .. "(t, 2)")
      booleans_equal(lumus[op](2, a), ref[op](2, xs), op .. "(2, t)")
      booleans_equal(lumus[op](lumus.tensor({ { 1 }, { 2 }, { 3 } }), lumus.tensor({ 1, 2, 3, 4 })),
        ref[op]({ { 1 }, { 2 }, { 3 } }, { 1, 2, 3, 4 }), op .. " broadcast 3x1, 4")
      -- every tail length of the bool words, and the strided form
      for n = 1, 9 do
        local xn, yn = {}, {}
        for i = 1, n do xn[i], yn[i] = xs[i], ys[i] end
        booleans_equal(lumus[op](lumus.tensor(xn), lumus.tensor(yn)), ref[op](xn, yn), op .. " over " .. n)
        booleans_equal(lumus[op](lumus.tensor({ xn, xn }):select(1, 2), lumus.tensor({ yn, yn }):transpose(1, 1):select(1, 1)),
          ref[op](xn, yn), op .. " of views over " .. n)
      end
    end
    booleans_equal(ref.ne(xs, ys), { false, true, true, false, true, false, false, true, true }, "reference.ne")
    booleans_equal(lumus.ne(a, b), { false, true, true, false, true, false, false, true, true }, "ne written out")
    booleans_equal(lumus.lt(a, b), { false, true, false, false, true, false, false, false, false }, "lt written out")
  end)

  it("write whole words and leave the bytes after a partial last word alone", function()
    local big = lumus.full({ 12 }, 1, { dtype = "bool" })
    lumus.gt(lumus.tensor({ 1, 2, 3, 4, 5 }), 9, { out = big:narrow(1, 1, 5) })
    booleans_equal(big, { false, false, false, false, false, true, true, true, true, true, true, true }, "bool out, 5 of 12")
    local h = lumus.full({ 12 }, 7, { dtype = "float16" })
    lumus.add(lumus.tensor({ 1, 2, 3 }, { dtype = "float16" }), 1, { out = h:narrow(1, 9, 3) })
    checks.close(h, { 7, 7, 7, 7, 7, 7, 7, 7, 2, 3, 4, 7 }, { what = "float16 out, 3 of 12 at 9" })
    lumus.sub(lumus.tensor({ 1 }, { dtype = "float16" }), 1, { out = h:narrow(1, 1, 1) })
    checks.close(h, { 0, 7, 7, 7, 7, 7, 7, 7, 2, 3, 4, 7 }, { what = "float16 out, 1 of 12" })
  end)

  it("refuse bad operands and outs by name", function()
    local a = lumus.tensor({ 1, 2 })
    checks.errors(function() lumus.gt(a, a, { out = lumus.empty({ 2 }) }) end, "bad argument #3 to 'gt' %(out must be bool, got float32%)")
    checks.errors(function() lumus.eq(a, lumus.tensor({ 1, 2, 3 })) end, "bad argument #2 to 'eq' %(shapes 2 and 3 do not match")
    checks.errors(function() lumus.lt(1, 2) end, "tensor expected %(both operands are numbers%)")
    checks.errors(function() lumus.ge(lumus.gt(a, 1), 0) end, "bad argument #1 to 'ge' %(dtype bool is not supported")
  end)
end)

describe("where", function()
  it("picks a where the bool mask is true, else b, broadcasting all three, numbers too", function()
    local m = lumus.tensor({ { 1, 0, 1 }, { 0, 0, 1 } }):gt(0)
    local mt = { { true, false, true }, { false, false, true } }
    local a = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    local b = lumus.tensor({ 10, 20, 30 })
    checks.close(lumus.where(m, a, b), ref.where(mt, a:to_table(), b:to_table()), { what = "where(m, a, b[3])" })
    checks.close(m:where(a, -1), ref.where(mt, a:to_table(), -1), { what = "where(m, a, -1)" })
    checks.close(lumus.where(m, 0 / 0, b), ref.where(mt, nan, b:to_table()), { what = "where(m, NaN, b)" })
    local both = lumus.where(m, 1, 0)
    assert.are.equal("float32", both:dtype())
    checks.close(both, { { 1, 0, 1 }, { 0, 0, 1 } }, { what = "where(m, 1, 0)" })
    local col = lumus.tensor({ { 1 }, { -1 } })
    local mrow = lumus.tensor({ 1, -1, 1, -1 }):gt(0)
    checks.close(lumus.where(mrow, col, lumus.tensor({ { 7, 8, 9, 10 } })),
      ref.where({ true, false, true, false }, { { 1 }, { -1 } }, { { 7, 8, 9, 10 } }), { what = "where broadcast 4, 2x1, 1x4" })
    -- strided mask and operands
    local mT = m:transpose(1, 2)
    checks.close(lumus.where(mT, a:transpose(1, 2), 0), ref.where({ { true, false }, { false, false }, { true, true } },
      { { 1, 4 }, { 2, 5 }, { 3, 6 } }, 0), { what = "where of transposed views" })
    local out = lumus.empty({ 2, 3 })
    assert.are.equal(out, lumus.where(m, a, b, { out = out }))
    lumus.where(m, a, 0, { out = a })
    checks.close(a, { { 1, 0, 3 }, { 0, 0, 6 } }, { what = "where in place" })
  end)

  -- float16 and bfloat16 tensors take a path that moves the 16-bit words unconverted
  -- (8 per thread, the first thread the rest): every result is bit for bit its operand's
  -- element, NaN payloads, -0 and infinities included, over lengths around multiples of 8.
  it("keeps the bits of 16-bit operands exactly, every length, in place too", function()
    local seed = 12345
    local function rand(n)   -- 0 .. n - 1 from a seeded LCG
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n
    end
    local specials = { 0x7e01, 0xfd55, 0x7c00, 0xfc00, 0x8000, 0x0000, 0x0001, 0x7f80, 0xff81 }
    local function u16(x) return string.char(x % 256, math.floor(x / 256)) end   -- little-endian, any Lua
    for _, dtype in ipairs { "float16", "bfloat16" } do
      for _, n in ipairs { 1, 3, 7, 8, 9, 15, 16, 17, 63, 2048 + 5, 8 * 1031, 8 * 1031 + 7 } do
        local mb, ab, bb, wb = {}, {}, {}, {}
        for i = 1, n do
          local m = rand(2)
          local x = i % 13 == 0 and specials[rand(#specials) + 1] or rand(65536)
          local y = i % 17 == 0 and specials[rand(#specials) + 1] or rand(65536)
          mb[i] = string.char(m)
          ab[i] = u16(x)
          bb[i] = u16(y)
          wb[i] = m == 1 and ab[i] or bb[i]
        end
        local mask = lumus.from_bytes(table.concat(mb), { n }, { dtype = "bool" })
        local a = lumus.from_bytes(table.concat(ab), { n }, { dtype = dtype })
        local b = lumus.from_bytes(table.concat(bb), { n }, { dtype = dtype })
        local want = table.concat(wb)
        assert.are.equal(want, lumus.where(mask, a, b):to_bytes(), ("%s where, %d elements"):format(dtype, n))
        lumus.where(mask, a, b, { out = b })
        assert.are.equal(want, b:to_bytes(), ("%s where in place, %d elements"):format(dtype, n))
        -- views 16 elements in (16-byte aligned, so the same path), into part of a tensor
        local pad = string.rep("\0", 32)
        local av = lumus.from_bytes(pad .. table.concat(ab), { n + 16 }, { dtype = dtype }):narrow(1, 17, n)
        local bv = lumus.from_bytes(pad .. table.concat(bb), { n + 16 }, { dtype = dtype }):narrow(1, 17, n)
        local mv = lumus.from_bytes(string.rep("\1", 16) .. table.concat(mb), { n + 16 }, { dtype = "bool" }):narrow(1, 17, n)
        local dst = lumus.from_bytes(string.rep("\85", 2 * n + 64), { n + 32 }, { dtype = dtype })
        lumus.where(mv, av, bv, { out = dst:narrow(1, 17, n) })
        assert.are.equal(string.rep("\85", 32) .. want .. string.rep("\85", 32), dst:to_bytes(),
          ("%s where of views, %d elements"):format(dtype, n))
      end
    end
  end)

  it("refuses a non-bool mask, mixed dtypes and shapes that do not broadcast", function()
    local a = lumus.tensor({ 1, 2, 3 })
    checks.errors(function() lumus.where(a, a, a) end, "bad argument #1 to 'where' %(mask must be bool, got float32")
    local m = a:gt(1)
    checks.errors(function() lumus.where(m, a, a:half()) end, "bad argument #3 to 'where' %(dtypes float32 and float16 differ %(convert with :to%(%)%)%)")
    checks.errors(function() lumus.where(m, lumus.tensor({ 1, 2 }), a) end, "bad argument #2 to 'where' %(shapes 3 and 2 do not match")
    checks.errors(function() lumus.where(m, a, lumus.zeros({ 2, 2 })) end, "bad argument #3 to 'where' %(shapes 3 and 2x2 do not match")
    checks.errors(function() lumus.where(m, "x", a) end, "bad argument #2 to 'where' %(tensor or number expected, got string%)")
    checks.errors(function() lumus.where(m, a, a, { out = lumus.empty({ 3 }, { dtype = "float16" }) }) end, "out must be float32, got float16")
  end)
end)

-- Shapes that broadcast: pairs written out, and random ones from a seeded generator.
local PAIRS = {
  { { 2, 5, 32 }, { 2, 1, 32 } }, { { 5, 1 }, { 1, 7 } }, { { 3, 1, 4 }, { 2, 1 } }, { { 1 }, { 4, 3 } },
  { { 4, 3 }, { 3 } }, { { 4, 1 }, { 3 } }, { { 2, 3, 4, 5 }, { 3, 1, 5 } }, { { 7 }, { 1 } }, { { 1, 1, 1 }, { 2, 1, 3 } },
  { { 6, 8 }, { 8 } }, { { 6, 8 }, { 1, 8 } }, { { 5, 6 }, { 6 } }, { { 3, 1 }, { 3, 1 } },
  { { 2, 1, 2, 1, 2, 1, 2, 1 }, { 1, 2, 1, 2, 1, 2, 1, 2 } },   -- 8 dimensions that do not merge
  -- columns (the vec4 form's one element per run where the run is a multiple of 4 or 8;
  -- the strided form otherwise) and a leading part with a broadcast outer dimension
  { { 5, 8 }, { 5, 1 } }, { { 2, 3, 16 }, { 2, 3, 1 } }, { { 4, 8 }, { 1 } }, { { 3, 4 }, { 3, 1 } },
  { { 2, 3, 4, 8 }, { 2, 3, 1, 1 } }, { { 2, 5, 12 }, { 1, 5, 1 } }, { { 7, 6 }, { 7, 1 } },
}

local function random_pairs(count, seed)
  local g = ref.rng(seed)
  local function int(n) return math.floor(g.uniform() * n) + 1 end
  local out = {}
  for c = 1, count do
    local nd = int(5)
    local full = {}
    for i = 1, nd do full[i] = int(5) end
    local function operand()
      local drop = int(nd) - 1
      local s = {}
      for i = drop + 1, nd do s[#s + 1] = g.uniform() < 0.35 and 1 or full[i] end
      if #s == 0 then s = { 1 } end
      return s
    end
    out[c] = { operand(), operand() }
  end
  return out
end

local function random_values(shape, g, positive)
  return ref.random_table(shape, function()
    local v = g.normal() * 3
    if positive then v = abs(v) + 0.1 end
    return v
  end)
end

describe("broadcasting", function()
  local pairs = {}
  for _, p in ipairs(PAIRS) do pairs[#pairs + 1] = p end
  for _, p in ipairs(random_pairs(24, 77)) do pairs[#pairs + 1] = p end

  it("every binary op broadcasts by NumPy/PyTorch rules (written-out and random shapes, both orders)", function()
    local g = ref.rng(3)
    for k, p in ipairs(pairs) do
      local at, bt = random_values(p[1], g), random_values(p[2], g, true)
      local a, b = lumus.tensor(at), lumus.tensor(bt)
      local what = ("%s and %s"):format(table.concat(p[1], "x"), table.concat(p[2], "x"))
      for _, op in ipairs { "add", "sub", "mul", "maximum", "minimum" } do
        local want = ref.map(ref[op](at, bt), ref.f32)
        checks.close(lumus[op](a, b), want, { what = op .. " " .. what })
        checks.close(lumus[op](b, a), ref.map(ref[op](bt, at), ref.f32), { what = op .. " reversed " .. what })
      end
      within_ulps(lumus.div(a, b), ref.flatten(ref.div(at, bt)), 3, "div " .. what)
      within_ulps(lumus.pow(b, a), ref.flatten(ref.pow(bt, at)), 4, "pow " .. what)
      booleans_equal(lumus.lt(a, b), ref.lt(at, bt), "lt " .. what)
      booleans_equal(lumus.ge(b, a), ref.ge(bt, at), "ge " .. what)
      if k % 4 == 0 then
        local m = lumus.gt(a, 0)
        checks.close(lumus.where(m, b, a), ref.where(ref.gt(at, 0), bt, at), { what = "where " .. what })
      end
    end
  end)

  it("views as operands: transposed, narrowed (unaligned), expanded, selected, permuted", function()
    local g = ref.rng(9)
    local xt = random_values({ 6, 5 }, g)
    local x = lumus.tensor(xt)
    local xT = x:transpose(1, 2)                         -- 5x6, strided
    local xTt = xT:to_table()
    local row = lumus.tensor(random_values({ 1, 6 }, g))
    checks.close(lumus.add(xT, row), ref.map(ref.add(xTt, row:to_table()), ref.f32), { what = "transposed + row" })
    checks.close(lumus.mul(row:expand({ 5, 6 }), xT), ref.map(ref.mul(row:expand({ 5, 6 }):to_table(), xTt), ref.f32),
      { what = "expanded * transposed" })
    local flat = lumus.tensor(ref.flatten(xt))
    local u = flat:narrow(1, 3, 27)                      -- contiguous, unaligned
    within_ulps(lumus.exp(u), ref.exp(u:to_table()), 2, "exp of an unaligned view")
    within_ulps(lumus.tanh(xT), ref.flatten(ref.tanh(xTt)), 3, "tanh of a transposed view")
    local cube = lumus.tensor(random_values({ 3, 4, 5 }, g))
    local perm = cube:permute({ 3, 1, 2 })
    within_ulps(lumus.sigmoid(perm), ref.flatten(ref.sigmoid(perm:to_table())), 3, "sigmoid of a permuted view")
    booleans_equal(lumus.gt(cube:select(2, 3), cube:select(2, 1)), ref.gt(cube:select(2, 3):to_table(), cube:select(2, 1):to_table()),
      "gt of selected views")
    local h = x:half():transpose(1, 2)
    checks.close(lumus.abs(h), ref.map(ref.map(h:to_table(), abs), ref.round_float16), { what = "float16 transposed" })
  end)

  it("folds the strided form onto 2-D grids", function()
    lumus.tune.grid({ max_x = 2 })
    local ok, err = pcall(function()
      local g = ref.rng(4)
      local at, bt = random_values({ 37, 1, 29 }, g), random_values({ 1, 13, 29 }, g)
      checks.close(lumus.add(lumus.tensor(at), lumus.tensor(bt)), ref.map(ref.add(at, bt), ref.f32), { what = "add on a 2-D grid" })
      local big = lumus.tensor(random_values({ 1, 9000 }, g))
      checks.close(lumus.exp(big:transpose(1, 2)), ref.exp(big:transpose(1, 2):to_table()), { rel = 3e-7, what = "exp on a 2-D grid" })
    end)
    lumus.tune.grid({ max_x = 0 })
    assert(ok, err)
  end)

  it("names both shapes when they do not broadcast", function()
    local a = lumus.zeros({ 2, 5, 32 })
    checks.errors(function() return a + lumus.zeros({ 3, 1, 32 }) end, "bad argument #2 to '[%w._]*add' %(shapes 2x5x32 and 3x1x32 do not match")
    checks.errors(function() return lumus.maximum(lumus.zeros({ 4 }), a) end, "shapes 4 and 2x5x32 do not match")
    checks.errors(function() lumus.pow(a, lumus.zeros({ 5, 2 })) end, "'pow' %(shapes 2x5x32 and 5x2 do not match")
  end)
end)

describe("out= and in place", function()
  it("writes into out, which may be an input exactly; refuses partial overlap and wrong shapes", function()
    local a = lumus.tensor({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 } })
    local r = lumus.tensor({ 10, 20, 30, 40 })
    lumus.add(a, r, { out = a })
    checks.close(a, { { 11, 22, 33, 44 }, { 15, 26, 37, 48 } }, { what = "a += row" })
    lumus.maximum(r, a, { out = a })
    checks.close(a, { { 11, 22, 33, 44 }, { 15, 26, 37, 48 } }, { what = "maximum(row, a) into a" })
    lumus.exp(a:narrow(1, 1, 1), { out = a:narrow(1, 1, 1) })
    checks.errors(function() lumus.add(a, r, { out = r }) end, "bad argument #3 to 'add' %(out must have shape 2x4, got 4%)")
    local big = lumus.zeros({ 16 })
    local lo, hi = big:narrow(1, 1, 8), big:narrow(1, 5, 8)
    checks.errors(function() lumus.mul(lo, 2, { out = hi }) end, "out overlaps a without being the same elements")
    checks.errors(function() lumus.sqrt(lo, { out = lumus.empty({ 8 }, { dtype = "float16" }) }) end, "out must be float32, got float16")
    checks.errors(function() lumus.add(a, 1, { out = a:transpose(1, 2) }) end, "out must have shape 2x4")
    checks.errors(function() lumus.add(a, 1, { out = lumus.zeros({ 4, 2 }):transpose(1, 2) }) end, "out must be contiguous")
  end)

  it("refuses mixed and unsupported dtypes by name", function()
    local a = lumus.tensor({ 1, 2 })
    checks.errors(function() return a + a:half() end, "bad argument #2 to '[%w._]*add' %(dtypes float32 and float16 differ %(convert with :to%(%)%)%)")
    checks.errors(function() lumus.exp(a:int()) end, "bad argument #1 to 'exp' %(dtype int32 is not supported %(float32, float16 or bfloat16%)%)")
    checks.errors(function() lumus.mul(2, a:gt(0)) end, "bad argument #2 to 'mul' %(dtype bool is not supported")
  end)
end)

describe("float16 and bfloat16", function()
  local FORMATS = {
    float16 = { round = ref.round_float16, frac = 10, emin = -14 },
    bfloat16 = { round = ref.round_float16 and ref.round_bfloat16, frac = 7, emin = -126 },
  }
  local g = ref.rng(12)
  local base = {}
  for i = 1, 1027 do base[i] = g.normal() * 3 end
  base[1], base[2], base[3], base[4] = 0 / 0, math.huge, -math.huge, 0

  for dtype, fmt in pairs(FORMATS) do
    it(dtype .. " in, " .. dtype .. " out for every op: float32 arithmetic rounded once (1 ulp of " .. dtype .. ")", function()
      for _, n in ipairs { 1, 3, 4, 5, 7, 1027 } do
        local xs = {}
        for i = 1, n do xs[i] = base[i] end
        local x = lumus.tensor(xs, { dtype = dtype })
        local xv = x:to_table()                          -- the values as stored
        local y = lumus.tensor(ref.map(xv, function(v) return v * 0.5 + 1 end), { dtype = dtype })
        local yv = y:to_table()
        local function check(got, want, what)
          assert.are.equal(dtype, got:dtype(), what)
          within_ulps(got, ref.map(want, fmt.round), 1, ("%s %s over %d"):format(dtype, what, n), xv, fmt.frac, fmt.emin)
        end
        for _, name in ipairs(UNARY_NAMES) do check(lumus[name](x), ref[name](xv), name) end
        check(lumus.abs(x), ref.map(xv, abs), "abs")
        check(lumus.relu(x), ref.relu(xv), "relu")
        check(lumus.add(x, y), ref.add(xv, yv), "add")
        check(lumus.mul(x, 3), ref.mul(xv, 3), "mul by 3")
        check(lumus.sub(1, x), ref.sub(1, xv), "1 - x")
        check(lumus.div(x, y), ref.div(xv, yv), "div")
        check(lumus.pow(y, 2.5), ref.pow(yv, ref.f32(2.5)), "pow")
        check(lumus.maximum(x, y), ref.maximum(xv, yv), "maximum")
        check(lumus.clamp(x, -1, 1), ref.clamp(xv, -1, 1), "clamp")
        booleans_equal(lumus.lt(x, y), ref.lt(xv, yv), dtype .. " lt")
        check(lumus.where(lumus.gt(x, 0), x, y), ref.where(ref.gt(xv, 0), xv, yv), "where")
      end
      -- rounding on store: overflow to inf, ties to even, broadcasting
      local big = lumus.tensor({ 60000, 1 }, { dtype = dtype })
      local want = dtype == "float16" and { inf, 2 } or { ref.round_bfloat16(120000), 2 }
      checks.close(lumus.add(big, big), want, { what = dtype .. " overflow" })
      local col = lumus.tensor({ { 1 }, { 2 } }, { dtype = dtype })
      local row = lumus.tensor({ 0.5, 0.25, 0.125 }, { dtype = dtype })
      checks.close(lumus.mul(col, row), { { 0.5, 0.25, 0.125 }, { 1, 0.5, 0.25 } }, { what = dtype .. " broadcast" })
      -- a column against rows of 8 (the vec form, one column element per 8-element
      -- vector) and of 12 (the strided form), both orders, bool results too
      for _, d in ipairs { 8, 12, 24 } do
        local rows, cols = {}, {}
        for r = 1, 5 do
          rows[r], cols[r] = {}, { base[10 + r] }
          for c = 1, d do rows[r][c] = base[20 + r * d + c] end
        end
        local m, cl = lumus.tensor(rows, { dtype = dtype }), lumus.tensor(cols, { dtype = dtype })
        local mv, cv = m:to_table(), cl:to_table()
        checks.close(lumus.sub(m, cl), ref.map(ref.sub(mv, cv), fmt.round), { what = dtype .. " rows - column " .. d })
        checks.close(lumus.sub(cl, m), ref.map(ref.sub(cv, mv), fmt.round), { what = dtype .. " column - rows " .. d })
        booleans_equal(lumus.lt(m, cl), ref.lt(mv, cv), dtype .. " rows < column " .. d)
      end
    end)
  end
end)
