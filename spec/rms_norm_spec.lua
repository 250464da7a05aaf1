-- lumus.rms_norm against the float64 reference. Tolerance (mixed, |got - want| <=
-- tol * max(1, |want|)): float32 2e-6 (float32 sum of squares and rsqrt); float16 and
-- bfloat16: one rounding of the output (2^-11, 2^-8 relative) on top, from the rounded
-- inputs.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local NAN, INF = 0 / 0, math.huge

local TOL = { float32 = 2e-6, float16 = 1.5e-3, bfloat16 = 1.2e-2 }

local g = ref.rng(3031)
local function randt(shape, dtype)
  local t = lumus.tensor(ref.random_table(shape, g.normal), dtype and { dtype = dtype } or nil)
  return t, t:to_table()
end

describe("rms_norm", function()
  it("matches the reference over row lengths and counts, with and without weight", function()
    for _, shape in ipairs { { 1 }, { 3 }, { 5, 1 }, { 2, 4 }, { 3, 7 }, { 2, 3, 64 }, { 17, 257 }, { 4, 1024 },
                             { 2, 4099 }, { 1, 10000 }, { 300, 12 } } do
      local d = shape[#shape]
      local x, xt = randt(shape)
      local w, wt = randt { d }
      local what = table.concat(shape, "x")
      checks.close(lumus.rms_norm(x, w), ref.rms_norm(xt, wt), { mixed = TOL.float32, what = what })
      checks.close(lumus.rms_norm(x), ref.rms_norm(xt), { mixed = TOL.float32, what = what .. " no weight" })
      checks.close(x:rms_norm(nil, { eps = 0.5 }), ref.rms_norm(xt, nil, 0.5), { mixed = TOL.float32, what = what .. " eps" })
      checks.close(lumus.rms_norm(x, { eps = 1e-2 }), ref.rms_norm(xt, nil, 1e-2), { mixed = TOL.float32, what = what .. " opts only" })
    end
  end)

  it("uses eps = 1e-6 by default", function()
    local x = lumus.tensor { { 1e-3, -1e-3 } }
    -- mean square 1e-6: y = 1e-3 / sqrt(2e-6)
    checks.close(lumus.rms_norm(x), { { 1e-3 / math.sqrt(2e-6), -1e-3 / math.sqrt(2e-6) } }, { rel = 1e-6 })
  end)

  it("works in float16 and bfloat16 with float32 math", function()
    for _, dtype in ipairs { "float16", "bfloat16" } do
      for _, shape in ipairs { { 3, 8 }, { 5, 13 }, { 2, 768 }, { 1, 5000 } } do
        local x, xt = randt(shape, dtype)
        local w, wt = randt({ shape[2] }, dtype)
        local y = lumus.rms_norm(x, w)
        assert.are.equal(dtype, y:dtype())
        checks.close(y, ref.rms_norm(xt, wt), { mixed = TOL[dtype], what = dtype .. " " .. table.concat(shape, "x") })
      end
    end
  end)

  it("writes out, in place, and reads views through a copy", function()
    local x, xt = randt { 6, 10 }
    local w, wt = randt { 10 }
    local want = ref.rms_norm(xt, wt)
    local out = lumus.zeros { 6, 10 }
    assert.are.equal(out, lumus.rms_norm(x, w, { out = out }))
    checks.close(out, want, { mixed = TOL.float32 })
    local xv, xvt = randt { 10, 6 }
    local tt = {}
    for i = 1, 6 do tt[i] = {} for j = 1, 10 do tt[i][j] = xvt[j][i] end end
    checks.close(lumus.rms_norm(xv:transpose(1, 2), w), ref.rms_norm(tt, wt), { mixed = TOL.float32, what = "view" })
    lumus.rms_norm(x, w, { out = x })
    checks.close(x, want, { mixed = TOL.float32, what = "in place" })
  end)

  it("gives NaN for a row with NaN or inf, as PyTorch, and leaves other rows alone", function()
    local xt = { { 1, NAN, 2 }, { 1, INF, 2 }, { 3, 4, 5 } }
    local y = lumus.rms_norm(lumus.tensor(xt)):to_table()
    for j = 1, 3 do assert.is_true(y[1][j] ~= y[1][j]) end
    assert.is_true(y[2][1] == 0 and y[2][3] == 0 and y[2][2] ~= y[2][2])   -- inf / inf: NaN; finite / inf: 0
    checks.close(y[3], ref.rms_norm({ { 3, 4, 5 } })[1], { mixed = TOL.float32 })
  end)

  it("raises clear errors for bad arguments", function()
    local x = lumus.zeros { 2, 4 }
    checks.errors(lumus.rms_norm, "#2.*weight must be 1%-D of x's last dimension %(4%)", x, lumus.zeros { 3 })
    checks.errors(lumus.rms_norm, "#2.*weight must have x's dtype %(float32%), got float16", x, lumus.zeros({ 4 }):half())
    checks.errors(lumus.rms_norm, "#1.*x must be float32, float16 or bfloat16, got int32", x:int())
    checks.errors(lumus.rms_norm, "#3.*eps must be a finite number >= 0", x, nil, { eps = -1 })
    checks.errors(lumus.rms_norm, "#3.*unknown option 'epsilon'", x, nil, { epsilon = 1 })
    checks.errors(lumus.rms_norm, "#3.*out", x, nil, { out = lumus.zeros { 4, 2 } })
    checks.errors(lumus.rms_norm, "#2.*tensor expected", x, 5)
  end)
end)
