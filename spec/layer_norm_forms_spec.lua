-- The LayerNorm forward forms of issue 18, each forced through lumus.tune.layer_norm,
-- against the float64 reference (lumus.reference): the tile form (short rows through
-- shared memory), the two-stage split (few long rows), and masked rows (D not a multiple
-- of 4) read by clamped vec4 loads (the default) and by guarded ones (masked_loads =
-- "guarded", the loads before), on tiny, odd and prime D, few and many rows, in place
-- and not, with and without weight and bias, and rows of NaN, inf and huge values.
--
-- Row counts are odd so every skew (row * D mod 4) occurs; outputs out of place start as
-- NaN, so an element left unwritten shows; in place, a write into a neighbour's elements
-- changes that neighbour's input. Tolerances as spec/layer_norm_shapes_spec.lua: y within
-- 1e-4 * max(1, |ref|) per element and 1e-5 relative L2, mean within
-- 1e-5 * max(1, |ref|), invstd within 1e-4 relative.
local lumus = require "lumus"
local ref = require "lumus.reference"
local compat = require "lumus.compat"

local Y_MAX, INVSTD_REL = 1e-4, 1e-4   -- as spec/support/layer_norm_check.lua
local NAN = 0 / 0
local config = lumus.tune.layer_norm

local mismatch = dofile("spec/support/layer_norm_check.lua").mismatch

