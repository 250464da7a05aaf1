-- matmul's tiled kernel (shaders/matmul.comp) in every built-in configuration and the
-- ones bench/matmul_tune.lua measures: tile sizes and thread orders (warp = the log2 of
-- the columns one run of 32 threads covers; 0 = row order), each forced through the
-- internal hook lumus.tune.matmul, against the float64 reference on odd shapes (partial
-- tiles and K steps, scalar loads), vec4 shapes, a and b read transposed, and batches.
-- Tolerance as spec/matmul_spec.lua's: |c - ref| <= 2 K 2^-24 (|a| |b|)_ij, relative L2
-- error 1e-6; outputs are NaN-poisoned first, so an element not written fails.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local U = 2 ^ -24
local unpack_ = table.unpack or unpack

local function abs_table(t)
  if type(t) == "number" then return math.abs(t) end
  local out = {}
  for i = 1, #t do out[i] = abs_table(t[i]) end
  return out
end

local function transpose(t)
  local out = {}
  for j = 1, #t[1] do
    out[j] = {}
    for i = 1, #t do out[j][i] = t[i][j] end
  end
  return out
end

local function check(got, a, b, what)
  local want = ref.matmul(a, b)
  local scale = ref.flatten(ref.matmul(abs_table(a), abs_table(b)))
  local k = #b
  local bounds = {}
  for i = 1, #scale do bounds[i] = 2 * k * U * scale[i] end
  return checks.close(got, want, { abs = bounds, rel_l2 = 1e-6, what = what })
end

local function poisoned(shape)
  local t = lumus.empty(shape)
  lumus.fill(t, 0 / 0)
  return t
end

-- M x K by K x N in the four layouts, and a batch of two with b transposed.
local function check_forms(m, k, n, seed, what)
  local g = ref.rng(seed)
  local at, bt = ref.random_table({ m, k }, g.normal), ref.random_table({ k, n }, g.normal)
  local a, b = lumus.tensor(at), lumus.tensor(bt)
  local a_t, b_t = lumus.tensor(transpose(at)), lumus.tensor(transpose(bt))
  local function run(x, y, opts, form)
    opts.out = poisoned({ m, n })
    check(lumus.matmul(x, y, opts), at, bt, what .. " " .. form)
  end
  run(a, b, {}, "nn")
  run(a_t, b, { transpose_a = true }, "tn")
  run(a, b_t, { transpose_b = true }, "nt")
  run(a_t, b_t, { transpose_a = true, transpose_b = true }, "tt")
  local a2t, b2t = ref.random_table({ m, k }, g.normal), ref.random_table({ k, n }, g.normal)
  local ab = lumus.tensor({ at, a2t })
  local bb = lumus.tensor({ transpose(bt), transpose(b2t) })
  local c = lumus.matmul(ab, bb, { transpose_b = true, out = poisoned({ 2, m, n }) }):to_table()
  check(lumus.tensor(c[1]), at, bt, what .. " batch 1")
  check(lumus.tensor(c[2]), a2t, b2t, what .. " batch 2")
end

-- Forces tile t; false when the device's shared memory is too small for it (lavapipe's
-- 32 KiB and a 128 x 128 x 16 tile's 33 KiB: the automatic choice skips such tiles).
local function force(t)
  local ok, err = pcall(lumus.tune.matmul, 1, 1, 1,
    { bm = t[1], bn = t[2], bk = t[3], tm = t[4], tn = t[5], warp = t[6], ahead = t[7], path = "tiled" })
  if ok then return true end
  assert.matches("tiles exceed the device's shared memory", err)
  assert(2 * t[3] * ((t[1] / 4 + 1) + (t[2] / 4 + 1)) * 16 > 32768, "a tile within 32 KiB refused")
  return false
end

