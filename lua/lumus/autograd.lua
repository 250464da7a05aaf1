--- lumus.autograd: reverse-mode automatic differentiation on a define-by-run tape.
--
--   local w = lumus.tensor({{1, 2}, {3, 4}}):requires_grad(true)
--   local loss = lumus.mean(lumus.relu(x:matmul(w)):sum())
--   loss:backward()            -- w:grad() now holds d loss / d w (accumulating)
--   w:zero_grad()              -- drops it (w:grad() is nil until the next backward)
--   lumus.no_grad(function() ... end)   -- ops inside record nothing
--
-- How it works. Per-tensor state lives in weak-keyed tables here (tensors are C
-- userdata whose methods come from one shared table): `tracked[t]` is {leaf = true} for a
-- tensor the user marked with requires_grad(true), or {node = n} for the result of a
-- recorded op. A node holds its op's backward function, what the op saved for it (with
-- each saved tensor's write counter, t:_version(), at save time) and one edge per
-- differentiable input: the input's node, or the leaf itself. backward() walks the nodes
-- reachable from the output in reverse topological order, running each backward with
-- recording off, accumulating gradients per node and into the leaves' grads.
--
-- Wrapping. Nothing is wrapped until the first requires_grad(true): until then every
-- lumus function and method is the C function itself. From then on each op in `ops`
-- below is a Lua function that checks its tensor arguments against `tracked` (one table
-- lookup each) and calls the C function directly when none is tracked or recording is
-- off. (A function fetched from lumus before that moment, `local add = lumus.add`, stays
-- the unwrapped one and is not recorded.)
--
-- Adding an op's backward is one entry of `ops` (M.register, CONTRIBUTING.md):
--   ops.my_op = {
--     inputs = { 1, 2 },            -- argument positions that may carry gradients
--     methods_only = false,         -- true for view methods that lumus.* lacks
--     save = function(a, r) return { x = a[1] } end,   -- a: the arguments (table.pack),
--                                   -- r: the results (table.pack); what backward needs
--     backward = function(g, s, need) return gx, gy end, -- g: gradient of result 1;
--                                   -- s: what save returned; need[k]: input k wants one;
--                                   -- returns one gradient per input (nil: none)
--   }
-- Backward functions run with recording off and call the raw C functions (`raw.*`);
-- gradients of broadcast operands go through `M.reduce_to(g, shape)`. An op whose first
-- argument is a list of tensors (cat, stack) has `list = 1` instead of `inputs` and
-- returns one gradient per list entry. Only float results are recorded: an int32 or
-- bool result (argmax, comparisons, t:int()) carries no gradient. A differentiable
-- function written in Lua over raw ops is M.function_op(name, entry, f) (the losses).
local core = require "lumus.core"
local compat = require "lumus.compat"
local unpack, pack = compat.unpack, compat.pack

local M = {}

local Tensor = core.Tensor
local methods = Tensor.methods
local version = core.Tensor.methods._version

local raw = {}             -- the C functions, by name (lumus.* and the methods)
for k, v in pairs(core) do if type(v) == "function" then raw[k] = v end end
for k, v in pairs(methods) do if type(v) == "function" then raw[k] = v end end

local WEAK_VALUES = { __mode = "v" }
local tracked = setmetatable({}, { __mode = "k" })   -- tensor -> {leaf=true} or {node=}
local grads = setmetatable({}, { __mode = "k" })     -- leaf -> accumulated gradient
local recording = true                                -- false inside no_grad and backward
local installed = false

local function is_tensor(v) return getmetatable(v) == Tensor end

local function numel(shape)
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  return n
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function shape_string(s) return table.concat(s, "x") end

---------------------------------------------------------------------------------------
-- Helpers for backward functions
---------------------------------------------------------------------------------------

