-- Training parity at small size: the pre-norm MLP block of bench/train_mlp.lua
-- (LayerNorm, Linear D -> H, tanh GELU, Linear H -> D, residual; MSE; AdamW as PyTorch
-- computes it) trained by lumus in float32 against the same algorithm written out here
-- in float64 (plain loops: forward, the backward by hand, torch.optim.AdamW's update
-- order with its bias corrections in double). Same float32 initial values on both sides.
-- The loss of every step and the parameters after the last step are compared; a formula
-- that differs (update order, eps placement, gelu's derivative, LayerNorm's backward, the
-- mean in MSE) is off by far more than float32 rounding, which stays near 1e-6 here.
local lumus = require "lumus"
local ref = require "lumus.reference"
local nn, optim = lumus.nn, lumus.optim

local T, D, H = 24, 16, 32
local STEPS = 30
local LR, WD, B1, B2, EPS, LN_EPS = 1e-2, 0.01, 0.9, 0.999, 1e-8, 1e-5

local sqrt, exp = math.sqrt, math.exp

local function values(gen, n, bound)
  local t = {}
  for i = 1, n do t[i] = ref.f32((2 * gen.uniform() - 1) * bound) end
  return t
end

local function nest(flat, rows, cols)
  local t = {}
  for i = 1, rows do
    t[i] = {}
    for j = 1, cols do t[i][j] = flat[(i - 1) * cols + j] end
  end
  return t
end

-- d gelu_tanh / dh and gelu_tanh in float64.
local K = sqrt(2 / math.pi)
local function gelu(v) return v / (1 + exp(-2 * K * (v + 0.044715 * v * v * v))) end
local function gelu_d(v)
  local s = 1 / (1 + exp(-2 * K * (v + 0.044715 * v * v * v)))
  return s + 2 * v * s * (1 - s) * K * (1 + 3 * 0.044715 * v * v)
end

-- The float64 model: params = {g, beta, W1 (H x D flat), b1, W2 (D x H flat), b2}.
local function step64(P, state, t, X, Y)
  local g, beta, W1, b1, W2, b2 = P[1], P[2], P[3], P[4], P[5], P[6]
  local grads = {}
  for i = 1, 6 do
    grads[i] = {}
    for j = 1, #P[i] do grads[i][j] = 0 end
  end
  local dg, dbeta, dW1, db1, dW2, db2 = grads[1], grads[2], grads[3], grads[4], grads[5], grads[6]
  local loss, n = 0, T * D
  for r = 0, T - 1 do
    local x = {}
    local mean, var = 0, 0
    for j = 1, D do x[j] = X[r * D + j]; mean = mean + x[j] end
    mean = mean / D
    for j = 1, D do var = var + (x[j] - mean) ^ 2 end
    local invstd = 1 / sqrt(var / D + LN_EPS)
    local xhat, ln = {}, {}
    for j = 1, D do xhat[j] = (x[j] - mean) * invstd; ln[j] = xhat[j] * g[j] + beta[j] end
    local h, a = {}, {}
    for i = 1, H do
      local s = b1[i]
      for j = 1, D do s = s + W1[(i - 1) * D + j] * ln[j] end
      h[i], a[i] = s, gelu(s)
    end
    local dout = {}
    for o = 1, D do
      local s = b2[o]
      for i = 1, H do s = s + W2[(o - 1) * H + i] * a[i] end
      local e = x[o] + s - Y[r * D + o]
      loss = loss + e * e
      dout[o] = 2 * e / n
    end
    local dh = {}
    for i = 1, H do
      local s = 0
      for o = 1, D do
        s = s + W2[(o - 1) * H + i] * dout[o]
        dW2[(o - 1) * H + i] = dW2[(o - 1) * H + i] + dout[o] * a[i]
      end
      dh[i] = s * gelu_d(h[i])
      db1[i] = db1[i] + dh[i]
    end
    for o = 1, D do db2[o] = db2[o] + dout[o] end
    for j = 1, D do
      local s = 0
      for i = 1, H do
        s = s + W1[(i - 1) * D + j] * dh[i]
        dW1[(i - 1) * D + j] = dW1[(i - 1) * D + j] + dh[i] * ln[j]
      end
      dg[j] = dg[j] + s * xhat[j]
      dbeta[j] = dbeta[j] + s
    end
  end
  -- torch.optim.AdamW (single tensor / foreach): decay, moments, bias-corrected update.
  local bc1, bc2 = 1 - B1 ^ t, 1 - B2 ^ t
  for i = 1, 6 do
    local p, gr, m, v = P[i], grads[i], state[i].m, state[i].v
    for j = 1, #p do
      p[j] = p[j] * (1 - LR * WD)
      m[j] = m[j] + (1 - B1) * (gr[j] - m[j])
      v[j] = B2 * v[j] + (1 - B2) * gr[j] * gr[j]
      p[j] = p[j] - (LR / bc1) * m[j] / (sqrt(v[j]) / sqrt(bc2) + EPS)
    end
  end
  return loss / n