describe("matmul tile configurations", function()
  after_each(function() lumus.tune.matmul(1, 1, 1, {}) end)

  -- bm, bn, bk, tm, tn, warp, ahead
  local configs = {
    { 128, 128, 8, 8, 8, 0, 1 }, { 128, 128, 16, 8, 8, 3, 1 }, { 128, 128, 16, 8, 8, 2, 1 },
    { 128, 64, 16, 8, 8, 3, 1 }, { 64, 128, 16, 8, 8, 3, 1 }, { 64, 64, 16, 8, 8, 2, 1 },
    { 64, 64, 16, 4, 4, 3, 1 }, { 64, 32, 16, 4, 4, 2, 1 }, { 128, 64, 16, 8, 4, 3, 1 },
    { 128, 256, 8, 8, 16, 3, 1 }, { 32, 32, 8, 4, 4, 0, 1 }, { 32, 32, 8, 4, 4, 3, 1 },
    { 128, 128, 16, 8, 8, 3, 2 }, { 128, 64, 16, 8, 8, 3, 2 }, { 64, 64, 8, 8, 8, 0, 2 }, { 32, 32, 8, 4, 4, 2, 2 },
    { 128, 128, 16, 8, 8, 0, 1 }, { 128, 64, 16, 8, 8, 0, 1 }, { 64, 64, 16, 8, 8, 0, 1 }, { 64, 32, 16, 4, 4, 0, 1 },
  }
  -- Every built-in tile is among them.
  it("cover every built-in tile", function()
    for _, t in ipairs(lumus.tune.matmul(1, 1, 1).builtin) do
      local found = false
      for _, c in ipairs(configs) do
        local same = true
        for i = 1, 7 do same = same and c[i] == t[i] end
        found = found or same
      end
      assert(found, "built-in tile " .. table.concat(t, ",") .. " is not checked here")
    end
  end)

  for _, t in ipairs(configs) do
    it(("give the product with tile %dx%dx%d/%dx%d warp %d ahead %d"):format(unpack_(t)), function()
      if not force(t) then return end
      local cfg = lumus.tune.matmul(130, 67, 21)
      assert.are.same(t, { cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn, cfg.warp, cfg.ahead })
      check_forms(130, 21, 67, 1, "odd")          -- partial tiles and K step, scalar loads
      check_forms(36, 44, 20, 2, "vec4")          -- vec4 loads, one partial tile
      check_forms(t[1] + 4, 2 * t[3], t[2], 3, "tile+")   -- whole K steps, one row past a tile
      if t[7] == 2 then   -- the unrolled loop's ends: 1, 2, 3 and 5 K steps
        for q, steps in ipairs { 1, 2, 3, 5 } do check_forms(33, steps * t[3] - 2, 37, 3 + q, "steps " .. steps) end
      end
    end)
  end

  it("refuse thread orders the tile's thread grid cannot take, naming the rule", function()
    -- 32x32/4x4 is an 8 x 8 thread grid: runs of 32 threads as 1 x 32 (warp 5) do not fit.
    local ok, err = pcall(lumus.tune.matmul, 1, 1, 1, { bm = 32, bn = 32, bk = 8, tm = 4, tn = 4, warp = 5 })
    assert.is_false(ok)
    assert.matches("warp w needs the thread grid", err)
    ok, err = pcall(lumus.tune.matmul, 1, 1, 1, { bm = 64, bn = 64, bk = 16, tm = 8, tn = 8, warp = 6 })
    assert.is_false(ok)
    assert.matches("warp must be 0 to 5", err)
    ok, err = pcall(lumus.tune.matmul, 1, 1, 1, { warp = 2 })
    assert.is_false(ok)
    assert.matches("warp and ahead need a tile", err)
    ok, err = pcall(lumus.tune.matmul, 1, 1, 1, { bm = 64, bn = 64, bk = 16, tm = 8, tn = 8, ahead = 3 })
    assert.is_false(ok)
    assert.matches("ahead must be 1 or 2", err)
  end)
end)
