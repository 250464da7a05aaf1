-- Losses (lua/lumus/loss.lua, src/ops/loss.c, shaders/cross_entropy.comp): values against
-- the float64 reference (ref.cross_entropy, ref.mse_loss,
-- ref.binary_cross_entropy_with_logits, ref.l1_loss, smooth_l1_loss, huber_loss,
-- nll_loss) on a seeded sweep of shapes, the rules for
-- ignored and out-of-range targets, stability at extreme logits, errors by message.
-- (Gradients: spec/grad_check_spec.lua.)
--
-- Tolerances: a row's loss is logsumexp(x) - x[t] from float32 exp/log and a float32
-- sum over C: |got - want| <= 1e-6 (|lse| + |x[t]|) + 2e-7 C^0.5... bounded here by
-- 2e-6 max(1, |want|) + 1e-6 max|x| (mixed + abs below); mean and sum add a float32 sum
-- over N (mixed 1e-5 for N <= 300).
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local function ids(list) return lumus.tensor(list, { dtype = "int32" }) end

local function logits_and_targets(rng, n, c, scale)
  local x = ref.random_table({ n, c }, function() return ref.f32(rng.normal() * scale) end)
  local t = {}
  for i = 1, n do t[i] = 1 + math.floor(rng.uniform() * c) end
  return x, t
end

local function max_abs(x)
  local m = 0
  for _, v in ipairs(ref.flatten(x)) do m = math.max(m, math.abs(v)) end
  return m
end

