-- softmax and log_softmax over a non-last dimension whose r is short enough that each
-- thread holds its rows in registers (the held form: x read once), against the
-- streaming form forced through lumus.tune.softmax_cols. Tolerances as
-- spec/softmax_split_spec.lua: softmax 1e-5 |want| + 1e-6; log_softmax 2e-6 max(1, |want|).
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local NAN, INF = 0 / 0, math.huge

local columns = dofile("spec/support/softmax_columns.lua")
local check_both = columns.check_both

describe("softmax over a short non-last dimension (held form)", function()
  after_each(function() lumus.tune.softmax_cols({ form = "auto", long_rows = "auto" }) end)

  it("reports and checks its form setting", function()
    assert.are.equal("auto", lumus.tune.softmax_cols().form)
    assert.are.equal("stream", lumus.tune.softmax_cols({ form = "stream" }).form)
    assert.are.equal("held", lumus.tune.softmax_cols({ form = "held" }).form)
    assert.has_error(function() lumus.tune.softmax_cols({ form = "fast" }) end,
      'bad argument #1 to \'softmax_cols\' (form must be "auto", "stream" or "held")')
  end)

  for _, form in ipairs { "held", "stream" } do
    it("matches the reference on a seeded sweep of shapes (" .. form .. ")", function()
      lumus.tune.softmax_cols({ form = form })
      local g = ref.rng(form == "held" and 2301 or 2302)
      -- fixed edges (r of 1, one row short of a power of two, the most rows held; 4 and
      -- 1 adjacent columns per thread), then random shapes
      local cases = { { { 1, 64 }, 1 }, { { 31, 8 }, 1 }, { { 4, 1023, 8 }, 2 }, { { 64, 7, 9 }, 2 },
                      { { 3, 2048, 8 }, 2 }, { { 17, 5, 3, 4 }, 2 } }
      for _ = 1, 8 do
        local function int(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end
        local r, inner, outer = int(1, 300), int(2, 40), int(1, 6)
        cases[#cases + 1] = { { outer, r, inner }, 2 }
      end
      for _, case in ipairs(cases) do
        local shape, dim = case[1], case[2]
        local xt = ref.random_table(shape, function() return (g.uniform() - 0.5) * 40 end)
        local x = lumus.tensor(xt)
        check_both(x, xt, { dim = dim }, form .. " " .. table.concat(shape, "x"))
        x:free()
      end
    end)
  end

  for _, cols in ipairs { 10, 8 } do   -- one column per thread; 4 adjacent columns per thread
    it("follows PyTorch on NaN and infinities and is deterministic (" .. cols .. " columns)", function()
      columns.special_columns(200, cols, 150, 199)   -- the max in the last row a thread holds
    end)
  end

  it("takes few long rows by the column kernel's split form when told, or by the row kernel", function()
    assert.are.equal("cols", lumus.tune.softmax_cols({ long_rows = "cols" }).long_rows)
    assert.has_error(function() lumus.tune.softmax_cols({ long_rows = "fast" }) end,
      'bad argument #1 to \'softmax_cols\' (long_rows must be "auto", "row", "cols" or "split", got "fast")')
    local g = ref.rng(2305)
    for _, long_rows in ipairs { "cols", "row" } do
      lumus.tune.softmax_cols({ long_rows = long_rows })
      for _, shape in ipairs { { 2, 70001 }, { 65536 }, { 3, 65540, 1 } } do
        local xt = ref.random_table(shape, function() return (g.uniform() - 0.5) * 40 end)
        local x = lumus.tensor(xt)
        check_both(x, xt, { dim = #shape == 3 and 2 or -1 }, long_rows .. " " .. table.concat(shape, "x"))
        x:free()
      end
    end
    -- specials in one long row: NaN late, a row of -inf with a finite max, in place
    local xt = { {}, {} }
    for i = 1, 70000 do xt[1][i] = math.sin(i * 0.001) * 5; xt[2][i] = (i % 3 == 0) and -INF or i * 1e-4 end
    xt[1][69999] = NAN
    lumus.tune.softmax_cols({ long_rows = "cols" })
    local x = lumus.tensor(xt)
    local a = lumus.softmax(x):to_table()
    assert.is_true(a[1][1] ~= a[1][1] and a[1][70000] ~= a[1][70000])
    assert.are.equal(0, a[2][3])
    lumus.softmax(x, { out = x })
    checks.close(x, ref.softmax(xt), { rel = 1e-5, abs = 1e-6, what = "softmax long rows in place" })
    x:free()
  end)

  it("works in place and in float16 and bfloat16", function()
    local xt = ref.random_table({ 300, 16 }, ref.rng(2303))
    local y = lumus.tensor(xt)
    lumus.softmax(y, { dim = 1, out = y })
    checks.close(y, ref.softmax(xt, { dim = 1 }), { rel = 1e-5, abs = 1e-6, what = "softmax in place" })
    local z = lumus.tensor(xt)
    z:log_softmax({ dim = 1, out = z })
    checks.close(z, ref.log_softmax(xt, { dim = 1 }), { mixed = 2e-6, what = "log_softmax in place" })
    local x8t = ref.random_table({ 500, 32 }, ref.rng(2304))
    -- 16-bit inputs stream under "auto": "held" forces the held form for them
    for _, form in ipairs { "auto", "held" } do
      lumus.tune.softmax_cols({ form = form })
      for _, dt in ipairs { "float16", "bfloat16" } do
        local x8 = lumus.tensor(x8t):to(dt)
        local xr = x8:to("float32"):to_table()
        local tol = dt == "float16" and 1e-3 or 8e-3
        checks.close(lumus.softmax(x8, { dim = 1 }):to("float32"), ref.softmax(xr, { dim = 1 }),
          { rel = tol, abs = tol * 1e-2, what = "softmax " .. dt .. " " .. form })
        checks.close(lumus.log_softmax(x8, { dim = 1 }):to("float32"), ref.log_softmax(xr, { dim = 1 }),
          { mixed = tol, what = "log_softmax " .. dt .. " " .. form })
      end
    end
  end)
end)