end

describe("training parity (float32 lumus against the float64 algorithm)", function()
  it("loss per step and final parameters of AdamW on the MLP block", function()
    local gen = ref.rng(1606)
    local W1, b1 = values(gen, H * D, 1 / sqrt(D)), values(gen, H, 1 / sqrt(D))
    local W2, b2 = values(gen, D * H, 1 / sqrt(H)), values(gen, D, 1 / sqrt(H))
    local X, Y = values(gen, T * D, sqrt(3)), values(gen, T * D, 1)
    local ones, zeros = {}, {}
    for j = 1, D do ones[j], zeros[j] = 1, 0 end

    local block = nn.Residual(nn.Sequential(nn.LayerNorm(D), nn.Linear(D, H), nn.GELU({ approximate = "tanh" }), nn.Linear(H, D)))
    block:load_state_dict({
      ["block.1.weight"] = lumus.tensor(ones), ["block.1.bias"] = lumus.tensor(zeros),
      ["block.2.weight"] = lumus.tensor(nest(W1, H, D)), ["block.2.bias"] = lumus.tensor(b1),
      ["block.4.weight"] = lumus.tensor(nest(W2, D, H)), ["block.4.bias"] = lumus.tensor(b2),
    })
    local x, y = lumus.tensor(nest(X, T, D)), lumus.tensor(nest(Y, T, D))
    local opt = optim.AdamW(block:parameters(), { lr = LR, betas = { B1, B2 }, eps = EPS, weight_decay = WD })

    local P = { {}, {}, {}, {}, {}, {} }
    for j = 1, D do P[1][j], P[2][j] = 1, 0 end
    for i, src in ipairs { W1, b1, W2, b2 } do for j = 1, #src do P[i + 2][j] = src[j] end end
    local state = {}
    for i = 1, 6 do
      state[i] = { m = {}, v = {} }
      for j = 1, #P[i] do state[i].m[j], state[i].v[j] = 0, 0 end
    end

    local worst, at = 0, 0
    for t = 1, STEPS do
      opt:zero_grad()
      local loss = lumus.mse_loss(block(x), y)
      loss:backward()
      opt:step()
      local got = loss:to_table()[1]
      local want = step64(P, state, t, X, Y)
      local d = math.abs(got - want) / want
      if d > worst then worst, at = d, t end
    end
    assert(worst < 2e-6, ("loss: max relative difference %.3g at step %d (bound 2e-6)"):format(worst, at))

    -- parameters after the last step: within 1e-5 of max(1e-2, |p|) (AdamW moves each by
    -- at most lr per step; 1e-5 is 1/1000 of one step's move)
    local sd = block:state_dict()
    local names = { "block.1.weight", "block.1.bias", "block.2.weight", "block.2.bias", "block.4.weight", "block.4.bias" }
    for i, name in ipairs(names) do
      local flat = ref.flatten(sd[name]:to_table())
      for j = 1, #flat do
        local w = P[i][j]
        assert(math.abs(flat[j] - w) <= 1e-5 * math.max(1e-2, math.abs(w)) + 1e-7,
               ("%s[%d]: %.9g, float64 %.9g"):format(name, j, flat[j], w))
      end
    end
  end)
end)