describe("lumus.cross_entropy", function()
  local rng = ref.rng(4242)
  it("matches the reference for every reduction over a sweep of shapes", function()
    for _, nc in ipairs { { 1, 1 }, { 1, 5 }, { 3, 7 }, { 8, 2 }, { 5, 257 }, { 2, 1000 }, { 300, 3 }, { 17, 64 } } do
      local n, c = nc[1], nc[2]
      local x, t = logits_and_targets(rng, n, c, 3)
      local xt = lumus.tensor(x)
      local tol = { mixed = 1e-5, abs = 1e-6 * max_abs(x) }
      for _, r in ipairs { "mean", "sum", "none" } do
        tol.what = ("cross_entropy %dx%d %s"):format(n, c, r)
        checks.close(lumus.cross_entropy(xt, ids(t), { reduction = r }), ref.cross_entropy(x, t, { reduction = r }), tol)
      end
    end
  end)

  it("skips ignore_index rows (mean over the rest; all ignored: NaN) and gives NaN for out-of-range targets", function()
    local x = { { 1, 2, 3 }, { 0, 0, 0 }, { 5, 1, -1 }, { 0.5, -2, 1 } }
    local xt = lumus.tensor(x)
    local t = { 3, -100, 1, 2 }
    checks.close(lumus.cross_entropy(xt, ids(t)), ref.cross_entropy(x, t), { mixed = 1e-6, what = "ignored row" })
    local none = lumus.cross_entropy(xt, ids(t), { reduction = "none" }):to_table()
    assert.are.equal(0, none[2])
    local t2 = { 2, 2, 2, 3 }
    checks.close(lumus.cross_entropy(xt, ids(t2), { ignore_index = 2 }), ref.cross_entropy(x, t2, { ignore_index = 2 }),
      { mixed = 1e-6, what = "ignore_index = 2" })
    local all = lumus.cross_entropy(xt, ids({ -100, -100, -100, -100 })):to_table()[1]
    assert.is_true(all ~= all, "a mean over no rows is NaN")
    assert.are.equal(0, lumus.cross_entropy(xt, ids({ -100, -100, -100, -100 }), { reduction = "sum" }):to_table()[1])
    for _, bad in ipairs { 0, 4, -1, 2 ^ 31 - 1 } do
      local r = lumus.cross_entropy(xt, ids({ 1, bad, 1, 1 }), { reduction = "none" }):to_table()
      assert.is_true(r[2] ~= r[2], "target " .. bad .. " gives NaN")
      assert.is_true(r[1] == r[1])
      local m = lumus.cross_entropy(xt, ids({ 1, bad, 1, 1 })):to_table()[1]
      assert.is_true(m ~= m)
    end
    -- its gradient row is NaN, the others finite
    local xg = lumus.tensor(x):requires_grad(true)
    lumus.cross_entropy(xg, ids({ 1, 0, 1, -100 })):backward()
    local g = xg:grad():to_table()
    assert.is_true(g[2][1] ~= g[2][1])
    assert.are.same({ 0, 0, 0 }, g[4])
    assert.is_true(g[1][1] == g[1][1] and g[3][2] == g[3][2])
  end)

  it("stays finite and exact at extreme logits", function()
    local x = { { 1e4, -1e4, 0 }, { 80, 80, 80 }, { -1e4, -1e4, 3 }, { 1e30, 0, -1e30 } }
    local t = { 2, 1, 3, 1 }
    local got = lumus.cross_entropy(lumus.tensor(x), ids(t), { reduction = "none" })
    -- lse - x[t] rounds like x[t]: 2^-23 |x[t]| on top
    checks.close(got, ref.cross_entropy(x, t, { reduction = "none" }),
      { mixed = 1e-6, abs = { 2 ^ -23 * 1e4, 2 ^ -23 * 80, 2 ^ -23 * 3, 2 ^ -23 * 1e30 }, what = "extreme logits" })
    -- NaN in a row: that row's loss is NaN (PyTorch)
    local r = lumus.cross_entropy(lumus.tensor({ { 0 / 0, 1 }, { 1, 2 } }), ids({ 2, 1 }), { reduction = "none" }):to_table()
    assert.is_true(r[1] ~= r[1] and r[2] == r[2])
  end)

  it("returns the same bits on every run", function()
    local x = lumus.randn({ 64, 333 })
    local t = ids((function() local l = {} for i = 1, 64 do l[i] = 1 + (i * 7) % 333 end return l end)())
    local a = lumus.cross_entropy(x, t):to_bytes()
    for _ = 1, 3 do assert.are.equal(a, lumus.cross_entropy(x, t):to_bytes()) end
  end)

  it("raises naming the argument", function()
    local x = lumus.zeros({ 4, 3 })
    checks.errors(lumus.cross_entropy, "#1 to 'lumus.cross_entropy' %(logits must be a matrix %[N, C%], got shape 12",
      lumus.zeros({ 12 }), ids({ 1 }))
    checks.errors(lumus.cross_entropy, "#1 to 'lumus.cross_entropy' %(logits must be a tensor, got number", 1, ids({ 1 }))
    checks.errors(lumus.cross_entropy, "#2 to 'lumus.cross_entropy' %(target must be int32, got float32", x, lumus.ones({ 4 }))
    checks.errors(lumus.cross_entropy, "#2 to 'lumus.cross_entropy' %(target must have shape %[4%] %(one 1%-based class id per row of logits%), got 3",
      x, ids({ 1, 1, 1 }))
    checks.errors(lumus.cross_entropy, "#3 to 'lumus.cross_entropy' %(unknown option 'weight'", x, ids({ 1, 1, 1, 1 }), { weight = x })
    checks.errors(lumus.cross_entropy, "reduction must be \"mean\", \"sum\" or \"none\", got avg", x, ids({ 1, 1, 1, 1 }), { reduction = "avg" })
    checks.errors(lumus.cross_entropy, "ignore_index must be an int32 integer, got 1.5", x, ids({ 1, 1, 1, 1 }), { ignore_index = 1.5 })
    checks.errors(lumus.cross_entropy_forward, "#2 to 'lumus.cross_entropy_forward' %(target must have shape %[4%] %(the rows of logits%), got 1",
      x, ids({ 1 }))
    checks.errors(lumus.cross_entropy_backward, "#4 to 'lumus.cross_entropy_backward' %(logsumexp must have shape %[4%]",
      lumus.ones({ 4 }), x, ids({ 1, 1, 1, 1 }), lumus.ones({ 3 }))
  end)
end)