--- g summed down to `shape`: over leading dimensions g has and shape lacks, and over
-- dimensions where shape has 1 and g more (broadcast operands, expand). g itself when
-- the shapes agree.
function M.reduce_to(g, shape)
  local gs = raw.shape(g)
  if same_shape(gs, shape) then return g end
  local n, off = #gs, #gs - #shape
  local keep, red, kshape, kn = {}, {}, {}, 1
  for i = 1, n do
    local j = i - off
    if j < 1 or (shape[j] == 1 and gs[i] ~= 1) then
      red[#red + 1] = i
    else
      keep[#keep + 1] = i
      kshape[#kshape + 1] = gs[i]
      kn = kn * gs[i]
    end
  end
  if kn ~= numel(shape) then
    error(("autograd: gradient of shape %s cannot be reduced to %s"):format(shape_string(gs), shape_string(shape)), 2)
  end
  -- Reduced dimensions all before the kept ones (a bias's gradient [rows, N] -> [N]):
  -- one sum over the first dimension of g read as [R, kn], no transposed copy.
  if #red > 0 and (#keep == 0 or red[#red] < keep[1]) then
    local s = raw.sum(raw.reshape(raw.contiguous(g), { numel(gs) / kn, kn }), { dim = 1 })
    return raw.reshape(s, shape)
  end
  local perm = {}
  for _, i in ipairs(keep) do perm[#perm + 1] = i end
  for _, i in ipairs(red) do perm[#perm + 1] = i end
  local p = raw.contiguous(raw.permute(g, perm))
  local s = raw.sum(raw.reshape(p, { kn, math.floor(numel(gs) / kn) }), { dim = -1 })
  return raw.reshape(s, shape)
end
local reduce_to = M.reduce_to

local function zeros_like_shape(shape) return raw.zeros(shape) end

-- 1 where t > 0, else 0 (NaN stays NaN): relu(t) scaled past 1 for any positive
-- float32 (2^-149 * 2^252 >= 1), then min(., 1) as 1 - relu(1 - .).
local function positive_mask(t)
  local big = raw.scale(raw.scale(raw.relu(t), 2 ^ 126), 2 ^ 126)
  return raw.sub(1, raw.relu(raw.sub(1, big)))
end

-- softmax over pairs (v, 0) gives sigmoid(v) and 1 - sigmoid(v) without overflow.
local function sigmoid_pair(v)
  local shape = raw.shape(v)
  local n = numel(shape)
  local pair = raw.zeros({ n, 2 })
  raw.copy(raw.narrow(pair, 2, 1, 1), raw.reshape(v, { n, 1 }))
  local s = raw.softmax(pair)
  return raw.reshape(raw.contiguous(raw.select(s, 2, 1)), shape),
         raw.reshape(raw.contiguous(raw.select(s, 2, 2)), shape)
end

-- exp(v) (v <= 0 in the uses below): lumus.exp where the core has it, else the ratio of
-- the pair softmax, e^v / (e^v + 1) over 1 / (e^v + 1).
local function exp_(v)
  if raw.exp then return raw.exp(v) end
  local p, q = sigmoid_pair(v)
  return raw.div(p, q)
end

local function tanh_(v)
  if raw.tanh then return raw.tanh(v) end
  local s = sigmoid_pair(raw.scale(v, 2))
  return raw.sub(raw.scale(s, 2), 1)
end

M.positive_mask, M.exp, M.tanh = positive_mask, exp_, tanh_

local INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
local SQRT_2_PI = math.sqrt(2 / math.pi)

-- d gelu / dx, erf form: Phi(x) + x phi(x).
local function gelu_erf_grad(x)
  local cdf = raw.scale(raw.add(raw.erf(raw.scale(x, 1 / math.sqrt(2))), 1), 0.5)
  local pdf = raw.scale(exp_(raw.scale(raw.mul(x, x), -0.5)), INV_SQRT_2PI)
  return raw.add(cdf, raw.mul(x, pdf))
end

-- d gelu / dx, tanh form: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3k x^2), t = tanh(c (x + k x^3)).
local function gelu_tanh_grad(x)
  local k = 0.044715
  local x2 = raw.mul(x, x)
  local u = raw.scale(raw.add(x, raw.scale(raw.mul(x2, x), k)), SQRT_2_PI)
  local t = tanh_(u)
  local left = raw.scale(raw.add(t, 1), 0.5)
  local sech2 = raw.sub(1, raw.mul(t, t))
  local inner = raw.scale(raw.add(raw.scale(x2, 3 * k), 1), SQRT_2_PI)
  return raw.add(left, raw.scale(raw.mul(raw.mul(x, sech2), inner), 0.5))
end

local function shape_of(v) return is_tensor(v) and raw.shape(v) or nil end

-- g [.., N] as a matrix [rows, N].
local function as_matrix(t)
  local s = raw.shape(t)
  local last = s[#s]
  return raw.reshape(t, { math.floor(numel(s) / last), last })
end

local function option(opts, key)
  if type(opts) == "table" then return rawget(opts, key) end
  return nil
end

---------------------------------------------------------------------------------------
-- The ops and their backward functions
---------------------------------------------------------------------------------------

local ops = {}
M.ops = ops

local function binary_save(a) return { a = a[1], b = a[2], sa = shape_of(a[1]), sb = shape_of(a[2]) } end

ops.add = {
  inputs = { 1, 2 },
  save = function(a) return { sa = shape_of(a[1]), sb = shape_of(a[2]) } end,
  backward = function(g, s, need)
    return need[1] and reduce_to(g, s.sa) or nil, need[2] and reduce_to(g, s.sb) or nil
  end,
}
ops.sub = {
  inputs = { 1, 2 },
  save = ops.add.save,
  backward = function(g, s, need)
    return need[1] and reduce_to(g, s.sa) or nil, need[2] and reduce_to(raw.neg(g), s.sb) or nil
  end,
}
ops.mul = {
  inputs = { 1, 2 },
  save = binary_save,
  backward = function(g, s, need)
    return need[1] and reduce_to(raw.mul(g, s.b), s.sa) or nil,
           need[2] and reduce_to(raw.mul(g, s.a), s.sb) or nil
  end,
}
ops.div = {
  inputs = { 1, 2 },
  save = binary_save,
  backward = function(g, s, need)
    local ga = raw.div(g, s.b)
    -- d (a / b) / db = -a / b^2 = -(g / b) * a / b
    local gb = need[2] and reduce_to(raw.neg(raw.div(raw.mul(ga, s.a), s.b)), s.sb) or nil
    return need[1] and reduce_to(ga, s.sa) or nil, gb
  end,
}
-- atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) (either may be a number)
ops.atan2 = {
  inputs = { 1, 2 },
  save = binary_save,
  backward = function(g, s, need)
    local function sq(v) return type(v) == "number" and v * v or raw.mul(v, v) end
    local q = raw.div(g, raw.add(sq(s.a), sq(s.b)))
    local ga = need[1] and reduce_to(raw.mul(q, s.b), s.sa) or nil
    local gb = need[2] and reduce_to(raw.neg(raw.mul(q, s.a)), s.sb) or nil
    return ga, gb
  end,
}
ops.scale = {
  inputs = { 1 },
  save = function(a) return { s = a[2] } end,
  backward = function(g, s) return raw.scale(g, s.s) end,
}
ops.neg = { inputs = { 1 }, backward = function(g) return raw.neg(g) end }
ops.relu = {
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, positive_mask(s.y)) end,
}
ops.abs = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s)
    local sign = raw.sub(positive_mask(s.x), positive_mask(raw.neg(s.x)))
    return raw.mul(g, sign)
  end,
}
ops.square = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.mul(g, raw.scale(s.x, 2)) end,
}
ops.reciprocal = {   -- d(1/x) = -1/x^2 = -y^2
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.neg(raw.mul(g, raw.mul(s.y, s.y))) end,
}
ops.sin = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.mul(g, raw.cos(s.x)) end,
}
ops.cos = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.neg(raw.mul(g, raw.sin(s.x))) end,
}
ops.tan = {   -- 1 + tan^2
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, raw.add(raw.mul(s.y, s.y), 1)) end,
}
ops.log2 = {   -- 1 / (x ln 2)
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.div(g, raw.mul(s.x, math.log(2))) end,
}
ops.log10 = {   -- 1 / (x ln 10)
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.div(g, raw.mul(s.x, math.log(10))) end,
}
ops.exp2 = {   -- 2^x ln 2
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, raw.mul(s.y, math.log(2))) end,
}
ops.atan = {   -- 1 / (1 + x^2)
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.div(g, raw.add(raw.mul(s.x, s.x), 1)) end,
}
-- asin, acos: +-1 / sqrt(1 - x^2), as (1 - x)(1 + x) (no cancellation near +-1)
local function asin_slope(x) return raw.rsqrt(raw.mul(raw.sub(1, x), raw.add(x, 1))) end
ops.asin = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.mul(g, asin_slope(s.x)) end,
}
ops.acos = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.neg(raw.mul(g, asin_slope(s.x))) end,
}
ops.sinh = { inputs = { 1 }, save = function(a) return { x = a[1] } end,
             backward = function(g, s) return raw.mul(g, raw.cosh(s.x)) end }
ops.cosh = { inputs = { 1 }, save = function(a) return { x = a[1] } end,
             backward = function(g, s) return raw.mul(g, raw.sinh(s.x)) end }
ops.asinh = { inputs = { 1 }, save = function(a) return { x = a[1] } end,   -- 1 / sqrt(x^2 + 1)
              backward = function(g, s) return raw.mul(g, raw.rsqrt(raw.add(raw.mul(s.x, s.x), 1))) end }
ops.acosh = { inputs = { 1 }, save = function(a) return { x = a[1] } end,   -- 1 / sqrt((x - 1)(x + 1))
              backward = function(g, s) return raw.mul(g, raw.rsqrt(raw.mul(raw.sub(s.x, 1), raw.add(s.x, 1)))) end }
ops.atanh = { inputs = { 1 }, save = function(a) return { x = a[1] } end,   -- 1 / ((1 - x)(1 + x))
              backward = function(g, s) return raw.div(g, raw.mul(raw.sub(1, s.x), raw.add(s.x, 1))) end }
ops.expm1 = {   -- e^x = y + 1
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, raw.add(s.y, 1)) end,
}
ops.log1p = {   -- 1 / (1 + x)
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.div(g, raw.add(s.x, 1)) end,
}
-- Piecewise constant: a zero gradient (also where g is NaN), as PyTorch.
local function zero_grad(g) return raw.zeros(raw.shape(g), { dtype = raw.dtype(g) }) end
for _, name in ipairs { "floor", "ceil", "round", "trunc", "sign" } do
  ops[name] = { inputs = { 1 }, backward = zero_grad }
end
ops.erf = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s)   -- 2 / sqrt(pi) exp(-x^2)
    return raw.mul(g, raw.scale(exp_(raw.neg(raw.mul(s.x, s.x))), 2 / math.sqrt(math.pi)))
  end,
}
-- gelu's backward: one fused kernel (lumus.gelu_backward) where the core has it.
local function gelu_grad(g, x, tanh_form)
  if raw.gelu_backward then return raw.gelu_backward(g, x, { approximate = tanh_form and "tanh" or "none" }) end
  return raw.mul(g, tanh_form and gelu_tanh_grad(x) or gelu_erf_grad(x))
