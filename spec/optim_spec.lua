-- lumus.optim: SGD, Adam and AdamW steps against the float64 references
-- (lumus.reference.sgd_step / adam_step / adamw_step) over several steps, the fused
-- step ops' argument errors, state_dict round trips, parameter groups and the
-- learning-rate schedulers against their closed forms.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local optim = lumus.optim
local checks = dofile("spec/support/check.lua")

local function random_flat(n, g, scale)
  local t = {}
  for i = 1, n do t[i] = g.normal() * (scale or 1) end
  return t
end

local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local function f32(t)   -- the float32 values of a flat table (what the device starts from)
  local out = {}
  for i, v in ipairs(t) do out[i] = compat.unpack_bytes("f32", compat.pack_bytes("f32", { v }), 1, 1)[1] end
  return out
end

local function tensor_of(flat, shape)
  return lumus.tensor(flat):reshape(shape)
end

-- Gives p the gradient `flat` (through a recorded sum(p * G): exactly G).
local function set_grad(p, flat)
  p:zero_grad()
  local G = tensor_of(flat, p:shape())
  lumus.sum(lumus.mul(p, G)):backward()
end

local SHAPES = { { 1 }, { 7 }, { 33 }, { 5, 12 }, { 3, 4, 5 } }

local CASES = {
  { "SGD", optim.SGD, ref.sgd_step, { lr = 0.1 } },
  { "SGD momentum", optim.SGD, ref.sgd_step, { lr = 0.05, momentum = 0.9 } },
  { "SGD dampening + weight_decay", optim.SGD, ref.sgd_step, { lr = 0.05, momentum = 0.8, dampening = 0.3, weight_decay = 0.01 } },
  { "SGD nesterov", optim.SGD, ref.sgd_step, { lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.1 } },
  { "Adam", optim.Adam, ref.adam_step, { lr = 0.01 } },
  { "Adam L2 + amsgrad", optim.Adam, ref.adam_step, { lr = 0.02, betas = { 0.8, 0.99 }, eps = 1e-6, weight_decay = 0.1, amsgrad = true } },
  { "AdamW", optim.AdamW, ref.adamw_step, { lr = 0.01 } },
  { "AdamW amsgrad", optim.AdamW, ref.adamw_step, { lr = 0.03, weight_decay = 0.2, amsgrad = true } },
}

local STEPS = 6
-- float32 arithmetic vs float64 over STEPS steps of size ~lr: a few float32 roundings of
-- values of magnitude ~1 per step.
local TOL = { mixed = 4e-6 }

