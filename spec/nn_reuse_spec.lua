-- lumus.nn modules reuse their outputs (Torch7 nn semantics): m.output is written by
-- each call with an input of the same shape, so a per-frame model(x) makes no device
-- allocation after the first call. Counted with lumus.memory().allocations (live
-- allocations) and in_use bytes, with the GC stopped so only explicit frees change them.
-- Values are checked against the float64 reference (|e| <= 2e-5 * max(1, |ref|), the
-- tolerance of nn_spec) so that reuse cannot pass by returning stale results.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local nn = lumus.nn

local TOL = 2e-5
local have_elementwise = lumus.gelu and lumus.relu and lumus.add

local function random_input(shape, seed)
  local xt = ref.random_table(shape, ref.rng(seed))
  return lumus.tensor(xt), xt
end

-- Live allocations and bytes once the device has finished (deferred frees done).
local function usage()
  lumus.synchronize()
  local m = lumus.memory()
  return m.allocations, m.in_use
end

-- Runs fn with the GC stopped, restarting it whatever happens.
local function without_gc(fn)
  collectgarbage(); collectgarbage(); lumus.synchronize()
  collectgarbage("stop")
  local ok, e = pcall(fn)
  collectgarbage("restart")
  if not ok then error(e, 0) end
end

local function mlp_block(d, hidden)
  return nn.Residual(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, hidden, { seed = 11 }),
    nn.GELU({ approximate = "tanh" }), nn.Linear(hidden, d, { seed = 12 }), nn.ReLU()))
end

local function mlp_reference(block, xt)
  -- (state_dict, not parameters(): parameters() marks them requires_grad, after which
  -- calls outside lumus.no_grad return fresh outputs rather than reuse them)
  local p, sd = {}, block:state_dict()
  for i, k in ipairs { "block.1.weight", "block.1.bias", "block.2.weight", "block.2.bias", "block.4.weight", "block.4.bias" } do
    p[i] = sd[k]:to_table()
  end
  local h = ref.layer_norm_forward(xt, p[1], p[2], 1e-5)
  h = ref.gelu(ref.linear(h, p[3], p[4]), "tanh")
  h = ref.relu(ref.linear(h, p[5], p[6]))
  return ref.add(xt, h)
end

