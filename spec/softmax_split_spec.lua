-- softmax and log_softmax over a non-last dimension with few columns and a long r: the
-- column kernel splits r over workgroups (per-chunk (max, sum) pairs, then each chunk's
-- outputs from all of its column's pairs). Tolerances as spec/reductions_spec.lua:
-- softmax 1e-5 |want| + 1e-6; log_softmax 2e-6 max(1, |want|).
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local columns = dofile("spec/support/softmax_columns.lua")
local check_both = columns.check_both

describe("softmax over a long non-last dimension of few columns", function()
  it("matches the reference when r is split over workgroups", function()
    local g = ref.rng(2201)
    for _, case in ipairs {
      { { 4096, 4 }, 1 }, { { 20011, 3 }, 1 }, { { 2, 9001, 5 }, 2 }, { { 5000, 2, 3 }, 1 },
      { { 3, 7001, 64 }, 2 }, { { 1, 12345, 2 }, 2 },
    } do
      local shape, dim = case[1], case[2]
      -- values spread wide enough that the chunks' maxima differ
      local xt = ref.random_table(shape, function() return (g.uniform() - 0.5) * 40 end)
      local x = lumus.tensor(xt)
      check_both(x, xt, { dim = dim }, table.concat(shape, "x"))
      x:free()
    end
  end)

  for _, cols in ipairs { 6, 8 } do   -- one column per thread; 4 adjacent columns per thread
  it("follows PyTorch on NaN and infinities in any chunk, and is deterministic (" .. cols .. " columns)", function()
    columns.special_columns(6000, cols, 5000, 5999)   -- the max in the last chunk
  end)
  end

  it("matches the reference over 4 adjacent columns per thread without a split", function()
    local g = ref.rng(2203)
    for _, shape in ipairs { { 64, 3, 8 }, { 200, 5, 4 }, { 7, 33, 12 } } do
      local xt = ref.random_table(shape, function() return (g.uniform() - 0.5) * 40 end)
      local x = lumus.tensor(xt)
      check_both(x, xt, { dim = 2 }, table.concat(shape, "x"))
      check_both(x, xt, { dim = 1 }, table.concat(shape, "x") .. " dim 1")
      x:free()
    end
  end)

  it("works in place and in float16 and bfloat16", function()
    local xt = ref.random_table({ 8192, 3 }, ref.rng(2202))
    local y = lumus.tensor(xt)
    lumus.softmax(y, { dim = 1, out = y })
    checks.close(y, ref.softmax(xt, { dim = 1 }), { rel = 1e-5, abs = 1e-6, what = "softmax in place" })
    local z = lumus.tensor(xt)
    z:log_softmax({ dim = 1, out = z })
    checks.close(z, ref.log_softmax(xt, { dim = 1 }), { mixed = 2e-6, what = "log_softmax in place" })
    local x8t = ref.random_table({ 4096, 8 }, ref.rng(2204))
    for _, dt in ipairs { "float16", "bfloat16" } do
      local x8 = lumus.tensor(x8t):to(dt)
      local x8r = x8:to("float32"):to_table()
      local tol8 = dt == "float16" and 2 ^ -10 or 2 ^ -7
      checks.close(lumus.log_softmax(x8, { dim = 1 }):to("float32"), ref.log_softmax(x8r, { dim = 1 }),
        { mixed = tol8, what = "log_softmax 8 columns " .. dt })
      checks.close(lumus.softmax(x8, { dim = 1 }):to("float32"), ref.softmax(x8r, { dim = 1 }),
        { rel = tol8, abs = 1e-6, what = "softmax 8 columns " .. dt })
      local x = lumus.tensor(xt):to(dt)
      local xr = x:to("float32"):to_table()
      local tol = dt == "float16" and 2 ^ -10 or 2 ^ -7
      checks.close(lumus.softmax(x, { dim = 1 }):to("float32"), ref.softmax(xr, { dim = 1 }),
        { rel = tol, abs = 1e-6, what = "softmax " .. dt })
    end
  end)
end)
