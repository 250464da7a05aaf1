-- The prefill kernel of lumus.scaled_dot_product_attention (shaders/attention_flash.comp)
-- against the float64 reference: a seeded random sweep of (B, H, Tq, Tk, hd) with odd and
-- prime lengths, hd in {16, 32, 64, 80, 128}, causal or not, masks, every dtype, with the
-- flash kernel forced through lumus.tune.attention (where it does not fit this device,
-- the row-tile kernel runs and the case says so). Tolerances as spec/attention_spec.lua:
-- |got - want| <= tol * max(1, |want|), float32 2e-5, float16 3e-3, bfloat16 2.4e-2.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local TOL = { float32 = 2e-5, float16 = 3e-3, bfloat16 = 2.4e-2 }
local sdpa = lumus.scaled_dot_product_attention
local g = ref.rng(20261203)

local function randt(shape, dtype)
  local t = lumus.tensor(ref.random_table(shape, g.normal), dtype and { dtype = dtype } or nil)
  return t, t:to_table()
end

-- A nested table of f() values (any type) of this shape.
local function table_of(shape, f, d)
  d = d or 1
  local t = {}
  for i = 1, shape[d] do
    if d == #shape then t[i] = f() else t[i] = table_of(shape, f, d + 1) end
  end
  return t
end