describe("nn modules reuse their outputs", function()
  local cases = {
    { "Linear", function() return nn.Linear(12, 20, { seed = 1 }) end,
      function(m, xt) return ref.linear(xt, m.weight:to_table(), m.bias:to_table()) end },
    { "LayerNorm", function()
        local ln = nn.LayerNorm(12)
        ln:load { weight = ref.random_table({ 12 }, ref.rng(2)), bias = ref.random_table({ 12 }, ref.rng(3)) }
        return ln
      end,
      function(m, xt) return (ref.layer_norm_forward(xt, m.weight:to_table(), m.bias:to_table(), 1e-5)) end },
  }
  if have_elementwise then
    cases[#cases + 1] = { "GELU", function() return nn.GELU() end, function(_, xt) return ref.gelu(xt) end }
    cases[#cases + 1] = { "ReLU", function() return nn.ReLU() end, function(_, xt) return ref.relu(xt) end }
    cases[#cases + 1] = { "the MLP block (Residual of a Sequential)", function() return mlp_block(12, 24) end,
      function(m, xt) return mlp_reference(m, xt) end }
  end

  for _, case in ipairs(cases) do
    local name, make, reference = case[1], case[2], case[3]
    it(name .. ": 100 calls on one input shape allocate nothing after the first", function()
      local m = make()
      local xa, xat = random_input({ 6, 12 }, 5)
      local xb, xbt = random_input({ 6, 12 }, 6)
      without_gc(function()
        local y1 = m(xa)
        assert.are.equal(m.output, y1)
        local count, bytes = usage()
        for i = 1, 100 do
          local y = m(i % 2 == 0 and xa or xb)
          assert.are.equal(y1, y)
          local c, b = usage()
          assert.are.equal(count, c, ("allocations after call %d"):format(i + 1))
          assert.are.equal(bytes, b, ("bytes in use after call %d"):format(i + 1))
        end
        -- The last call (i = 100) read xa; the one before xb: the output holds xa's result.
        checks.close(y1, reference(m, xat), { mixed = TOL, what = name .. " after 101 calls" })
        m(xb)
        checks.close(y1, reference(m, xbt), { mixed = TOL, what = name .. " overwritten by the next call" })
      end)
    end)
  end

  it("a new input shape reallocates once, freeing the old output", function()
    local lin = nn.Linear(12, 16, { seed = 1 })
    local x4 = lumus.ones({ 4, 12 })
    local x7, x7t = random_input({ 8, 12 }, 8)
    without_gc(function()
      local y4 = lin(x4)
      local count, bytes = usage()
      local y7 = lin(x7)
      assert.are_not.equal(y4, y7)
      assert.is_true(y4:is_freed())
      assert.are.same({ 8, 16 }, y7:shape())
      local c, b = usage()
      assert.are.equal(count, c)
      assert.are.equal(bytes + 4 * 4 * 16, b)      -- four more rows of 16 floats
      for _ = 1, 10 do assert.are.equal(y7, lin(x7)) end
      assert.are.equal(c, (usage()))
      checks.close(y7, ref.linear(x7t, lin.weight:to_table(), lin.bias:to_table()), { mixed = TOL, what = "8x12" })
    end)
  end)

  it("LayerNorm keeps mean and invstd as m.mean and m.invstd, replaced with the output", function()
    local ln = nn.LayerNorm(8)
    local x, xt = random_input({ 3, 8 }, 9)
    local y = ln(x)
    local _, want_mean, want_invstd = ref.layer_norm_forward(xt, nil, nil, 1e-5)
    checks.close(ln.mean, want_mean, { mixed = 1e-5, what = "mean" })
    checks.close(ln.invstd, want_invstd, { rel = 1e-4, what = "invstd" })
    local mean = ln.mean
    assert.are.equal(y, ln(x))
    assert.are.equal(mean, ln.mean)
    ln(lumus.ones({ 2, 8 }))
    assert.is_true(mean:is_freed())
    assert.are.same({ 2 }, ln.mean:shape())
  end)

  it("Sequential's output is its last child's; a clone (lumus.copy) outlives the next call", function()
    local seq = nn.Sequential(nn.Linear(4, 6, { seed = 1 }), nn.Linear(6, 3, { seed = 2 }))
    local x1, x2 = lumus.ones({ 2, 4 }), lumus.full({ 2, 4 }, -2)
    local y = seq(x1)
    assert.are.equal(seq:get(2).output, y)
    assert.are.equal(seq.output, y)
    local kept = lumus.copy(y)
    local first = y:to_table()
    seq(x2)
    assert.are.same(first, kept:to_table())
    assert.are_not.same(first, y:to_table())
  end)

  it("a module called on its own output gets a new buffer and the right values", function()
    local lin = nn.Linear(5, 5, { seed = 3 })
    local x, xt = random_input({ 2, 5 }, 10)
    local w, b = lin.weight:to_table(), lin.bias:to_table()
    local y = lin(x)
    local z = lin(y)
    assert.are_not.equal(y, z)
    assert.is_false(y:is_freed())
    checks.close(z, ref.linear(ref.linear(xt, w, b), w, b), { mixed = TOL, what = "lin(lin(x))" })
    local ln = nn.LayerNorm(5)
    local u = ln(x)
    checks.close(ln(u), (ref.layer_norm_forward(ref.layer_norm_forward(xt, nil, nil, 1e-5), nil, nil, 1e-5)),
      { mixed = 1e-4, what = "ln(ln(x))" })
    assert.is_false(u:is_freed())
  end)

  if have_elementwise then
    it("an elementwise module called on its own output works in place", function()
      local relu = nn.ReLU()
      local x, xt = random_input({ 3, 4 }, 11)
      local y = relu(x)
      assert.are.equal(y, relu(y))
      checks.close(y, ref.relu(xt), { what = "relu(relu(x))" })
    end)
    it("Residual keeps its own buffer for x + block(x), apart from the block's", function()
      local res = nn.Residual(nn.Linear(4, 4, { seed = 5 }))
      local x = lumus.ones({ 2, 4 })
      local y = res(x)
      assert.are.equal(res.output, y)
      assert.are_not.equal(res.block.output, y)
      assert.are.equal(y, res(x))
    end)
  else
    pending("elementwise reuse: needs lumus.gelu, lumus.relu and lumus.add")
  end

  it("clear_state() releases every output buffer; the next call makes new ones", function()
    local block = nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 16, { seed = 1 }))
    local x = lumus.ones({ 4, 8 })
    without_gc(function()
      local count, bytes = usage()
      local y = block(x)
      local ln = block:get(1)
      local ln_out, ln_mean = ln.output, ln.mean
      assert.are.equal(count + 4, (usage()))     -- LayerNorm's output, mean, invstd; Linear's
      assert.are.equal(block, block:clear_state())
      assert.is_true(y:is_freed() and ln_out:is_freed() and ln_mean:is_freed())
      assert.is_nil(block.output); assert.is_nil(ln.output); assert.is_nil(ln.mean)
      local c, b = usage()
      assert.are.equal(count, c)
      assert.are.equal(bytes, b)
      assert.are.same({ 4, 16 }, block(x):shape())
      assert.are.equal(count + 4, (usage()))
    end)
  end)

  it("an output freed by the caller is replaced on the next call", function()
    local lin = nn.Linear(3, 2, { seed = 1 })
    local x = lumus.ones({ 1, 3 })
    local y = lin(x)
    y:free()
    local z = lin(x)
    assert.are_not.equal(y, z)
    checks.close(z, ref.linear({ { 1, 1, 1 } }, lin.weight:to_table(), lin.bias:to_table()), { mixed = TOL })
  end)
end)
