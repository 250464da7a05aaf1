-- sum, mean, max and min over rows whose length is not a whole number of 16-byte units, read
-- as the aligned units that cover each row with the lanes outside it zero (sums) or an
-- infinity that cannot win (max, min) (MASKED in shaders/reduce.comp; GPUs by default,
-- forced here with tune.reduce{masked = true}).
-- Rows (of at least 128 elements, D % 4 ~= 0) start at every skew within a unit, rows
-- span a few units or thousands (the split dispatch), both row forms (the lanes' tree and the subgroup form). Tolerance: float32
-- 1e-6 * sum|x| of the float64 sum of the values the kernel reads; float16/bfloat16 one
-- unit of the dtype's last place of that sum (the result's one rounding) plus the same.
-- NaN and +-inf stay in their own row: a masked lane holds a neighbour's element. max and
-- min are exact: the value and the first index of it (NaN first), as PyTorch.
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

describe("reductions over rows as masked units", function()
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

  -- The first index of the row's max (min), NaN beyond every number; value and 1-based index.
  local function extreme(row, is_max)
    local bi, bv = 1, row[1]
    for j = 2, #row do
      local v = row[j]
      if bv == bv and (v ~= v or (is_max and v > bv) or (not is_max and v < bv)) then bi, bv = j, v end
    end
    return bv, bi
  end

  local function check_extremes(x, what)
    local xt = x:to("float32"):to_table()
    for _, is_max in ipairs { true, false } do
      local name = is_max and "max" or "min"
      local vals, idx = lumus[name](x, { dim = 2 })
      local vt, it_ = vals:to("float32"):to_table(), idx:to_table()
      local at = (is_max and lumus.argmax or lumus.argmin)(x, { dim = 2 }):to_table()
      for i, row in ipairs(xt) do
        local v, j = extreme(row, is_max)
        local same = (v ~= v and vt[i] ~= vt[i]) or v == vt[i]
        if not same or it_[i] ~= j or at[i] ~= j then
          error(("%s %s %s row %d: got %.9g at %d (arg %d), want %.9g at %d"):format(what, x:dtype(), name, i,
            vt[i], it_[i], at[i], v, j))
        end
      end
    end
  end

  for _, rows_form in ipairs { "lanes", "subgroup" } do
    it("max, min, argmax and argmin match the reference on rows at every skew (" .. rows_form .. ")", function()
      lumus.tune.reduce({ rows = rows_form, masked = true })
      local g = ref.rng(10 + #rows_form)
      for _, dt in ipairs { "float32", "float16", "bfloat16" } do
        for _, shape in ipairs { { 37, 907 }, { 9, 129 }, { 17, 131 }, { 13, 259 }, { 11, 130 }, { 5, 4101 },
                                 { 2, 70001 }, { 1, 133 }, { 33, 227 }, { 12, 9 } } do
          local t = {}
          for i = 1, shape[1] do
            t[i] = {}
            -- a few distinct values, so ties are common (the first index must win)
            for j = 1, shape[2] do t[i][j] = math.floor(g.uniform() * 7) - 3 end
          end
          check_extremes(lumus.tensor(t):to(dt), ("%dx%d"):format(shape[1], shape[2]))
        end
      end
    end)
  end

  it("max and min: lanes outside a row never win, infinities and NaN stay in their row", function()
    lumus.tune.reduce({ masked = true })
    for _, dt in ipairs { "float32", "float16", "bfloat16" } do
      for _, d in ipairs { 9, 129, 131, 261 } do
        local t = {}
        for i = 1, 12 do
          t[i] = {}
          for j = 1, d do t[i][j] = (i * 3 + j) % 5 - 2 end
        end
        for j = 1, d do t[1][j] = -INF; t[3][j] = INF end    -- all -inf: max at 1; all +inf: min at 1
        t[2][1], t[2][d] = 100, 100                          -- a row's ends beside them
        t[4][1], t[4][d] = -100, -100
        t[5][d] = NAN; t[6][1] = NAN; t[6][d] = NAN           -- the first NaN wins both
        t[7][1] = INF; t[7][2] = -INF; t[8][d] = -INF; t[8][d - 1] = INF
        for j = 1, d do t[9][j] = -INF end
        t[9][d] = -100                                       -- max at the last element
        for j = 1, d do t[10][j] = 5 end                     -- all equal: index 1
        check_extremes(lumus.tensor(t):to(dt), ("%s 12x%d"):format(dt, d))
      end
    end
  end)

  it("max and min: a neighbour's lanes in a shared unit never hide the row's own extreme", function()
    -- A row's peak (500) and valley (-500) at every position in turn, the rows between
    -- them all +1000 or -1000: those values sit in the units a row shares with its
    -- neighbours, in the same slots as the row's own elements of the same thread's
    -- other units. Were they taken, the slot's index would leave the row and the slot
    -- be dropped, peak or valley with it.
    lumus.tune.reduce({ masked = true })
    for _, dt in ipairs { "float32", "float16", "bfloat16" } do
      for _, d in ipairs { 131, 259, 1030 } do
        local g = ref.rng(d)
        local t, step = {}, d > 500 and 7 or 1
        for p = 1, d, step do
          local row = {}
          for j = 1, d do row[j] = math.floor(g.uniform() * 9) end
          row[p] = 500
          row[d + 1 - p] = p == d + 1 - p and 500 or -500
          t[#t + 1] = row
          local wall = {}
          for j = 1, d do wall[j] = #t % 4 == 1 and 1000 or -1000 end
          t[#t + 1] = wall
        end
        check_extremes(lumus.tensor(t):to(dt), ("%s %dx%d"):format(dt, #t, d))
      end
    end
  end)

  it("tune.reduce reports and refuses its masked setting", function()
    assert.are.equal("on", lumus.tune.reduce({ masked = true }).masked)
    assert.are.equal("off", lumus.tune.reduce({ masked = false }).masked)
    assert.are.equal("auto", lumus.tune.reduce({}).masked)
    assert.error_matches(function() lumus.tune.reduce({ masked = "yes" }) end, "masked")
  end)
end)