local function int(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end

-- Runs f with the flash kernel forced; returns whether the plan of (bh, tq, tk, hd) is it.
local function with_flash(bh, tq, tk, hd, f)
  local plan = lumus.tune.attention(bh, tq, tk, hd, { kernel = "flash" })
  local ok, err = pcall(f)
  lumus.tune.attention(1, 1, 1, 1, {})
  if not ok then error(err, 0) end
  return plan.kernel == "flash"
end

describe("scaled_dot_product_attention's flash kernel", function()
  it("matches the reference over a seeded sweep of shapes (odd and prime lengths, hd 16..128)", function()
    local primes = { 1, 2, 3, 5, 7, 13, 31, 37, 61, 67, 97, 101, 127, 131 }
    local ran = 0
    for case = 1, 20 do
      local hd = ({ 16, 32, 64, 80, 128 })[(case - 1) % 5 + 1]
      local B, H = int(1, 2), int(1, 3)
      local Tq = case % 3 == 0 and primes[int(1, #primes)] or int(1, 130)
      local Tk = case % 4 == 0 and Tq or (case % 4 == 1 and primes[int(1, #primes)] or int(1, 140))
      if hd >= 80 and B * H * Tq * Tk > 40000 then B, H = 1, 1 end
      local causal = case % 2 == 0
      local q, qt = randt { B, H, Tq, hd }
      local k, kt = randt { B, H, Tk, hd }
      local v, vt = randt { B, H, Tk, hd }
      local what = ("case %d: %dx%dx%dx%d hd %d causal %s"):format(case, B, H, Tq, Tk, hd, tostring(causal))
      local flash = with_flash(B * H, Tq, Tk, hd, function()
        checks.close(sdpa(q, k, v, { causal = causal }),
                     ref.scaled_dot_product_attention(qt, kt, vt, { causal = causal }), { mixed = TOL.float32, what = what })
      end)
      if flash then ran = ran + 1 end
    end
    -- hd 128 may not fit a small shared memory (lavapipe's 32 KiB); the others must
    assert.is_true(ran >= 16, "the flash kernel ran " .. ran .. " of 20 cases")
  end)

  it("takes bool and float masks (broadcast), causal with both, and -inf entries", function()
    local B, H, Tq, Tk, hd = 2, 2, 45, 71, 32
    local q, qt = randt { B, H, Tq, hd }
    local k, kt = randt { B, H, Tk, hd }
    local v, vt = randt { B, H, Tk, hd }
    for _, mshape in ipairs { { Tq, Tk }, { B, 1, Tq, Tk }, { 1, H, 1, Tk } } do
      local bt = table_of(mshape, function() return g.uniform() < 0.7 end)
      local ft = ref.random_table(mshape, function() return g.uniform() < 0.1 and -math.huge or g.normal() end)
      local bm, fm = lumus.tensor(bt, { dtype = "bool" }), lumus.tensor(ft)
      assert.is_true(with_flash(B * H, Tq, Tk, hd, function()
        for _, causal in ipairs { false, true } do
          local what = table.concat(mshape, "x") .. (causal and " causal" or "")
          checks.close(sdpa(q, k, v, { mask = bm, causal = causal }),
                       ref.scaled_dot_product_attention(qt, kt, vt, { mask = bt, causal = causal }),
                       { mixed = TOL.float32, what = "bool mask " .. what })
          checks.close(sdpa(q, k, v, { mask = fm, causal = causal }),
                       ref.scaled_dot_product_attention(qt, kt, vt, { mask = ft, causal = causal }),
                       { mixed = TOL.float32, what = "float mask " .. what })
        end
      end))
    end
  end)

  it("gives 0 for fully masked rows (Tk < Tq causal, masks) and NaN for NaN", function()
    local q, qt = randt { 1, 2, 70, 16 }
    local k, kt = randt { 1, 2, 40, 16 }
    local v, vt = randt { 1, 2, 40, 16 }
    assert.is_true(with_flash(2, 70, 40, 16, function()
      -- the first 30 rows see no key under the bottom-right causal mask
      local y = sdpa(q, k, v, { causal = true }):to_table()
      checks.close(y, ref.scaled_dot_product_attention(qt, kt, vt, { causal = true }), { mixed = TOL.float32, what = "Tk < Tq" })
      for i = 1, 30 do for d = 1, 16 do assert.are.equal(0, y[1][2][i][d]) end end
      -- a bool mask that leaves row 5 nothing
      local mt = table_of({ 70, 40 }, function() return true end)
      for j = 1, 40 do mt[5][j] = false end
      local ym = sdpa(q, k, v, { mask = lumus.tensor(mt, { dtype = "bool" }) }):to_table()
      for d = 1, 16 do assert.are.equal(0, ym[1][1][5][d]) end
      -- NaN in q makes its row NaN, the others stay finite
      qt[1][1][7][3] = 0 / 0
      local yn = sdpa(lumus.tensor(qt), k, v):to_table()
      for d = 1, 16 do assert.is_true(yn[1][1][7][d] ~= yn[1][1][7][d]) end
      for d = 1, 16 do assert.is_true(yn[1][1][8][d] == yn[1][1][8][d]) end
    end))
  end)

  it("works in float16 and bfloat16, on views and with broadcast k and v", function()
    for _, dtype in ipairs { "float16", "bfloat16" } do
      local B, H, Tq, Tk, hd = 2, 3, 67, 67, 64
      local q = randt({ B, H, Tq, hd }, dtype)
      local k = randt({ B, 1, Tk, hd }, dtype)
      local v = randt({ 1, H, Tk, hd }, dtype)
      assert.is_true(with_flash(B * H, Tq, Tk, hd, function()
        for _, causal in ipairs { false, true } do
          checks.close(sdpa(q, k, v, { causal = causal }),
                       ref.scaled_dot_product_attention(q:to_table(), k:to_table(), v:to_table(), { causal = causal }),
                       { mixed = TOL[dtype], what = dtype .. (causal and " causal" or "") })
        end
      end))
    end
    -- heads split from [B, T, H * hd] by view + transpose (strided rows), hd 80
    local B, T, H, hd = 1, 53, 2, 80
    local x = randt { B, T, H * hd }
    local heads = x:view({ B, T, H, hd }):transpose(2, 3)
    local ht = heads:contiguous():to_table()
    assert.is_true(with_flash(B * H, T, T, hd, function()
      checks.close(sdpa(heads, heads, heads, { causal = true, scale = 0.3 }),
                   ref.scaled_dot_product_attention(ht, ht, ht, { causal = true, scale = 0.3 }),
                   { mixed = TOL.float32, what = "view heads" })
    end))
  end)

  it("is the automatic choice where the query blocks fill the device, and tune.attention checks its options", function()
    local p = lumus.tune.attention(64, 1024, 1024, 64)
    assert.are.equal("flash", p.kernel)
    assert.are.equal(1, p.splits)
    local d = lumus.tune.attention(1, 1, 1024, 64)
    assert.are.equal("rows", d.kernel)
    -- the first tile runs its compiled-in variant; forcing it runs the specialized one, with the same values
    assert.is_true(p.fixed_tile)
    local q, qt = randt { 2, 2, 70, 64 }
    local k, kt = randt { 2, 2, 75, 64 }
    local v, vt = randt { 2, 2, 75, 64 }
    local want = ref.scaled_dot_product_attention(qt, kt, vt, { causal = true })
    local forced = lumus.tune.attention(4, 70, 75, 64, { kernel = "flash", flash_tile = { 128, 8, 4, 4 } })
    local ys = sdpa(q, k, v, { causal = true })
    local auto = lumus.tune.attention(4, 70, 75, 64, { kernel = "flash" })
    local yf = sdpa(q, k, v, { causal = true })
    assert.are.equal(128, lumus.tune.attention(96, 1024, 1024, 64, { coop_rows = 128 }).coop_rows)
    checks.errors(lumus.tune.attention, "#5.*coop_rows must be 64 or 128", 1, 1, 1, 1, { coop_rows = 96 })
    assert.is_false(lumus.tune.attention(96, 1024, 1024, 64, {}).coop_fixed_rows)
    assert.is_true(lumus.tune.attention(96, 1024, 1024, 64, { coop_fixed_rows = true }).coop_fixed_rows)
    assert.is_false(lumus.tune.attention(96, 1024, 1024, 64, { coop_fixed_rows = false }).coop_fixed_rows)
    assert.are.equal("required", lumus.tune.attention(96, 1024, 1024, 64, { coop_fixed_rows = "required" }).coop_fixed_rows)
    checks.errors(lumus.tune.attention, "#5.*coop_fixed_rows must be a boolean or \"required\"", 1, 1, 1, 1, { coop_fixed_rows = 1 })
    assert.is_false(lumus.tune.attention(96, 1024, 1024, 64, {}).coop_fold_scale)
    assert.is_true(lumus.tune.attention(96, 1024, 1024, 64, { coop_fold_scale = true }).coop_fold_scale)
    assert.is_false(lumus.tune.attention(96, 1024, 1024, 64, { coop_fold_scale = false }).coop_fold_scale)
    checks.errors(lumus.tune.attention, "#5.*coop_fold_scale must be a boolean", 1, 1, 1, 1, { coop_fold_scale = "no" })
    lumus.tune.attention(1, 1, 1, 1, {})
    assert.are.same({ "flash", false, "flash", true }, { forced.kernel, forced.fixed_tile, auto.kernel, auto.fixed_tile })
    checks.close(ys, want, { mixed = TOL.float32, what = "specialized tile" })
    checks.close(yf, want, { mixed = TOL.float32, what = "compiled-in tile" })
    local f = lumus.tune.attention(64, 256, 256, 64, { flash_tile = { 32, 4, 4, 4 } })
    lumus.tune.attention(1, 1, 1, 1, {})
    assert.are.same({ "flash", 32, 4, 4, 4 }, { f.kernel, f.workgroup, f.lanes, f.rows_per_lane, f.keys_per_lane })
    checks.errors(lumus.tune.attention, "#5.*kernel must be \"auto\", \"rows\", \"flash\" or \"coop\"", 1, 1, 1, 1,
                  { kernel = "fast" })
    checks.errors(lumus.tune.attention, "#5.*flash_tile must be {workgroup, lanes, rows_per_lane, keys_per_lane}",
                  1, 1, 1, 1, { flash_tile = { 128, 3, 4, 4 } })
    assert.are.equal("flash", lumus.tune.attention(64, 1024, 1024, 64).kernel)
  end)

  it("gives the reference with and without the K/V prefetch, on compiled-in and specialized tiles", function()
    local ran = 0
    for case = 1, 8 do
      local hd = ({ 64, 61, 16, 80, 128, 64, 33, 57 })[case]
      local B, H = int(1, 2), int(1, 2)
      local Tq = case % 2 == 0 and int(1, 31) * 2 + 1 or int(60, 140)
      local Tk = case % 3 == 0 and Tq or int(1, 150)
      if hd >= 80 then B, H = 1, 1 end
      local causal = case % 2 == 1
      local q, qt = randt { B, H, Tq, hd }
      local k, kt = randt { B, H, Tk, hd }
      local v, vt = randt { B, H, Tk, hd }
      local want = ref.scaled_dot_product_attention(qt, kt, vt, { causal = causal })
      for _, pf in ipairs { true, false } do
        -- odd cases: the automatic tile (the compiled-in one for hd 57..64 where its blocks fill the device)
        local opts = { kernel = "flash", prefetch = pf, flash_tile = case % 2 == 0 and { 64, 8, 4, 4 } or nil }
        local plan = lumus.tune.attention(B * H, Tq, Tk, hd, opts)
        local ok, y = pcall(sdpa, q, k, v, { causal = causal })
        lumus.tune.attention(1, 1, 1, 1, {})
        assert.is_true(ok, tostring(y))
        assert.are.equal(pf, plan.prefetch)
        if plan.kernel == "flash" then ran = ran + 1 end
        checks.close(y, want, { mixed = TOL.float32, what = ("case %d: %dx%dx%dx%d hd %d causal %s prefetch %s (%s%s)")
          :format(case, B, H, Tq, Tk, hd, tostring(causal), tostring(pf), plan.kernel, plan.fixed_tile and ", fixed" or "") })
      end
    end
    assert.is_true(ran >= 12, "the flash kernel ran " .. ran .. " of 16 cases")
    checks.errors(lumus.tune.attention, "#5.*prefetch must be a boolean", 1, 1, 1, 1, { prefetch = "yes" })
    checks.errors(lumus.tune.attention, "#5.*coop_strips must be 1 or 2", 1, 1, 1, 1, { coop_strips = 3 })
    local two = lumus.tune.attention(96, 1024, 1024, 64, { coop_strips = 2 })
    local one = lumus.tune.attention(96, 1024, 1024, 64, {})
    assert.are.same({ 2, 1 }, { two.coop_strips, one.coop_strips })
    -- the scores stay in registers with one strip unless shared memory is asked for
    assert.are.same({ "shared", "registers" }, { two.coop_scores, one.coop_scores })
    assert.are.equal("shared", lumus.tune.attention(96, 1024, 1024, 64, { coop_scores = "shared" }).coop_scores)
    assert.are.equal("registers", lumus.tune.attention(96, 1024, 1024, 64, { coop_scores = "auto" }).coop_scores)
    checks.errors(lumus.tune.attention, "#5.*coop_scores must be \"auto\", \"registers\" or \"shared\"", 1, 1, 1, 1,
                  { coop_scores = "fast" })
    lumus.tune.attention(1, 1, 1, 1, {})
    assert.is_true(lumus.tune.attention(64, 1024, 1024, 64).prefetch)
  end)

  it("takes the tensor-core kernel for float16 only where the device has cooperative matrices", function()
    local coop = lumus.device().cooperative_matrix
    assert.are.equal(coop and true or false, lumus.tune.attention(96, 1024, 1024, 64).coop)
    assert.is_false(lumus.tune.attention(96, 1024, 1024, 72).coop)   -- hd not a multiple of 16
    -- forcing it where it does not apply leaves the automatic SIMT choice, with the right values
    local q = randt({ 1, 2, 40, 32 }, "float16")
    local k = randt({ 1, 2, 40, 32 }, "float16")
    local v = randt({ 1, 2, 40, 32 }, "float16")
    lumus.tune.attention(1, 1, 1, 1, { kernel = "coop" })
    local ok, y = pcall(sdpa, q, k, v, { causal = true })
    lumus.tune.attention(1, 1, 1, 1, {})
    assert.is_true(ok, tostring(y))
    checks.close(y, ref.scaled_dot_product_attention(q:to_table(), k:to_table(), v:to_table(), { causal = true }),
                 { mixed = TOL.float16, what = "kernel = coop" })
  end)
end)