describe("optimizers match the float64 references", function()
  for ci, case in ipairs(CASES) do
    local name, ctor, step_ref, opts = case[1], case[2], case[3], case[4]
    it(name .. " over " .. STEPS .. " steps", function()
      local g = ref.rng(100 + ci)
      local params, want, states = {}, {}, {}
      for i, shape in ipairs(SHAPES) do
        local init = f32(random_flat(numel(shape), g))
        params[i] = tensor_of(init, shape):requires_grad(true)
        want[i], states[i] = init, {}
      end
      local opt = ctor(params, opts)
      for _ = 1, STEPS do
        for i, p in ipairs(params) do
          local gr = f32(random_flat(p:numel(), g))
          set_grad(p, gr)
          step_ref(want[i], gr, states[i], opts)
        end
        opt:step()
        for i, p in ipairs(params) do
          checks.close(p:to_table(), want[i], { mixed = TOL.mixed, what = name .. " param " .. i })
        end
      end
      for i, p in ipairs(params) do
        local st, rs = opt.state[p], states[i]
        assert.are.equal(STEPS, st.step)
        for _, key in ipairs { "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer" } do
          assert.are.equal(rs[key] ~= nil, st[key] ~= nil, key)
          if rs[key] then checks.close(st[key]:to_table(), rs[key], { mixed = TOL.mixed, rel = 1e-5, what = key }) end
        end
      end
    end)
  end

  it("skips parameters without a gradient (their state does not start)", function()
    local a = lumus.tensor({ 1, 2, 3, 4 }):requires_grad(true)
    local b = lumus.tensor({ 5, 6 }):requires_grad(true)
    local opt = optim.AdamW({ a, b }, { lr = 0.1 })
    set_grad(a, { 1, 1, 1, 1 })
    opt:step()
    assert.are.same({ 5, 6 }, b:to_table())
    assert.is_nil(opt.state[b])
    assert.are.equal(1, opt.state[a].step)
  end)

  it("uses each parameter group's own options", function()
    local g = ref.rng(7)
    local a0, b0 = f32(random_flat(9, g)), f32(random_flat(5, g))
    local a = lumus.tensor(a0):requires_grad(true)
    local b = lumus.tensor(b0):requires_grad(true)
    local opt = optim.SGD({ { params = { a } }, { params = { b }, lr = 0.5, momentum = 0.5 } }, { lr = 0.1 })
    assert.are.equal(0.1, opt.param_groups[1].lr)
    assert.are.equal(0.5, opt.param_groups[2].lr)
    local sa, sb = {}, {}
    for _ = 1, 3 do
      local ga, gb = f32(random_flat(9, g)), f32(random_flat(5, g))
      set_grad(a, ga); set_grad(b, gb)
      ref.sgd_step(a0, ga, sa, { lr = 0.1 })
      ref.sgd_step(b0, gb, sb, { lr = 0.5, momentum = 0.5 })
      opt:step()
    end
    checks.close(a:to_table(), a0, { mixed = 1e-6 })
    checks.close(b:to_table(), b0, { mixed = 1e-6 })
  end)

  it("zero_grad drops the gradients, or fills them with zeros", function()
    local p = lumus.tensor({ 1, 2 }):requires_grad(true)
    local opt = optim.SGD({ p })
    set_grad(p, { 3, 4 })
    opt:zero_grad(false)
    assert.are.same({ 0, 0 }, p:grad():to_table())
    opt:zero_grad()
    assert.is_nil(p:grad())
  end)

  it("returns the closure's result from step", function()
    local p = lumus.tensor({ 1 }):requires_grad(true)
    local opt = optim.SGD({ p }, { lr = 1 })
    local loss = opt:step(function()
      opt:zero_grad()
      local l = lumus.sum(lumus.mul(p, p))
      l:backward()
      return l
    end)
    assert.are.same({ 1 }, loss:to_table())
    assert.are.same({ -1 }, p:to_table())   -- 1 - 1 * 2
  end)
end)

describe("optimizer state_dict", function()
  for _, case in ipairs { { "AdamW", optim.AdamW, { lr = 0.01, amsgrad = true } },
                          { "SGD", optim.SGD, { lr = 0.1, momentum = 0.9 } } } do
    it(case[1] .. " round trips exactly", function()
      local g = ref.rng(11)
      local init = { f32(random_flat(10, g)), f32(random_flat(6, g)) }
      local grads = {}
      for s = 1, 5 do grads[s] = { f32(random_flat(10, g)), f32(random_flat(6, g)) } end
      local function make()
        local ps = { lumus.tensor(init[1]):requires_grad(true), lumus.tensor(init[2]):requires_grad(true) }
        return ps, case[2](ps, case[3])
      end
      local pa, A = make()
      for s = 1, 3 do
        for i = 1, 2 do set_grad(pa[i], grads[s][i]) end
        A:step()
      end
      local sd = A:state_dict()
      assert.are.same({ 1, 2 }, sd.param_groups[1].params)
      assert.are.equal(3, sd.state[1].step)
      local saved = sd.state[1][case[1] == "SGD" and "momentum_buffer" or "exp_avg"]:to_table()
      -- B: a new optimizer on parameters holding A's values, loaded from sd
      local pb, B = make()
      for i = 1, 2 do lumus.no_grad(function() pb[i]:copy(pa[i]) end) end
      B:load_state_dict(sd)
      for s = 4, 5 do
        for i = 1, 2 do set_grad(pa[i], grads[s][i]); set_grad(pb[i], grads[s][i]) end
        A:step(); B:step()
      end
      for i = 1, 2 do assert.are.same(pa[i]:to_bytes(), pb[i]:to_bytes()) end
      assert.are.equal(5, B.state[pb[1]].step)
      -- the state_dict holds copies: later steps left it alone
      assert.are.same(saved, sd.state[1][case[1] == "SGD" and "momentum_buffer" or "exp_avg"]:to_table())
      assert.are.equal(case[3].lr, sd.param_groups[1].lr)
    end)
  end

  it("refuses a state_dict that does not fit", function()
    local p = lumus.zeros({ 3 })
    local opt = optim.Adam({ p })
    local bad = { state = { [1] = { step = 1, exp_avg = lumus.zeros({ 4 }) } }, param_groups = { { params = { 1 }, lr = 1 } } }
    checks.errors(function() opt:load_state_dict(bad) end, "state%[1%]%.exp_avg has shape 4, the parameter 3")
    checks.errors(function() opt:load_state_dict({ state = {}, param_groups = {} }) end, "0 parameter groups given, the optimizer has 1")
    checks.errors(function() opt:load_state_dict({ state = {}, param_groups = { { params = { 1 }, foo = 1 } } }) end,
      "unknown option 'foo'")
  end)
end)