describe("lumus.mse_loss", function()
  local rng = ref.rng(77)
  it("matches the reference for every reduction", function()
    for _, shape in ipairs { { 1 }, { 7 }, { 3, 4 }, { 2, 3, 5 }, { 129, 3 } } do
      local a = ref.random_table(shape, function() return ref.f32(rng.normal()) end)
      local b = ref.random_table(shape, function() return ref.f32(rng.normal()) end)
      for _, r in ipairs { "mean", "sum", "none" } do
        checks.close(lumus.mse_loss(lumus.tensor(a), lumus.tensor(b), { reduction = r }), ref.mse_loss(a, b, { reduction = r }),
          { mixed = 1e-5, what = "mse_loss " .. table.concat(shape, "x") .. " " .. r })
      end
    end
  end)
  it("raises naming the argument", function()
    checks.errors(lumus.mse_loss, "#2 to 'lumus.mse_loss' %(target must have input's shape 3x4, got 4",
      lumus.zeros({ 3, 4 }), lumus.zeros({ 4 }))
    checks.errors(lumus.mse_loss, "#1 to 'lumus.mse_loss' %(input must be float32, got int32",
      lumus.zeros({ 3 }, { dtype = "int32" }), lumus.zeros({ 3 }))
    checks.errors(lumus.mse_loss, "#3 to 'lumus.mse_loss' %(options must be a table, got string", lumus.zeros({ 3 }), lumus.zeros({ 3 }), "sum")
  end)
end)

describe("lumus.l1_loss, smooth_l1_loss, huber_loss", function()
  local rng = ref.rng(78)
  local CASES = {
    { "l1_loss", nil }, { "smooth_l1_loss", { beta = 1 } }, { "smooth_l1_loss", { beta = 0.3 } },
    { "smooth_l1_loss", { beta = 0 } }, { "huber_loss", { delta = 1 } }, { "huber_loss", { delta = 2.5 } },
  }
  it("match the reference for every reduction and parameter", function()
    for _, shape in ipairs { { 1 }, { 7 }, { 3, 4 }, { 2, 3, 5 }, { 129, 3 } } do
      local a = ref.random_table(shape, function() return ref.f32(rng.normal() * 2) end)
      local b = ref.random_table(shape, function() return ref.f32(rng.normal() * 2) end)
      for _, c in ipairs(CASES) do
        for _, r in ipairs { "mean", "sum", "none" } do
          local o = { reduction = r }
          for k, v in pairs(c[2] or {}) do o[k] = v end
          checks.close(lumus[c[1]](lumus.tensor(a), lumus.tensor(b), o), ref[c[1]](a, b, o),
            { mixed = 1e-5, what = ("%s %s %s"):format(c[1], table.concat(shape, "x"), r) })
        end
      end
    end
  end)
  it("raise naming the argument", function()
    checks.errors(lumus.l1_loss, "#2 to 'lumus.l1_loss' %(target must have input's shape 3x4, got 4",
      lumus.zeros({ 3, 4 }), lumus.zeros({ 4 }))
    checks.errors(lumus.huber_loss, "#3 to 'lumus.huber_loss' %(unknown option 'beta'", lumus.zeros({ 3 }), lumus.zeros({ 3 }), { beta = 1 })
    checks.errors(lumus.smooth_l1_loss, "#3 to 'lumus.smooth_l1_loss' %(beta must be a finite number >= 0, got %-1",
      lumus.zeros({ 3 }), lumus.zeros({ 3 }), { beta = -1 })
    checks.errors(lumus.l1_loss, "#3 to 'lumus.l1_loss' %(reduction must be", lumus.zeros({ 3 }), lumus.zeros({ 3 }), { reduction = "avg" })
  end)
end)