local function label_of(tune)
  local parts = {}
  for _, k in ipairs { "form", "parts", "masked_loads" } do
    if tune[k] ~= nil then parts[#parts + 1] = ("%s=%s"):format(k, tostring(tune[k])) end
  end
  return #parts > 0 and table.concat(parts, " ") or "automatic"
end

-- Whether the little-endian element of `size` bytes at byte i of s is a NaN of dtype
-- (byte arithmetic: Lua 5.1 has no bit operators).
local function is_nan_at(s, i, dtype)
  local lo, hi = s:byte(i, i + 1)
  if dtype == "float16" then return hi % 128 >= 124 and (hi % 4 ~= 0 or lo ~= 0) end
  if dtype == "bfloat16" then return hi % 128 == 127 and lo >= 128 and lo % 128 ~= 0 end
  local b2, b3 = s:byte(i + 2, i + 3)
  return b3 % 128 == 127 and b2 >= 128 and (b2 % 128 ~= 0 or hi ~= 0 or lo ~= 0)
end

-- Whether byte strings a and b hold the same elements bit for bit, any NaN matching any
-- other: SPIR-V leaves a NaN result's sign and payload open, and two forms' code may
-- propagate a different one of two NaN operands.
local function same_bits(a, b, dtype)
  if a == b then return true end
  if #a ~= #b then return false end
  local size = (dtype == "float16" or dtype == "bfloat16") and 2 or 4
  for i = 1, #a, size do
    local j = i + size - 1
    if a:sub(i, j) ~= b:sub(i, j) and not (is_nan_at(a, i, dtype) and is_nan_at(b, i, dtype)) then return false end
  end
  return true
end

-- Appends to `bad` which of y (of dtype, float32 by default), mean and invstd (byte
-- strings, in that order) differ between `want` and `got`.
local function bit_differences(bad, want, got, label, dtype)
  for k, what in ipairs { "y", "mean", "invstd" } do
    if not same_bits(want[k], got[k], k == 1 and dtype or "float32") then
      bad[#bad + 1] = ("%s: %s differs"):format(label, what)
    end
  end
end

-- Runs `shapes` ({rows, d}) under `tune`, each in place and out of place, weight and
-- bias on every other; returns the list of failures.
local function run_all(tune, shapes, seed)
  local rng = ref.rng(seed)
  local bad = {}
  for k, s in ipairs(shapes) do
    local rows, d = s[1], s[2]
    config(d, tune)
    for _, in_place in ipairs { false, true } do
      local why = mismatch(rows, d, rng, { in_place = in_place, affine = k % 2 == 1 })
      if why then bad[#bad + 1] = ("%dx%d under %s%s: %s"):format(rows, d, label_of(tune), in_place and ", in place" or "", why) end
    end
  end
  return bad
end

local SHORT = { { 33, 1 }, { 67, 2 }, { 129, 3 }, { 41, 5 }, { 23, 7 }, { 9, 11 }, { 17, 13 }, { 7, 41 },
                { 5, 110 }, { 3, 139 }, { 3, 163 }, { 5, 319 } }
local LONG = { { 3, 1031 }, { 1, 2261 }, { 2, 4099 }, { 3, 11107 } }

-- Rows with NaN, +-inf or values whose squares overflow float32, beside ordinary rows
-- (whose statistics must not change): expectations as spec/layer_norm_semantics_spec.lua.
local INF = math.huge
local KINDS = {
  function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[1] = NAN return r, "nan" end,
  function(d, g) local r = {} for i = 1, d do r[i] = 2 + g.normal() end return r end,
  function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[d] = INF return r, "inf" end,
  function(d, g) local r = {} for i = 1, d do r[i] = (i % 2 == 0 and 3e38 or -2e38) * g.uniform() end return r end,
  function(d, g) local r = {} for i = 1, d do r[i] = 1e4 + g.normal() end return r end,
}
local function nonfinite_mismatches(rows, d, label)
  local g = ref.rng(d + rows)
  local xt, nonfinite = {}, {}
  for i = 1, rows do
    local row, what = KINDS[(i - 1) % #KINDS + 1](d, g)
    for j = 1, d do row[j] = ref.f32(row[j]) end
    xt[i], nonfinite[i] = row, what
  end
  local x = lumus.tensor(xt)
  local y, m, r = lumus.layer_norm_forward(x, nil, nil, 1e-5)
  local gy, gm, gr = y:to_table(), m:to_table(), r:to_table()
  for _, t in ipairs { x, y, m, r } do t:free() end
  local wy, wm, wr = ref.layer_norm_forward(xt, nil, nil, 1e-5)
  local bad = {}
  for i = 1, rows do
    local what = ("%s %dx%d row %d"):format(label, rows, d, i)
    if nonfinite[i] then
      local ok = gr[i] ~= gr[i] and (nonfinite[i] == "nan" and gm[i] ~= gm[i] or gm[i] == INF)
      for j = 1, d do ok = ok and gy[i][j] ~= gy[i][j] end
      if not ok then bad[#bad + 1] = what .. ": not NaN / inf as PyTorch" end
    else
      local cy = ref.compare({ gy[i] }, { wy[i] })
      local amax = 0
      for j = 1, d do amax = math.max(amax, math.abs(xt[i][j])) end
      if not (cy.max_rel <= Y_MAX) then bad[#bad + 1] = ("%s: y max error %.3g"):format(what, cy.max_rel) end
      if not (math.abs(gm[i] - wm[i]) <= 1e-5 * math.max(1, amax)) then bad[#bad + 1] = what .. ": mean" end
      local flushed = wr[i] < 2.0 ^ -126 and gr[i] == 0   -- a subnormal invstd may be flushed
      if not flushed and not (math.abs(gr[i] / wr[i] - 1) <= INVSTD_REL) then bad[#bad + 1] = what .. ": invstd" end
    end
  end
  return bad
end

-- The tile form over several runs (rows past one run's), small runs (wg, items_target)
-- that hold a single row, and segments of 1 to 32 lanes per row.
local TILE = { { 3001, 7 }, { 4097, 2 }, { 1501, 3 }, { 33, 1 }, { 67, 139 }, { 23, 419 }, { 9, 1021 },
               { 5, 4093 }, { 131, 64 }, { 301, 5 } }

describe("layer_norm_forward forms", function()
  after_each(function() config(1, {}) end)

  it("reports how masked rows are read and refuses an unknown way", function()
    assert.are.equal("clamped", config(7, { form = "group", scalar = false }).loads)
    assert.are.equal("guarded", config(7, { form = "group", scalar = false, masked_loads = "guarded" }).loads)
    assert.is_nil(config(8, { form = "group" }).loads)   -- D % 4 == 0: no masking
    local ok, err = pcall(config, 7, { masked_loads = "fast" })
    assert.is_false(ok)
    assert.matches("masked_loads", err)
  end)

  it("reports lean masks on for float32 and bfloat16, and for float16 only in the two-stage split", function()
    for _, c in ipairs { { "split2", "float16", true }, { "group", "float16", false }, { "split2", "float32", true },
                         { "group", "float32", true }, { "group", "bfloat16", true } } do
      local form, dtype, lean = c[1], c[2], c[3]
      local p = config(1001, { form = form, scalar = false }, 7, dtype)
      assert.are.equal(form, p.variant)
      assert.are.equal(lean, p.lean_masks, form .. " " .. dtype)
      assert.is_false(config(1001, { form = form, scalar = false, lean_masks = false }, 7, dtype).lean_masks)
      assert.is_true(config(1001, { form = form, scalar = false, lean_masks = true }, 7, dtype).lean_masks)
    end
  end)

  it("matches the reference in the tile form, in runs of several sizes", function()
    local bad = {}
    for _, tune in ipairs { { form = "tile" }, { form = "tile", wg = 32, items_target = 2 },
                            { form = "tile", wg = 64, items_target = 1 } } do
      for _, b in ipairs(run_all(tune, TILE, 3)) do bad[#bad + 1] = b end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("plans the tile form with whole rows per run and a segment per row", function()
    local c = config(7, { form = "tile" }, 1000)
    assert.are.equal("tile", c.variant)
    assert.are.equal(math.floor((4 * c.workgroup * c.items - 3) / 7), c.rows_per_group)
    assert.are.equal(1, c.segment)
    assert.are.equal(32, config(419, { form = "tile" }).segment)
    -- a row longer than a run takes another form
    assert.are_not.equal("tile", config(4099, { form = "tile", wg = 32, items_target = 2 }).variant)
  end)

  it("keeps NaN, inf and huge rows to themselves in the tile form", function()
    local bad = {}
    for _, tune in ipairs { { form = "tile" }, { form = "tile", wg = 32, items_target = 2 } } do
      for _, d in ipairs { 1, 2, 5, 7, 37, 139 } do
        config(d, tune)
        for _, b in ipairs(nonfinite_mismatches(23, d, "tile")) do bad[#bad + 1] = b end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("matches the reference in the two-stage split form, any D, slices of several sizes", function()
    local shapes = { { 3, 70001 }, { 2, 8192 }, { 5, 4099 }, { 1, 9 }, { 7, 1031 }, { 1, 65537 } }
    local bad = {}
    for _, tune in ipairs { { form = "split2" }, { form = "split2", scalar = false },
                            { form = "split2", parts = 7, scalar = false },
                            { form = "split2", wg = 32, items_target = 3, scalar = false },
                            { form = "split2", split2_items = 6, scalar = false } } do
      local rng = ref.rng(17)
      for k, sh in ipairs(shapes) do
        local rows, d = sh[1], sh[2]
        local c = config(d, tune, rows)
        assert.are.equal("split2", c.variant)
        local why = mismatch(rows, d, rng, { affine = k % 2 == 1 })
        if why then bad[#bad + 1] = ("%dx%d under %s: %s"):format(rows, d, label_of(tune), why) end
        -- in place it takes another form (a non-finite row is read again whole)
        why = mismatch(rows, d, rng, { in_place = true, affine = k % 2 == 0 })
        if why then bad[#bad + 1] = ("%dx%d under %s, in place: %s"):format(rows, d, label_of(tune), why) end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("reads rows of D % 4 == 0 as masked rows when asked (masked_aligned), in every form", function()
    local shapes = { { 9, 8 }, { 33, 4 }, { 5, 36 }, { 3, 1032 }, { 2, 4100 }, { 3, 11108 } }
    local bad = {}
    for _, form in ipairs { "subgroup", "group", "stream", "split", "split2" } do
      local tune = { masked_aligned = true, form = form }
      for _, sh in ipairs(shapes) do
        local c = config(sh[2], tune, sh[1])
        if c.variant == form then assert.is_true(c.masked, form .. " masked") end
      end
      for _, why in ipairs(run_all(tune, shapes, 23)) do bad[#bad + 1] = why end
    end
    config(1, {})
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("sizes the two-stage split's slices by split2_items, and only that form's", function()
    -- rows enough that no row is cut finer to fill the device
    local auto = config(70001, { form = "split2", scalar = false }, 1000)
    local six = config(70001, { form = "split2", scalar = false, split2_items = 6 }, 1000)
    assert.is_true(six.items > auto.items and six.items <= 6, ("items %d -> %d"):format(auto.items, six.items))
    assert.is_true(six.parts < auto.parts, ("parts %d -> %d"):format(auto.parts, six.parts))
    local group = config(1031, { form = "group", scalar = false }, 9)
    assert.are.same(group, config(1031, { form = "group", scalar = false, split2_items = 6 }, 9))
    config(1, {})
  end)

  it("keeps NaN, inf and huge rows to themselves in the two-stage split form", function()
    local bad = {}
    for _, tune in ipairs { { form = "split2", parts = 3 }, { form = "split2", parts = 5, scalar = false } } do
      for _, d in ipairs { 37, 4099 } do
        config(d, tune)
        for _, b in ipairs(nonfinite_mismatches(11, d, "split2")) do bad[#bad + 1] = b end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  -- The two-stage split in one dispatch (pipelined: each workgroup publishes one slice's
  -- record and normalizes the slice `lag` tickets behind, where the device has 64-bit
  -- atomics; lavapipe has) against its two dispatches: the same records combined the same
  -- way, so the same bits, whatever the lag, the spin limit (0: a record not yet
  -- published is computed from x by the waiting slice) or the dtype, rows of NaN, inf and
  -- huge values included.
  it("pipelines the two-stage split in one dispatch with the two dispatches' results, bit for bit", function()
    if not lumus.device().int64_atomics then pending("no 64-bit atomics: the two-stage split takes two dispatches"); return end
    local bad = {}
    local function bytes_of(rows, d, dtype, tune, seed)
      config(d, tune)
      local rng = ref.rng(seed)
      local xt = ref.random_table({ rows, d }, function() return 1000 + 3 * rng.normal() end)
      xt[1][d] = NAN
      if rows > 2 then xt[3][1] = 1e30 end
      if rows > 3 then xt[4][2] = INF end
      lumus.manual_seed(seed)
      local x, w, b = lumus.tensor(xt), lumus.randn({ d }), lumus.randn({ d })
      if dtype ~= "float32" then x, w, b = x:to(dtype), w:to(dtype), b:to(dtype) end
      local y, m, r = lumus.layer_norm_forward(x, w, b, 1e-5)
      local out = { y:to_bytes(), m:to_bytes(), r:to_bytes() }
      for _, t in ipairs { x, w, b, y, m, r } do t:free() end
      return out
    end
    for _, sh in ipairs { { 3, 70001 }, { 5, 4099 }, { 1, 9 }, { 7, 1031 }, { 2, 8192 } } do
      local rows, d = sh[1], sh[2]
      for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
        local two = bytes_of(rows, d, dtype, { form = "split2", scalar = false, pipelined = false }, d)
        -- lag "past": longer than the dispatch's slices, so every record is published
        -- before any slice is normalized (a lag is also that many more workgroups, each
        -- slow under ASan, so just past rather than a huge one)
        for _, tune in ipairs { { lag = 0 }, { lag = 1 }, { lag = "past" }, { spin_limit = 0, lag = 1 }, { parts = 3 } } do
          tune.form, tune.scalar = "split2", false
          local past = tune.lag == "past"
          if past then tune.lag = rows * config(d, { form = "split2", scalar = false }, rows, dtype).parts + 33 end
          local c = config(d, tune, rows, dtype)
          local parts = c.parts
          if tune.parts then
            two = bytes_of(rows, d, dtype, { form = "split2", scalar = false, pipelined = false, parts = 3 }, d)
          end
          assert.is_true(c.lag >= parts)
          if past then assert.is_true(c.lag > rows * parts, "lag past the dispatch") end
          local one = bytes_of(rows, d, dtype, tune, d)
          bit_differences(bad, two, one, ("%dx%d %s lag=%s spin_limit=%s parts=%d"):format(rows, d, dtype,
            tostring(tune.lag), tostring(tune.spin_limit), parts), dtype)
        end
      end
    end
    config(1, {})
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  -- shifted_params: weight and bias read from float32 copies made for the call (one per
  -- row skew for masked rows, one for 16-bit parameters of unmasked rows) instead of in
  -- place; the same float32 values meet the same fma, so y, mean and invstd keep their bits.
  it("reads weight and bias from per-call float32 copies with the same bits as in place", function()
    local bad = {}
    local function run(rows, d, dtype, tune, which, seed)
      config(d, tune, rows, dtype)
      lumus.manual_seed(seed)
      local x = lumus.randn({ rows, d }):mul(3):add(100)
      local w, b = lumus.randn({ d }), lumus.randn({ d })
      if dtype ~= "float32" then x, w, b = x:to(dtype), w:to(dtype), b:to(dtype) end
      local y, m, r = lumus.layer_norm_forward(x, which ~= "bias" and w or nil, which ~= "weight" and b or nil, 1e-5)
      local out = { y:to_bytes(), m:to_bytes(), r:to_bytes() }
      for _, t in ipairs { x, w, b, y, m, r } do t:free() end
      return out
    end
    local cases = {
      { 5, 37, { form = "group" } }, { 3, 1031, {} }, { 7, 4097, { form = "stream" } }, { 4, 9001, { form = "split" } },
      { 3, 20003, { form = "split2" } }, { 3, 20003, { form = "split2", pipelined = false } }, { 41, 23, { form = "subgroup" } },
      { 9, 301, { masked_loads = "guarded" } }, { 9, 301, { lean_masks = false } }, { 6, 64, { form = "group" } },
      { 3, 4096, { form = "split2" } }, { 5, 512, { form = "stream" } },
    }
    -- device memory once every earlier spec's garbage is gone (on 5.1 and LuaJIT over
    -- several cycles) and the split forms' kept scratch given back
    local function settled()
      for _ = 1, 50 do
        local in_use, kb = lumus.memory().in_use, collectgarbage("count")
        collectgarbage(); collectgarbage(); lumus.synchronize()
        if lumus.memory().in_use == in_use and collectgarbage("count") >= kb then break end
      end
      lumus.empty_cache()
      return lumus.memory().in_use
    end
    local before = settled()
    for k, c in ipairs(cases) do
      local rows, d = c[1], c[2]
      for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
        local which = ({ "both", "weight", "bias" })[k % 3 + 1]
        local plain, shifted = { scalar = false }, { scalar = false, shifted_params = true }
        for key, v in pairs(c[3]) do plain[key], shifted[key] = v, v end
        local plan = config(d, shifted, rows, dtype)
        local copies = d % 4 ~= 0 and 4 or dtype ~= "float32" and 1 or 0
        if plan.variant == "tile" or plan.variant == "row" then copies = 0 end
        if plan.param_copies ~= copies then
          bad[#bad + 1] = ("%dx%d %s %s: %d copies planned, %d expected"):format(rows, d, dtype, plan.variant, plan.param_copies, copies)
        end
        bit_differences(bad, run(rows, d, dtype, plain, which, k), run(rows, d, dtype, shifted, which, k),
          ("%dx%d %s %s (%s) %s"):format(rows, d, dtype, plan.variant, which, label_of(c[3])), dtype)
      end
    end
    config(1, {})
    assert(#bad == 0, table.concat(bad, "\n"))
    assert.are.equal(before, settled())   -- each call's copies went back
  end)

  it("makes the parameter copies again at each replay of a capture, so writes into weight show", function()
    for _, dt in ipairs { "float32", "float16" } do
      config(1031, { form = "group", scalar = false, shifted_params = true }, 9, dt)
      local x, w, b = lumus.randn({ 9, 1031 }):to(dt), lumus.randn({ 1031 }):to(dt), lumus.randn({ 1031 }):to(dt)
      local g, y = lumus.capture(function() return lumus.layer_norm_forward(x, w, b) end)
      g:replay()
      assert.are.equal(lumus.layer_norm_forward(x, w, b):to_bytes(), y:to_bytes())
      w:copy(lumus.randn({ 1031 }):to(dt))
      local changed = lumus.layer_norm_forward(x, w, b):to_bytes()
      g:replay()
      assert.are.equal(changed, y:to_bytes())
      g:free()
    end
    config(1, {})
  end)

  it("plans no parameter copies unless asked, nor for float32 rows a vector holds whole", function()
    local group = { form = "group", scalar = false }
    assert.are.equal(0, config(1031, group, 9).param_copies)
    group.shifted_params = true
    assert.are.equal(4, config(1031, group, 9).param_copies)
    assert.are.equal(0, config(1032, group, 9).param_copies)
    assert.are.equal(1, config(1032, group, 9, "float16").param_copies)
    group.scalar = true   -- rows of floats
    assert.are.equal(0, config(1031, group, 9).param_copies)
    config(1, {})
  end)

  it("pipelines the two-stage split right on workgroups of 1 and 2 threads, each waiting for many records", function()
    -- 86 slices of rows of 257: a thread of a workgroup of one polls for all 86 records
    -- (on lavapipe their polls must fit the loop budget), and publishes all 3 words of its own
    local bad = {}
    for _, wg in ipairs { 1, 2 } do
      local tune = { form = "split2", wg = wg, scalar = false }
      local c = config(257, tune, 2)
      assert.are.equal("split2", c.variant)
      for _, why in ipairs(run_all(tune, { { 2, 257 }, { 2, 1031 }, { 3, 4099 } }, 29)) do bad[#bad + 1] = why end
    end
    config(1, {})
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("takes two dispatches for rows of more slices than shared memory holds records of", function()
    if not lumus.device().int64_atomics then pending("no 64-bit atomics: always two dispatches"); return end
    local long = config(2 ^ 25, { form = "split2" }, 1)
    assert.is_true(long.parts >= 8192, "parts " .. long.parts)
    assert.are.equal(0, long.lag)
    assert.is_true(config(2 ^ 20, { form = "split2" }, 1).lag > 0)
    config(1, {})
  end)

  it("counts the pipelined split's tickets: one per slice and one per lag step", function()
    if not lumus.device().int64_atomics then pending("no 64-bit atomics"); return end
    collectgarbage(); lumus.synchronize()
    local before = lumus.memory().in_use
    local c = config(5000, { form = "split2", parts = 4, lag = 9, return_scratch = true }, 3)
    assert.are.same({ 4, 9 }, { c.parts, c.lag })
    local ok, err = pcall(function()
      local x = lumus.randn({ 3, 5000 })
      local y, m, r, scratch = lumus.layer_norm_forward(x)
      local tickets, fallbacks = compat.unpack(compat.unpack_bytes("u32", scratch:to_bytes(1, 2), 1, 2))
      assert.are.equal(3 * 4 + 9, tickets)
      assert.is_true(fallbacks <= 3 * 4 * 4)   -- at most every slice's every partner
      for _, t in ipairs { x, y, m, r, scratch } do t:free() end
    end)
    config(5000, {})
    if not ok then error(err, 0) end
    lumus.synchronize(); collectgarbage()
    assert.are.equal(before, lumus.memory().in_use)
    -- two dispatches where asked for, and under a capture (replays cannot give a kept
    -- scratch new epochs)
    assert.are.equal(0, config(5000, { form = "split2", pipelined = false }, 3).lag)
    assert.is_true(config(5000, { form = "split2" }, 3).lag > 0)
    local x = lumus.randn({ 3, 5000 })
    local eager = lumus.layer_norm_forward(x):to_bytes()
    local g, y = lumus.capture(function() return lumus.layer_norm_forward(x) end)
    assert.are.equal(eager, g:replay():to_bytes())
    config(5000, {})
  end)

  -- lean masks (float32's default on masked rows): only a row's shared first and last
  -- vectors masked, parameter lanes shifted before conversion; and every vector masked
  -- ({lean_masks = false})
  for _, lean in ipairs { true, false } do
    it(("matches the reference with lean masks %s in every form, NaN and inf rows included"):format(lean and "on" or "off"), function()
      local bad = {}
      for _, tune in ipairs { { form = "group" }, { form = "subgroup" }, { form = "stream" }, { form = "split", parts = 3 },
                              { form = "split2", parts = 3 } } do
        tune.scalar, tune.lean_masks = false, lean
        assert.are.equal(lean, config(7, tune, 100).lean_masks)
        local what = lean and " lean" or " full masks"
        for _, b in ipairs(run_all(tune, SHORT, 3)) do bad[#bad + 1] = b .. what end
        for _, b in ipairs(run_all(tune, LONG, 4)) do bad[#bad + 1] = b .. what end
        config(37, tune)
        for _, b in ipairs(nonfinite_mismatches(23, 37, tune.form .. what)) do bad[#bad + 1] = b end
      end
      assert(#bad == 0, table.concat(bad, "\n"))
    end)
  end

  -- segment_shuffles (the default): the subgroup form's segments reduce by a butterfly of
  -- shuffles; `false`: through shared memory
  for _, shuffles in ipairs { true, false } do
    it(("matches the reference with the subgroup form's segments reduced %s"):format(shuffles and "by shuffles" or "in shared memory"), function()
      local bad = {}
      for _, scalar in ipairs { false, true } do
        local tune = { form = "subgroup", scalar = scalar, segment_shuffles = shuffles }
        for _, b in ipairs(run_all(tune, SHORT, 5)) do bad[#bad + 1] = b .. (shuffles and " shuffles" or " partials") end
        config(37, tune)
        for _, b in ipairs(nonfinite_mismatches(23, 37, "subgroup " .. tostring(shuffles))) do bad[#bad + 1] = b end
      end
      assert(#bad == 0, table.concat(bad, "\n"))
    end)
  end

  it("takes segment shuffles by default in the subgroup form, and reports them", function()
    assert.is_true(config(21, { form = "subgroup" }).segment_shuffles)
    assert.is_false(config(21, { form = "subgroup", segment_shuffles = false }).segment_shuffles)
    assert.is_nil(config(21, { form = "group" }).segment_shuffles)
  end)

  it("takes lean masks by default for float32 and bfloat16, not float16", function()
    local tune = { scalar = false, form = "group" }
    assert.is_true(config(7, tune, 100).lean_masks)
    assert.is_true(lumus.tune.layer_norm(7, nil, 100, "bfloat16").lean_masks)
    assert.is_false(lumus.tune.layer_norm(7, nil, 100, "float16").lean_masks)
    assert.is_true(config(7, { scalar = false, form = "group", lean_masks = true }, 100).lean_masks)
    assert.is_true(lumus.tune.layer_norm(7, nil, 100, "float16").lean_masks)
    assert.is_false(config(7, { scalar = false, form = "group", lean_masks = false }, 100).lean_masks)
    assert.is_false(lumus.tune.layer_norm(7, nil, 100, "bfloat16").lean_masks)
  end)

  for _, loads in ipairs { "clamped", "guarded" } do
    for _, form in ipairs { "group", "subgroup", "stream" } do
      it(("matches the reference with %s loads in the %s form on short and odd rows"):format(loads, form), function()
        local bad = run_all({ form = form, scalar = false, masked_loads = loads }, SHORT, #form + #loads)
        assert(#bad == 0, table.concat(bad, "\n"))
      end)
    end
    it(("matches the reference with %s loads in the group, stream and split forms on long odd rows"):format(loads), function()
      local bad = {}
      for _, tune in ipairs { { form = "group" }, { form = "stream" }, { form = "split", parts = 3 } } do
        tune.scalar, tune.masked_loads = false, loads
        for _, b in ipairs(run_all(tune, LONG, 5)) do bad[#bad + 1] = b end
      end
      assert(#bad == 0, table.concat(bad, "\n"))
    end)
  end
end)

-- layer_norm_backward's plans of issue 18: rows of D % 4 != 0 held as up to 16 floats
-- per thread in the fused form (float_items; GPUs by default, forced here), dx within
-- 2e-5 * max(1, |ref|) and dweight/dbias within 1e-5 of the column's sum of |terms| (as
-- spec/layer_norm_backward_spec.lua), and the same bits from call to call.
describe("layer_norm_backward plans", function()
  local checks = dofile("spec/support/check.lua")
  local tune = lumus.tune.layer_norm_backward
  after_each(function() tune(4, nil, { form = "auto" }) end)

  local function check(rows, d, seed)
    local rng = ref.rng(seed)
    local x = ref.random_table({ rows, d }, function() return rng.normal() end)
    local dy = ref.random_table({ rows, d }, function() return rng.normal() end)
    local w = ref.random_table({ d }, function() return 0.5 + rng.uniform() end)
    local X, DY, W = lumus.tensor(x), lumus.tensor(dy), lumus.tensor(w)
    local _, m, r = lumus.layer_norm_forward(X, W, nil)
    local dx, dw, db = lumus.layer_norm_backward(DY, X, m, r, W)
    local dx2, dw2, db2 = lumus.layer_norm_backward(DY, X, m, r, W)
    assert.are.equal(dw:to_bytes(), dw2:to_bytes())
    assert.are.equal(db:to_bytes(), db2:to_bytes())
    assert.are.equal(dx:to_bytes(), dx2:to_bytes())
    local mt, rt = m:to_table(), r:to_table()
    local rdx, rdw, rdb = ref.layer_norm_backward(dy, x, mt, rt, w)
    checks.close(dx, rdx, { mixed = 2e-5, what = ("dx %dx%d"):format(rows, d) })
    local bw, bb = {}, {}
    for j = 1, d do
      local sw, sb = 0, 0
      for i = 1, rows do
        sw = sw + math.abs(dy[i][j] * (x[i][j] - mt[i]) * rt[i])
        sb = sb + math.abs(dy[i][j])
      end
      bw[j], bb[j] = 1e-5 * sw + 1e-6, 1e-5 * sb + 1e-6
    end
    checks.close(dw, rdw, { abs = bw, what = "dweight" })
    checks.close(db, rdb, { abs = bb, what = "dbias" })
  end

  it("holds rows of D % 4 != 0 as up to 16 floats per thread in the fused form", function()
    for k, s in ipairs { { 5, 4934 }, { 3, 9001 }, { 7, 4099 } } do
      local plan = tune(s[2], s[1], { float_items = 16 })
      assert.are.equal("fused", plan.form)
      assert.is_true(plan.items <= 16)
      check(s[1], s[2], 40 + k)
    end
    assert.are.equal("columns", tune(9001, 3, { float_items = 4 }).form)
    if lumus.device().kind == "cpu" then   -- CPU devices: one slice per row unless forced
      assert.are.equal(1, tune(9001, 3, { float_items = 4 }).stat_parts)
    end
    local ok, err = pcall(tune, 9001, 3, { float_items = 17 })
    assert.is_false(ok)
    assert.matches("float_items must be in 0..16", err)
    ok, err = pcall(tune, 9001, 3, { stat_parts = 4097 })
    assert.is_false(ok)
    assert.matches("stat_parts must be in 0..4096", err)
  end)

  it("sums long rows in slices (stat_parts) in the columns form, any slice count", function()
    for k, sp in ipairs { 2, 3, 7 } do
      for j, sh in ipairs { { 3, 9001 }, { 2, 20000 }, { 4, 4934 } } do
        local plan = tune(sh[2], sh[1], { form = "columns", stat_parts = sp })
        assert.are.equal("columns", plan.form)
        assert.are.equal(sp, plan.stat_parts)
        check(sh[1], sh[2], 60 + 10 * k + j)
      end
    end
  end)
end)
