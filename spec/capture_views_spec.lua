-- lumus.capture of ops that dispatch a view they make in C (matmul's transposed
-- operand, a conversion's source): the graph holds the storage through a tensor over the
-- same memory on the Lua stack (src/capture.c), and replays give the eager bits.
local lumus = require "lumus"

describe("lumus.capture of ops that make views in C", function()
  it("matmul with transpose_b and a dtype conversion replay the eager results", function()
    local a = lumus.arange(0, 24, { dtype = "float32" }):view({ 4, 6 }):mul(0.25)
    local b = lumus.arange(0, 30, { dtype = "float32" }):view({ 5, 6 }):mul(-0.5):add(3)
    local function f()
      local y = lumus.matmul(a, b, { transpose_b = true })      -- [4, 5]
      return y, y:to("float16"), b:narrow(1, 2, 3):to("bfloat16")
    end
    local e1, e2, e3 = f()
    local want = { e1:to_bytes(), e2:to_bytes(), e3:to_bytes() }
    local g, y1, y2, y3 = lumus.capture(f)
    g:replay()
    assert.is_true(want[1] == y1:to_bytes())
    assert.is_true(want[2] == y2:to_bytes())
    assert.is_true(want[3] == y3:to_bytes())
    -- inputs written between replays are seen
    a:fill(1)
    g:replay()
    local ones = lumus.matmul(lumus.ones({ 4, 6 }), b, { transpose_b = true })
    assert.is_true(ones:to_bytes() == y1:to_bytes())
    g:free()
  end)
end)
