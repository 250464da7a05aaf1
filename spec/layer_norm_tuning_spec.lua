-- The LayerNorm tuning hook (lumus.tune.layer_norm) may only produce valid kernel
-- configurations, whatever combination of form, parts and workgroup it is given.
--
-- Two kinds of checks:
--   * the configurations it reports for every forced form, part count and workgroup
--     over D = 1..80 keep the kernels' invariants: a power-of-two workgroup, at least
--     one thread per part (thread i collects part i's record), no empty part;
--   * rows normalized under a sweep of forced settings over D = 1..80 match the float64
--     reference (lumus.reference), with weight and bias, outputs poisoned with NaN.
-- Regression: {form = "split", parts = 64, wg = 1} raised the workgroup to the part
-- count (9, 10, 11, ... threads: not a whole number of subgroups), and lavapipe then
-- computed wrong rows for 53 of D = 1..80; parts that did not divide the row left
-- trailing parts empty (D = 18, parts = 7: 7 parts of 3 cover 21 of 18 elements), whose
-- NaN statistics spoiled the row whenever the parts exchanged them.
--
-- Tolerances as in spec/layer_norm_spec.lua: y within 1e-4 * max(1, |ref|) per element
-- and 1e-5 relative L2, mean within 1e-5 * max(1, |ref|), invstd within 1e-4 relative.
local lumus = require "lumus"
local ref = require "lumus.reference"

local Y_REL_L2, Y_MAX, MEAN_MAX, INVSTD_REL = 1e-5, 1e-4, 1e-5, 1e-4
local NAN = 0 / 0

local function is_pow2(v)
  if v < 1 or v ~= math.floor(v) then return false end
  while v % 2 == 0 do v = v / 2 end
  return v == 1
end

-- Normalizes `rows` rows of d (weight and bias) under the configuration in force and
-- returns nil, or a message naming what is off.
local function mismatch(rows, d, rng)
  local xt = ref.random_table({ rows, d }, function() return 2 + rng.normal() end)
  local wt = ref.random_table({ d }, function() return 1 + 0.5 * rng.normal() end)
  local bt = ref.random_table({ d }, function() return rng.normal() end)
  local x, w, b = lumus.tensor(xt), lumus.tensor(wt), lumus.tensor(bt)
  local y, m, r = lumus.full({ rows, d }, NAN), lumus.full({ rows }, NAN), lumus.full({ rows }, NAN)
  lumus.layer_norm_forward(x, w, b, 1e-5, { out = y, mean = m, invstd = r })
  local wy, wm, wr = ref.layer_norm_forward(xt, wt, bt, 1e-5)
  local gy, gm, gr = y:to_table(), m:to_table(), r:to_table()
  for _, t in ipairs { x, w, b, y, m, r } do t:free() end
  local cy = ref.compare(gy, wy)
  if not (cy.max_rel <= Y_MAX and cy.rel_l2 <= Y_REL_L2) then
    return ("y: max error %.3g, relative L2 %.3g"):format(cy.max_rel, cy.rel_l2)
  end
  local cm = ref.compare(gm, wm)
  if not (cm.max_rel <= MEAN_MAX) then return ("mean: max error %.3g"):format(cm.max_rel) end
  for i = 1, rows do
    local e = math.abs(gr[i] / wr[i] - 1)
    if not (e <= INVSTD_REL) then return ("invstd: relative error %.3g at row %d"):format(e, i) end
  end
end

describe("layer_norm tuning hook", function()
  local config = lumus.tune.layer_norm

  -- Restores the automatic choice whatever happened.
  after_each(function() if config then config(1, {}) end end)

  it("reports only valid configurations (forms x parts x wg, D = 1..80)", function()
    local bad = {}
    for _, form in ipairs { "group", "subgroup", "stream", "split", "row" } do
      for _, parts in ipairs { 0, 1, 2, 3, 5, 7, 8, 13, 33, 64 } do
        for _, wg in ipairs { 0, 1, 2, 4, 8, 16, 32, 64, 128, 1024 } do
          for d = 1, 80 do
            local c = config(d, { form = form, parts = parts, wg = wg })
            local why
            if not is_pow2(c.workgroup) then why = "workgroup not a power of two" end
            if c.variant == "split" then
              local n = c.vectors   -- D / 4, D, or with masked vec4s ceil((D + 3) / 4)
              local chunk = math.floor((n + c.parts - 1) / c.parts)
              if c.parts > c.workgroup then why = "fewer threads than parts" end
              if (c.parts - 1) * chunk >= n then why = "an empty part" end
              if c.rows_per_group ~= nil then why = "split reports rows_per_group" end
            elseif not (c.rows_per_group and c.rows_per_group >= 1) then
              why = "no rows_per_group"
            end
            if why and #bad < 10 then
              bad[#bad + 1] = ("form=%s parts=%d wg=%d D=%d: %s (workgroup %d, parts %s)")
                :format(form, parts, wg, d, why, c.workgroup, tostring(c.parts))
            end
          end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  -- Each vector a thread holds is a register of a specialized shader: a forced group
  -- form whose row would need more than 64 per thread streams instead.
  it("keeps forced forms to at most 64 vectors per thread", function()
    for _, d in ipairs { 262147, 1048576, 16777219 } do
      for _, tune in ipairs { { form = "group" }, { form = "split", parts = 1 }, { form = "stream" } } do
        local c = config(d, tune)
        assert(c.items <= 64, ("D=%d form=%s: %d items per thread"):format(d, tune.form, c.items))
        assert.are.equal("stream", c.variant)
      end
    end
    assert.are.equal("group", config(4096, { form = "group" }).variant)
  end)

  -- Each setting over all of D = 1..80 (2 rows each): vec4 and scalar rows, one part
  -- per vector and more parts than vectors, workgroups below, at and above the parts.
  local sweeps = {
    { form = "split", parts = 64, wg = 1 },
    { form = "split", parts = 7, wg = 16 },
    { form = "split", parts = 3, wg = 1024, classes = 3 },
    { form = "split", parts = 8, wg = 2, records = "fenced" },
    { form = "stream", wg = 1 },
    { form = "group", wg = 1 },
    { form = "row", wg = 1 },
    { form = "subgroup", wg = 1 },
  }
  for _, tune in ipairs(sweeps) do
    local label = {}
    for _, k in ipairs { "form", "parts", "wg", "classes", "records" } do
      if tune[k] then label[#label + 1] = ("%s=%s"):format(k, tune[k]) end
    end
    label = table.concat(label, " ")
    it(("matches the reference under %s for D = 1..80"):format(label), function()
      local rng = ref.rng(#label)
      local bad = {}
      for d = 1, 80 do
        config(d, tune)
        local why = mismatch(2, d, rng)
        if why then bad[#bad + 1] = ("D=%d: %s"):format(d, why) end
      end
      assert(#bad == 0, ("%s: wrong for %d of D = 1..80:\n%s"):format(label, #bad, table.concat(bad, "\n")))
    end)
  end
end)
