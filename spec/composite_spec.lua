-- The ops written with other ops (lua/lumus/composite.lua): each against its float64
-- counterpart in lumus.reference at a stated bound, as a function and as a method, on a
-- seeded sweep of shapes (odd, prime, a single element, rows of 1), with errors by
-- message. Their gradients are in spec/grad_check_spec.lua.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local function rand(shape, seed, scale)
  local g = ref.rng(seed)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local flat = {}
  for i = 1, n do flat[i] = ref.f32(g.normal() * (scale or 1)) end
  return ref.nest(flat, shape)
end

-- Shapes of the sweep: 2-D and 3-D, odd and prime sizes, single rows and columns.
local SHAPES = { { 1, 1 }, { 1, 7 }, { 5, 1 }, { 3, 4 }, { 7, 13 }, { 2, 5, 3 }, { 4, 1, 31 }, { 17, 64 } }

describe("composite ops", function()
  it("std and norm match the reference over every element and along each dim", function()
    for k, shape in ipairs(SHAPES) do
      local xs = rand(shape, 10 + k)
      local x = lumus.tensor(xs)
      for d = 0, #shape do
        local o = d > 0 and { dim = d } or nil
        local ok = d > 0 and { dim = d, keepdim = true } or nil
        local what = ("%s over %s"):format(table.concat(shape, "x"), d > 0 and "dim " .. d or "all")
        -- std of one element divides by 0 (NaN, as PyTorch); the reference agrees
        checks.close(lumus.std(x, o), ref.std(xs, o), { rel = 1e-5, abs = 1e-6, what = "std " .. what })
        checks.close(x:std(ok), ref.std(xs, ok), { rel = 1e-5, abs = 1e-6, what = "std keepdim " .. what })
        for _, p in ipairs { 1, 2, math.huge } do
          local po = { p = p, dim = o and o.dim }
          checks.close(lumus.norm(x, po), ref.norm(xs, po), { rel = 1e-5, what = ("norm p=%s %s"):format(tostring(p), what) })
        end
      end
      checks.close(x:norm(), ref.norm(xs), { rel = 1e-5, what = "x:norm()" })
    end
    local x = lumus.tensor({ 1, 2, 3, 4 })
    checks.close(lumus.std(x, { correction = 0 }), ref.std({ 1, 2, 3, 4 }, { correction = 0 }), { rel = 1e-6 })
    local out = lumus.empty({ 1 })
    assert.are.equal(out, lumus.std(x, { out = out }))
    checks.close(out, ref.std({ 1, 2, 3, 4 }), { rel = 1e-6, what = "std out=" })
  end)

  it("lerp matches the reference for number and tensor weights, exact at 0 and 1", function()
    for k, shape in ipairs(SHAPES) do
      local as, bs, ws = rand(shape, 20 + k), rand(shape, 40 + k), rand(shape, 60 + k, 0.7)
      local a, b = lumus.tensor(as), lumus.tensor(bs)
      for _, w in ipairs { 0, 0.25, 0.5, 0.9, 1, -0.5, 1.5 } do
        local got = lumus.lerp(a, b, w)
        checks.close(got, ref.lerp(as, bs, w), { rel = 1e-6, abs = 1e-6, what = "lerp w=" .. w })
        if w == 0 then checks.close(got, as, { what = "lerp w=0 is a" }) end
        if w == 1 then checks.close(got, bs, { what = "lerp w=1 is b" }) end
      end
      checks.close(a:lerp(b, lumus.tensor(ws)), ref.lerp(as, bs, ws), { rel = 1e-6, abs = 1e-6, what = "lerp tensor w" })
      checks.close(a:lerp(2, 0.25), ref.lerp(as, 2, 0.25), { rel = 1e-6, abs = 1e-6, what = "lerp to a number" })
    end
  end)

  it("tril and triu keep the triangles of the last two dims for every diagonal", function()
    for k, shape in ipairs(SHAPES) do
      local xs = rand(shape, 80 + k)
      local x = lumus.tensor(xs)
      for _, d in ipairs { 0, 1, -1, 2, -3, 100, -100 } do
        checks.close(lumus.tril(x, d), ref.tril(xs, d), { what = ("tril %s k=%d"):format(table.concat(shape, "x"), d) })
        checks.close(x:triu(d), ref.triu(xs, d), { what = ("triu %s k=%d"):format(table.concat(shape, "x"), d) })
      end
    end
    local h = lumus.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float16" })
    assert.are.equal("float16", lumus.tril(h):dtype())
    checks.close(lumus.tril(h):float(), { { 1, 0 }, { 3, 4 } }, { what = "tril float16" })
  end)

  it("masked_fill puts the value where the mask is true, broadcasting the mask", function()
    for k, shape in ipairs(SHAPES) do
      local xs = rand(shape, 100 + k)
      local x = lumus.tensor(xs)
      local mask = lumus.gt(lumus.tensor(rand(shape, 120 + k)), 0)
      local m = mask:to_table()
      checks.close(x:masked_fill(mask, -1e9), ref.masked_fill(xs, m, -1e9), { what = "masked_fill" })
      -- a mask over the last dim only, repeated over the rows
      local row = lumus.gt(lumus.tensor(rand({ shape[#shape] }, 140 + k)), 0)
      checks.close(lumus.masked_fill(x, row, 0 / 0), ref.masked_fill(xs, row:to_table(), 0 / 0), { what = "masked_fill row" })
    end
  end)

  it("any and all over every element and along a dim, for floats, bools and NaN", function()
    local xs = { { 0, 0, 0 }, { 0, 2, 0 }, { 1, -1, 0 / 0 } }
    local x = lumus.tensor(xs)
    assert.are.same(ref.any(xs), lumus.any(x):to_table())
    assert.are.same(ref.all(xs), lumus.all(x):to_table())
    for _, d in ipairs { 1, 2, -1 } do
      assert.are.same(ref.any(xs, { dim = d }), x:any({ dim = d }):to_table())
      assert.are.same(ref.all(xs, { dim = d, keepdim = true }), x:all({ dim = d, keepdim = true }):to_table())
    end
    assert.are.same({ false, true, true }, x:any({ dim = 2 }):to_table())
    assert.are.same({ false, false, true }, x:all({ dim = 2 }):to_table())
    local b = lumus.gt(x, 0)
    assert.are.equal("bool", lumus.any(b):dtype())
    assert.are.same({ true }, b:any():to_table())
    assert.are.same({ false }, b:all():to_table())
    assert.are.same({ true }, lumus.all(lumus.tensor({ 3, 4 }, { dtype = "int32" })):to_table())
  end)

  it("clone, t and flatten", function()
    local xs = rand({ 2, 3, 4 }, 7)
    local x = lumus.tensor(xs)
    local c = x:clone()
    checks.close(c, xs, { what = "clone" })
    c:fill(0)
    checks.close(x, xs, { what = "clone is a copy" })
    local m = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, m:t():to_table())
    local v = lumus.tensor({ 1, 2 })
    assert.are.equal(v, v:t())
    assert.are.same({ 24 }, x:flatten():shape())
    assert.are.same({ 2, 12 }, x:flatten(2):shape())
    assert.are.same({ 6, 4 }, x:flatten(1, 2):shape())
    assert.are.same({ 2, 3, 4 }, x:flatten(2, 2):shape())
    assert.are.same({ 6, 4 }, lumus.flatten(x, -3, -2):shape())
    checks.close(x:flatten(), ref.flatten(xs), { what = "flatten values" })
    -- a transposed view flattens through a copy, in the view's order
    checks.close(m:t():flatten(), { 1, 4, 2, 5, 3, 6 }, { what = "flatten of a view" })
  end)

  it("the *_like factories take the shape and dtype, or the dtype given", function()
    local x = lumus.zeros({ 3, 5 }, { dtype = "float16" })
    for _, name in ipairs { "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like" } do
      local y = lumus[name](x)
      assert.are.same({ 3, 5 }, y:shape())
      assert.are.equal("float16", y:dtype())
      assert.are.equal("float32", lumus[name](x, { dtype = "float32" }):dtype())
    end
    checks.close(lumus.ones_like(x):float(), ref.map(rand({ 3, 5 }, 1), function() return 1 end), { what = "ones_like" })
    local f = lumus.full_like(x, 2.5, { dtype = "float32" })
    checks.close(f, ref.map(rand({ 3, 5 }, 1), function() return 2.5 end), { what = "full_like" })
    local r = lumus.rand_like(lumus.zeros({ 1000 }))
    for _, v in ipairs(r:to_table()) do assert.is_true(v >= 0 and v < 1) end
  end)

  it("bmm multiplies batches; a ^ b is pow", function()
    local as, bs = rand({ 3, 4, 5 }, 1), rand({ 3, 5, 2 }, 2)
    checks.close(lumus.bmm(lumus.tensor(as), lumus.tensor(bs)), ref.matmul(as, bs), { mixed = 1e-5, what = "bmm" })
    local xs = ref.map(rand({ 2, 3 }, 3), math.abs)
    local x = lumus.tensor(xs)
    checks.close(x ^ 2, ref.pow(xs, 2), { rel = 4 * 2 ^ -23, what = "x ^ 2" })
    checks.close(2 ^ x, ref.pow(2, xs), { rel = 4 * 2 ^ -23, what = "2 ^ x" })
    checks.close(x ^ x, ref.pow(xs, xs), { rel = 4 * 2 ^ -23, what = "x ^ x" })
  end)

  it("eye and linspace match the reference, both ends of linspace exact", function()
    for _, nm in ipairs { { 1 }, { 3 }, { 4, 7 }, { 9, 2 }, { 31 } } do
      checks.close(lumus.eye(nm[1], nm[2]), ref.eye(nm[1], nm[2]), { what = "eye" })
    end
    assert.are.equal("bfloat16", lumus.eye(3, { dtype = "bfloat16" }):dtype())
    for _, c in ipairs { { 0, 1, 5 }, { -3.5, 10, 101 }, { 2, -7, 17 }, { 1e6, 1e6 + 3, 4 }, { 5, 5, 3 }, { -1, 1, 1 }, { 0, 1, 1000 } } do
      local got = lumus.linspace(c[1], c[2], c[3]):to_table()
      checks.close(got, ref.linspace(c[1], c[2], c[3]), { rel = 2 ^ -23, abs = 2 ^ -23 * math.max(math.abs(c[1]), math.abs(c[2])),
        what = ("linspace(%g, %g, %d)"):format(c[1], c[2], c[3]) })
      assert.are.equal(ref.f32(c[1]), got[1])
      if c[3] > 1 then assert.are.equal(ref.f32(c[2]), got[#got]) end
    end
    assert.are.equal("float16", lumus.linspace(0, 1, 3, { dtype = "float16" }):dtype())
  end)

  it("flip and roll move elements as the reference, along one dim, several, or flattened", function()
    for k, shape in ipairs(SHAPES) do
      local xs = rand(shape, 200 + k)
      local x = lumus.tensor(xs)
      local nd = #shape
      for d = 1, nd do
        checks.close(x:flip(d), ref.flip(xs, d), { what = "flip " .. d })
        for _, sft in ipairs { 1, -1, 3, 0, 100, -7 } do
          checks.close(lumus.roll(x, sft, d), ref.roll(xs, sft, d), { what = ("roll %d by %d"):format(d, sft) })
        end
      end
      checks.close(x:flip({ 1, nd }), ref.flip(xs, { 1, nd }), { what = "flip first and last" })
      checks.close(x:flip(-1), ref.flip(xs, nd), { what = "flip -1" })
      checks.close(x:roll(5), ref.roll(xs, 5), { what = "roll flattened" })
      checks.close(x:roll({ 2, -3 }, { 1, nd }), ref.roll(xs, { 2, -3 }, { 1, nd }), { what = "roll two dims" })
    end
    -- a copy, not a view
    local x = lumus.tensor({ 1, 2, 3 })
    local f = x:roll(3, 1)
    f:fill(0)
    checks.close(x, { 1, 2, 3 }, { what = "roll by n is a copy" })
  end)

  it("sort and argsort along any dim, ascending and descending, stable, NaN last", function()
    for k, shape in ipairs(SHAPES) do
      local xs = ref.map(rand(shape, 300 + k), function(v) return ref.f32(math.floor(v * 3) / 3) end)   -- ties
      local x = lumus.tensor(xs)
      for d = 1, #shape do
        for _, desc in ipairs { false, true } do
          local o = { dim = d, descending = desc }
          local wv, wi = ref.sort(xs, o)
          local v, i = lumus.sort(x, o)
          checks.close(v, wv, { what = "sort values" })
          assert.are.same(wi, i:to_table())
          assert.are.same(wi, x:argsort(o):to_table())
        end
      end
    end
    local v, i = lumus.tensor({ 2, 0 / 0, 1, 1 }):sort()
    local vs = v:to_table()
    assert.are.same({ 1, 1, 2 }, { vs[1], vs[2], vs[3] })
    assert.is_true(vs[4] ~= vs[4])
    assert.are.same({ 3, 4, 1, 2 }, i:to_table())
  end)

  it("dropout keeps each element with probability 1 - p, scaled, and is x itself when off", function()
    local x = lumus.ones({ 20000 })
    local y = lumus.dropout(x, { p = 0.25 })
    local kept, n = 0, 0
    for _, v in ipairs(y:to_table()) do
      n = n + 1
      if v ~= 0 then kept = kept + 1; assert.is_true(math.abs(v - 4 / 3) < 1e-6) end
    end
    -- 15000 expected; the binomial's standard deviation is 61
    assert.is_true(math.abs(kept - 15000) < 500, "kept " .. kept)
    assert.are.equal(x, lumus.dropout(x, { training = false }))
    assert.are.equal(x, x:dropout({ p = 0 }))
    checks.close(lumus.dropout(lumus.ones({ 5 }), { p = 1 }), { 0, 0, 0, 0, 0 }, { what = "p = 1" })
  end)

  it("cumsum matches the float64 running sum along every dim, over block boundaries", function()
    for k, shape in ipairs(SHAPES) do
      local xs = rand(shape, 400 + k)
      local x = lumus.tensor(xs)
      for d = 1, #shape do
        -- a float32 running sum of n terms: within n eps of the sum of |x| (mixed bound)
        checks.close(x:cumsum({ dim = d }), ref.cumsum(xs, { dim = d }), { mixed = shape[d] * 2 ^ -22, what = "cumsum dim " .. d })
      end
    end
    -- lengths around the block size (128) and several levels of blocks
    for _, n in ipairs { 127, 128, 129, 256, 1000, 16385, 40001 } do
      local g = ref.rng(n)
      local xs = {}
      for i = 1, n do xs[i] = math.floor(g.uniform() * 7) - 3 end   -- integers: the sums are exact
      assert.are.same(ref.cumsum(xs), lumus.cumsum(lumus.tensor(xs)):to_table())
    end
    assert.are.equal("float16", lumus.cumsum(lumus.ones({ 300 }, { dtype = "float16" })):dtype())
  end)

  it("pad adds or cuts along the last dims as torch's constant pad; tile and outer", function()
    local xs = rand({ 2, 3, 4 }, 9)
    local x = lumus.tensor(xs)
    for _, pads in ipairs { { 1, 2 }, { 0, 0, 1, 0 }, { 2, 1, 0, 3, 1, 1 }, { -1, 1 }, { -1, -2, 1, 0 } } do
      checks.close(lumus.pad(x, pads), ref.pad(xs, pads), { what = "pad " .. table.concat(pads, ",") })
    end
    checks.close(lumus.pad(x, { 1, 1 }, { value = -5 }), ref.pad(xs, { 1, 1 }, -5), { what = "pad value" })
    for _, reps in ipairs { { 2 }, { 1, 3 }, { 2, 1, 2 }, { 2, 1, 1, 3 } } do
      checks.close(x:tile(reps), ref.tile(xs, reps), { what = "tile " .. table.concat(reps, ",") })
    end
    local a, b = rand({ 5 }, 1), rand({ 7 }, 2)
    checks.close(lumus.outer(lumus.tensor(a), lumus.tensor(b)), ref.outer(a, b), { rel = 2 ^ -24, what = "outer" })
  end)

  it("leaky_relu, elu and softplus match the reference, softplus without overflow", function()
    local xs = ref.map(rand({ 7, 9 }, 11), function(v) return ref.f32(v * 30) end)
    xs[1][1], xs[1][2], xs[1][3] = 0, ref.f32(1e-30), -100
    local x = lumus.tensor(xs)
    -- the slope is rounded to float32, then the product: 2 roundings of 2^-24 each
    checks.close(x:leaky_relu(), ref.leaky_relu(xs), { rel = 2 ^ -23, what = "leaky_relu" })
    checks.close(lumus.leaky_relu(x, { negative_slope = 0.2 }), ref.leaky_relu(xs, 0.2), { rel = 2 ^ -23, what = "leaky_relu 0.2" })
    checks.close(x:elu(), ref.elu(xs), { rel = 4 * 2 ^ -23, abs = 1e-45, what = "elu" })
    checks.close(lumus.elu(x, { alpha = 0.5 }), ref.elu(xs, 0.5), { rel = 4 * 2 ^ -23, abs = 1e-45, what = "elu 0.5" })
    checks.close(x:softplus(), ref.softplus(xs), { rel = 6 * 2 ^ -23, abs = 1e-45, what = "softplus" })
    checks.close(lumus.softplus(x, { beta = 2, threshold = 5 }), ref.softplus(xs, 2, 5), { rel = 6 * 2 ^ -23, abs = 1e-45, what = "softplus beta 2" })
  end)

  it("record into lumus.capture: a replay recomputes from the inputs' current values", function()
    local x = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    local g, c, t, f, l, st = lumus.capture(function()
      return lumus.cumsum(x), lumus.tril(x), lumus.flip(x, 2), lumus.lerp(x, 0, 0.5), lumus.std(x, { dim = 2 })
    end)
    x:copy(lumus.tensor({ { 2, 0, 1 }, { 1, 1, 7 } }))
    g:replay()
    local xs = x:to_table()
    checks.close(c, ref.cumsum(xs), { what = "captured cumsum" })
    checks.close(t, ref.tril(xs), { what = "captured tril" })
    checks.close(f, ref.flip(xs, 2), { what = "captured flip" })
    checks.close(l, ref.lerp(xs, 0, 0.5), { rel = 1e-7, what = "captured lerp" })
    checks.close(st, ref.std(xs, { dim = 2 }), { rel = 1e-6, what = "captured std" })
    g:free()
  end)

  it("refuse bad arguments naming the function", function()
    local x = lumus.zeros({ 2, 3 })
    checks.errors(lumus.clone, "bad argument #1 to 'lumus.clone' %(tensor must be a tensor, got number%)", 3)
    checks.errors(lumus.t, "bad argument #1 to 'lumus.t' %(expects a tensor of at most 2 dimensions, got 3%)", lumus.zeros({ 1, 2, 3 }))
    checks.errors(lumus.flatten, "'lumus.flatten' %(start_dim must be an integer in %-2..%-1 or 1..2, got 3%)", x, 3)
    checks.errors(lumus.flatten, "'lumus.flatten' %(start_dim 2 comes after end_dim 1%)", x, 2, 1)
    checks.errors(lumus.zeros_like, "'lumus.zeros_like' %(unknown option 'dtyp'", x, { dtyp = "float16" })
    checks.errors(lumus.zeros_like, "'lumus.zeros_like' %(options must be a table, got number%)", x, 5)
    checks.errors(lumus.full_like, "'lumus.full_like' %(value must be a number, got nil%)", x)
    checks.errors(lumus.masked_fill, "'lumus.masked_fill' %(mask must be bool, got float32%)", x, x, 0)
    checks.errors(lumus.masked_fill, "'lumus.masked_fill' %(value must be a number, got string%)", x, lumus.gt(x, 0), "a")
    checks.errors(lumus.masked_fill, "'lumus.masked_fill' %(mask must broadcast to the tensor's shape",
      lumus.zeros({ 3 }), lumus.gt(lumus.zeros({ 2, 3 }), 0), 1)
    checks.errors(lumus.std, "'lumus.std' %(unknown option 'dims'", x, { dims = 1 })
    checks.errors(lumus.norm, "'lumus.norm' %(p must be 1, 2 or math.huge, got 3%)", x, { p = 3 })
    checks.errors(lumus.lerp, "'lumus.lerp' %(end must be a tensor or a number, got string%)", x, "b", 0.5)
    checks.errors(lumus.lerp, "'lumus.lerp' %(weight must be a tensor, got nil%)", x, x)
    checks.errors(lumus.tril, "'lumus.tril' %(expects at least 2 dimensions, got 1%)", lumus.zeros({ 3 }))
    checks.errors(lumus.triu, "'lumus.triu' %(diagonal must be an integer, got 0.5%)", x, 0.5)
    checks.errors(lumus.any, "'lumus.any' %(unknown option 'axis'", x, { axis = 1 })
    checks.errors(lumus.bmm, "'lumus.bmm' %(expects a 3%-D tensor, got 2 dimensions%)", x, x)
    checks.errors(lumus.bmm, "'lumus.bmm' %(batch sizes differ: 2 and 3%)", lumus.zeros({ 2, 1, 1 }), lumus.zeros({ 3, 1, 1 }))
    checks.errors(lumus.eye, "'lumus.eye' %(n must be a positive integer, got 0%)", 0)
    checks.errors(lumus.eye, "'lumus.eye' %(dtype must be float32, float16 or bfloat16, got int32%)", 2, { dtype = "int32" })
    checks.errors(lumus.linspace, "'lumus.linspace' %(steps must be a positive integer, got 2.5%)", 0, 1, 2.5)
    checks.errors(lumus.linspace, "'lumus.linspace' %(end must be a number, got nil%)", 0)
    checks.errors(lumus.flip, "'lumus.flip' %(dim 1 is listed twice%)", x, { 1, -2 })
    checks.errors(lumus.flip, "'lumus.flip' %(dims must be a dimension or a list of them, got nil%)", x)
    checks.errors(lumus.roll, "'lumus.roll' %(shifts must give one integer per dim %(2%), got 1%)", x, { 1 }, { 1, 2 })
    checks.errors(lumus.roll, "'lumus.roll' %(dims%[1%] must be an integer in %-2..%-1 or 1..2, got 3%)", x, 1, 3)
    checks.errors(lumus.sort, "'lumus.sort' %(descending must be a boolean, got string%)", x, { descending = "yes" })
    checks.errors(lumus.argsort, "'lumus.argsort' %(unknown option 'axis'", x, { axis = 1 })
    checks.errors(lumus.dropout, "'lumus.dropout' %(p must be a number in %[0, 1%], got 2%)", x, { p = 2 })
    checks.errors(lumus.cumsum, "'lumus.cumsum' %(dim must be an integer in %-2..%-1 or 1..2, got 3%)", x, { dim = 3 })
    checks.errors(lumus.pad, "'lumus.pad' %(pads must be a list of 2, 4, ... up to 4 integers, got 3 values%)", x, { 1, 1, 1 })
    checks.errors(lumus.pad, "'lumus.pad' %(pads cut all of dim 2 %(size 3%)%)", x, { -2, -1 })
    checks.errors(lumus.pad, "'lumus.pad' %(value must be a number, got string%)", x, { 1, 1 }, { value = "a" })
    checks.errors(lumus.tile, "'lumus.tile' %(reps%[1%] must be a positive integer, got 0%)", x, { 0 })
    checks.errors(lumus.outer, "'lumus.outer' %(expects a 1%-D tensor, got 2 dimensions%)", x, lumus.zeros({ 2 }))
    checks.errors(lumus.softplus, "'lumus.softplus' %(beta must be a positive number, got 0%)", x, { beta = 0 })
    checks.errors(lumus.leaky_relu, "'lumus.leaky_relu' %(unknown option 'slope'", x, { slope = 1 })
    local freed = lumus.zeros({ 2 })
    freed:free()
    checks.errors(lumus.std, "'lumus.std' %(tensor has been freed%)", freed)
  end)
end)
