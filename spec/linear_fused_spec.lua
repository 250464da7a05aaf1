-- Fused linear epilogues and the small-model linear kernel (issue 21):
--   lumus.linear(x, w, b, {activation = ...}), lumus.layer_norm_linear, tune.linear, and
--   nn.Sequential's automatic fusion (LayerNorm -> Linear -> activation).
-- Numbers against the float64 reference. Per element, with the inputs exactly float32:
--   |y - ref| <= 1.2 * (c * K * 2^-24 * sum_k |a_ik| |w_jk| + 2^-23 |b_j|) + 2e-6 |ref| + 2e-7
-- where a is x (c = 2: float32 accumulation) or, for layer_norm_linear, the float64
-- normalized x (c = 8: the normalization's own rounding, a few ulps of each element, and
-- that of the row statistics, carried through the sum); 1.2 bounds the activations'
-- slopes (gelu's is at most 1.13) and 2e-6 |ref| + 2e-7 their own float32 error. A wrong
-- or missing element (an activation not applied, a row or column skipped) is off by
-- O(1) and fails.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local nn = lumus.nn
local unpack = table.unpack or unpack

local U = 2 ^ -24
local ACTS = { "none", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid" }

local function tensor_of(shape, g, scale)
  local t = ref.random_table(shape, function() return (2 * g.uniform() - 1) * (scale or 1) end)
  return lumus.tensor(t), t
end

-- Per-element bounds (flat, row-major) for act(a W^T + b), a [M, K] as a table.
local function bounds(a, w, b, c)
  local out = {}
  for i = 1, #a do
    for j = 1, #w do
      local s = 0
      for k = 1, #a[i] do s = s + math.abs(a[i][k] * w[j][k]) end
      out[#out + 1] = 1.2 * (c * #a[i] * U * s + 2 * U * math.abs(b and b[j] or 0)) + 2e-7
    end
  end
  return out
end

local function check_linear(y, xt, wt, bt, act, what)
  checks.close(y, ref.linear_act(xt, wt, bt, act), { abs = bounds(xt, wt, bt, 2), rel = 2e-6, what = what })
end

local function check_ln_linear(y, xt, lwt, lbt, wt, bt, eps, act, what)
  local xn = ref.layer_norm_forward(xt, lwt, lbt, eps)
  checks.close(y, ref.linear_act(xn, wt, bt, act), { abs = bounds(xn, wt, bt, 8), rel = 2e-6, what = what })
end

local function with_path(m, n, k, path, f)
  lumus.tune.linear(m, n, k, { path = path })
  local ok, err = pcall(f)
  lumus.tune.linear(m, n, k, { path = "auto" })
  if not ok then error(err, 0) end
end

describe("lumus.linear with {activation =}", function()
  local g = ref.rng(2112)
  -- M <= 16 takes the small-M path (gemv.comp, activation in its store); 17.. rows the
  -- small-model kernel or matmul's (then the elementwise op in place), forced below.
  for si, shape in ipairs({ { 1, 7, 5 }, { 16, 40, 17 }, { 29, 24, 40 }, { 70, 19, 33 } }) do
    local M, N, K = shape[1], shape[2], shape[3]
    for pi, path in ipairs({ "auto", "small", "matmul" }) do
      -- every activation on the automatic path; three of them (in turn) on the forced ones
      local acts = ACTS
      if path ~= "auto" then
        acts = {}
        for j = 0, 2 do acts[#acts + 1] = ACTS[(si + pi + j) % #ACTS + 1] end
      end
      it(("applies the activation, %dx%dx%d, path %s"):format(M, N, K, path), function()
        local x, xt = tensor_of({ M, K }, g, 2)
        local w, wt = tensor_of({ N, K }, g, 1 / math.sqrt(K))
        local b, bt = tensor_of({ N }, g, 0.5)
        with_path(M, N, K, path, function()
          for _, act in ipairs(acts) do
            check_linear(lumus.linear(x, w, b, { activation = act }), xt, wt, bt, act,
              ("linear %s %s"):format(act, path))
          end
          check_linear(lumus.linear(x, w, nil, { activation = "gelu" }), xt, wt, nil, "gelu", "no bias")
        end)
      end)
    end
  end

  it("writes into out= and keeps NaN and infinities as the unfused ops do", function()
    local x = lumus.tensor({ { 0 / 0, 1 }, { 1, 1 }, { -1e30, 0 } })
    local w = lumus.tensor({ { 1, 0 }, { 0, 1 } })
    local out = lumus.empty({ 3, 2 })
    for _, path in ipairs({ "small", "auto" }) do
      with_path(3, 2, 2, path, function()
        for _, act in ipairs({ "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid" }) do
          local y = lumus.linear(x, w, nil, { activation = act, out = out })
          assert.is_true(rawequal(y, out))
          local want = lumus.linear(x, w)
          want = (act == "gelu" and lumus.gelu(want)) or (act == "gelu_tanh" and lumus.gelu(want, { approximate = "tanh" }))
            or lumus[act](want)
          local got, exp = y:to_table(), want:to_table()
          assert.is_true(got[1][1] ~= got[1][1], act .. ": NaN stays NaN")
          assert.are.equal(exp[3][1], got[3][1], act .. " at -1e30")
          checks.close(y, want, { mixed = 2e-6, what = act })
        end
      end)
    end
  end)

  it("runs float16 and bfloat16 inputs on the small-model kernel", function()
    local x, xt = tensor_of({ 40, 24 }, g, 1)
    local w, wt = tensor_of({ 12, 24 }, g, 0.3)
    for _, dt in ipairs({ "float16", "bfloat16" }) do
      with_path(40, 12, 24, "small", function()
        local xh, wh = x:to(dt), w:to(dt)
        local y = lumus.linear(xh, wh, nil, { activation = "silu" })
        assert.are.equal(dt, y:dtype())
        local want = ref.linear_act(xh:to("float32"):to_table(), wh:to("float32"):to_table(), nil, "silu")
        checks.close(y:to("float32"), want, { rel = dt == "float16" and 2 ^ -10 or 2 ^ -7, mixed = 1e-3, what = dt })
      end)
    end
    assert.is_not_nil(xt and wt)
  end)

  it("refuses an unknown activation, naming the known ones", function()
    local x, w = lumus.ones({ 2, 3 }), lumus.ones({ 4, 3 })
    checks.errors(lumus.linear, 'activation must be "none", "relu", "gelu", "gelu_tanh", "silu", "tanh" or "sigmoid", got "swish"',
      x, w, nil, { activation = "swish" })
    checks.errors(lumus.linear, "activation must be .*, got number", x, w, nil, { activation = 3 })
    checks.errors(lumus.linear, "unknown option 'act'", x, w, nil, { act = "relu" })
  end)
end)

describe("the small-model kernel on a seeded random sweep of shapes", function()
  -- Odd, prime and tiny shapes, every block size (tune.linear's bm x bn follows the
  -- shape), with and without LayerNorm; the kernel forced.
  local g = ref.rng(777)
  local function pick(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end
  local shapes = { { 1, 1, 1 }, { 2, 3, 5 }, { 65, 7, 97 }, { 127, 31, 3 }, { 8, 64, 128 }, { 33, 33, 33 } }
  for _ = 1, 5 do shapes[#shapes + 1] = { pick(1, 200), pick(1, 64), pick(1, 160) } end
  for _, s in ipairs(shapes) do
    local M, N, K = s[1], s[2], s[3]
    it(("%dx%dx%d"):format(M, N, K), function()
      local x, xt = tensor_of({ M, K }, g, 3)
      local w, wt = tensor_of({ N, K }, g, 1 / math.sqrt(K))
      local b, bt = tensor_of({ N }, g, 1)
      local lw, lwt = tensor_of({ K }, g, 2)
      local lb, lbt = tensor_of({ K }, g, 1)
      local act = ACTS[pick(1, #ACTS)]
      with_path(M, N, K, "small", function()
        assert.are.equal("small", lumus.tune.linear(M, N, K).kernel)
        check_linear(lumus.linear(x, w, b, { activation = act }), xt, wt, bt, act, "linear " .. act)
        if K > 1 then
          check_ln_linear(lumus.layer_norm_linear(x, lw, lb, w, b, { activation = act }), xt, lwt, lbt, wt, bt, 1e-5,
            act, "layer_norm_linear " .. act)
        end
      end)
    end)
  end

  it("chooses the kernel from the shape and the device: small for too few matmul blocks, never past them", function()
    local cores = lumus.tune.linear(17, 8, 8)
    assert.are.equal("small", cores.kernel)
    assert.are.equal("gemv", lumus.tune.linear(16, 8, 8).kernel)
    assert.are.equal("matmul", lumus.tune.linear(4096, 4096, 64).kernel)
    -- tune.matmul forcing a path leaves linear on matmul's kernels
    lumus.tune.matmul(64, 64, 64, { path = "tiled" })
    assert.are.equal("matmul", lumus.tune.linear(17, 8, 8).kernel)
    lumus.tune.matmul(64, 64, 64, { path = "auto" })
    checks.errors(lumus.tune.linear, 'path must be "auto", "small" or "matmul"', 4, 4, 4, { path = "fast" })
  end)
end)

describe("lumus.layer_norm_linear", function()
  local g = ref.rng(99)
  for _, path in ipairs({ "auto", "small", "matmul" }) do
    it("equals layer_norm then linear then the activation, path " .. path, function()
      local M, N, K = 37, 21, 48
      local x, xt = tensor_of({ M, K }, g, 4)
      x = lumus.add(x, 10)   -- a large mean: the statistics must not cancel
      xt = x:to_table()
      local w, wt = tensor_of({ N, K }, g, 0.2)
      local b, bt = tensor_of({ N }, g, 1)
      local lw, lwt = tensor_of({ K }, g, 2)
      local lb, lbt = tensor_of({ K }, g, 1)
      with_path(M, N, K, path, function()
        for _, act in ipairs(ACTS) do
          check_ln_linear(lumus.layer_norm_linear(x, lw, lb, w, b, { activation = act, eps = 1e-3 }), xt, lwt, lbt, wt,
            bt, 1e-3, act, "layer_norm_linear " .. act)
        end
        -- no LayerNorm weight or bias, no bias, 3-D input, out=
        local x3 = x:reshape({ 1, M, K })
        local out = lumus.empty({ 1, M, N })
        local y = lumus.layer_norm_linear(x3, nil, nil, w, nil, { out = out })
        assert.is_true(rawequal(y, out))
        check_ln_linear(y:reshape({ M, N }), xt, nil, nil, wt, nil, 1e-5, "none", "no affine, no bias")
      end)
    end)
  end

  it("raises on bad arguments, naming them", function()
    local x, w = lumus.ones({ 2, 3 }), lumus.ones({ 4, 3 })
    local v3, v4 = lumus.ones({ 3 }), lumus.ones({ 4 })
    checks.errors(lumus.layer_norm_linear, "#2.*too few arguments.*weight as argument 4", x)
    checks.errors(lumus.layer_norm_linear, "#2.*ln_weight must have shape %[3%]", x, v4, v3, w)
    checks.errors(lumus.layer_norm_linear, "#3.*ln_bias must have shape %[3%]", x, v3, v4, w)
    checks.errors(lumus.layer_norm_linear, "#4.*weight must have shape %[out_features, 3%]", x, v3, v3, lumus.ones({ 4, 2 }))
    checks.errors(lumus.layer_norm_linear, "#5.*bias must have shape %[4%]", x, v3, v3, w, v3)
    checks.errors(lumus.layer_norm_linear, "eps must be a finite number >= 0", x, v3, v3, w, nil, { eps = -1 })
    checks.errors(lumus.layer_norm_linear, "unknown option 'epsilon'", x, v3, v3, w, nil, { epsilon = 1 })
    checks.errors(lumus.layer_norm_linear, "activation must be", x, v3, v3, w, nil, { activation = "elu" })
    checks.errors(lumus.layer_norm_linear, "out", x, v3, v3, lumus.ones({ 3, 3 }), nil, { out = x })
  end)
end)

describe("autograd through fused linears", function()
  local function grads(f, ts, gy)
    lumus.sum(lumus.mul(f(), gy)):backward()
    local r = {}
    for i, t in ipairs(ts) do r[i] = t:grad(); t:zero_grad() end
    return r
  end
  local g = ref.rng(5)
  for _, act in ipairs({ "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid" }) do
    it("gives the unfused composition's gradients, " .. act, function()
      local M, N, K = 19, 6, 11
      local x = tensor_of({ M, K }, g, 2):requires_grad(true)
      local w = tensor_of({ N, K }, g, 0.5):requires_grad(true)
      local b = tensor_of({ N }, g, 0.5):requires_grad(true)
      local lw = tensor_of({ K }, g, 1):requires_grad(true)
      local lb = tensor_of({ K }, g, 1):requires_grad(true)
      local gy = tensor_of({ M, N }, g, 1)
      local function apply(z)
        if act == "gelu" then return lumus.gelu(z) end
        if act == "gelu_tanh" then return lumus.gelu(z, { approximate = "tanh" }) end
        return lumus[act](z)
      end
      local a = grads(function() return lumus.linear(x, w, b, { activation = act }) end, { x, w, b }, gy)
      local c = grads(function() return apply(lumus.linear(x, w, b)) end, { x, w, b }, gy)
      for i = 1, 3 do checks.close(a[i], c[i]:to_table(), { mixed = 1e-5, what = "linear grad " .. i }) end
      local ts = { x, lw, lb, w, b }
      a = grads(function() return lumus.layer_norm_linear(x, lw, lb, w, b, { activation = act }) end, ts, gy)
      c = grads(function() return apply(lumus.linear(lumus.layer_norm_forward(x, lw, lb), w, b)) end, ts, gy)
      for i = 1, 5 do checks.close(a[i], c[i]:to_table(), { mixed = 1e-5, what = "layer_norm_linear grad " .. i }) end
      -- without LayerNorm parameters
      a = grads(function() return lumus.layer_norm_linear(x, nil, nil, w, nil, { activation = act }) end, { x, w }, gy)
      c = grads(function() return apply(lumus.linear(lumus.layer_norm_forward(x), w)) end, { x, w }, gy)
      for i = 1, 2 do checks.close(a[i], c[i]:to_table(), { mixed = 1e-5, what = "no-affine grad " .. i }) end
    end)
  end
end)

describe("nn.Sequential fusion", function()
  local function frame_model(d, blocks, act_module)
    nn.manual_seed(7)
    local mods = {}
    for _ = 1, blocks do
      mods[#mods + 1] = nn.LayerNorm(d)
      mods[#mods + 1] = nn.Linear(d, d)
      mods[#mods + 1] = act_module()
    end
    mods[#mods + 1] = nn.Linear(d, 3)
    return nn.Sequential(unpack(mods))
  end
  local acts = {
    { "GELU tanh", function() return nn.GELU({ approximate = "tanh" }) end },
    { "GELU", function() return nn.GELU() end },
    { "ReLU", function() return nn.ReLU() end },
  }

  for _, a in ipairs(acts) do
    for _, rows in ipairs({ 5, 40 }) do
      it(("gives the unfused result (%s, %d rows), fused by default"):format(a[1], rows), function()
        local fused, plain = frame_model(24, 3, a[2]), frame_model(24, 3, a[2]):fusion(false)
        assert.is_true(fused:fusion())
        assert.is_false(plain:fusion())
        local x = tensor_of({ rows, 24 }, ref.rng(rows), 2)
        local y = fused(x)
        checks.close(y, plain(x):to_table(), { mixed = 2e-5, what = a[1] })
        assert.is_true(rawequal(y, fused.output))
        assert.is_true(rawequal(y, fused:get(10).output))
      end)
    end
  end

  it("reuses its outputs: repeated calls allocate nothing", function()
    local m = frame_model(16, 2, acts[1][2])
    local x = tensor_of({ 20, 16 }, ref.rng(3), 1)
    local y1 = m(x)
    collectgarbage(); collectgarbage(); lumus.synchronize()
    collectgarbage("stop")
    local before = lumus.memory().allocations
    for _ = 1, 50 do assert.is_true(rawequal(y1, m(x))) end
    lumus.synchronize()
    local after = lumus.memory().allocations
    collectgarbage("restart")
    assert.are.equal(before, after)
  end)

  it("does not fuse a call autograd records: each child runs and gradients flow", function()
    local m = frame_model(8, 1, acts[1][2])
    local x = tensor_of({ 4, 8 }, ref.rng(4), 1)
    local want = m:fusion(false)(x):to_table()
    m:fusion(true)
    m:requires_grad_(true)
    local y = m(x)
    assert.is_not_nil(m:get(1).output)                   -- LayerNorm ran on its own
    checks.close(y, want, {})                            -- bit-identical to the unfused call
    lumus.sum(y):backward()
    assert.is_not_nil(m:get(2).weight:grad())
  end)

  it("leaves modules with a forward of their own, and other activations, to themselves", function()
    local lin = nn.Linear(6, 6)
    local calls = 0
    local plain_forward = lin.forward
    lin.forward = function(self, x) calls = calls + 1; return plain_forward(self, x) end
    local m = nn.Sequential(nn.LayerNorm(6), lin, nn.ReLU())
    m(lumus.ones({ 3, 6 }))
    assert.are.equal(1, calls)
    local sig = nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5)):eval()
    assert.are.same({ 3, 6 }, sig(lumus.ones({ 3, 6 })):shape())
  end)

  it("replays a captured fused forward bit-identically", function()
    local m = frame_model(32, 2, acts[1][2])
    local x = tensor_of({ 48, 32 }, ref.rng(9), 1)
    local eager = m(x):to_bytes()
    local gr, y = lumus.capture(function() return m(x) end)
    lumus.fill(y, 0 / 0)
    gr:replay()
    assert.are.equal(eager, y:to_bytes())
    gr:free()
  end)

  it("refuses a non-boolean fusion flag", function()
    checks.errors(function() return nn.Sequential():fusion("yes") end, "fusion: a boolean expected, got string")
  end)
end)
