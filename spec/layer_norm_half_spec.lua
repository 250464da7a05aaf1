-- layer_norm_forward on float16 and bfloat16 x, weight and bias: float32 statistics,
-- y in x's dtype, against the float64 reference on the rounded inputs. y is rounded
-- once from float32: within one unit of the dtype's last place of the exact value
-- (2^-10 relative for float16, 2^-7 for bfloat16, plus float32 noise near 0); mean within
-- 1e-5 * max(1, |mean|), invstd within 1e-4 relative (float32 arithmetic, as for float32 x).
local lumus = require "lumus"
local ref = require "lumus.reference"

local ULP = { float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }
local NAN = 0 / 0

-- deterministic values: a row-dependent offset plus a spread, some negative
local function values(rows, d, seed)
  local t = {}
  for r = 1, rows do
    local row = {}
    for j = 1, d do row[j] = 2 + math.sin(seed * 7.1 + r * 1.3 + j * 0.37) * (1 + (j % 5)) end
    t[r] = row
  end
  return t
end

local function check(dt, rows, d, how)
  local xt = values(rows, d, 1)
  local wt, bt
  if how.affine then
    wt, bt = {}, {}
    for j = 1, d do wt[j] = 1 + 0.5 * math.cos(j); bt[j] = math.sin(j * 0.5) end
  end
  local x = lumus.tensor(xt):to(dt)
  local w, b = wt and lumus.tensor(wt):to(dt), bt and lumus.tensor(bt):to(dt)
  -- the reference works on the rounded values the kernel sees
  local xr = x:to("float32"):to_table()
  local wr, br = w and w:to("float32"):to_table(), b and b:to("float32"):to_table()
  local y = how.in_place and x or lumus.full({ rows, d }, NAN, { dtype = dt })
  local m, s = lumus.full({ rows }, NAN), lumus.full({ rows }, NAN)
  lumus.layer_norm_forward(x, w, b, 1e-5, { out = y, mean = m, invstd = s })
  assert.equal(dt, y:dtype())
  local gy, gm, gs = y:to("float32"):to_table(), m:to_table(), s:to_table()
  local wy, wm, ws = ref.layer_norm_forward(xr, wr, br, 1e-5)
  for r = 1, rows do
    for j = 1, d do
      local e = math.abs(gy[r][j] - wy[r][j])
      local bound = ULP[dt] * math.abs(wy[r][j]) + 1e-5
      if not (e <= bound) then
        error(("%s %dx%d: y[%d][%d] = %.8g, want %.8g"):format(dt, rows, d, r, j, gy[r][j], wy[r][j]))
      end
    end
    assert.is_true(math.abs(gm[r] - wm[r]) <= 1e-5 * math.max(1, math.abs(wm[r])), "mean of row " .. r)
    assert.is_true(math.abs(gs[r] / ws[r] - 1) <= 1e-4, "invstd of row " .. r)
  end
end

