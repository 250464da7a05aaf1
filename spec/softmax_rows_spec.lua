-- softmax and log_softmax over rows of the last dimension by the row kernel: rows whose
-- length is not a multiple of 4 by its masked form (the aligned vectors that cover each
-- row: shaders/common/rows.glsl's ANY_D; a workgroup's rows by default, a subgroup's when
-- a workgroup size is forced) and its element-wise form (lumus.tune.rows{scalar = true}),
-- held in registers and streamed, and rows of any length by the split form (chunks of a
-- row over workgroups, forced with tune.softmax_cols{long_rows = "split"}), against the
-- float64 reference in every float dtype, in place, next to memory that must stay
-- untouched, and with PyTorch's special values. Short rows are forced off the tile form. Tolerances as spec/softmax_tile_spec.lua: float32 softmax 1e-5 |want| +
-- 1e-6, log_softmax 2e-6 max(1, |want|); float16 and bfloat16 against the reference of
-- the rounded inputs with one rounding of the output on top (2^-11 and 2^-8 relative).
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local columns = dofile("spec/support/softmax_columns.lua")

local half_rel = columns.half_rel
local check_dtype = columns.check_dtype

-- softmax and log_softmax of x in dtype written in place equal them out of place, bit for bit.
local function check_in_place(x, dtype, what)
  local h = x:to(dtype)
  for _, op in ipairs { "softmax", "log_softmax" } do
    local want = lumus[op](h):float():to_table()
    local y = h:clone()
    assert.are.equal(y, lumus[op](y, { out = y }))
    checks.close(y:float(), want, { rel = 0, abs = 0, what = dtype .. " " .. op .. " in place " .. what })
    y:free()
  end
  h:free()
end

local function reset()
  lumus.tune.rows(1, {})
  lumus.tune.softmax_cols({ short_rows = "auto", long_rows = "auto" })
end

describe("softmax over rows of any length (row kernel)", function()
  before_each(function() lumus.tune.softmax_cols({ short_rows = "row" }) end)
  after_each(reset)

  it("reads rows that are not a multiple of 4 as masked vectors unless scalar is asked for", function()
    local plan = lumus.tune.rows(1027)
    assert.are.same({ 4, true }, { plan.vec, plan.masked })
    assert.are.same({ 4, false }, { lumus.tune.rows(1024).vec, lumus.tune.rows(1024).masked })
    plan = lumus.tune.rows(1027, { scalar = true })
    assert.are.same({ 1, false }, { plan.vec, plan.masked })
    assert.has_error(function() lumus.tune.rows(1027, { scalar = 1 }) end,
      "bad argument #2 to 'rows' (scalar must be a boolean, got number)")
  end)

  local CONFIGS = {
    { name = "element-wise", rows = { scalar = true } },
    { name = "masked", rows = {} },
    { name = "masked, a workgroup per row", rows = { wg = 32 } },
    { name = "split", rows = {}, long_rows = "split" },
    { name = "split, element-wise", rows = { scalar = true }, long_rows = "split" },
  }
  for ci, config in ipairs(CONFIGS) do
    for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
      it(("matches the reference on a seeded sweep of row lengths (%s, %s)"):format(dtype, config.name), function()
        lumus.tune.rows(1, config.rows)
        lumus.tune.softmax_cols({ long_rows = config.long_rows or "auto" })
        local g = ref.rng(10 * ci + (dtype == "float32" and 2701 or dtype == "float16" and 2702 or 2703))
        local function int(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end
        -- Every skew of a row's start (rows of 1-5 of an odd d), a row shorter than one
        -- vector, rows spanning two, and long ones a workgroup takes.
        local cases = { { 5, 1 }, { 5, 3 }, { 4, 5 }, { 5, 7 }, { 3, 2 }, { 7, 6 }, { 5, 33 }, { 3, 131 },
                        { 2, 1027 }, { 2, 4099 } }
        for _ = 1, 2 do
          local d = int(1, 1500)
          if d % 4 == 0 then d = d + 1 end
          cases[#cases + 1] = { int(1, 6), d }
        end
        columns.check_cases(cases, dtype, g)
      end)
    end
  end

  it("splits rows over workgroups when told, in place too, and reports the setting", function()
    assert.are.equal("split", lumus.tune.softmax_cols({ long_rows = "split" }).long_rows)
    local g = ref.rng(2705)
    for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
      -- one row (every chunk of it), few, a row of a single vector, chunks of one vector
      for _, c in ipairs { { 1, 70001 }, { 3, 20000 }, { 2, 4099 }, { 2, 4 }, { 9, 13 } } do
        local xt = ref.random_table(c, function() return g.normal() * 4 end)
        for i = 1, c[2] do xt[1][i] = i * 1e-3 end   -- rising: every chunk's max differs
        local x = lumus.tensor(xt)
        check_dtype(x, dtype, "split " .. table.concat(c, "x"))
        check_in_place(x, dtype, "split " .. table.concat(c, "x"))
        x:free()
      end
    end
  end)

  it("streams masked rows past its registers, and writes in place what it writes out of place", function()
    -- 32 threads holding one vector each: the rest of a row streams, 4 vectors a step,
    -- the last step partial; a rising row makes the running max grow at every step.
    lumus.tune.rows(1, { wg = 32, items = 1 })
    assert.are.same({ 32, 1, true }, { lumus.tune.rows(1027).workgroup, lumus.tune.rows(1027).items,
                                       lumus.tune.rows(1027).masked })
    local g = ref.rng(2704)
    for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
      for _, c in ipairs { { 3, 1027 }, { 5, 645 }, { 2, 4099 }, { 4, 131 } } do
        local xt = ref.random_table(c, function() return g.normal() * 4 end)
        for i = 1, c[2] do xt[1][i] = i * 0.01 end
        local x = lumus.tensor(xt)
        check_dtype(x, dtype, "streamed " .. table.concat(c, "x"))
        check_in_place(x, dtype, table.concat(c, "x"))
        x:free()
      end
    end
  end)

  it("writes only its rows' elements: the rest of the storage keeps its values", function()
    for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
      for _, c in ipairs { { 3, 5 }, { 2, 131 }, { 5, 37 } } do
        local n = c[1] * c[2]
        local big = lumus.full({ n + 9 }, 7, { dtype = dtype })
        local out = big:narrow(1, 1, n):view(c)
        local x = lumus.tensor(ref.random_table(c, function() return 1 end)):to(dtype)
        lumus.softmax(x, { out = out })
        local rest = big:narrow(1, n + 1, 9):float():to_table()
        for i = 1, 9 do assert.are.equal(7, rest[i]) end
        checks.close(out:float(), ref.softmax(x:float():to_table()), { rel = half_rel[dtype] or 1e-5, abs = 1e-6,
                                                                        what = dtype .. " softmax into a view" })
        big:free(); x:free()
      end
    end
  end)

  it("follows PyTorch on NaN and infinities, whole rows and split", function()
    for _, case in ipairs { { 37 }, { 1027 }, { 1027, "split" }, { 5000, "split" } } do
      lumus.tune.softmax_cols({ long_rows = case[2] or "auto" })
      columns.special_rows(7, case[1])
    end
  end)
end)