end
ops.gelu_erf = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return gelu_grad(g, s.x, false) end,
}
ops.gelu_tanh = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return gelu_grad(g, s.x, true) end,
}
ops.gelu = {
  inputs = { 1 },
  save = function(a) return { x = a[1], tanh = option(a[2], "approximate") == "tanh" } end,
  backward = function(g, s) return gelu_grad(g, s.x, s.tanh) end,
}

-- The dimension a reduction's options name (1-based, negative from the end), or nil.
local function dim_of(opts, nd)
  local d = option(opts, "dim")
  if type(d) ~= "number" then return nil end
  if d < 0 then d = d + nd + 1 end
  return d
end

-- The shape g of a reduction of x has, with the reduced dimensions kept as 1: over `dim`
-- when given, else over every element where the result has one element (PyTorch's
-- x:sum()), else over the last dimension.
local function reduced_shape(xs, d, ys)
  local rs = {}
  for i = 1, #xs do rs[i] = xs[i] end
  if d then rs[d] = 1
  elseif numel(ys) == 1 then for i = 1, #rs do rs[i] = 1 end
  else rs[#rs] = 1 end
  return rs
end

local function reduction_save(a, r)
  local xs = raw.shape(a[1])
  return { xs = xs, rs = reduced_shape(xs, dim_of(a[2], #xs), raw.shape(r[1])) }
end
ops.sum = {
  inputs = { 1 },
  save = reduction_save,
  backward = function(g, s) return raw.expand(raw.reshape(g, s.rs), s.xs) end,
}
ops.mean = {
  inputs = { 1 },
  save = reduction_save,
  backward = function(g, s)
    return raw.expand(raw.reshape(raw.scale(g, numel(s.rs) / numel(s.xs)), s.rs), s.xs)
  end,
}
ops.softmax = {
  inputs = { 1 },
  save = function(a, r) return { y = r[1], dim = dim_of(a[2], #raw.shape(a[1])) } end,
  backward = function(g, s)   -- y * (g - sum(g * y)) over the softmax's dimension
    local shape = raw.shape(s.y)
    local dot = raw.sum(raw.mul(g, s.y), { dim = s.dim or #shape, keepdim = true })
    return raw.mul(s.y, raw.sub(g, raw.expand(dot, shape)))
  end,
}

-- matmul: with A = op(a) [.., M, K] and B = op(b) [.., K, N] (op: the transpose the
-- options ask for), dA = g B^T and dB = A^T g; a's gradient is dA read back through its
-- transpose (dA^T = B g^T), likewise b's. 1-D operands are promoted as the forward
-- promotes them (a row [1, K], a column [K, 1]); batch dimensions that broadcast are
-- summed back with reduce_to.
ops.matmul = {
  inputs = { 1, 2 },
  save = function(a)
    return { a = a[1], b = a[2], ta = option(a[3], "transpose_a") and true or false,
             tb = option(a[3], "transpose_b") and true or false }
  end,
  backward = function(g, s, need)
    local a, b, ta, tb = s.a, s.b, s.ta, s.tb
    local as, bs = raw.shape(a), raw.shape(b)
    local a2 = #as == 1 and raw.reshape(a, { 1, as[1] }) or a
    local b2 = #bs == 1 and raw.reshape(b, { bs[1], 1 }) or b
    local gs = raw.shape(g)
    local g2 = g
    if #as == 1 and #bs == 1 then g2 = raw.reshape(g, { 1, 1 })
    elseif #as == 1 then
      local t = {}
      for i = 1, #gs - 1 do t[i] = gs[i] end
      t[#t + 1] = 1
      t[#t + 1] = gs[#gs]
      g2 = raw.reshape(g, t)
    elseif #bs == 1 then
      local t = {}
      for i = 1, #gs do t[i] = gs[i] end
      t[#t + 1] = 1
      g2 = raw.reshape(g, t)
    end
    local ga, gb
    if need[1] then
      if ta then ga = raw.matmul(b2, g2, { transpose_a = tb, transpose_b = true })
      else ga = raw.matmul(g2, b2, { transpose_b = not tb }) end
      ga = raw.reshape(reduce_to(ga, raw.shape(a2)), as)
    end
    if need[2] then
      if #raw.shape(b2) == 2 and not ta and #raw.shape(a2) > 2 then
        -- a weight matrix under a batch: one matmul over the rows (no batch to sum)
        local am, gm = as_matrix(a2), as_matrix(g2)
        gb = tb and raw.matmul(gm, am, { transpose_a = true }) or raw.matmul(am, gm, { transpose_a = true })
      elseif tb then gb = raw.matmul(g2, a2, { transpose_a = true, transpose_b = ta })
      else gb = raw.matmul(a2, g2, { transpose_a = not ta }) end
      gb = raw.reshape(reduce_to(gb, raw.shape(b2)), bs)
    end
    return ga, gb
  end,
}
-- linear's and layer_norm_linear's fused activation: its name (nil for none) and its
-- derivative at the pre-activation z, which backward recomputes (z is not saved).
local function activation_of(opts)
  local act = type(opts) == "table" and rawget(opts, "activation") or nil
  if act == "none" then return nil end
  return act
end
local function activation_grad(act, z)
  if act == "relu" then return positive_mask(z) end
  if act == "gelu" then return gelu_erf_grad(z) end
  if act == "gelu_tanh" then return gelu_tanh_grad(z) end
  if act == "tanh" then local y = raw.tanh(z); return raw.sub(1, raw.mul(y, y)) end
  local sg = raw.sigmoid(z)
  if act == "sigmoid" then return raw.mul(sg, raw.sub(1, sg)) end
  return raw.mul(sg, raw.add(raw.mul(z, raw.sub(1, sg)), 1))   -- silu
end
ops.linear = {
  inputs = { 1, 2, 3 },
  save = function(a)
    local act = activation_of(a[4])
    return { x = a[1], w = a[2], sb = shape_of(a[3]), act = act, b = act and is_tensor(a[3]) and a[3] or nil }
  end,
  backward = function(g, s, need)
    if s.act then g = raw.mul(g, activation_grad(s.act, raw.linear(s.x, s.w, s.b))) end
    local gx = need[1] and raw.matmul(g, s.w) or nil
    -- g^T x with g read transposed in place by the kernel (no transposed copy of g)
    local gw = need[2] and raw.matmul(as_matrix(g), as_matrix(s.x), { transpose_a = true }) or nil
    local gb = need[3] and reduce_to(g, s.sb) or nil
    return gx, gw, gb
  end,
}
-- act(layer_norm(x) W^T + b): backward recomputes the normalized x and z.
ops.layer_norm_linear = {
  inputs = { 1, 2, 3, 4, 5 },
  save = function(a)
    local o = a[6]
    local eps = type(o) == "table" and rawget(o, "eps") or nil
    return { x = a[1], lw = is_tensor(a[2]) and a[2] or nil, lb = is_tensor(a[3]) and a[3] or nil, w = a[4],
             b = is_tensor(a[5]) and a[5] or nil, eps = eps or 1e-5, act = activation_of(o) }
  end,
  backward = function(g, s, need)
    local xn, mean, invstd = raw.layer_norm_forward(s.x, s.lw, s.lb, s.eps)
    if s.act then g = raw.mul(g, activation_grad(s.act, raw.linear(xn, s.w, s.b))) end
    local gw = need[4] and raw.matmul(as_matrix(g), as_matrix(xn), { transpose_a = true }) or nil
    local gb = need[5] and s.b and reduce_to(g, raw.shape(s.b)) or nil
    local gx, glw, glb
    if need[1] or need[2] or need[3] then
      local gxn = raw.matmul(g, s.w)
      if s.lw then
        gx, glw, glb = raw.layer_norm_backward(gxn, s.x, mean, invstd, s.lw)
      else
        gx = raw.layer_norm_backward(gxn, s.x, mean, invstd)
      end
      if s.lb and not glb and need[3] then glb = reduce_to(gxn, raw.shape(s.lb)) end
    end
    return need[1] and gx or nil, need[2] and glw or nil, need[3] and glb or nil, gw, gb
  end,
}
-- rms_norm: y = x r w with r = (mean(x^2) + eps)^-1/2 over the last dimension. With
-- u = g w: dx = r u - x r^3 mean(u x), dw = the sum over rows of g x r.
ops.rms_norm = {
  inputs = { 1, 2 },
  save = function(a)
    local w = is_tensor(a[2]) and a[2] or nil
    local o = w and a[3] or a[2]
    local eps = type(o) == "table" and rawget(o, "eps") or nil
    return { x = a[1], w = w, eps = eps or 1e-6 }
  end,
  backward = function(g, s, need)
    local x = s.x
    local r = raw.rsqrt(raw.add(raw.mean(raw.mul(x, x), { dim = -1, keepdim = true }), s.eps))
    local u = s.w and raw.mul(g, s.w) or g
    local gx
    if need[1] then
      local m = raw.mean(raw.mul(u, x), { dim = -1, keepdim = true })
      gx = raw.sub(raw.mul(u, r), raw.mul(x, raw.mul(m, raw.mul(r, raw.mul(r, r)))))
    end
    local gw = need[2] and s.w and reduce_to(raw.mul(g, raw.mul(x, r)), raw.shape(s.w)) or nil
    return gx, gw
  end,
}
ops.layer_norm_forward = {
  inputs = { 1, 2, 3 },
  save = function(a, r)
    return { x = a[1], w = is_tensor(a[2]) and a[2] or nil, mean = r[2], invstd = r[3], sb = shape_of(a[3]) }
  end,
  backward = function(g, s, need)
    local gx, gw, gb
    if s.w then
      gx, gw, gb = raw.layer_norm_backward(g, s.x, s.mean, s.invstd, s.w)
    else
      gx = raw.layer_norm_backward(g, s.x, s.mean, s.invstd)
      if need[3] then gb = reduce_to(g, s.sb) end
    end
    return need[1] and gx or nil, need[2] and gw or nil, need[3] and gb or nil
  end,
}

-- Views and copies.
ops.copy = { inputs = { 1 }, backward = function(g) return g end }
ops.contiguous = { inputs = { 1 }, backward = function(g) return g end }
ops.transpose = {
  methods_only = true, inputs = { 1 },
  save = function(a) return { d1 = a[2], d2 = a[3] } end,
  backward = function(g, s) return raw.transpose(g, s.d1, s.d2) end,
}
ops.permute = {
  methods_only = true, inputs = { 1 },
  save = function(a)
    local inv, nd = {}, #a[2]
    for i = 1, nd do
      local d = a[2][i]
      if d < 0 then d = d + nd + 1 end
      inv[d] = i
    end
    return { inv = inv }
  end,
  backward = function(g, s) return raw.permute(g, s.inv) end,
}
local function reshape_back_save(a) return { xs = raw.shape(a[1]) } end
local function reshape_back(g, s) return raw.reshape(g, s.xs) end
for _, name in ipairs { "reshape", "view", "unsqueeze", "squeeze" } do
  ops[name] = { methods_only = true, inputs = { 1 }, save = reshape_back_save, backward = reshape_back }
end
ops.expand = {
  methods_only = true, inputs = { 1 },
  save = reshape_back_save,
  backward = function(g, s) return reduce_to(g, s.xs) end,
}
ops.narrow = {
  methods_only = true, inputs = { 1 },
  save = function(a) return { xs = raw.shape(a[1]), dim = a[2], start = a[3], len = a[4] } end,
  backward = function(g, s)
    local gx = zeros_like_shape(s.xs)
    raw.copy(raw.narrow(gx, s.dim, s.start, s.len), g)
    return gx
  end,
}
ops.select = {
  methods_only = true, inputs = { 1 },
  save = function(a) return { xs = raw.shape(a[1]), dim = a[2], i = a[3] } end,
  backward = function(g, s)
    local gx = zeros_like_shape(s.xs)
    raw.copy(raw.select(gx, s.dim, s.i), g)
    return gx
  end,
}

-- Elementwise functions of one tensor: the derivative from the input x or the result y.
ops.exp = {
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, s.y) end,
}
ops.log = {
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s) return raw.div(g, s.x) end,
}
ops.sqrt = {   -- 1 / (2 sqrt(x))
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.div(raw.scale(g, 0.5), s.y) end,
}
ops.rsqrt = {   -- -x^(-3/2) / 2 = -y^3 / 2
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, raw.scale(raw.mul(raw.mul(s.y, s.y), s.y), -0.5)) end,
}
ops.tanh = {   -- 1 - y^2
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, raw.sub(1, raw.mul(s.y, s.y))) end,
}
ops.sigmoid = {   -- y (1 - y)
  inputs = { 1 },
  save = function(_, r) return { y = r[1] } end,
  backward = function(g, s) return raw.mul(g, raw.mul(s.y, raw.sub(1, s.y))) end,
}
ops.silu = {   -- s (1 + x (1 - s)), s = sigmoid(x)
  inputs = { 1 },
  save = function(a) return { x = a[1] } end,
  backward = function(g, s)
    local sg = raw.sigmoid(s.x)
    return raw.mul(g, raw.mul(sg, raw.add(raw.mul(s.x, raw.sub(1, sg)), 1)))
  end,
}

-- pow(a, b), either a number: d/da = b a^(b-1) (0 where b = 0, as PyTorch), d/db = y log a
-- (0 where a = 0 and b >= 0, as PyTorch).
ops.pow = {
  inputs = { 1, 2 },
  save = function(a, r) return { a = a[1], b = a[2], y = r[1], sa = shape_of(a[1]), sb = shape_of(a[2]) } end,
  backward = function(g, s, need)
    local ga, gb
    if need[1] then
      if type(s.b) == "number" then
        ga = s.b == 0 and raw.scale(g, 0) or raw.mul(g, raw.scale(raw.pow(s.a, s.b - 1), s.b))
      else
        local d = raw.mul(s.b, raw.pow(s.a, raw.sub(s.b, 1)))
        ga = reduce_to(raw.mul(g, raw.where(raw.eq(s.b, 0), 0, d)), s.sa)
      end
    end
    if need[2] then
      local la = type(s.a) == "number" and math.log(s.a) or raw.log(s.a)
      local d = type(la) == "number" and raw.scale(s.y, la) or raw.mul(s.y, la)
      if type(s.a) ~= "number" then
        d = raw.where(raw.eq(s.a, 0), raw.where(raw.ge(s.b, 0), 0, d), d)
      elseif s.a == 0 then
        d = raw.where(raw.ge(s.b, 0), 0, d)
      end
      gb = reduce_to(raw.mul(g, d), s.sb)
    end
    return ga, gb
  end,
}

-- maximum/minimum: g to the operand that is the result, halved on ties (PyTorch).
local function extremum_backward(strict)
  return function(g, s, need)
    local ga, gb
    local half = raw.scale(g, 0.5)
    local tie = raw.eq(s.a, s.b)
    if need[1] then
      ga = reduce_to(raw.where(strict(s.a, s.b), g, raw.where(tie, half, 0)), s.sa)
    end
    if need[2] then
      gb = reduce_to(raw.where(strict(s.b, s.a), g, raw.where(tie, half, 0)), s.sb)
    end
    return ga, gb
  end
end
ops.maximum = { inputs = { 1, 2 }, save = binary_save, backward = extremum_backward(function(x, y) return raw.gt(x, y) end) }
ops.minimum = { inputs = { 1, 2 }, save = binary_save, backward = extremum_backward(function(x, y) return raw.lt(x, y) end) }

-- clamp: g where min <= x <= max (bounds included, as PyTorch), else 0.
ops.clamp = {
  inputs = { 1 },
  save = function(a) return { x = a[1], lo = a[2], hi = a[3] } end,
  backward = function(g, s)
    if type(s.lo) == "number" then g = raw.where(raw.ge(s.x, s.lo), g, 0) end
    if type(s.hi) == "number" then g = raw.where(raw.le(s.x, s.hi), g, 0) end
    return g
  end,
}
ops.where = {
  inputs = { 2, 3 },
  save = function(a) return { mask = a[1], sa = shape_of(a[2]), sb = shape_of(a[3]) } end,
  backward = function(g, s, need)
    return need[1] and reduce_to(raw.where(s.mask, g, 0), s.sa) or nil,
           need[2] and reduce_to(raw.where(s.mask, 0, g), s.sb) or nil
  end,
}

-- g with the reduced dimensions put back as size 1 and expanded to x's shape.
local function spread(g, s) return raw.expand(raw.reshape(g, s.rs), s.xs) end

ops.var = {   -- 2 (x - mean) / (n - correction)
  inputs = { 1 },
  save = function(a, r)
    local s = reduction_save(a, r)
    s.x, s.dim = a[1], dim_of(a[2], #s.xs)
    local c = option(a[2], "correction")
    s.correction = c == nil and 1 or c
    return s
  end,
  backward = function(g, s)
    local n = numel(s.xs) / numel(s.rs)
    local mean = s.dim and raw.mean(s.x, { dim = s.dim, keepdim = true }) or raw.reshape(raw.mean(s.x), s.rs)
    local centered = raw.sub(s.x, raw.expand(mean, s.xs))
    local d = n - s.correction
    if d < 0 then d = 0 end
    return raw.mul(spread(g, s), raw.scale(centered, 2 / d))
  end,
}

-- max/min with dim: g to the position the indices name (one per reduced row, as
-- PyTorch); without dim: g shared evenly by the elements equal to the result.
local function extreme_entry()
  return {
    inputs = { 1 },
    save = function(a, r)
      local s = reduction_save(a, r)
      s.dim = dim_of(a[2], #s.xs)
      if s.dim then s.idx = r[2] else s.x, s.y = a[1], r[1] end
      return s
    end,
    backward = function(g, s)
      if s.dim then
        return raw.scatter_add(raw.zeros(s.xs), s.dim, raw.reshape(s.idx, s.rs), raw.reshape(g, s.rs))
      end
      local hit = raw.to(raw.eq(s.x, raw.expand(raw.reshape(s.y, s.rs), s.xs)), "float32")
      local share = raw.div(raw.reshape(g, s.rs), raw.reshape(raw.sum(hit), s.rs))
      return raw.mul(hit, raw.expand(share, s.xs))
    end,
  }
end
ops.max, ops.min = extreme_entry(), extreme_entry()

ops.topk = {   -- g to the positions of the k values
  inputs = { 1 },
  save = function(a, r)
    local nd = #raw.shape(a[1])
    local d = dim_of(a[3], nd) or nd
    return { xs = raw.shape(a[1]), dim = d, idx = r[2] }
  end,
  backward = function(g, s) return raw.scatter_add(raw.zeros(s.xs), s.dim, s.idx, g) end,
}

ops.log_softmax = {   -- g - softmax * sum(g) over the dimension
  inputs = { 1 },
  save = function(a, r) return { y = r[1], dim = dim_of(a[2], #raw.shape(a[1])) } end,
  backward = function(g, s)
    local shape = raw.shape(s.y)
    local total = raw.sum(g, { dim = s.dim or #shape, keepdim = true })
    return raw.sub(g, raw.mul(raw.exp(s.y), raw.expand(total, shape)))
  end,
}

-- Float conversions: the gradient converted back to the input's dtype. (A result that is
-- not a float, t:to("int32"), carries no gradient: record() tracks float results only.)
local function convert_back(g, s)
  if raw.dtype(g) == s.dtype then return g end
  return raw.to(g, s.dtype)
end
local function dtype_save(a) return { dtype = raw.dtype(a[1]) } end
ops.to = { inputs = { 1 }, save = dtype_save, backward = convert_back }
for _, name in ipairs { "float", "half", "bfloat16" } do
  ops[name] = { methods_only = true, inputs = { 1 }, save = dtype_save, backward = convert_back }
end

-- Indexing: the gradient added back into the positions read (deterministic kernels).
ops.index_select = {
  inputs = { 1 },
  save = function(a) return { xs = raw.shape(a[1]), dim = a[2], ids = a[3] } end,
  backward = function(g, s) return raw.index_add(raw.zeros(s.xs), s.dim, s.ids, g) end,
}
ops.embedding = {
  inputs = { 2 },
  save = function(a) return { ids = a[1], ws = raw.shape(a[2]) } end,
  backward = function(g, s)
    local n = raw.numel(s.ids)
    return raw.index_add(raw.zeros(s.ws), 1, raw.reshape(raw.contiguous(s.ids), { n }),
                              raw.reshape(raw.contiguous(g), { n, s.ws[2] }))
  end,
}
ops.gather = {
  inputs = { 1 },
  save = function(a) return { xs = raw.shape(a[1]), dim = a[2], ids = a[3] } end,
  backward = function(g, s)
    local nd = #s.xs
    local dim = s.dim < 0 and s.dim + nd + 1 or s.dim
    local is = raw.shape(s.ids)
    local part = {}   -- x's shape but ids' sizes off dim
    for k = 1, nd do part[k] = k == dim and s.xs[k] or is[k] end
    local gp = raw.scatter_add(raw.zeros(part), dim, s.ids, g)
    if same_shape(part, s.xs) then return gp end
    local gx = raw.zeros(s.xs)
    local view = gx
    for k = 1, nd do if k ~= dim then view = raw.narrow(view, k, 1, part[k]) end end
    raw.copy(view, gp)
    return gx
  end,
}
ops.index_add = {   -- t: g; src: g read back at the ids
  inputs = { 1, 4 },
  save = function(a) return { dim = a[2], ids = a[3] } end,
  backward = function(g, s, need)
    return need[1] and g or nil, need[2] and raw.index_select(g, s.dim, s.ids) or nil
  end,
}
ops.scatter_add = {
  inputs = { 1, 4 },
  save = function(a) return { dim = a[2], ids = a[3] } end,
  backward = function(g, s, need)
    return need[1] and g or nil, need[2] and raw.gather(g, s.dim, s.ids) or nil
  end,
}

-- cross entropy's per-row losses (the first result); the fused backward kernel.
ops.cross_entropy_forward = {
  inputs = { 1 },
  save = function(a, r)
    return { x = a[1], target = a[2], lse = r[2], ignore = option(a[3], "ignore_index") }
  end,
  backward = function(g, s)
    return raw.cross_entropy_backward(g, s.x, s.target, s.lse,
                                      s.ignore ~= nil and { ignore_index = s.ignore } or nil)
  end,
}

-- Ops whose first argument is a list of tensors: one gradient per tensor of the list.
ops.cat = {
  list = 1,
  save = function(a)
    local list = a[1]
    local dim = type(a[2]) == "number" and a[2] or 1
    local nd = #raw.shape(list[1])
    if dim < 0 then dim = dim + nd + 1 end
    local sizes = {}
    for i = 1, #list do sizes[i] = raw.shape(list[i])[dim] end
    return { dim = dim, sizes = sizes }
  end,
  backward = function(g, s, need)
    local out, start = {}, 1
    for i, n in ipairs(s.sizes) do
      if need[i] then out[i] = raw.narrow(g, s.dim, start, n) end
      start = start + n
    end
    return unpack(out, 1, #s.sizes)
  end,
}
ops.stack = {
  list = 1,
  save = function(a)
    local nd = #raw.shape(a[1][1]) + 1
    local dim = type(a[2]) == "number" and a[2] or 1
    if dim < 0 then dim = dim + nd + 1 end
    return { dim = dim, n = #a[1] }
  end,
  backward = function(g, s, need)
    local out = {}
    for i = 1, s.n do if need[i] then out[i] = raw.select(g, s.dim, i) end end
    return unpack(out, 1, s.n)
  end,
}

-- scaled_dot_product_attention: a composite backward that recomputes the probabilities
-- P (softmax of the masked, scaled scores, rows with no key left 0) from the saved q and
-- k, then dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ = scale dS K,
-- dK = scale dS^T Q (k and v broadcast over B or H are summed back). It holds one
-- [B, H, Tq, Tk] score matrix at a time; the masks carry no gradient.
local function attention_probabilities(s)
  local q, k = s.q, s.k
  local qs, ks = raw.shape(q), raw.shape(k)
  local tq, tk = qs[3], ks[3]
  local scores = raw.matmul(q, k, { transpose_b = true })             -- [B, H, Tq, Tk]
  local z = raw.scale(scores, s.scale)
  raw.free(scores)
  if s.mask then
    local m = s.mask
    local masked = raw.dtype(m) == "bool" and raw.where(m, z, -math.huge) or raw.add(z, m)
    raw.free(z)
    z = masked
  end
  if s.causal then
    -- query i (1-based) sees keys j <= i + tk - tq (bottom-right)
    local last = raw.reshape(raw.arange(tk - tq + 1, tk + 1, { dtype = "float32" }), { tq, 1 })
    local key = raw.reshape(raw.arange(1, tk + 1, { dtype = "float32" }), { 1, tk })
    local allowed = raw.le(key, last)
    local masked = raw.where(allowed, z, -math.huge)
    raw.free(z); raw.free(allowed); raw.free(last); raw.free(key)
    z = masked
  end
  local p = raw.softmax(z)
  -- rows whose keys are all masked: softmax gives NaN, the forward gives 0
  local mx = raw.max(z, { dim = -1, keepdim = true })
  local dead = raw.eq(mx, -math.huge)
  local zp = raw.where(dead, 0, p)
  raw.free(z); raw.free(p); raw.free(mx); raw.free(dead)
  return zp
end
M.attention_probabilities = attention_probabilities

ops.scaled_dot_product_attention = {
  inputs = { 1, 2, 3 },
  save = function(a, r)
    local opts = type(a[4]) == "table" and a[4] or {}
    local hd = raw.shape(a[1])[4]
    return { q = a[1], k = a[2], v = a[3], y = r[1], mask = opts.mask, causal = opts.causal and true or false,
             scale = opts.scale or 1 / math.sqrt(hd) }
  end,
  backward = function(g, s, need)
    local p = attention_probabilities(s)                               -- [B, H, Tq, Tk]
    local gq, gk, gv
    if need[3] then
      gv = reduce_to(raw.matmul(p, g, { transpose_a = true }), raw.shape(s.v))
    end
    if need[1] or need[2] then
      local dp = raw.matmul(g, s.v, { transpose_b = true })             -- dO V^T
      local prod = raw.mul(g, s.y)
      local rowdot = raw.sum(prod, { dim = -1, keepdim = true })        -- rowsum(dO * O)
      local diff = raw.sub(dp, rowdot)
      local ds = raw.mul(p, diff)
      raw.free(dp); raw.free(prod); raw.free(rowdot); raw.free(diff)
      if need[1] then
        local m = raw.matmul(ds, s.k)
        gq = raw.scale(m, s.scale)
        raw.free(m)
      end
      if need[2] then
        local m = raw.matmul(ds, s.q, { transpose_a = true })
        gk = reduce_to(raw.scale(m, s.scale), raw.shape(s.k))
        raw.free(m)
      end
      raw.free(ds)
    end
    raw.free(p)
    return gq, gk, gv
  end,
}

--- Whether recording wrappers are installed (the first requires_grad(true) installs
-- them): until then no tensor requires grad, and modules may skip asking each one.
function M.is_installed() return installed end

--- Adds or replaces the backward of op `name` (see the top of this file). Takes effect
-- for lumus.<name> and t:<name>() from the next requires_grad(true) on, or at once when
-- wrapping is already installed.
function M.register(name, entry)
  if type(name) ~= "string" or type(entry) ~= "table" or type(entry.backward) ~= "function"
     or type(entry.inputs) ~= "table" then
    error("autograd.register: expected a name and {inputs =, backward = [, save =]}", 2)
  end
  ops[name] = entry
  -- an op written in Lua (or added after load): the function it has now
  if not raw[name] then raw[name] = (M.lumus and rawget(M.lumus, name)) or rawget(methods, name) end
  if installed then M.install_op(name) end
end

---------------------------------------------------------------------------------------
-- Recording
---------------------------------------------------------------------------------------
local wrap

-- The C functions are called as cf[ONE](...) (cf = { f }): a call through a table and a
-- variable key has no name in Lua's debug information, so the C function's messages
-- name it by its registered name ("lumus.add"), not by this file's variable. Their
-- results go out through pass(...), not a tail call: LuaJIT replaces the frame of a
-- function by the one it tail-calls, and the C function would then be named by the
-- wrapper's caller's call site ("add", or with no call site its registered name).
local ONE = 1
local function pass(...) return ... end

local function edge_of(t)
  local st = tracked[t]
  if not st then return nil end
  if st.node then return { node = st.node, output = st.node.saves_output and t or nil } end
  return { leaf = t }
end

-- Options that write into existing tensors cannot be recorded: the result would replace
-- a tensor the graph may hold.
local OUT_KEYS = { "out", "mean", "invstd", "dweight", "dbias", "indices" }

-- The values of an op's differentiable inputs, and their count: the arguments at
-- entry.inputs, or the tensors of the list at argument entry.list (cat, stack).
local function input_values(entry, a)
  if entry.list then
    local list = a[entry.list]
    if type(list) ~= "table" then return {}, 0 end
    local v = {}
    for i = 1, #list do v[i] = rawget(list, i) end
    return v, #v
  end
  local v = {}
  for k, p in ipairs(entry.inputs) do v[k] = a[p] end
  return v, #entry.inputs
end

local function record(name, entry, f, ...)
  local cf = { f }
  local a = pack(...)
  for i = 1, a.n do
    if type(a[i]) == "table" then
      for _, k in ipairs(OUT_KEYS) do
        if rawget(a[i], k) ~= nil then
          error(("%s: option %s cannot be used on tensors that require grad (autograd records "
                 .. "new results; use lumus.no_grad to write in place)"):format(name, k), 3)
        end
      end
    end
  end
  local r = pack(cf[ONE](...))
  local y = r[1]
  if not is_tensor(y) then return unpack(r, 1, r.n) end
  for i = 1, a.n do if rawequal(a[i], y) then return unpack(r, 1, r.n) end end   -- t itself
  local dt = raw.dtype(y)
  if dt == "int32" or dt == "bool" then return unpack(r, 1, r.n) end   -- no gradient
  local node = { name = name, backward = entry.backward, next = {}, need = {} }
  local any = false
  local inputs, count = input_values(entry, a)
  for k = 1, count do
    local e = edge_of(inputs[k])
    node.next[k] = e or false
    node.need[k] = e ~= nil
    any = any or e ~= nil
  end
  if not any then return unpack(r, 1, r.n) end
  if entry.save then
    local saved = entry.save(a, r)
    local versions, own = {}, nil
    for k, v in pairs(saved) do
      if is_tensor(v) then
        versions[k] = version(v)
        if rawequal(v, y) then own = own or {}; own[k] = v end
      end
    end
    if own then
      -- The node holds its own result y weakly: tracked[y] -> node -> y would keep y
      -- (and the graph) forever on 5.1 and LuaJIT, whose weak-key tables are not
      -- ephemerons. y stays alive while it matters: held by the caller, or by the edge of
      -- each node that consumed it (edge_of).
      for k in pairs(own) do saved[k] = nil end
      setmetatable(saved, { __index = setmetatable(own, WEAK_VALUES) })
      node.saves_output = true
    end
    node.saved, node.versions = saved, versions
  else
    node.saved = {}
  end
  tracked[y] = { node = node }
  return unpack(r, 1, r.n)
end

function wrap(name, entry, f)
  local cf = { f }
  if entry.list then
    local at = entry.list
    return function(...)
      if recording then
        local list = select(at, ...)
        if type(list) == "table" then
          for i = 1, #list do
            if tracked[rawget(list, i)] then return record(name, entry, f, ...) end
          end
        end
      end
      return pass(cf[ONE](...))
    end
  end
  local inputs = entry.inputs
  local p1, p2, p3 = inputs[1], inputs[2], inputs[3]
  if #inputs > 3 then
    return function(...)
      if recording then
        for _, p in ipairs(inputs) do
          if tracked[(select(p, ...))] then return record(name, entry, f, ...) end
        end
      end
      return pass(cf[ONE](...))
    end
  end
  -- The common shapes without select(): differentiable inputs first.
  if p1 == 1 and not p2 then
    return function(t, ...)
      if recording and tracked[t] then return record(name, entry, f, t, ...) end
      return pass(cf[ONE](t, ...))
    end
  end
  if p1 == 1 and p2 == 2 and not p3 then
    return function(a, b, ...)
      if recording and (tracked[a] or tracked[b]) then return record(name, entry, f, a, b, ...) end
      return pass(cf[ONE](a, b, ...))
    end
  end
  return function(...)
    if recording and (tracked[(select(p1, ...))] or (p2 and tracked[(select(p2, ...))])
                      or (p3 and tracked[(select(p3, ...))])) then
      return record(name, entry, f, ...)
    end
    return pass(cf[ONE](...))
  end
end

-- In-place writers: refused on tracked tensors while recording (the graph would not
-- see the write).
local function guard_in_place(name, f, positions, what)
  local cf = { f }
  return function(...)
    if recording then
      for _, p in ipairs(positions) do
        local v = select(p, ...)
        if v ~= nil and tracked[v] then
          error(("%s: %s requires grad; in-place writes are not recorded by autograd (use "
                 .. "lumus.no_grad to write in place, or an op that returns a new tensor)"):format(name, what), 2)
        end
      end
    end
    return pass(cf[ONE](...))
  end
end

local function copy_wrapper(entry)
  local f = raw.copy
  local cf = { f }
  local one = wrap("copy", entry, f)
  return function(...)
    local dst, src = ...
    if is_tensor(src) then
      if recording and (tracked[dst] or tracked[src]) then
        error(("copy: %s requires grad; copying into an existing tensor is not recorded by autograd "
               .. "(use lumus.copy(src) for a new tensor, or lumus.no_grad)"):format(tracked[src] and "src" or "dst"), 2)
      end
      return pass(cf[ONE](...))
    end
    return one(...)
  end
end

local function set_op(name, fn)
  if not ops[name].methods_only and rawget(M.lumus, name) ~= nil then M.lumus[name] = fn end
  if rawget(methods, name) ~= nil then methods[name] = fn end
end

function M.install_op(name)
  local entry = ops[name]
  local f = raw[name]
  if not f then return end   -- an op this core lacks
  set_op(name, name == "copy" and copy_wrapper(entry) or wrap(name, entry, f))
end

-- Functions and methods that need no backward: queries, the autograd API itself, and ops
-- whose results carry no gradient (comparisons, indices). Every other one without an
-- entry in `ops` raises when given a tensor that requires grad while recording, rather
-- than return a result the graph would not know (a silently wrong gradient).
local NO_GRAD_NEEDED = {}
for name in ([[shape size dim numel dtype stride is_contiguous is_freed describe free to_table to_bytes
  requires_grad grad zero_grad detach backward _version eq ne lt le gt ge argmax argmin multinomial
  item int bool]]):gmatch("%S+") do
  NO_GRAD_NEEDED[name] = true
end
-- split and chunk call t:narrow per piece (src/ops/split.c), which records each view.
NO_GRAD_NEEDED.split, NO_GRAD_NEEDED.chunk = true, true
-- In-place writers besides fill: refused on a tracked first argument while recording.
local IN_PLACE = { fill = true, write_bytes = true, uniform_ = true, normal_ = true }

local function refuse_tracked(name, f)
  local cf = { f }
  return function(...)
    if recording then
      for i = 1, select("#", ...) do
        if tracked[(select(i, ...))] then
          error(("%s: no backward is registered for %s (autograd): call it under lumus.no_grad, on "
                 .. "t:detach(), or register one with lumus.autograd.register"):format(name, name), 2)
        end
      end
    end
    return pass(cf[ONE](...))
  end
end

local function install()
  if installed then return end
  installed = true
  for name in pairs(ops) do M.install_op(name) end
  -- the tensor ops and methods (lumus functions that are no methods take no tensors)
  for name, f in pairs(methods) do
    if type(f) == "function" and rawequal(f, raw[name]) and not ops[name] and not NO_GRAD_NEEDED[name]
       and not IN_PLACE[name] then
      local guarded = refuse_tracked(name, f)
      methods[name] = guarded
      -- lumus.<name> is this op unwrapped: the method's function, or on Lua 5.1 (where each
      -- registration of a C function is its own closure) the core table's
      local lf = rawget(M.lumus, name)
      if lf ~= nil and (rawequal(lf, f) or rawequal(lf, core[name])) then M.lumus[name] = guarded end
    end
  end
  for name in pairs(IN_PLACE) do
    local guarded = guard_in_place(name, raw[name], { 1 }, "t")
    methods[name] = guarded
    if rawget(M.lumus, name) ~= nil then M.lumus[name] = guarded end
  end
  local L = M.lumus
  Tensor.__add, Tensor.__sub, Tensor.__mul, Tensor.__div = L.add, L.sub, L.mul, L.div
  Tensor.__unm = function(t) return L.neg(t) end
end

--- A differentiable function written in Lua (as PyTorch's autograd.Function): returns a
-- function that runs f(...) with nothing recorded inside it and, when an argument at
-- entry.inputs requires grad, records one node with entry's save and backward (the
-- entry as for M.register). The losses use it (lua/lumus/loss.lua).
function M.function_op(name, entry, f)
  local function quiet(...)
    local was = recording
    recording = false
    local r = pack(pcall(f, ...))
    recording = was
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
  return wrap(name, entry, quiet)
end

---------------------------------------------------------------------------------------
-- Backward
---------------------------------------------------------------------------------------

local function check_versions(node)
  for k, v in pairs(node.versions or {}) do
    local t = node.saved[k]
    if raw.is_freed(t) then
      error(("backward: a tensor saved by %s (%s) has been freed"):format(node.name, k), 0)
    end
    local now = version(t)
    if now ~= v then
      error(("backward: a tensor saved by %s (%s) has been modified in place since (version %d, saved "
             .. "at %d); autograd needs its value from the forward pass"):format(node.name, k, now, v), 0)
    end
  end
end

local function accumulate(leaf, g)
  local old = grads[leaf]
  if old then grads[leaf] = raw.add(old, g) else grads[leaf] = raw.copy(g) end
end

-- Nodes reachable from root, each after every node that feeds it a gradient.
local function topo_order(root)
  local order, state = {}, {}
  local stack = { { root, 1 } }
  state[root] = 1
  while #stack > 0 do
    local top = stack[#stack]
    local n, i = top[1], top[2]
    local e = n.next[i]
    if i > #n.next then
      stack[#stack] = nil
      state[n] = 2
      order[#order + 1] = n
    else
      top[2] = i + 1
      if e and e.node and not state[e.node] then
        state[e.node] = 1
        stack[#stack + 1] = { e.node, 1 }
      end
    end
  end
  -- order is a post-order (inputs before consumers); backward runs it reversed
  return order
end

local function run_backward(t, grad, opts)
  local st = tracked[t]
  if not st then error("backward: the tensor does not require grad (no recorded op made it, and it is no leaf with requires_grad(true))", 0) end
  local shape = raw.shape(t)
  if grad == nil then
    if raw.numel(t) ~= 1 then error("backward: grad must be given for a non-scalar output", 0) end
    grad = raw.ones(shape)
  elseif not is_tensor(grad) then
    error(("backward: grad must be a tensor, got %s"):format(type(grad)), 0)
  elseif not same_shape(raw.shape(grad), shape) then
    error(("backward: grad has shape %s, the output %s"):format(shape_string(raw.shape(grad)), shape_string(shape)), 0)
  end
  local retain = option(opts, "retain_graph") and true or false
  if st.leaf then accumulate(t, grad) return end
  local order = topo_order(st.node)
  for i = 1, #order do
    if order[i].freed then
      error("backward: the graph has been freed: a second backward through it needs {retain_graph = true} in the first", 0)
    end
  end
  local buf = { [st.node] = grad }
  for i = #order, 1, -1 do
    local node = order[i]
    local g = buf[node]
    buf[node] = nil
    if g ~= nil then
      check_versions(node)
      local out = pack(node.backward(g, node.saved, node.need))
      for k, e in ipairs(node.next) do
        local gk = out[k]
        if e and gk ~= nil then
          if e.leaf then
            if tracked[e.leaf] then accumulate(e.leaf, gk) end   -- unless requires_grad(false) since
          else
            local old = buf[e.node]
            buf[e.node] = old and raw.add(old, gk) or gk
          end
        end
      end
    end
    if not retain then
      node.saved, node.versions, node.freed = nil, nil, true
    end
  end
end

---------------------------------------------------------------------------------------
-- The API
---------------------------------------------------------------------------------------

--- t:requires_grad(flag) marks a leaf (returns t); t:requires_grad() answers whether t
-- requires grad (a marked leaf, or the result of a recorded op).
local function requires_grad(t, flag)
  if not is_tensor(t) then error(("requires_grad: bad argument #1 (tensor expected, got %s)"):format(type(t)), 2) end
  if flag == nil then return tracked[t] ~= nil end
  if type(flag) ~= "boolean" then error(("requires_grad: bad argument #2 (boolean expected, got %s)"):format(type(flag)), 2) end
  if raw.is_freed(t) then error("requires_grad: tensor has been freed", 2) end
  local st = tracked[t]
  if st and st.node then
    error("requires_grad: only leaf tensors can change it (this one is the result of a recorded op; use t:detach())", 2)
  end
  if flag then
    if raw.dtype(t) ~= "float32" then
      error(("requires_grad: only float32 tensors can require grad, got %s"):format(raw.dtype(t)), 2)
    end
    install()
    tracked[t] = st or { leaf = true }
  else
    tracked[t] = nil
  end
  return t
end

local function grad_of(t)
  if not is_tensor(t) then error(("grad: bad argument #1 (tensor expected, got %s)"):format(type(t)), 2) end
  return grads[t]
end

local function zero_grad(t)
  if not is_tensor(t) then error(("zero_grad: bad argument #1 (tensor expected, got %s)"):format(type(t)), 2) end
  grads[t] = nil
  return t
end

local function detach(t)
  if not is_tensor(t) then error(("detach: bad argument #1 (tensor expected, got %s)"):format(type(t)), 2) end
  if raw.is_freed(t) then error("detach: tensor has been freed", 2) end
  return raw.narrow(t, 1, 1, raw.size(t, 1))   -- a new handle on the same elements
end

local function backward(t, grad, opts)
  if not is_tensor(t) then error(("backward: bad argument #1 (tensor expected, got %s)"):format(type(t)), 2) end
  if opts ~= nil then
    if type(opts) ~= "table" then error(("backward: options must be a table, got %s"):format(type(opts)), 2) end
    for k in next, opts do
      if k ~= "retain_graph" then error(("backward: unknown option '%s'"):format(tostring(k)), 2) end
    end
  end
  local was = recording
  recording = false
  local ok, err = pcall(run_backward, t, grad, opts)
  recording = was
  if not ok then error(err, 2) end
end

--- lumus.no_grad(fn, ...): fn(...) with nothing recorded; returns fn's results.
local function no_grad(fn, ...)
  if type(fn) ~= "function" then error(("no_grad: bad argument #1 (function expected, got %s)"):format(type(fn)), 2) end
  local was = recording
  recording = false
  local r = pack(pcall(fn, ...))
  recording = was
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end

--- lumus.is_grad_enabled(): false inside no_grad (and while backward runs).
local function is_grad_enabled() return recording end

-- Attaches the API to the lumus module table L (called by lumus/init.lua).
function M.attach(L)
  M.lumus = L
  methods.requires_grad = requires_grad
  methods.grad = grad_of
  methods.zero_grad = zero_grad
  methods.detach = detach
  methods.backward = backward
  L.no_grad = no_grad
  L.is_grad_enabled = is_grad_enabled
  L.detach = detach
  L.autograd = M
  package.loaded["lumus.autograd"] = M
end

return M
