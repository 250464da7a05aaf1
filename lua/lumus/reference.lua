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
--   matmul(a, b, opts)                a [..., K] x b [K, N] (or batched), float64 sums
--   linear(x, weight, bias)           x W^T + b, weight [out, in] (torch layout)
--   rng(seed)                         deterministic uniform / normal generator
--   f32(v)                            v rounded to the nearest float32
--   random_table(shape, f)            nested table of f() values, rounded to float32
--   map(t, f)                         f applied to every number of a nested table
--   add, sub, mul, div(a, b)          elementwise, numbers or broadcast trailing shapes
--   scale(t, s), neg(t), relu(t)      t * s, -t, max(t, 0)
--   erf(x), erfc(x)                   the error function and 1 - erf(x), numbers
--   gelu(t, approximate)              "none" (erf form, the default) or "tanh"
--   softmax(t), sum(t), mean(t)       over the last dimension
--   layer_norm_backward(dy, x, mean, invstd, weight)
--                                     LayerNorm's gradients: dx [, dweight, dbias]
local M = {}

local abs, sqrt, huge = math.abs, math.sqrt, math.huge

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

-- c[i][j] = sum_k a[i][k] * b[k][j] (or b[j][k] when trans) + bias[j], over flat
-- row-major lists, float64; appends c's rows into out (flat).
local function gemm_into(out, a, a0, b, b0, m, n, k, trans, bias)
  for i = 0, m - 1 do
    local arow = a0 + i * k
    for j = 1, n do
      local s = 0
      if trans then
        local brow = b0 + (j - 1) * k
        for q = 1, k do s = s + a[arow + q] * b[brow + q] end
      else
        for q = 1, k do s = s + a[arow + q] * b[b0 + (q - 1) * n + j] end
      end
      if bias then s = s + bias[j] end
      out[#out + 1] = s
    end
  end
end

--- Matrix product in float64, shaped like lumus.matmul:
--   a [..., K] x b [K, N] -> [..., N] (a's leading dimensions are rows; a 1-D a gives [N])
--   a [B..., M, K] x b [B..., K, N] -> [B..., M, N] (b with batch dimensions equal to a's)
-- opts (optional): transpose_b = true reads b as [..., N, K]; bias = list of N numbers
-- added to every row. Sums run in float64 in k order.
function M.matmul(a, b, opts)
  opts = opts or {}
  local as = shape_of_depth("matmul", "a", a, 1, 8)
  local bs = shape_of_depth("matmul", "b", b, 2, 8)
  local trans = opts.transpose_b and true or false
  local k = as[#as]
  local bk = trans and bs[#bs] or bs[#bs - 1]
  local n = trans and bs[#bs - 1] or bs[#bs]
  if bk ~= k then
    error(("reference.matmul: b's K (%d) differs from a's last dimension (%d)"):format(bk, k), 2)
  end
  local batch, m = 1, nil
  if #bs == 2 then
    m = 1
    for i = 1, #as - 1 do m = m * as[i] end
  else
    if #as ~= #bs then error("reference.matmul: batched b needs a with as many dimensions", 2) end
    for i = 1, #bs - 2 do
      if as[i] ~= bs[i] then error("reference.matmul: batch dimensions of a and b differ", 2) end
      batch = batch * bs[i]
    end
    m = as[#as - 1]
  end
  local bias = opts.bias
  if bias ~= nil then
    local s = shape_of_depth("matmul", "bias", bias, 1, 1)
    if s[1] ~= n then error(("reference.matmul: bias must have %d numbers, got %d"):format(n, s[1]), 2) end
  end
  local fa, fb, out = M.flatten(a), M.flatten(b), {}
  for z = 0, batch - 1 do
    gemm_into(out, fa, z * m * k, fb, z * k * n, m, n, k, trans, bias)
  end
  local shape = {}
  for i = 1, #as do shape[i] = as[i] end
  shape[#shape] = n
  return M.nest(out, shape)
end

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
-- build and platform (unlike math.random, whose algorithm and seeding vary).
-- SplitMix64 on Lua's 64-bit integers (which wrap on overflow).
--   local g = ref.rng(42)
--   g() or g.uniform()   uniform in [0, 1), 53 random bits
--   g.normal()           standard normal (Box-Muller)
-- Both may also be called with `:`; the functions ignore their arguments, so
-- `g.normal` can be passed where a function of no arguments is expected.
function M.rng(seed)
  local state = math.tointeger(seed or 1)       -- any 64-bit integer (or integral float)
  if not state then
    error(("reference.rng: seed must be an integer, got %s"):format(tostring(seed)), 2)
  end
  local function next64()
    state = state + 0x9E3779B97F4A7C15
    local z = state
    z = (z ~ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ~ (z >> 27)) * 0x94D049BB133111EB
    return z ~ (z >> 31)
  end
  local function uniform()
    return (next64() >> 11) * 0x1p-53          -- top 53 bits: exact in a double
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
function M.f32(v)
  return (string.unpack("<f", string.pack("<f", v)))
end

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

-- f(x, y) over a and b: numbers, tables of one shape, or a table whose shape is a
-- trailing part of the other's, which then repeats over the other's leading levels.
local function broadcast(name, a, b, f)
  if type(a) == "number" and type(b) == "number" then return f(a, b) end
  if type(a) == "number" then return M.map(b, function(y) return f(a, y) end) end
  if type(b) == "number" then return M.map(a, function(x) return f(x, b) end) end
  local sa, sb = M.shape(a), M.shape(b)
  local small, big = sb, sa
  if #sa < #sb then small, big = sa, sb end
  for i = 1, #small do
    if small[#small - i + 1] ~= big[#big - i + 1] then
      error(("reference.%s: shapes %s and %s do not match"):format(name,
        table.concat(sa, "x"), table.concat(sb, "x")), 3)
    end
  end
  local extra = #big - #small   -- leading levels where the smaller operand repeats
  local function walk(x, y, depth)
    if type(x) == "number" then return f(x, y) end
    local out = {}
    for i = 1, #x do
      if depth < extra then
        if #sa >= #sb then out[i] = walk(x[i], y, depth + 1) else out[i] = walk(x, y[i], depth + 1) end
      else
        out[i] = walk(x[i], y[i], depth + 1)
      end
    end
    return out
  end
  if #sa >= #sb then return walk(a, b, 0) end
  -- b is the larger: walk its leading levels, pairing every part with all of a.
  local function walk_b(y, depth)
    if depth == extra then return walk(a, y, extra) end
    local out = {}
    for i = 1, #y do out[i] = walk_b(y[i], depth + 1) end
    return out
  end
  return walk_b(b, 0)
end

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

-- f(row) for every row (innermost table) of t, nested like t without its last level
-- when f returns a number; a 1-D t gives {f(t)} (lumus's shape {1}).
local function per_row(t, f)
  local shape = M.shape(t)
  local function walk(x, depth)
    if depth == #shape then return f(x) end
    local out = {}
    for i = 1, #x do out[i] = walk(x[i], depth + 1) end
    return out
  end
  local r = walk(t, 1)
  if #shape == 1 and type(r) == "number" then return { r } end
  return r
end

--- Softmax over the last dimension: exp(x - max) / sum(exp(x - max)). As PyTorch: -inf
-- entries give 0; a row with NaN or +inf (exp(inf - inf)), or of only -inf, is all NaN.
function M.softmax(t)
  return per_row(t, function(row)
    local m = -huge
    for i = 1, #row do if row[i] > m then m = row[i] end end
    local e, s = {}, 0
    for i = 1, #row do e[i] = math.exp(row[i] - m); s = s + e[i] end
    for i = 1, #row do e[i] = e[i] / s end
    return e
  end)
end

local function row_sum(row)
  local s = 0
  for i = 1, #row do s = s + row[i] end
  return f32_range(s)
end

--- Sum over the last dimension (plain float64 sum: for float32 inputs and rows up to
-- 2^20 its error is below 1e-10 of sum(|x|)). A row with NaN, or with +inf and -inf,
-- sums to NaN; one with +-inf, or whose sum is beyond float32's range, to +-inf.
function M.sum(t) return per_row(t, row_sum) end

--- Mean over the last dimension: the sum (as M.sum, so +-inf where it overflows
-- float32) over the row's length.
function M.mean(t) return per_row(t, function(row) return row_sum(row) / #row end) end

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
  local rows = #fx // d
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

return M
