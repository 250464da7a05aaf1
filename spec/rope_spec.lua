-- lumus.rope against the float64 reference. Tolerance: float32 |got - want| <= 2e-6 *
-- max(1, |want|) + 1e-6 * (|a| + |b|) of the pair, at any position below 2^24 (the angles
-- are computed in double-float, reduced mod 2 pi before cos and sin); float16 and
-- bfloat16 add one rounding of the output.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local TOL = { float32 = 4e-6, float16 = 1.5e-3, bfloat16 = 1.2e-2 }

local g = ref.rng(4242)
local function randt(shape, dtype)
  local t = lumus.tensor(ref.random_table(shape, g.normal), dtype and { dtype = dtype } or nil)
  return t, t:to_table()
end

describe("rope", function()
  it("matches the reference, rotate-half and interleaved, over shapes and offsets", function()
    for _, c in ipairs {
      { { 3, 2 }, 0 }, { { 5, 8 }, 0 }, { { 2, 3, 7, 64 }, 0 }, { { 1, 2, 9, 6 }, 5 }, { { 1, 4, 1, 128 }, 1023 },
      { { 2, 33, 10 }, 100000 }, { { 1, 1, 3, 256 }, 16777000 }, { { 70, 2 }, 3 },
    } do
      local shape, offset = c[1], c[2]
      local x, xt = randt(shape)
      for _, il in ipairs { false, true } do
        local opts = { offset = offset, interleaved = il }
        checks.close(lumus.rope(x, opts), ref.rope(xt, opts),
                     { mixed = TOL.float32, what = ("%s offset %d interleaved %s"):format(table.concat(shape, "x"), offset, tostring(il)) })
      end
    end
  end)

  it("takes base, out, in place and views", function()
    local x, xt = randt { 2, 5, 16 }
    checks.close(x:rope({ base = 500000 }), ref.rope(xt, { base = 500000 }), { mixed = TOL.float32, what = "base" })
    checks.close(lumus.rope(x), ref.rope(xt), { mixed = TOL.float32, what = "default" })
    local out = lumus.zeros { 2, 5, 16 }
    assert.are.equal(out, lumus.rope(x, { out = out, offset = 7 }))
    checks.close(out, ref.rope(xt, { offset = 7 }), { mixed = TOL.float32, what = "out" })
    -- heads split from [B, T, H, hd] by transpose: a copy, positions along T
    local y, yt = randt { 1, 6, 3, 8 }
    local tt = { {} }
    for h = 1, 3 do tt[1][h] = {} for t = 1, 6 do tt[1][h][t] = yt[1][t][h] end end
    checks.close(lumus.rope(y:transpose(2, 3), { offset = 2 }), ref.rope(tt, { offset = 2 }), { mixed = TOL.float32, what = "view" })
    lumus.rope(x, { out = x })
    checks.close(x, ref.rope(xt), { mixed = TOL.float32, what = "in place" })
  end)

  it("works in float16 and bfloat16", function()
    for _, dtype in ipairs { "float16", "bfloat16" } do
      local x, xt = randt({ 2, 9, 64 }, dtype)
      local y = lumus.rope(x, { offset = 300 })
      assert.are.equal(dtype, y:dtype())
      checks.close(y, ref.rope(xt, { offset = 300 }), { mixed = TOL[dtype], what = dtype })
    end
  end)

  it("raises clear errors for bad arguments", function()
    local x = lumus.zeros { 2, 3, 8 }
    checks.errors(lumus.rope, "#1.*hd%) must be even, got 5", lumus.zeros { 2, 5 })
    checks.errors(lumus.rope, "#1.*x must be at least 2%-D", lumus.zeros { 8 })
    checks.errors(lumus.rope, "#1.*x must be float32, float16 or bfloat16, got int32", x:int())
    checks.errors(lumus.rope, "#2.*offset must be >= 0", x, { offset = -1 })
    checks.errors(lumus.rope, "#2.*offset must be an integer", x, { offset = 1.5 })
    checks.errors(lumus.rope, "#2.*base must be a finite number > 0", x, { base = 0 })
    checks.errors(lumus.rope, "#2.*positions must stay below 2%^24", x, { offset = 16777215 })
    checks.errors(lumus.rope, "#2.*unknown option 'theta'", x, { theta = 1 })
    checks.errors(lumus.rope, "#2.*interleaved must be a boolean", x, { interleaved = 1 })
    checks.errors(lumus.rope, "#2.*out", x, { out = lumus.zeros { 2, 3, 4 } })
  end)
end)
