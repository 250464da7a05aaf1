-- Autograd of lumus.scaled_dot_product_attention: gradients of q, k and v against
-- central finite differences of the float64 reference (loss = sum(y * w), w random),
-- within 1e-4 * max(1, |want|) (float32 forward and backward; the differences are exact
-- to ~1e-8 in float64); and nn.MultiheadAttention / nn.TransformerBlock training.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local g = ref.rng(1703)
local TOL = 1e-4
local unpack = table.unpack or unpack

-- A nested table of f() values (any type) of this shape.
local function table_of(shape, f, d)
  d = d or 1
  local t = {}
  for i = 1, shape[d] do
    if d == #shape then t[i] = f() else t[i] = table_of(shape, f, d + 1) end
  end
  return t
end

-- The leaves of nested table t, in row-major order, as {table, index} pairs.
local function leaves(t, out)
  out = out or {}
  for i = 1, #t do
    if type(t[i]) == "table" then leaves(t[i], out) else out[#out + 1] = { t, i } end
  end
  return out
end

local function loss_of(qt, kt, vt, wt, ropts)
  local y = ref.scaled_dot_product_attention(qt, kt, vt, ropts)
  local s = 0
  local ly, lw = leaves(y), leaves(wt)
  for i = 1, #ly do s = s + ly[i][1][ly[i][2]] * lw[i][1][lw[i][2]] end
  return s
end

-- d loss / d x for every element of table x (one of qt, kt, vt), by central differences.
local function numeric_grad(x, f)
  local h = 1e-6
  local out = {}
  for i, leaf in ipairs(leaves(x)) do
    local t, j = leaf[1], leaf[2]
    local x0 = t[j]
    t[j] = x0 + h
    local up = f()
    t[j] = x0 - h
    local down = f()
    t[j] = x0
    out[i] = (up - down) / (2 * h)
  end
  return out
end

-- Checks lumus's gradients of (q, k, v) for shapes qs, ks (v as k) and the options.
local function grad_check(qs, ks, opts, ropts, what)
  local qt = ref.random_table(qs, g.normal)
  local kt = ref.random_table(ks, g.normal)
  local vt = ref.random_table(ks, g.normal)
  local wt = ref.random_table(qs, g.normal)
  local q = lumus.tensor(qt):requires_grad(true)
  local k = lumus.tensor(kt):requires_grad(true)
  local v = lumus.tensor(vt):requires_grad(true)
  local y = lumus.scaled_dot_product_attention(q, k, v, opts)
  lumus.sum(lumus.mul(y, lumus.tensor(wt))):backward()
  local f = function() return loss_of(qt, kt, vt, wt, ropts or opts) end
  checks.close(q:grad(), numeric_grad(qt, f), { mixed = TOL, what = what .. ": dq" })
  checks.close(k:grad(), numeric_grad(kt, f), { mixed = TOL, what = what .. ": dk" })
  checks.close(v:grad(), numeric_grad(vt, f), { mixed = TOL, what = what .. ": dv" })
  return q, k, v
end

describe("scaled_dot_product_attention backward", function()
  it("matches finite differences of the float64 reference (plain, causal, KV-cache shapes, scale)", function()
    grad_check({ 1, 2, 5, 4 }, { 1, 2, 5, 4 }, {}, nil, "plain")
    grad_check({ 2, 1, 4, 3 }, { 2, 1, 4, 3 }, { causal = true }, nil, "causal")
    grad_check({ 1, 2, 3, 4 }, { 1, 2, 7, 4 }, { causal = true, scale = 0.7 }, nil, "causal Tk > Tq, scale")
  end)

  it("handles bool and float masks, and rows with every key masked get zero gradients", function()
    local Tq, Tk = 4, 6
    local bt = table_of({ Tq, Tk }, function() return g.uniform() < 0.6 end)
    bt[1][1] = true
    for j = 1, Tk do bt[3][j] = false end   -- row 3 attends nothing
    local q = grad_check({ 1, 2, Tq, 3 }, { 1, 2, Tk, 3 }, { mask = lumus.tensor(bt, { dtype = "bool" }) },
                         { mask = bt }, "bool mask")
    local gq = q:grad():to_table()
    for h = 1, 2 do for d = 1, 3 do assert.are.equal(0, gq[1][h][3][d]) end end
    local ft = table_of({ 2, 1, Tq, Tk }, function() return g.uniform() < 0.2 and -math.huge or g.normal() end)
    grad_check({ 2, 2, Tq, 3 }, { 2, 2, Tk, 3 }, { mask = lumus.tensor(ft), causal = true }, { mask = ft, causal = true },
               "float mask + causal")
    -- Tk < Tq under the causal mask: the first rows see no key
    local q2 = grad_check({ 1, 1, 5, 2 }, { 1, 1, 3, 2 }, { causal = true }, nil, "Tk < Tq")
    local g2 = q2:grad():to_table()
    for i = 1, 2 do for d = 1, 2 do assert.are.equal(0, g2[1][1][i][d]) end end
  end)

  it("sums the gradients of k and v broadcast over batch and heads", function()
    grad_check({ 2, 3, 4, 3 }, { 1, 3, 5, 3 }, {}, nil, "k, v broadcast over B")
    grad_check({ 2, 2, 4, 3 }, { 2, 1, 4, 3 }, { causal = true }, nil, "k, v broadcast over H")
  end)

  it("passes gradients through head views (view + transpose) as MultiheadAttention makes them", function()
    local B, T, H, hd = 1, 5, 2, 3
    local xt = ref.random_table({ B, T, 3 * H * hd }, g.normal)
    local x = lumus.tensor(xt):requires_grad(true)
    local heads = x:view({ B, T, 3, H, hd })
    local q = heads:select(3, 1):transpose(2, 3)
    local k = heads:select(3, 2):transpose(2, 3)
    local v = heads:select(3, 3):transpose(2, 3)
    local y = lumus.scaled_dot_product_attention(q, k, v, { causal = true })
    lumus.sum(lumus.mul(y, y)):backward()
    -- the same through the composite of differentiable ops
    local x2 = lumus.tensor(xt):requires_grad(true)
    local h2 = x2:view({ B, T, 3, H, hd })
    local q2, k2, v2 = h2:select(3, 1):transpose(2, 3), h2:select(3, 2):transpose(2, 3), h2:select(3, 3):transpose(2, 3)
    local s = lumus.scale(lumus.matmul(q2, k2, { transpose_b = true }), 1 / math.sqrt(hd))
    local allowed = lumus.le(lumus.arange(1, T + 1, { dtype = "float32" }):view({ 1, T }), lumus.arange(1, T + 1, { dtype = "float32" }):view({ T, 1 }))
    local p = lumus.softmax(lumus.where(allowed, s, -math.huge))
    local y2 = lumus.matmul(p, v2)
    lumus.sum(lumus.mul(y2, y2)):backward()
    checks.close(x:grad(), x2:grad():to_table(), { mixed = TOL, what = "dx through views" })
  end)
end)

describe("nn.MultiheadAttention and nn.TransformerBlock training", function()
  it("a tiny transformer block's loss decreases under AdamW", function()
    lumus.manual_seed(7)
    local nn, optim = lumus.nn, lumus.optim
    local block = nn.TransformerBlock(16, 2, { mlp_ratio = 2 })
    local x = lumus.tensor(ref.random_table({ 2, 6, 16 }, g.normal))
    local target = lumus.tensor(ref.random_table({ 2, 6, 16 }, g.normal))
    local params = block:parameters()
    local opt = optim.AdamW(params, { lr = 1e-2, weight_decay = 1e-2 })
    local first, last
    for step = 1, 60 do
      opt:zero_grad()
      local loss = lumus.mse_loss(block(x), target)
      loss:backward()
      opt:step()
      local l = loss:item()
      if step == 1 then first = l end
      last = l
    end
    -- every attention weight got a gradient
    for _, name in ipairs { "in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias" } do
      assert.is_truthy(block.attn[name]:grad(), name)
    end
    assert.is_true(last < 0.5 * first, ("loss %g -> %g"):format(first, last))
  end)

  it("MultiheadAttention's gradients match the composite attention's", function()
    lumus.manual_seed(11)
    local nn = lumus.nn
    local transformer = require "lumus.nn_transformer"
    local mha = nn.MultiheadAttention(8, 2, { causal = true })
    local params = mha:parameters()
    local x = lumus.tensor(ref.random_table({ 2, 5, 8 }, g.normal))
    local w = lumus.tensor(ref.random_table({ 2, 5, 8 }, g.normal))
    local function grads(composite)
      transformer.force_composite = composite
      mha:zero_grad()
      lumus.sum(lumus.mul(mha(x), w)):backward()
      transformer.force_composite = false
      local out = {}
      for i, p in ipairs(params) do out[i] = p:grad():to_table() end
      return out
    end
    local fused, composite = grads(false), grads(true)
    for i = 1, #params do checks.close(fused[i], composite[i], { mixed = TOL, what = "parameter " .. i }) end
  end)
end)

describe("GPT-2 training", function()
  it("a model from a safetensors file loads unmarked, and trains once parameters() marks it", function()
    local gpt2 = require "lumus.models.gpt2"
    local gref = dofile("spec/support/gpt2_ref.lua")
    local CFG = { n_layer = 2, n_head = 2, n_embd = 16, vocab_size = 20, n_positions = 16, layer_norm_epsilon = 1e-5 }
    local tensors = {}
    for name, v in pairs(gref.gpt2_weights(CFG, 5, 0.3)) do tensors[name] = lumus.tensor(v) end
    local path = os.tmpname()
    lumus.save_safetensors(path, tensors)
    local model = gpt2.from_safetensors(path, CFG)
    os.remove(path)
    assert.is_false(model.blocks[1].attn.in_proj_weight:requires_grad())
    assert.is_false(model.wte:requires_grad())
    local ids = { 3, 7, 1, 12, 5, 9, 20, 2, 4, 11 }
    local x = lumus.tensor({ { unpack(ids, 1, 9) } }, { dtype = "int32" })
    local y = lumus.tensor({ unpack(ids, 2, 10) }, { dtype = "int32" })
    local params = model:parameters()
    for _, p in ipairs(params) do assert.is_true(p:requires_grad()) end
    local opt = lumus.optim.AdamW(params, { lr = 1e-2, weight_decay = 0 })
    local first, last
    for step = 1, 40 do
      opt:zero_grad()
      local loss = lumus.cross_entropy(model:forward(x):view({ 9, CFG.vocab_size }), y)
      loss:backward()
      opt:step()
      last = loss:item()
      if step == 1 then first = last end
    end
    assert.is_truthy(model.blocks[2].attn.in_proj_weight:grad())
    assert.is_true(last < 0.5 * first, ("loss %g -> %g"):format(first, last))
    -- generation still runs (inside no_grad nothing is recorded)
    local out = lumus.no_grad(function() return model:generate({ 3, 7 }, 3, { greedy = true }) end)
    assert.are.equal(3, #out)
  end)
end)
