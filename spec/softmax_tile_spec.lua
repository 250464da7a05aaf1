-- softmax and log_softmax over short rows of the last dimension by the tile form (runs
-- of whole rows through shared memory, forced with lumus.tune.softmax_cols{short_rows =
-- "tile"}), against the float64 reference, in every float dtype, in place, across the
-- runs' edges and with PyTorch's special values. Tolerances: float32 as the other
-- softmax specs (softmax 1e-5 |want| + 1e-6; log_softmax 2e-6 max(1, |want|)); float16
-- and bfloat16 outputs are checked against the reference of the rounded inputs with one
-- rounding of the output allowed on top (2^-11 and 2^-8 relative, log_softmax against
-- max(1, |want|)).
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local columns = dofile("spec/support/softmax_columns.lua")

local check_dtype = columns.check_dtype

describe("softmax over short rows (tile form)", function()
  after_each(function() lumus.tune.softmax_cols({ short_rows = "auto", tile_items = 0 }) end)

  it("reports and checks its short_rows setting", function()
    assert.are.equal("auto", lumus.tune.softmax_cols().short_rows)
    assert.are.equal("tile", lumus.tune.softmax_cols({ short_rows = "tile" }).short_rows)
    assert.are.equal("row", lumus.tune.softmax_cols({ short_rows = "row" }).short_rows)
    assert.has_error(function() lumus.tune.softmax_cols({ short_rows = "fast" }) end,
      'bad argument #1 to \'softmax_cols\' (short_rows must be "auto", "tile" or "row", got "fast")')
    assert.has_error(function() lumus.tune.softmax_cols({ short_rows = 1 }) end,
      'bad argument #1 to \'softmax_cols\' (short_rows must be "auto", "tile" or "row", got number)')
    assert.are.equal(0, lumus.tune.softmax_cols().tile_items)
    assert.are.equal(4, lumus.tune.softmax_cols({ tile_items = 4 }).tile_items)
    assert.has_error(function() lumus.tune.softmax_cols({ tile_items = 9 }) end,
      "bad argument #1 to 'softmax_cols' (tile_items must be in 0..8 (0: automatic), got 9)")
    assert.has_error(function() lumus.tune.softmax_cols({ tile_items = -1 }) end,
      "bad argument #1 to 'softmax_cols' (tile_items must be in 0..8 (0: automatic), got -1)")
    -- a bad value changes nothing
    assert.are.equal(4, lumus.tune.softmax_cols().tile_items)
  end)

  for _, items in ipairs { 1, 3, 8 } do
    it("matches the reference with " .. items .. " units per thread", function()
      lumus.tune.softmax_cols({ short_rows = "tile", tile_items = items })
      local g = ref.rng(2610 + items)
      for _, c in ipairs { { 5001, 1 }, { 1201, 5 }, { 150, 31 }, { 40, 100 } } do
        local xt = ref.random_table(c, function() return (g.uniform() - 0.5) * 30 end)
        local x = lumus.tensor(xt)
        check_dtype(x, "float32", table.concat(c, "x") .. " items " .. items)
        check_dtype(x, "float16", table.concat(c, "x") .. " items " .. items)
        x:free()
      end
    end)
  end

  for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
    it("matches the reference on a seeded sweep of row lengths (" .. dtype .. ")", function()
      lumus.tune.softmax_cols({ short_rows = "tile" })
      local g = ref.rng(dtype == "float32" and 2601 or dtype == "float16" and 2602 or 2603)
      local function int(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end
      -- Rows of 1 over several runs (a run holds about 4096 elements), lengths about a
      -- 16-byte unit and a lane's 16 held elements, then random ones; odd element counts
      -- leave a partial unit at the tensor's end.
      local cases = { { 9001, 1 }, { 1, 1 }, { 2051, 2 }, { 3, 3 }, { 777, 4 }, { 613, 7 }, { 301, 8 },
                      { 257, 13 }, { 129, 16 }, { 97, 17 }, { 45, 33 }, { 33, 64 }, { 21, 100 }, { 9, 129 } }
      for _ = 1, 6 do
        local d = int(1, 140)
        cases[#cases + 1] = { int(1, math.floor(3000 / d) + 2), d }
      end
      columns.check_cases(cases, dtype, g)
    end)
  end

  it("writes in place what it writes out of place, bit for bit", function()
    lumus.tune.softmax_cols({ short_rows = "tile" })
    local g = ref.rng(2604)
    for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
      for _, c in ipairs { { 5003, 1 }, { 1234, 3 }, { 401, 11 }, { 37, 90 } } do
        local x = lumus.tensor(ref.random_table(c, function() return g.normal() * 4 end)):to(dtype)
        for _, op in ipairs { "softmax", "log_softmax" } do
          local want = lumus[op](x):float():to_table()
          local y = x:clone()
          assert.are.equal(y, lumus[op](y, { out = y }))
          checks.close(y:float(), want, { what = dtype .. " " .. op .. " in place " .. table.concat(c, "x") })
          y:free()
        end
        x:free()
      end
    end
  end)

  it("follows PyTorch on NaN and infinities and is deterministic", function()
    lumus.tune.softmax_cols({ short_rows = "tile" })
    -- spec/support/softmax_columns.lua's special cases, along short rows
    for _, d in ipairs { 6, 7, 40 } do columns.special_rows(300, d) end
  end)

  it("takes views and higher-dimensional tensors over their last dimension", function()
    lumus.tune.softmax_cols({ short_rows = "tile" })
    local g = ref.rng(2605)
    local xt = ref.random_table({ 7, 9, 5 }, function() return g.normal() * 2 end)
    local x = lumus.tensor(xt)
    columns.check_both(x, xt, {}, "7x9x5")
    -- an offset view (copied to a plain tensor first) and a transposed one
    local n = x:narrow(2, 2, 7)
    columns.check_both(n, n:to_table(), {}, "narrow")
    local t = x:transpose(1, 2)
    columns.check_both(t, t:to_table(), {}, "transpose")
    x:free()
  end)
end)
