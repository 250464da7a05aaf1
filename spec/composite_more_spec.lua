-- More ops written with other ops (lua/lumus/composite.lua, lua/lumus/loss.lua): the NaN
-- tests, logsumexp, amax/amin, one_hot, normalize, cosine_similarity, logaddexp, addmm,
-- the piecewise activations and their nn modules, binary_cross_entropy and kl_div, each
-- against its float64 counterpart in lumus.reference at a stated bound on seeded shapes
-- (odd, prime, single rows), with errors by message. Gradients: spec/grad_check_spec.lua.
local lumus = require "lumus"
local nn = require "lumus.nn"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local inf, nan = math.huge, 0 / 0

local function rand(shape, seed, scale)
  local g = ref.rng(seed)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local flat = {}
  for i = 1, n do flat[i] = ref.f32(g.normal() * (scale or 1)) end
  return ref.nest(flat, shape)
end

local SHAPES = { { 1, 1 }, { 1, 7 }, { 5, 1 }, { 3, 4 }, { 7, 13 }, { 2, 5, 3 }, { 4, 1, 31 }, { 17, 64 } }

describe("more composite ops", function()
  it("isnan, isinf, isfinite and nan_to_num follow PyTorch on every special value", function()
    local xs = { nan, inf, -inf, 0, -1.5, ref.f32(3e38), ref.f32(1e-45) }
    for _, dt in ipairs { "float32", "float16", "bfloat16" } do
      local x = lumus.tensor(xs):to(dt)
      local back = x:float():to_table()
      assert.are.same(ref.isnan(back), x:isnan():to_table())
      assert.are.same(ref.isinf(back), lumus.isinf(x):to_table())
      assert.are.same(ref.isfinite(back), lumus.isfinite(x):to_table())
      assert.are.equal("bool", x:isnan():dtype())
    end
    local x = lumus.tensor(xs)
    checks.close(x:nan_to_num(), ref.nan_to_num(xs), { what = "nan_to_num" })
    checks.close(lumus.nan_to_num(x, { nan = -1, posinf = 7, neginf = -7 }), ref.nan_to_num(xs, -1, 7, -7), { what = "nan_to_num given" })
    assert.are.same({ 0, 65504, -65504 }, lumus.nan_to_num(lumus.tensor({ nan, inf, -inf }):half()):float():to_table())
  end)

  it("logsumexp matches the reference along each dim and over everything, without overflow", function()
    for k, shape in ipairs(SHAPES) do
      local xs = rand(shape, 30 + k, 40)
      local x = lumus.tensor(xs)
      for d = 1, #shape do
        checks.close(lumus.logsumexp(x, { dim = d }), ref.logsumexp(xs, { dim = d }), { rel = 4e-7, abs = 4e-7, what = ("logsumexp %s dim %d"):format(table.concat(shape, "x"), d) })
        checks.close(x:logsumexp({ dim = d, keepdim = true }), ref.logsumexp(xs, { dim = d, keepdim = true }), { rel = 4e-7, abs = 4e-7, what = "keepdim" })
      end
      checks.close(x:logsumexp(), ref.logsumexp(xs), { rel = 4e-7, what = "logsumexp all" })
    end
    local rows = { { 1000, 1000, -1000 }, { -inf, -inf, -inf }, { 1, inf, 2 }, { 1, nan, 2 }, { -inf, 0, -inf } }
    checks.close(lumus.logsumexp(lumus.tensor(rows), { dim = 2 }), ref.logsumexp(rows, { dim = 2 }), { rel = 2e-7, what = "special rows" })
    assert.are.equal(ref.f32(1000 + math.log(2)), lumus.logsumexp(lumus.tensor(rows), { dim = 2 }):to_table()[1])
  end)

  it("amax and amin give the values of max and min", function()
    local xs = rand({ 7, 13 }, 3)
    local x = lumus.tensor(xs)
    assert.are.same((ref.max(xs, { dim = 2 })), x:amax({ dim = 2 }):to_table())
    assert.are.same((ref.min(xs, { dim = 1, keepdim = true })), lumus.amin(x, { dim = 1, keepdim = true }):to_table())
    assert.are.same(ref.max(xs), x:amax():to_table())
  end)

  it("one_hot puts a 1 at each 1-based id and refuses ids outside 1..C", function()
    local ids = { 3, 1, 5, 5, 2 }
    local t = lumus.tensor(ids, { dtype = "int32" })
    local y = lumus.one_hot(t, 5)
    assert.are.equal("int32", y:dtype())
    assert.are.same(ref.one_hot(ids, 5), y:to_table())
    assert.are.same({ 2, 3, 7 }, lumus.tensor({ { 1, 2, 3 }, { 7, 7, 7 } }, { dtype = "int32" }):one_hot(7):shape())
    checks.errors(lumus.one_hot, "'lumus.one_hot' %(ids must be in 1..5, got 6%)", lumus.tensor({ 1, 6 }, { dtype = "int32" }), 5)
    checks.errors(lumus.one_hot, "'lumus.one_hot' %(ids must be in 1..5, got 0%)", lumus.tensor({ 0, 2 }, { dtype = "int32" }), 5)
    checks.errors(lumus.one_hot, "'lumus.one_hot' %(ids must be int32, got float32%)", lumus.tensor({ 1 }), 5)
    checks.errors(lumus.one_hot, "'lumus.one_hot' %(num_classes must be a positive integer below 2^24, got 0%)", t, 0)
  end)

  it("normalize and cosine_similarity match the reference, eps keeping zero rows finite", function()
    for k, shape in ipairs(SHAPES) do
      local a, b = rand(shape, 50 + k), rand(shape, 60 + k)
      local ta, tb = lumus.tensor(a), lumus.tensor(b)
      for d = 1, #shape do
        checks.close(lumus.normalize(ta, { dim = d }), ref.normalize(a, { dim = d }), { rel = 4e-7, abs = 1e-7, what = "normalize dim " .. d })
        checks.close(lumus.cosine_similarity(ta, tb, { dim = d }), ref.cosine_similarity(a, b, { dim = d }), { rel = 1e-6, abs = 4e-7, what = "cosine_similarity dim " .. d })
      end
      checks.close(ta:normalize({ p = 1 }), ref.normalize(a, { p = 1 }), { rel = 4e-7, abs = 1e-7, what = "normalize p = 1" })
    end
    local z = { { 0, 0, 0 }, { 1, 2, 2 } }
    checks.close(lumus.normalize(lumus.tensor(z)), { { 0, 0, 0 }, { 1 / 3, 2 / 3, 2 / 3 } }, { rel = 2e-7, what = "zero row" })
    checks.close(lumus.cosine_similarity(lumus.tensor(z), lumus.tensor(z)), { 0, 1 }, { rel = 2e-7, what = "zero row cos" })
  end)

  it("logaddexp matches the reference, with infinities on both sides and broadcasting", function()
    local a = { 1, 100, -100, inf, -inf, inf, nan, 0, ref.f32(1e-30) }
    local b = { 2, 1, -100, inf, -inf, -inf, 1, 0, -50 }
    checks.close(lumus.logaddexp(lumus.tensor(a), lumus.tensor(b)), ref.logaddexp(a, b), { rel = 3 * 2 ^ -23, what = "logaddexp" })
    local m, r = rand({ 4, 5 }, 7, 20), rand({ 1, 5 }, 8, 20)
    checks.close(lumus.tensor(m):logaddexp(lumus.tensor(r)), ref.logaddexp(m, r), { rel = 3 * 2 ^ -23, abs = 1e-6, what = "broadcast" })
  end)

  it("addmm is beta input + alpha m1 m2 with input broadcast", function()
    local a, b, c = rand({ 7, 13 }, 1), rand({ 13, 5 }, 2), rand({ 5 }, 3)
    local p = ref.matmul(a, b)
    local want = ref.add(ref.map(c, function(v) return v * 0.5 end), ref.map(p, function(v) return v * 2 end))
    checks.close(lumus.addmm(lumus.tensor(c), lumus.tensor(a), lumus.tensor(b), { beta = 0.5, alpha = 2 }), want, { rel = 1e-5, abs = 1e-5, what = "addmm" })
    checks.close(lumus.tensor(c):addmm(lumus.tensor(a), lumus.tensor(b)), ref.add(c, p), { rel = 1e-5, abs = 1e-5, what = "addmm method" })
    local nanin = lumus.full({ 7, 5 }, nan)
    checks.close(lumus.addmm(nanin, lumus.tensor(a), lumus.tensor(b), { beta = 0 }), p, { rel = 1e-5, abs = 1e-5, what = "beta 0 ignores input" })
    checks.errors(lumus.addmm, "'lumus.addmm' %(input must broadcast to the product's shape 7x5%)", lumus.zeros({ 3, 7, 5 }), lumus.tensor(a), lumus.tensor(b))
    checks.errors(lumus.addmm, "'lumus.addmm' %(mat1 must be a matrix, got 1 dimensions%)", lumus.zeros({ 5 }), lumus.zeros({ 13 }), lumus.tensor(b))
  end)

  it("hardtanh, relu6, hardsigmoid, hardswish, mish and logsigmoid match the reference (functions and nn modules)", function()
    local xs = ref.map(rand({ 9, 11 }, 17), function(v) return ref.f32(v * 6) end)
    xs[1][1], xs[1][2], xs[1][3], xs[1][4], xs[1][5] = 0, -3, 3, 60, -60
    local x = lumus.tensor(xs)
    checks.close(x:hardtanh(), ref.hardtanh(xs), { what = "hardtanh" })
    checks.close(lumus.hardtanh(x, { min_val = -2, max_val = 0.5 }), ref.hardtanh(xs, -2, 0.5), { what = "hardtanh given" })
    checks.close(x:relu6(), ref.relu6(xs), { what = "relu6" })
    checks.close(x:hardsigmoid(), ref.hardsigmoid(xs), { rel = 2 ^ -23, what = "hardsigmoid" })
    checks.close(x:hardswish(), ref.hardswish(xs), { rel = 2 ^ -22, abs = 1e-45, what = "hardswish" })
    checks.close(x:mish(), ref.mish(xs), { rel = 8 * 2 ^ -23, abs = 1e-45, what = "mish" })
    checks.close(x:logsigmoid(), ref.logsigmoid(xs), { rel = 4 * 2 ^ -23, abs = 1e-45, what = "logsigmoid" })
    checks.close(nn.Hardtanh(-2, 0.5)(x), ref.hardtanh(xs, -2, 0.5), { what = "nn.Hardtanh" })
    checks.close(nn.ReLU6()(x), ref.relu6(xs), { what = "nn.ReLU6" })
    checks.close(nn.Hardsigmoid()(x), ref.hardsigmoid(xs), { rel = 2 ^ -23, what = "nn.Hardsigmoid" })
    checks.close(nn.Hardswish()(x), ref.hardswish(xs), { rel = 2 ^ -22, abs = 1e-45, what = "nn.Hardswish" })
    checks.close(nn.Mish()(x), ref.mish(xs), { rel = 8 * 2 ^ -23, abs = 1e-45, what = "nn.Mish" })
    checks.close(nn.LogSigmoid()(x), ref.logsigmoid(xs), { rel = 4 * 2 ^ -23, abs = 1e-45, what = "nn.LogSigmoid" })
    assert.are.equal("nn.Hardtanh(min_val=-2, max_val=0.5)", tostring(nn.Hardtanh(-2, 0.5)))
    checks.errors(lumus.hardtanh, "'lumus.hardtanh' %(min_val 2 is above max_val 1%)", x, { min_val = 2 })
  end)

  it("binary_cross_entropy and kl_div match the reference in every reduction", function()
    local g = ref.rng(5)
    local p, t, w = {}, {}, {}
    for i = 1, 37 do p[i], t[i], w[i] = ref.f32(g.uniform()), ref.f32(g.uniform() < 0.5 and 0 or 1), ref.f32(g.uniform()) end
    p[1], p[2], t[1], t[2] = 0, 1, 1, 0   -- log 0 clamped at -100: a loss of 100, not inf
    local tp, tt = lumus.tensor(p), lumus.tensor(t)
    for _, red in ipairs { "mean", "sum", "none" } do
      checks.close(lumus.binary_cross_entropy(tp, tt, { reduction = red }), ref.binary_cross_entropy(p, t, { reduction = red }), { rel = 1e-5, abs = 1e-6, what = "bce " .. red })
    end
    checks.close(lumus.binary_cross_entropy(tp, tt, { weight = lumus.tensor(w) }), ref.binary_cross_entropy(p, t, { weight = w }), { rel = 1e-5, what = "bce weight" })
    local logits, q = rand({ 6, 9 }, 21), rand({ 6, 9 }, 22)
    local lp = lumus.log_softmax(lumus.tensor(logits), { dim = 2 })
    local tq = lumus.softmax(lumus.tensor(q), { dim = 2 })
    local lps, tqs = lp:to_table(), tq:to_table()
    tqs[1][1] = 0
    tq = lumus.tensor(tqs)
    for _, red in ipairs { "mean", "sum", "none", "batchmean" } do
      checks.close(lumus.kl_div(lp, tq, { reduction = red }), ref.kl_div(lps, tqs, { reduction = red }), { rel = 1e-5, abs = 1e-6, what = "kl_div " .. red })
    end
    local ltq = lumus.log_softmax(lumus.tensor(q), { dim = 2 })
    checks.close(lumus.kl_div(lp, ltq, { log_target = true, reduction = "sum" }), ref.kl_div(lps, ltq:to_table(), { log_target = true, reduction = "sum" }), { rel = 1e-5, what = "kl_div log_target" })
    checks.errors(lumus.binary_cross_entropy, "'lumus.binary_cross_entropy' %(input must hold probabilities in %[0, 1%], got 1.5%)", lumus.tensor({ 0.5, 1.5 }), lumus.tensor({ 1, 0 }))
    checks.errors(lumus.kl_div, "'lumus.kl_div' %(reduction must be \"mean\", \"batchmean\", \"sum\" or \"none\", got avg%)", lp, tq, { reduction = "avg" })
    checks.errors(lumus.kl_div, "'lumus.kl_div' %(target must have input's shape 6x9, got 9x6%)", lp, lumus.zeros({ 9, 6 }))
  end)

  it("raise naming the function for bad arguments", function()
    local x = lumus.tensor({ 1, 2 })
    checks.errors(lumus.isnan, "'lumus.isnan' %(tensor must be a tensor, got number%)", 1)
    checks.errors(lumus.nan_to_num, "'lumus.nan_to_num' %(unknown option 'inf'", x, { inf = 1 })
    checks.errors(lumus.nan_to_num, "'lumus.nan_to_num' %(expects a float tensor, got int32%)", lumus.tensor({ 1 }, { dtype = "int32" }))
    checks.errors(lumus.logsumexp, "'lumus.logsumexp' %(unknown option 'axis'", x, { axis = 1 })
    checks.errors(lumus.normalize, "'lumus.normalize' %(eps must be a number, got a%)", x, { eps = "a" })
    checks.errors(lumus.logaddexp, "'lumus.logaddexp' %(tensor must be a tensor, got nil%)", 1, nil)
    checks.errors(lumus.logaddexp, "bad argument #1 to 'lumus.logaddexp' %(tensor must be a tensor, got nil%)")
    checks.errors(lumus.logaddexp, "'lumus.logaddexp' %(expects a tensor operand, got two numbers%)", 1, 2)
  end)
end)
