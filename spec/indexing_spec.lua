-- index_select, embedding, gather, cat, stack, split and chunk against lumus.reference.
--
-- Tolerance: exact. These ops only move elements (the kernels copy bytes), so every
-- value must equal the reference's; an id outside 1..size gives 0. Shapes come from a
-- seeded generator (ref.rng) and cover row widths that take 16-, 8- and 4-byte words,
-- views of views, non-contiguous ids and operands, and other dtypes (bytes compared).
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local NAN = 0 / 0

-- An int32 tensor of the given ids (1-based positions) and shape (default {#list}).
local function ids_of(list, shape)
  local parts = {}
  for i, v in ipairs(list) do parts[i] = compat.pack_bytes("i32", { v }) end
  return lumus.from_bytes(table.concat(parts), shape or { #list }, { dtype = "int32" })
end

local function int32s(t)
  local b, out = t:to_bytes(), {}
  for i = 1, math.floor(#b / 4) do out[i] = (compat.unpack_bytes("i32", b, 4 * i - 3, 1)[1]) end
  return out
end

local function rand_shape(g, nd, max)
  local s = {}
  for i = 1, nd do s[i] = math.floor(g.uniform() * max) + 1 end
  return s
end

local function rand_ids(g, n, size, out_of_range)
  local l = {}
  for i = 1, n do
    l[i] = math.floor(g.uniform() * size) + 1
    if out_of_range and g.uniform() < 0.2 then l[i] = ({ 0, -1, size + 1, -2147483648, 2147483647 })[i % 5 + 1] end
  end
  return l
end

local function exact(got, want, what) checks.close(got, want, { what = what }) end

describe("index_select", function()
  it("matches the reference on random shapes, every dimension, repeated ids", function()
    local g = ref.rng(11)
    for case = 1, 40 do
      local nd = case % 4 + 1
      local shape = rand_shape(g, nd, case % 3 == 0 and 9 or 6)
      if case % 5 == 0 then shape[nd] = 4 * shape[nd] end          -- 16-byte rows
      local xt = ref.random_table(shape, g.normal)
      local x = lumus.tensor(xt)
      local dim = (case % nd) + 1
      local l = rand_ids(g, math.floor(g.uniform() * 7) + 1, shape[dim])
      local want = ref.index_select(xt, dim, l)
      exact(lumus.index_select(x, dim, ids_of(l)), want, "case " .. case)
      exact(x:index_select(dim - nd - 1, ids_of(l)), want, "negative dim, case " .. case)
    end
  end)

  it("gives zeros for ids outside 1..size and reads nothing outside x", function()
    local xt = { { 1, 2, 3 }, { 4, 5, 6 } }
    local x = lumus.tensor(xt)
    exact(lumus.index_select(x, 1, ids_of { 0, 3, 2, -1, 2147483647, -2147483648 }),
      { { 0, 0, 0 }, { 0, 0, 0 }, { 4, 5, 6 }, { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } }, "rows")
    exact(lumus.index_select(x, 2, ids_of { 4, 1 }), { { 0, 1 }, { 0, 4 } }, "columns")
    exact(lumus.index_select(x:transpose(1, 2), 2, ids_of { 3, 2 }), { { 0, 4 }, { 0, 5 }, { 0, 6 } }, "strided x")
  end)

  it("reads views of views and strided ids, writes into out", function()
    local g = ref.rng(12)
    local base = ref.random_table({ 5, 6, 7 }, g.normal)
    local x = lumus.tensor(base):transpose(1, 3):narrow(2, 2, 4)     -- [7, 4, 5], strided
    local xt = x:to_table()
    local idt = ids_of({ 3, 9, 1, 9, 2, 9, 3, 9 }, { 4, 2 }):select(2, 1)   -- {3, 1, 2, 3}, stride 2
    assert.are.same({ 2 }, idt:stride())
    for dim = 1, 3 do
      local l = { 3, 1, 2, 3 }
      local want = ref.index_select(xt, dim, l)
      exact(lumus.index_select(x, dim, idt), want, "view, dim " .. dim)
      local out = lumus.full(ref.shape(want), NAN)
      assert.are.equal(out, lumus.index_select(x:contiguous(), dim, idt, { out = out }))
      exact(out, want, "contiguous x, out, dim " .. dim)
    end
    -- A contiguous view starting off a 16-byte boundary takes smaller words.
    local flat = lumus.tensor(ref.random_table({ 41 }, g.normal))
    local m = flat:narrow(1, 2, 40):view({ 10, 4 })
    exact(lumus.index_select(m, 1, ids_of { 10, 1, 5 }), ref.index_select(m:to_table(), 1, { 10, 1, 5 }), "unaligned")
  end)

  it("moves int32 elements unchanged", function()
    local x = ids_of({ 7, -8, 9, 2147483647, -2147483648, 0 }, { 3, 2 })
    assert.are.same({ -2147483648, 0, 7, -8 }, int32s(lumus.index_select(x, 1, ids_of { 3, 1 })))
    assert.are.same({ -8, 2147483647, 0 }, int32s(lumus.index_select(x, 2, ids_of { 2 })))
    assert.are.equal("int32", lumus.index_select(x, 1, ids_of { 1 }):dtype())
  end)

  it("raises naming the argument", function()
    local x = lumus.ones({ 3, 4 })
    checks.errors(lumus.index_select, "#3.*ids must be an int32 tensor %(1%-based positions%), got float32", x, 1, lumus.ones({ 2 }))
    checks.errors(lumus.index_select, "#3.*ids must be 1%-D, got shape 2x1", x, 1, ids_of({ 1, 2 }, { 2, 1 }))
    checks.errors(lumus.index_select, "#2.*dimension 3 out of range %(the tensor has 2", x, 3, ids_of { 1 })
    checks.errors(lumus.index_select, "#3.*tensor expected", x, 1, { 1, 2 })
    checks.errors(lumus.index_select, "#4.*out must have shape 2x4, got 3x4", x, 1, ids_of { 1, 2 }, { out = lumus.empty({ 3, 4 }) })
    checks.errors(lumus.index_select, "#4.*out must be float32 %(the result's dtype%), got int32", x, 1, ids_of { 1 },
      { out = ids_of { 1, 2, 3, 4 }:view({ 1, 4 }) })
    checks.errors(lumus.index_select, "#4.*out overlaps x", x, 1, ids_of { 1 }, { out = x:narrow(1, 1, 1) })
    checks.errors(lumus.index_select, "#4.*unknown option 'dim'", x, 1, ids_of { 1 }, { dim = 1 })
  end)
end)

describe("embedding", function()
  it("matches the reference for ids of any shape, contiguous or not", function()
    local g = ref.rng(21)
    for case = 1, 12 do
      local v, d = math.floor(g.uniform() * 20) + 1, ({ 1, 3, 4, 6, 8, 17, math.floor(768 / 8) })[case % 7 + 1]
      local wt = ref.random_table({ v, d }, g.normal)
      local w = lumus.tensor(wt)
      local ishape = rand_shape(g, case % 3 + 1, 4)
      local n = 1
      for _, s in ipairs(ishape) do n = n * s end
      local l = rand_ids(g, n, v, case % 2 == 0)
      local it_ = ref.nest(l, ishape)
      local want = ref.embedding(it_, wt)
      exact(lumus.embedding(ids_of(l, ishape), w), want, "case " .. case)
      exact(ids_of(l, ishape):embedding(w), want, "method, case " .. case)
      if #ishape >= 2 then   -- transposed ids and a transposed weight
        local idt = ids_of(l, ishape):transpose(1, 2)
        local tt = {}
        for i = 1, #it_ do for j = 1, #it_[i] do tt[j] = tt[j] or {}; tt[j][i] = it_[i][j] end end
        exact(lumus.embedding(idt, w), ref.embedding(tt, wt), "strided ids, case " .. case)
      end
      local wT = lumus.tensor(ref.random_table({ d, v }, g.normal))
      exact(lumus.embedding(ids_of(l, ishape), wT:transpose(1, 2)), ref.embedding(it_, wT:transpose(1, 2):to_table()),
        "strided weight, case " .. case)
    end
  end)

  it("gives zero rows for out-of-range ids and writes into out", function()
    local w = lumus.tensor({ { 1, 2 }, { 3, 4 } })
    local out = lumus.full({ 2, 2, 2 }, NAN)
    assert.are.equal(out, lumus.embedding(ids_of({ 2, 3, 0, 1 }, { 2, 2 }), w, { out = out }))
    exact(out, { { { 3, 4 }, { 0, 0 } }, { { 0, 0 }, { 1, 2 } } }, "out")
  end)

  it("raises naming the argument", function()
    local w = lumus.ones({ 5, 3 })
    checks.errors(lumus.embedding, "#1.*ids must be an int32 tensor %(1%-based positions%), got float32", lumus.ones({ 2 }), w)
    checks.errors(lumus.embedding, "#2.*weight must be a matrix %[num_embeddings, embedding_dim%], got shape 5x3x1",
      ids_of { 1 }, w:view({ 5, 3, 1 }))
    checks.errors(lumus.embedding, "#3.*out must have shape 2x3, got 3x2", ids_of { 1, 2 }, w, { out = lumus.empty({ 3, 2 }) })
    checks.errors(lumus.embedding, "embedding: the result would have more than 2%^40 elements",
      ids_of { 1, 1, 1, 1 }, lumus.ones({ 1, 1 }):expand({ 1, 2 ^ 39 }))
    checks.errors(lumus.index_select, "index_select: the result would have more than 2%^40 elements",
      lumus.ones({ 1, 1 }):expand({ 2, 2 ^ 39 }), 1, ids_of { 1, 1, 1, 1 })
  end)
end)

describe("gather", function()
  it("matches the reference (torch.gather) on random shapes and every dimension", function()
    local g = ref.rng(31)
    for case = 1, 30 do
      local nd = case % 3 + 1
      local xs = rand_shape(g, nd, 6)
      local dim = case % nd + 1
      local is = {}
      for i = 1, nd do is[i] = i == dim and math.floor(g.uniform() * 7) + 1 or math.floor(g.uniform() * xs[i]) + 1 end
      local n = 1
      for _, s in ipairs(is) do n = n * s end
      local xt = ref.random_table(xs, g.normal)
      local l = rand_ids(g, n, xs[dim], case % 4 == 0)
      local want = ref.gather(xt, dim, ref.nest(l, is))
      exact(lumus.gather(lumus.tensor(xt), dim, ids_of(l, is)), want, "case " .. case)
      if nd >= 2 then   -- x as a transposed view
        local xv = lumus.tensor(ref.random_table({ xs[2], xs[1], compat.unpack(xs, 3) }, g.normal)):transpose(1, 2)
        exact(xv:gather(dim, ids_of(l, is)), ref.gather(xv:to_table(), dim, ref.nest(l, is)), "view, case " .. case)
      end
    end
  end)

  it("raises naming the argument and the shapes", function()
    local x = lumus.ones({ 3, 4 })
    checks.errors(lumus.gather, "#3.*ids must have as many dimensions as x %(shape 3x4%), each at most x's size except dimension 2, got shape 4x1",
      x, 2, ids_of({ 1, 1, 1, 1 }, { 4, 1 }))
    checks.errors(lumus.gather, "#3.*got shape 2", x, 1, ids_of { 1, 1 })
    checks.errors(lumus.gather, "#3.*ids must be an int32 tensor", x, 1, lumus.ones({ 1, 1 }))
  end)
end)

describe("cat and stack", function()
  it("match the reference on random shapes, views and every dimension", function()
    local g = ref.rng(41)
    for case = 1, 25 do
      local nd = case % 4 + 1
      local shape = rand_shape(g, nd, 5)
      local dim = case % nd + 1
      local list, tables = {}, {}
      for k = 1, case % 4 + 1 do
        local s = {}
        for i = 1, nd do s[i] = shape[i] end
        s[dim] = math.floor(g.uniform() * 4) + 1
        local t = lumus.tensor(ref.random_table(s, g.normal))
        if nd >= 2 and k % 2 == 0 then   -- a transposed view holding the same shape
          local s2 = {}
          for i = 1, nd do s2[i] = s[i] end
          s2[1], s2[2] = s[2], s[1]
          t = lumus.tensor(ref.random_table(s2, g.normal)):transpose(1, 2)
        end
        list[k], tables[k] = t, t:to_table()
      end
      exact(lumus.cat(list, dim), ref.cat(tables, dim), "cat, case " .. case)
      local same, st = {}, {}
      for k = 1, #list do same[k] = lumus.tensor(ref.random_table(shape, g.normal)); st[k] = same[k]:to_table() end
      for sd = 1, nd + 1 do exact(lumus.stack(same, sd), ref.stack(st, sd), ("stack dim %d, case %d"):format(sd, case)) end
      exact(lumus.stack(same, -1), ref.stack(st, nd + 1), "stack dim -1")
    end
  end)

  it("default to dimension 1 and write into out", function()
    local a, b = lumus.tensor({ { 1, 2 } }), lumus.tensor({ { 3, 4 }, { 5, 6 } })
    exact(lumus.cat({ a, b }), { { 1, 2 }, { 3, 4 }, { 5, 6 } }, "default dim")
    local out = lumus.full({ 2, 3 }, NAN)
    assert.are.equal(out, lumus.cat({ a:transpose(1, 2), b }, 2, { out = out }))
    exact(out, { { 1, 3, 4 }, { 2, 5, 6 } }, "out")
    local out2 = lumus.full({ 2, 1, 2 }, NAN)
    assert.are.equal(out2, lumus.stack({ a, a * 2 }, { out = out2 }))
    exact(out2, { { { 1, 2 } }, { { 2, 4 } } }, "stack out, default dim")
    assert.are.same({ 1, 4 }, lumus.cat({ a, a }, -1):shape())
  end)

  it("move other dtypes' bytes unchanged", function()
    local x = ids_of({ 1, 2, 3, 4, 5, 6 }, { 2, 3 })
    assert.are.same({ 1, 2, 3, 1, 4, 5, 6, 4 }, int32s(lumus.cat({ x, x:narrow(2, 1, 1) }, 2)))
    assert.are.same({ 1, 4, 2, 5, 3, 6 }, int32s(lumus.stack({ x:select(1, 1), x:select(1, 2) }, 2)))
  end)

  it("raise naming the tensors, dimensions and shapes", function()
    local a, b = lumus.ones({ 2, 3 }), lumus.ones({ 2, 4 })
    checks.errors(lumus.cat, "#1.*list is empty %(at least one tensor is needed%)", {}, 1)
    checks.errors(lumus.cat, "#1.*list of tensors expected, got userdata", a, 1)
    checks.errors(lumus.cat, "#1.*list%[2%] must be a tensor, got number", { a, 5 }, 1)
    checks.errors(lumus.cat, "#1.*list%[2%] has shape 2x4, list%[1%] 2x3: sizes must match except in dimension 1 %(dimension 2 differs%)",
      { a, b }, 1)
    checks.errors(lumus.cat, "#1.*list%[2%] has shape 3, list%[1%] 2x3: cat needs the same number of dimensions", { a, lumus.ones({ 3 }) }, 2)
    checks.errors(lumus.cat, "#1.*list%[2%] is int32, list%[1%] float32", { a, ids_of({ 1, 2 }, { 2, 1 }) }, 2)
    checks.errors(lumus.cat, "#2.*dimension 3 out of range %(list%[1%] has 2", { a, b }, 3)
    checks.errors(lumus.cat, "#3.*out must have shape 2x7, got 2x3", { a, b }, 2, { out = lumus.empty({ 2, 3 }) })
    local big = lumus.zeros({ 4, 3 })
    checks.errors(lumus.cat, "#3.*out overlaps list%[2%]", { a, big:narrow(1, 3, 2) }, 1, { out = big })
    checks.errors(lumus.cat, "#2.*unknown option 'dim'", { a }, { dim = 1 })
    local free = lumus.ones({ 2, 3 }); free:free()
    checks.errors(lumus.cat, "#1.*list%[2%]: tensor has been freed", { a, free }, 1)
    checks.errors(lumus.stack, "#1.*list%[2%] has shape 2x4, list%[1%] 2x3: stack needs equal shapes", { a, b }, 1)
    checks.errors(lumus.stack, "#2.*dimension 4 out of range %(1 to 3 for list%[1%] of 2 dimensions", { a, a }, 4)
    checks.errors(lumus.stack, "#1.*list is empty", {})
  end)
end)

describe("split and chunk", function()
  it("return views sharing storage, matching the reference", function()
    local g = ref.rng(51)
    local xt = ref.random_table({ 7, 5 }, g.normal)
    local x = lumus.tensor(xt)
    for _, c in ipairs { { 3, 1 }, { 2, 2 }, { 7, 1 }, { 10, 2 }, { 1, -1 } } do
      local pieces, want = x:split(c[1], c[2]), ref.split(xt, c[1], c[2])
      assert.are.equal(#want, #pieces)
      for k = 1, #want do exact(pieces[k], want[k], ("split(%d, %d)[%d]"):format(c[1], c[2], k)) end
    end
    local secs = lumus.split(x, { 1, 4, 2 })
    local want = ref.split(xt, { 1, 4, 2 })
    for k = 1, 3 do exact(secs[k], want[k], "sections " .. k) end
    for _, c in ipairs { { 3, 1 }, { 2, 2 }, { 7, 1 }, { 9, 2 }, { 4, 2 } } do
      local pieces, cw = x:chunk(c[1], c[2]), ref.chunk(xt, c[1], c[2])
      assert.are.equal(#cw, #pieces)
      for k = 1, #cw do exact(pieces[k], cw[k], ("chunk(%d, %d)[%d]"):format(c[1], c[2], k)) end
    end
    -- Writing a piece writes x; views of views split too.
    local p = x:chunk(3, 1)[2]
    p:fill(0)
    exact(x:narrow(1, 4, 3), ref.map(ref.split(xt, 3, 1)[2], function() return 0 end), "written through a piece")
    local q = x:transpose(1, 2):split(2, 2)
    exact(q[4], ref.split(x:transpose(1, 2):to_table(), 2, 2)[4], "view of a view")
  end)

  it("raise naming the argument", function()
    local x = lumus.ones({ 4, 6 })
    checks.errors(function() return x:split(0) end, "split size must be positive, got 0")
    checks.errors(function() return x:split({ 1, 2 }) end, "sizes sum to 3, dimension 1 has size 4")
    checks.errors(function() return x:split({ 4, 0 }) end, "sizes%[2%] must be a positive integer")
    checks.errors(function() return x:split(2, 3) end, "dimension 3 out of range")
    checks.errors(function() return x:chunk(0, 2) end, "chunk count must be positive, got 0")
    -- A size past the dimension is one piece (its piece count must not overflow).
    local whole = x:split(compat.maxinteger)
    assert.are.equal(1, #whole)
    assert.are.same({ 4, 6 }, whole[1]:shape())
  end)
end)

describe("indexing in every dtype", function()
  -- Small integers (exact in every dtype; 0/1 for bool), compared as float32 values.
  for _, dt in ipairs { "float16", "bfloat16", "int32", "bool" } do
    it(("index_select, embedding, gather, cat, stack and split move %s elements unchanged"):format(dt), function()
      local g = ref.rng(61)
      for _, d in ipairs { 1, 3, 4, 5, 8, 16, 17 } do      -- row widths taking 1- to 16-byte words
        local xt = ref.random_table({ 6, d }, function()
          return dt == "bool" and (g.uniform() < 0.5 and 1 or 0) or math.floor(g.uniform() * 200) - 100
        end)
        local x = lumus.tensor(xt, { dtype = dt })
        local l = { 6, 1, 0, 3, 7, 6 }
        local r = lumus.index_select(x, 1, ids_of(l))
        assert.are.equal(dt, r:dtype())
        exact(r:float(), ref.index_select(xt, 1, l), dt .. " index_select rows, D = " .. d)
        exact(lumus.index_select(x, 2, ids_of { d, 1 }):float(), ref.index_select(xt, 2, { d, 1 }), dt .. " columns")
        exact(lumus.index_select(x:transpose(1, 2), 2, ids_of(l)):float(),
          ref.index_select(x:transpose(1, 2):float():to_table(), 2, l), dt .. " strided")
        exact(lumus.embedding(ids_of(l, { 2, 3 }), x):float(), ref.embedding(ref.nest(l, { 2, 3 }), xt), dt .. " embedding")
        local gi = { 1, 6, 2, 2 }
        exact(lumus.gather(x, 1, ids_of(gi, { 4, 1 })):float(), ref.gather(xt, 1, ref.nest(gi, { 4, 1 })), dt .. " gather")
        exact(lumus.cat({ x, x:narrow(1, 2, 3) }, 1):float(), ref.cat({ xt, ref.index_select(xt, 1, { 2, 3, 4 }) }, 1), dt .. " cat")
        exact(lumus.stack({ x, x }, 2):float(), ref.stack({ xt, xt }, 2), dt .. " stack")
        local p = x:split(4, 1)
        exact(p[2]:float(), ref.split(xt, 4, 1)[2], dt .. " split")
      end
    end)
  end
end)