describe("optimizer arguments", function()
  it("raise naming the problem", function()
    local p = lumus.zeros({ 3 })
    checks.errors(function() optim.SGD(p) end, "optim.SGD: params must be a list of tensors or of groups")
    checks.errors(function() optim.SGD({}) end, "params is an empty list")
    checks.errors(function() optim.SGD({ p }, { lr = -1 }) end, "option lr must be a number >= 0, got %-1")
    checks.errors(function() optim.Adam({ p }, { betas = { 0.9, 1 } }) end, "option betas must be a pair")
    checks.errors(function() optim.AdamW({ p }, { foo = 1 }) end, "optim.AdamW: unknown option 'foo' %(known: amsgrad, betas, eps, lr, weight_decay%)")
    checks.errors(function() optim.SGD({ p, p }) end, "params%[2%] appears in more than one place")
    checks.errors(function() optim.SGD({ lumus.zeros({ 2 }, { dtype = "float16" }) }) end, "params%[1%] must be float32, got float16")
    checks.errors(function() optim.SGD({ p }, { nesterov = true }) end, "nesterov momentum requires a momentum")
  end)

  it("of the fused step ops raise naming the argument", function()
    local p, g, m, v = lumus.zeros({ 4 }), lumus.zeros({ 4 }), lumus.zeros({ 4 }), lumus.zeros({ 4 })
    checks.errors(lumus.adam_step_, "exp_avg %(a tensor of param's shape%) is missing", p, g, { step = 1 })
    checks.errors(lumus.adam_step_, "step must be an integer >= 1", p, g, { exp_avg = m, exp_avg_sq = v })
    checks.errors(lumus.adam_step_, "exp_avg has shape 5, param 4", p, g, { exp_avg = lumus.zeros({ 5 }), exp_avg_sq = v, step = 1 })
    checks.errors(lumus.adam_step_, "exp_avg and exp_avg_sq share memory", p, g, { exp_avg = m, exp_avg_sq = m, step = 1 })
    checks.errors(lumus.adam_step_, "beta1 must be a finite number in %[0, 1%)", p, g, { exp_avg = m, exp_avg_sq = v, step = 1, beta1 = 1 })
    checks.errors(lumus.adam_step_, "unknown option 'bogus'", p, g, { bogus = 1 })
    checks.errors(lumus.adam_step_, "grad has shape 2x2, param 4", p, lumus.zeros({ 2, 2 }), { exp_avg = m, exp_avg_sq = v, step = 1 })
    checks.errors(lumus.sgd_step_, "momentum_buffer is needed when momentum is not 0", p, g, { momentum = 0.9 })
    checks.errors(lumus.sgd_step_, "param and grad share memory", p, p, { lr = 1 })
    checks.errors(lumus.sgd_step_, "grad must be float32, got int32", p, lumus.zeros({ 4 }, { dtype = "int32" }))
    checks.errors(lumus.sgd_step_, "param must be contiguous", lumus.zeros({ 4, 2 }):transpose(1, 2), lumus.zeros({ 2, 4 }))
    checks.errors(lumus.sgd_step_, "lr must be a finite number >= 0", p, g, { lr = 0 / 0 })
  end)

  it("a captured Adam step is refused (its constants change with the step count)", function()
    local p, g, m, v = lumus.zeros({ 4 }), lumus.ones({ 4 }), lumus.zeros({ 4 }), lumus.zeros({ 4 })
    assert.has_error(function()
      lumus.capture(function() lumus.adam_step_(p, g, { exp_avg = m, exp_avg_sq = v, step = 1 }) end)
    end)
  end)
end)

