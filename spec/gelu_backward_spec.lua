-- lumus.gelu_backward (grad times gelu's derivative, one kernel; autograd's backward of
-- gelu) against the float64 reference, whose formulas are checked here against central
-- differences of reference.gelu. Tolerance (float32): |got - want| <= 1e-6 * max(1, |want|)
-- + 1e-6 * |grad| (the derivative is at most 1.13 in magnitude; a few float32 roundings).
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local FORMS = { "none", "tanh" }

-- x over the interesting range (both tails, where exp under- and overflows) and grads.
local function inputs()
  local xs, gs = {}, {}
  local gen = ref.rng(16)
  for i = 1, 401 do xs[i] = ref.f32(-20 + (i - 1) * 0.1) end
  for _, v in ipairs { 0, -0.0, 1e-30, -1e-30, 50, -50, 1e4, -1e4, 3e12, -3e12 } do xs[#xs + 1] = v end
  for i = 1, #xs do gs[i] = ref.f32(gen.normal()) end
  return xs, gs
end

describe("gelu_backward", function()
  it("the reference formulas are gelu's derivative (central differences in float64)", function()
    for _, form in ipairs(FORMS) do
      for _, v in ipairs { -7.5, -3, -1.25, -0.3, 0, 0.2, 0.9, 2.5, 6 } do
        local h = 1e-5
        local fd = (ref.gelu(v + h, form) - ref.gelu(v - h, form)) / (2 * h)
        local d = ref.gelu_backward(1, v, form)
        assert(math.abs(fd - d) <= 1e-8, ("%s at %g: formula %.12g, differences %.12g"):format(form, v, d, fd))
      end
    end
  end)

  it("matches the reference for both forms, tails included", function()
    local xs, gs = inputs()
    local x, g = lumus.tensor(xs), lumus.tensor(gs)
    local gabs = {}
    for i = 1, #gs do gabs[i] = 1e-6 * math.abs(gs[i]) end
    for _, form in ipairs(FORMS) do
      local want = ref.gelu_backward(gs, xs, form)
      checks.close(lumus.gelu_backward(g, x, { approximate = form }), want,
                   { mixed = 1e-6, abs = gabs, what = "gelu_backward " .. form })
    end
    -- the default form is the erf one, as lumus.gelu's
    checks.close(lumus.gelu_backward(g, x), ref.gelu_backward(gs, xs, "none"), { mixed = 1e-6, abs = gabs })
  end)

  it("reads views by their strides, writes out=, keeps the shape", function()
    local gen = ref.rng(5)
    local xt = ref.random_table({ 6, 10 }, gen.normal)
    local gt = ref.random_table({ 10, 6 }, gen.normal)
    local x = lumus.tensor(xt)
    local gview = lumus.tensor(gt):transpose(1, 2)   -- [6, 10], not contiguous
    local gtt = {}
    for i = 1, 6 do
      gtt[i] = {}
      for j = 1, 10 do gtt[i][j] = gt[j][i] end
    end
    local want = ref.gelu_backward(gtt, xt, "tanh")
    local out = lumus.empty({ 6, 10 })
    local r = lumus.gelu_backward(gview, x, { approximate = "tanh", out = out })
    assert.are.equal(out, r)
    assert.are.same({ 6, 10 }, r:shape())
    checks.close(out, want, { mixed = 2e-6 })
  end)

  it("is what autograd runs for gelu, equal to the composite derivative", function()
    local gen = ref.rng(7)
    local xt = ref.random_table({ 4, 33 }, gen.normal)
    for _, form in ipairs(FORMS) do
      local x = lumus.tensor(xt):requires_grad(true)
      local y = lumus.gelu(x, { approximate = form })
      local w = lumus.tensor(ref.random_table({ 4, 33 }, gen.normal))
      lumus.sum(lumus.mul(y, w)):backward()
      checks.close(x:grad(), ref.gelu_backward(w:to_table(), xt, form), { mixed = 2e-6, what = "autograd " .. form })
    end
  end)

  -- PyTorch's formulas give NaN at x = +-inf (inf * 0 in x * pdf, and in the tanh
  -- form's x (1 - tanh^2)), and so does lumus.
  it("gives NaN for NaN and infinite x, and a NaN grad, as PyTorch", function()
    local g = lumus.tensor({ 1, 1, 1, 0 / 0 })
    local x = lumus.tensor({ 0 / 0, math.huge, -math.huge, 1 })
    for _, form in ipairs(FORMS) do
      local r = lumus.gelu_backward(g, x, { approximate = form }):to_table()
      for i = 1, 4 do assert(r[i] ~= r[i], ("%s: element %d is NaN, got %s"):format(form, i, tostring(r[i]))) end
    end
  end)

  it("takes float16 and bfloat16 (float32 arithmetic, one rounding to the format)", function()
    if not lumus.device().narrow_storage then return end
    local xs, gs = {}, {}
    for i = 1, 41 do xs[i] = -4 + i * 0.2; gs[i] = 1 - i * 0.03 end
    for dt, ulp in pairs { float16 = 2 ^ -10, bfloat16 = 2 ^ -7 } do
      local x, g = lumus.tensor(xs, { dtype = dt }), lumus.tensor(gs, { dtype = dt })
      for _, form in ipairs(FORMS) do
        local r = lumus.gelu_backward(g, x, { approximate = form })
        assert.are.equal(dt, r:dtype())
        checks.close(r:float(), ref.gelu_backward(g:float():to_table(), x:float():to_table(), form),
                     { mixed = ulp, what = dt .. " " .. form })
      end
    end
  end)

  it("rejects bad arguments with messages that name them", function()
    local a, b = lumus.zeros({ 2, 3 }), lumus.zeros({ 3, 2 })
    assert.has_error(function() lumus.gelu_backward(a, b) end,
                     "bad argument #2 to 'lumus.gelu_backward' (x must have grad's shape 2x3, got 3x2)")
    assert.has_error(function() lumus.gelu_backward(a, a, { approximate = "exact" }) end)
    assert.has_error(function() lumus.gelu_backward(a, a, { bogus = 1 }) end)
    assert.has_error(function() lumus.gelu_backward(a, 1) end)
    assert.has_error(function() lumus.gelu_backward(lumus.zeros({ 2, 3 }, { dtype = "int32" }), a) end)
  end)
end)
