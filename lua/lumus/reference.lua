--- lumus.reference: plain-Lua float64 ground truth.
--
-- These are the implementations the specs check the GPU kernels against, and that
-- users may use for the same purpose in their own tests. They work on ordinary Lua
-- values (nested tables of numbers, as `lumus.tensor` takes and `t:to_table()`
-- returns), compute in float64 (Lua's number type), need no device, and aim only at
-- being obviously right. They are slow: keep the inputs small.
--
--   local ref = require "lumus.reference"
--   local y, mean, invstd = ref.layer_norm_forward({{1, 2, 3, 4}})   -- float64
--   local err = ref.compare(gpu_y:to_table(), y)                     -- {max_abs=, ...}
--
-- Non-finite values follow PyTorch's float32 semantics (docs/semantics.md): NaN in gives
-- NaN out, and a result beyond float32's range (|v| >= 2^128 - 2^103, which rounds to
-- infinity) is +-inf, as a float32 result would be, for add, sub, mul, div, scale, sum
-- and mean (a mean whose sum overflows is +-inf, as PyTorch's is).
--
-- To check a GPU result, feed the reference the float32 values the GPU actually saw:
-- either `x:to_table()` of the input tensor, or tables made with `ref.random_table`
-- (which rounds to float32). Then the only difference left is the kernel's arithmetic.
--
-- Functions:
--   shape(t)                          shape of a nested table; errors on ragged input
--   flatten(t)                        flat list, row-major
--   nest(flat, shape)                 the inverse of flatten
--   compare(got, want)                error measures of got against want
--   layer_norm_forward(x, w, b, eps)  LayerNorm over the last dimension
--   matmul(a, b, opts)                torch.matmul's shapes (batches broadcast, 1-D operands),
--                                     transpose_a / transpose_b, float64 sums
--   linear(x, weight, bias)           x W^T + b, weight [out, in] (torch layout)
--   rng(seed)                         deterministic uniform / normal generator
--   f32(v)                            v rounded to the nearest float32
--   random_table(shape, f)            nested table of f() values, rounded to float32
--   map(t, f)                         f applied to every number of a nested table
--   add, sub, mul, div(a, b)          elementwise, numbers or shapes that broadcast
--                                     (NumPy/PyTorch rules: sizes equal or 1)
--   scale(t, s), neg(t), relu(t)      t * s, -t, max(t, 0)
--   erf(x), erfc(x)                   the error function and 1 - erf(x), numbers
--   gelu(t, approximate)              "none" (erf form, the default) or "tanh"
--   philox4x32_10(c, k)               Philox4x32-10 block: counter {4 words}, key {2 words}
--   rand(shape, state [, first, dtype])  lumus.rand/randn bit for bit, from get_rng_state()
--   randn(shape, state [, first, dtype])
--   randn_float64(shape, state)       Box-Muller in float64 on the same words
--   uniform(shape, state, a, b)       t:uniform_(a, b) / t:normal_(mean, std) bit for bit
--   normal(shape, state, mean, std)
--   multinomial(p, n, repl, state)    lumus.multinomial's 1-based samples
--   arange(start, stop, step, dtype)  lumus.arange's values (a flat list)
--   index_select(x, dim, ids)         slices ids[i] of x along dim (1-based; outside: 0)
--   embedding(ids, weight)            rows of weight [V][D] -> ids' shape .. {D}
--   gather(x, dim, ids)               torch.gather with 1-based ids
--   cat(list, dim), stack(list, dim)  joined along dim / along a new dimension dim
--   split(t, size or sizes, dim)      pieces along dim; chunk(t, n, dim) as torch.chunk
--   sum, mean, var(t, opts)           over opts.dim or everything ({dim=, keepdim=, correction=})
--   max, min(t, opts)                 values (and 1-based indices with opts.dim)
--   argmax, argmin(t, opts)           1-based indices
--   softmax, log_softmax(t, opts)     over opts.dim (default the last)
--   topk(t, k, opts)                  values, 1-based indices ({dim=, largest=})
--   exp log sqrt rsqrt tanh sigmoid silu expm1 log1p exp2 log2 log10 sin cos tan (t)
--                                     elementwise, PyTorch's NaN/inf
--   pow(a, b), maximum(a, b), minimum(a, b), clamp(t, min, max)
--   eq ne lt le gt ge (a, b)          booleans (true/false), NaN compares false but in ne
--   where(mask, a, b)                 a where mask (booleans, or nonzero numbers), else b
--   layer_norm_backward(dy, x, mean, invstd, weight)
--                                     LayerNorm's gradients: dx [, dweight, dbias]
--   sample_distribution(logits, opts) the probabilities lumus.sample draws from
local M = {}

local abs, sqrt, huge = math.abs, math.sqrt, math.huge
local compat = require "lumus.compat"
local unpack = compat.unpack

-- "[2][3]" for an error message, from a list of indices.
local function path_string(path)
  local parts = {}
  for i = 1, #path do parts[i] = "[" .. path[i] .. "]" end
  return table.concat(parts)
end

--- Shape of a nested table of numbers: {n1, ..., nk}, k >= 1.
-- A plain list of numbers has shape {n}. Raises an error naming the offending
-- element on ragged tables, empty tables and non-number elements.
function M.shape(t)
  if type(t) ~= "table" then
    error(("reference.shape: table expected, got %s"):format(type(t)), 2)
  end
  -- The shape is read along the first elements, then every element is checked.
  local shape = {}
  local level = t
  while type(level) == "table" do
    if #level == 0 then
      local where = ("[1]"):rep(#shape)        -- reached along first elements
      error(("reference.shape: empty table at %s"):format(where ~= "" and where or "top level"), 2)
    end
    shape[#shape + 1] = #level
    level = level[1]
  end
  local path = {}
  local function check(v, depth)
    if depth > #shape then
      if type(v) ~= "number" then
        error(("reference.shape: element %s is %s, number expected"):format(path_string(path), type(v)), 0)
      end
      return
    end
    if type(v) ~= "table" then
      error(("reference.shape: element %s is %s, a table of %d expected (ragged)")
        :format(path_string(path), type(v), shape[depth]), 0)
    end
    if #v ~= shape[depth] then
      error(("reference.shape: element %s has %d entries where %d were expected (ragged)")
        :format(path_string(path), #v, shape[depth]), 0)
    end
    for i = 1, #v do
      path[depth] = i
      check(v[i], depth + 1)
    end
    path[depth] = nil
  end
  local ok, err = pcall(check, t, 1)
  if not ok then error(err, 2) end
  return shape
end

-- Appends the numbers of nested table t to out, row-major.
local function flatten_into(t, out)
  for i = 1, #t do
    local v = t[i]
    if type(v) == "table" then flatten_into(v, out) else out[#out + 1] = v end
  end
  return out
end

--- All numbers of a nested table (or a flat list), row-major, in a new flat list.
-- The table is checked with `shape` first, so ragged input is an error.
function M.flatten(t)
  M.shape(t)
  return flatten_into(t, {})
end

--- The nested table of the given shape holding the numbers of a flat list (row-major).
function M.nest(flat, shape)
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  if #flat ~= n then
    error(("reference.nest: %d numbers do not fill shape of %d"):format(#flat, n), 2)
  end
  local pos = 0
  local function build(depth)
    local t = {}
    if depth == #shape then
      for i = 1, shape[depth] do t[i] = flat[pos + i] end
      pos = pos + shape[depth]
    else
      for i = 1, shape[depth] do t[i] = build(depth + 1) end
    end
    return t
  end
  return build(1)
end

--- Error measures of `got` against `want` (the reference).
-- Both nested or flat, any nesting, the same number of elements. Returns a table:
--   max_abs  largest |got - want|
--   max_rel  largest |got - want| / max(|want|, 1): a relative error that turns into
--            an absolute one for elements near zero (so "max_rel <= tol" reads
--            "|got - want| <= tol * max(1, |want|)")
--   rel_l2   ||got - want||_2 / ||want||_2 (0 when both are all zeros)
--   worst    1-based flat index of the element with the largest |got - want|
--   n        number of elements
-- A NaN in `got` where `want` is not NaN (an unwritten, NaN-poisoned output, say), or
-- an infinity that `want` does not share, makes every measure math.huge. Equal
-- infinities and NaN in both count as equal.
function M.compare(got, want)
  local a = type(got[1]) == "table" and M.flatten(got) or got
  local b = type(want[1]) == "table" and M.flatten(want) or want
  if #a ~= #b then
    error(("reference.compare: %d elements against %d"):format(#a, #b), 2)
  end
  local max_abs, max_rel, sq_err, sq_ref, worst = 0, 0, 0, 0, 1
  for i = 1, #a do
    local x, y = a[i], b[i]
    local e
    if x == y or (x ~= x and y ~= y) then
      e = 0
    else
      e = abs(x - y)
      if e ~= e or e == huge then e = huge end   -- NaN or unmatched infinity
    end
    if e > max_abs then max_abs, worst = e, i end
    local scale = abs(y)
    if scale ~= scale or scale == huge or scale < 1 then scale = 1 end
    local r = e / scale
    if r > max_rel then max_rel = r end
    sq_err = sq_err + e * e
    if y == y and abs(y) ~= huge then sq_ref = sq_ref + y * y end
  end
  local rel_l2
  if sq_err == 0 then
    rel_l2 = 0
  elseif sq_ref == 0 then
    rel_l2 = huge
  else
    rel_l2 = sqrt(sq_err / sq_ref)
  end
  return { max_abs = max_abs, max_rel = max_rel, rel_l2 = rel_l2, worst = worst, n = #a }
end

--- LayerNorm forward over the last dimension, in float64.
--   x       nested table of depth >= 1; its innermost tables are rows of D numbers
--           (a flat list of D numbers is a single row)
--   weight  flat list of D numbers, or nil (as if all ones)
--   bias    flat list of D numbers, or nil (as if all zeros)
--   eps     number > 0, default 1e-5
-- Returns y, mean, invstd:
--   y       nested like x: weight * (x - mean) * invstd + bias
--   mean    per row, nested like x without its last level
--   invstd  per row, likewise: 1 / sqrt(var + eps), var the biased variance (sum / D)
-- For a 1-D x, mean and invstd are lists of one number, {m} and {r}, matching lumus,
-- which returns tensors of shape {1} there (a shape cannot be empty).
-- Two passes per row: the mean first, then the variance from the deviations (never
-- E[x^2] - E[x]^2). Plain float64 sums: for D up to 2^20 their rounding error is far
-- below float32 resolution, which is all the specs need.
function M.layer_norm_forward(x, weight, bias, eps)
  local shape = M.shape(x)
  local d = shape[#shape]
  for _, p in ipairs { { weight, "weight" }, { bias, "bias" } } do
    local v, name = p[1], p[2]
    if v ~= nil then
      if type(v) ~= "table" then
        error(("reference.layer_norm_forward: %s must be a list of %d numbers or nil, got %s")
          :format(name, d, type(v)), 2)
      end
      local vs = M.shape(v)
      if #vs ~= 1 or vs[1] ~= d then
        error(("reference.layer_norm_forward: %s must be a list of %d numbers, got shape %s")
          :format(name, d, table.concat(vs, "x")), 2)
      end
    end
  end
  if eps == nil then eps = 1e-5 end
  if type(eps) ~= "number" or not (eps > 0) or eps == huge then
    error(("reference.layer_norm_forward: eps must be a positive finite number, got %s")
      :format(tostring(eps)), 2)
  end

  -- float64 throughout: sums and squares of any float32 row stay finite, so a finite row
  -- gets finite statistics (invstd as small as ~3e-39 for {3e38, -3e38}); a NaN gives
  -- mean, invstd and y NaN, and +-inf gives mean +-inf (NaN with both) and invstd and y
  -- NaN (inf - inf), as PyTorch (docs/semantics.md).
  local function normalize(row)
    local s = 0
    for i = 1, d do s = s + row[i] end
    local mean = s / d
    local q = 0
    for i = 1, d do
      local dev = row[i] - mean
      q = q + dev * dev
    end
    local invstd = 1 / sqrt(q / d + eps)
    local y = {}
    for i = 1, d do
      local v = (row[i] - mean) * invstd
      if weight then v = v * weight[i] end
      if bias then v = v + bias[i] end
      y[i] = v
    end
    return y, mean, invstd
  end

  -- Walks the nesting; at the level above the rows, collects per-row results.
  local function walk(t, depth)
    if depth == #shape then return normalize(t) end
    local ys, means, invstds = {}, {}, {}
    for i = 1, #t do ys[i], means[i], invstds[i] = walk(t[i], depth + 1) end
    return ys, means, invstds
  end

  if #shape == 1 then
    local y, m, r = normalize(x)
    return y, { m }, { r }
  end
  return walk(x, 1)
end

-- Checks that t is a nested table of exactly `depth` levels; returns its shape.
local function shape_of_depth(fname, what, t, depth_min, depth_max)
  if type(t) ~= "table" then
    error(("reference.%s: %s must be a nested table of numbers, got %s"):format(fname, what, type(t)), 3)
  end
  local ok, s = pcall(M.shape, t)
  if not ok then error(("reference.%s: %s: %s"):format(fname, what, s), 3) end
  if #s < depth_min or #s > depth_max then
    error(("reference.%s: %s must have %d%s dimensions, got %d")
      :format(fname, what, depth_min, depth_max > depth_min and "+" or "", #s), 3)
  end
  return s
end

-- M.matmul is with the indexing helpers below.

--- A linear layer in float64, as lumus.linear and torch.nn.functional.linear:
-- y = x W^T + b, x [..., in], weight [out, in] (nested), bias list of out numbers or nil.
function M.linear(x, weight, bias)
  local ws = shape_of_depth("linear", "weight", weight, 2, 2)
  local xs = shape_of_depth("linear", "x", x, 1, 8)
  if ws[2] ~= xs[#xs] then
    error(("reference.linear: weight must be [out, %d], got [%d, %d]"):format(xs[#xs], ws[1], ws[2]), 2)
  end
  return M.matmul(x, weight, { transpose_b = true, bias = bias })
end

--- A small deterministic random generator: the same numbers under every Lua 5.4
-- build, version (5.1, LuaJIT, 5.3, 5.4) and platform (unlike math.random, whose
-- algorithm and seeding vary). SplitMix64: output i mixes seed + i * gamma modulo 2^64
-- (compat.splitmix64, in C: 5.1 and LuaJIT have no 64-bit integers).
--   local g = ref.rng(42)
--   g() or g.uniform()   uniform in [0, 1), 53 random bits
--   g.normal()           standard normal (Box-Muller)
-- Both may also be called with `:`; the functions ignore their arguments, so
-- `g.normal` can be passed where a function of no arguments is expected.
function M.rng(seed)
  local state = seed or 1                       -- any 64-bit integer (or integral float)
  if not compat.is_integer(state) or state < -2 ^ 63 or state >= 2 ^ 63 then
    error(("reference.rng: seed must be an integer, got %s"):format(tostring(seed)), 2)
  end
  local splitmix64, count = compat.splitmix64, 0
  local function uniform()                      -- top 53 bits: exact in a double
    count = count + 1
    return splitmix64(state, count)
  end
  local function normal()
    local u1 = 1 - uniform()                    -- (0, 1]: log is finite
    local u2 = uniform()
    return sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
  end
  local gen = { uniform = uniform, normal = normal }
  return setmetatable(gen, { __call = function() return uniform() end })
end

--- v rounded to the nearest float32 (what a lumus tensor stores).
M.f32 = compat.f32

--- A nested table of the given shape (a list of sizes, or one size n for {n}),
-- filled row-major with f() rounded to float32. f may be a generator made by
-- `rng` (its normal() is used) or any function of no arguments.
--   ref.random_table({4, 8}, ref.rng(1))                       -- N(0, 1)
--   local g = ref.rng(2)
--   ref.random_table({8}, function() return 1e4 + g.normal() end)
function M.random_table(shape, f)
  if type(shape) == "number" then shape = { shape } end
  if type(f) == "table" and f.normal then f = f.normal end
  if type(f) ~= "function" then
    error("reference.random_table: a generator or a function expected", 2)
  end
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  local flat = {}
  for i = 1, n do flat[i] = M.f32(f()) end
  return M.nest(flat, shape)
end

---------------------------------------------------------------------------------------
-- Elementwise ops, softmax and sums (what lumus.add, ..., lumus.sum compute).

--- A nested table like t with f(v) for every number v (a number gives f(t)).
function M.map(t, f)
  if type(t) == "number" then return f(t) end
  local out = {}
  for i = 1, #t do out[i] = M.map(t[i], f) end
  return out
end

-- f(x, y, ...) over operands that broadcast by NumPy/PyTorch rules: numbers, or nested
-- tables whose shapes, aligned from the last dimension, have equal sizes or 1 (a
-- missing dimension counts as 1); the result has the larger size of each pair. Numbers
-- only give a number.
local function broadcast_n(name, f, ...)
  local args = compat.pack(...)
  local shapes, flats, nd = {}, {}, 0
  for k = 1, args.n do
    if type(args[k]) == "table" then
      shapes[k] = M.shape(args[k])
      flats[k] = flatten_into(args[k], {})
      if #shapes[k] > nd then nd = #shapes[k] end
    end
  end
  if nd == 0 then return f(...) end
  local out_shape = {}
  for i = 1, nd do out_shape[i] = 1 end
  local first
  for k = 1, args.n do
    local s = shapes[k]
    if s then
      for i = 1, #s do
        local j = nd - #s + i
        if s[i] ~= out_shape[j] and s[i] ~= 1 then
          if out_shape[j] ~= 1 then
            error(("reference.%s: shapes %s and %s do not match"):format(name,
              table.concat(shapes[first], "x"), table.concat(s, "x")), 3)
          end
          out_shape[j] = s[i]
        end
      end
      first = first or k
    end
  end
  -- Row-major strides of each operand over the result's shape (0 where it repeats).
  local strides = {}
  for k = 1, args.n do
    local s = shapes[k]
    if s then
      local st, step = {}, 1
      for i = nd, 1, -1 do
        local j = i - (nd - #s)
        if j >= 1 and s[j] == out_shape[i] and s[j] ~= 1 then st[i] = step else st[i] = 0 end
        if j >= 1 then step = step * s[j] end
      end
      strides[k] = st
    end
  end
  local n = 1
  for i = 1, nd do n = n * out_shape[i] end
  local out, idx, vals = {}, {}, {}
  for i = 1, nd do idx[i] = 0 end
  for e = 1, n do
    for k = 1, args.n do
      if shapes[k] then
        local off = 0
        for i = 1, nd do off = off + idx[i] * strides[k][i] end
        vals[k] = flats[k][off + 1]
      else
        vals[k] = args[k]
      end
    end
    out[e] = f(unpack(vals, 1, args.n))
    for i = nd, 1, -1 do
      idx[i] = idx[i] + 1
      if idx[i] < out_shape[i] then break end
      idx[i] = 0
    end
  end
  return M.nest(out, out_shape)
end

local function broadcast(name, a, b, f) return broadcast_n(name, f, a, b) end

-- v, or +-inf where v is beyond float32's range: values from 2^128 - 2^103 (halfway between
-- the largest float32 and 2^128) up round to infinity in float32.
local F32_OVERFLOW = 2.0^128 - 2.0^103
local function f32_range(v)
  if v >= F32_OVERFLOW then return huge end
  if v <= -F32_OVERFLOW then return -huge end
  return v
end

function M.add(a, b) return broadcast("add", a, b, function(x, y) return f32_range(x + y) end) end
function M.sub(a, b) return broadcast("sub", a, b, function(x, y) return f32_range(x - y) end) end
function M.mul(a, b) return broadcast("mul", a, b, function(x, y) return f32_range(x * y) end) end
function M.div(a, b) return broadcast("div", a, b, function(x, y) return f32_range(x / y) end) end
function M.scale(t, s) return M.map(t, function(x) return f32_range(x * s) end) end
function M.neg(t) return M.map(t, function(x) return -x end) end
-- |x|; NaN stays NaN, abs(-0) is +0.
function M.abs(t) return M.map(t, math.abs) end
-- NaN stays NaN (x < 0 is false for it).
function M.relu(t) return M.map(t, function(x) if x < 0 then return 0 end return x end) end
-- x * x and 1 / x rounded to float32's range (overflow is inf, 1 / +-0 is +-inf).
function M.square(t) return M.map(t, function(x) return f32_range(x * x) end) end
function M.reciprocal(t) return M.map(t, function(x) return f32_range(1 / x) end) end

-- An integral result r of x as a float with x's sign where it is zero (floor(-0) = -0,
-- ceil(-0.5) = -0): math.floor gives Lua integers, which have no -0. NaN and the
-- infinities come through as they are.
local function integral(r, x)
  if r ~= r or r == math.huge or r == -math.huge then return r end
  if r == 0 then return (x < 0 or 1 / x < 0) and compat.negative_zero or 0.0 end
  return r + 0.0
end
function M.floor(t) return M.map(t, function(x) return integral(math.floor(x), x) end) end
function M.ceil(t) return M.map(t, function(x) return integral(math.ceil(x), x) end) end
function M.trunc(t)
  return M.map(t, function(x) return integral(x >= 0 and math.floor(x) or math.ceil(x), x) end)
end
-- To the nearest integer, halves to the even one (torch.round, IEEE roundeven).
function M.round(t)
  return M.map(t, function(x)
    if x ~= x or x == math.huge or x == -math.huge then return x end
    local f = math.floor(x)
    local d = x - f
    local r = f
    if d > 0.5 or (d == 0.5 and f % 2 ~= 0) then r = f + 1 end
    return integral(r, x)
  end)
end
-- sin and cos of the float64 value (C's, accurate to the last bit of a double for every
-- argument); NaN and the infinities give NaN.
function M.sin(t) return M.map(t, math.sin) end
function M.cos(t) return M.map(t, math.cos) end
-- log1p in float64 without cancellation (Goldberg's form: the rounding of 1 + x divided
-- back out); expm1 is below, with exp.
local function log1p1(x)
  if x ~= x or x == math.huge then return x end
  local u = 1 + x
  if u == 1 then return x end
  if u <= 0 then return u == 0 and -math.huge or 0 / 0 end
  return math.log(u) * x / (u - 1)
end
function M.log1p(t) return M.map(t, log1p1) end
-- tan of the float64 value; log2, log10 exact at powers of their base (log2(8) = 3);
-- 2^x past float32's range inf (or 0).
function M.tan(t) return M.map(t, math.tan) end
-- atan, asin, acos (NaN outside [-1, 1]); atan2(y, x) with C's special cases (Lua 5.1
-- has math.atan2, later versions math.atan(y, x)).
local atan2_1 = math.atan2 or math.atan
function M.atan(t) return M.map(t, math.atan) end
function M.asin(t) return M.map(t, function(x) if math.abs(x) > 1 then return 0 / 0 end return math.asin(x) end) end
function M.acos(t) return M.map(t, function(x) if math.abs(x) > 1 then return 0 / 0 end return math.acos(x) end) end
function M.atan2(y, x) return broadcast("atan2", y, x, function(a, b) return atan2_1(a, b) end) end
-- sinh, cosh (inf past float32's range), asinh, acosh, atanh in float64 without
-- cancellation (log1p1 and expm1 forms).
local function sinh1(x)
  if x ~= x or x == 0 then return x end
  local ax = math.abs(x)
  local v
  if ax < 1 then local e = M.expm1(ax); v = 0.5 * (e + e / (e + 1)) else v = 0.5 * (math.exp(ax) - math.exp(-ax)) end
  v = f32_range(v)
  return x < 0 and -v or v
end
function M.sinh(t) return M.map(t, sinh1) end
function M.cosh(t) return M.map(t, function(x) return f32_range(0.5 * (math.exp(x) + math.exp(-x))) end) end
function M.asinh(t)
  return M.map(t, function(x)
    if x ~= x or x == 0 or math.abs(x) == huge then return x end
    local ax = math.abs(x)
    local v = ax < 2 ^ 26 and log1p1(ax + ax * ax / (1 + math.sqrt(1 + ax * ax))) or math.log(ax) + math.log(2)
    return x < 0 and -v or v
  end)
end
function M.acosh(t)
  return M.map(t, function(x)
    if x ~= x or x < 1 then return 0 / 0 end
    if x == huge then return x end
    if x > 2 ^ 26 then return math.log(x) + math.log(2) end
    return log1p1((x - 1) + math.sqrt((x - 1) * (x + 1)))
  end)
end
function M.atanh(t)
  return M.map(t, function(x)
    if x ~= x or math.abs(x) > 1 then return 0 / 0 end
    if x == 0 then return x end
    if math.abs(x) == 1 then return x * huge end
    local v = 0.5 * log1p1(2 * math.abs(x) / (1 - math.abs(x)))
    return x < 0 and -v or v
  end)
end
local function log_base1(x, base)
  if x ~= x or x < 0 then return 0 / 0 end
  if x == 0 then return -math.huge end
  if x == math.huge then return x end
  local r = math.log(x) / math.log(base)
  local n = math.floor(r + 0.5)
  if base ^ n == x then return n end   -- exact powers (10^n is exact up to 10^22)
  return r
end
function M.log2(t) return M.map(t, function(x) return log_base1(x, 2) end) end
function M.log10(t) return M.map(t, function(x) return log_base1(x, 10) end) end
-- -1, 0 or 1; NaN gives 0, as PyTorch's (0 < x) - (x < 0).
function M.sign(t)
  return M.map(t, function(x) if x > 0 then return 1.0 elseif x < 0 then return -1.0 end return 0.0 end)
end

local SQRT_PI = sqrt(math.pi)

--- erfc(x) = 1 - erf(x), accurate relative to itself also where it is tiny.
-- For |x| < 1.5: erf from the series 2/sqrt(pi) e^{-x^2} sum_n (2x^2)^n x / (2n+1)!!, whose
-- terms are all positive (no cancellation). For x >= 1.5: the continued fraction
-- erfc(x) = e^{-x^2}/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + ...))))),
-- evaluated from depth 200 (it has converged to double precision by depth 100 at 1.5).
function M.erfc(x)
  if x ~= x then return x end
  if x < 0 then return 2 - M.erfc(-x) end
  if x < 1.5 then return 1 - M.erf(x) end
  if x > 27 then return 0 end                  -- below the smallest double
  local f = x
  for k = 200, 1, -1 do f = x + (k / 2) / f end
  return math.exp(-x * x) / (SQRT_PI * f)
end

--- erf(x), to about 1e-15 relative (erfc likewise relative to itself).
function M.erf(x)
  if x ~= x then return x end
  if x < 0 then return -M.erf(-x) end
  if x >= 1.5 then return 1 - M.erfc(x) end
  local x2 = x * x
  local term, total = x, x
  for n = 1, 200 do
    term = term * 2 * x2 / (2 * n + 1)
    total = total + term
    if term < total * 1e-17 then break end
  end
  return 2 / SQRT_PI * math.exp(-x2) * total
end

--- gelu(x): approximate = "none" (default): x/2 (1 + erf(x / sqrt 2)), taken as
-- x/2 erfc(-x / sqrt 2) so that negative x keep relative accuracy; "tanh":
-- x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), with 1 + tanh(u) = 2 / (1 + e^{-2u})
-- (Lua has no tanh).
function M.gelu(t, approximate)
  if approximate == nil or approximate == "none" then
    return M.map(t, function(x) return 0.5 * x * M.erfc(-x / sqrt(2)) end)
  elseif approximate == "tanh" then
    local k = sqrt(2 / math.pi)
    return M.map(t, function(x)
      local u = k * (x + 0.044715 * x * x * x)
      return x / (1 + math.exp(-2 * u))
    end)
  end
  error(("reference.gelu: approximate must be \"none\" or \"tanh\", got %s"):format(tostring(approximate)), 2)
end

-- Reductions and softmax over one dimension (what lumus.sum, ..., lumus.topk compute).
-- opts.dim is 1-based, negative from the end; without it the reductions take every
-- element (result {v}, or all dimensions 1 with keepdim) and softmax the last dimension.

-- t as flat values and [outer, r, inner] about dim (nil: everything), with the result's
-- shape (dim removed, or 1 with keepdim; {1} when nothing is left).
local function dim_view(fname, t, opts, default_dim)
  opts = opts or {}
  local shape = M.shape(t)
  local flat = M.flatten(t)
  local dim = opts.dim or default_dim
  local out_shape = {}
  if dim == nil then
    for i = 1, (opts.keepdim and #shape or 1) do out_shape[i] = 1 end
    return flat, 1, #flat, 1, out_shape, shape
  end
  if dim < 0 then dim = dim + #shape + 1 end
  if dim < 1 or dim > #shape then
    error(("reference.%s: dim %s out of range for %d dimensions"):format(fname, tostring(opts.dim), #shape), 3)
  end
  local outer, inner = 1, 1
  for i = 1, dim - 1 do outer = outer * shape[i] end
  for i = dim + 1, #shape do inner = inner * shape[i] end
  for i = 1, #shape do
    if i ~= dim then out_shape[#out_shape + 1] = shape[i]
    elseif opts.keepdim then out_shape[#out_shape + 1] = 1 end
  end
  if #out_shape == 0 then out_shape[1] = 1 end
  return flat, outer, shape[dim], inner, out_shape, shape, dim
end

-- t with the elements along dim moved: element i (0-based) of each line comes from
-- element from(i, r) of the same line.
local function move_along(fname, t, dim, from)
  local flat, outer, r, inner, _, shape = dim_view(fname, t, { dim = dim })
  local out = {}
  for o = 0, outer - 1 do
    for i = 0, r - 1 do
      local src = from(i, r)
      for c = 1, inner do out[(o * r + i) * inner + c] = flat[(o * r + src) * inner + c] end
    end
  end
  return M.nest(out, shape)
end

--- flip(t, dims): the order along each of dims (a list, or one dim) reversed.
function M.flip(t, dims)
  if type(dims) == "number" then dims = { dims } end
  for _, d in ipairs(dims) do t = move_along("flip", t, d, function(i, r) return r - 1 - i end) end
  return t
end

--- roll(t, shifts, dims): element i along dims[k] from element (i - shifts[k]) mod n (a
-- number each, or lists); without dims the flattened t rolled, in t's shape.
function M.roll(t, shifts, dims)
  if dims == nil then
    local flat = M.flatten(t)
    local n = #flat
    local out = {}
    for i = 0, n - 1 do out[i + 1] = flat[(i - shifts) % n + 1] end
    return M.nest(out, M.shape(t))
  end
  if type(dims) == "number" then dims, shifts = { dims }, { shifts } end
  for k, d in ipairs(dims) do
    t = move_along("roll", t, d, function(i, r) return (i - shifts[k]) % r end)
  end
  return t
end

--- sort(t [, {dim = -1, descending = false}]): values and 1-based indices along dim,
-- stable, NaN as the largest value (topk over the whole dim).
function M.sort(t, opts)
  opts = opts or {}
  local shape = M.shape(t)
  local d = opts.dim or -1
  if d < 0 then d = d + #shape + 1 end
  return M.topk(t, shape[d], { dim = d, largest = opts.descending == true })
end

-- A nested table of `shape` whose element at the 1-based multi-index idx is f(idx).
local function build(shape, f)
  local n = 1
  for _, v in ipairs(shape) do n = n * v end
  local flat, idx = {}, {}
  for i = 1, #shape do idx[i] = 1 end
  for k = 1, n do
    flat[k] = f(idx)
    for i = #shape, 1, -1 do
      idx[i] = idx[i] + 1
      if idx[i] <= shape[i] then break end
      idx[i] = 1
    end
  end
  return M.nest(flat, shape)
end
local function at(t, idx)
  for i = 1, #idx do t = t[idx[i]] end
  return t
end

--- cumsum(t [, {dim = -1}]): running sums along dim.
function M.cumsum(t, opts)
  local flat, outer, r, inner, _, shape = dim_view("cumsum", t, { dim = (opts and opts.dim) or -1 })
  local out = {}
  for o = 0, outer - 1 do
    for c = 1, inner do
      local acc = 0
      for i = 0, r - 1 do
        local k = (o * r + i) * inner + c
        acc = acc + flat[k]
        out[k] = acc
      end
    end
  end
  return M.nest(out, shape)
end

--- pad(t, pads [, value = 0]): pads = {left, right, ...} from the last dim backwards
-- (negative: cut), the new elements value (torch.nn.functional.pad, constant mode).
function M.pad(t, pads, value)
  local shape = M.shape(t)
  local nd = #shape
  local lo, out = {}, {}
  for d = 1, nd do
    local k = nd - d + 1
    local a, b = pads[2 * k - 1] or 0, pads[2 * k] or 0
    lo[d] = a
    out[d] = shape[d] + a + b
  end
  return build(out, function(idx)
    local src = {}
    for d = 1, nd do
      src[d] = idx[d] - lo[d]
      if src[d] < 1 or src[d] > shape[d] then return value or 0 end
    end
    return at(t, src)
  end)
end

--- tile(t, reps): t repeated reps[i] times along dim i (leading dims added as torch.tile).
function M.tile(t, reps)
  local shape = M.shape(t)
  while #shape < #reps do t = { t }; table.insert(shape, 1, 1) end
  local lead = #shape - #reps
  local out = {}
  for i = 1, #shape do out[i] = shape[i] * (i > lead and reps[i - lead] or 1) end
  return build(out, function(idx)
    local src = {}
    for i = 1, #idx do src[i] = (idx[i] - 1) % shape[i] + 1 end
    return at(t, src)
  end)
end

--- outer(a, b): a[i] b[j].
function M.outer(a, b)
  return build({ #a, #b }, function(idx) return a[idx[1]] * b[idx[2]] end)
end

--- leaky_relu(t [, slope = 0.01]), elu(t [, alpha = 1]), softplus(t [, beta = 1,
-- threshold = 20]) (PyTorch's definitions).
function M.leaky_relu(t, slope)
  slope = slope or 0.01
  return M.map(t, function(x) if x < 0 then return x * slope end return x end)
end
function M.elu(t, alpha)
  alpha = alpha or 1
  return M.map(t, function(x) if x > 0 or x ~= x then return x end return alpha * M.expm1(x) end)
end
function M.softplus(t, beta, threshold)
  beta, threshold = beta or 1, threshold or 20
  return M.map(t, function(x)
    local z = beta * x
    if z > threshold or x ~= x then return x end
    return (math.max(z, 0) + log1p1(math.exp(-math.abs(z)))) / beta
  end)
end

--- hardtanh(t [, lo = -1, hi = 1]), relu6, hardsigmoid, hardswish, mish, logsigmoid
-- (PyTorch's definitions; NaN stays NaN).
local function clamp1(x, lo, hi) if x ~= x then return x end return math.min(math.max(x, lo), hi) end
function M.hardtanh(t, lo, hi) return M.map(t, function(x) return clamp1(x, lo or -1, hi or 1) end) end
function M.relu6(t) return M.map(t, function(x) return clamp1(x, 0, 6) end) end
function M.hardsigmoid(t) return M.map(t, function(x) return clamp1(x + 3, 0, 6) / 6 end) end
function M.hardswish(t) return M.map(t, function(x) return x * clamp1(x + 3, 0, 6) / 6 end) end
function M.mish(t)
  return M.map(t, function(x)
    if x ~= x then return x end
    local sp = math.max(x, 0) + log1p1(math.exp(-math.abs(x)))
    local e = M.expm1(-2 * sp)   -- tanh(sp) = -expm1(-2 sp) / (2 + expm1(-2 sp)), sp >= 0
    return x * (-e / (2 + e))
  end)
end
function M.logsigmoid(t)
  return M.map(t, function(x) return math.min(x, 0) - log1p1(math.exp(-math.abs(x))) end)
end
--- isnan, isinf, isfinite(t): booleans; nan_to_num(t [, nan = 0, posinf, neginf]) (the
-- float32 extremes by default).
function M.isnan(t) return M.map(t, function(x) return x ~= x end) end
function M.isinf(t) return M.map(t, function(x) return x == math.huge or x == -math.huge end) end
function M.isfinite(t) return M.map(t, function(x) return x == x and x ~= math.huge and x ~= -math.huge end) end
function M.nan_to_num(t, nan, posinf, neginf)
  local big = 3.4028234663852886e38
  return M.map(t, function(x)
    if x ~= x then return nan or 0 end
    if x == math.huge then return posinf or big end
    if x == -math.huge then return neginf or -big end
    return x
  end)
end
--- logaddexp(a, b): log(e^a + e^b), elementwise with broadcasting.
function M.logaddexp(a, b)
  return broadcast("logaddexp", a, b, function(x, y)
    if x ~= x or y ~= y then return 0 / 0 end
    if x == y then return x + math.log(2) end
    local m = math.max(x, y)
    return m + log1p1(math.exp(-math.abs(x - y)))
  end)
end
--- one_hot(ids (list of 1-based ids), C): rows of C zeros with a 1 at each id.
function M.one_hot(ids, c)
  local out = {}
  for i, id in ipairs(ids) do
    out[i] = {}
    for j = 1, c do out[i][j] = j == id and 1 or 0 end
  end
  return out
end

--- eye(n [, m]): the n x m matrix with ones where the row and column match.
function M.eye(n, m)
  local out = {}
  for i = 1, n do
    out[i] = {}
    for j = 1, m or n do out[i][j] = i == j and 1 or 0 end
  end
  return out
end

--- linspace(start, stop, steps): start + i (stop - start) / (steps - 1), i = 0 .. steps - 1.
function M.linspace(start, stop, steps)
  if steps == 1 then return { start } end
  local out = {}
  for i = 0, steps - 1 do out[i + 1] = start + i * (stop - start) / (steps - 1) end
  return out
end

-- f(list of the r values of a column) for every column; f returns up to two numbers,
-- collected into one or two nested tables of the result's shape.
local function reduce(fname, t, opts, f)
  local flat, outer, r, inner, out_shape = dim_view(fname, t, opts)
  local a, b = {}, {}
  for o = 0, outer - 1 do
    for c = 1, inner do
      local col = {}
      for i = 0, r - 1 do col[i + 1] = flat[(o * r + i) * inner + c] end
      a[#a + 1], b[#b + 1] = f(col)
    end
  end
  return M.nest(a, out_shape), #b > 0 and M.nest(b, out_shape) or nil
end

-- f(column) returning the column's new values, for every column, nested as t.
local function along(fname, t, opts, f)
  local flat, outer, r, inner, _, shape = dim_view(fname, t, opts, -1)
  local out = {}
  for o = 0, outer - 1 do
    for c = 1, inner do
      local col = {}
      for i = 0, r - 1 do col[i + 1] = flat[(o * r + i) * inner + c] end
      local y = f(col)
      for i = 0, r - 1 do out[(o * r + i) * inner + c] = y[i + 1] end
    end
  end
  return M.nest(out, shape)
end

local function plain_sum(row)
  local s = 0
  for i = 1, #row do s = s + row[i] end
  return s
end

--- Sum (plain float64 sum: for float32 inputs and up to 2^20 values its error is below
-- 1e-10 of sum(|x|)). NaN, or +inf with -inf, gives NaN; +-inf, or a sum beyond
-- float32's range, +-inf.
function M.sum(t, opts) return (reduce("sum", t, opts, function(row) return f32_range(plain_sum(row)) end)) end

--- Mean: the sum (as M.sum, so +-inf where it overflows float32) over the count.
function M.mean(t, opts) return (reduce("mean", t, opts, function(row) return f32_range(plain_sum(row)) / #row end)) end

--- Variance: sum((x - mean)^2) / max(0, n - correction), opts.correction 1 by default
-- (PyTorch's unbiased estimate). NaN or an infinity gives NaN; n <= correction divides
-- by 0 (NaN for a single value).
function M.var(t, opts)
  local correction = (opts and opts.correction) or 1
  return (reduce("var", t, opts, function(row)
    local m = plain_sum(row) / #row
    local s = 0
    for i = 1, #row do s = s + (row[i] - m) ^ 2 end
    local d = #row - correction
    if d < 0 then d = 0 end
    return f32_range(s / d)
  end))
end

--- std(t [, opts]): sqrt(var(t, opts)) (lumus.std).
function M.std(t, opts) return M.map(M.var(t, opts), sqrt) end

--- norm(t [, {p = 2, dim =, keepdim =}]): p = 2 the square root of the sum of squares,
-- 1 the sum of |x|, math.huge the largest |x| (lumus.norm).
function M.norm(t, opts)
  local p = (opts and opts.p) or 2
  local r = opts and { dim = opts.dim, keepdim = opts.keepdim } or nil
  if p == 1 then return M.sum(M.map(t, math.abs), r) end
  if p == math.huge then return (M.max(M.map(t, math.abs), r)) end
  return M.map(M.sum(M.map(t, function(x) return x * x end), r), sqrt)
end

--- lerp(a, b, w) = a + w (b - a); w a number or broadcasting like a and b (lumus.lerp).
function M.lerp(a, b, w)
  return broadcast_n("lerp", function(x, y, z) return f32_range(x + z * (y - x)) end, a, b, w)
end

--- masked_fill(t, mask, v): v where mask, else t (lumus.masked_fill).
function M.masked_fill(t, mask, v) return M.where(mask, v, t) end

-- The last two dimensions' elements (i, j) kept where keep(j - i), else 0.
local function triangle(t, keep)
  if type(t[1][1]) == "table" then
    local out = {}
    for i = 1, #t do out[i] = triangle(t[i], keep) end
    return out
  end
  local out = {}
  for i = 1, #t do
    out[i] = {}
    for j = 1, #t[i] do out[i][j] = keep(j - i) and t[i][j] or 0 end
  end
  return out
end
--- tril(t [, k = 0]), triu(t [, k = 0]): the lower (j - i <= k) or upper (j - i >= k)
-- triangle of the last two dimensions, zeros elsewhere (lumus.tril, lumus.triu).
function M.tril(t, k) k = k or 0; return triangle(t, function(d) return d <= k end) end
function M.triu(t, k) k = k or 0; return triangle(t, function(d) return d >= k end) end

--- any(t [, {dim =, keepdim =}]), all(...): true where some / every element is nonzero
-- (NaN counts as nonzero; booleans as themselves) (lumus.any, lumus.all).
local function nonzero01(t)
  return M.map(t, function(x) if x == true or (type(x) == "number" and x ~= 0) then return 1 end return 0 end)
end
function M.any(t, opts)
  return M.map((M.max(nonzero01(t), opts and { dim = opts.dim, keepdim = opts.keepdim })), function(v) return v == 1 end)
end
function M.all(t, opts)
  return M.map((M.min(nonzero01(t), opts and { dim = opts.dim, keepdim = opts.keepdim })), function(v) return v == 1 end)
end

-- The index of the max (better = >) or min (<) of a list: the first NaN if any (NaN
-- counts as beyond every number, as in PyTorch), else the first of equal extremes.
local function extreme_index(row, better)
  local best = 1
  for i = 1, #row do
    if row[i] ~= row[i] then return i end
    if better(row[i], row[best]) then best = i end
  end
  return best
end
local function gt(a, b) return a > b end
local function lt(a, b) return a < b end

--- max(t [, {dim =, keepdim =}]): with dim, the values and the 1-based indices along
-- dim; without, the max of all elements ({v}). NaN wins; ties go to the first index.
function M.max(t, opts)
  local v, i = reduce("max", t, opts, function(row) local k = extreme_index(row, gt) return row[k], k end)
  if opts and opts.dim then return v, i end
  return v
end
function M.min(t, opts)
  local v, i = reduce("min", t, opts, function(row) local k = extreme_index(row, lt) return row[k], k end)
  if opts and opts.dim then return v, i end
  return v
end
--- logsumexp(t [, {dim =, keepdim =}]): log(sum(exp(x))) along dim (over everything
-- without dim: {v}); all -inf gives -inf, any +inf inf, NaN NaN.
function M.logsumexp(t, opts)
  local function lse(row)
    local m = -huge
    for i = 1, #row do
      if row[i] ~= row[i] then return 0 / 0 end
      if row[i] > m then m = row[i] end
    end
    if m == huge or m == -huge then return m end
    local s = 0
    for i = 1, #row do s = s + math.exp(row[i] - m) end
    return m + math.log(s)
  end
  if not (opts and opts.dim) then return { lse(M.flatten(t)) } end
  return (reduce("logsumexp", t, opts, lse))
end
--- normalize(t [, {p = 2, dim = -1, eps = 1e-12}]): t / max(norm, eps) along dim.
function M.normalize(t, opts)
  opts = opts or {}
  local dim = opts.dim or -1
  local n = M.norm(t, { p = opts.p, dim = dim, keepdim = true })
  return M.div(t, M.map(n, function(v) return math.max(v, opts.eps or 1e-12) end))
end
--- cosine_similarity(a, b [, {dim = -1, eps = 1e-8}]): sum((a / |a|) (b / |b|)) along dim,
-- each norm at least eps.
function M.cosine_similarity(a, b, opts)
  opts = opts or {}
  local dim = opts.dim or -1
  local na = M.normalize(a, { dim = dim, eps = opts.eps or 1e-8 })
  local nb = M.normalize(b, { dim = dim, eps = opts.eps or 1e-8 })
  return M.sum(M.mul(na, nb), { dim = dim })
end

--- argmax/argmin: the 1-based indices only (over the flattened t without dim).
function M.argmax(t, opts) return (select(2, reduce("argmax", t, opts, function(row) local k = extreme_index(row, gt) return row[k], k end))) end
function M.argmin(t, opts) return (select(2, reduce("argmin", t, opts, function(row) local k = extreme_index(row, lt) return row[k], k end))) end

local function column_max(row)
  local m = -huge
  for i = 1, #row do if row[i] > m then m = row[i] end end
  return m
end

--- Softmax over opts.dim (default the last): exp(x - max) / sum(exp(x - max)). As
-- PyTorch: -inf entries give 0; a column with NaN or +inf (exp(inf - inf)), or of only
-- -inf, is all NaN.
function M.softmax(t, opts)
  return along("softmax", t, opts, function(row)
    local m = column_max(row)
    local e, s = {}, 0
    for i = 1, #row do e[i] = math.exp(row[i] - m); s = s + e[i] end
    for i = 1, #row do e[i] = e[i] / s end
    return e
  end)
end

--- log_softmax over opts.dim (default the last): (x - max) - log(sum(exp(x - max))).
-- -inf entries give -inf; a column with NaN or +inf, or of only -inf, is all NaN.
function M.log_softmax(t, opts)
  return along("log_softmax", t, opts, function(row)
    local m = column_max(row)
    local s = 0
    for i = 1, #row do s = s + math.exp(row[i] - m) end
    local ls, y = math.log(s), {}
    for i = 1, #row do y[i] = (row[i] - m) - ls end
    return y
  end)
end

--- topk(t, k [, {dim = -1, largest = true}]) -> values, indices (1-based): the k largest
-- (smallest) along dim, best first; NaN counts as the largest value; ties go to the
-- lower index.
function M.topk(t, k, opts)
  opts = opts or {}
  local largest = opts.largest ~= false
  local flat, outer, r, inner, _, shape, dim = dim_view("topk", t, opts, -1)
  if k < 1 or k > r then error(("reference.topk: k = %d out of 1..%d"):format(k, r), 2) end
  local vals, idx = {}, {}
  local kr = {}
  for i = 1, #shape do kr[i] = shape[i] end
  kr[dim] = k
  for o = 0, outer - 1 do
    for c = 1, inner do
      local col, order = {}, {}
      for i = 0, r - 1 do col[i + 1] = flat[(o * r + i) * inner + c]; order[i + 1] = i + 1 end
      table.sort(order, function(a, b)
        local x, y = col[a], col[b]
        local nx, ny = x ~= x, y ~= y
        if nx or ny then
          if nx and ny then return a < b end
          return nx == largest     -- NaN first for largest, last for smallest
        end
        if x ~= y then if largest then return x > y end return x < y end
        return a < b
      end)
      for j = 0, k - 1 do
        vals[(o * k + j) * inner + c] = col[order[j + 1]]
        idx[(o * k + j) * inner + c] = order[j + 1]
      end
    end
  end
  return M.nest(vals, kr), M.nest(idx, kr)
end

---------------------------------------------------------------------------------------
-- Random numbers and arange (what lumus.rand, randn, multinomial, uniform_, normal_ and
-- arange compute; docs/random.md defines them). These repeat the device's integer and
-- float32 steps exactly: every float32 addition and multiplication is done in float64
-- and rounded to float32 (exact for one operation on float32 operands), so rand,
-- randn, uniform_, normal_ and multinomial are reproduced bit for bit. `state` is
-- lumus.get_rng_state() taken just before the call ({seed =, offset =}).

-- The 32-bit words are Lua numbers 0..2^32-1; shifts and masks of them are written as
-- math.floor(w / 2^k) and w % 2^k (exact: every word fits in a double).
local f32, float_bits, bits_float = compat.f32, compat.float_bits, compat.bits_float

--- One Philox4x32-10 block: counter c = {c0, c1, c2, c3}, key k = {k0, k1} (32-bit
-- words); returns the 4 output words.
function M.philox4x32_10(c, k)
  return { compat.philox(c[1], c[2], c[3], c[4], k[1], k[2]) }
end

-- Words of the call `state`: word(i) is element i's (0-based), cached by block.
local function word_source(state)
  local seed, offset = state.seed, state.offset
  assert(compat.is_integer(seed) and compat.is_integer(offset),
         "reference: state must be {seed = integer, offset = integer}")
  local block, words = -1, nil
  return function(i)                  -- block i / 4: counter {block, offset}, key seed
    local b = math.floor(i / 4)
    if b ~= block then
      block = b
      words = { compat.philox_block(seed, offset, b) }
    end
    return words[i % 4 + 1]
  end
end

local function uniform_word(w, bits)
  bits = bits or 24
  return math.floor(w / 2 ^ (32 - bits)) * 2.0 ^ -bits
end
-- The bits of a uniform draw in each dtype (what it holds exactly), and its rounding.
local UNIFORM_BITS = { float32 = 24, float16 = 11, bfloat16 = 8 }
local function rounding(dtype)
  if dtype == nil or dtype == "float32" then return function(v) return v end end
  assert(UNIFORM_BITS[dtype], "reference: rand/randn make float32, float16 or bfloat16")
  return dtype == "float16" and M.round_float16 or M.round_bfloat16
end

local LOG_C = { 0x3faaaaab, 0x3f9d89d9, 0x3f924925, 0x3f888889, 0x3f800000, 0x3f70f0f1, 0x3f638e39,
                0x3f579436, 0x3f4ccccd, 0x3f430c31, 0x3f3a2e8c, 0x3f321643, 0x3f2aaaab }
local LOG_L = { 0xbe934b12, 0xbe549f6c, 0xbe08bc77, 0xbd842ccd, 0x00000000, 0x3d785185, 0x3df1383a,
                0x3e2ff983, 0x3e647fbd, 0x3e8b3ae5, 0x3ea30c5d, 0x3eb9cebf, 0x3ecf991e }
for i = 1, 13 do LOG_C[i], LOG_L[i] = bits_float(LOG_C[i]), bits_float(LOG_L[i]) end
local T3, T5, T6 = bits_float(0x3eaaaaab), bits_float(0x3e4ccccd), bits_float(0xbe2aaaab)
local LN2_HI, LN2_LO = bits_float(0x3f317180), bits_float(0x3717f7d1)
local ANGLE = bits_float(0x34c90fdb)
local S3, S5, S7, S9 = bits_float(0xbe2aaaab), bits_float(0x3c088889), bits_float(0xb9500d01), bits_float(0x3638ef1d)
local C4, C6, C8, C10 = bits_float(0x3d2aaaab), bits_float(0xbab60b61), bits_float(0x37d00d01), bits_float(0xb493f27e)

-- ln(v 2^-24), v in 1..2^24, as shaders/common/philox.glsl computes it.
local function log_u24(v)
  local bits = float_bits(v)
  local e = math.floor(bits / 2 ^ 23) - 127            -- v > 0: no sign bit
  local mant = bits % 2 ^ 23
  local m
  if mant >= 2 ^ 22 then e = e + 1; m = bits_float(mant + 126 * 2 ^ 23)
  else m = bits_float(mant + 127 * 2 ^ 23) end
  local j = math.floor((m - 1) * 16 + 0.5) + 5          -- 1-based table index
  local r = f32(f32(m * LOG_C[j]) - 1)
  local q = f32(r * T6); q = f32(T5 + q); q = f32(r * q); q = f32(-0.25 + q); q = f32(r * q)
  q = f32(T3 + q); q = f32(r * q); q = f32(-0.5 + q); q = f32(r * q); q = f32(1 + q)
  local k = e - 24
  local tail = f32(f32(k * LN2_LO) + LOG_L[j])
  return f32(f32(k * LN2_HI) + f32(tail + f32(r * q)))
end

-- (sin, cos) of 2 pi t 2^-24, t in 0..2^24-1.
local function sincos_u24(t)
  local quadrant, rem = math.floor(t / 2 ^ 22), t % 2 ^ 22
  local swap = rem > 0x200000
  if swap then rem = 0x400000 - rem end
  local a = f32(rem * ANGLE)
  local a2 = f32(a * a)
  local p = f32(a2 * S9); p = f32(S7 + p); p = f32(a2 * p); p = f32(S5 + p); p = f32(a2 * p)
  p = f32(S3 + p); p = f32(a2 * p); p = f32(a * p)
  local s = f32(a + p)
  p = f32(a2 * C10); p = f32(C8 + p); p = f32(a2 * p); p = f32(C6 + p); p = f32(a2 * p)
  p = f32(C4 + p); p = f32(a2 * p); p = f32(-0.5 + p); p = f32(a2 * p)
  local c = f32(1 + p)
  local x, y = s, c
  if swap then x, y = c, s end
  if quadrant == 1 then x, y = y, -x
  elseif quadrant == 2 then x, y = -x, -y
  elseif quadrant == 3 then x, y = -y, x end
  return x, y
end

local function sqrt_newton(s)
  if s == 0 then return 0.0 end
  local y = bits_float(0x5f3759df - math.floor(float_bits(s) / 2))
  local h = f32(0.5 * s)
  for _ = 1, 3 do
    local t = f32(f32(h * y) * y)
    y = f32(y * f32(1.5 - t))
  end
  return f32(s * y)
end

local function normal2(w0, w1)
  local radius = sqrt_newton(f32(-2 * log_u24(math.floor(w0 / 256) + 1)))
  local s, c = sincos_u24(math.floor(w1 / 256))
  return f32(radius * c), f32(radius * s)
end

local function count_of(shape)
  if type(shape) == "number" then shape = { shape } end
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  return n, shape
end

-- Element values of one call: f(word, i) per uniform element, or normals.
local function uniform_flat(n, state, scale, shift, upper, first, bits)
  local word, flat = word_source(state), {}
  first = first or 0
  for i = 0, n - 1 do
    local v = f32(f32(uniform_word(word(first + i), bits) * scale) + shift)
    flat[i + 1] = math.min(v, upper)
  end
  return flat
end

local function normal_flat(n, state, scale, shift, first)
  local word, flat = word_source(state), {}
  first = first or 0
  assert(first % 2 == 0, "reference.randn: first must be even (normals come in pairs)")
  for i = 0, n - 1, 2 do
    local z0, z1 = normal2(word(first + i), word(first + i + 1))
    flat[i + 1] = f32(f32(z0 * scale) + shift)
    if i + 1 < n then flat[i + 2] = f32(f32(z1 * scale) + shift) end
  end
  return flat
end

local ONE_BELOW = 1 - 2 ^ -24

--- lumus.rand(shape [, {dtype = dtype}]) as drawn with generator state `state`; with
-- `first`, the values of elements first, first + 1, ... (0-based) of a call that drew
-- more. dtype float32 (nil), float16 or bfloat16.
function M.rand(shape, state, first, dtype)
  local n, sh = count_of(shape)
  local flat = uniform_flat(n, state, 1, 0, ONE_BELOW, first, UNIFORM_BITS[dtype or "float32"])
  return M.nest(M.map(flat, rounding(dtype)), sh)
end

--- lumus.randn(shape [, {dtype = dtype}]) as drawn with `state` (`first`, even: as rand):
-- the float32 normals, rounded to nearest even for float16 and bfloat16.
function M.randn(shape, state, first, dtype)
  local n, sh = count_of(shape)
  return M.nest(M.map(normal_flat(n, state, 1, 0, first), rounding(dtype)), sh)
end

--- The same normals from the same words in float64 (sqrt, log, cos, sin of the C
-- library): how far the float32 steps are from Box-Muller itself.
function M.randn_float64(shape, state)
  local n, sh = count_of(shape)
  local word, flat = word_source(state), {}
  for i = 0, n - 1, 2 do
    local r = sqrt(-2 * math.log((math.floor(word(i) / 256) + 1) * 2 ^ -24))
    local a = 2 * math.pi * math.floor(word(i + 1) / 256) * 2 ^ -24
    flat[i + 1] = r * math.cos(a)
    if i + 1 < n then flat[i + 2] = r * math.sin(a) end
  end
  return M.nest(flat, sh)
end

--- t:uniform_(a, b) on a tensor of this shape: a + (b - a) u in float32, below b.
function M.uniform(shape, state, a, b)
  local n, sh = count_of(shape)
  a, b = f32(a or 0), f32(b or 1)
  local upper = a
  if a < b then   -- the float32 just below b
    local bits = float_bits(b)
    if b > 0 then upper = bits_float(bits - 1)
    elseif b == 0 then upper = -bits_float(1)
    else upper = bits_float(bits + 1) end
  end
  return M.nest(uniform_flat(n, state, f32(b - a), a, upper), sh)
end

--- t:normal_(mean, std) on a tensor of this shape.
function M.normal(shape, state, mean, std)
  local n, sh = count_of(shape)
  return M.nest(normal_flat(n, state, f32(std or 1), f32(mean or 0)), sh)
end

local PARTS = 256

-- One row's samples (1-based; all 0 for an invalid row), as random_multinomial.comp:
-- chunk sums T, group sums S (16 chunks a group), group prefixes Q, all sequential.
local function multinomial_row(w, n, replacement, word, first)
  local ncat = #w
  local size = math.floor((ncat + PARTS - 1) / PARTS)
  local nonzero, bad = 0, false
  for k = 1, ncat do
    local v = w[k]
    if not (v >= 0) or v == huge then bad = true end
    if v > 0 then nonzero = nonzero + 1 end
  end
  local T, S, Q = {}, {}, { [0] = 0.0 }
  local function chunk_sum(c)   -- c 0-based
    local t = 0.0
    for k = c * size + 1, math.min((c + 1) * size, ncat) do t = f32(t + w[k]) end
    T[c] = t
  end
  local function group_sum(g)
    local t = 0.0
    for i = 0, 15 do t = f32(t + T[g * 16 + i]) end
    S[g] = t
  end
  local function group_prefixes(from)
    local acc = Q[from]
    for g = from, 15 do acc = f32(acc + S[g]); Q[g + 1] = acc end
  end
  for c = 0, PARTS - 1 do chunk_sum(c) end
  for g = 0, 15 do group_sum(g) end
  group_prefixes(0)
  local out = {}
  if bad or not (Q[16] > 0) or Q[16] == huge or (not replacement and nonzero < n) then
    for s = 1, n do out[s] = 0 end
    return out
  end
  local function draw(u)
    local target = f32(u * Q[16])
    local g = 15
    while Q[g] > target do g = g - 1 end
    local run, c = 0.0, g * 16 + 15
    for i = 0, 15 do
      local nxt = f32(run + T[g * 16 + i])
      if f32(Q[g] + nxt) > target then c = g * 16 + i; break end
      run = nxt
    end
    local base = f32(Q[g] + run)
    local last, loc = c * size + 1, 0.0
    for k = c * size + 1, math.min((c + 1) * size, ncat) do
      loc = f32(loc + w[k])
      if w[k] > 0 then last = k end
      if f32(base + loc) > target then return k end
    end
    return last
  end
  for s = 1, n do
    local k = draw(uniform_word(word(first + s - 1)))
    out[s] = k
    if not replacement then
      w[k] = 0.0
      local c = math.floor((k - 1) / size)
      chunk_sum(c)
      group_sum(math.floor(c / 16))
      group_prefixes(math.floor(c / 16))
    end
  end
  return out
end

--- lumus.multinomial(probs, n, {replacement = replacement}) as drawn with `state`:
-- probs a list of weights or a list of rows (float32 values); 1-based samples.
function M.multinomial(probs, n, replacement, state)
  local word = word_source(state)
  local rows = type(probs[1]) == "table" and probs or { probs }
  local out = {}
  for r = 1, #rows do
    local w = {}
    for k = 1, #rows[r] do w[k] = f32(rows[r][k]) end
    out[r] = multinomial_row(w, n, replacement, word, (r - 1) * n)
  end
  if rows == probs then return out end
  return out[1]
end

--- lumus.arange(start, stop, step [, dtype]) as a flat list: integers for "int32",
-- float32 values start + i step (float64, rounded once) for "float32".
function M.arange(start, stop, step, dtype)
  step = step or 1
  local n
  if dtype == "int32" then
    local sgn = step > 0 and 1 or -1
    n = math.floor((stop - start + step - sgn) / step)
  else
    n = math.ceil((stop - start) / step)
  end
  local out = {}
  for i = 0, n - 1 do
    if dtype == "int32" then out[i + 1] = start + i * step
    else out[i + 1] = f32(start + i * step) end
  end
  return out
end

---------------------------------------------------------------------------------------
-- Elementwise math, comparisons and where (lumus.exp, ..., lumus.where), float64 with
-- PyTorch's float32 semantics for NaN, infinities and overflow (docs/semantics.md).

local exp, log = math.exp, math.log

--- expm1(x) = e^x - 1, accurate also for tiny x (Kahan's form (u - 1) x / log u); x a
-- number or a nested table, past float32's range inf. NaN stays NaN, expm1(inf) = inf.
local function expm1_1(x)
  if x ~= x then return x end
  local u = exp(x)
  if u == 1 then return x end               -- |x| below 2^-53 (and -0)
  local um = u - 1
  if um == -1 then return -1 end
  if u == huge then return huge end
  return um * x / log(u)
end
function M.expm1(t) return M.map(t, function(x) return f32_range(expm1_1(x)) end) end

local function tanh1(x)
  if x ~= x then return x end
  if x > 20 then return 1 elseif x < -20 then return -1 end
  local t = M.expm1(2 * x)
  return t / (t + 2)
end

local function sigmoid1(x)
  if x ~= x then return x end
  if x >= 0 then return 1 / (1 + exp(-x)) end
  local e = exp(x)
  return e / (1 + e)
end

local function sqrt1(x)
  if x < 0 then return 0 / 0 end            -- NaN (math.sqrt's sign of NaN varies)
  return sqrt(x)
end

local function rsqrt1(x)
  if x < 0 then return 0 / 0 end
  return 1 / sqrt(x)                         -- 1 / +-0 = +-inf, as PyTorch
end

local function log1(x)
  if x < 0 then return 0 / 0 end
  if x == 0 then return -huge end
  return log(x)
end

function M.exp(t) return M.map(t, function(x) return f32_range(exp(x)) end) end
function M.exp2(t) return M.map(t, function(x) return f32_range(2 ^ x) end) end
function M.log(t) return M.map(t, log1) end
function M.sqrt(t) return M.map(t, sqrt1) end
function M.rsqrt(t) return M.map(t, rsqrt1) end
function M.tanh(t) return M.map(t, tanh1) end
function M.sigmoid(t) return M.map(t, sigmoid1) end
--- x sigmoid(x): silu(-inf) is -inf * 0 = NaN, as PyTorch's.
function M.silu(t) return M.map(t, function(x) return x * sigmoid1(x) end) end

-- C's pow (Lua's ^): pow(x, 0) = pow(1, y) = 1 even for NaN; a negative base with a
-- non-integral exponent gives NaN.
local function pow1(x, y)
  if y == 0 or x == 1 then return 1 end
  if x ~= x or y ~= y then return 0 / 0 end
  if x < 0 and y ~= math.floor(y) and x > -huge and y > -huge and y < huge then return 0 / 0 end
  return f32_range(x ^ y)
end

-- PyTorch computes pow(t, y) for these numbers y otherwise (sqrt for 0.5: pow(-0, 0.5)
-- is -0 and pow(-inf, 0.5) NaN there).
local POW_SPECIAL = {
  [2] = function(x) return f32_range(x * x) end,
  [3] = function(x) return f32_range(x * x * x) end,
  [0.5] = sqrt1,
  [-0.5] = rsqrt1,
  [-1] = function(x) return 1 / x end,
  [-2] = function(x) return 1 / (x * x) end,
  [1] = function(x) return x end,
}

--- pow(a, b): a, b numbers or broadcasting tables; a number b in {2, 3, 0.5, -0.5, -1,
-- -2, 1} takes PyTorch's special forms, the rest C's pow.
function M.pow(a, b)
  if type(b) == "number" and type(a) == "table" then
    local special = POW_SPECIAL[b]
    if special then return M.map(a, special) end
  end
  return broadcast_n("pow", pow1, a, b)
end

local function maximum1(x, y)
  if x ~= x or y ~= y then return 0 / 0 end
  return x > y and x or y
end
local function minimum1(x, y)
  if x ~= x or y ~= y then return 0 / 0 end
  return x < y and x or y
end
--- maximum, minimum: NaN if either operand is NaN.
function M.maximum(a, b) return broadcast_n("maximum", maximum1, a, b) end
function M.minimum(a, b) return broadcast_n("minimum", minimum1, a, b) end

--- clamp(t, min, max): minimum(maximum(t, min), max); a nil bound is none.
function M.clamp(t, lo, hi)
  return M.map(t, function(x)
    if lo ~= nil then x = maximum1(x, lo) end
    if hi ~= nil then x = minimum1(x, hi) end
    return x
  end)
end

function M.eq(a, b) return broadcast_n("eq", function(x, y) return x == y end, a, b) end
function M.ne(a, b) return broadcast_n("ne", function(x, y) return x ~= y end, a, b) end
function M.lt(a, b) return broadcast_n("lt", function(x, y) return x < y end, a, b) end
function M.le(a, b) return broadcast_n("le", function(x, y) return x <= y end, a, b) end
function M.gt(a, b) return broadcast_n("gt", function(x, y) return x > y end, a, b) end
function M.ge(a, b) return broadcast_n("ge", function(x, y) return x >= y end, a, b) end

--- where(mask, a, b): a where mask is true (or a nonzero number), else b; all three
-- broadcast.
function M.where(mask, a, b)
  local function m01_of(m)
    if type(m) == "table" then
      local out = {}
      for i = 1, #m do out[i] = m01_of(m[i]) end
      return out
    end
    return (m == true or (type(m) == "number" and m ~= 0)) and 1 or 0
  end
  local m01 = m01_of(mask)
  return broadcast_n("where", function(m, x, y) if m == 1 then return x end return y end, m01, a, b)
end

-- ---- dtypes: conversions (float64 counterparts of t:to(), lumus.tensor with {dtype=}) ----
--
--   round_float32(x), round_float16(x), round_bfloat16(x)   x (any double) rounded to the
--                         nearest value of that format, ties to even; overflow gives +-inf
--                         (IEEE), subnormals kept, -0 and NaN stay
--   trunc_int32(x)        x truncated toward zero; NaN gives 0, beyond the range saturates
--                         to -2^31 / 2^31 - 1 (lumus's rule: docs/semantics.md)
--   to_dtype(v, dtype)    v (a number or boolean) as an element of dtype, as lumus stores
--                         it: numbers round through float32 first (as PyTorch and t:to do:
--                         an int32 or float32 element goes to float16 through float32);
--                         int32 truncates; bool is v ~= 0 (NaN is true); a boolean is 0/1
--   dtype_bytes(list, dtype)  the little-endian bytes of a flat list of values converted
--                         with to_dtype, as t:to_bytes() gives them (NaN: the quiet NaN a
--                         float32 NaN of that sign converts to), for bitwise comparisons

-- The exponent e with 2^e <= a < 2^(e+1), for a > 0 (exact, also for subnormal doubles).
local function exponent_of(a)
  local e = math.floor(math.log(a) / math.log(2))   -- within one of the answer
  while 2.0 ^ e > a do e = e - 1 end
  while 2.0 ^ (e + 1) <= a do e = e + 1 end
  return e
end

-- x rounded to a binary format with `frac` fraction bits and normal exponents emin..emax.
local function round_format(x, frac, emin, emax)
  if x ~= x or x == 0 or x == huge or x == -huge then return x end
  local a = math.abs(x)
  local e = exponent_of(a)
  if e > emax then return x < 0 and -huge or huge end
  if e < emin then e = emin end                 -- subnormal: the least normal's spacing
  local ulp = 2.0 ^ (e - frac)
  local q = a / ulp                             -- exact: a power-of-two scaling
  local r = math.floor(q)
  local rest = q - r
  if rest > 0.5 or (rest == 0.5 and r % 2 == 1) then r = r + 1 end
  local v = r * ulp
  if v >= 2.0 ^ (emax + 1) then v = huge end
  if x < 0 or (x == 0 and 1 / x < 0) then v = -v end
  return v
end

function M.round_float32(x) return round_format(x, 23, -126, 127) end
function M.round_float16(x) return round_format(x, 10, -14, 15) end
function M.round_bfloat16(x) return round_format(x, 7, -126, 127) end

function M.trunc_int32(x)
  if x ~= x then return 0 end
  if x >= 2147483647 then return 2147483647 end
  if x <= -2147483648 then return -2147483648 end
  local t = x < 0 and math.ceil(x) or math.floor(x)
  return compat.integer(t)
end

local DTYPES = { float32 = true, float16 = true, bfloat16 = true, int32 = true, bool = true }

function M.to_dtype(v, dtype)
  if not DTYPES[dtype] then error("reference.to_dtype: unknown dtype " .. tostring(dtype), 2) end
  if type(v) == "boolean" then
    if dtype == "bool" then return v end
    v = v and 1 or 0
  elseif type(v) ~= "number" then
    error("reference.to_dtype: a number or boolean expected, got " .. type(v), 2)
  end
  if dtype == "bool" then return v ~= 0 end
  if dtype == "int32" then return M.trunc_int32(v) end
  local f = M.round_float32(v)
  if dtype == "float16" then return M.round_float16(f) end
  if dtype == "bfloat16" then return M.round_bfloat16(f) end
  return f
end

-- The bits of a value already in a format with `frac` fraction bits, `ebits` exponent bits.
-- (Sign, exponent and fraction fields are disjoint bits: their sum is their bitwise or.)
local function format_bits(v, frac, ebits)
  local bias = 2 ^ (ebits - 1) - 1
  local sign = (v < 0 or (v == 0 and 1 / v < 0)) and 2 ^ (frac + ebits) or 0
  local a = math.abs(v)
  if a == huge then return sign + (2 ^ ebits - 1) * 2 ^ frac end
  if a == 0 then return sign end
  local e = exponent_of(a)
  if e < 1 - bias then                          -- subnormal
    return sign + a / 2.0 ^ (1 - bias - frac)
  end
  local m = a / 2.0 ^ (e - frac) - 2 ^ frac
  return sign + (e + bias) * 2 ^ frac + m
end

function M.dtype_bytes(list, dtype)
  local out = {}
  for i = 1, #list do
    local x = list[i]
    local v = M.to_dtype(x, dtype)
    local s
    if dtype == "bool" then
      s = string.char(v and 1 or 0)
    elseif dtype == "int32" then
      s = compat.pack_bytes("i32", { v })
    elseif v ~= v then
      local bits = float_bits(x)                -- the float32 NaN's sign and payload
      local sign = bits >= 2 ^ 31 and 1 or 0
      if dtype == "float32" then s = compat.pack_bytes("u32", { bits })
      elseif dtype == "float16" then   -- sign, quiet NaN, the payload's top 10 bits
        s = compat.pack_bytes("u16", { sign * 0x8000 + 0x7e00 + math.floor(bits / 2 ^ 13) % 2 ^ 9 })
      else                             -- the top 16 bits, quiet bit (0x40) set
        local top = math.floor(bits / 2 ^ 16)
        if math.floor(top / 0x40) % 2 == 0 then top = top + 0x40 end
        s = compat.pack_bytes("u16", { top })
      end
    elseif dtype == "float32" then
      s = compat.pack_bytes("f32", { v })
    elseif dtype == "float16" then
      s = compat.pack_bytes("u16", { format_bits(v, 10, 5) })
    else
      s = compat.pack_bytes("u16", { format_bits(v, 7, 8) })
    end
    out[i] = s
  end
  return table.concat(out)
end

-- ---- Indexing (lumus.index_select, embedding, gather, cat, stack, split, chunk) ----
-- Ids are 1-based positions (lumus's rule; a 0-based token id needs + 1). An id outside
-- 1..size gives 0, as lumus's kernels do. Dimensions are 1-based, negative from the end.

local function row_major_strides(shape)
  local st, s = {}, 1
  for i = #shape, 1, -1 do st[i] = s; s = s * shape[i] end
  return st, s
end

-- Calls f(coords) for every coordinate list of shape, in row-major order.
local function each_coord(shape, f)
  local c = {}
  for i = 1, #shape do c[i] = 1 end
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  for _ = 1, n do
    f(c)
    for i = #shape, 1, -1 do
      c[i] = c[i] + 1
      if c[i] <= shape[i] then break end
      c[i] = 1
    end
  end
end

local function flat_at(flat, strides, coords)
  local o = 1
  for i = 1, #coords do o = o + (coords[i] - 1) * strides[i] end
  return flat[o]
end

local function norm_dim(fname, dim, ndim, extra)
  dim = dim or 1
  local top = ndim + (extra or 0)
  if dim < 0 then dim = dim + top + 1 end
  if dim < 1 or dim > top then error(("reference.%s: dimension out of range"):format(fname), 3) end
  return dim
end

--- x's slices ids[1], ids[2], ... along dim (a list of ids).
function M.index_select(x, dim, ids)
  local xs = M.shape(x)
  dim = norm_dim("index_select", dim, #xs)
  ids = type(ids[1]) == "table" and M.flatten(ids) or ids
  local fx, st = M.flatten(x), row_major_strides(xs)
  local shape = {}
  for i = 1, #xs do shape[i] = xs[i] end
  shape[dim] = #ids
  local out, src = {}, {}
  each_coord(shape, function(c)
    local id = ids[c[dim]]
    if id < 1 or id > xs[dim] then out[#out + 1] = 0; return end
    for i = 1, #c do src[i] = c[i] end
    src[dim] = id
    out[#out + 1] = flat_at(fx, st, src)
  end)
  return M.nest(out, shape)
end

--- Rows of weight [V][D] for ids (a nested table or list): ids' shape .. {D}.
function M.embedding(ids, weight)
  local is = type(ids[1]) == "table" and M.shape(ids) or { #ids }
  local fi = type(ids[1]) == "table" and M.flatten(ids) or ids
  local ws = M.shape(weight)
  local out = {}
  for _, id in ipairs(fi) do
    local row = weight[id]
    for j = 1, ws[2] do out[#out + 1] = (id >= 1 and id <= ws[1]) and row[j] or 0 end
  end
  local shape = {}
  for i = 1, #is do shape[i] = is[i] end
  shape[#shape + 1] = ws[2]
  return M.nest(out, shape)
end

--- torch.gather: out[c] = x[c with c[dim] = ids[c]]; ids has x's dimension count.
function M.gather(x, dim, ids)
  local xs, is = M.shape(x), M.shape(ids)
  dim = norm_dim("gather", dim, #xs)
  local fx, st, fi = M.flatten(x), row_major_strides(xs), M.flatten(ids)
  local out, src = {}, {}
  each_coord(is, function(c)
    local id = fi[#out + 1]
    if id < 1 or id > xs[dim] then out[#out + 1] = 0; return end
    for i = 1, #c do src[i] = c[i] end
    src[dim] = id
    out[#out + 1] = flat_at(fx, st, src)
  end)
  return M.nest(out, is)
end

--- The nested tables of a list joined along dim (sizes equal elsewhere).
function M.cat(list, dim)
  local s1 = M.shape(list[1])
  dim = norm_dim("cat", dim, #s1)
  local shape, parts, offs = {}, {}, {}
  for i = 1, #s1 do shape[i] = s1[i] end
  shape[dim] = 0
  for k, t in ipairs(list) do
    local s = M.shape(t)
    offs[k] = shape[dim]
    shape[dim] = shape[dim] + s[dim]
    parts[k] = { flat = M.flatten(t), st = row_major_strides(s), size = s[dim] }
  end
  local out, src = {}, {}
  each_coord(shape, function(c)
    local k = #parts
    while offs[k] >= c[dim] do k = k - 1 end
    for i = 1, #c do src[i] = c[i] end
    src[dim] = c[dim] - offs[k]
    out[#out + 1] = flat_at(parts[k].flat, parts[k].st, src)
  end)
  return M.nest(out, shape)
end

--- The nested tables of a list (equal shapes) stacked along a new dimension dim.
function M.stack(list, dim)
  local s1 = M.shape(list[1])
  dim = norm_dim("stack", dim, #s1, 1)
  local shape, parts = {}, {}
  for i = 1, #s1 do shape[#shape + 1] = s1[i] end
  table.insert(shape, dim, #list)
  for k, t in ipairs(list) do parts[k] = M.flatten(t) end
  local st = row_major_strides(s1)
  local out, src = {}, {}
  each_coord(shape, function(c)
    local j = 0
    for i = 1, #c do if i ~= dim then j = j + 1; src[j] = c[i] end end
    out[#out + 1] = flat_at(parts[c[dim]], st, src)
  end)
  return M.nest(out, shape)
end

--- Pieces of t along dim: of `size` each (the last smaller), or of the listed sizes.
function M.split(t, size, dim)
  local s = M.shape(t)
  dim = norm_dim("split", dim, #s)
  local sizes = {}
  if type(size) == "table" then
    sizes = size
  else
    local left = s[dim]
    while left > 0 do sizes[#sizes + 1] = math.min(size, left); left = left - size end
  end
  local pieces, start = {}, 1
  for k, n in ipairs(sizes) do
    local ids = {}
    for i = 1, n do ids[i] = start + i - 1 end
    pieces[k] = M.index_select(t, dim, ids)
    start = start + n
  end
  return pieces
end

--- n pieces of ceil(size / n) along dim (fewer when they run out), as torch.chunk.
function M.chunk(t, n, dim)
  local s = M.shape(t)
  dim = norm_dim("chunk", dim, #s)
  return M.split(t, n >= s[dim] and 1 or math.floor((s[dim] + n - 1) / n), dim)
end

--- Matrix product in float64, shaped like lumus.matmul (torch.matmul's rules):
--   a [..., M, K] x b [..., K, N] -> [batch..., M, N], the batch dimensions broadcast
--   (aligned at the right, size 1 repeats); a 1-D a is a row [K] (its M dimension is
--   dropped from the result), a 1-D b a column [K] (N dropped); two 1-D give {1}.
-- opts (optional): transpose_a / transpose_b = true read a as [..., K, M] / b as
-- [..., N, K]; bias = list of N numbers added to every row. Sums run in float64 in k order.
function M.matmul(a, b, opts)
  opts = opts or {}
  local as = shape_of_depth("matmul", "a", a, 1, 8)
  local bs = shape_of_depth("matmul", "b", b, 1, 8)
  local function operand(s, trans, is_a)
    local st = row_major_strides(s)
    local nd = #s
    if nd == 1 then
      if trans then error("reference.matmul: transposing a 1-D operand", 4) end
      if is_a then return { rows = 1, cols = s[1], sr = 0, sc = 1, batch = {}, bst = {} } end
      return { rows = s[1], cols = 1, sr = 1, sc = 0, batch = {}, bst = {} }
    end
    local o = { batch = {}, bst = {} }
    for i = 1, nd - 2 do o.batch[i] = s[i]; o.bst[i] = st[i] end
    if trans then
      o.rows, o.cols, o.sr, o.sc = s[nd], s[nd - 1], st[nd], st[nd - 1]
    else
      o.rows, o.cols, o.sr, o.sc = s[nd - 1], s[nd], st[nd - 1], st[nd]
    end
    return o
  end
  local oa = operand(as, opts.transpose_a, true)
  local ob = operand(bs, opts.transpose_b, false)
  local k, m, n = oa.cols, oa.rows, ob.cols
  if ob.rows ~= k then
    error(("reference.matmul: b's K (%d) differs from a's (%d)"):format(ob.rows, k), 2)
  end
  local nb = math.max(#oa.batch, #ob.batch)
  local bshape, sa, sb = {}, {}, {}
  for i = 1, nb do
    local ia, ib = i - (nb - #oa.batch), i - (nb - #ob.batch)
    local za, zb = ia >= 1 and oa.batch[ia] or 1, ib >= 1 and ob.batch[ib] or 1
    if za ~= zb and za ~= 1 and zb ~= 1 then error("reference.matmul: batch dimensions do not broadcast", 2) end
    bshape[i] = math.max(za, zb)
    sa[i] = za == 1 and 0 or oa.bst[ia]
    sb[i] = zb == 1 and 0 or ob.bst[ib]
  end
  local bias = opts.bias
  if bias ~= nil then
    local s = shape_of_depth("matmul", "bias", bias, 1, 1)
    if s[1] ~= n then error(("reference.matmul: bias must have %d numbers, got %d"):format(n, s[1]), 2) end
  end
  local fa, fb, out = M.flatten(a), M.flatten(b), {}
  local function product(c)
    local a0, b0 = 1, 1
    for i = 1, nb do a0 = a0 + (c[i] - 1) * sa[i]; b0 = b0 + (c[i] - 1) * sb[i] end
    for i = 0, m - 1 do
      for j = 0, n - 1 do
        local s = 0
        for q = 0, k - 1 do s = s + fa[a0 + i * oa.sr + q * oa.sc] * fb[b0 + q * ob.sr + j * ob.sc] end
        if bias then s = s + bias[j + 1] end
        out[#out + 1] = s
      end
    end
  end
  if nb == 0 then product({}) else each_coord(bshape, product) end
  local shape = {}
  for i = 1, nb do shape[i] = bshape[i] end
  if #as > 1 then shape[#shape + 1] = m end
  if #bs > 1 then shape[#shape + 1] = n end
  if #shape == 0 then shape[1] = 1 end
  return M.nest(out, shape)
end

-- LayerNorm backward --------------------------------------------------------------

--- Gradients of layer_norm_forward over the last dimension, float64, from the saved
-- statistics (as lumus.layer_norm_backward takes them):
--   dy, x   nested tables of the same shape (innermost tables are rows of D numbers;
--           a flat list is one row)
--   mean, invstd  per row, nested like x without its last level ({m} for a flat x)
--   weight  flat list of D numbers, or nil (dx only)
-- With xhat = (x - mean) * invstd and g = dy * weight:
--   dx = invstd * (g - mean(g) - xhat * mean(g * xhat))   per row
--   dweight = sum over rows of dy * xhat, dbias = sum over rows of dy
-- Returns dx (nested like x), and dweight, dbias (flat lists) when weight is given.
-- NaN or inf anywhere in a row makes that row's dx NaN (its means are NaN), as PyTorch.
function M.layer_norm_backward(dy, x, mean, invstd, weight)
  local shape = M.shape(x)
  local dshape = M.shape(dy)
  if table.concat(shape, "x") ~= table.concat(dshape, "x") then
    error(("reference.layer_norm_backward: dy has shape %s, x %s"):format(
      table.concat(dshape, "x"), table.concat(shape, "x")), 2)
  end
  local d = shape[#shape]
  if weight ~= nil and (type(weight) ~= "table" or #weight ~= d) then
    error(("reference.layer_norm_backward: weight must be a list of %d numbers or nil"):format(d), 2)
  end
  local fx, fdy = M.flatten(x), M.flatten(dy)
  local fm, fr = M.flatten(mean), M.flatten(invstd)
  local rows = math.floor(#fx / d)
  if #fm ~= rows or #fr ~= rows then
    error(("reference.layer_norm_backward: mean and invstd must have %d values (one per row)"):format(rows), 2)
  end
  local dx, dw, db = {}, {}, {}
  for j = 1, d do dw[j], db[j] = 0, 0 end
  for r = 0, rows - 1 do
    local m, rs = fm[r + 1], fr[r + 1]
    local xh, g = {}, {}
    local sg, sgx = 0, 0
    for j = 1, d do
      local i = r * d + j
      xh[j] = (fx[i] - m) * rs
      g[j] = fdy[i] * (weight and weight[j] or 1)
      sg = sg + g[j]
      sgx = sgx + g[j] * xh[j]
      dw[j] = dw[j] + fdy[i] * xh[j]
      db[j] = db[j] + fdy[i]
    end
    sg, sgx = sg / d, sgx / d
    for j = 1, d do dx[r * d + j] = rs * (g[j] - sg - xh[j] * sgx) end
  end
  dx = #shape == 1 and dx or M.nest(dx, shape)
  if weight then return dx, dw, db end
  return dx
end

---------------------------------------------------------------------------------------
-- Optimizer steps (torch.optim semantics) in float64, on flat tables, in place: the
-- references of lumus.sgd_step_ / lumus.adam_step_ and of lumus.optim's optimizers.
-- `state` is a table the function keeps its buffers in (empty before the first step).

--- One SGD step: param, grad flat tables; opts {lr, momentum, dampening, nesterov,
-- weight_decay}. state.momentum_buffer is created on the first step with momentum.
function M.sgd_step(param, grad, state, opts)
  local lr, mom = opts.lr or 1e-3, opts.momentum or 0
  local damp, wd = opts.dampening or 0, opts.weight_decay or 0
  local buf = state.momentum_buffer
  local first = buf == nil
  if mom ~= 0 and first then buf = {}; state.momentum_buffer = buf end
  for i = 1, #param do
    local g = grad[i]
    if wd ~= 0 then g = g + wd * param[i] end
    if mom ~= 0 then
      if first then buf[i] = g else buf[i] = mom * buf[i] + (1 - damp) * g end
      if opts.nesterov then g = g + mom * buf[i] else g = buf[i] end
    end
    param[i] = param[i] - lr * g
  end
  return param
end

--- One Adam (opts.decoupled: AdamW) step: opts {lr, betas = {b1, b2}, eps,
-- weight_decay, amsgrad}. state.step counts steps; exp_avg, exp_avg_sq (and
-- max_exp_avg_sq) start at zeros.
function M.adam_step(param, grad, state, opts)
  local lr, eps, wd = opts.lr or 1e-3, opts.eps or 1e-8, opts.weight_decay or 0
  local b1, b2 = (opts.betas or {})[1] or 0.9, (opts.betas or {})[2] or 0.999
  local n = #param
  if not state.step then
    state.step, state.exp_avg, state.exp_avg_sq = 0, {}, {}
    for i = 1, n do state.exp_avg[i], state.exp_avg_sq[i] = 0, 0 end
    if opts.amsgrad then
      state.max_exp_avg_sq = {}
      for i = 1, n do state.max_exp_avg_sq[i] = 0 end
    end
  end
  state.step = state.step + 1
  local m, v, vmax = state.exp_avg, state.exp_avg_sq, state.max_exp_avg_sq
  local bc1 = 1 - b1 ^ state.step
  local bc2 = 1 - b2 ^ state.step
  for i = 1, n do
    local g = grad[i]
    if opts.decoupled then param[i] = param[i] * (1 - lr * wd)
    elseif wd ~= 0 then g = g + wd * param[i] end
    m[i] = m[i] + (1 - b1) * (g - m[i])
    v[i] = b2 * v[i] + (1 - b2) * g * g
    local d = v[i]
    if vmax then vmax[i] = math.max(vmax[i], v[i]); d = vmax[i] end
    param[i] = param[i] - (lr / bc1) * m[i] / (math.sqrt(d) / math.sqrt(bc2) + eps)
  end
  return param
end

--- AdamW: adam_step with decoupled weight decay (weight_decay defaults to 1e-2).
function M.adamw_step(param, grad, state, opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.decoupled = true
  if o.weight_decay == nil then o.weight_decay = 1e-2 end
  return M.adam_step(param, grad, state, o)
end

-- t with src's slice j (along dim) combined into slice ids[j] by combine(old, new)
-- (ids 1-based, flat or nested; ids outside 1..size touch nothing). Shared by index_add
-- and index_copy.
local function index_slices(fname, t, dim, ids, src, combine)
  local ts = M.shape(t)
  dim = norm_dim(fname, dim, #ts)
  ids = type(ids[1]) == "table" and M.flatten(ids) or ids
  local ft, st = M.flatten(t), row_major_strides(ts)
  local fs = M.flatten(src)
  local pos, c2 = 0, {}
  each_coord(M.shape(src), function(c)
    pos = pos + 1
    local id = ids[c[dim]]
    if id < 1 or id > ts[dim] then return end
    for i = 1, #c do c2[i] = c[i] end
    c2[dim] = id
    local k = 1
    for i = 1, #c2 do k = k + (c2[i] - 1) * st[i] end
    ft[k] = combine(ft[k], fs[pos])
  end)
  return M.nest(ft, ts)
end

--- index_add(t, dim, ids, src): t with src's slice j (along dim) added into slice ids[j]
-- (a list of 1-based ids; ids outside 1..size add nothing).
function M.index_add(t, dim, ids, src)
  return index_slices("index_add", t, dim, ids, src, function(a, b) return a + b end)
end

--- scatter_add(t, dim, ids, src): torch.scatter_add: t with src[c] added at c with c[dim]
-- = ids[c] (ids nested like src; ids outside 1..size add nothing).
function M.scatter_add(t, dim, ids, src)
  local ts = M.shape(t)
  dim = norm_dim("scatter_add", dim, #ts)
  local ft, st = M.flatten(t), row_major_strides(ts)
  local fi, fs = M.flatten(ids), M.flatten(src)
  local pos = 0
  each_coord(M.shape(src), function(c)
    pos = pos + 1
    local id = fi[pos]
    if id < 1 or id > ts[dim] then return end
    local k = 1
    for i = 1, #c do k = k + ((i == dim and id or c[i]) - 1) * st[i] end
    ft[k] = ft[k] + fs[pos]
  end)
  return M.nest(ft, ts)
end

local function reduce_loss(fname, values, count, reduction)
  reduction = reduction or "mean"
  if reduction == "none" then return values end
  local s = 0
  for i = 1, #values do s = s + values[i] end
  if reduction == "sum" then return { s } end
  if reduction == "mean" then return { s / count } end
  error(("reference.%s: reduction must be \"mean\", \"sum\" or \"none\""):format(fname), 3)
end

--- cross_entropy(logits [N][C], target (list of N 1-based class ids) [, {reduction =
-- "mean", ignore_index = -100}]): per row logsumexp(x) - x[t]; a row whose target is
-- ignore_index gives 0 and does not count toward the mean; a target outside 1..C gives
-- NaN (lumus.cross_entropy's rule). Returns {loss} (mean, sum) or the N losses (none).
function M.cross_entropy(logits, target, opts)
  opts = opts or {}
  local ignore = opts.ignore_index or -100
  local losses, count = {}, 0
  for i, row in ipairs(logits) do
    local t = target[i]
    if t == ignore then
      losses[i] = 0
    else
      count = count + 1
      local m = -huge
      for j = 1, #row do if row[j] > m or row[j] ~= row[j] then m = row[j] end end
      local s = 0
      for j = 1, #row do s = s + math.exp(row[j] - m) end
      local lse = m + math.log(s)
      losses[i] = (t >= 1 and t <= #row) and lse - row[t] or 0 / 0
    end
  end
  return reduce_loss("cross_entropy", losses, count, opts.reduction)
end

--- mse_loss(input, target [, {reduction = "mean"}]): (input - target)^2, same shapes;
-- "none" keeps input's shape.
function M.mse_loss(input, target, opts)
  opts = opts or {}
  local fx, ft = M.flatten(input), M.flatten(target)
  local sq = {}
  for i = 1, #fx do sq[i] = (fx[i] - ft[i]) ^ 2 end
  local r = reduce_loss("mse_loss", sq, #sq, opts.reduction)
  if (opts.reduction or "mean") == "none" then return M.nest(sq, M.shape(input)) end
  return r
end

--- l1_loss, smooth_l1_loss (opts.beta, 1), huber_loss (opts.delta, 1): functions of
-- d = |input - target| reduced as mse_loss.
local function elementwise_loss(name, f)
  return function(input, target, opts)
    opts = opts or {}
    local fx, ft = M.flatten(input), M.flatten(target)
    local out = {}
    for i = 1, #fx do out[i] = f(math.abs(fx[i] - ft[i]), opts) end
    if (opts.reduction or "mean") == "none" then return M.nest(out, M.shape(input)) end
    return reduce_loss(name, out, #out, opts.reduction)
  end
end
M.l1_loss = elementwise_loss("l1_loss", function(d) return d end)
M.smooth_l1_loss = elementwise_loss("smooth_l1_loss", function(d, o)
  local beta = o.beta or 1
  if d < beta then return 0.5 * d * d / beta end
  return d - 0.5 * beta
end)
M.huber_loss = elementwise_loss("huber_loss", function(d, o)
  local delta = o.delta or 1
  if d < delta then return 0.5 * d * d end
  return delta * (d - 0.5 * delta)
end)

--- nll_loss(log_probs [N][C], target (N 1-based ids) [, {reduction =, ignore_index = -100}]):
-- -log_probs[i][t_i]; ignored rows give 0 and do not count toward the mean, targets
-- outside 1..C give NaN (cross_entropy's rules).
function M.nll_loss(log_probs, target, opts)
  opts = opts or {}
  local ignore = opts.ignore_index or -100
  local losses, count = {}, 0
  for i, row in ipairs(log_probs) do
    local t = target[i]
    if t == ignore then
      losses[i] = 0
    else
      count = count + 1
      losses[i] = (t >= 1 and t <= #row) and -row[t] or 0 / 0
    end
  end
  return reduce_loss("nll_loss", losses, count, opts.reduction)
end

local function log1p(u)   -- accurate for small u
  local w = 1 + u
  if w == 1 then return u end
  return math.log(w) * u / (w - 1)
end

--- binary_cross_entropy(p, target [, {reduction = "mean", weight =}]): -(t log p + (1 - t)
-- log(1 - p)), each log at least -100 (PyTorch's clamp); weight a list of p's shape.
function M.binary_cross_entropy(input, target, opts)
  opts = opts or {}
  local fx, ft = M.flatten(input), M.flatten(target)
  local fw = opts.weight and M.flatten(opts.weight)
  local out = {}
  for i = 1, #fx do
    local lp = fx[i] > 0 and math.max(math.log(fx[i]), -100) or -100
    local lq = fx[i] < 1 and math.max(log1p(-fx[i]), -100) or -100
    out[i] = -(ft[i] * lp + (1 - ft[i]) * lq) * (fw and fw[i] or 1)
  end
  if (opts.reduction or "mean") == "none" then return M.nest(out, M.shape(input)) end
  return reduce_loss("binary_cross_entropy", out, #out, opts.reduction)
end

--- kl_div(input (log-probabilities), target [, {reduction = "mean", log_target = false}]):
-- target (log target - input), 0 where target = 0; log_target: exp(target) (target -
-- input). "batchmean" divides the sum by the first dimension's size.
function M.kl_div(input, target, opts)
  opts = opts or {}
  local fx, ft = M.flatten(input), M.flatten(target)
  local out = {}
  for i = 1, #fx do
    if opts.log_target then out[i] = math.exp(ft[i]) * (ft[i] - fx[i])
    elseif ft[i] == 0 then out[i] = 0
    else out[i] = ft[i] * (math.log(ft[i]) - fx[i]) end
  end
  local red = opts.reduction or "mean"
  if red == "none" then return M.nest(out, M.shape(input)) end
  if red == "batchmean" then
    local s = 0
    for i = 1, #out do s = s + out[i] end
    return { s / #input }
  end
  return reduce_loss("kl_div", out, #out, red)
end

--- binary_cross_entropy_with_logits(input, target [, {reduction = "mean", pos_weight =}]):
-- (1 - t) x + l (log1p(exp(-|x|)) + max(-x, 0)), l = 1 + (pos_weight - 1) t; pos_weight a
-- list broadcast over the last dimension (PyTorch's formula, stable for any x).
function M.binary_cross_entropy_with_logits(input, target, opts)
  opts = opts or {}
  local shape = M.shape(input)
  local fx, ft = M.flatten(input), M.flatten(target)
  local pw = opts.pos_weight
  local last = shape[#shape]
  local out = {}
  for i = 1, #fx do
    local x, t = fx[i], ft[i]
    local lp = log1p(math.exp(-math.abs(x)))
    out[i] = math.max(x, 0) - x * t + lp   -- = (1 - t) x + softplus(-x), without cancellation
    if pw then out[i] = out[i] + (pw[(i - 1) % last + 1] - 1) * t * (lp + math.max(-x, 0)) end
  end
  if (opts.reduction or "mean") == "none" then return M.nest(out, shape) end
  return reduce_loss("binary_cross_entropy_with_logits", out, #out, opts.reduction)
end

--- Transformer ops, float64 (appended with lumus.rms_norm, lumus.rope and
-- lumus.scaled_dot_product_attention):
--   rms_norm(x, weight, eps)          x / sqrt(mean(x^2) + eps) * weight over the last dimension
--                                     (weight a list or nil, eps 1e-6 by default)
--   rope(x, opts)                     rotary embedding of x [..., T, hd]: {base = 10000,
--                                     offset = 0, interleaved = false}
--   scaled_dot_product_attention(q, k, v, opts)
--                                     q [B][H][Tq][hd], k, v [B or 1][H or 1][Tk][hd];
--                                     {causal =, mask =, scale =}: the causal mask aligned
--                                     bottom-right (query i sees keys j <= i + Tk - Tq), mask
--                                     booleans (false: not attended) or numbers (added), of a
--                                     shape broadcasting to [B][H][Tq][Tk]; a row with every key
--                                     masked gives 0 (PyTorch's SDPA since 2.5)

-- Applies f to each last-dimension row of nested table t (depth >= 1), returning the
-- nested result; f(row, index_path) returns the new row.
local function map_rows(t, f, path)
  path = path or {}
  if type(t[1]) ~= "table" then return f(t, path) end
  local out = {}
  for i = 1, #t do
    path[#path + 1] = i
    out[i] = map_rows(t[i], f, path)
    path[#path] = nil
  end
  return out
end

function M.rms_norm(x, weight, eps)
  eps = eps or 1e-6
  local shape = M.shape(x)
  local d = shape[#shape]
  if weight ~= nil and #weight ~= d then
    error(("reference.rms_norm: weight must be a list of %d numbers or nil"):format(d), 2)
  end
  return map_rows(x, function(row)
    local ss = 0
    for j = 1, d do ss = ss + row[j] * row[j] end
    local r = 1 / sqrt(ss / d + eps)
    local y = {}
    for j = 1, d do y[j] = row[j] * r * (weight and weight[j] or 1) end
    return y
  end)
end

function M.rope(x, opts)
  opts = opts or {}
  local base, offset, interleaved = opts.base or 10000, opts.offset or 0, opts.interleaved or false
  local shape = M.shape(x)
  if #shape < 2 then error("reference.rope: x must be at least 2-D ([..., T, hd])", 2) end
  local d = shape[#shape]
  if d % 2 ~= 0 then error("reference.rope: hd must be even", 2) end
  local half = math.floor(d / 2)
  return map_rows(x, function(row, path)
    local pos = offset + path[#path] - 1
    local y = {}
    for j = 0, half - 1 do
      local a = pos * base ^ (-2 * j / d)
      local c, s = math.cos(a), math.sin(a)
      local ia, ib = j + 1, j + half + 1
      if interleaved then ia, ib = 2 * j + 1, 2 * j + 2 end
      y[ia] = row[ia] * c - row[ib] * s
      y[ib] = row[ia] * s + row[ib] * c
    end
    return y
  end)
end

-- mask[b][h][i][j] of a mask broadcasting to [B][H][Tq][Tk] (right-aligned, size 1 repeats).
local function mask_at(mask, mshape, idx)
  local v = mask
  for a = 1, #mshape do
    local i = idx[4 - #mshape + a]
    v = v[mshape[a] == 1 and 1 or i]
  end
  return v
end

function M.scaled_dot_product_attention(q, k, v, opts)
  opts = opts or {}
  local qs, ks, vs = M.shape(q), M.shape(k), M.shape(v)
  if #qs ~= 4 or #ks ~= 4 or #vs ~= 4 then
    error("reference.scaled_dot_product_attention: q, k and v must be 4-D", 2)
  end
  local B, H, Tq, D = qs[1], qs[2], qs[3], qs[4]
  local Tk = ks[3]
  local scale = opts.scale or 1 / sqrt(D)
  local mask, mshape = opts.mask, nil
  if mask ~= nil then   -- booleans or numbers: the shape along the first elements
    mshape = {}
    local level = mask
    while type(level) == "table" do mshape[#mshape + 1] = #level; level = level[1] end
  end
  local out = {}
  for b = 1, B do
    out[b] = {}
    for h = 1, H do
      out[b][h] = {}
      local Q = q[b][h]
      local K, V = k[ks[1] == 1 and 1 or b][ks[2] == 1 and 1 or h], v[vs[1] == 1 and 1 or b][vs[2] == 1 and 1 or h]
      for i = 1, Tq do
        local s, any, nan, mx = {}, false, false, -huge
        for j = 1, Tk do
          local a = 0
          for c = 1, D do a = a + Q[i][c] * K[j][c] end
          a = a * scale
          if opts.causal and (j - 1) > (i - 1) + (Tk - Tq) then a = -huge end
          if mask ~= nil and a ~= -huge then
            local m = mask_at(mask, mshape, { b, h, i, j })
            if type(m) == "boolean" then
              if not m then a = -huge end
            else
              a = a + m
            end
          end
          s[j] = a
          if a ~= a then nan = true elseif a ~= -huge then any = true end
          if a > mx then mx = a end
        end
        local row = {}
        if nan then
          for c = 1, D do row[c] = 0 / 0 end
        elseif not any then
          for c = 1, D do row[c] = 0 end
        else
          local l = 0
          for j = 1, Tk do s[j] = math.exp(s[j] - mx); l = l + s[j] end   -- mx = inf: NaN
          for c = 1, D do
            local acc = 0
            for j = 1, Tk do
              if s[j] ~= 0 then acc = acc + s[j] * V[j][c] end   -- masked keys are not read
            end
            row[c] = acc / l
          end
        end
        out[b][h][i] = row
      end
    end
  end
  return out
end

-- The distribution lumus.sample draws each row from (a list of V probabilities per row,
-- nested as logits is: [N][V] or [V]): greedy (or temperature 0, or top_k 1) puts all
-- mass on the first largest logit; otherwise softmax(logits / temperature) over the
-- top_k largest (ties to the lower index), then the nucleus: candidate i, best first,
-- kept while the mass of those before it is below top_p; renormalized.
function M.sample_distribution(logits, opts)
  opts = opts or {}
  if type(logits[1]) == "table" then
    local out = {}
    for r = 1, #logits do out[r] = M.sample_distribution(logits[r], opts) end
    return out
  end
  local v = #logits
  local t = opts.temperature or 1
  local order = {}
  for i = 1, v do order[i] = i end
  table.sort(order, function(a, b)
    if logits[a] ~= logits[b] then return logits[a] > logits[b] end
    return a < b
  end)
  local probs = {}
  for i = 1, v do probs[i] = 0 end
  if opts.greedy or t == 0 or opts.top_k == 1 then
    probs[order[1]] = 1
    return probs
  end
  local k = math.min(opts.top_k or v, v)
  if not opts.top_k and opts.top_p then k = math.min(v, 1024) end
  local m = logits[order[1]] / t
  local e, s = {}, 0
  for j = 1, k do e[j] = math.exp(logits[order[j]] / t - m); s = s + e[j] end
  local kept, mass, before = {}, 0, 0
  for j = 1, k do
    local pj = e[j] / s
    if opts.top_p == nil or before < opts.top_p then kept[j] = pj; mass = mass + pj end
    before = before + pj
  end
  for j = 1, k do
    if kept[j] then probs[order[j]] = kept[j] / mass end
  end
  return probs
end

--- gelu_backward(g, x, approximate): g times gelu's derivative at x (what
-- lumus.gelu_backward computes): "none": Phi(x) + x phi(x); "tanh": with
-- s = 1 / (1 + e^{-2u}), u as in gelu, s + 2 x s (1 - s) u'(x).
function M.gelu_backward(g, x, approximate)
  local d
  if approximate == nil or approximate == "none" then
    d = function(v) return 0.5 * M.erfc(-v / sqrt(2)) + v * math.exp(-0.5 * v * v) / sqrt(2 * math.pi) end
  elseif approximate == "tanh" then
    local k = sqrt(2 / math.pi)
    d = function(v)
      local u = k * (v + 0.044715 * v * v * v)
      local e = math.exp(-2 * u)
      local s = 1 / (1 + e)
      local rest = e == math.huge and 1 or e * s
      return s + 2 * v * s * rest * k * (1 + 3 * 0.044715 * v * v)
    end
  else
    error(("reference.gelu_backward: approximate must be \"none\" or \"tanh\", got %s"):format(tostring(approximate)), 2)
  end
  return broadcast("gelu_backward", g, x, function(a, v) return a * d(v) end)
end

--- index_copy(t, dim, ids, src): torch.index_copy: t with src's slice j (along dim)
-- written over slice ids[j] (ids 1-D, 1-based; an id outside 1..size writes nothing;
-- where ids repeat, the last such slice is the one written).
function M.index_copy(t, dim, ids, src)
  return index_slices("index_copy", t, dim, ids, src, function(_, b) return b end)
end

--- act(x W^T + b) in float64 (lumus.linear with {activation = act}): act one of nil,
-- "none", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid".
local ACTIVATIONS = {
  none = function(t) return t end,
  relu = function(t) return M.relu(t) end,
  gelu = function(t) return M.gelu(t) end,
  gelu_tanh = function(t) return M.gelu(t, "tanh") end,
  silu = function(t) return M.silu(t) end,
  tanh = function(t) return M.tanh(t) end,
  sigmoid = function(t) return M.sigmoid(t) end,
}
function M.linear_act(x, weight, bias, act)
  local f = ACTIVATIONS[act or "none"]
  if f == nil then error(("reference.linear_act: unknown activation %s"):format(tostring(act)), 2) end
  return f(M.linear(x, weight, bias))
end

--- act(layer_norm(x) W^T + b) in float64 (lumus.layer_norm_linear): ln_weight, ln_bias
-- lists of K numbers or nil, eps default 1e-5.
function M.layer_norm_linear(x, ln_weight, ln_bias, weight, bias, eps, act)
  local xn = M.layer_norm_forward(x, ln_weight, ln_bias, eps or 1e-5)
  return M.linear_act(xn, weight, bias, act)
end

return M
