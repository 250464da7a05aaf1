-- lumus.index_add and lumus.scatter_add (src/ops/index_add.c, shaders/index_add.comp):
-- values against the float64 reference (ref.index_add, ref.scatter_add) on a seeded
-- sweep of shapes and dims with repeated and out-of-range ids, views, out= and in place;
-- the same bits on every run (no float atomics); errors by message.
--
-- Tolerance: each output element is t plus at most m float32 addends summed in order in
-- float32: |got - want| <= m 2^-24 (|t| + sum |src|) + 1e-30, per element (sum_bound).
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local function ids(list) return lumus.tensor(list, { dtype = "int32" }) end

local function rand(shape, rng)
  return ref.random_table(shape, function() return ref.f32(rng.normal()) end)
end

-- Per-element bounds: (m + 1) 2^-24 times the sum of magnitudes that reach the element.
local function sum_bound(t, dim, idlist, src, per_element)
  local abs_t = ref.map(t, math.abs)
  local abs_s = ref.map(src, math.abs)
  local mags = per_element and ref.scatter_add(abs_t, dim, idlist, abs_s) or ref.index_add(abs_t, dim, idlist, abs_s)
  local m = #ref.flatten(src)
  local out = {}
  for i, v in ipairs(ref.flatten(mags)) do out[i] = (m + 1) * 2 ^ -24 * v + 1e-30 end
  return out
end