describe("learning-rate schedulers", function()
  local function lrs(sched, opt, n)
    local out = { opt.param_groups[1].lr }
    for _ = 1, n do sched:step(); out[#out + 1] = sched:get_last_lr()[1] end
    return out
  end

  it("StepLR: base_lr * gamma^floor(epoch / step_size)", function()
    local opt = optim.SGD({ lumus.zeros({ 1 }) }, { lr = 0.5 })
    local got = lrs(optim.lr_scheduler.StepLR(opt, 3, 0.5), opt, 10)
    for e = 0, 10 do assert.are.equal(0.5 * 0.5 ^ math.floor(e / 3), got[e + 1]) end
    assert.are.equal(got[11], opt.param_groups[1].lr)
  end)

  it("CosineAnnealingLR: eta_min + (base - eta_min)(1 + cos(pi e / T_max)) / 2, per group", function()
    local opt = optim.AdamW({ { params = { lumus.zeros({ 1 }) }, lr = 0.1 }, { params = { lumus.zeros({ 1 }) }, lr = 0.01 } })
    local s = optim.lr_scheduler.CosineAnnealingLR(opt, 8, 1e-4)
    for e = 1, 8 do
      s:step()
      local last = s:get_last_lr()
      for i, base in ipairs { 0.1, 0.01 } do
        local want = 1e-4 + (base - 1e-4) * (1 + math.cos(math.pi * e / 8)) / 2
        assert.is_true(math.abs(last[i] - want) <= 1e-15, ("epoch %d group %d: %g vs %g"):format(e, i, last[i], want))
      end
    end
    assert.is_true(math.abs(s:get_last_lr()[1] - 1e-4) < 1e-15)
  end)

  it("LinearLR, SequentialLR and warmup_cosine", function()
    local opt = optim.SGD({ lumus.zeros({ 1 }) }, { lr = 1 })
    local got = lrs(optim.lr_scheduler.LinearLR(opt, { start_factor = 0.25, total_iters = 3 }), opt, 5)
    local want = { 0.25, 0.5, 0.75, 1, 1, 1 }
    for i = 1, 6 do assert.is_true(math.abs(got[i] - want[i]) < 1e-15) end

    local opt2 = optim.SGD({ lumus.zeros({ 1 }) }, { lr = 1 })
    local warm = optim.lr_scheduler.LinearLR(opt2, { start_factor = 0.5, total_iters = 2 })
    local step = optim.lr_scheduler.StepLR(opt2, 2, 0.1)
    local seq = optim.lr_scheduler.SequentialLR(opt2, { warm, step }, { 2 })
    got = lrs(seq, opt2, 6)
    want = { 0.5, 0.75, 1, 1, 0.1, 0.1, 0.01 }
    for i = 1, 7 do assert.is_true(math.abs(got[i] - want[i]) < 1e-15, ("epoch %d: %g vs %g"):format(i - 1, got[i], want[i])) end

    local opt3 = optim.SGD({ lumus.zeros({ 1 }) }, { lr = 2 })
    got = lrs(optim.lr_scheduler.warmup_cosine(opt3, 4, 12), opt3, 12)
    for e = 0, 12 do
      local w = e < 4 and 2 * (0.25 + 0.75 * e / 4) or 2 * (1 + math.cos(math.pi * (e - 4) / 8)) / 2
      assert.is_true(math.abs(got[e + 1] - w) < 1e-14, ("epoch %d: %g vs %g"):format(e, got[e + 1], w))
    end
  end)

  it("state_dict round trips and bad arguments raise", function()
    local opt = optim.SGD({ lumus.zeros({ 1 }) }, { lr = 1 })
    local s = optim.lr_scheduler.StepLR(opt, 2)
    for _ = 1, 5 do s:step() end
    local sd = s:state_dict()
    local opt2 = optim.SGD({ lumus.zeros({ 1 }) }, { lr = 1 })
    local s2 = optim.lr_scheduler.StepLR(opt2, 2)
    s2:load_state_dict(sd)
    assert.are.same(s:get_last_lr(), s2:get_last_lr())
    assert.are.equal(opt.param_groups[1].lr, opt2.param_groups[1].lr)
    checks.errors(function() optim.lr_scheduler.StepLR(opt, 0) end, "StepLR: step_size must be a positive integer, got 0")
    checks.errors(function() optim.lr_scheduler.CosineAnnealingLR({}, 3) end, "an optimizer expected")
    checks.errors(function() optim.lr_scheduler.LinearLR(opt, { foo = 1 }) end, "unknown option 'foo'")
  end)
end)
