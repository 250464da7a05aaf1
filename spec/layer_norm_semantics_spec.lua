-- lumus.layer_norm_forward on non-finite and extreme rows (docs/semantics.md), under
-- every form the planner has, forced through lumus.tune.layer_norm (lavapipe's own choice
-- is the row form): group, subgroup, stream, split with both record protocols, row, and
-- the automatic choice; each for a D that is a multiple of 4 (vec4 rows) and one that is
-- not (float rows), short and long enough for several split parts.
--
-- Every kind of row below sits in one tensor beside an ordinary row, so a non-finite
-- value must stay in its own row. Expectations:
--   * rows holding NaN: mean, invstd and every y NaN (as PyTorch);
--   * rows holding +inf (-inf) and otherwise finite: mean +inf (-inf), invstd NaN, y NaN;
--     +inf with -inf: mean NaN;
--   * finite rows, however large (up to the float32 maximum, sums and squares far past
--     it): against the float64 reference, y within 1e-4 * max(1, |ref|) per element,
--     mean within 1e-5 * max(1, max |x|), invstd within 1e-4 relative; an invstd below
--     the smallest normal float32 (rows whose variance exceeds ~7e75) may also be 0 (a
--     device that flushes subnormals), and then only y is held to the reference.
-- The written-out expectations for non-finite rows are checked against the reference too.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local NAN, INF = 0 / 0, math.huge
local TINY = 2.0 ^ -126    -- smallest normal float32
local EPS = 1e-5

-- Row kinds: name and generator(d, rng) -> list of d numbers (float32 values).
local kinds = {
  { "nan at start", function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[1] = NAN return r end },
  { "nan in the middle", function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[math.floor(d / 2) + 1] = NAN return r end },
  { "nan at end", function(d, g) local r = {} for i = 1, d do r[i] = 1e30 * g.normal() end r[d] = NAN return r end },
  { "+inf", function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[math.floor(d / 2) + 1] = INF return r end },
  { "-inf", function(d, g) local r = {} for i = 1, d do r[i] = 3e38 * g.uniform() end r[d] = -INF return r end },
  { "+inf and -inf", function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[1] = INF r[d] = -INF return r end },
  { "near 3e38, mixed signs", function(d, g)
      local r = {}
      for i = 1, d do r[i] = (g.uniform() < 0.5 and -1 or 1) * (1 + 2.4 * g.uniform()) * 1e38 end
      r[1], r[d] = 3.4e38, -3.4e38
      return r
    end },
  { "+-3e38 alternating", function(d) local r = {} for i = 1, d do r[i] = i % 2 == 0 and 3e38 or -3e38 end return r end },
  { "near 3e38, one sign", function(d, g) local r = {} for i = 1, d do r[i] = 3e38 + 1e37 * g.normal() end return r end },
  -- Each split part's slice alone is fine; their combination (part mean differences
  -- squared, 6.4e39) is what overflows.
  { "halves at +-4e19", function(d, g)
      local r = {}
      for i = 1, d do r[i] = (i <= math.floor(d / 2) and 4e19 or -4e19) + 1e17 * g.normal() end
      return r
    end },
  { "1e20 * N(0, 1)", function(d, g) local r = {} for i = 1, d do r[i] = 1e20 * g.normal() end return r end },
  { "1e20 + 1e19 * N(0, 1)", function(d, g) local r = {} for i = 1, d do r[i] = 1e20 + 1e19 * g.normal() end return r end },
  { "1e4 + N(0, 1)", function(d, g) local r = {} for i = 1, d do r[i] = 1e4 + g.normal() end return r end },
  { "subnormal", function(d, g) local r = {} for i = 1, d do r[i] = 1e-40 * g.normal() end return r end },
  { "all equal", function(d) local r = {} for i = 1, d do r[i] = 2.5 end return r end },
  { "all equal 1e37", function(d) local r = {} for i = 1, d do r[i] = 1e37 end return r end },
  { "ordinary", function(d, g) local r = {} for i = 1, d do r[i] = 2 + g.normal() end return r end },
}

-- Written-out statistics for the non-finite kinds: mean, then invstd (nil: finite rows,
-- held to the reference).
local nonfinite = {
  ["nan at start"] = NAN, ["nan in the middle"] = NAN, ["nan at end"] = NAN,
  ["+inf"] = INF, ["-inf"] = -INF, ["+inf and -inf"] = NAN,
}

local function is_nan(v) return v ~= v end

local settings = {
  {},
  { form = "row" },
  { form = "group" },
  { form = "group", wg = 1 },
  { form = "subgroup" },
  { form = "subgroup", wg = 1 },
  { form = "stream", wg = 1 },
  { form = "split", parts = 2 },
  { form = "split", parts = 3 },
  { form = "split", parts = 3, records = "fenced" },
  { form = "split", parts = 2, records = "fenced" },
  { form = "split", parts = 5, wg = 1, records = "fenced" },
}

