--- lumus.loss: loss functions with their gradients (attached to the lumus table).
--
--   lumus.mse_loss(input, target [, {reduction = "mean"}])
--   lumus.cross_entropy(logits [N, C], target int32 [N] (1-based classes)
--                       [, {reduction = "mean", ignore_index = -100}])
--   lumus.binary_cross_entropy_with_logits(input, target [, {reduction = "mean", pos_weight =}])
--   lumus.l1_loss(input, target [, {reduction = "mean"}])              |input - target|
--   lumus.smooth_l1_loss(input, target [, {reduction = "mean", beta = 1}])
--   lumus.huber_loss(input, target [, {reduction = "mean", delta = 1}])
--   lumus.nll_loss(log_probs [N, C], target int32 [N] (1-based) [, {reduction = "mean",
--                  ignore_index = -100}])                               -log_probs[i, target[i]]
--   lumus.binary_cross_entropy(p, target [, {reduction = "mean", weight =}])   on probabilities
--   lumus.kl_div(input, target [, {reduction = "mean", log_target = false}])  input log-probs;
--                  reduction also "batchmean"
--
-- reduction "mean" (the default) and "sum" give a one-element tensor, "none" the
-- per-element (per-row for cross_entropy) losses. Each is recorded by autograd:
-- mse_loss as the ops it is made of, cross_entropy as lumus.cross_entropy_forward (one
-- fused log-softmax + NLL kernel, whose backward is lumus.cross_entropy_backward) and
-- the reduction, binary_cross_entropy_with_logits as one node with the closed-form
-- gradient. docs/losses.md has the formulas and the rules for bad targets.
local core = require "lumus.core"
local autograd = require "lumus.autograd"
local compat = require "lumus.compat"
local argcheck = require "lumus.argcheck"

local M = {}

local Tensor = core.Tensor
local raw = {}
for k, v in pairs(core) do if type(v) == "function" then raw[k] = v end end
for k, v in pairs(Tensor.methods) do if type(v) == "function" then raw[k] = v end end

local REDUCTIONS = { mean = true, sum = true, none = true }

local argerror = argcheck.argerror

local function shape_string(s) return table.concat(s, "x") end

local function check_tensor(name, n, v, what, dtype)
  return raw.shape(argcheck.tensor(name, n, v, what, dtype))
end

-- Reads the options table at argument n: known keys only (raw reads), a valid reduction.
local function check_options(name, n, opts, known)
  local out = argcheck.options(name, n, opts, known)
  if out.reduction ~= nil and not REDUCTIONS[out.reduction] then
    argerror(name, n, ("reduction must be \"mean\", \"sum\" or \"none\", got %s"):format(tostring(out.reduction)))
  end
  out.reduction = out.reduction or "mean"
  return out
end

