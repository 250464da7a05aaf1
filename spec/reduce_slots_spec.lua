-- var, max, min, argmax, argmin keep one state per element of a load (4 of a vec4 row
-- load, 8 of a 16-bit one, 4 adjacent columns), combined at the end: NaN, ties and +-inf
-- in different slots of the same thread, slots that never see a number beyond their
-- start (all -inf), and threads with no elements must still give PyTorch's results.
-- var takes the values without NaN, infinities and the +-500 (float16's range).
-- A seeded sweep of shapes that select every load width (rows a multiple of 8, of 4,
-- odd and prime; columns a multiple of 4 or not), float32 and float16.
-- Rows run in both row forms (the lanes' tree and the subgroup form, tune.reduce).
-- Tolerances: max/min/argmax/argmin exact (values and 1-based indices); var rel 1e-5 +
-- 1e-6 * sum(x^2)/count (float32), plus one rounding of the result in float16; var of
-- values offset by 1000 (a mean far from zero): rel 1e-4.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local NAN, INF = 0 / 0, math.huge

local function check_extremes(x, xt, dim, what)
  for _, name in ipairs { "max", "min" } do
    local v, i = lumus[name](x, { dim = dim })
    local wv, wi = ref[name](xt, { dim = dim })
    checks.same_values(checks.flat(v:to("float32")), ref.flatten(wv), name .. " " .. what)
    assert.are.same(ref.flatten(wi), checks.flat(i), name .. " indices " .. what)
  end
  for _, name in ipairs { "argmax", "argmin" } do
    assert.are.same(ref.flatten(ref[name](xt, { dim = dim })), checks.flat(lumus[name](x, { dim = dim })),
      name .. " " .. what)
  end
end

local function check_var(x, xt, dim, what, rel)
  local want = ref.var(xt, { dim = dim })
  local sq = ref.flatten(ref.mean(ref.map(xt, function(v) return v * v end), { dim = dim }))
  local bound = {}
  local narrow = x:dtype() == "float16" and 2 ^ -11 or 0
  for i, w in ipairs(ref.flatten(want)) do
    bound[i] = (rel or 1e-5) * math.abs(w) + (rel and 0 or 1e-6 * sq[i]) + narrow * math.abs(w)
  end
  checks.close(lumus.var(x, { dim = dim }):to("float32"), want, { abs = bound, what = "var " .. what })
end

-- rows x d values: small integers (ties) or spread numbers, with specials in chosen slots.
local function make(g, rows, d, ties)
  local t = {}
  for k = 1, rows do
    t[k] = {}
    for i = 1, d do
      t[k][i] = ties and math.floor(g.uniform() * 5) - 2 or (g.uniform() - 0.5) * 64
    end
  end
  local function at(k, i) if k <= rows and i >= 1 and i <= d then return true end end
  -- NaNs in two slots, the later slot first in the row: the first NaN by index wins
  if at(1, 7) then t[1][7] = NAN end
  if at(1, 6) then t[1][math.max(1, d - 2)] = NAN end
  -- a tie of the row's extreme in slot 3 and later in slot 1: the lower index
  if at(2, 4) then t[2][4] = 500; t[2][d] = 500; t[2][math.max(1, d - 7)] = -500; t[2][3] = -500 end
  -- only -inf (every slot keeps its start): index 1 for both max and min
  if rows >= 3 then for i = 1, d do t[3][i] = -INF end end
  -- +inf and -inf in different slots
  if at(4, 2) then t[4][2] = INF; t[4][d] = -INF end
  if at(4, 5) then t[4][5] = INF end
  -- a NaN in the very first element
  if rows >= 5 then t[5][1] = NAN end
  -- a random NaN anywhere
  if rows >= 6 then t[6][math.floor(g.uniform() * d) + 1] = NAN end
  return t
end

local function transpose(t)
  local c = {}
  for i = 1, #t[1] do
    c[i] = {}
    for k = 1, #t do c[i][k] = t[k][i] end
  end
  return c
end

-- sum over rows within 1e-6 of the sum of |x| (plus one float16 rounding of the result).
local function check_sum(x, xt, what)
  local want = ref.flatten(ref.sum(xt, { dim = 2 }))
  local mags = ref.flatten(ref.sum(ref.map(xt, math.abs), { dim = 2 }))
  local narrow = x:dtype() == "float16" and 2 ^ -11 or 0
  local bound = {}
  for i, w in ipairs(want) do bound[i] = 1e-6 * mags[i] + narrow * math.abs(w) end
  checks.close(lumus.sum(x, { dim = 2 }):to("float32"), want, { abs = bound, what = "sum " .. what })
end

-- Rows reduce in the lanes' shared-memory tree (tune.reduce rows "lanes"), in the subgroup
-- form where the device allows it ("subgroup"), staged through shared memory where they
-- fit ("tile"), or per op and length ("auto", the default): the sweep runs each.
local ROW_FORMS = { "auto", "lanes", "subgroup", "tile" }

describe("reductions with per-slot states", function()
  after_each(function() lumus.tune.reduce({}) end)

  it("tune.reduce reports and forces the row form, and refuses what it does not know", function()
    local c = lumus.tune.reduce()
    assert.are.equal("auto", c.rows)
    assert.are.equal("boolean", type(c.subgroup))
    assert.are.equal("subgroup", lumus.tune.reduce({ rows = "subgroup" }).rows)
    assert.are.equal("lanes", lumus.tune.reduce({ rows = "lanes" }).rows)
    assert.are.equal("auto", lumus.tune.reduce({}).rows)
    assert.are.equal("tile", lumus.tune.reduce({ rows = "tile" }).rows)
    checks.errors(function() lumus.tune.reduce({ rows = "fast" }) end,
      "rows must be \"auto\", \"lanes\", \"subgroup\" or \"tile\"")
    checks.errors(function() lumus.tune.reduce({ form = "auto" }) end, "form")
  end)

  for _, form in ipairs(ROW_FORMS) do
  it("match the reference on a seeded sweep of row and column shapes (rows: " .. form .. ")", function()
    lumus.tune.reduce({ rows = form })
    local g = ref.rng(1515)
    local dtypes = { "float32" }
    if lumus.device().narrow_storage then dtypes[2] = "float16" end
    for case = 1, 18 do
      local pick = case % 4
      local d = pick == 0 and 8 * (math.floor(g.uniform() * 300) + 1)       -- 8-wide loads
             or pick == 1 and 4 * (math.floor(g.uniform() * 600) + 1) + 4   -- 4-wide (or 8)
             or pick == 2 and ({ 3, 5, 13, 97, 1031, 2053 })[math.floor(g.uniform() * 6) + 1]   -- 1-wide
             or 4 * (math.floor(g.uniform() * 40) + 1)                      -- short rows
      local rows = math.floor(g.uniform() * 9) + 1
      local ties = case % 3 == 0
      local t = make(g, rows, d, ties)
      for _, dt in ipairs(dtypes) do
        local x = lumus.tensor(t, { dtype = dt })
        local xt = x:to("float32"):to_table()
        local what = ("%s %dx%d%s"):format(dt, rows, d, ties and " ties" or "")
        check_extremes(x, xt, 2, what)
        -- the same values as d rows of `rows` columns: columns 4 at a time when rows % 4 == 0
        local xc = lumus.tensor(transpose(xt), { dtype = dt })
        local xct = transpose(xt)
        check_extremes(xc, xct, 1, what .. " as columns")
        -- var where the values have no NaN or infinity
        local clean = ref.map(xt, function(v) return (v ~= v or math.abs(v) > 100) and 1 or v end)
        local xv = lumus.tensor(clean, { dtype = dt })
        local cleant = xv:to("float32"):to_table()
        check_var(xv, cleant, 2, what)
        local xvc = lumus.tensor(transpose(cleant), { dtype = dt })
        check_var(xvc, transpose(cleant), 1, what .. " as columns")
        check_sum(xv, cleant, what)
        x:free(); xc:free(); xv:free(); xvc:free()
      end
    end
  end)
  end

  it("reduce many short rows in the tile form across its runs, in every float dtype", function()
    lumus.tune.reduce({ rows = "tile" })
    local g = ref.rng(1517)
    local dtypes = { "float32" }
    if lumus.device().narrow_storage then dtypes[2], dtypes[3] = "float16", "bfloat16" end
    -- runs hold about 4096 elements: rows of 1 over several runs; odd counts leave a
    -- partial 16-byte unit at the tensor's end
    for _, c in ipairs { { 9001, 1 }, { 2731, 3 }, { 1024, 4 }, { 613, 7 }, { 333, 13 }, { 129, 17 }, { 97, 61 }, { 21, 130 } } do
      local rows, d = c[1], c[2]
      local t = make(g, rows, d, false)
      for _, dt in ipairs(dtypes) do
        local x = lumus.tensor(t, { dtype = dt })
        local xt = x:to("float32"):to_table()
        local what = ("%s %dx%d tile"):format(dt, rows, d)
        check_extremes(x, xt, 2, what)
        local clean = ref.map(xt, function(v) return (v ~= v or math.abs(v) > 100) and 1 or v end)
        local xv = lumus.tensor(clean, { dtype = dt })
        local cleant = xv:to("float32"):to_table()
        if dt ~= "bfloat16" then
          check_var(xv, cleant, 2, what)
          check_sum(xv, cleant, what)
        end
        -- mean: the sum's bound over the count (bfloat16: one rounding of 2^-8)
        local want = ref.flatten(ref.mean(cleant, { dim = 2 }))
        local mags = ref.flatten(ref.mean(ref.map(cleant, math.abs), { dim = 2 }))
        local narrow = dt == "float32" and 0 or dt == "float16" and 2 ^ -11 or 2 ^ -8
        local bound = {}
        for i, w in ipairs(want) do bound[i] = 1e-6 * mags[i] + narrow * math.abs(w) end
        checks.close(lumus.mean(xv, { dim = 2 }):to("float32"), want, { abs = bound, what = "mean " .. what })
        x:free(); xv:free()
      end
    end
  end)

  it("keep var accurate when the mean is far from zero", function()
    local g = ref.rng(1516)
    for _, d in ipairs { 4096, 4100, 4099, 64 } do
      local t = {}
      for k = 1, 4 do
        t[k] = {}
        for i = 1, d do t[k][i] = 1000 + g.normal() * k end
      end
      local x = lumus.tensor(t)
      local xt = x:to_table()
      check_var(x, xt, 2, "offset rows d " .. d, 1e-4)
      local xc = lumus.tensor(transpose(xt))
      check_var(xc, transpose(xt), 1, "offset columns d " .. d, 1e-4)
      x:free(); xc:free()
    end
  end)
end)
