-- Gradient checks of every differentiable op and loss (the autograd issue's "done when"):
-- analytic gradients from backward() against central finite differences of the float64
-- reference (spec/support/gradcheck.lua states the method and the default tolerance,
-- |grad - fd| <= 2e-5 max(1, |fd|)). Inputs are small random float32 tables; ops with a
-- kink or a domain get inputs away from it (gc.away, gc.positive). Where a check uses
-- another tolerance, the line says why.
local lumus = require "lumus"
local ref = require "lumus.reference"
local gc = dofile("spec/support/gradcheck.lua")

local function ids(list) return lumus.tensor(list, { dtype = "int32" }) end
local function const_ids(list) return gc.const(ids(list), list) end

describe("gradients of elementwise ops", function()
  it("add sub mul div: tensors, numbers, broadcast operands", function()
    for _, name in ipairs { "add", "sub", "mul" } do
      gc.op(name, { { 3, 4 }, { 3, 4 } })
      gc.op(name, { { 3, 4 }, { 4 } })
      gc.op(name, { { 2, 1, 4 }, { 3, 1 } })
      gc.op(name, { { 4 }, 1.5 })
      gc.op(name, { -2, { 2, 3 } })
    end
    gc.op("div", { { 3, 4 }, gc.input({ 3, 4 }, gc.positive()) })
    gc.op("div", { { 3, 4 }, gc.input({ 4 }, gc.positive()) })
    gc.op("div", { 2, gc.input({ 5 }, gc.positive()) })
  end)

  it("scale neg relu abs erf gelu silu exp tanh sigmoid", function()
    gc.check("scale", function(t) return lumus.scale(t, -1.5) end, function(t) return ref.scale(t, -1.5) end, { { 3, 4 } })
    gc.op("neg", { { 3, 4 } })
    gc.op("relu", { gc.input({ 3, 4 }, gc.away(0.1)) })
    gc.op("abs", { gc.input({ 3, 4 }, gc.away(0.1)) })
    gc.check("erf", lumus.erf, function(t) return ref.map(t, ref.erf) end, { { 3, 4 } })
    gc.op("gelu", { { 3, 4 } })
    gc.check("gelu tanh", function(t) return lumus.gelu(t, { approximate = "tanh" }) end,
      function(t) return ref.gelu(t, "tanh") end, { { 3, 4 } })
    for _, name in ipairs { "silu", "exp", "tanh", "sigmoid" } do gc.op(name, { { 3, 5 } }) end
  end)

  it("square reciprocal sin cos, and the zero gradient of floor ceil round trunc sign", function()
    gc.op("square", { { 3, 4 } })
    gc.op("sin", { { 3, 4 } })
    gc.op("cos", { { 3, 4 } })
    gc.op("expm1", { { 3, 4 } })
    gc.op("log1p", { gc.input({ 3, 4 }, gc.positive(0.1)) })
    gc.op("exp2", { { 3, 4 } })
    gc.op("log2", { gc.input({ 3, 4 }, gc.positive(0.1)) })
    gc.op("log10", { gc.input({ 3, 4 }, gc.positive(0.1)) })
    gc.op("tan", { { 3, 4 } })
    gc.op("atan", { { 3, 4 } })
    gc.op("asin", { gc.input({ 3, 4 }, function(rng) return 1.6 * (rng.uniform() - 0.5) end) })
    gc.op("acos", { gc.input({ 3, 4 }, function(rng) return 1.6 * (rng.uniform() - 0.5) end) })
    gc.op("atan2", { { 3, 4 }, { 1, 4 } })
    gc.op("sinh", { { 3, 4 } })
    gc.op("cosh", { { 3, 4 } })
    gc.op("asinh", { { 3, 4 } })
    gc.op("acosh", { gc.input({ 3, 4 }, function(rng) return 1.2 + 2 * rng.uniform() end) })
    gc.op("atanh", { gc.input({ 3, 4 }, function(rng) return 1.6 * (rng.uniform() - 0.5) end) })
    gc.op("reciprocal", { gc.input({ 3, 4 }, gc.away(0.3)) })
    -- Inputs at least 0.1 from the step at 0; the other steps (integers, round's halves)
    -- are within h of none of these seeded draws, or the finite difference would be huge.
    for _, name in ipairs { "floor", "ceil", "round", "trunc", "sign" } do
      gc.op(name, { gc.input({ 3, 4 }, gc.away(0.1)) })
    end
  end)

  it("log sqrt rsqrt on positive inputs", function()
    for _, name in ipairs { "log", "sqrt", "rsqrt" } do gc.op(name, { gc.input({ 3, 5 }, gc.positive(0.3)) }) end
  end)

  it("pow with number and tensor exponents and a number base", function()
    for _, e in ipairs { 2, 3, 0.5, -0.5, -1, -2, 1, 1.7 } do
      gc.check("pow ^" .. e, function(t) return lumus.pow(t, e) end, function(t) return ref.pow(t, e) end,
        { gc.input({ 3, 4 }, gc.positive(0.5)) })
    end
    gc.op("pow", { gc.input({ 3, 4 }, gc.positive(0.5)), { 3, 4 } })
    gc.op("pow", { gc.input({ 3, 4 }, gc.positive(0.5)), { 4 } })
    gc.op("pow", { 1.5, { 2, 3 } })
  end)

  it("maximum minimum clamp where", function()
    gc.op("maximum", { { 3, 4 }, { 3, 4 } })
    gc.op("minimum", { { 3, 4 }, { 4 } })
    gc.op("maximum", { { 5 }, 0.25 })
    gc.op("clamp", { { 4, 5 }, -0.5, 0.7 })
    gc.op("clamp", { { 4, 5 }, -0.5 })
    gc.op("clamp", { { 4, 5 }, nil, 0.3, n = 3 })
    local m = { { true, false, true, true }, { false, false, true, false }, { true, true, false, true } }
    gc.check("where", lumus.where, ref.where, { gc.const(lumus.tensor(m, { dtype = "bool" }), m), { 3, 4 }, { 4 } })
    gc.check("where number", lumus.where, ref.where, { gc.const(lumus.tensor(m, { dtype = "bool" }), m), 2, { 3, 4 } })
  end)

  it("ties of maximum and minimum split the gradient in halves (PyTorch)", function()
    local a = lumus.tensor({ 1, 2, 3 }):requires_grad(true)
    local b = lumus.tensor({ 1, 5, 0 }):requires_grad(true)
    lumus.maximum(a, b):sum():backward()
    assert.are.same({ 0.5, 0, 1 }, a:grad():to_table())
    assert.are.same({ 0.5, 1, 0 }, b:grad():to_table())
  end)
end)

describe("gradients of reductions", function()
  it("sum mean var over every dim, with and without keepdim", function()
    for _, name in ipairs { "sum", "mean", "var" } do
      gc.op(name, { { 2, 3, 4 } })
      for _, d in ipairs { 1, 2, 3, -1 } do
        for _, k in ipairs { false, true } do
          gc.check(("%s dim %d keepdim %s"):format(name, d, tostring(k)),
            function(t) return lumus[name](t, { dim = d, keepdim = k }) end,
            function(t) return ref[name](t, { dim = d, keepdim = k }) end, { { 2, 3, 4 } })
        end
      end
    end
    gc.check("var correction 0", function(t) return t:var({ dim = 2, correction = 0 }) end,
      function(t) return ref.var(t, { dim = 2, correction = 0 }) end, { { 3, 5 } })
  end)

  it("max min with dim (gradient to the index) and without (shared by the ties)", function()
    for _, name in ipairs { "max", "min" } do
      for _, d in ipairs { 1, 2, -1 } do
        for _, k in ipairs { false, true } do
          gc.check(("%s dim %d keepdim %s"):format(name, d, tostring(k)),
            function(t) return (lumus[name](t, { dim = d, keepdim = k })) end,
            function(t) return (ref[name](t, { dim = d, keepdim = k })) end, { { 3, 4 } })
        end
      end
      gc.check(name .. " all", function(t) return lumus[name](t) end, function(t) return ref[name](t) end, { { 3, 4 } })
    end
    local x = lumus.tensor({ 1, 3, 3, 2 }):requires_grad(true)
    x:max():backward()
    assert.are.same({ 0, 0.5, 0.5, 0 }, x:grad():to_table())
  end)

  it("topk, softmax and log_softmax over every dim", function()
    gc.check("topk", function(t) return (t:topk(2)) end, function(t) return (ref.topk(t, 2)) end, { { 3, 5 } })
    gc.check("topk dim 1 smallest", function(t) return (t:topk(2, { dim = 1, largest = false })) end,
      function(t) return (ref.topk(t, 2, { dim = 1, largest = false })) end, { { 4, 3 } })
    for _, name in ipairs { "softmax", "log_softmax" } do
      gc.op(name, { { 3, 4 } })
      for _, d in ipairs { 1, 2, 3 } do
        gc.check(name .. " dim " .. d, function(t) return lumus[name](t, { dim = d }) end,
          function(t) return ref[name](t, { dim = d }) end, { { 2, 3, 4 } })
      end
    end
  end)
end)

describe("gradients of matmul, linear and layer_norm_forward", function()
  it("matmul with every transpose option, batches, broadcast batches and 1-D operands", function()
    local function mm(what, ta, tb, sa, sb)
      local o = { transpose_a = ta or nil, transpose_b = tb or nil }
      gc.check(what, function(a, b) return lumus.matmul(a, b, o) end, function(a, b) return ref.matmul(a, b, o) end, { sa, sb })
    end
    mm("matmul", false, false, { 3, 4 }, { 4, 5 })
    mm("matmul transpose_a", true, false, { 4, 3 }, { 4, 5 })
    mm("matmul transpose_b", false, true, { 3, 4 }, { 5, 4 })
    mm("matmul transpose_a transpose_b", true, true, { 4, 3 }, { 5, 4 })
    mm("matmul batched", false, false, { 2, 3, 4 }, { 2, 4, 2 })
    mm("matmul batched transpose_a", true, false, { 2, 4, 3 }, { 2, 4, 2 })
    mm("matmul [2,3,4] x [4,5]", false, false, { 2, 3, 4 }, { 4, 5 })
    mm("matmul [2,3,4] x [5,4]^T", false, true, { 2, 3, 4 }, { 5, 4 })
    mm("matmul [3,4] x [2,4,5]", false, false, { 3, 4 }, { 2, 4, 5 })
    mm("matmul [1,3,4] x [2,4,5]", false, false, { 1, 3, 4 }, { 2, 4, 5 })
    mm("matmul [2,1,3,4] x [3,4,2]", false, false, { 2, 1, 3, 4 }, { 3, 4, 2 })
    mm("matmul [4] x [4,5]", false, false, { 4 }, { 4, 5 })
    mm("matmul [3,4] x [4]", false, false, { 3, 4 }, { 4 })
    mm("matmul [4] x [4]", false, false, { 4 }, { 4 })
  end)

  it("rms_norm with and without a weight", function()
    gc.check("rms_norm", function(x, w) return lumus.rms_norm(x, w) end,
      function(x, w) return ref.rms_norm(x, w, 1e-6) end, { { 3, 6 }, { 6 } })
    gc.check("rms_norm eps", function(x) return lumus.rms_norm(x, { eps = 0.1 }) end,
      function(x) return ref.rms_norm(x, nil, 0.1) end, { { 2, 3, 5 } })
  end)

  it("linear and layer_norm_forward", function()
    gc.op("linear", { { 3, 4 }, { 5, 4 }, { 5 } })
    gc.op("linear", { { 2, 3, 4 }, { 5, 4 } })
    gc.check("layer_norm_forward", function(x, w, b) return (lumus.layer_norm_forward(x, w, b)) end,
      function(x, w, b) return (ref.layer_norm_forward(x, w, b, 1e-5)) end, { { 3, 6 }, { 6 }, { 6 } })
  end)
end)

describe("gradients of the composite ops (recorded as the ops they are made of)", function()
  it("std norm lerp tril triu masked_fill clone t flatten", function()
    gc.check("std", function(x) return lumus.std(x, { dim = 2 }) end, function(x) return ref.std(x, { dim = 2 }) end, { { 3, 5 } })
    gc.check("std all", function(x) return x:std() end, function(x) return ref.std(x) end, { { 2, 3 } })
    gc.check("norm", function(x) return lumus.norm(x) end, function(x) return ref.norm(x) end, { { 3, 4 } })
    gc.check("norm p=1 dim", function(x) return lumus.norm(x, { p = 1, dim = 1 }) end,
      function(x) return ref.norm(x, { p = 1, dim = 1 }) end, { gc.input({ 3, 4 }, gc.away(0.1)) })
    gc.check("lerp", function(a, b) return lumus.lerp(a, b, 0.3) end, function(a, b) return ref.lerp(a, b, 0.3) end, { { 3, 4 }, { 3, 4 } })
    gc.check("lerp w>=0.5", function(a, b) return lumus.lerp(a, b, 0.8) end, function(a, b) return ref.lerp(a, b, 0.8) end, { { 3, 4 }, { 4 } })
    gc.check("lerp tensor w", function(a, b, w) return lumus.lerp(a, b, w) end, function(a, b, w) return ref.lerp(a, b, w) end,
      { { 2, 3 }, { 2, 3 }, { 2, 3 } })
    gc.check("tril", function(x) return lumus.tril(x, 1) end, function(x) return ref.tril(x, 1) end, { { 2, 3, 4 } })
    gc.check("triu", function(x) return lumus.triu(x, -1) end, function(x) return ref.triu(x, -1) end, { { 4, 3 } })
    local mask = lumus.tensor({ { true, false, true }, { false, false, true } }, { dtype = "bool" })
    local m = mask:to_table()
    gc.check("masked_fill", function(x) return lumus.masked_fill(x, mask, 2) end, function(x) return ref.masked_fill(x, m, 2) end, { { 2, 3 } })
    gc.check("clone", function(x) return lumus.clone(x) end, function(x) return x end, { { 2, 3 } })
    gc.check("cumsum", function(x) return lumus.cumsum(x, { dim = 1 }) end, function(x) return ref.cumsum(x, { dim = 1 }) end, { { 4, 3 } })
    gc.check("cumsum blocks", function(x) return lumus.cumsum(x) end, function(x) return ref.cumsum(x) end, { { 2, 300 } }, { tol = 1e-4 })
    gc.check("pad", function(x) return lumus.pad(x, { 1, -1, 2, 0 }, { value = 3 }) end, function(x) return ref.pad(x, { 1, -1, 2, 0 }, 3) end,
      { { 2, 3 } })
    gc.check("tile", function(x) return x:tile({ 2, 1, 3 }) end, function(x) return ref.tile(x, { 2, 1, 3 }) end, { { 2, 2 } })
    gc.check("outer", function(a, b) return lumus.outer(a, b) end, function(a, b) return ref.outer(a, b) end, { { 3 }, { 4 } })
    gc.check("leaky_relu", function(x) return lumus.leaky_relu(x, { negative_slope = 0.1 }) end,
      function(x) return ref.leaky_relu(x, 0.1) end, { gc.input({ 3, 4 }, gc.away(0.1)) })
    gc.check("elu", function(x) return x:elu() end, function(x) return ref.elu(x) end, { gc.input({ 3, 4 }, gc.away(0.1)) })
    gc.check("softplus", function(x) return x:softplus({ beta = 1.5 }) end, function(x) return ref.softplus(x, 1.5) end, { { 3, 4 } })
    gc.check("logsumexp", function(x) return x:logsumexp({ dim = 2 }) end, function(x) return ref.logsumexp(x, { dim = 2 }) end, { { 3, 5 } })
    gc.check("logsumexp all", function(x) return lumus.logsumexp(x) end, function(x) return ref.logsumexp(x) end, { { 2, 3 } })
    gc.check("normalize", function(x) return x:normalize({ dim = 1 }) end, function(x) return ref.normalize(x, { dim = 1 }) end, { { 3, 4 } })
    gc.check("cosine_similarity", function(a, b) return lumus.cosine_similarity(a, b) end,
      function(a, b) return ref.cosine_similarity(a, b) end, { { 3, 4 }, { 3, 4 } })
    gc.check("logaddexp", function(a, b) return lumus.logaddexp(a, b) end, function(a, b) return ref.logaddexp(a, b) end, { { 3, 4 }, { 1, 4 } })
    gc.check("addmm", function(c, a, b) return lumus.addmm(c, a, b, { beta = 0.5, alpha = 2 }) end,
      function(c, a, b) return ref.add(ref.map(c, function(v) return v * 0.5 end), ref.map(ref.matmul(a, b), function(v) return 2 * v end)) end,
      { { 4 }, { 3, 5 }, { 5, 4 } })
    gc.check("mish", function(x) return x:mish() end, function(x) return ref.mish(x) end, { { 3, 4 } })
    gc.check("logsigmoid", function(x) return x:logsigmoid() end, function(x) return ref.logsigmoid(x) end, { { 3, 4 } })
    -- away from the kinks at -3 and 3 (and hardtanh's at -1 and 1)
    gc.check("hardswish", function(x) return x:hardswish() end, function(x) return ref.hardswish(x) end,
      { gc.input({ 3, 4 }, function(rng) return 2.5 * (rng.uniform() * 2 - 1) end) })
    gc.check("hardtanh", function(x) return x:hardtanh() end, function(x) return ref.hardtanh(x) end,
      { gc.input({ 3, 4 }, function(rng) local v = 0.8 * (rng.uniform() * 2 - 1) return rng.uniform() < 0.3 and v * 3 + (v > 0 and 1.3 or -1.3) or v end) })
    -- views, their reference through float32 as the view checks below (exact moves)
    gc.check("t", function(x) return x:t() end, function(x) return lumus.tensor(x):t():to_table() end, { { 2, 3 } },
      { h = 0.5, tol = 1e-6 })
    gc.check("flatten", function(x) return x:flatten(2) end, function(x) return lumus.tensor(x):flatten(2):to_table() end,
      { { 2, 3, 2 } }, { h = 0.5, tol = 1e-6 })
  end)
end)

describe("gradients of views, joins and indexing", function()
  -- views move values without arithmetic: exact but for the sums of expand
  local function view(what, f, shape)
    gc.check(what, f, function(t) return f(lumus.tensor(t)):to_table() end, { shape }, { h = 0.5, tol = 1e-6 })
  end
  it("transpose permute narrow select reshape view unsqueeze squeeze expand contiguous copy", function()
    view("transpose", function(t) return t:transpose(1, 2) end, { 3, 4 })
    view("permute", function(t) return t:permute({ 3, 1, 2 }) end, { 2, 3, 4 })
    view("narrow", function(t) return t:narrow(2, 2, 2) end, { 3, 4 })
    view("select", function(t) return t:select(2, 3) end, { 2, 3, 4 })
    view("reshape", function(t) return t:reshape({ 4, 3 }) end, { 3, 4 })
    view("view", function(t) return t:view({ 2, 6 }) end, { 3, 4 })
    view("unsqueeze", function(t) return t:unsqueeze(2) end, { 3, 4 })
    view("squeeze", function(t) return t:squeeze(2) end, { 3, 1, 4 })
    view("expand", function(t) return t:expand({ 2, 3, 4 }) end, { 3, 1 })
    view("contiguous", function(t) return t:transpose(1, 2):contiguous() end, { 3, 4 })
    view("copy", function(t) return lumus.copy(t:transpose(1, 2)) end, { 3, 4 })
  end)

  it("cat stack split chunk", function()
    for _, d in ipairs { 1, 2, -1 } do
      gc.check("cat dim " .. d, function(a, b) return lumus.cat({ a, b }, d) end,
        function(a, b) return ref.cat({ a, b }, d) end, { { 2, 3 }, { 2, 3 } }, { h = 0.5, tol = 1e-6 })
      gc.check("stack dim " .. d, function(a, b, c) return lumus.stack({ a, b, c }, d) end,
        function(a, b, c) return ref.stack({ a, b, c }, d) end, { { 2, 3 }, { 2, 3 }, { 2, 3 } }, { h = 0.5, tol = 1e-6 })
    end
    gc.check("cat of different sizes and a constant", function(a, b)
      return lumus.cat({ a, lumus.ones({ 1, 3 }), b })
    end, function(a, b) return ref.cat({ a, { { 1, 1, 1 } }, b }) end, { { 2, 3 }, { 3, 3 } }, { h = 0.5, tol = 1e-6 })
    -- pieces used more than once and one not at all: the gradient sums into the right slices
    gc.check("split", function(t) local p = t:split(2, 2) return p[1] * p[3] + p[1] end,
      function(t) local p = ref.split(t, 2, 2) return ref.add(ref.mul(p[1], p[3]), p[1]) end, { { 3, 6 } })
    gc.check("chunk", function(t) local p = t:chunk(3) return lumus.cat({ p[3], p[1] }) end,
      function(t) local p = ref.chunk(t, 3) return ref.cat({ p[3], p[1] }) end, { { 5, 2 } }, { h = 0.5, tol = 1e-6 })
  end)

  it("index_select, embedding and gather (repeated and out-of-range ids)", function()
    local list = { 3, 1, 3, 9, 3 }
    gc.check("index_select dim 1", lumus.index_select, ref.index_select, { { 4, 3 }, 1, const_ids(list) })
    gc.check("index_select dim 2", lumus.index_select, ref.index_select, { { 2, 4 }, 2, const_ids({ 4, 4, 1 }) })
    gc.check("index_select dim 2 of 3-D", lumus.index_select, ref.index_select, { { 2, 3, 2 }, 2, const_ids({ 2, 2, 3, 1 }) })
    local e = { { 2, 5, 2 }, { 1, 2, 0 } }
    gc.check("embedding", lumus.embedding, ref.embedding, { const_ids(e), { 5, 3 } })
    local g = { { 2, 2 }, { 1, 3 } }
    gc.check("gather dim 2", lumus.gather, ref.gather, { { 3, 3 }, 2, const_ids(g) })
    gc.check("gather dim 1", lumus.gather, ref.gather, { { 3, 4 }, 1, const_ids({ { 3, 3, 1, 2 } }) })
    gc.check("gather full", lumus.gather, ref.gather, { { 2, 3 }, 2, const_ids({ { 3, 1, 1 }, { 2, 2, 4 } }) })
  end)

  it("index_add and scatter_add (both inputs)", function()
    gc.check("index_add", lumus.index_add, ref.index_add, { { 4, 3 }, 1, const_ids({ 2, 4, 2, 7, 1 }), { 5, 3 } })
    gc.check("index_add dim 2", lumus.index_add, ref.index_add, { { 2, 3 }, 2, const_ids({ 3, 3 }), { 2, 2 } })
    gc.check("scatter_add", lumus.scatter_add, ref.scatter_add,
      { { 2, 3 }, 2, const_ids({ { 3, 1, 3, 3 }, { 2, 2, 0, 1 } }), { 2, 4 } })
  end)
end)

describe("gradients of conversions", function()
  it("through float16 and bfloat16 and back (the gradient is rounded on the way back)", function()
    local function id(t) return t end
    -- the upstream gradient passes through the narrow format: its rounding bounds the error
    gc.check("half", function(t) return t:half():float() end, id, { { 3, 4 } }, { h = 0.5, tol = 2 ^ -10 })
    gc.check("to float16", function(t) return t:to("float16"):to("float32") end, id, { { 3, 4 } }, { h = 0.5, tol = 2 ^ -10 })
    gc.check("bfloat16", function(t) return t:bfloat16():float() end, id, { { 3, 4 } }, { h = 0.5, tol = 2 ^ -7 })
  end)

  it("carries no gradient into integer and bool results", function()
    local x = lumus.tensor({ 1.5, -2, 3 }):requires_grad(true)
    assert.is_false(x:int():requires_grad())
    assert.is_false(x:to("int32"):requires_grad())
    assert.is_false(x:bool():requires_grad())
    assert.is_false(lumus.gt(x, 0):requires_grad())
    assert.is_false(x:argmax():requires_grad())
    local _, i = x:max({ dim = 1 })
    assert.is_false(i:requires_grad())
    assert.are.equal(3, x:sum():detach():to_table()[1] + 0.5)
  end)
end)

describe("gradients of losses", function()
  local T = { 3, 1, -100, 2, 5 }
  local function ce(reduction, extra)
    local o = { reduction = reduction }
    for k, v in pairs(extra or {}) do o[k] = v end
    return o
  end
  it("cross_entropy with every reduction and ignore_index", function()
    for _, r in ipairs { "mean", "sum", "none" } do
      gc.check("cross_entropy " .. r, function(x, t) return lumus.cross_entropy(x, t, { reduction = r }) end,
        function(x, t) return ref.cross_entropy(x, t, { reduction = r }) end, { { 5, 6 }, const_ids(T) })
    end
    gc.check("cross_entropy ignore_index 2", function(x, t) return lumus.cross_entropy(x, t, ce("mean", { ignore_index = 2 })) end,
      function(x, t) return ref.cross_entropy(x, t, ce("mean", { ignore_index = 2 })) end,
      { { 5, 6 }, const_ids({ 3, 2, 1, 2, 5 }) })
  end)

  it("cross_entropy over more classes than a workgroup has threads", function()
    local t = { 300, 1, 257 }
    gc.check("cross_entropy C = 300", lumus.cross_entropy, ref.cross_entropy, { { 3, 300 }, const_ids(t) }, { tol = 5e-5 })
  end)

  it("l1_loss smooth_l1_loss huber_loss nll_loss", function()
    -- inputs at least 0.1 from their targets (the kink of |d| at 0), and a beta / delta
    -- between the differences
    local function loss_check(name, o)
      gc.check(name, function(x, t) return lumus[name](x, t, o) end, function(x, t) return ref[name](x, t, o) end,
        { gc.input({ 3, 4 }, gc.away(0.1)), gc.const(lumus.zeros({ 3, 4 }), ref.random_table({ 3, 4 }, function() return 0 end)) })
    end
    loss_check("l1_loss", { reduction = "sum" })
    loss_check("smooth_l1_loss", { beta = 0.7 })
    loss_check("huber_loss", { delta = 0.7, reduction = "sum" })
    gc.check("nll_loss", function(x, t) return lumus.nll_loss(x, t) end, function(x, t) return ref.nll_loss(x, t) end,
      { { 5, 6 }, const_ids(T) })
  end)

  it("mse_loss and binary_cross_entropy_with_logits (input, target and pos_weight)", function()
    for _, r in ipairs { "mean", "sum", "none" } do
      gc.check("mse_loss " .. r, function(x, t) return lumus.mse_loss(x, t, { reduction = r }) end,
        function(x, t) return ref.mse_loss(x, t, { reduction = r }) end, { { 3, 4 }, { 3, 4 } })
      gc.check("bce " .. r, function(x, t) return lumus.binary_cross_entropy_with_logits(x, t, { reduction = r }) end,
        function(x, t) return ref.binary_cross_entropy_with_logits(x, t, { reduction = r }) end,
        { gc.input({ 3, 4 }, function(rng) return 3 * rng.normal() end), gc.input({ 3, 4 }, function(rng) return rng.uniform() end) })
    end
    gc.check("binary_cross_entropy", function(p, t) return lumus.binary_cross_entropy(p, t) end,
      function(p, t) return ref.binary_cross_entropy(p, t) end,
      { gc.input({ 3, 4 }, function(rng) return 0.1 + 0.8 * rng.uniform() end), gc.input({ 3, 4 }, function(rng) return rng.uniform() end) })
    gc.check("kl_div batchmean", function(x, t) return lumus.kl_div(x, t, { reduction = "batchmean" }) end,
      function(x, t) return ref.kl_div(x, t, { reduction = "batchmean" }) end,
      { { 3, 4 }, gc.input({ 3, 4 }, function(rng) return 0.1 + rng.uniform() end) })
    gc.check("bce pos_weight", function(x, t, p) return lumus.binary_cross_entropy_with_logits(x, t, { pos_weight = p }) end,
      function(x, t, p) return ref.binary_cross_entropy_with_logits(x, t, { pos_weight = p }) end,
      { { 3, 4 }, gc.input({ 3, 4 }, function(rng) return rng.uniform() end), gc.input({ 4 }, gc.positive(0.5)) })
  end)
end)
