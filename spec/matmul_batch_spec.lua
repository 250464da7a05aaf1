-- lumus.matmul's torch.matmul shapes (broadcast batch dimensions, 1-D operands),
-- transpose_a, and operands read in place (transposed, row-strided, expanded views)
-- against the float64 reference.
--
-- Tolerance (as spec/matmul_spec.lua): inputs are float32 values, so each element is
-- within 2 K 2^-24 (|a| |b|)_ij of the float64 product (the gamma_K bound of any float32
-- summation order); an element computed from a wrong entry or never written (outputs are
-- NaN-poisoned) is off by O(1).
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local U = 2 ^ -24
local NAN = 0 / 0

local function abs_table(t)
  if type(t) == "number" then return math.abs(t) end
  local out = {}
  for i = 1, #t do out[i] = abs_table(t[i]) end
  return out
end

-- Checks tensor `got` = a b for tensors a, b (their values as read back) and opts.
local function check(got, a, b, opts, what)
  local at, bt = a:to_table(), b:to_table()
  local ro = { transpose_a = opts and opts.transpose_a, transpose_b = opts and opts.transpose_b }
  local want = ref.matmul(at, bt, ro)
  assert.are.same(ref.shape(want), got:shape(), what)
  local scale = ref.flatten(ref.matmul(abs_table(at), abs_table(bt), ro))
  local k = ref.shape(at)
  k = (ro.transpose_a and #k > 1) and k[#k - 1] or k[#k]
  local bounds = {}
  for i = 1, #scale do bounds[i] = 2 * k * U * scale[i] end
  checks.close(got, want, { abs = bounds, what = what })
end

local g = ref.rng(2024)
local function rand(shape) return lumus.tensor(ref.random_table(shape, g.normal)) end

-- Product into a NaN-poisoned out of the expected shape and into a fresh tensor.
local function run(a, b, opts, what)
  opts = opts or {}
  local r = lumus.matmul(a, b, { transpose_a = opts.transpose_a, transpose_b = opts.transpose_b })
  check(r, a, b, opts, what)
  local out = lumus.full(r:shape(), NAN)
  assert.are.equal(out, lumus.matmul(a, b, { out = out, transpose_a = opts.transpose_a, transpose_b = opts.transpose_b }))
  check(out, a, b, opts, what .. " (out)")
end

local function cat(s) return table.concat(s, "x") end

describe("matmul batch broadcasting", function()
  for _, c in ipairs {
    { { 2, 3, 5, 8 }, { 8, 6 } },                 -- [B,H,T,D] x [D,E]
    { { 2, 1, 5, 8 }, { 1, 3, 8, 4 } },           -- [B,1,T,D] x [1,H,D,E]
    { { 2, 3, 5, 7 }, { 3, 7, 9 } },              -- missing leading dimension
    { { 5, 7 }, { 4, 7, 3 } },                    -- a 2-D a repeated over b's batches
    { { 4, 1, 6, 4 }, { 4, 4, 8 } },              -- size-1 against 4
    { { 2, 1, 3, 1, 5, 4 }, { 1, 4, 1, 2, 4, 3 } }, -- more than two batch dims after merging
    { { 3, 33, 17 }, { 1, 17, 65 } },             -- b of batch 1: rows stacked
    { { 1, 9, 12 }, { 2, 12, 16 } },              -- vec4 path, a broadcast
  } do
    it(("matches the reference for %s x %s"):format(cat(c[1]), cat(c[2])), function()
      run(rand(c[1]), rand(c[2]), nil, cat(c[1]) .. " x " .. cat(c[2]))
    end)
  end

  it("matches the reference on a seeded random sweep of broadcast shapes", function()
    for case = 1, 20 do
      local nb = case % 3 + 1
      local ba, bb = {}, {}
      for i = 1, nb do
        local s = math.floor(g.uniform() * 3) + 1
        ba[i] = g.uniform() < 0.3 and 1 or s
        bb[i] = g.uniform() < 0.3 and 1 or s
      end
      if case % 4 == 0 then table.remove(ba, 1) end
      local m, k, n = math.floor(g.uniform() * 20) + 1, math.floor(g.uniform() * 20) + 1, math.floor(g.uniform() * 20) + 1
      local as, bs = {}, {}
      for i = 1, #ba do as[i] = ba[i] end
      for i = 1, #bb do bs[i] = bb[i] end
      as[#as + 1], as[#as + 2] = m, k
      bs[#bs + 1], bs[#bs + 2] = k, n
      run(rand(as), rand(bs), nil, "case " .. case .. ": " .. cat(as) .. " x " .. cat(bs))
    end
  end)
end)

describe("matmul with 1-D operands (as torch.matmul)", function()
  it("vector-matrix, matrix-vector, dot, and batched forms", function()
    run(rand({ 7 }), rand({ 7, 5 }), nil, "[K] x [K, N]")
    run(rand({ 5, 7 }), rand({ 7 }), nil, "[M, K] x [K]")
    run(rand({ 3, 5, 8 }), rand({ 8 }), nil, "[B, M, K] x [K]")
    run(rand({ 8 }), rand({ 3, 8, 4 }), nil, "[K] x [B, K, N]")
    run(rand({ 13 }), rand({ 13 }), nil, "dot")
    assert.are.same({ 1 }, lumus.matmul(rand({ 4 }), rand({ 4 })):shape())
    assert.are.same({ 3 }, lumus.matmul(rand({ 3, 4 }), rand({ 4 })):shape())
    run(rand({ 6, 4 }), rand({ 4, 6 }):select(2, 3), nil, "[M, K] x a strided [K]")
    run(rand({ 6, 4 }):select(2, 2), rand({ 6, 5 }), nil, "a strided [K] x [K, N]")
  end)
end)

describe("matmul transpose_a", function()
  it("reads a as [..., K, M], with and without transpose_b, on vec4 and scalar sizes", function()
    for _, c in ipairs {
      { { 7, 5 }, { 7, 3 } }, { { 16, 12 }, { 16, 8 } }, { { 2, 9, 33 }, { 2, 9, 17 } },
      { { 1, 4 }, { 1, 4 } }, { { 65, 130 }, { 65, 20 } },
    } do
      run(rand(c[1]), rand(c[2]), { transpose_a = true }, "transpose_a " .. cat(c[1]) .. " x " .. cat(c[2]))
      local bs = { compat.unpack(c[2]) }
      bs[#bs - 1], bs[#bs] = bs[#bs], bs[#bs - 1]
      run(rand(c[1]), rand(bs), { transpose_a = true, transpose_b = true }, "both " .. cat(c[1]) .. " x " .. cat(bs))
    end
    run(rand({ 3, 6, 5 }), rand({ 6, 4 }), { transpose_a = true }, "batched transposed a x 2-D b")
  end)

  it("is correct with unusual tiles forced (tile rows and columns of A and B differ)", function()
    for _, tile in ipairs { { 128, 64, 8, 8, 8 }, { 32, 64, 16, 4, 8 }, { 64, 32, 8, 8, 4 }, { 32, 32, 8, 4, 4 } } do
      lumus.tune.matmul(1, 1, 1, { bm = tile[1], bn = tile[2], bk = tile[3], tm = tile[4], tn = tile[5] })
      local ok, err = pcall(function()
        run(rand({ 20, 132 }), rand({ 20, 36 }), { transpose_a = true }, "vec4, tile " .. cat(tile))
        run(rand({ 2, 19, 70 }), rand({ 1, 45, 19 }), { transpose_a = true, transpose_b = true }, "scalar, tile " .. cat(tile))
      end)
      lumus.tune.matmul(1, 1, 1, {})
      if not ok then error(err, 0) end
    end
  end)
end)

describe("matmul operands as views", function()
  it("matches the reference for transposed, narrowed, expanded and permuted views", function()
    local x = rand({ 9, 6 })
    run(x:transpose(1, 2), rand({ 9, 5 }), nil, "transposed a")
    run(rand({ 4, 9 }), x:transpose(1, 2), { transpose_b = true }, "transposed b with transpose_b")
    run(x, x, { transpose_a = true }, "x^T x with transpose_a")
    run(x:transpose(1, 2), rand({ 6, 5 }), { transpose_a = true }, "a transposed view with transpose_a")
    run(rand({ 5, 12 }):narrow(2, 3, 8), rand({ 8, 4 }), nil, "a rows 12 apart")
    run(rand({ 5, 8 }), rand({ 8, 11 }):narrow(2, 2, 7), nil, "b rows 11 apart")
    run(rand({ 3, 5, 8 }), rand({ 1, 8, 4 }):expand({ 3, 8, 4 }), nil, "expanded b")
    run(rand({ 5, 8 }):unsqueeze(1):expand({ 4, 5, 8 }), rand({ 4, 8, 3 }), nil, "expanded a")
    local qkv = rand({ 2, 6, 3 * 8 })                  -- [B, T, 3 * H * Dh] with H = 2, Dh = 4
    local q = qkv:narrow(3, 1, 8):view({ 2, 6, 2, 4 }):transpose(2, 3)    -- [B, H, T, Dh]
    local kk = qkv:narrow(3, 9, 8):view({ 2, 6, 2, 4 }):transpose(2, 3)
    run(q, kk, { transpose_b = true }, "attention scores from a fused qkv")
    run(q, kk:transpose(3, 4), nil, "keys as a transposed view")
    local odd = rand({ 4, 5, 6 }):permute({ 3, 1, 2 }):select(3, 2)     -- no unit stride: a copy
    run(odd, rand({ 4, 3 }), nil, "a view read through a copy")
  end)

  it("matches the reference for large products whose views rule out vec4 loads (read through a copy)", function()
    run(rand({ 128, 130 }):transpose(1, 2), rand({ 128, 128 }), nil, "transposed a, M = 130")
    run(rand({ 130, 131 }):narrow(2, 2, 128), rand({ 128, 128 }), nil, "a rows 131 apart")
    run(rand({ 128, 128 }), rand({ 2, 128, 129 }):narrow(3, 1, 128):select(1, 2), nil, "b rows 129 apart")
  end)

  it("reads transposed, row-strided and expanded operands in place (no copy)", function()
    local a, b = rand({ 9, 6 }), rand({ 1, 8, 12 })
    local out1 = lumus.empty({ 6, 6 })
    local out2 = lumus.empty({ 3, 9, 8 })
    lumus.synchronize()
    lumus.reset_peak()
    local before = lumus.memory().in_use
    lumus.matmul(a:transpose(1, 2), a, { out = out1 })
    lumus.matmul(a:narrow(2, 1, 4):unsqueeze(1):expand({ 3, 9, 4 }), b:narrow(3, 2, 8):narrow(2, 1, 4):expand({ 3, 4, 8 }),
      { out = out2 })
    lumus.synchronize()
    assert.are.equal(before, lumus.memory().peak)
    check(out1, a:transpose(1, 2), a, nil, "in place, transposed")
  end)
end)

describe("matmul errors", function()
  local function expect(pattern, ...) checks.errors(lumus.matmul, pattern, ...) end
  it("name the argument and the shapes", function()
    expect("#1.*transpose_a needs a of 2 or more dimensions, got shape 4", lumus.ones({ 4 }), lumus.ones({ 4, 2 }), { transpose_a = true })
    expect("#2.*transpose_b needs b of 2 or more dimensions, got shape 4", lumus.ones({ 3, 4 }), lumus.ones({ 4 }), { transpose_b = true })
    expect("#2.*b's first dimension must be K = 3 %(the first dimension of a, shape 3x5, transpose_a%), got shape 5x2",
      lumus.ones({ 3, 5 }), lumus.ones({ 5, 2 }), { transpose_a = true })
    expect("#2.*b's length must be K = 5 %(the last dimension of a, shape 2x5%), got shape 3", lumus.ones({ 2, 5 }), lumus.ones({ 3 }))
    expect("#2.*batch dimensions of b %(shape 2x4x5x3%) and a %(shape 3x4x2x5%) do not broadcast: 2 against 3 in batch dimension 1",
      lumus.ones({ 3, 4, 2, 5 }), lumus.ones({ 2, 4, 5, 3 }))
    expect("#3.*out must have shape 2x3x4, got 3x4", lumus.ones({ 3, 5 }), lumus.ones({ 2, 5, 4 }), { out = lumus.empty({ 3, 4 }) })
    expect("#3.*transpose_a must be a boolean", lumus.ones({ 3, 5 }), lumus.ones({ 5, 2 }), { transpose_a = 1 })
    expect("matmul: the result would have more than 2%^40 elements",
      lumus.ones({ 2 ^ 20, 1, 1, 4 }), lumus.ones({ 1, 1, 4, 1 }):expand({ 1, 2 ^ 21, 4, 1 }))
  end)
end)
