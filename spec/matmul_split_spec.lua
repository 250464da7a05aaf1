-- matmul split over K (src/ops/matmul.c: the K slices as a batch into a temporary, then
-- shaders/matmul_split_sum.comp sums them in order and adds the bias). A GPU takes that
-- path by itself for products with few tiles and a long K (weight gradients); lavapipe
-- takes it only when forced by the internal hook lumus.tune.matmul{split = s}, as here.
-- Tolerance as spec/matmul_spec.lua's: |c - ref| <= 2 K 2^-24 (|a| |b|)_ij + 2^-23 |bias_j|
-- (a split sum is still a float32 sum of the K products), relative L2 error 1e-6.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local U = 2 ^ -24

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

-- got against the float64 product of the tables a (M x K) and b (K x N) (+ bias).
local function check(got, a, b, bias, what)
  local want = ref.matmul(a, b, { bias = bias })
  local scale = ref.flatten(ref.matmul(abs_table(a), abs_table(b)))
  local k, n = #b, #b[1]
  local bounds = {}
  for i = 1, #scale do
    bounds[i] = 2 * k * U * scale[i] + (bias and 2 * U * math.abs(bias[(i - 1) % n + 1]) or 0)
  end
  return checks.close(got, want, { abs = bounds, rel_l2 = 1e-6, what = what })
end