describe("layer_norm_forward on float16 and bfloat16", function()
  for _, dt in ipairs({ "float16", "bfloat16" }) do
    it(dt .. ": rows of every width class, with and without weight and bias", function()
      for _, shape in ipairs({ { 7, 768 }, { 5, 7 }, { 3, 64 }, { 2, 4096 }, { 1, 30000 }, { 33, 3 } }) do
        check(dt, shape[1], shape[2], { affine = true })
        check(dt, shape[1], shape[2], {})
      end
    end)

    it(dt .. ": the tile form (forced; automatic on GPUs for short rows) over runs of many rows", function()
      finally(function() lumus.tune.layer_norm(1, {}) end)
      -- rows of 1-15 over several runs of 4096 elements, rows of 5 and 13 across a run's
      -- 16-byte units, a last partial unit; a row of 40 (segments of lanes)
      for _, shape in ipairs({ { 5000, 1 }, { 1700, 5 }, { 900, 7 }, { 641, 13 }, { 333, 15 }, { 9, 6 }, { 300, 40 } }) do
        lumus.tune.layer_norm(shape[2], { form = "tile" })
        assert.equal("tile", lumus.tune.layer_norm(shape[2]).variant)
        check(dt, shape[1], shape[2], { affine = true })
        check(dt, shape[1], shape[2], {})
        check(dt, shape[1], shape[2], { affine = true, in_place = true })
      end
    end)

    it(dt .. ": the group form's short aligned rows at 3-4 vectors per thread (GPUs' default)", function()
      finally(function() lumus.tune.layer_norm(1, {}) end)
      for _, shape in ipairs({ { 5, 768 }, { 3, 872 }, { 4, 1024 }, { 3, 516 } }) do
        lumus.tune.layer_norm(shape[2], { form = "group", items_target = 4 })
        local c = lumus.tune.layer_norm(shape[2], nil, shape[1], dt)
        assert.equal("group", c.variant)
        assert.is_true(c.items >= 3 and c.items <= 4, "items " .. c.items)
        check(dt, shape[1], shape[2], { affine = true })
        check(dt, shape[1], shape[2], { affine = true, in_place = true })
      end
    end)

    it(dt .. ": masked 4-element vectors over D % 4 ~= 0 (automatic on GPUs) in every form", function()
      finally(function() lumus.tune.layer_norm(1, {}) end)
      -- rows starting at every offset within a vector, slices (split2 with 3 parts) ending
      -- inside vectors, a row longer than one workgroup's registers (stream)
      local shapes = { { 9, 5 }, { 13, 7 }, { 7, 17 }, { 5, 37 }, { 3, 771 }, { 2, 6867 } }
      for _, form in ipairs({ "subgroup", "group", "stream", "split2" }) do
        lumus.tune.layer_norm(1, { scalar = false, form = form, parts = form == "split2" and 3 or 0 })
        for _, shape in ipairs(shapes) do
          local c = lumus.tune.layer_norm(shape[2], nil, shape[1], dt)
          assert.is_true(c.masked, form .. " masked")
          assert.equal("clamped", c.loads)
          -- the subgroup form only where a row fits a subgroup's lanes (else automatic)
          if form ~= "subgroup" or c.variant == "subgroup" then assert.equal(form, c.variant) end
          check(dt, shape[1], shape[2], { affine = true })
          check(dt, shape[1], shape[2], {})
          check(dt, shape[1], shape[2], { affine = true, in_place = true })
        end
        local x = lumus.tensor({ { 1, 2, 3, 4, 5 }, { 1, math.huge, 3, 4, 5 }, { 5, 4, 3, 2, 1 } }):to(dt)
        local y = lumus.layer_norm_forward(x):to("float32"):to_table()
        for j = 1, 5 do assert.is_true(y[2][j] ~= y[2][j], form .. ": row 2 element " .. j) end
        local want = ref.layer_norm_forward({ { 1, 2, 3, 4, 5 }, { 5, 4, 3, 2, 1 } }, nil, nil, 1e-5)
        for j = 1, 5 do
          assert.is_true(math.abs(y[1][j] - want[1][j]) <= ULP[dt] * math.abs(want[1][j]) + 1e-5)
          assert.is_true(math.abs(y[3][j] - want[2][j]) <= ULP[dt] * math.abs(want[2][j]) + 1e-5)
        end
      end
    end)

    it(dt .. ": rows of D % 4 == 0 through the masked path when asked (masked_aligned) in every form", function()
      finally(function() lumus.tune.layer_norm(1, {}) end)
      for _, form in ipairs({ "subgroup", "group", "stream", "split2" }) do
        lumus.tune.layer_norm(1, { masked_aligned = true, form = form, parts = form == "split2" and 3 or 0 })
        for _, shape in ipairs({ { 9, 8 }, { 5, 36 }, { 3, 772 }, { 2, 6868 } }) do
          local c = lumus.tune.layer_norm(shape[2], nil, shape[1], dt)
          assert.is_true(c.masked, form .. " masked")
          if form ~= "subgroup" or c.variant == "subgroup" then assert.equal(form, c.variant) end
          check(dt, shape[1], shape[2], { affine = true })
          check(dt, shape[1], shape[2], { affine = true, in_place = true })
        end
      end
    end)

    for _, lean in ipairs { true, false } do
      it(("%s: lean masks %s in every form"):format(dt, lean and "on" or "off"), function()
        finally(function() lumus.tune.layer_norm(1, {}) end)
        for _, form in ipairs({ "subgroup", "group", "stream", "split2" }) do
          lumus.tune.layer_norm(1, { scalar = false, form = form, parts = form == "split2" and 3 or 0, lean_masks = lean })
          for _, shape in ipairs({ { 9, 5 }, { 13, 7 }, { 7, 17 }, { 5, 37 }, { 3, 771 }, { 2, 6867 } }) do
            assert.are.equal(lean, lumus.tune.layer_norm(shape[2], nil, shape[1], dt).lean_masks)
            check(dt, shape[1], shape[2], { affine = true })
            check(dt, shape[1], shape[2], { affine = true, in_place = true })
          end
        end
      end)
    end

    it(dt .. ": where masked reads are on, rows of 1-3 still read an element per lane", function()
      finally(function() lumus.tune.layer_norm(1, {}) end)
      lumus.tune.layer_norm(1, { scalar = false, tile = false })   -- masked reads, as on GPUs
      local c = lumus.tune.layer_norm(3, nil, 1000, dt)
      assert.is_false(c.masked)
      assert.equal(1, c.vec)
      c = lumus.tune.layer_norm(7, nil, 1000, dt)
      assert.is_true(c.masked)
      assert.equal(3, c.vectors)   -- (7 + 6) / 4 vectors cover a row at any offset
      c = lumus.tune.layer_norm(4, nil, 1000, dt)
      assert.is_false(c.masked)
      assert.equal(4, c.vec)
      assert.equal(1, c.vectors)
    end)

    it(dt .. ": in place (out = x)", function()
      check(dt, 4, 768, { affine = true, in_place = true })
      check(dt, 3, 6, { affine = true, in_place = true })
    end)

    it(dt .. ": a row with inf gives NaN there and leaves the others exact", function()
      local x = lumus.tensor({ { 1, 2, 3, 4 }, { 1, math.huge, 3, 4 } }):to(dt)
      local y = lumus.layer_norm_forward(x):to("float32"):to_table()
      for j = 1, 4 do assert.is_true(y[2][j] ~= y[2][j], "row 2 element " .. j) end
      local want = ref.layer_norm_forward({ { 1, 2, 3, 4 } }, nil, nil, 1e-5)[1]
      for j = 1, 4 do assert.is_true(math.abs(y[1][j] - want[j]) <= ULP[dt] * math.abs(want[j]) + 1e-5) end
    end)
  end

  it("tune.layer_norm shows a dtype's plan and refuses other dtypes", function()
    assert.equal("table", type(lumus.tune.layer_norm(768, nil, 64, "bfloat16")))
    assert.error_matches(function() lumus.tune.layer_norm(768, nil, 64, "int32") end,
      "bad argument #4 to 'layer_norm' %(dtype must be float32, float16 or bfloat16, got int32%)")
    assert.error_matches(function() lumus.tune.layer_norm(768, nil, 64, "float8") end, "float8")
  end)

  it("raises for mixed dtypes", function()
    local x = lumus.zeros({ 2, 8 }, { dtype = "float16" })
    assert.error_matches(function() lumus.layer_norm_forward(x, lumus.ones({ 8 })) end,
      "bad argument #2 to 'layer_norm_forward' %(weight must be float16 %(x's dtype%), got float32%)")
    assert.error_matches(function() lumus.layer_norm_forward(x, nil, lumus.zeros({ 8 }, { dtype = "bfloat16" })) end,
      "bias must be float16 %(x's dtype%), got bfloat16")
    assert.error_matches(function() lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = lumus.zeros({ 2, 8 }) }) end,
      "out must be float16 %(x's dtype%), got float32")
    assert.error_matches(function()
      lumus.layer_norm_forward(x, nil, nil, 1e-5, { mean = lumus.zeros({ 2 }, { dtype = "float16" }) })
    end, "mean must be float32, got float16")
  end)
end)
