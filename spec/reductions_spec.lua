-- Reductions (sum mean var max min argmax argmin), softmax, log_softmax and topk over
-- every dimension of 1- to 4-D tensors against lumus.reference (float64), on seeded
-- random shapes (odd, prime, size 1), with keepdim, non-contiguous inputs (transposed,
-- narrowed), ties, NaN and infinities, the two-stage split of long reductions, float16 and
-- bfloat16 inputs where the device has them, and argument errors by message.
--
-- Tolerances (per element; NaN only against NaN, an infinity only against itself):
--   sum   8 * 2^-24 * sum|x| over the column (compensated per thread, then a tree)
--   mean  the same over the count, plus one rounding
--   var   1e-5 |want| + 1e-6 * sum(x^2) / count
--   max, min, argmax, argmin, topk: exact (values and 1-based indices)
--   softmax 1e-5 |want| + 1e-6;  log_softmax 2e-6 max(1, |want|)
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local U = 2 ^ -24
local NAN, INF = 0 / 0, math.huge

-- The int32 elements of t as Lua integers, nested by t's shape.
local function ints(t)
  local bytes, flat = t:to_bytes(), {}
  for i = 1, math.floor(#bytes / 4) do flat[i] = (compat.unpack_bytes("i32", bytes, 4 * i - 3, 1)[1]) end
  return ref.nest(flat, t:shape())
end

local function shape_name(s) return table.concat(s, "x") end

-- Per-element bounds for sums: k * sum|x| (finite entries) of each output's column.
local function sum_bounds(xt, opts, k, per_count)
  local mags = ref.flatten(ref.sum(ref.map(xt, function(v) return math.abs(v) < INF and math.abs(v) or 0 end), opts))
  local n = math.floor(#ref.flatten(xt) / #mags)
  local b = {}
  for i, m in ipairs(mags) do b[i] = k * m / (per_count and n or 1) + 1e-30 end
  return b, n
end

-- Extra relative bound for results stored in a narrow dtype (one rounding).
local ROUNDING = { float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }

local function check_op(name, x, xt, opts, what)
  local narrow = ROUNDING[x:dtype()]
  if narrow then
    -- accumulated in float32, rounded once: the float32 bound plus one rounding
    local got = name ~= "argmax" and name ~= "argmin" and lumus[name](x, opts) or nil
    if not got then
      assert.are.same(ref[name](xt, opts), ints(lumus[name](x, opts)), name .. " " .. what)
      return
    end
    local want = ref[name](xt, opts)
    if name == "max" or name == "min" then
      local v, i = lumus[name](x, opts)
      checks.close(v, want, { what = name .. " " .. what })
      if opts.dim then assert.are.same(select(2, ref[name](xt, opts)), ints(i), name .. " " .. what) end
      return
    end
    local eps = (name == "var" and 1e-5 or 1e-6)
    local bound = {}
    local sums = (name == "sum" or name == "mean") and sum_bounds(xt, opts, 8 * U, name == "mean") or nil
    for i, w in ipairs(ref.flatten(want)) do
      bound[i] = narrow * math.abs(w) + eps * math.max(1, math.abs(w)) + (sums and sums[i] or 0)
    end
    checks.close(got, want, { abs = bound, what = name .. " " .. x:dtype() .. " " .. what })
    return
  end
  what = ("%s %s %s"):format(name, what, opts.dim and ("dim " .. opts.dim) or "all")
  if opts.keepdim then what = what .. " keepdim" end
  if name == "sum" or name == "mean" then
    local b = sum_bounds(xt, opts, 8 * U, name == "mean")
    local want = ref[name](xt, opts)
    if name == "mean" then
      for i, w in ipairs(ref.flatten(want)) do b[i] = b[i] + U * math.abs(w) end
    end
    checks.close(lumus[name](x, opts), want, { abs = b, what = what })
  elseif name == "var" then
    local sq = sum_bounds(ref.map(xt, function(v) return v * v end), opts, 1e-6, true)
    checks.close(lumus.var(x, opts), ref.var(xt, opts), { rel = 1e-5, abs = sq, what = what })
  elseif name == "max" or name == "min" then
    if opts.dim then
      local v, i = lumus[name](x, opts)
      local wv, wi = ref[name](xt, opts)
      checks.close(v, wv, { what = what })
      assert.are.equal("int32", i:dtype())
      assert.are.same(wi, ints(i), what .. " indices")
    else
      checks.close(lumus[name](x, opts), ref[name](xt, opts), { what = what })
    end
  elseif name == "argmax" or name == "argmin" then
    local i = lumus[name](x, opts)
    assert.are.equal("int32", i:dtype())
    assert.are.same(ref[name](xt, opts), ints(i), what)
  elseif name == "softmax" then
    opts = { dim = opts.dim }
    checks.close(lumus.softmax(x, opts), ref.softmax(xt, opts), { rel = 1e-5, abs = 1e-6, what = what })
  elseif name == "log_softmax" then
    opts = { dim = opts.dim }
    checks.close(lumus.log_softmax(x, opts), ref.log_softmax(xt, opts), { mixed = 2e-6, what = what })
  end
end

local REDUCTIONS = { "sum", "mean", "var", "max", "min", "argmax", "argmin" }
local ALL = { "sum", "mean", "var", "max", "min", "argmax", "argmin", "softmax", "log_softmax" }
local SIZES = { 1, 2, 3, 4, 5, 7, 8, 13, 17, 31, 64, 97 }

local function random_shape(g, nd, cap)
  while true do
    local s, n = {}, 1
    for i = 1, nd do s[i] = SIZES[math.floor(g.uniform() * #SIZES) + 1]; n = n * s[i] end
    if n <= cap then return s end
  end
end

-- Random values; with `ties`, small integers (many equal values per column).
local function values(shape, g, ties)
  if ties then return ref.random_table(shape, function() return math.floor(g.uniform() * 4) - 2 end) end
  return ref.random_table(shape, g)
end

describe("reductions and softmax over any dimension", function()
  it("match the reference over every dimension of random 1-4-D shapes, keepdim, ties", function()
    local g = ref.rng(1501)
    for case = 1, 14 do
      local nd = (case - 1) % 4 + 1
      local shape = random_shape(g, nd, 3000)
      local ties = case % 3 == 0
      local xt = values(shape, g, ties)
      local x = lumus.tensor(xt)
      local what = shape_name(shape) .. (ties and " (ties)" or "")
      for _, name in ipairs(ALL) do
        if name ~= "softmax" and name ~= "log_softmax" then check_op(name, x, xt, {}, what) end
        for d = -nd, nd do
          if d ~= 0 then
            check_op(name, x, xt, { dim = d, keepdim = (d + case) % 2 == 0 or nil }, what)
          end
        end
      end
      x:free()
    end
  end)

  it("take non-contiguous inputs: transposed and narrowed views", function()
    local g = ref.rng(1502)
    for case = 1, 6 do
      local nd = case % 3 + 2
      local shape = random_shape(g, nd, 2000)
      shape[nd] = math.max(shape[nd], 3)
      local xt = values(shape, g, case % 2 == 0)
      local base = lumus.tensor(xt)
      local views = {
        { base:transpose(1, nd), "transposed" },
        { base:narrow(nd, 2, shape[nd] - 2), "narrowed" },
      }
      for _, v in ipairs(views) do
        local x, vt = v[1], v[1]:to_table()
        assert.is_false(x:is_contiguous())
        for _, name in ipairs(ALL) do
          for d = 1, nd do check_op(name, x, vt, { dim = d }, shape_name(x:shape()) .. " " .. v[2]) end
        end
      end
      base:free()
    end
  end)

  it("split long reductions into two stages with the same results", function()
    local g = ref.rng(1503)
    for _, case in ipairs {
      { { 40003 }, {} }, { { 40000 }, {} }, { { 3, 20000 }, { dim = 2 } }, { { 20011, 3 }, { dim = 1 } },
      { { 2, 9001, 5 }, { dim = 2 } }, { { 5, 9001 }, {} }, { { 4099, 16 }, { dim = 1, keepdim = true } },
    } do
      local xt = values(case[1], g, false)
      local x = lumus.tensor(xt)
      for _, name in ipairs(REDUCTIONS) do check_op(name, x, xt, case[2], shape_name(case[1])) end
      check_op("softmax", x, xt, case[2], shape_name(case[1]))
      x:free()
    end
  end)

  it("over a dimension of size 1 return x itself and indices of 1, every dtype, NaN and infinities", function()
    local NAN_ = 0 / 0
    for _, dt in ipairs { "float32", "float16", "bfloat16" } do
      for _, case in ipairs { { { 6, 1 }, 2 }, { { 1, 6 }, 1 }, { { 2, 1, 3 }, 2 }, { { 3, 1 }, 2 } } do
        local shape, dim = case[1], case[2]
        local n = 1
        for _, k in ipairs(shape) do n = n * k end
        local flat = {}
        for i = 1, n do flat[i] = ({ 1.5, -2.25, NAN_, INF, -INF, -0.0 })[(i - 1) % 6 + 1] end
        local x = lumus.tensor(ref.nest(flat, shape)):to(dt)
        local what = ("%s %s dim %d"):format(dt, shape_name(shape), dim)
        local want = ref.flatten(x:to("float32"):to_table())
        for _, name in ipairs { "sum", "mean", "max", "min" } do
          local got = ref.flatten(lumus[name](x, { dim = dim, keepdim = true }):to("float32"):to_table())
          for i = 1, n do
            assert(got[i] == want[i] or (got[i] ~= got[i] and want[i] ~= want[i]), ("%s %s [%d]: %s against %s"):format(name, what, i, got[i], want[i]))
          end
        end
        for _, name in ipairs { "max", "min", "argmax", "argmin" } do
          local a, b = lumus[name](x, { dim = dim })
          local ones = ref.flatten(ints(b or a))
          for i = 1, #ones do assert.are.equal(1, ones[i], name .. " " .. what) end
        end
        x:free()
      end
    end
  end)

  it("follow PyTorch on NaN and infinities, along rows and along columns", function()
    local F = ref.f32
    local rows = {
      { 1, 2, 3, 4, 5 },
      { 1, NAN, 2, NAN, 0 },
      { 1, INF, 2, 3, 4 },
      { -INF, 1, 2, -INF, 0 },
      { -INF, -INF, -INF, -INF, -INF },
      { INF, -INF, 1, 2, 3 },
      { F(3e38), F(3e38), 1, 2, 3 },
      { 2, 7, 7, 1, 7 },
    }
    local x = lumus.tensor(rows)
    local cols = lumus.copy(x:transpose(1, 2))
    local ct = cols:to_table()
    for _, name in ipairs(ALL) do
      check_op(name, x, rows, { dim = 2 }, "special rows")
      check_op(name, cols, ct, { dim = 1 }, "special columns")
    end
    -- argmax of a NaN row is the first NaN, max is NaN; argmin too
    local v, i = lumus.max(x, { dim = 2 })
    assert.are.equal(2, ints(i)[2])
    assert.is_true(v:to_table()[2] ~= v:to_table()[2])
    assert.are.same({ 5, 2, 2, 3, 1, 1, 1, 2 }, ints(lumus.argmax(x, { dim = 2 })))
    assert.are.same({ 1, 2, 1, 1, 1, 2, 3, 4 }, ints(lumus.argmin(x, { dim = 2 })))
    -- log_softmax: -inf entries give -inf, an all -inf row NaN
    local ls = lumus.log_softmax(x):to_table()
    assert.are.equal(-INF, ls[4][1])
    assert.is_true(ls[5][1] ~= ls[5][1])
    x:free(); cols:free()
  end)

  it("write into out (and indices) and work in place for softmax", function()
    local xt = ref.random_table({ 4, 6 }, ref.rng(1504))
    local x = lumus.tensor(xt)
    local out = lumus.empty({ 4 })
    assert.are.equal(out, lumus.sum(x, { dim = 2, out = out }))
    checks.close(out, ref.sum(xt, { dim = 2 }), { mixed = 1e-6, what = "sum into out" })
    local vo, io = lumus.empty({ 6 }), lumus.argmax(lumus.zeros({ 6, 1 }), { dim = 2 })
    local v, i = lumus.max(x, { dim = 1, out = vo, indices = io })
    assert.are.equal(vo, v); assert.are.equal(io, i)
    local wv, wi = ref.max(xt, { dim = 1 })
    checks.close(v, wv, { what = "max into out" })
    assert.are.same(wi, ints(i))
    local ai = lumus.argmin(lumus.zeros({ 4, 1 }), { dim = 2 })
    assert.are.equal(ai, lumus.argmin(x, { dim = 2, out = ai }))
    assert.are.same(ref.argmin(xt, { dim = 2 }), ints(ai))
    local y = lumus.copy(x)
    lumus.log_softmax(y, { dim = 1, out = y })
    checks.close(y, ref.log_softmax(xt, { dim = 1 }), { mixed = 2e-6, what = "log_softmax in place" })
    local z = lumus.copy(x)
    z:softmax({ dim = 1, out = z })
    checks.close(z, ref.softmax(xt, { dim = 1 }), { rel = 1e-5, abs = 1e-6, what = "softmax in place" })
    assert.are.same({ 1, 1 }, lumus.sum(x, { keepdim = true }):shape())
    assert.are.same({ 1 }, lumus.mean(x):shape())
    checks.close(x:var({ dim = 2, correction = 0 }), ref.var(xt, { dim = 2, correction = 0 }), { rel = 1e-5, abs = 1e-6, what = "var correction 0" })
    -- a single value: the unbiased variance divides by 0 (NaN), as PyTorch
    assert.is_true(lumus.var(lumus.tensor({ 3 })):to_table()[1] ~= lumus.var(lumus.tensor({ 3 })):to_table()[1])
  end)

  it("raise naming the argument", function()
    local x = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    checks.errors(lumus.sum, "bad argument #2 to 'lumus.sum' %(dim 3 is out of range for a 2%-D tensor", x, { dim = 3 })
    checks.errors(lumus.softmax, "bad argument #2 to 'lumus.softmax' %(dim 0 is out of range", x, { dim = 0 })
    checks.errors(lumus.argmax, "#2.*dim %-3 is out of range", x, { dim = -3 })
    checks.errors(lumus.mean, "#2.*unknown option 'dims' %(known: dim, keepdim, out%)", x, { dims = 1 })
    checks.errors(lumus.var, "#2.*unknown option 'unbiased'", x, { unbiased = true })
    checks.errors(lumus.var, "#2.*correction must be >= 0, got %-1", x, { correction = -1 })
    checks.errors(lumus.max, "#2.*indices is only given with dim", x, { indices = lumus.empty({ 1 }) })
    checks.errors(lumus.argmax, "#2.*out must be int32, got float32", x, { dim = 1, out = lumus.empty({ 3 }) })
    checks.errors(lumus.max, "#2.*indices must be int32, got float32", x, { dim = 1, indices = lumus.empty({ 3 }) })
    checks.errors(lumus.sum, "#2.*out must have shape 2, got 3", x, { dim = 2, out = lumus.empty({ 3 }) })
    checks.errors(lumus.sum, "#2.*dim must be an integer, got string", x, { dim = "1" })
    checks.errors(lumus.log_softmax, "#2.*unknown option 'keepdim' %(known: dim, out%)", x, { keepdim = true })
    checks.errors(lumus.sum, "#1.*tensor expected", { 1, 2 })
  end)
end)

describe("float16 and bfloat16 inputs", function()
  local narrow = lumus.device().narrow_storage
  it("reduce and softmax in float32 and store in the input's dtype", function()
    if not narrow then pending("the device lacks 16-bit storage") return end
    local g = ref.rng(1507)
    for case = 1, 6 do
      local nd = (case - 1) % 3 + 1
      local shape = random_shape(g, nd, 1500)
      for _, dt in ipairs { "float16", "bfloat16" } do
        local x = lumus.tensor(values(shape, g, case % 2 == 0), { dtype = dt })
        local xt = x:to("float32"):to_table()
        for _, name in ipairs(ALL) do
          local r = lumus[name](x, { dim = nd })
          assert.are.equal((name == "argmax" or name == "argmin") and "int32" or dt, r:dtype())
          check_op(name, x, xt, { dim = nd }, shape_name(shape))
          if nd > 1 then check_op(name, x, xt, { dim = 1 }, shape_name(shape)) end
          if name ~= "softmax" and name ~= "log_softmax" then check_op(name, x, xt, {}, shape_name(shape)) end
        end
        local v, i = lumus.topk(x, 1, { dim = nd })
        local wv, wi = ref.topk(xt, 1, { dim = nd })
        assert.are.equal(dt, v:dtype())
        checks.close(v, wv, { what = "topk " .. dt })
        assert.are.same(wi, ints(i))
      end
    end
  end)
end)

describe("topk", function()
  it("matches the reference on random rows up to vocabulary size, k up to 1024", function()
    local g = ref.rng(1505)
    for _, c in ipairs {
      { { 7 }, 3 }, { { 7 }, 7 }, { { 1 }, 1 }, { { 3, 100 }, 1 }, { { 3, 100 }, 100 }, { { 2, 5000 }, 64 },
      { { 1, 50257 }, 1024 }, { { 2, 4099 }, 1000 },
    } do
      for _, ties in ipairs { false, true } do
        local xt = values(c[1], g, ties)
        local x = lumus.tensor(xt)
        for _, largest in ipairs { true, false } do
          local v, i = lumus.topk(x, c[2], { largest = largest })
          local wv, wi = ref.topk(xt, c[2], { largest = largest })
          local what = ("topk %s k %d largest %s ties %s"):format(shape_name(c[1]), c[2], tostring(largest), tostring(ties))
          checks.close(v, wv, { what = what })
          assert.are.equal("int32", i:dtype())
          assert.are.same(wi, ints(i), what .. " indices")
        end
        x:free()
      end
    end
  end)

  it("works over any dimension, on views, with NaN as the largest", function()
    local g = ref.rng(1506)
    local xt = ref.random_table({ 5, 9, 4 }, g)
    local x = lumus.tensor(xt)
    for d = -3, 3 do
      if d ~= 0 then
        local k = math.min(3, x:shape()[d < 0 and d + 4 or d])
        local v, i = x:topk(k, { dim = d })
        local wv, wi = ref.topk(xt, k, { dim = d })
        checks.close(v, wv, { what = "topk dim " .. d })
        assert.are.same(wi, ints(i), "topk indices dim " .. d)
      end
    end
    local t = x:transpose(1, 3)
    local v, i = t:topk(2, { dim = 2, largest = false })
    local wv, wi = ref.topk(t:to_table(), 2, { dim = 2, largest = false })
    checks.close(v, wv, { what = "topk of a transposed view" })
    assert.are.same(wi, ints(i))
    local n = lumus.tensor({ { 1, NAN, 3, NAN, -INF, INF } })
    local nv, ni = n:topk(4)
    assert.are.same({ { 2, 4, 6, 3 } }, ints(ni))
    local sv, si = n:topk(3, { largest = false })
    assert.are.same({ { 5, 1, 3 } }, ints(si))
    assert.are.equal(-INF, sv:to_table()[1][1])
    assert.is_true(nv:to_table()[1][1] ~= nv:to_table()[1][1])
    x:free(); n:free()
  end)

  it("raises naming the argument", function()
    local x = lumus.tensor({ { 1, 2, 3, 4, 5 } })
    checks.errors(lumus.topk, "bad argument #2 to 'lumus.topk' %(k must be in 1..5 %(the size of dim 2%), got 6", x, 6)
    checks.errors(lumus.topk, "#2.*k must be in 1..5", x, 0)
    checks.errors(lumus.topk, "#2.*number expected", x)
    checks.errors(lumus.topk, "#3.*unknown option 'descending'", x, 2, { descending = true })
    checks.errors(lumus.topk, "#3.*dim 3 is out of range", x, 2, { dim = 3 })
    checks.errors(lumus.topk, "#3.*largest must be a boolean", x, 2, { largest = 1 })
  end)
end)
