-- nn modules called again with the same input tensor take a short path (the options
-- table of the last call, no shape checks). It must behave as the full path: see
-- parameters and options changed since, replace an output freed since, and keep no
-- input alive. Results are compared bit for bit with a fresh module's.
local lumus = require "lumus"
local nn = lumus.nn

local function input(rows, d, k)
  local t = {}
  for r = 1, rows do
    local row = {}
    for c = 1, d do row[c] = math.cos(0.3 * r + 0.7 * c + k) end
    t[r] = row
  end
  return lumus.tensor(t)
end

describe("nn modules called with the same input again", function()
  it("see new parameters and options", function()
    local x = input(4, 8, 0)
    local lin = nn.Linear(8, 8, { seed = 1 })
    local y1 = lin(x):to_bytes()
    lin.weight = nn.Linear(8, 8, { seed = 2 }).weight
    local other = nn.Linear(8, 8, { seed = 2 })
    other.bias = lin.bias
    assert.equal(other(x):to_bytes(), lin(x):to_bytes())
    assert.not_equal(y1, lin(x):to_bytes())

    local g = nn.GELU({ approximate = "tanh" })
    local tanh = g(x):to_bytes()
    g.approximate = "none"
    assert.equal(nn.GELU()(x):to_bytes(), g(x):to_bytes())
    assert.not_equal(tanh, g(x):to_bytes())

    local ln = nn.LayerNorm(8)
    ln(x)
    ln.eps = 0.5
    assert.equal(nn.LayerNorm(8, { eps = 0.5 })(x):to_bytes(), ln(x):to_bytes())
  end)

  it("replace outputs freed since the last call", function()
    local x = input(4, 8, 1)
    local ln = nn.LayerNorm(8)
    local y = ln(x)
    local expect = y:to_bytes()
    ln.mean:free()
    local y2 = ln(x)
    assert.is_false(ln.mean:is_freed())
    assert.equal(expect, y2:to_bytes())
    y2:free()
    assert.equal(expect, ln(x):to_bytes())
    local g = nn.GELU()
    g(x):free()
    assert.equal(nn.GELU()(x):to_bytes(), g(x):to_bytes())
  end)

  it("raise for a freed input as the ops do", function()
    local x = input(4, 8, 2)
    local lin = nn.Linear(8, 8)
    lin(x)
    x:free()
    local ok, err = pcall(lin.forward, lin, x)
    assert.is_false(ok)
    assert.matches("tensor has been freed", tostring(err))
  end)

  it("keep no input alive", function()
    local lin = nn.Linear(8, 8)
    local weak = setmetatable({}, { __mode = "v" })
    do
      local x = input(4, 8, 3)
      lin(x)
      lin(x)
      weak[1] = x
    end
    collectgarbage(); collectgarbage()
    assert.is_nil(weak[1])
  end)
end)