-- Dispatches recorded by fn (host_profile's count).
local function dispatches(fn)
  lumus.synchronize()
  lumus.tune.host_profile({ on = true })
  local r = fn()
  local n = lumus.tune.host_profile().records
  lumus.tune.host_profile({})
  return n, r
end

describe("matmul split over K", function()
  after_each(function() lumus.tune.matmul(1, 1, 1, {}) end)

  it("gives the product in every layout, with and without a bias", function()
    local g = ref.rng(77)
    -- (K of 40, 48, 37 and 1285 leave a longer last slice for some of 2, 4, 8)
    for _, c in ipairs { { 5, 7, 64 }, { 33, 12, 128 }, { 64, 64, 96 }, { 3, 1, 48 }, { 17, 9, 40 }, { 6, 5, 37 },
                         { 11, 7, 1285 } } do
      local m, n, k = c[1], c[2], c[3]
      local at = ref.random_table({ m, k }, g.normal)
      local bt = ref.random_table({ k, n }, g.normal)
      local bias = ref.flatten(ref.random_table({ n }, g.normal))
      local a, b = lumus.tensor(at), lumus.tensor(bt)
      local a_t, b_t = lumus.tensor(transpose(at)), lumus.tensor(transpose(bt))   -- [K, M], [N, K]
      for _, split in ipairs { 2, 4, 8 } do
        lumus.tune.matmul(m, n, k, { split = split, path = "tiled" })
        local what = ("%dx%dx%d split %d"):format(m, n, k, split)
        check(lumus.matmul(a, b), at, bt, nil, what)
        check(lumus.matmul(a_t, b, { transpose_a = true }), at, bt, nil, what .. " transpose_a")
        check(lumus.matmul(a, b_t, { transpose_b = true }), at, bt, nil, what .. " transpose_b")
        check(lumus.matmul(a_t, b_t, { transpose_a = true, transpose_b = true }), at, bt, nil, what .. " both")
        check(lumus.linear(a, b_t, lumus.tensor(bias)), at, bt, bias, what .. " linear with bias")
      end
    end
  end)

  it("runs as two dispatches when it splits, three with a longer last slice, one when K is under 4 per slice", function()
    local a, b = lumus.randn({ 8, 64 }), lumus.randn({ 64, 8 })
    lumus.tune.matmul(8, 8, 64, { split = 4, path = "tiled" })
    local n, split_result = dispatches(function() return lumus.matmul(a, b) end)
    assert.are.equal(2, n)
    lumus.tune.matmul(8, 8, 64, { path = "tiled" })
    local n1, plain = dispatches(function() return lumus.matmul(a, b) end)
    assert.are.equal(1, n1)
    checks.close(split_result, plain:to_table(), { mixed = 1e-5 })
    assert.are.equal(4, lumus.tune.matmul(3072, 768, 8192, { split = 4 }).split)
    if lumus.device().kind == "cpu" then   -- not split unless forced
      assert.are.equal(1, lumus.tune.matmul(3072, 768, 8192, {}).split)
    end
    -- K = 37 in 8: seven slices of 4 as one batch, the last slice (9) a product of its
    -- own, then the sum
    local a2, b2 = lumus.randn({ 8, 37 }), lumus.randn({ 37, 8 })
    lumus.tune.matmul(8, 8, 37, { split = 8, path = "tiled" })
    local n3, tail_result = dispatches(function() return lumus.matmul(a2, b2) end)
    assert.are.equal(3, n3)
    check(tail_result, a2:to_table(), b2:to_table(), nil, "K = 37 in 8 slices")
    -- K = 7: under 4 of K per slice for 8, 4 and 2 slices, so no split
    local a3, b3 = lumus.randn({ 8, 7 }), lumus.randn({ 7, 8 })
    lumus.tune.matmul(8, 8, 7, { split = 8, path = "tiled" })
    assert.are.equal(1, (dispatches(function() return lumus.matmul(a3, b3) end)))
  end)

  it("writes out= and keeps one scratch for the partial products, which empty_cache gives back", function()
    local a, b = lumus.randn({ 16, 256 }), lumus.randn({ 256, 12 })
    local out = lumus.empty({ 16, 12 })
    lumus.tune.matmul(16, 12, 256, { split = 8, path = "tiled" })
    lumus.empty_cache()
    local _, start = checks.settle()
    lumus.matmul(a, b, { out = out })
    local _, before = checks.settle()
    -- 8 x 16 x 12 floats, kept in a block of a power of two of at least 4 KiB
    assert.is_true(before - start >= 8 * 16 * 12 * 4 and before - start <= 8192, "scratch " .. (before - start))
    for _ = 1, 5 do assert.are.equal(out, lumus.matmul(a, b, { out = out })) end
    local _, after = checks.settle()
    assert.are.equal(before, after)
    check(out, a:to_table(), b:to_table(), nil, "out=")
    -- a product with more partial products grows the one scratch; the old one goes back
    local a2, b2 = lumus.randn({ 64, 256 }), lumus.randn({ 256, 64 })
    lumus.tune.matmul(64, 64, 256, { split = 8, path = "tiled" })
    local y2 = lumus.matmul(a2, b2)
    check(y2, a2:to_table(), b2:to_table(), nil, "grown scratch")
    y2:free(); a2:free(); b2:free()
    local _, grown = checks.settle()
    assert.is_true(grown - start >= 8 * 64 * 64 * 4 and grown - start <= 2 * 8 * 64 * 64 * 4, "grown " .. (grown - start))
    lumus.empty_cache()
    local _, released = checks.settle()
    assert.are.equal(start, released)
  end)

  it("is captured with a temporary of its own (not the kept scratch) and replays the same product", function()
    local a, b = lumus.randn({ 16, 256 }), lumus.randn({ 256, 12 })
    local w, bias = lumus.randn({ 12, 256 }), lumus.randn({ 12 })
    for _, split in ipairs { 1, 4 } do
      lumus.tune.matmul(16, 12, 256, { split = split, path = "tiled" })
      local want_mm, want_lin = lumus.matmul(a, b):to_table(), lumus.linear(a, w, bias):to_table()
      local g = lumus.capture(function() return lumus.matmul(a, b), lumus.linear(a, w, bias) end)
      collectgarbage("collect")
      for _ = 1, 2 do
        local y1, y2 = g:replay()
        assert.are.same(want_mm, y1:to_table())
        assert.are.same(want_lin, y2:to_table())
      end
      g:free()
    end
  end)

  it("leaves batched and float16 products unsplit", function()
    local a, b = lumus.randn({ 3, 8, 64 }), lumus.randn({ 3, 64, 8 })
    lumus.tune.matmul(8, 8, 64, { split = 4, path = "tiled" })
    assert.are.equal(1, (dispatches(function() return lumus.matmul(a, b) end)))
  end)
end)