describe("lumus.nll_loss", function()
  local rng = ref.rng(79)
  it("matches the reference with ignored and out-of-range targets, every reduction", function()
    for _, nc in ipairs { { 1, 1 }, { 5, 3 }, { 64, 10 }, { 7, 300 } } do
      local x = ref.random_table(nc, function() return ref.f32(-math.abs(rng.normal()) * 3) end)
      local t = {}
      for i = 1, nc[1] do t[i] = 1 + math.floor(rng.uniform() * nc[2]) end
      if nc[1] > 2 then t[2] = -100 end
      for _, r in ipairs { "mean", "sum", "none" } do
        checks.close(lumus.nll_loss(lumus.tensor(x), ids(t), { reduction = r }), ref.nll_loss(x, t, { reduction = r }),
          { mixed = 1e-6, what = ("nll_loss %dx%d %s"):format(nc[1], nc[2], r) })
      end
      if nc[1] > 2 then
        t[3] = 7
        checks.close(lumus.nll_loss(lumus.tensor(x), ids(t), { reduction = "none", ignore_index = 7 }),
          ref.nll_loss(x, t, { reduction = "none", ignore_index = 7 }), { mixed = 1e-6, what = "nll_loss ignore_index 7" })
      end
    end
    local bad = lumus.nll_loss(lumus.tensor({ { -1, -2 }, { -3, -4 } }), ids({ 0, 3 }), { reduction = "none" }):to_table()
    assert.is_true(bad[1] ~= bad[1] and bad[2] ~= bad[2], "targets outside 1..C give NaN")
    -- nll_loss of log_softmax is cross_entropy
    local x = ref.random_table({ 6, 5 }, function() return ref.f32(rng.normal() * 2) end)
    local t = { 1, 5, 2, 3, 4, 4 }
    checks.close(lumus.nll_loss(lumus.log_softmax(lumus.tensor(x)), ids(t)), lumus.cross_entropy(lumus.tensor(x), ids(t)):to_table(),
      { mixed = 1e-6, what = "nll_loss(log_softmax) = cross_entropy" })
  end)
  it("raises naming the argument", function()
    checks.errors(lumus.nll_loss, "#1 to 'lumus.nll_loss' %(log_probs must be a matrix %[N, C%], got shape 3",
      lumus.zeros({ 3 }), ids({ 1, 1, 1 }))
    checks.errors(lumus.nll_loss, "#2 to 'lumus.nll_loss' %(target must have shape %[2%]", lumus.zeros({ 2, 3 }), ids({ 1 }))
    checks.errors(lumus.nll_loss, "#2 to 'lumus.nll_loss' %(target must be int32, got float32", lumus.zeros({ 2, 3 }), lumus.zeros({ 2 }))
    checks.errors(lumus.nll_loss, "#3 to 'lumus.nll_loss' %(ignore_index must be an int32 integer, got 0.5",
      lumus.zeros({ 2, 3 }), ids({ 1, 1 }), { ignore_index = 0.5 })
  end)
end)

describe("lumus.binary_cross_entropy_with_logits", function()
  local rng = ref.rng(78)
  it("matches the reference, with pos_weight, at any logit", function()
    for _, shape in ipairs { { 1 }, { 9 }, { 3, 4 }, { 2, 3, 5 } } do
      local x = ref.random_table(shape, function() return ref.f32(rng.normal() * 5) end)
      local t = ref.random_table(shape, function() return ref.f32(rng.uniform()) end)
      local last = shape[#shape]
      local pw = ref.random_table({ last }, function() return ref.f32(rng.uniform() * 3) end)
      for _, r in ipairs { "mean", "sum", "none" } do
        checks.close(lumus.binary_cross_entropy_with_logits(lumus.tensor(x), lumus.tensor(t), { reduction = r }),
          ref.binary_cross_entropy_with_logits(x, t, { reduction = r }), { mixed = 1e-5, what = "bce " .. r })
        checks.close(lumus.binary_cross_entropy_with_logits(lumus.tensor(x), lumus.tensor(t),
            { reduction = r, pos_weight = lumus.tensor(pw) }),
          ref.binary_cross_entropy_with_logits(x, t, { reduction = r, pos_weight = pw }), { mixed = 1e-5, what = "bce pos_weight " .. r })
      end
    end
    -- extreme logits: finite, and tiny losses keep their relative accuracy (log1p)
    local x = { -100, -30, -17, -1e-6, 0, 1e-6, 17, 30, 100, 1e30, -1e30 }
    local t = { 0, 0, 0, 1, 0.5, 0, 1, 1, 1, 1, 0 }
    local want = ref.binary_cross_entropy_with_logits(x, t, { reduction = "none" })
    checks.close(lumus.binary_cross_entropy_with_logits(lumus.tensor(x), lumus.tensor(t), { reduction = "none" }), want,
      { rel = 1e-5, abs = 4 * 2 ^ -149, what = "bce extreme logits" })   -- subnormal results keep few bits
  end)
  it("raises naming the argument", function()
    local x = lumus.zeros({ 3, 4 })
    checks.errors(lumus.binary_cross_entropy_with_logits,
      "#3 to 'lumus.binary_cross_entropy_with_logits' %(pos_weight must have shape %[4%] %(the last dimension of input%), got 3",
      x, x, { pos_weight = lumus.ones({ 3 }) })
    checks.errors(lumus.binary_cross_entropy_with_logits, "pos_weight must be a tensor, got number", x, x, { pos_weight = 2 })
    checks.errors(lumus.binary_cross_entropy_with_logits, "#2 to 'lumus.binary_cross_entropy_with_logits' %(target must have input's shape",
      x, lumus.zeros({ 4, 3 }))
  end)
end)
