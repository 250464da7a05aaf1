-- Autograd's errors instead of wrong gradients, for the ops added with the full backward
-- coverage (spec/autograd_spec.lua has the tape's own rules): a changed saved tensor, a
-- freed graph, in-place writers on tracked tensors, out= options, and memory back to its
-- baseline once backward has used the saved tensors.
local lumus = require "lumus"
local compat = require "lumus.compat"
local checks = dofile("spec/support/check.lua")

lumus.ones({ 1 }):requires_grad(true)

local function ids(list) return lumus.tensor(list, { dtype = "int32" }) end

describe("autograd rules for the added ops", function()
  it("refuses a backward through a saved tensor changed in place since", function()
    local x = lumus.tensor({ 0.5, 1, 2 }):requires_grad(true)
    local y = lumus.exp(x)             -- exp saves its result
    local loss = y:sum()
    lumus.no_grad(function() y:write_bytes(compat.pack_bytes("f32", { 7 })) end)
    checks.errors(loss.backward, "backward: a tensor saved by exp %(y%) has been modified in place", loss)
    local w = lumus.tensor({ { 1, 2 }, { 3, 4 } }):requires_grad(true)
    local logits = lumus.tensor({ { 1, 2 }, { 0, 1 } })
    local ce = lumus.cross_entropy(logits:matmul(w), ids({ 1, 2 }))
    ce:backward(nil, { retain_graph = true })
    ce:backward()
    checks.errors(ce.backward, "backward: the graph has been freed", ce)
  end)

  it("refuses in-place writers and out= on tracked tensors while recording", function()
    local x = lumus.tensor({ 1, 2, 3 }):requires_grad(true)
    checks.errors(x.write_bytes, "write_bytes: t requires grad; in%-place writes are not recorded", x, compat.pack_bytes("f32", { 1 }))
    checks.errors(x.uniform_, "uniform_: t requires grad", x)
    checks.errors(x.normal_, "normal_: t requires grad", x)
    checks.errors(lumus.max, "max: option indices cannot be used on tensors that require grad", x,
      { dim = 1, indices = lumus.zeros({ 1 }, { dtype = "int32" }) })
    checks.errors(lumus.index_add, "index_add: option out cannot be used", lumus.zeros({ 3 }), 1, ids({ 1 }), x:narrow(1, 1, 1),
      { out = lumus.zeros({ 3 }) })
    -- second-order backward is refused, not dropped
    local _, lse = lumus.no_grad(lumus.cross_entropy_forward, lumus.zeros({ 1, 3 }), ids({ 1 }))
    checks.errors(lumus.cross_entropy_backward, "cross_entropy_backward: no backward is registered", x:narrow(1, 1, 1), x:reshape({ 1, 3 }), ids({ 1 }), lse)
    -- inside no_grad they run
    lumus.no_grad(function() x:uniform_() end)
  end)

  it("releases what the new ops saved (memory back to baseline)", function()
    checks.settle()
    local base = lumus.memory().in_use
    do
      local w = lumus.randn({ 16, 8 }):requires_grad(true)
      local e = lumus.randn({ 10, 16 }):requires_grad(true)
      for _ = 1, 3 do
        local h = lumus.embedding(ids({ 1, 5, 5, 9, 2, 10 }), e)
        local z = lumus.cat({ h:matmul(w):tanh(), h:narrow(2, 1, 8):sigmoid() }, 1)
        local loss = lumus.cross_entropy(z, ids({ 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4 }))
          + lumus.binary_cross_entropy_with_logits(z, lumus.zeros({ 12, 8 }))
          + lumus.mse_loss(z:max({ dim = 2 }), lumus.zeros({ 12 }))
        loss:backward()
      end
      assert.are.same({ 10, 16 }, e:grad():shape())
      w:requires_grad(false)
      e:requires_grad(false)
    end
    -- On 5.1 and LuaJIT weak-key tables are not ephemerons: the tape's entries free one
    -- level of the graph per cycle, so collect until nothing more goes.
    checks.settle()
    assert.are.equal(base, lumus.memory().in_use)
  end)
end)
