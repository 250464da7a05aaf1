-- Training with lumus.nn: parameters that carry gradients, fresh outputs for recorded
-- calls (the output reuse of nn_reuse_spec only outside recording), train/eval,
-- Dropout, Embedding, state_dict, a tiny MLP whose loss falls, and device memory that
-- stays flat over many optimizer steps.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local nn = lumus.nn
local optim = lumus.optim
local checks = dofile("spec/support/check.lua")

local function random_tensor(shape, seed, scale)
  local g = ref.rng(seed)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local t = {}
  for i = 1, n do t[i] = g.normal() * (scale or 1) end
  return lumus.tensor(t):reshape(shape)
end

-- mean((a - b)^2) over every element, from differentiable ops.
local function mse(a, b)
  local d = lumus.sub(a, b)
  return lumus.mean(lumus.mul(d, d):reshape({ d:numel() }))
end

local function scalar(t) return t:to_table()[1] end

local function block(d, h)
  return nn.Residual(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, h, { seed = 3 }),
    nn.GELU({ approximate = "tanh" }), nn.Linear(h, d, { seed = 4 })))
end

describe("nn parameters and modes", function()
  it("parameters() carry gradients; requires_grad_(false) unmarks them", function()
    local m = block(8, 16)
    for _, p in ipairs(m:parameters()) do assert.is_true(p:requires_grad()) end
    m:requires_grad_(false)
    for _, p in ipairs(m:parameters()) do assert.is_false(p:requires_grad()) end
    m:requires_grad_(true)
    for _, p in ipairs(m.block:get(2):parameters()) do assert.is_true(p:requires_grad()) end
  end)

  it("train() and eval() set training recursively", function()
    local m = nn.Sequential(nn.Linear(2, 2), nn.Residual(nn.Sequential(nn.Dropout(0.1))))
    assert.is_true(m:get(2).block:get(1).training)
    m:eval()
    assert.is_false(m.training)
    assert.is_false(m:get(2).block:get(1).training)
    m:train()
    assert.is_true(m:get(2).block:get(1).training)
    checks.errors(function() m:train(1) end, "train: mode must be a boolean")
  end)

  it("state_dict names parameters with dots; load_state_dict copies and checks", function()
    local m = block(4, 6)
    local sd = m:state_dict()
    local names = {}
    for k in pairs(sd) do names[#names + 1] = k end
    table.sort(names)
    assert.are.same({ "block.1.bias", "block.1.weight", "block.2.bias", "block.2.weight", "block.4.bias", "block.4.weight" }, names)
    assert.are.equal(m.block:get(2).weight, sd["block.2.weight"])
    local other = block(4, 6)
    lumus.no_grad(function() lumus.fill(other.block:get(2).weight, 0.5) end)
    m:parameters()   -- marked params still load (under no_grad inside)
    m:load_state_dict(other:state_dict())
    assert.are.same(other.block:get(2).weight:to_table(), m.block:get(2).weight:to_table())
    checks.errors(function() m:load_state_dict({ ["block.9.weight"] = lumus.zeros({ 1 }) }) end, "unexpected key 'block.9.weight'")
    local partial = { ["block.1.weight"] = lumus.ones({ 4 }) }
    checks.errors(function() m:load_state_dict(partial) end, "missing key 'block.1.bias'")
    m:load_state_dict(partial, { strict = false })
    assert.are.same({ 1, 1, 1, 1 }, m.block:get(1).weight:to_table())
    checks.errors(function() m:load_state_dict({ ["block.1.weight"] = lumus.ones({ 5 }) }, { strict = false }) end,
      "block.1.weight has shape 5, the parameter 4")
  end)

  it("zero_grad drops every parameter's gradient", function()
    local m = nn.Linear(3, 2, { seed = 1 })
    m:parameters()
    lumus.sum(m(lumus.ones({ 4, 3 })):reshape({ 8 })):backward()
    assert.is_not_nil(m.weight:grad())
    m:zero_grad()
    assert.is_nil(m.weight:grad())
    assert.is_nil(m.bias:grad())
  end)
end)

describe("recorded module calls", function()
  it("return fresh outputs whose gradients match the functional ops", function()
    local d, h = 8, 12
    local m = block(d, h)
    local ps = m:parameters()
    local x1, x2 = random_tensor({ 5, d }, 1), random_tensor({ 3, 5, d }, 2)
    local y1 = m(x1)
    local y1_values = y1:to_table()
    local y2 = m(random_tensor({ 5, d }, 3))   -- same shape: would reuse y1's buffer outside autograd
    assert.are_not.equal(y1, y2)
    assert.are.same(y1_values, y1:to_table())
    local y3 = m(x2)
    local loss = lumus.add(lumus.add(mse(y1, 0), mse(y2, 1)), mse(y3, -1))
    loss:backward()
    local got = {}
    for i, p in ipairs(ps) do got[i] = p:grad():to_table(); p:zero_grad() end
    -- the same composition from lumus functions
    local ln, l1, l2 = m.block:get(1), m.block:get(2), m.block:get(4)
    local function f(x)
      local a = lumus.layer_norm_forward(x, ln.weight, ln.bias, 1e-5)
      local b = lumus.gelu(lumus.linear(a, l1.weight, l1.bias), { approximate = "tanh" })
      return lumus.add(x, lumus.linear(b, l2.weight, l2.bias))
    end
    local z2 = f(random_tensor({ 5, d }, 3))
    local want_loss = lumus.add(lumus.add(mse(f(x1), 0), mse(z2, 1)), mse(f(x2), -1))
    want_loss:backward()
    checks.close(loss, want_loss:to_table(), { mixed = 1e-6, what = "loss" })
    for i, p in ipairs(ps) do
      checks.close(got[i], p:grad():to_table(), { mixed = 1e-6, rel = 1e-5, what = "grad of parameter " .. i })
    end
  end)

  it("outside recording (no_grad) reuse their outputs again", function()
    local m = nn.Linear(4, 4, { seed = 2 })
    m:parameters()
    local x = lumus.ones({ 2, 4 })
    local fresh = m(x)
    lumus.no_grad(function()
      local a = m(x)
      local b = m(x)
      assert.are.equal(a, b)
      assert.are_not.equal(fresh, a)
    end)
    assert.is_false(fresh:is_freed())   -- a recorded output is never freed by the module
    m:requires_grad_(false)
    assert.are.equal(m(x), m(x))
  end)
end)

describe("nn.Dropout", function()
  it("keeps 1 - p of the elements, scaled by 1 / (1 - p), in training", function()
    lumus.manual_seed(5)
    local n, p = 40000, 0.3
    local x = lumus.ones({ n })
    local y = nn.Dropout(p)(x)
    local vals = y:to_table()
    local kept = 0
    local scale = compat.f32(1 / (1 - p))
    for _, v in ipairs(vals) do
      if v ~= 0 then
        kept = kept + 1
        assert.are.equal(scale, v)
      end
    end
    local sd = math.sqrt(n * p * (1 - p))
    assert.is_true(math.abs(kept - n * (1 - p)) < 5 * sd, ("kept %d of %d"):format(kept, n))
  end)

  it("is the identity in evaluation mode and for p = 0; p = 1 gives zeros", function()
    local x = lumus.ones({ 10 })
    local d = nn.Dropout(0.5)
    d:eval()
    assert.are.equal(x, d(x))
    assert.are.equal(x, nn.Dropout(0)(x))
    assert.are.same(lumus.zeros({ 10 }):to_table(), nn.Dropout(1)(x):to_table())
    checks.errors(function() nn.Dropout(1.5) end, "nn.Dropout: p must be a number in %[0, 1%], got 1.5")
    assert.are.equal("nn.Dropout(p=0.5)", tostring(d))
  end)

  it("passes the gradient through the kept elements only", function()
    lumus.manual_seed(9)
    local x = lumus.ones({ 64 }):requires_grad(true)
    local y = nn.Dropout(0.5)(x)
    lumus.sum(y):backward()
    local g, v = x:grad():to_table(), y:to_table()
    for i = 1, 64 do assert.are.equal(v[i], g[i]) end   -- both 2 where kept, else 0
  end)
end)

describe("nn.Embedding", function()
  it("looks up rows of its weight (1-based ids)", function()
    local e = nn.Embedding(10, 4, { seed = 3 })
    assert.are.same({ 10, 4 }, e.weight:shape())
    local ids = lumus.tensor({ { 1, 10 }, { 3, 3 } }, { dtype = "int32" })
    local y = e(ids)
    checks.close(y, ref.embedding({ { 1, 10 }, { 3, 3 } }, e.weight:to_table()))
    checks.errors(function() e(lumus.ones({ 2 })) end, "nn.Embedding%(10, 4%): ids must be an int32 tensor %(1%-based rows%), got float32")
    assert.are.equal("nn.Embedding(10, 4)", tostring(e))
  end)

  local has_backward = lumus.autograd.ops.embedding ~= nil
  local trains = has_backward and it or pending
  trains("gets a gradient per looked-up row (needs embedding's backward)", function()
    local e = nn.Embedding(5, 3, { seed = 4 })
    e:parameters()
    local ids = lumus.tensor({ 2, 4, 2 }, { dtype = "int32" })
    lumus.sum(e(ids):reshape({ 9 })):backward()
    checks.close(e.weight:grad(), { { 0, 0, 0 }, { 2, 2, 2 }, { 0, 0, 0 }, { 1, 1, 1 }, { 0, 0, 0 } })
  end)
end)

describe("training a tiny MLP", function()
  local function setup()
    nn.manual_seed(1)
    local model = nn.Sequential(nn.Linear(4, 16, { seed = 1 }), nn.GELU(), nn.Linear(16, 1, { seed = 2 }))
    local x = random_tensor({ 32, 4 }, 10)
    -- target: a fixed smooth function of x
    local xt = x:to_table()
    local t = {}
    for i, row in ipairs(xt) do t[i] = { math.sin(row[1]) + 0.5 * row[2] * row[3] - 0.25 * row[4] } end
    return model, x, lumus.tensor(t)
  end

  it("lowers its loss with AdamW", function()
    local model, x, t = setup()
    local opt = optim.AdamW(model:parameters(), { lr = 0.02, weight_decay = 0 })
    local first, last
    for step = 1, 60 do
      opt:zero_grad()
      local loss = mse(model(x), t)
      loss:backward()
      opt:step()
      if step == 1 then first = scalar(loss) end
      last = scalar(loss)
    end
    assert.is_true(last < 0.3 * first, ("loss %g -> %g"):format(first, last))
  end)

  it("keeps device memory flat over many steps", function()
    -- Until nothing more goes, host memory included: on 5.1 and LuaJIT a graph (and an
    -- earlier spec's garbage) is freed over several cycles, some of which free no device
    -- memory.
    local function settle()
      local in_use, kb
      for _ = 1, 100 do
        lumus.synchronize()
        in_use, kb = lumus.memory().in_use, collectgarbage("count")
        collectgarbage("collect")
        collectgarbage("collect")
        lumus.synchronize()
        if lumus.memory().in_use == in_use and collectgarbage("count") >= kb then break end
      end
      return lumus.memory().in_use
    end
    local model, x, t = setup()
    local opt = optim.SGD(model:parameters(), { lr = 0.05, momentum = 0.9 })
    local function steps(n)
      for _ = 1, n do
        opt:zero_grad()
        local loss = mse(model(x), t)
        loss:backward()
        opt:step()
      end
      return settle()
    end
    settle()
    lumus.empty_cache()
    local after_warmup = steps(20)
    local after_more = steps(200)
    assert.are.equal(after_warmup, after_more)
  end)
end)