describe("lumus.index_add", function()
  local rng = ref.rng(1604)
  it("matches the reference over shapes, dims, repeated and out-of-range ids", function()
    -- rows of 32 or more elements take the tiled form (16 rows a workgroup), shorter ones
    -- a thread per element
    local shapes = { { 5 }, { 4, 3 }, { 3, 7 }, { 2, 3, 4 }, { 1, 9 }, { 6, 1 }, { 2, 5, 3, 2 }, { 17, 33 },
                     { 40, 300 }, { 3, 19, 64 }, { 2, 37, 2, 40 } }
    for _, shape in ipairs(shapes) do
      for dim = 1, #shape do
        local size = shape[dim]
        local n = 1 + math.floor(rng.uniform() * 2 * size)
        local list = {}
        for j = 1, n do list[j] = math.floor(rng.uniform() * (size + 2)) end   -- 0 and size + 1 too
        list[1] = -3
        local sshape = { compat.unpack(shape) }
        sshape[dim] = n
        local t, src = rand(shape, rng), rand(sshape, rng)
        local got = lumus.index_add(lumus.tensor(t), dim, ids(list), lumus.tensor(src))
        checks.close(got, ref.index_add(t, dim, list, src),
          { abs = sum_bound(t, dim, list, src), what = ("index_add %s dim %d"):format(table.concat(shape, "x"), dim) })
        -- negative dim, method form
        local got2 = lumus.tensor(t):index_add(dim - #shape - 1, ids(list), lumus.tensor(src))
        assert.are.equal(got:to_bytes(), got2:to_bytes())
      end
    end
  end)

  it("reads views, writes out= and in place into t", function()
    local t = rand({ 3, 4 }, rng)
    local list = { 4, 1 }
    -- t read through a transposed view (not contiguous)
    local tt = lumus.tensor(t):transpose(1, 2):contiguous():transpose(1, 2)
    local s3 = rand({ 3, 2 }, rng)
    local got = lumus.index_add(tt, 2, ids(list), lumus.tensor(s3))
    checks.close(got, ref.index_add(t, 2, list, s3), { abs = sum_bound(t, 2, list, s3), what = "views" })
    local out = lumus.zeros({ 3, 4 })
    assert.are.equal(out, lumus.index_add(lumus.tensor(t), 2, ids(list), lumus.tensor(s3), { out = out }))
    checks.close(out, ref.index_add(t, 2, list, s3), { abs = sum_bound(t, 2, list, s3), what = "out" })
    local inplace = lumus.tensor(t)
    assert.are.equal(inplace, inplace:index_add(2, ids(list), lumus.tensor(s3), { out = inplace }))
    checks.close(inplace, ref.index_add(t, 2, list, s3), { abs = sum_bound(t, 2, list, s3), what = "in place" })
  end)

  it("gives the same bits on every run with many ids per row", function()
    local n, rows, d = 3000, 7, 33
    local list = {}
    for j = 1, n do list[j] = 1 + (j * 5) % rows end
    local src = lumus.randn({ n, d })
    local first = lumus.index_add(lumus.zeros({ rows, d }), 1, ids(list), src):to_bytes()
    for _ = 1, 3 do
      assert.are.equal(first, lumus.index_add(lumus.zeros({ rows, d }), 1, ids(list), src):to_bytes())
    end
    -- the tiled form (rows of 33) and the per-element kernel of scatter_add (ids broadcast
    -- over the row) sum in the same order: the same bits
    local wide = ids(list):reshape({ n, 1 }):expand({ n, d })
    assert.are.equal(first, lumus.scatter_add(lumus.zeros({ rows, d }), 1, wide, src):to_bytes())
    local s = src:to_table()
    checks.close(lumus.index_add(lumus.zeros({ rows, d }), 1, ids(list), src),
      ref.index_add(ref.random_table({ rows, d }, function() return 0 end), 1, list, s),
      { abs = sum_bound(ref.random_table({ rows, d }, function() return 0 end), 1, list, s), what = "3000 ids" })
  end)

  it("raises naming the argument", function()
    local t = lumus.zeros({ 4, 3 })
    checks.errors(lumus.index_add, "#1 to 'lumus.index_add' %(t must be float32, got int32%)",
      lumus.zeros({ 4, 3 }, { dtype = "int32" }), 1, ids({ 1 }), lumus.zeros({ 1, 3 }))
    checks.errors(lumus.index_add, "#3 to 'lumus.index_add' %(ids must be an int32 tensor", t, 1, lumus.ones({ 1 }), lumus.zeros({ 1, 3 }))
    checks.errors(lumus.index_add, "ids must be 1%-D, got shape 1x1", t, 1, ids({ { 1 } }), lumus.zeros({ 1, 3 }))
    checks.errors(lumus.index_add, "#4 to 'lumus.index_add' %(src must have t's shape %(4x3%) except 2 in dimension 1",
      t, 1, ids({ 1, 2 }), lumus.zeros({ 1, 3 }))
    checks.errors(lumus.index_add, "#2 to 'lumus.index_add' %(dimension 3 out of range", t, 3, ids({ 1 }), lumus.zeros({ 1, 3 }))
    checks.errors(lumus.index_add, "unknown option 'outt'", t, 1, ids({ 1 }), lumus.zeros({ 1, 3 }), { outt = t })
    checks.errors(lumus.index_add, "out", t, 1, ids({ 1 }), lumus.zeros({ 1, 3 }), { out = lumus.zeros({ 3, 4 }) })
  end)
end)

describe("lumus.scatter_add", function()
  local rng = ref.rng(1605)
  it("matches the reference (torch.scatter_add) over shapes and dims", function()
    for _, shape in ipairs { { 5 }, { 4, 3 }, { 2, 3, 4 }, { 3, 1, 5 } } do
      for dim = 1, #shape do
        local sshape = { compat.unpack(shape) }
        sshape[dim] = 1 + math.floor(rng.uniform() * 6)
        local idl = ref.random_table(sshape, function() return math.floor(rng.uniform() * (shape[dim] + 2)) end)
        local t, src = rand(shape, rng), rand(sshape, rng)
        local got = lumus.scatter_add(lumus.tensor(t), dim, lumus.tensor(idl, { dtype = "int32" }), lumus.tensor(src))
        checks.close(got, ref.scatter_add(t, dim, idl, src),
          { abs = sum_bound(t, dim, idl, src, true), what = ("scatter_add %s dim %d"):format(table.concat(shape, "x"), dim) })
      end
    end
  end)

  it("raises naming the argument", function()
    local t = lumus.zeros({ 4, 3 })
    checks.errors(lumus.scatter_add, "#3 to 'lumus.scatter_add' %(ids must have src's shape %(2x3%), got 2x2",
      t, 1, ids({ { 1, 1 }, { 2, 2 } }), lumus.zeros({ 2, 3 }))
    checks.errors(lumus.scatter_add, "#4 to 'lumus.scatter_add' %(src must have t's shape %(4x3%) except in dimension 1, got shape 1x2",
      t, 1, ids({ { 1, 1 } }), lumus.zeros({ 1, 2 }))
  end)
end)
