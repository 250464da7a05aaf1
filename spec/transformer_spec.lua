-- nn.MultiheadAttention, nn.KVCache and nn.TransformerBlock (lua/lumus/nn_transformer.lua)
-- against the float64 references of spec/support/gpt2_ref.lua.
local lumus = require "lumus"
local ref = require "lumus.reference"
local nn = lumus.nn
local gref = dofile("spec/support/gpt2_ref.lua")
local checks = dofile("spec/support/check.lua")
local nnt = require "lumus.nn_transformer"

-- float32 against float64 over rows of width <= 48: 2e-5 of max(1, |ref|).
local TOL = 2e-5

local function params(m)
  local p = {}
  for _, name in ipairs(m._params) do p[name] = m[name]:to_table() end
  return p
end

local function rows(x, b) return x:select(1, b):to_table() end

local function random_x(shape, seed)
  lumus.manual_seed(seed)
  return lumus.randn(shape)
end

describe("nn.MultiheadAttention", function()
  for _, causal in ipairs({ false, true }) do
    it(("matches the reference (causal = %s) on batch 2, 5 tokens, 3 heads"):format(tostring(causal)), function()
      lumus.manual_seed(3)
      local m = nn.MultiheadAttention(12, 3, { causal = causal })
      -- nonzero biases, so that their place in the fused projection is checked
      m.in_proj_bias:uniform_(-0.5, 0.5)
      m.out_proj_bias:uniform_(-0.5, 0.5)
      local x = random_x({ 2, 5, 12 }, 4)
      local y = m(x)
      assert.equal(y, m.output)
      assert.same({ 2, 5, 12 }, y:shape())
      local p = params(m)
      for b = 1, 2 do
        local want = gref.mha(rows(x, b), p, 3, causal)
        checks.close(rows(y, b), want, { mixed = TOL, what = "batch " .. b })
      end
    end)
  end

  it("with a KV cache gives the same rows as the whole sequence, for chunks and single tokens", function()
    lumus.manual_seed(5)
    local m = nn.MultiheadAttention(16, 4, { causal = true })
    local x = random_x({ 2, 7, 16 }, 6)
    local full = m(x):to_table()
    local cache = m:new_cache(2, 10)
    assert.equal(0, cache.length)
    local parts = { { 1, 3 }, { 4, 1 }, { 5, 2 }, { 7, 1 } }
    for _, part in ipairs(parts) do
      local s, n = part[1], part[2]
      local y = m(x:narrow(2, s, n):contiguous(), cache)
      assert.equal(s + n - 1, cache.length)
      for b = 1, 2 do
        for t = 1, n do
          checks.close(y:select(1, b):select(1, t):to_table(), full[b][s + t - 1],
            { mixed = 1e-5, what = ("row %d of batch %d"):format(s + t - 1, b) })
        end
      end
    end
    assert.error_matches(function() m(x:narrow(2, 1, 4):contiguous(), cache) end,
      "nn.KVCache:append: 7 positions held %+ 4 new exceed max_len 10")
    cache:reset()
    assert.equal(0, cache.length)
    cache:free()
  end)

  it("uses the composite attention where no fused op exists, with the same results", function()
    lumus.manual_seed(8)
    local q, k, v = lumus.randn({ 1, 2, 3, 4 }), lumus.randn({ 1, 2, 6, 4 }), lumus.randn({ 1, 2, 6, 4 })
    local o = nnt.composite_attention(q, k, v, true, 0.5):to_table()
    -- reference: query i sees keys 1..3+i
    for h = 1, 2 do
      local qh, kh, vh = q:select(1, 1):select(1, h):to_table(), k:select(1, 1):select(1, h):to_table(),
        v:select(1, 1):select(1, h):to_table()
      for i = 1, 3 do
        local s, m, z = {}, -math.huge, 0
        for j = 1, 3 + i do
          local d = 0
          for c = 1, 4 do d = d + qh[i][c] * kh[j][c] end
          s[j] = d * 0.5
          m = math.max(m, s[j])
        end
        local want = { 0, 0, 0, 0 }
        for j = 1, 3 + i do s[j] = math.exp(s[j] - m); z = z + s[j] end
        for j = 1, 3 + i do for c = 1, 4 do want[c] = want[c] + s[j] / z * vh[j][c] end end
        checks.close(o[1][h][i], want, { mixed = TOL, what = ("head %d query %d"):format(h, i) })
      end
    end
    if lumus.scaled_dot_product_attention then
      local fused = lumus.scaled_dot_product_attention(q, k, v, { causal = true, scale = 0.5 })
      checks.close(fused, ref.flatten(o), { mixed = TOL, what = "fused against composite" })
    end
  end)

  it("raises on bad arguments", function()
    assert.has_error(function() nn.MultiheadAttention(10, 3) end,
      "nn.MultiheadAttention: embed_dim 10 must be divisible by num_heads 3")
    assert.has_error(function() nn.MultiheadAttention(8, 2, { dropout = 0.1 }) end,
      "nn.MultiheadAttention: unknown option 'dropout' (known: bias, causal, init)")
    local m = nn.MultiheadAttention(8, 2)
    assert.has_error(function() m(lumus.zeros({ 2, 8 })) end,
      "nn.MultiheadAttention(8, heads=2): input must be a [B, T, 8] tensor, got shape 2x8")
    assert.error_matches(function() m(lumus.zeros({ 1, 2, 8 }), {}) end, "cache must be an nn.KVCache")
    local c = nn.KVCache(2, 2, 4, 4)
    assert.error_matches(function() m(lumus.zeros({ 1, 2, 8 }), c) end,
      "nn.KVCache:append: k must be %[2, 2, T, 4%], got shape 1x2x2x4")
    assert.has_error(function() nn.KVCache(1, 0, 4, 4) end, "nn.KVCache: heads must be a positive integer, got 0")
  end)

  it("prints and lists its parameters", function()
    local m = nn.MultiheadAttention(8, 2, { causal = true, bias = false })
    assert.equal("nn.MultiheadAttention(8, heads=2, causal, no bias)", tostring(m))
    assert.equal(2, #m:parameters())
    assert.same({ 24, 8 }, m.in_proj_weight:shape())
  end)
end)

describe("nn.TransformerBlock", function()
  it("matches the pre-norm reference block, with and without a cache", function()
    lumus.manual_seed(11)
    local blk = nn.TransformerBlock(16, 2, { eps = 1e-5 })
    for _, name in ipairs({ "ln1_bias", "ln2_bias", "fc_bias", "proj_bias" }) do blk[name]:uniform_(-0.3, 0.3) end
    blk.ln1_weight:uniform_(0.5, 1.5)
    blk.attn.in_proj_bias:uniform_(-0.3, 0.3)
    assert.equal(64, blk.hidden)
    local x = random_x({ 1, 6, 16 }, 12)
    local y = blk(x)
    local p = params(blk)
    p.attn = params(blk.attn)
    local want = gref.block(rows(x, 1), p, 2, 1e-5)
    checks.close(rows(y, 1), want, { mixed = TOL, what = "block" })
    local cache = blk:new_cache(1, 6)
    blk(x:narrow(2, 1, 5):contiguous(), cache)
    local last = blk(x:narrow(2, 6, 1):contiguous(), cache)
    checks.close(last:view({ 16 }), want[6], { mixed = TOL, what = "cached last row" })
  end)

  it("supports rms norm and other activations", function()
    lumus.manual_seed(13)
    local blk = nn.TransformerBlock(8, 2, { norm = "rms", activation = "relu", mlp_ratio = 2, bias = false })
    assert.equal(16, blk.hidden)
    assert.is_nil(blk.ln1_bias)
    local x = random_x({ 1, 3, 8 }, 14)
    local y = blk(x)
    local p = params(blk)
    p.attn = params(blk.attn)
    -- reference: rms norm = x / sqrt(mean(x^2) + eps) * w, relu MLP
    local function rms(r, w)
      local out = {}
      for t = 1, #r do
        local s = 0
        for i = 1, #r[t] do s = s + r[t][i] ^ 2 end
        local inv = 1 / math.sqrt(s / #r[t] + 1e-5)
        out[t] = {}
        for i = 1, #r[t] do out[t][i] = r[t][i] * inv * w[i] end
      end
      return out
    end
    local xr = rows(x, 1)
    local a = gref.mha(rms(xr, p.ln1_weight), p.attn, 2, true)
    local h = ref.add(xr, a)
    local f = ref.map(gref.linear(rms(h, p.ln2_weight), p.fc_weight), function(v) return math.max(v, 0) end)
    local want = ref.add(h, gref.linear(f, p.proj_weight))
    checks.close(rows(y, 1), want, { mixed = TOL, what = "rms block" })
  end)

  it("raises on bad options", function()
    assert.has_error(function() nn.TransformerBlock(8, 2, { activation = "tanh" }) end,
      'nn.TransformerBlock: option activation must be "gelu_tanh", "gelu", "relu" or "silu", got tanh')
    assert.has_error(function() nn.TransformerBlock(8, 2, { norm = "batch" }) end,
      'nn.TransformerBlock: option norm must be "layer" or "rms", got batch')
    assert.error_matches(function() nn.TransformerBlock(8, 2, { ratio = 2 }) end, "unknown option 'ratio'")
    assert.equal("nn.TransformerBlock(8, heads=2, hidden=32, gelu_tanh, layer norm, causal)",
      tostring(nn.TransformerBlock(8, 2)))
  end)
end)
