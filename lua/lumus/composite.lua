--- lumus.composite: ops written with other ops, attached to the lumus table (and, where
-- the first argument is a tensor, as Tensor methods): what a PyTorch user looks for by
-- name. Each call is the ops it is made of, so autograd records those, and every
-- argument is checked here first, so errors name the function called.
--
--   lumus.clone(t)                              a new tensor with t's values (lumus.copy)
--   t:t()                                       the transpose of a 2-D tensor (a view); 1-D: t
--   t:flatten([start_dim = 1 [, end_dim = -1]]) dims start..end merged (a view when possible)
--   lumus.zeros_like(t [, {dtype=}])            likewise ones_like, empty_like, rand_like,
--   lumus.full_like(t, v [, {dtype=}])          randn_like: t's shape, t's dtype unless given
--   lumus.masked_fill(t, mask, v)               v where mask (bool, broadcast to t), else t
--   lumus.std(x [, {dim =, keepdim =, correction = 1, out =}])   sqrt(var)
--   lumus.norm(x [, {p = 2, dim =, keepdim =}]) p = 1, 2 or math.huge (max |x|)
--   lumus.lerp(a, b, w)                         a + w (b - a), w a number or a tensor
--   lumus.tril(t [, k = 0]), lumus.triu(t [, k = 0])   the last two dims' lower / upper
--                                               triangle from diagonal k, zeros elsewhere
--   lumus.any(t [, {dim =, keepdim =}]), lumus.all(...)  bool: some / every element nonzero
--   lumus.bmm(a, b)                             [B, M, K] x [B, K, N] (lumus.matmul, checked)
--   a ^ b                                       lumus.pow(a, b) (tensors or numbers)
--   lumus.eye(n [, m] [, {dtype=}])             ones on the diagonal of an n x m matrix
--   lumus.linspace(start, stop, steps [, {dtype=}])   steps values from start to stop
--   lumus.flip(t, dims)                         the order of dims reversed (a copy)
--   lumus.roll(t, shifts [, dims])              elements shifted cyclically (torch.roll)
--   lumus.sort(x [, {dim = -1, descending = false}])  values, int32 1-based indices
--   lumus.argsort(x [, {dim = -1, descending = false}])  the indices alone
--   lumus.dropout(x [, {p = 0.5, training = true}])   zeroes with probability p, scales 1/(1-p)
--   lumus.cumsum(x [, {dim = -1}])              inclusive running sums along dim
--   lumus.pad(x, pads [, {value = 0}])          torch.nn.functional.pad, constant mode
--   lumus.tile(t, reps)                         t repeated reps[i] times along dim i
--   lumus.outer(a, b)                           a[i] b[j] of two 1-D tensors
--   lumus.leaky_relu(x [, {negative_slope = 0.01}]), lumus.elu(x [, {alpha = 1}]),
--   lumus.softplus(x [, {beta = 1, threshold = 20}])   activations (nn modules too)
--   lumus.hardtanh(x [, {min_val = -1, max_val = 1}]), relu6, hardsigmoid, hardswish, mish,
--   logsigmoid(x)                               more activations (nn modules too)
--   lumus.isnan(x), isinf, isfinite             bool tests
--   lumus.nan_to_num(x [, {nan = 0, posinf =, neginf =}])   NaN/inf replaced (default: 0,
--                                               the dtype's largest and lowest finite values)
--   lumus.logsumexp(x [, {dim =, keepdim =}])   log(sum(exp(x))) without overflow
--   lumus.amax(x [, {dim =, keepdim =}]), amin  max / min values alone
--   lumus.one_hot(ids, num_classes)             int32 rows with a 1 at each 1-based id
--   lumus.normalize(x [, {p = 2, dim = -1, eps = 1e-12}])   x / max(||x||_p, eps)
--   lumus.cosine_similarity(a, b [, {dim = -1, eps = 1e-8}])
--   lumus.logaddexp(a, b)                       log(e^a + e^b)
--   lumus.addmm(input, m1, m2 [, {beta = 1, alpha = 1}])   beta input + alpha m1 m2
local core = require "lumus.core"
local argcheck = require "lumus.argcheck"

local M = {}

local Tensor = core.Tensor

local argerror = argcheck.argerror
local check_tensor = argcheck.tensor
local check_options = argcheck.options

-- A dimension of an nd-dimensional tensor: 1..nd, or -nd..-1 from the end.
local function check_dim(name, n, d, nd, what)
  if type(d) ~= "number" or d ~= math.floor(d) or d < -nd or d > nd or d == 0 then
    argerror(name, n, ("%s must be an integer in -%d..-1 or 1..%d, got %s"):format(what, nd, nd, tostring(d)))
  end
  return d < 0 and d + nd + 1 or d
end

local function check_integer(name, n, v, what)
  if type(v) ~= "number" or v ~= math.floor(v) or v ~= v or math.abs(v) == math.huge then
    argerror(name, n, ("%s must be an integer, got %s"):format(what, tostring(v)))
  end
  return v
end

function M.attach(lumus)
  local methods = Tensor.methods
  local function add(name, f, method)
    lumus[name] = f
    if method then methods[name] = f end
  end

  add("clone", function(t)
    check_tensor("clone", 1, t)
    return lumus.copy(t)
  end, true)

  add("t", function(t)
    check_tensor("t", 1, t)
    local nd = t:dim()
    if nd > 2 then argerror("t", 1, ("expects a tensor of at most 2 dimensions, got %d"):format(nd)) end
    if nd < 2 then return t end
    return t:transpose(1, 2)
  end, true)

  add("flatten", function(t, start_dim, end_dim)
    check_tensor("flatten", 1, t)
    local shape = t:shape()
    local nd = #shape
    local s = check_dim("flatten", 2, start_dim == nil and 1 or start_dim, nd, "start_dim")
    local e = check_dim("flatten", 3, end_dim == nil and -1 or end_dim, nd, "end_dim")
    if s > e then argerror("flatten", 2, ("start_dim %d comes after end_dim %d"):format(s, e)) end
    local out, n = {}, 1
    for i = 1, s - 1 do out[#out + 1] = shape[i] end
    for i = s, e do n = n * shape[i] end
    out[#out + 1] = n
    for i = e + 1, nd do out[#out + 1] = shape[i] end
    return t:reshape(out)
  end, true)

  -- Factories shaped like t: t's dtype unless opts.dtype. make(shape, opts) makes it;
  -- full_like's value comes between t and the options.
  local function like(name, make)
    return function(t, opts)
      check_tensor(name, 1, t)
      opts = check_options(name, 2, opts, { dtype = true })
      return make(t:shape(), { dtype = opts.dtype or t:dtype() })
    end
  end
  add("zeros_like", like("zeros_like", function(shape, o) return lumus.zeros(shape, o) end))
  add("ones_like", like("ones_like", function(shape, o) return lumus.ones(shape, o) end))
  add("empty_like", like("empty_like", function(shape, o) return lumus.empty(shape, o) end))
  add("rand_like", like("rand_like", function(shape, o) return lumus.rand(shape, o) end))
  add("randn_like", like("randn_like", function(shape, o) return lumus.randn(shape, o) end))
  add("full_like", function(t, value, opts)
    check_tensor("full_like", 1, t)
    if type(value) ~= "number" then argerror("full_like", 2, ("value must be a number, got %s"):format(type(value))) end
    opts = check_options("full_like", 3, opts, { dtype = true })
    return lumus.full(t:shape(), value, { dtype = opts.dtype or t:dtype() })
  end)

  add("masked_fill", function(t, mask, value)
    check_tensor("masked_fill", 1, t)
    check_tensor("masked_fill", 2, mask, "mask")
    if mask:dtype() ~= "bool" then
      argerror("masked_fill", 2, ("mask must be bool, got %s"):format(mask:dtype()))
    end
    if type(value) ~= "number" then
      argerror("masked_fill", 3, ("value must be a number, got %s"):format(type(value)))
    end
    local r = lumus.where(mask, value, t)
    if #r:shape() ~= #t:shape() or r:numel() ~= t:numel() then
      argerror("masked_fill", 2, "mask must broadcast to the tensor's shape, not beyond it")
    end
    return r
  end, true)

  add("std", function(x, opts)
    check_tensor("std", 1, x)
    opts = check_options("std", 2, opts, { dim = true, keepdim = true, correction = true, out = true })
    local v = lumus.var(x, { dim = opts.dim, keepdim = opts.keepdim, correction = opts.correction })
    return lumus.sqrt(v, { out = opts.out })
  end, true)

  add("norm", function(x, opts)
    check_tensor("norm", 1, x)
    opts = check_options("norm", 2, opts, { p = true, dim = true, keepdim = true })
    local p = opts.p == nil and 2 or opts.p
    local r = { dim = opts.dim, keepdim = opts.keepdim }
    if p == 2 then return lumus.sqrt(lumus.sum(lumus.mul(x, x), r)) end
    if p == 1 then return lumus.sum(lumus.abs(x), r) end
    if p == math.huge then return (lumus.max(lumus.abs(x), r)) end
    argerror("norm", 2, ("p must be 1, 2 or math.huge, got %s"):format(tostring(p)))
  end, true)

  -- a + w (b - a) for w < 0.5, b - (1 - w) (b - a) otherwise (PyTorch's two forms: exact
  -- at w = 0 and at w = 1).
  add("lerp", function(a, b, w)
    check_tensor("lerp", 1, a)
    if getmetatable(b) ~= Tensor and type(b) ~= "number" then
      argerror("lerp", 2, ("end must be a tensor or a number, got %s"):format(type(b)))
    end
    local d = lumus.sub(b, a)
    if type(w) == "number" then
      if w < 0.5 then return lumus.add(a, lumus.mul(d, w)) end
      return lumus.sub(b, lumus.mul(d, 1 - w))
    end
    check_tensor("lerp", 3, w, "weight")
    return lumus.where(lumus.lt(w, 0.5), lumus.add(a, lumus.mul(d, w)), lumus.sub(b, lumus.mul(d, lumus.sub(1, w))))
  end, true)

  -- 0, 1, ..., n - 1 as float32, made on the device (int32 arange, then converted: exact
  -- below 2^24), so that the ops using it can be captured (float32 arange is uploaded).
  local function positions(n) return lumus.arange(n, { dtype = "int32" }):float() end

  -- The triangle of the last two dimensions: element (i, j) kept where j - i <= k (tril)
  -- or j - i >= k (triu), from a [R, C] mask that broadcasts over the leading dims.
  local function triangle(name, keep)
    return function(t, k)
      check_tensor(name, 1, t)
      local shape = t:shape()
      if #shape < 2 then argerror(name, 1, ("expects at least 2 dimensions, got %d"):format(#shape)) end
      k = check_integer(name, 2, k == nil and 0 or k, "diagonal")
      local r, c = shape[#shape - 1], shape[#shape]
      local rows = positions(r):reshape({ r, 1 })
      local cols = positions(c):reshape({ 1, c })
      local offset = lumus.sub(cols, rows)                -- [R, C]: j - i, exact below 2^24
      return lumus.where(keep(offset, k), t, 0)
    end
  end
  add("tril", triangle("tril", function(o, k) return lumus.le(o, k) end), true)
  add("triu", triangle("triu", function(o, k) return lumus.ge(o, k) end), true)

  -- any/all: the nonzero elements (NaN counts) as 1.0, reduced by max / min. bool and
  -- int32 go through float32 (nonzero stays nonzero).
  local FLOATS = { float32 = true, float16 = true, bfloat16 = true }
  local function logical(name, reduce)
    return function(t, opts)
      check_tensor(name, 1, t)
      opts = check_options(name, 2, opts, { dim = true, keepdim = true })
      local x = FLOATS[t:dtype()] and t or t:float()
      local nonzero = lumus.ne(x, 0):float()
      return lumus.gt((reduce(nonzero, { dim = opts.dim, keepdim = opts.keepdim })), 0)
    end
  end
  add("any", logical("any", function(x, o) return lumus.max(x, o) end), true)
  add("all", logical("all", function(x, o) return lumus.min(x, o) end), true)

  add("bmm", function(a, b)
    check_tensor("bmm", 1, a)
    check_tensor("bmm", 2, b)
    if a:dim() ~= 3 then argerror("bmm", 1, ("expects a 3-D tensor, got %d dimensions"):format(a:dim())) end
    if b:dim() ~= 3 then argerror("bmm", 2, ("expects a 3-D tensor, got %d dimensions"):format(b:dim())) end
    if a:size(1) ~= b:size(1) then
      argerror("bmm", 2, ("batch sizes differ: %d and %d"):format(a:size(1), b:size(1)))
    end
    return lumus.matmul(a, b)
  end, true)

  local FACTORY_DTYPES = { float32 = true, float16 = true, bfloat16 = true }
  local function factory_dtype(name, n, opts)
    opts = check_options(name, n, opts, { dtype = true })
    local dt = opts.dtype or "float32"
    if not FACTORY_DTYPES[dt] then
      argerror(name, n, ("dtype must be float32, float16 or bfloat16, got %s"):format(tostring(dt)))
    end
    return dt
  end
  local function check_size(name, n, v, what)
    if type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v >= 2 ^ 31 then
      argerror(name, n, ("%s must be a positive integer, got %s"):format(what, tostring(v)))
    end
    return v
  end

  add("eye", function(n, m, opts)
    if type(m) == "table" and opts == nil then m, opts = nil, m end
    check_size("eye", 1, n, "n")
    m = m == nil and n or check_size("eye", 2, m, "m")
    local dt = factory_dtype("eye", 3, opts)
    local rows = positions(n):reshape({ n, 1 })
    local cols = positions(m):reshape({ 1, m })
    local e = lumus.where(lumus.eq(rows, cols), 1, 0)
    return dt == "float32" and e or e:to(dt)
  end)

  -- PyTorch's form: start + i step in the first half, stop - (steps - 1 - i) step in the
  -- second, so both ends are exact.
  add("linspace", function(start, stop, steps, opts)
    if type(start) ~= "number" then argerror("linspace", 1, ("start must be a number, got %s"):format(type(start))) end
    if type(stop) ~= "number" then argerror("linspace", 2, ("end must be a number, got %s"):format(type(stop))) end
    check_size("linspace", 3, steps, "steps")
    local dt = factory_dtype("linspace", 4, opts)
    local r
    if steps == 1 then
      r = lumus.full({ 1 }, start)
    else
      local step = (stop - start) / (steps - 1)
      local i = positions(steps)
      local head = lumus.add(lumus.mul(i, step), start)
      local tail = lumus.sub(stop, lumus.mul(lumus.sub(steps - 1, i), step))
      r = lumus.where(lumus.lt(i, steps / 2), head, tail)
    end
    return dt == "float32" and r or r:to(dt)
  end)

  -- A list of dimensions (or one), each in range and listed once.
  local function dims_list(name, n, dims, nd)
    if type(dims) == "number" then dims = { dims } end
    if type(dims) ~= "table" or getmetatable(dims) == Tensor or #dims == 0 then
      argerror(name, n, ("dims must be a dimension or a list of them, got %s"):format(type(dims)))
    end
    local seen, out = {}, {}
    for i, d in ipairs(dims) do
      local dd = check_dim(name, n, d, nd, "dims[" .. i .. "]")
      if seen[dd] then argerror(name, n, ("dim %d is listed twice"):format(dd)) end
      seen[dd] = true
      out[i] = dd
    end
    return out
  end

  add("flip", function(t, dims)
    check_tensor("flip", 1, t)
    local ds = dims_list("flip", 2, dims, t:dim())
    local r = t
    for _, d in ipairs(ds) do
      local n = r:size(d)
      r = lumus.index_select(r, d, lumus.arange(n, 0, -1, { dtype = "int32" }))   -- n, n-1, ..., 1
    end
    return r == t and lumus.copy(t) or r
  end, true)

  -- out[i] = t[(i - s) mod n] along each dim: two narrowed views joined.
  add("roll", function(t, shifts, dims)
    check_tensor("roll", 1, t)
    if dims == nil then
      if type(shifts) ~= "number" then argerror("roll", 2, ("shifts must be an integer without dims, got %s"):format(type(shifts))) end
      return lumus.roll(t:reshape({ t:numel() }), shifts, 1):reshape(t:shape())
    end
    local ds = dims_list("roll", 3, dims, t:dim())
    local ss = type(shifts) == "number" and { shifts } or shifts
    if type(ss) ~= "table" or #ss ~= #ds then
      argerror("roll", 2, ("shifts must give one integer per dim (%d), got %s"):format(#ds, type(shifts) == "table" and #shifts or type(shifts)))
    end
    local r = t
    for i, d in ipairs(ds) do
      local s = check_integer("roll", 2, ss[i], "shifts[" .. i .. "]")
      local n = r:size(d)
      s = s % n
      if s ~= 0 then r = lumus.cat({ r:narrow(d, n - s + 1, s), r:narrow(d, 1, n - s) }, d) end
    end
    return r == t and lumus.copy(t) or r
  end, true)

  -- The whole of dim through topk (ties keep their order: stable); topk's device limit
  -- on k is sort's on the length of dim.
  local function sorted(name, x, opts)
    check_tensor(name, 1, x)
    opts = check_options(name, 2, opts, { dim = true, descending = true })
    local nd = x:dim()
    local d = check_dim(name, 2, opts.dim == nil and -1 or opts.dim, nd, "dim")
    if opts.descending ~= nil and type(opts.descending) ~= "boolean" then
      argerror(name, 2, ("descending must be a boolean, got %s"):format(type(opts.descending)))
    end
    local ok, v, i = pcall(lumus.topk, x, x:size(d), { dim = d, largest = opts.descending == true, sorted = true })
    if not ok then
      local most = tostring(v):match("k must be at most (%d+)")
      if most then argerror(name, 1, ("sorts at most %s elements along a dim on this device, got %d"):format(most, x:size(d))) end
      error(v, 0)
    end
    return v, i
  end
  add("sort", function(x, opts) return sorted("sort", x, opts) end, true)
  add("argsort", function(x, opts) return select(2, sorted("argsort", x, opts)) end, true)

  add("dropout", function(x, opts)
    check_tensor("dropout", 1, x)
    opts = check_options("dropout", 2, opts, { p = true, training = true })
    local p = opts.p == nil and 0.5 or opts.p
    if type(p) ~= "number" or not (p >= 0 and p <= 1) then
      argerror("dropout", 2, ("p must be a number in [0, 1], got %s"):format(tostring(p)))
    end
    if opts.training ~= nil and type(opts.training) ~= "boolean" then
      argerror("dropout", 2, ("training must be a boolean, got %s"):format(type(opts.training)))
    end
    if opts.training == false or p == 0 then return x end
    local scale = p < 1 and 1 / (1 - p) or 0
    local keep = lumus.no_grad(function()
      local mask = lumus.where(lumus.ge(lumus.rand(x:shape()), p), scale, 0)
      if x:dtype() ~= "float32" then mask = mask:to(x:dtype()) end
      return mask
    end)
    return lumus.mul(x, keep)
  end, true)

  -- cumsum: a [R, n] view of x (dim last) times the upper triangle of ones, blocks of
  -- CUMSUM_BLOCK at a time: within a block one batched matmul, then the blocks' totals
  -- summed the same way (recursively) and added. O(n CUMSUM_BLOCK) work in products the
  -- device runs fast, and autograd records the parts.
  local CUMSUM_BLOCK = 128
  local triangles = setmetatable({}, { __mode = "v" })
  local function upper_ones(n, dtype)
    local key = n .. dtype
    local u = triangles[key]
    if u == nil or u:is_freed() then
      u = lumus.no_grad(function() return lumus.triu(lumus.ones({ n, n }, { dtype = dtype })) end)
      triangles[key] = u
    end
    return u
  end
  local function scan_rows(x2)   -- x2 [R, n] contiguous
    local r, n = x2:size(1), x2:size(2)
    if n <= CUMSUM_BLOCK then return lumus.matmul(x2, upper_ones(n, x2:dtype())) end
    local b = CUMSUM_BLOCK
    local m = math.floor((n + b - 1) / b)
    local padded = n == m * b and x2 or lumus.cat({ x2, lumus.zeros({ r, m * b - n }, { dtype = x2:dtype() }) }, 2)
    local within = lumus.matmul(padded:reshape({ r, m, b }), upper_ones(b, x2:dtype()))   -- [R, m, b]
    local totals = within:select(3, b):contiguous()                                      -- [R, m]
    local before = lumus.sub(scan_rows(totals), totals)                                  -- exclusive
    local y = lumus.add(within, before:unsqueeze(3)):reshape({ r, m * b })
    return m * b == n and y or y:narrow(2, 1, n)
  end
  add("cumsum", function(x, opts)
    check_tensor("cumsum", 1, x)
    opts = check_options("cumsum", 2, opts, { dim = true })
    local nd = x:dim()
    local d = check_dim("cumsum", 2, opts.dim == nil and -1 or opts.dim, nd, "dim")
    local moved = d == nd and x or x:transpose(d, nd)
    local shape = moved:shape()
    local n = shape[nd]
    local y = scan_rows(moved:contiguous():reshape({ math.floor(x:numel() / n), n })):reshape(shape)
    return d == nd and y or y:transpose(d, nd):contiguous()
  end, true)

  -- pads = {left, right [, top, bottom [, ...]]}, from the last dim backwards; negative
  -- amounts cut. Each padded dim is one cat with value-filled blocks.
  add("pad", function(x, pads, opts)
    check_tensor("pad", 1, x)
    local nd = x:dim()
    if type(pads) ~= "table" or getmetatable(pads) == Tensor or #pads == 0 or #pads % 2 ~= 0 or #pads > 2 * nd then
      argerror("pad", 2, ("pads must be a list of 2, 4, ... up to %d integers, got %s"):format(2 * nd,
        type(pads) == "table" and #pads .. " values" or type(pads)))
    end
    opts = check_options("pad", 3, opts, { value = true })
    local value = opts.value == nil and 0 or opts.value
    if type(value) ~= "number" then argerror("pad", 3, ("value must be a number, got %s"):format(type(value))) end
    local r = x
    for k = 1, #pads / 2 do
      local d = nd - k + 1
      local lo = check_integer("pad", 2, pads[2 * k - 1], "pads[" .. (2 * k - 1) .. "]")
      local hi = check_integer("pad", 2, pads[2 * k], "pads[" .. (2 * k) .. "]")
      local n = r:size(d)
      if n + math.min(lo, 0) + math.min(hi, 0) < 1 then
        argerror("pad", 2, ("pads cut all of dim %d (size %d)"):format(d, n))
      end
      if lo < 0 or hi < 0 then
        local first = 1 + math.max(-lo, 0)
        r = r:narrow(d, first, n + math.min(lo, 0) + math.min(hi, 0))
      end
      local parts = {}
      local function block(len)
        local s = r:shape()
        s[d] = len
        return lumus.full(s, value, { dtype = r:dtype() })
      end
      if lo > 0 then parts[#parts + 1] = block(lo) end
      parts[#parts + 1] = r
      if hi > 0 then parts[#parts + 1] = block(hi) end
      if #parts > 1 then r = lumus.cat(parts, d) end
    end
    return r == x and lumus.copy(x) or r
  end)

  -- Each dim i as [reps[i], size] expanded, then merged (one copy).
  add("tile", function(t, reps)
    check_tensor("tile", 1, t)
    if type(reps) ~= "table" or getmetatable(reps) == Tensor or #reps == 0 then
      argerror("tile", 2, ("reps must be a list of positive integers, got %s"):format(type(reps)))
    end
    local shape = t:shape()
    local x = t
    while #shape < #reps do x = x:unsqueeze(1); table.insert(shape, 1, 1) end   -- leading 1s as torch
    local lead = #shape - #reps
    local view, expanded, final = {}, {}, {}
    for i = 1, #shape do
      local rep = i > lead and reps[i - lead] or 1
      if type(rep) ~= "number" or rep ~= math.floor(rep) or rep < 1 then
        argerror("tile", 2, ("reps[%d] must be a positive integer, got %s"):format(i - lead, tostring(rep)))
      end
      view[#view + 1], view[#view + 2] = 1, shape[i]
      expanded[#expanded + 1], expanded[#expanded + 2] = rep, shape[i]
      final[i] = rep * shape[i]
    end
    return x:reshape(view):expand(expanded):contiguous():reshape(final)
  end, true)

  add("outer", function(a, b)
    check_tensor("outer", 1, a)
    check_tensor("outer", 2, b)
    if a:dim() ~= 1 then argerror("outer", 1, ("expects a 1-D tensor, got %d dimensions"):format(a:dim())) end
    if b:dim() ~= 1 then argerror("outer", 2, ("expects a 1-D tensor, got %d dimensions"):format(b:dim())) end
    return lumus.mul(a:unsqueeze(2), b:unsqueeze(1))
  end, true)

  local function number_option(name, opts, key, default, check)
    local v = opts[key]
    if v == nil then return default end
    if type(v) ~= "number" or v ~= v or (check and not check(v)) then
      argerror(name, 2, ("%s must be a %snumber, got %s"):format(key, check and "positive " or "", tostring(v)))
    end
    return v
  end
  add("leaky_relu", function(x, opts)
    check_tensor("leaky_relu", 1, x)
    opts = check_options("leaky_relu", 2, opts, { negative_slope = true })
    local slope = number_option("leaky_relu", opts, "negative_slope", 0.01)
    return lumus.where(lumus.lt(x, 0), lumus.mul(x, slope), x)
  end, true)
  add("elu", function(x, opts)
    check_tensor("elu", 1, x)
    opts = check_options("elu", 2, opts, { alpha = true })
    local alpha = number_option("elu", opts, "alpha", 1)
    return lumus.where(lumus.gt(x, 0), x, lumus.mul(lumus.expm1(x), alpha))
  end, true)
  -- log(1 + e^(beta x)) / beta, x itself past threshold (PyTorch's), as
  -- max(z, 0) + log1p(e^-|z|) with z = beta x: no overflow.
  add("softplus", function(x, opts)
    check_tensor("softplus", 1, x)
    opts = check_options("softplus", 2, opts, { beta = true, threshold = true })
    local beta = number_option("softplus", opts, "beta", 1, function(v) return v > 0 end)
    local threshold = number_option("softplus", opts, "threshold", 20)
    local z = beta == 1 and x or lumus.mul(x, beta)
    local sp = lumus.add(lumus.relu(z), lumus.log1p(lumus.exp(lumus.neg(lumus.abs(z)))))
    if beta ~= 1 then sp = lumus.mul(sp, 1 / beta) end
    return lumus.where(lumus.gt(z, threshold), x, sp)
  end, true)

  -- NaN and infinity tests (bool), and their replacement.
  add("isnan", function(x)
    check_tensor("isnan", 1, x)
    return lumus.ne(x, x)
  end, true)
  add("isinf", function(x)
    check_tensor("isinf", 1, x)
    return lumus.eq(lumus.abs(x), math.huge)
  end, true)
  add("isfinite", function(x)
    check_tensor("isfinite", 1, x)
    return lumus.lt(lumus.abs(x), math.huge)
  end, true)
  -- NaN, +inf and -inf replaced (by 0 and the dtype's largest and lowest finite values
  -- unless given), as torch.nan_to_num.
  local FINITE_MAX = { float32 = 3.4028234663852886e38, float16 = 65504, bfloat16 = 3.3895313892515355e38 }
  add("nan_to_num", function(x, opts)
    check_tensor("nan_to_num", 1, x)
    opts = check_options("nan_to_num", 2, opts, { nan = true, posinf = true, neginf = true })
    local big = FINITE_MAX[x:dtype()]
    if not big then argerror("nan_to_num", 1, ("expects a float tensor, got %s"):format(x:dtype())) end
    local nan = number_option("nan_to_num", opts, "nan", 0)
    local posinf = number_option("nan_to_num", opts, "posinf", big)
    local neginf = number_option("nan_to_num", opts, "neginf", -big)
    local r = lumus.where(lumus.eq(x, math.huge), posinf, x)
    r = lumus.where(lumus.eq(x, -math.huge), neginf, r)
    return lumus.where(lumus.ne(x, x), nan, r)
  end, true)

  -- log(sum(exp(x))) over dim (every element when nil), shifted by the (detached) max so
  -- nothing overflows; a max of +-inf or NaN is not subtracted (all -inf gives -inf,
  -- +inf gives inf, NaN NaN, as PyTorch).
  add("logsumexp", function(x, opts)
    check_tensor("logsumexp", 1, x)
    opts = check_options("logsumexp", 2, opts, { dim = true, keepdim = true })
    local src, dim = x, opts.dim
    if dim == nil then src, dim = x:reshape({ x:numel() }), 1 end
    local m = lumus.max(src, { dim = dim, keepdim = true }):detach()
    m = lumus.where(lumus.lt(lumus.abs(m), math.huge), m, 0)
    local s = lumus.sum(lumus.exp(lumus.sub(src, m)), { dim = dim, keepdim = true })
    local r = lumus.add(lumus.log(s), m)
    if opts.dim == nil then return r end
    return opts.keepdim and r or r:squeeze(dim)
  end, true)

  -- max / min values alone (torch.amax, amin).
  for _, name in ipairs { "amax", "amin" } do
    local f = name == "amax" and "max" or "min"
    add(name, function(x, opts)
      check_tensor(name, 1, x)
      opts = check_options(name, 2, opts, { dim = true, keepdim = true })
      return (lumus[f](x, { dim = opts.dim, keepdim = opts.keepdim }))
    end, true)
  end

  -- 1-based class ids (int32) to rows of C zeros with a one at the id, int32 (PyTorch's
  -- one_hot gives int64); ids outside 1..C raise (read back: one wait).
  add("one_hot", function(ids, num_classes)
    check_tensor("one_hot", 1, ids, "ids", "int32")
    if type(num_classes) ~= "number" or num_classes ~= math.floor(num_classes) or num_classes < 1 or num_classes >= 2 ^ 24 then
      argerror("one_hot", 2, ("num_classes must be a positive integer below 2^24, got %s"):format(tostring(num_classes)))
    end
    local f = ids:float()
    if ids:numel() > 0 then
      local lo = lumus.min(f):to_table()[1]
      local hi = lumus.max(f):to_table()[1]
      if lo < 1 or hi > num_classes then
        argerror("one_hot", 1, ("ids must be in 1..%d, got %d"):format(num_classes, lo < 1 and lo or hi))
      end
    end
    local classes = lumus.arange(1, num_classes + 1, { dtype = "int32" }):float()
    return lumus.eq(f:unsqueeze(f:dim() + 1), classes):int()
  end, true)

  -- x / max(||x||_p, eps) along dim (torch.nn.functional.normalize).
  add("normalize", function(x, opts)
    check_tensor("normalize", 1, x)
    opts = check_options("normalize", 2, opts, { p = true, dim = true, eps = true })
    local eps = number_option("normalize", opts, "eps", 1e-12)
    local n = lumus.norm(x, { p = opts.p, dim = opts.dim == nil and -1 or opts.dim, keepdim = true })
    return lumus.div(x, lumus.maximum(n, eps))
  end, true)

  -- sum(a b) / (max(||a||, eps) max(||b||, eps)) along dim (PyTorch's form: each operand
  -- divided by its clamped norm, then the dot product).
  add("cosine_similarity", function(a, b, opts)
    check_tensor("cosine_similarity", 1, a)
    check_tensor("cosine_similarity", 2, b)
    opts = check_options("cosine_similarity", 3, opts, { dim = true, eps = true })
    local eps = number_option("cosine_similarity", opts, "eps", 1e-8)
    local dim = opts.dim == nil and -1 or opts.dim
    local na = lumus.maximum(lumus.norm(a, { dim = dim, keepdim = true }), eps)
    local nb = lumus.maximum(lumus.norm(b, { dim = dim, keepdim = true }), eps)
    return lumus.sum(lumus.mul(lumus.div(a, na), lumus.div(b, nb)), { dim = dim })
  end, true)

  -- max(a, b) + log1p(e^-|a - b|), the difference taken as 0 where a = b (so a = b = +-inf
  -- gives +-inf, not NaN).
  add("logaddexp", function(a, b)
    if type(a) ~= "number" then check_tensor("logaddexp", 1, a) end
    if type(b) ~= "number" then check_tensor("logaddexp", 2, b) end
    if type(a) == "number" and type(b) == "number" then
      argerror("logaddexp", 1, "expects a tensor operand, got two numbers")
    end
    local m = lumus.maximum(a, b)
    local d = lumus.where(lumus.eq(a, b), 0, lumus.neg(lumus.abs(lumus.sub(a, b))))
    return lumus.add(m, lumus.log1p(lumus.exp(d)))
  end, true)

  -- beta input + alpha (m1 m2) (torch.addmm; input broadcasts to the product).
  add("addmm", function(input, m1, m2, opts)
    check_tensor("addmm", 1, input, "input")
    check_tensor("addmm", 2, m1, "mat1")
    check_tensor("addmm", 3, m2, "mat2")
    if m1:dim() ~= 2 then argerror("addmm", 2, ("mat1 must be a matrix, got %d dimensions"):format(m1:dim())) end
    if m2:dim() ~= 2 then argerror("addmm", 3, ("mat2 must be a matrix, got %d dimensions"):format(m2:dim())) end
    opts = check_options("addmm", 4, opts, { beta = true, alpha = true })
    local beta = number_option("addmm", opts, "beta", 1)
    local alpha = number_option("addmm", opts, "alpha", 1)
    local p = lumus.matmul(m1, m2)
    if alpha ~= 1 then p = lumus.mul(p, alpha) end
    -- beta = 0: input's values are not read (NaN there does not spread), only its shape
    local term = beta == 0 and lumus.zeros(input:shape()) or beta == 1 and input or lumus.mul(input, beta)
    local r = lumus.add(term, p)
    local rs, ps = r:shape(), p:shape()
    if #rs ~= 2 or rs[1] ~= ps[1] or rs[2] ~= ps[2] then
      argerror("addmm", 1, ("input must broadcast to the product's shape %dx%d"):format(ps[1], ps[2]))
    end
    return r
  end, true)

  -- Piecewise activations (nn modules too).
  add("hardtanh", function(x, opts)
    check_tensor("hardtanh", 1, x)
    opts = check_options("hardtanh", 2, opts, { min_val = true, max_val = true })
    local lo = number_option("hardtanh", opts, "min_val", -1)
    local hi = number_option("hardtanh", opts, "max_val", 1)
    if lo > hi then argerror("hardtanh", 2, ("min_val %s is above max_val %s"):format(lo, hi)) end
    return lumus.clamp(x, lo, hi)
  end, true)
  add("relu6", function(x)
    check_tensor("relu6", 1, x)
    return lumus.clamp(x, 0, 6)
  end, true)
  add("hardsigmoid", function(x)   -- relu6(x + 3) / 6
    check_tensor("hardsigmoid", 1, x)
    return lumus.div(lumus.clamp(lumus.add(x, 3), 0, 6), 6)
  end, true)
  add("hardswish", function(x)     -- x relu6(x + 3) / 6
    check_tensor("hardswish", 1, x)
    return lumus.div(lumus.mul(x, lumus.clamp(lumus.add(x, 3), 0, 6)), 6)
  end, true)
  -- x tanh(softplus(x)) = x n / (n + 2) with n = u (u + 2), u = e^x: no cancellation, and
  -- past x = 20 (u clamped there) n / (n + 2) is 1 in float32, as tanh is. Five kinds of
  -- op (a composite's first call compiles a pipeline for each).
  add("mish", function(x)
    check_tensor("mish", 1, x)
    local u = lumus.exp(lumus.clamp(x, nil, 20))
    local n = lumus.mul(u, lumus.add(u, 2))
    return lumus.mul(x, lumus.div(n, lumus.add(n, 2)))
  end, true)
  add("logsigmoid", function(x)    -- -softplus(-x) = min(x, 0) - log1p(e^-|x|)
    check_tensor("logsigmoid", 1, x)
    return lumus.sub(lumus.minimum(x, 0), lumus.log1p(lumus.exp(lumus.neg(lumus.abs(x)))))
  end, true)

  -- Lua passes the operands as written (2 ^ t: 2, t).
  Tensor.__pow = function(a, b) return lumus.pow(a, b) end
end

return M
