-- Autograd (lua/lumus/autograd.lua): every differentiable op's gradient against central
-- finite differences, the tape's rules (accumulation, no_grad, detach, freeing), its
-- errors by message, and memory by counts.
--
-- Gradient checks. For an op F and random inputs (float32 values), upstream c (random,
-- the output's shape) and loss L = sum(c * F(inputs)): the GPU's gradients from
-- F(...):backward(c) against (L(x + h e_i) - L(x - h e_i)) / 2h, L computed by the
-- float64 reference (lumus.reference) with h = 1e-4: its truncation error is O(h^2 f''')
-- ~1e-8 and its rounding ~1e-12, so the difference is the GPU's float32 arithmetic.
-- Tolerance: |grad - fd| <= 1e-5 * max(1, |fd|) per element (GRAD_TOL; lavapipe is within 1e-6). Inputs of relu
-- and abs stay at least 0.1 from their kink.
-- Views move data without arithmetic, so their reference forward is the view itself
-- applied to the tensor (exact), and the inputs are multiples of 1/8 so that h = 1 is
-- exact too (a view is linear: its central difference is exact for any h).
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local shell = dofile("spec/support/shell.lua")

-- Wrapping starts at the first requires_grad(true) (lua/lumus/autograd.lua): do it now,
-- before the specs below take lumus.add and friends as values.
lumus.ones({ 1 }):requires_grad(true)

local GRAD_TOL = 1e-5
local H = 1e-4

local function rand_table(shape, rng, lo)
  return ref.random_table(shape, function()
    local v = rng.normal()
    if lo and math.abs(v) < lo then v = v < 0 and v - lo or v + lo end
    return v
  end)
end

-- Checks the gradients of every tensor input of gpu_f(...) against finite differences
-- of ref_f(...) (both take the same arguments: nested tables for ref_f, tensors made from
-- them for gpu_f; a number stays a number). `h` overrides H.
local function gradcheck(what, gpu_f, ref_f, inputs, opts)
  opts = opts or {}
  local h = opts.h or H
  local rng = ref.rng(#what + 7)
  local tensors = {}
  for i, v in ipairs(inputs) do
    tensors[i] = type(v) == "table" and lumus.tensor(v):requires_grad(true) or v
  end
  local y = gpu_f(compat.unpack(tensors, 1, #inputs))
  assert.is_true(y:requires_grad(), what .. ": result requires grad")
  local c = rand_table(y:shape(), rng)
  local fc = ref.flatten(c)
  y:backward(lumus.tensor(c))
  local function loss(args)
    local out = ref.flatten(ref_f(compat.unpack(args, 1, #inputs)))
    local s = 0
    for i = 1, #out do s = s + fc[i] * out[i] end
    return s
  end
  for i, v in ipairs(inputs) do
    if type(v) == "table" then
      local shape = ref.shape(v)
      local flat = ref.flatten(v)
      local fd = {}
      for k = 1, #flat do
        local plus, minus = { compat.unpack(flat) }, { compat.unpack(flat) }
        plus[k], minus[k] = flat[k] + h, flat[k] - h
        local a1, a2 = { compat.unpack(inputs, 1, #inputs) }, { compat.unpack(inputs, 1, #inputs) }
        a1[i], a2[i] = ref.nest(plus, shape), ref.nest(minus, shape)
        fd[k] = (loss(a1) - loss(a2)) / (2 * h)
      end
      local g = tensors[i]:grad()
      assert.is_not_nil(g, what .. ": input " .. i .. " has no grad")
      assert.are.same(shape, g:shape())
      checks.close(g, fd, { mixed = opts.tol or GRAD_TOL, what = what .. " d/d input " .. i })
    end
  end
end

-- The float64 forward of a view: the view of a tensor made from the table (exact).
local function view_ref(f)
  return function(t, ...) return f(lumus.tensor(t), ...):to_table() end
end
local function eighths(shape, rng)
  return ref.random_table(shape, function() return math.floor(rng.normal() * 16) / 8 end)
end

describe("autograd gradients", function()
  local rng = ref.rng(2026)
  local A, B = rand_table({ 3, 4 }, rng), rand_table({ 3, 4 }, rng)
  local V = rand_table({ 4 }, rng)
  local POS = ref.map(rand_table({ 3, 4 }, rng), function(v) return math.abs(v) + 0.5 end)
  local AWAY = rand_table({ 3, 4 }, rng, 0.1)   -- |v| >= 0.1

  it("of add, sub, mul, div with tensors, numbers and broadcast operands", function()
    gradcheck("add", lumus.add, ref.add, { A, B })
    gradcheck("sub", lumus.sub, ref.sub, { A, B })
    gradcheck("mul", lumus.mul, ref.mul, { A, B })
    gradcheck("div", lumus.div, ref.div, { A, POS })
    gradcheck("add [3,4] + [4]", lumus.add, ref.add, { A, V })
    gradcheck("mul [4] * [3,4]", lumus.mul, ref.mul, { V, B })
    gradcheck("div [3,4] / [4]", lumus.div, ref.div, { A, ref.map(V, function(v) return math.abs(v) + 0.5 end) })
    gradcheck("sub number - t", function(t) return lumus.sub(2, t) end, function(t) return ref.sub(2, t) end, { A })
    gradcheck("div number / t", function(t) return lumus.div(3, t) end, function(t) return ref.div(3, t) end, { POS })
    gradcheck("operators", function(a, b) return (a * b - a) / 2 + (-b) end,
      function(a, b) return ref.add(ref.div(ref.sub(ref.mul(a, b), a), 2), ref.neg(b)) end, { A, B })
  end)

  it("of scale, neg, relu, abs, erf, gelu (both forms)", function()
    gradcheck("scale", function(t) return lumus.scale(t, -1.5) end, function(t) return ref.scale(t, -1.5) end, { A })
    gradcheck("neg", lumus.neg, ref.neg, { A })
    gradcheck("relu", lumus.relu, ref.relu, { AWAY })
    gradcheck("abs", lumus.abs, ref.abs, { AWAY })
    gradcheck("erf", lumus.erf, function(t) return ref.map(t, ref.erf) end, { A })
    gradcheck("gelu", lumus.gelu, function(t) return ref.gelu(t) end, { A })
    gradcheck("gelu_erf", lumus.gelu_erf, function(t) return ref.gelu(t) end, { A })
    gradcheck("gelu tanh", function(t) return t:gelu({ approximate = "tanh" }) end,
      function(t) return ref.gelu(t, "tanh") end, { A })
    gradcheck("gelu_tanh", lumus.gelu_tanh, function(t) return ref.gelu(t, "tanh") end, { A })
  end)

  it("of softmax, sum, mean (with and without keepdim)", function()
    gradcheck("softmax", lumus.softmax, ref.softmax, { A })
    gradcheck("softmax 1-D", lumus.softmax, ref.softmax, { V })
    gradcheck("sum", lumus.sum, ref.sum, { A })
    gradcheck("sum 1-D", lumus.sum, function(t) return { ref.sum(t) } end, { V })
    gradcheck("mean", lumus.mean, ref.mean, { A })
    gradcheck("sum keepdim", function(t) return t:sum({ dim = -1, keepdim = true }) end,
      function(t) return ref.sum(t, { dim = -1 }) end, { A })
    gradcheck("sum dim 1", function(t) return t:sum({ dim = 1 }) end, function(t) return ref.sum(t, { dim = 1 }) end, { A })
    gradcheck("sum dim 2", function(t) return t:sum({ dim = 2 }) end, function(t) return ref.sum(t, { dim = 2 }) end, { A })
    gradcheck("mean dim -1 keepdim", function(t) return t:mean({ dim = -1, keepdim = true }) end,
      function(t) return ref.mean(t, { dim = -1 }) end, { A })
    gradcheck("softmax dim -1", function(t) return t:softmax({ dim = -1 }) end, ref.softmax, { A })
  end)

  it("of matmul (plain, transpose_b, batched, 1-D) and linear", function()
    local W = rand_table({ 4, 5 }, rng)
    local WT = rand_table({ 5, 4 }, rng)
    gradcheck("matmul", lumus.matmul, ref.matmul, { A, W })
    gradcheck("matmul transpose_b", function(a, b) return lumus.matmul(a, b, { transpose_b = true }) end,
      function(a, b) return ref.matmul(a, b, { transpose_b = true }) end, { A, WT })
    local A3, B3 = rand_table({ 2, 3, 4 }, rng), rand_table({ 2, 4, 2 }, rng)
    gradcheck("matmul batched", lumus.matmul, ref.matmul, { A3, B3 })
    gradcheck("matmul [2,3,4] x [4,5]", lumus.matmul, ref.matmul, { A3, W })
    gradcheck("matmul 1-D", lumus.matmul, ref.matmul, { V, W })
    local bias = rand_table({ 5 }, rng)
    gradcheck("linear", lumus.linear, ref.linear, { A, WT, bias })
    gradcheck("linear without bias", function(x, w) return lumus.linear(x, w) end,
      function(x, w) return ref.linear(x, w) end, { A, WT })
  end)

  it("of layer_norm_forward (with weight and bias, bias only, none)", function()
    local w = ref.map(rand_table({ 4 }, rng), function(v) return 1 + 0.3 * v end)
    local b = rand_table({ 4 }, rng)
    gradcheck("layer_norm", function(x, ww, bb) return (lumus.layer_norm_forward(x, ww, bb)) end,
      function(x, ww, bb) return (ref.layer_norm_forward(x, ww, bb, 1e-5)) end, { A, w, b })
    gradcheck("layer_norm bias only", function(x, bb) return (lumus.layer_norm_forward(x, nil, bb)) end,
      function(x, bb) return (ref.layer_norm_forward(x, nil, bb, 1e-5)) end, { A, b })
    gradcheck("layer_norm 3-D, no affine", function(x) return (x:layer_norm_forward()) end,
      function(x) return (ref.layer_norm_forward(x, nil, nil, 1e-5)) end, { rand_table({ 2, 2, 6 }, rng) })
  end)

  it("of views and copies", function()
    local X = eighths({ 3, 4 }, rng)
    local X3 = eighths({ 2, 3, 4 }, rng)
    local cases = {
      { "transpose", function(t) return t:transpose(1, 2) end, X },
      { "permute", function(t) return t:permute({ 3, 1, 2 }) end, X3 },
      { "narrow", function(t) return t:narrow(2, 2, 2) end, X },
      { "select", function(t) return t:select(1, 2) end, X3 },
      { "reshape", function(t) return t:reshape({ 4, 3 }) end, X },
      { "view", function(t) return t:view({ 2, 6 }) end, X },
      { "unsqueeze", function(t) return t:unsqueeze(2) end, X },
      { "squeeze", function(t) return t:unsqueeze(1):squeeze(1) end, X },
      { "expand", function(t) return t:reshape({ 3, 1, 4 }):expand({ 2, 3, 5, 4 }) end, X },
      { "contiguous", function(t) return t:transpose(1, 2):contiguous() end, X },
      { "copy", function(t) return lumus.copy(t:transpose(1, 2)) end, X },
      { "transpose then matmul", function(t) return t:transpose(1, 2):matmul(t) end, X },
    }
    for _, c in ipairs(cases) do
      if c[1]:find("matmul") then
        local function transpose2(t)   -- in float64 (a float32 tensor would round x + h)
          local r = {}
          for j = 1, #t[1] do r[j] = {} for i = 1, #t do r[j][i] = t[i][j] end end
          return r
        end
        gradcheck(c[1], c[2], function(t) return ref.matmul(transpose2(t), t) end, { c[3] })
      else
        gradcheck(c[1], c[2], view_ref(c[2]), { c[3] }, { h = 1, tol = 1e-6 })   -- exact but for expand's sums
      end
    end
  end)

  it("through a graph that reuses a tensor (gradients add up)", function()
    -- y = x * x + relu(x) * 2 - mean(x) expanded: x feeds four nodes
    local X = rand_table({ 2, 5 }, rng, 0.1)
    gradcheck("reuse", function(x)
      local m = x:mean({ dim = -1, keepdim = true }):expand({ 2, 5 })
      return x * x + lumus.relu(x) * 2 - m
    end, function(x)
      local m = ref.mean(x, { dim = -1 })
      local sub = {}
      for i = 1, 2 do sub[i] = {} for j = 1, 5 do sub[i][j] = m[i] end end
      return ref.sub(ref.add(ref.mul(x, x), ref.scale(ref.relu(x), 2)), sub)
    end, { X })
  end)

  it("of the pre-norm MLP block (LayerNorm, Linear, tanh GELU, Linear, residual)", function()
    local D, F = 4, 6
    local X = rand_table({ 3, D }, rng)
    local W1, B1 = ref.map(rand_table({ F, D }, rng), function(v) return v / 2 end), rand_table({ F }, rng)
    local W2, B2 = ref.map(rand_table({ D, F }, rng), function(v) return v / 2 end), rand_table({ D }, rng)
    local lw, lb = ref.map(rand_table({ D }, rng), function(v) return 1 + v / 4 end), rand_table({ D }, rng)
    gradcheck("mlp", function(x, w1, b1, w2, b2, g, b)
      local h = lumus.layer_norm_forward(x, g, b)
      return x + lumus.linear(lumus.gelu(lumus.linear(h, w1, b1), { approximate = "tanh" }), w2, b2)
    end, function(x, w1, b1, w2, b2, g, b)
      local h = ref.layer_norm_forward(x, g, b, 1e-5)
      return ref.add(x, ref.linear(ref.gelu(ref.linear(h, w1, b1), "tanh"), w2, b2))
    end, { X, W1, B1, W2, B2, lw, lb })
  end)
end)

describe("autograd tape", function()
  it("accumulates gradients until zero_grad, and marks only leaves", function()
    local x = lumus.tensor({ 1, 2, 3 }):requires_grad(true)
    assert.is_true(x:requires_grad())
    for _ = 1, 2 do (x * x):sum():backward() end
    checks.close(x:grad(), { 4, 8, 12 }, { what = "2 * 2x" })
    local y = (x * 3):sum()
    y:backward(nil, { retain_graph = true })
    y:backward()
    checks.close(x:grad(), { 10, 14, 18 }, { what = "plus 3 + 3" })
    x:zero_grad()
    assert.is_nil(x:grad())
    x:requires_grad(false)
    assert.is_false(x:requires_grad())
    assert.is_false((x * 2):requires_grad())
  end)

  it("records nothing inside no_grad, and detach leaves the graph", function()
    local x = lumus.tensor({ 1, 2 }):requires_grad(true)
    local y, n = lumus.no_grad(function(a) return a * 2, 7 end, x)
    assert.are.equal(7, n)
    assert.is_false(y:requires_grad())
    assert.is_true(lumus.is_grad_enabled())
    assert.is_false(lumus.no_grad(lumus.is_grad_enabled))
    local d = x:detach()
    assert.is_false(d:requires_grad())
    assert.are.same({ 1, 2 }, d:to_table())
    assert.is_false((d * x):sum():requires_grad() == false)
    -- an error inside no_grad propagates and recording resumes
    assert.has_error(function() lumus.no_grad(function() error("inner") end) end)
    assert.is_true(lumus.is_grad_enabled())
    -- a non-scalar output with an explicit grad
    local z = x * x
    z:backward(lumus.tensor({ 1, 10 }))
    checks.close(x:grad(), { 2, 40 }, { what = "grad given" })
  end)

  it("raises clear errors", function()
    local x = lumus.tensor({ 1, 2, 3 }):requires_grad(true)
    local y = x * x
    checks.errors(y.backward, "backward: grad must be given for a non%-scalar output", y)
    checks.errors(y.backward, "backward: grad has shape 2, the output 3", y, lumus.ones({ 2 }))
    local s = y:sum()
    s:backward()
    checks.errors(s.backward, "backward: the graph has been freed", s)
    checks.errors(lumus.ones({ 1 }).backward, "backward: the tensor does not require grad", lumus.ones({ 1 }))
    checks.errors(y.backward, "unknown option 'retain'", y, lumus.ones({ 3 }), { retain = true })
    -- an in-place change of a saved tensor (here under no_grad, which allows the write)
    local a = lumus.tensor({ 1, 2 }):requires_grad(true)
    local b = lumus.tensor({ 3, 4 })
    local p = (a * b):sum()
    lumus.no_grad(function() b:fill(0) end)
    checks.errors(p.backward, "backward: a tensor saved by mul %(b%) has been modified in place", p)
    -- in-place writes to tracked tensors while recording
    checks.errors(lumus.fill, "fill: t requires grad; in%-place writes are not recorded", a, 1)
    checks.errors(function() return lumus.ones({ 2 }):copy(a) end, "copy: src requires grad", nil)
    checks.errors(lumus.add, "add: option out cannot be used on tensors that require grad", a, a, { out = lumus.ones({ 2 }) })
    checks.errors(y.requires_grad, "requires_grad: only leaf tensors can change it", y, true)
    checks.errors(x.requires_grad, "requires_grad: bad argument #2 %(boolean expected, got number%)", x, 1)
    checks.errors(lumus.no_grad, "no_grad: bad argument #1 %(function expected", 5)
    -- an op with no registered backward refuses tracked tensors instead of dropping them
    local m1, r1 = lumus.no_grad(function() local _, m, r = lumus.layer_norm_forward(lumus.ones({ 2, 3 })); return m, r end)
    checks.errors(lumus.layer_norm_backward, "layer_norm_backward: no backward is registered for layer_norm_backward",
      x:reshape({ 1, 3 }), lumus.ones({ 1, 3 }), m1:narrow(1, 1, 1), r1:narrow(1, 1, 1))
    assert.are.same({ 1, 3 }, lumus.no_grad(lumus.layer_norm_backward, x:reshape({ 1, 3 }), lumus.ones({ 1, 3 }),
      m1:narrow(1, 1, 1), r1:narrow(1, 1, 1)):shape())
    local freed = lumus.tensor({ 1, 2 }):requires_grad(true)
    local q = (freed * freed):sum()
    lumus.no_grad(function() freed:free() end)
    checks.errors(q.backward, "backward: a tensor saved by mul %([ab]%) has been freed", q)
  end)

  it("releases saved tensors and intermediate gradients (memory back to baseline)", function()
    checks.settle()
    local base = lumus.memory().in_use
    do
      local w = lumus.ones({ 64, 64 }):requires_grad(true)
      local x = lumus.ones({ 32, 64 })
      for _ = 1, 3 do
        local h = lumus.relu(lumus.matmul(x, w, { transpose_b = true }))
        local loss = lumus.softmax(h):mean():sum()
        loss:backward()
      end
      assert.are.same({ 64, 64 }, w:grad():shape())
      w:zero_grad()
      w:requires_grad(false)
    end
    collectgarbage()
    collectgarbage()
    lumus.synchronize()
    assert.are.equal(base, lumus.memory().in_use)
  end)

  it("leaves the C functions in place until a tensor requires grad", function()
    local out, code = shell.run_lua([[
      local lumus = require "lumus"
      local core = require "lumus.core"
      assert(rawequal(lumus.add, core.add) and rawequal(core.Tensor.methods.transpose, lumus.Tensor.methods.transpose))
      assert(rawequal(core.Tensor.__add, core.add))
      lumus.ones({ 2 }):requires_grad(true)
      assert(not rawequal(lumus.add, core.add) and not rawequal(core.Tensor.__add, core.add))
      print("ok")
    ]])
    assert.are.equal(0, code, out)
    assert.truthy(out:find("ok"), out)
  end)

  it("lets other ops register their backward in one entry", function()
    local ag = lumus.autograd
    -- a new op: twice (as scale 2), and its backward
    local entry = { inputs = { 1 }, backward = function(g) return lumus.no_grad(lumus.scale, g, 2) end }
    rawset(lumus, "twice_for_spec", function(t) return lumus.scale(t, 2) end)
    ag.register("twice_for_spec", entry)
    assert.are.equal(entry, ag.ops.twice_for_spec)
    local x = lumus.tensor({ 1, 2 }):requires_grad(true)
    lumus.twice_for_spec(x):sum():backward()
    checks.close(x:grad(), { 2, 2 }, { what = "twice's gradient" })
    checks.errors(ag.register, "autograd.register: expected a name", "x", {})
    ag.ops.twice_for_spec = nil
    rawset(lumus, "twice_for_spec", nil)
  end)
end)
