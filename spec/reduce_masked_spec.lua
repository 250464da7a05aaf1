-- sum and mean over rows whose length is not a whole number of 16-byte units, read as the
-- aligned units that cover each row with the lanes outside it zero (MASKED in
-- shaders/reduce.comp; GPUs by default, forced here with tune.reduce{masked = true}).
-- Rows (of at least 128 elements, D % 4 ~= 0) start at every skew within a unit, rows
-- span a few units or thousands (the split dispatch), both row forms (the lanes' tree and the subgroup form). Tolerance: float32
-- 1e-6 * sum|x| of the float64 sum of the values the kernel reads; float16/bfloat16 one
-- unit of the dtype's last place of that sum (the result's one rounding) plus the same.
-- NaN and +-inf stay in their own row: a masked lane holds a neighbour's element.
local lumus = require "lumus"
local ref = require "lumus.reference"
local NAN, INF = 0 / 0, math.huge
local ULP = { float32 = 0, float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }

local function check_rows(x, what)
  local dt = x:dtype()
  local xt = x:to("float32"):to_table()
  local d = #xt[1]
  for _, mean in ipairs { false, true } do
    local got = (mean and lumus.mean or lumus.sum)(x, { dim = 2 }):to("float32"):to_table()
    for i, row in ipairs(xt) do
      local s, a = 0, 0
      for j = 1, d do s = s + row[j]; a = a + math.abs(row[j]) end
      if mean then s, a = s / d, a / d end
      local bound = ULP[dt] * math.abs(s) + 1e-6 * a
      if not (math.abs(got[i] - s) <= bound) then
        error(("%s %s %s row %d: got %.9g, want %.9g"):format(what, dt, mean and "mean" or "sum", i, got[i], s))
      end
    end
  end
end

describe("sum over rows as masked units", function()
  after_each(function() lumus.tune.reduce({}) end)

  for _, rows_form in ipairs { "lanes", "subgroup" } do
    it("matches the reference on odd, prime and unit-straddling rows (" .. rows_form .. ")", function()
      lumus.tune.reduce({ rows = rows_form, masked = true })
      local g = ref.rng(#rows_form)
      for _, dt in ipairs { "float32", "float16", "bfloat16" } do
        for _, shape in ipairs { { 37, 907 }, { 9, 129 }, { 17, 131 }, { 13, 259 }, { 11, 130 }, { 5, 4101 }, { 3, 1030 },
                                 { 2, 70001 }, { 1, 133 }, { 33, 227 } } do
          local t = {}
          for i = 1, shape[1] do
            t[i] = {}
            for j = 1, shape[2] do t[i][j] = (g.uniform() - (shape[2] > 1000 and 0.5 or 0.3)) * 8 end
          end
          check_rows(lumus.tensor(t):to(dt), ("%dx%d"):format(shape[1], shape[2]))
        end
      end
    end)
  end

  it("keeps NaN, +inf, -inf and overflow to their own rows", function()
    lumus.tune.reduce({ masked = true })
    for _, dt in ipairs { "float32", "float16" } do
      for _, d in ipairs { 129, 131, 261 } do
        local t = {}
        for i = 1, 9 do
          t[i] = {}
          for j = 1, d do t[i][j] = (i + j) % 5 - 2 end
        end
        t[2][1] = NAN; t[4][d] = INF; t[6][1] = -INF; t[8][2] = INF; t[8][d] = -INF
        local big = dt == "float32" and 3e38 or 60000
        for j = 1, d do t[9][j] = big end   -- the sum overflows: +inf
        local x = lumus.tensor(t):to(dt)
        local got = lumus.sum(x, { dim = 2 }):to("float32"):to_table()
        for _, i in ipairs { 2, 8 } do assert.is_true(got[i] ~= got[i], dt .. " row " .. i .. " NaN") end
        assert.are.equal(INF, got[4]); assert.are.equal(-INF, got[6]); assert.are.equal(INF, got[9])
        for _, i in ipairs { 1, 3, 5, 7 } do
          local s = 0
          for j = 1, d do s = s + t[i][j] end
          assert.are.equal(s, got[i], dt .. " row " .. i)
        end
      end
    end
  end)

  it("reads a view that does not start on 16 bytes element by element, still right", function()
    lumus.tune.reduce({ masked = true })
    local base = lumus.arange(0, 7 * 129):float():reshape({ 7, 129 })
    local x = base:narrow(1, 2, 5)   -- starts 129 floats in
    local want = {}
    for i = 1, 5 do
      local s = 0
      for j = 1, 129 do s = s + (i * 129 + j - 1) end
      want[i] = s
    end
    assert.are.same(want, lumus.sum(x, { dim = 2 }):to_table())
  end)

  it("tune.reduce reports and refuses its masked setting", function()
    assert.are.equal("on", lumus.tune.reduce({ masked = true }).masked)
    assert.are.equal("off", lumus.tune.reduce({ masked = false }).masked)
    assert.are.equal("auto", lumus.tune.reduce({}).masked)
    assert.error_matches(function() lumus.tune.reduce({ masked = "yes" }) end, "masked")
  end)
end)