local function same_shapes(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- target's shape must be input's (argument 2 of the loss `name`).
local function check_same_shape(name, xs, ts)
  if not same_shapes(xs, ts) then
    argerror(name, 2, ("target must have input's shape %s, got %s"):format(shape_string(xs), shape_string(ts)))
  end
end

local function reduce(L, loss, reduction)
  if reduction == "sum" then return L.sum(loss) end
  if reduction == "mean" then return L.mean(loss) end
  return loss
end

-- log1p(u) for u in [0, 1] from float32 ops: log(w) u / (w - 1) with w = 1 + u (exact
-- where w rounds to 1: then u itself), accurate to a few ulp (Goldberg's form).
local function log1p(u)
  local w = raw.add(u, 1)
  local d = raw.sub(w, 1)
  return raw.where(raw.eq(d, 0), u, raw.div(raw.mul(raw.log(w), u), d))
end

-- softplus(-x) = log(1 + e^-x) = log1p(e^-|x|) + max(-x, 0), without overflow.
local function softplus_neg(x)
  return raw.add(log1p(raw.exp(raw.neg(raw.abs(x)))), raw.relu(raw.neg(x)))
end

-- The elementwise BCE with logits: (1 - t) x + l softplus(-x), l = 1 + (pw - 1) t.
local bce_elements = autograd.function_op("binary_cross_entropy_with_logits", {
  inputs = { 1, 2, 3 },
  save = function(a) return { x = a[1], t = a[2], pw = a[3] } end,
  backward = function(g, s, need)
    local x, t, pw = s.x, s.t, s.pw
    local gx, gt, gpw
    local sp = (need[2] and pw or need[3]) and softplus_neg(x) or nil
    if need[1] then   -- (1 - t) - l sigmoid(-x)
      local sig = raw.sigmoid(raw.neg(x))
      local lsig = pw and raw.mul(raw.add(raw.mul(raw.sub(pw, 1), t), 1), sig) or sig
      gx = raw.mul(g, raw.sub(raw.sub(1, t), lsig))
    end
    if need[2] then   -- -x + (pw - 1) softplus(-x)
      local d = raw.neg(x)
      if pw then d = raw.add(d, raw.mul(raw.sub(pw, 1), sp)) end
      gt = raw.mul(g, d)
    end
    if need[3] then gpw = autograd.reduce_to(raw.mul(g, raw.mul(t, sp)), raw.shape(pw)) end
    return gx, gt, gpw
  end,
}, function(x, t, pw)
  -- max(x, 0) - x t + log1p(e^-|x|) [+ (pw - 1) t softplus(-x)]: the same value as the
  -- formula above, without its cancellation ((1 - t) x + softplus(-x) loses a tiny loss
  -- for t = 0 and a large negative x)
  local loss = raw.add(raw.sub(raw.relu(x), raw.mul(x, t)), log1p(raw.exp(raw.neg(raw.abs(x)))))
  if pw then loss = raw.add(loss, raw.mul(raw.mul(raw.sub(pw, 1), t), softplus_neg(x))) end
  return loss
end)

function M.attach(L)
  --- lumus.mse_loss(input, target [, {reduction =}]): (input - target)^2 reduced.
  function L.mse_loss(input, target, opts)
    local xs = check_tensor("mse_loss", 1, input, "input", "float32")
    local ts = check_tensor("mse_loss", 2, target, "target", "float32")
    local o = check_options("mse_loss", 3, opts, { reduction = true })
    check_same_shape("mse_loss", xs, ts)
    local d = L.sub(input, target)
    return reduce(L, L.mul(d, d), o.reduction)
  end

  --- lumus.cross_entropy(logits, target [, {reduction =, ignore_index =}])
  function L.cross_entropy(logits, target, opts)
    local xs = check_tensor("cross_entropy", 1, logits, "logits", "float32")
    if #xs ~= 2 then argerror("cross_entropy", 1, ("logits must be a matrix [N, C], got shape %s"):format(shape_string(xs))) end
    local ts = check_tensor("cross_entropy", 2, target, "target", "int32")
    if #ts ~= 1 or ts[1] ~= xs[1] then
      argerror("cross_entropy", 2, ("target must have shape [%d] (one 1-based class id per row of logits), got %s")
        :format(xs[1], shape_string(ts)))
    end
    local o = check_options("cross_entropy", 3, opts, { reduction = true, ignore_index = true })
    local ignore = o.ignore_index
    if ignore ~= nil and (not compat.is_integer(ignore) or ignore < -2 ^ 31 or ignore >= 2 ^ 31) then
      argerror("cross_entropy", 3, ("ignore_index must be an int32 integer, got %s"):format(tostring(ignore)))
    end
    local loss, _, weight = L.cross_entropy_forward(logits, target, ignore ~= nil and { ignore_index = ignore } or nil)
    if o.reduction == "none" then return loss end
    local total = L.sum(loss)
    if o.reduction == "sum" then return total end
    return L.div(total, raw.sum(weight))   -- over the rows not ignored (0 / 0 = NaN if none)
  end

  -- The elementwise losses of d = |input - target| (same shapes, float32).
  local function elementwise_loss(name, input, target, opts, param, default, f)
    local xs = check_tensor(name, 1, input, "input", "float32")
    local ts = check_tensor(name, 2, target, "target", "float32")
    local known = { reduction = true }
    if param then known[param] = true end
    local o = check_options(name, 3, opts, known)
    check_same_shape(name, xs, ts)
    local v = default
    if param and o[param] ~= nil then
      v = o[param]
      if type(v) ~= "number" or not (v >= 0) or v == math.huge then
        argerror(name, 3, ("%s must be a finite number >= 0, got %s"):format(param, tostring(v)))
      end
    end
    return reduce(L, f(L.abs(L.sub(input, target)), v), o.reduction)
  end

  --- lumus.l1_loss(input, target [, {reduction =}]): |input - target| reduced.
  function L.l1_loss(input, target, opts)
    return elementwise_loss("l1_loss", input, target, opts, nil, nil, function(d) return d end)
  end

  --- lumus.smooth_l1_loss(input, target [, {reduction =, beta = 1}]): 0.5 d^2 / beta where
  -- d < beta, else d - 0.5 beta (beta = 0: l1_loss).
  function L.smooth_l1_loss(input, target, opts)
    return elementwise_loss("smooth_l1_loss", input, target, opts, "beta", 1, function(d, beta)
      if beta == 0 then return d end
      return L.where(L.lt(d, beta), L.mul(L.mul(d, d), 0.5 / beta), L.sub(d, 0.5 * beta))
    end)
  end

  --- lumus.huber_loss(input, target [, {reduction =, delta = 1}]): 0.5 d^2 where d < delta,
  -- else delta (d - 0.5 delta).
  function L.huber_loss(input, target, opts)
    return elementwise_loss("huber_loss", input, target, opts, "delta", 1, function(d, delta)
      return L.where(L.lt(d, delta), L.mul(L.mul(d, d), 0.5), L.mul(L.sub(d, 0.5 * delta), delta))
    end)
  end

  --- lumus.nll_loss(log_probs, target [, {reduction =, ignore_index =}]): -log_probs[i, t_i]
  -- per row, by gather; a row whose target is ignore_index gives 0 and does not count
  -- toward the mean; a target outside 1..C gives NaN (cross_entropy's rules).
  function L.nll_loss(log_probs, target, opts)
    local name = "nll_loss"
    local xs = check_tensor(name, 1, log_probs, "log_probs", "float32")
    if #xs ~= 2 then argerror(name, 1, ("log_probs must be a matrix [N, C], got shape %s"):format(shape_string(xs))) end
    local ts = check_tensor(name, 2, target, "target", "int32")
    if #ts ~= 1 or ts[1] ~= xs[1] then
      argerror(name, 2, ("target must have shape [%d] (one 1-based class id per row), got %s"):format(xs[1], shape_string(ts)))
    end
    local o = check_options(name, 3, opts, { reduction = true, ignore_index = true })
    local ignore = o.ignore_index == nil and -100 or o.ignore_index
    if not compat.is_integer(ignore) or ignore < -2 ^ 31 or ignore >= 2 ^ 31 then
      argerror(name, 3, ("ignore_index must be an int32 integer, got %s"):format(tostring(ignore)))
    end
    local n, c = xs[1], xs[2]
    local t = raw.float(target)       -- class ids as floats: exact below 2^24
    local ignored = raw.eq(t, ignore)
    local valid = raw.gt(raw.mul(raw.float(raw.ge(t, 1)), raw.float(raw.le(t, c))), 0)
    local ids = raw.int(raw.where(valid, t, 1))
    local picked = L.gather(log_probs, 2, raw.reshape(ids, { n, 1 })):reshape({ n })
    local loss = L.where(ignored, 0, L.where(valid, L.neg(picked), 0 / 0))
    if o.reduction == "none" then return loss end
    local total = L.sum(loss)
    if o.reduction == "sum" then return total end
    return L.div(total, raw.sum(raw.float(raw.eq(raw.float(ignored), 0))))   -- rows not ignored
  end

  --- lumus.binary_cross_entropy(input, target [, {reduction =, weight =}]): -(t log p +
  -- (1 - t) log(1 - p)) on probabilities p, each log clamped at -100 (PyTorch's: p = 0 or
  -- 1 gives a finite loss); p outside [0, 1] raises (read back: one wait).
  function L.binary_cross_entropy(input, target, opts)
    local name = "binary_cross_entropy"
    local xs = check_tensor(name, 1, input, "input", "float32")
    local ts = check_tensor(name, 2, target, "target", "float32")
    local o = check_options(name, 3, opts, { reduction = true, weight = true })
    check_same_shape(name, xs, ts)
    if raw.numel(input) > 0 then
      local lo, hi = raw.min(input):to_table()[1], raw.max(input):to_table()[1]
      if not (lo >= 0 and hi <= 1) then
        argerror(name, 1, ("input must hold probabilities in [0, 1], got %s"):format(tostring(lo < 0 and lo or hi)))
      end
    end
    local lp = L.maximum(L.log(input), -100)
    local lq = L.maximum(L.log(L.sub(1, input)), -100)
    local loss = L.neg(L.add(L.mul(target, lp), L.mul(L.sub(1, target), lq)))
    if o.weight ~= nil then
      check_tensor(name, 3, o.weight, "weight", "float32")
      loss = L.mul(loss, o.weight)
      if not same_shapes(raw.shape(loss), xs) then argerror(name, 3, "weight must broadcast to input's shape") end
    end
    return reduce(L, loss, o.reduction)
  end

  --- lumus.kl_div(input, target [, {reduction =, log_target = false}]): target (log target
  -- - input) with input log-probabilities, 0 where target is 0 (log_target: exp(target)
  -- (target - input)). reduction also "batchmean": the sum over the first dimension's size
  -- (the true KL divergence per sample; "mean" divides by every element, as PyTorch).
  function L.kl_div(input, target, opts)
    local name = "kl_div"
    local xs = check_tensor(name, 1, input, "input", "float32")
    local ts = check_tensor(name, 2, target, "target", "float32")
    local o = argcheck.options(name, 3, opts, { reduction = true, log_target = true })
    local red = o.reduction == nil and "mean" or o.reduction
    if red ~= "batchmean" and not REDUCTIONS[red] then
      argerror(name, 3, ("reduction must be \"mean\", \"batchmean\", \"sum\" or \"none\", got %s"):format(tostring(red)))
    end
    if o.log_target ~= nil and type(o.log_target) ~= "boolean" then
      argerror(name, 3, ("log_target must be a boolean, got %s"):format(type(o.log_target)))
    end
    check_same_shape(name, xs, ts)
    local loss
    if o.log_target then
      loss = L.mul(L.exp(target), L.sub(target, input))
    else
      -- xlogy(t, t): 0 at t = 0 (log 0 = -inf would give NaN)
      local tlogt = L.where(L.eq(target, 0), 0, L.mul(target, L.log(target)))
      loss = L.sub(tlogt, L.mul(target, input))
    end
    if red == "batchmean" then
      local n = #xs > 0 and xs[1] or 1
      return L.div(L.sum(loss), n)
    end
    return reduce(L, loss, red)
  end

  --- lumus.binary_cross_entropy_with_logits(input, target [, {reduction =, pos_weight =}])
  function L.binary_cross_entropy_with_logits(input, target, opts)
    local name = "binary_cross_entropy_with_logits"
    local xs = check_tensor(name, 1, input, "input", "float32")
    local ts = check_tensor(name, 2, target, "target", "float32")
    local o = check_options(name, 3, opts, { reduction = true, pos_weight = true })
    check_same_shape(name, xs, ts)
    local pw = o.pos_weight
    if pw ~= nil then
      if getmetatable(pw) ~= Tensor then argerror(name, 3, ("pos_weight must be a tensor, got %s"):format(type(pw))) end
      local ps = check_tensor(name, 3, pw, "pos_weight", "float32")
      if #ps ~= 1 or ps[1] ~= xs[#xs] then
        argerror(name, 3, ("pos_weight must have shape [%d] (the last dimension of input), got %s")
          :format(xs[#xs], shape_string(ps)))
      end
    end
    return reduce(L, bce_elements(input, target, pw), o.reduction)
  end
end

return M
