-- max, min, argmax, argmin over long rows and columns: the running extremes a thread keeps
-- (one per element of a load, combined at the end) must still follow PyTorch: NaN beats
-- every number and the first NaN is taken, ties go to the lowest index, +-inf compare as
-- numbers. Checked exactly against lumus.reference.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local NAN, INF = 0 / 0, math.huge



local function check(xt, opts, what)
  local x = lumus.tensor(xt)
  for _, name in ipairs { "max", "min" } do
    local v, i = lumus[name](x, opts)
    local wv, wi = ref[name](xt, opts)
    checks.same_values(v:to_table(), wv, name .. " " .. what)
    assert.are.same(wi, checks.flat(i), name .. " indices " .. what)
  end
  for _, name in ipairs { "argmax", "argmin" } do
    assert.are.same(ref[name](xt, opts), checks.flat(lumus[name](x, opts)), name .. " " .. what)
  end
  x:free()
end

describe("max/min/argmax/argmin over long rows and columns", function()
  it("keep the first NaN, the lowest index of ties, and compare infinities", function()
    local n = 4096
    local rows = {}
    local g = ref.rng(2301)
    for k = 1, 10 do
      local row = {}
      for i = 1, n do row[i] = math.floor(g.uniform() * 8) - 4 end
      rows[k] = row
    end
    rows[1][3001] = NAN; rows[1][3500] = NAN          -- late NaNs: the first one
    rows[2][1] = NAN                                  -- a NaN first
    rows[3][4000] = INF; rows[3][4001] = INF          -- +inf late, twice
    rows[3][100] = -INF
    for i = 1, n do rows[4][i] = 1 end                -- all equal: index 1
    for i = 1, n do rows[5][i] = i end                -- ascending
    for i = 1, n do rows[6][i] = -i end               -- descending
    for i = 1, n do rows[7][i] = -INF end             -- only -inf
    rows[8][n] = 100; rows[8][n - 1] = -100           -- extremes in the last vec4
    rows[9][2] = 0.0; rows[9][3] = compat.negative_zero
    for i = 1, n do rows[10][i] = (i % 2 == 0) and NAN or i end   -- NaN everywhere
    check(rows, { dim = 2 }, "rows")
    -- the same as columns (a non-last dim), and over everything
    local cols = {}
    for i = 1, n do
      cols[i] = {}
      for k = 1, 10 do cols[i][k] = rows[k][i] end
    end
    check(cols, { dim = 1 }, "columns")
    -- 8 columns: 4 adjacent columns per thread, r split over workgroups
    local cols8 = {}
    for i = 1, n do
      cols8[i] = {}
      for k = 1, 8 do cols8[i][k] = rows[k][i] end
    end
    check(cols8, { dim = 1 }, "8 columns")
    check({ cols8[1], cols8[2], cols8[3] }, { dim = 1 }, "3 rows of 8 columns")
    local flat = {}
    for i = 1, n do flat[i] = rows[5][i] end
    flat[2999] = NAN
    local x = lumus.tensor(flat)
    assert.are.same({ 2999 }, checks.flat(lumus.argmax(x)))
    assert.are.same({ 2999 }, checks.flat(lumus.argmin(x)))
    assert.is_true(lumus.max(x):to_table()[1] ~= lumus.max(x):to_table()[1])
  end)
end)