local function label_of(tune)
  local parts = {}
  for _, k in ipairs { "form", "parts", "wg", "records" } do
    if tune[k] then parts[#parts + 1] = ("%s=%s"):format(k, tune[k]) end
  end
  return #parts > 0 and table.concat(parts, " ") or "automatic"
end

-- Builds the rows for d, runs them, and checks each row; errors name setting, D and row.
local function run(tune, d, affine)
  local g = ref.rng(d)
  local xt = {}
  for i, k in ipairs(kinds) do
    local row = k[2](d, g)
    for j = 1, d do row[j] = ref.f32(row[j]) end
    xt[i] = row
  end
  local wt, bt
  if affine then
    wt = ref.random_table({ d }, function() return 1 + 0.5 * g.normal() end)
    bt = ref.random_table({ d }, function() return g.normal() end)
  end
  local rows = #kinds
  local x = lumus.tensor(xt)
  local w, b = wt and lumus.tensor(wt), bt and lumus.tensor(bt)
  local y, m, r = lumus.full({ rows, d }, NAN), lumus.full({ rows }, NAN), lumus.full({ rows }, NAN)
  lumus.layer_norm_forward(x, w, b, EPS, { out = y, mean = m, invstd = r })
  local gy, gm, gr = y:to_table(), m:to_table(), r:to_table()
  for _, t in ipairs { x, y, m, r, w, b } do t:free() end
  local wy, wm, wr = ref.layer_norm_forward(xt, wt, bt, EPS)

  for i, k in ipairs(kinds) do
    local what = ("%s, D=%d%s, row %q"):format(label_of(tune), d, affine and " affine" or "", k[1])
    local want_mean = nonfinite[k[1]]
    if want_mean ~= nil then
      -- The reference itself follows the written-out rule.
      assert(is_nan(wr[i]) and (is_nan(want_mean) and is_nan(wm[i]) or wm[i] == want_mean),
        what .. ": reference statistics " .. tostring(wm[i]) .. ", " .. tostring(wr[i]))
      for j = 1, d do assert(is_nan(wy[i][j]), what .. ": reference y not NaN") end
      checks.close({ gm[i] }, { want_mean }, { what = what .. " mean" })
      assert(is_nan(gr[i]), ("%s invstd: got %s, want NaN"):format(what, tostring(gr[i])))
      for j = 1, d do
        assert(is_nan(gy[i][j]), ("%s y[%d]: got %s, want NaN"):format(what, j, tostring(gy[i][j])))
      end
    else
      local amax = 0
      for j = 1, d do amax = math.max(amax, math.abs(xt[i][j])) end
      checks.close(gy[i], wy[i], { mixed = 1e-4, what = what .. " y" })
      checks.close({ gm[i] }, { wm[i] }, { abs = 1e-5 * math.max(1, amax), what = what .. " mean" })
      if wr[i] < TINY and gr[i] == 0 then
        -- flushed subnormal invstd: allowed (stated above)
      else
        checks.close({ gr[i] }, { wr[i] }, { rel = 1e-4, what = what .. " invstd" })
      end
    end
  end
end

describe("layer_norm_forward non-finite and extreme rows", function()
  local config = lumus.tune.layer_norm
  after_each(function() config(1, {}) end)

  it("reference: finite statistics for rows up to the float32 maximum", function()
    local y, m, r = ref.layer_norm_forward({ { 3e38, -3e38, 1e38, -1e38 } })
    assert.are.equal(0, m[1])
    local var = (9e76 * 2 + 1e76 * 2) / 4
    assert(math.abs(r[1] * math.sqrt(var + EPS) - 1) < 1e-12)
    assert(math.abs(y[1][1] - 3e38 / math.sqrt(var)) < 1e-12)
  end)

  for _, tune in ipairs(settings) do
    it(("keeps PyTorch's semantics under %s"):format(label_of(tune)), function()
      for _, d in ipairs { 8, 7, 64, 37 } do
        config(d, tune)
        run(tune, d, d == 37 or d == 8)
      end
    end)
  end

  -- Long rows: the scaled statistics add passes to a thread's loops, which must stay
  -- within llvmpipe's loop budget on CPU devices (a D = 65536 row form once computed
  -- y = +-128 here).
  it("gives finite, right rows of +-3e38 and of NaN for long rows in the automatic form", function()
    for _, d in ipairs { 65536, 40001, 16384 } do
      local v = {}
      for i = 1, d do v[i] = (i % 2 == 0) and 3e38 or -3e38 end
      local y, m = lumus.layer_norm_forward(lumus.tensor({ v }), nil, nil, EPS)
      local want = ref.layer_norm_forward({ v }, nil, nil, EPS)
      checks.close(y, want, { mixed = 1e-4, what = ("y, D=%d of +-3e38"):format(d) })
      assert(math.abs(m:to_table()[1]) < 1e34, "mean of +-3e38 at D=" .. d)
      v[math.floor(d / 2)] = 0 / 0
      local _, mn, rn = lumus.layer_norm_forward(lumus.tensor({ v }), nil, nil, EPS)
      local a, b = mn:to_table()[1], rn:to_table()[1]
      assert(a ~= a and b ~= b, "NaN row at D=" .. d)
    end
  end)

  it("gives invstd +inf and y NaN for a constant row with eps = 0, as PyTorch", function()
    for _, d in ipairs { 4, 7, 768 } do
      local v = {}
      for i = 1, d do v[i] = 2 end
      local y, m, r = lumus.layer_norm_forward(lumus.tensor({ v }), nil, nil, 0)
      local yy = y:to_table()[1][1]
      assert.are.equal(2, m:to_table()[1])
      assert.are.equal(math.huge, r:to_table()[1], "invstd at D=" .. d)
      assert(yy ~= yy, "y NaN at D=" .. d)
    end
  end)
end)
