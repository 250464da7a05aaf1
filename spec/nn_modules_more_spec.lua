-- nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Softmax, nn.LogSoftmax, nn.LeakyReLU, nn.ELU,
-- nn.Softplus, nn.Identity, nn.Flatten,
-- nn.RMSNorm and nn.utils.clip_grad_norm_: values against lumus.reference at stated
-- bounds, outputs reused between calls as the other modules', training through them,
-- and errors by message.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local nn = lumus.nn

local function rand(shape, seed)
  local g = ref.rng(seed)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local flat = {}
  for i = 1, n do flat[i] = ref.f32(g.normal()) end
  return ref.nest(flat, shape)
end

describe("nn activation modules", function()
  local CASES = {
    { nn.SiLU, ref.silu, "nn.SiLU", 4 * 2 ^ -23 },
    { nn.Tanh, ref.tanh, "nn.Tanh", 3 * 2 ^ -23 },
    { nn.Sigmoid, ref.sigmoid, "nn.Sigmoid", 3 * 2 ^ -23 },
  }
  for _, c in ipairs(CASES) do
    local M, f, name, bound = c[1], c[2], c[3], c[4]
    it(name .. " computes its op, reuses its output and refuses arguments", function()
      local m = M()
      assert.are.equal(name, tostring(m))
      local xs = rand({ 5, 7 }, #name)
      local x = lumus.tensor(xs)
      local y = m(x)
      checks.close(y, f(xs), { rel = bound, abs = 1e-7, what = name })
      assert.are.equal(y, m(x))            -- the same output buffer on the next call
      assert.are.equal(0, #m:parameters())
      checks.errors(function() M(1) end, name .. ": takes no arguments")
    end)
  end

  it("nn.Softmax and nn.LogSoftmax over the last dim by default, or dim", function()
    local xs = rand({ 3, 4, 5 }, 3)
    local x = lumus.tensor(xs)
    checks.close(nn.Softmax()(x), ref.softmax(xs), { rel = 1e-6, abs = 1e-7, what = "Softmax" })
    checks.close(nn.Softmax({ dim = 2 })(x), ref.softmax(xs, { dim = 2 }), { rel = 1e-6, abs = 1e-7, what = "Softmax dim 2" })
    checks.close(nn.LogSoftmax({ dim = 1 })(x), ref.log_softmax(xs, { dim = 1 }), { mixed = 1e-6, what = "LogSoftmax dim 1" })
    assert.are.equal("nn.Softmax(dim=-1)", tostring(nn.Softmax()))
    assert.are.equal("nn.LogSoftmax(dim=2)", tostring(nn.LogSoftmax({ dim = 2 })))
    checks.errors(function() nn.Softmax({ dim = 0 }) end, "nn.Softmax: option dim must be a nonzero integer, got 0")
    checks.errors(function() nn.LogSoftmax({ axis = 1 }) end, "nn.LogSoftmax: unknown option 'axis' %(known: dim%)")
  end)

  it("nn.LeakyReLU, nn.ELU and nn.Softplus take their parameters in order", function()
    local xs = rand({ 4, 6 }, 12)
    local x = lumus.tensor(xs)
    checks.close(nn.LeakyReLU(0.3)(x), ref.leaky_relu(xs, 0.3), { rel = 2 ^ -23, what = "LeakyReLU" })
    checks.close(nn.ELU()(x), ref.elu(xs), { rel = 4 * 2 ^ -23, abs = 1e-45, what = "ELU" })
    checks.close(nn.Softplus(2, 3)(x), ref.softplus(xs, 2, 3), { rel = 6 * 2 ^ -23, abs = 1e-45, what = "Softplus" })
    assert.are.equal("nn.LeakyReLU(negative_slope=0.01)", tostring(nn.LeakyReLU()))
    assert.are.equal("nn.Softplus(beta=2, threshold=3)", tostring(nn.Softplus(2, 3)))
    checks.errors(function() nn.ELU("a") end, "nn.ELU: alpha must be a number, got a")
    checks.errors(function() nn.LeakyReLU(0.1, 2) end, "nn.LeakyReLU: takes at most 1 arguments")
  end)

  it("nn.Identity passes x; nn.Flatten merges dims from 2 by default", function()
    local x = lumus.zeros({ 2, 3, 4 })
    assert.are.equal(x, nn.Identity()(x))
    assert.are.same({ 2, 12 }, nn.Flatten()(x):shape())
    assert.are.same({ 24 }, nn.Flatten(1)(x):shape())
    assert.are.same({ 6, 4 }, nn.Flatten(1, 2)(x):shape())
    assert.are.equal("nn.Flatten(start_dim=2, end_dim=-1)", tostring(nn.Flatten()))
    checks.errors(function() nn.Flatten(0) end, "nn.Flatten: start_dim must be a nonzero integer, got 0")
    checks.errors(function() nn.Identity()(3) end, "nn.Identity: input must be a tensor, got number")
  end)
end)

describe("nn.RMSNorm", function()
  it("normalizes the last dim with its weight, eps and affine options", function()
    local xs = rand({ 4, 9 }, 5)
    local x = lumus.tensor(xs)
    local m = nn.RMSNorm(9)
    assert.are.equal("nn.RMSNorm(9)", tostring(m))
    assert.are.equal(1, #m:parameters())
    checks.close(m(x), ref.rms_norm(xs, nil, 1e-6), { rel = 4 * 2 ^ -23, abs = 1e-7, what = "RMSNorm" })
    local w = rand({ 9 }, 6)
    m:load({ weight = w })
    checks.close(m(x), ref.rms_norm(xs, w, 1e-6), { rel = 4 * 2 ^ -23, abs = 1e-7, what = "RMSNorm weighted" })
    local plain = nn.RMSNorm(9, { eps = 0.5, affine = false })
    assert.are.equal("nn.RMSNorm(9, eps=0.5, affine=false)", tostring(plain))
    assert.are.equal(0, #plain:parameters())
    checks.close(plain(x), ref.rms_norm(xs, nil, 0.5), { rel = 4 * 2 ^ -23, abs = 1e-7, what = "RMSNorm eps" })
    checks.errors(function() nn.RMSNorm(0) end, "nn.RMSNorm")
    checks.errors(function() nn.RMSNorm(4, { eps = -1 }) end, "nn.RMSNorm: option eps must be a positive finite number, got %-1")
  end)

  it("trains: the weight's gradient is the reference's", function()
    local xs = rand({ 3, 5 }, 7)
    local m = nn.RMSNorm(5)
    local params = m:parameters()
    local y = m(lumus.tensor(xs))
    lumus.sum(lumus.mul(y, y)):backward()
    -- d/dw sum((x r w)^2) = 2 w sum over rows of (x r)^2, w = 1
    local want = {}
    local xr = ref.rms_norm(xs, nil, 1e-6)
    for j = 1, 5 do
      local s = 0
      for i = 1, 3 do s = s + 2 * xr[i][j] ^ 2 end
      want[j] = s
    end
    checks.close(params[1]:grad(), want, { rel = 1e-5, what = "RMSNorm weight grad" })
  end)
end)

describe("nn.utils.clip_grad_norm_", function()
  local function grads_norm(params, p)
    local s = 0
    for _, t in ipairs(params) do
      for _, v in ipairs(checks.flat(t:grad())) do
        if p == math.huge then s = math.max(s, math.abs(v)) else s = s + v * v end
      end
    end
    return p == math.huge and s or math.sqrt(s)
  end

  local function trained(seed)
    local m = nn.Sequential(nn.Linear(4, 3, { seed = seed }), nn.Tanh(), nn.Linear(3, 2, { seed = seed + 1 }))
    local params = m:parameters()
    lumus.sum(m(lumus.tensor(rand({ 5, 4 }, seed)))):backward()
    return params
  end

  it("scales the gradients to max_norm when their norm is above it, and returns the norm", function()
    local params = trained(1)
    local before = grads_norm(params, 2)
    local n = nn.utils.clip_grad_norm_(params, before / 4)
    checks.close(n, { before }, { rel = 1e-5, what = "returned norm" })
    checks.close({ grads_norm(params, 2) }, { before / 4 }, { rel = 1e-5, what = "clipped norm" })
    -- below max_norm: unchanged
    local kept = grads_norm(params, 2)
    nn.utils.clip_grad_norm_(params, kept * 10)
    checks.close({ grads_norm(params, 2) }, { kept }, { rel = 1e-6, what = "unclipped norm" })
  end)

  it("takes norm_type = math.huge, a single tensor, and parameters without gradients", function()
    local params = trained(3)
    local before = grads_norm(params, math.huge)
    local n = nn.utils.clip_grad_norm_(params, before / 2, { norm_type = math.huge })
    checks.close(n, { before }, { rel = 1e-6, what = "inf norm" })
    checks.close({ grads_norm(params, math.huge) }, { before / 2 }, { rel = 1e-5, what = "clipped inf norm" })
    local lone = params[1]
    nn.utils.clip_grad_norm_(lone, 1e-3)
    checks.close({ grads_norm({ lone }, 2) }, { 1e-3 }, { rel = 1e-4, what = "one tensor" })
    local fresh = lumus.zeros({ 3 }):requires_grad(true)
    checks.close(nn.utils.clip_grad_norm_({ fresh }, 1), { 0 }, { what = "no gradients" })
  end)

  it("refuses bad arguments", function()
    checks.errors(function() nn.utils.clip_grad_norm_(5, 1) end, "clip_grad_norm_: params must be a list of tensors, got number")
    checks.errors(function() nn.utils.clip_grad_norm_({}, -1) end, "clip_grad_norm_: max_norm must be a number >= 0, got %-1")
    checks.errors(function() nn.utils.clip_grad_norm_({ 3 }, 1) end, "clip_grad_norm_: params%[1%] must be a tensor, got number")
    checks.errors(function() nn.utils.clip_grad_norm_({}, 1, { norm_type = 1 }) end, "option norm_type must be 2 or math.huge, got 1")
    checks.errors(function() nn.utils.clip_grad_norm_({}, 1, { norm = 2 }) end, "unknown option 'norm'")
  end)
end)
