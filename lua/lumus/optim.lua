--- lumus.optim: optimizers and learning-rate schedulers with torch.optim's semantics.
--
--   local optim = require("lumus").optim
--   local opt = optim.AdamW(model:parameters(), { lr = 1e-3, weight_decay = 1e-2 })
--   local sched = optim.lr_scheduler.CosineAnnealingLR(opt, 1000)
--   for step = 1, 1000 do
--     opt:zero_grad()
--     local loss = loss_of(model(x), y)
--     loss:backward()
--     opt:step()
--     sched:step()
--   end
--
-- Optimizers (params: a list of float32 tensors, or a list of groups {params = {...},
-- lr = ..., <any option>}, options missing from a group come from the constructor's):
--   optim.SGD(params [, {lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false}])
--   optim.Adam(params [, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false}])
--   optim.AdamW(params [, {... as Adam, weight_decay = 1e-2}])     decoupled weight decay
-- Each step is one dispatch per parameter that has a gradient (lumus.sgd_step_ /
-- lumus.adam_step_: shaders/optim.comp reads param, grad and state and writes param and
-- state in one pass); the scalars (lr / bias_correction1, sqrt(bias_correction2), ...)
-- are computed on the host in double precision. A parameter without a gradient
-- (p:grad() == nil) is skipped, and its step count does not advance, as in PyTorch.
--
--   opt:step([closure])             one update of every parameter; returns closure()'s
--                                   result when given (called first)
--   opt:zero_grad([set_to_none = true])   drops the gradients (false: fills them with 0)
--   opt.param_groups[i].lr          the group's options, read and changed in place
--   opt.state[p]                    {step =, exp_avg =, exp_avg_sq = [, max_exp_avg_sq =]}
--                                   or {momentum_buffer =} (SGD with momentum)
--   opt:add_param_group(group)
--   opt:state_dict()                {state = {[k] = {step =, <name> = tensor, ...}},
--                                   param_groups = {{lr =, ..., params = {k, ...}}}}; k
--                                   numbers the parameters in group order; the tensors
--                                   are copies, so later steps do not change it
--   opt:load_state_dict(sd)         the inverse (copies again); groups and parameter
--                                   counts and shapes must match
--
-- Schedulers (optim.lr_scheduler; each sets its groups' lr in closed form from the epoch
-- count, which starts at 0 at construction and advances by one per sched:step()):
--   StepLR(opt, step_size [, gamma = 0.1])             base_lr * gamma^floor(epoch / step_size)
--   CosineAnnealingLR(opt, T_max [, eta_min = 0])      eta_min + (base_lr - eta_min)(1 + cos(pi epoch / T_max)) / 2
--   LinearLR(opt [, {start_factor = 1/3, end_factor = 1, total_iters = 5}])
--                                                      base_lr (start + (end - start) min(epoch, total) / total)
--   SequentialLR(opt, {s1, s2, ...}, {m1, ...})        s1 until epoch m1, then s2 from its epoch 0, ...
--   warmup_cosine(opt, warmup, T_max [, eta_min = 0])  LinearLR from 1/warmup to 1 over
--                                                      warmup steps, then cosine over T_max - warmup
--   sched:step(), sched:get_last_lr() (a list, one lr per group), sched.last_epoch,
--   sched:state_dict(), sched:load_state_dict(sd)
local lumus = require "lumus"
local core = require "lumus.core"

local M = {}

local Tensor = lumus.Tensor
local function is_tensor(v) return getmetatable(v) == Tensor end
local function is_integer(v) return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 end

local function sorted_keys(t)
  local names = {}
  for k in pairs(t) do names[#names + 1] = tostring(k) end
  table.sort(names)
  return table.concat(names, ", ")
end

---------------------------------------------------------------------------------------
-- Options

-- Checks one option value; `fname` names the caller in messages.
local CHECKS = {
  lr = function(v) return type(v) == "number" and v >= 0 and v < math.huge, "a number >= 0" end,
  momentum = function(v) return type(v) == "number" and v >= 0 and v < math.huge, "a number >= 0" end,
  dampening = function(v) return type(v) == "number" and v >= 0 and v < math.huge, "a number >= 0" end,
  weight_decay = function(v) return type(v) == "number" and v >= 0 and v < math.huge, "a number >= 0" end,
  eps = function(v) return type(v) == "number" and v >= 0 and v < math.huge, "a number >= 0" end,
  nesterov = function(v) return type(v) == "boolean", "a boolean" end,
  amsgrad = function(v) return type(v) == "boolean", "a boolean" end,
  betas = function(v)
    return type(v) == "table" and type(v[1]) == "number" and type(v[2]) == "number"
      and v[1] >= 0 and v[1] < 1 and v[2] >= 0 and v[2] < 1 and v[3] == nil,
      "a pair {beta1, beta2} of numbers in [0, 1)"
  end,
}

local function check_option(fname, key, v, level)
  local ok, what = CHECKS[key](v)
  if not ok then
    error(("%s: option %s must be %s, got %s"):format(fname, key, what,
      type(v) == "number" and tostring(v) or type(v)), level + 1)
  end
end

-- The group's options: defaults overridden by `given` (unknown keys raise).
local function group_options(fname, defaults, given, level, allow_params)
  local g = {}
  for k, v in pairs(defaults) do g[k] = v end
  for k, v in pairs(given) do
    if k == "params" and allow_params then
      -- handled by the caller
    elseif defaults[k] == nil then
      error(("%s: unknown option '%s' (known: %s)"):format(fname, tostring(k), sorted_keys(defaults)), level + 1)
    else
      check_option(fname, k, v, level + 1)
      if k == "betas" then v = { v[1], v[2] } end
      g[k] = v
    end
  end
  return g
end

---------------------------------------------------------------------------------------
-- Optimizer

local Optimizer = {}
Optimizer.__index = Optimizer
M.Optimizer = Optimizer

local function check_params(fname, list, seen, level)
  if type(list) ~= "table" or is_tensor(list) then
    error(("%s: params must be a list of tensors, got %s"):format(fname, is_tensor(list) and "a tensor" or type(list)), level + 1)
  end
  local out = {}
  for i, p in ipairs(list) do
    if not is_tensor(p) then
      error(("%s: params[%d] must be a tensor, got %s"):format(fname, i, type(p)), level + 1)
    end
    if p:is_freed() then error(("%s: params[%d] has been freed"):format(fname, i), level + 1) end
    if p:dtype() ~= "float32" then
      error(("%s: params[%d] must be float32, got %s"):format(fname, i, p:dtype()), level + 1)
    end
    if not p:is_contiguous() then
      error(("%s: params[%d] must be contiguous (a parameter is updated in place)"):format(fname, i), level + 1)
    end
    if seen[p] then error(("%s: params[%d] appears in more than one place"):format(fname, i), level + 1) end
    seen[p] = true
    out[i] = p
  end
  return out
end

function Optimizer:add_param_group(group, level)
  level = level or 2
  local fname = self._name .. ":add_param_group"
  if type(group) ~= "table" or type(group.params) ~= "table" then
    error(("%s: a group {params = {...}, <options>} expected"):format(fname), level)
  end
  local seen = {}
  for _, g in ipairs(self.param_groups) do for _, p in ipairs(g.params) do seen[p] = true end end
  local g = group_options(self._name, self.defaults, group, level, true)
  g.params = check_params(self._name, group.params, seen, level)
  self.param_groups[#self.param_groups + 1] = g
  return self
end

local function new_optimizer(cls, name, defaults, params, opts)
  local level = 3
  if opts ~= nil and type(opts) ~= "table" then
    error(("%s: options must be a table, got %s"):format(name, type(opts)), level)
  end
  local self = setmetatable({ _name = name, param_groups = {}, state = {} }, cls)
  self.defaults = group_options(name, defaults, opts or {}, level)
  if type(params) ~= "table" or is_tensor(params) then
    error(("%s: params must be a list of tensors or of groups {params = {...}}, got %s")
      :format(name, is_tensor(params) and "a tensor" or type(params)), level)
  end
  if #params == 0 then error(("%s: params is an empty list"):format(name), level) end
  if is_tensor(params[1]) then
    self:add_param_group({ params = params }, level + 1)
  else
    for i, g in ipairs(params) do
      if type(g) ~= "table" or type(g.params) ~= "table" then
        error(("%s: params[%d] must be a tensor or a group {params = {...}}"):format(name, i), level)
      end
      self:add_param_group(g, level + 1)
    end
  end
  return self
end

local function class(name, parent)
  local cls = setmetatable({}, { __index = parent })
  cls.__index = cls
  cls.__name = "lumus.optim." .. name
  cls.__tostring = function(self)
    local lines = { name .. " (" }
    for i, g in ipairs(self.param_groups) do
      local keys = {}
      for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = k end end
      table.sort(keys)
      lines[#lines + 1] = ("  group %d: %d parameters"):format(i, #g.params)
      for _, k in ipairs(keys) do
        local v = g[k]
        if type(v) == "table" then v = "{" .. table.concat(v, ", ") .. "}" end
        lines[#lines + 1] = ("    %s: %s"):format(k, tostring(v))
      end
    end
    lines[#lines + 1] = ")"
    return table.concat(lines, "\n")
  end
  return cls
end

function Optimizer:zero_grad(set_to_none)
  if set_to_none ~= nil and type(set_to_none) ~= "boolean" then
    error(("%s:zero_grad: set_to_none must be a boolean, got %s"):format(self._name, type(set_to_none)), 2)
  end
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      if set_to_none == false then
        local gr = p:grad()
        if gr then core.fill(gr, 0) end
      else
        p:zero_grad()
      end
    end
  end
end

-- The gradient the kernel reads: contiguous, float32, of p's shape.
local function grad_for(self, p)
  local g = p:grad()
  if g == nil then return nil end
  if g:is_freed() then error(("%s:step: a gradient has been freed"):format(self._name), 3) end
  if not g:is_contiguous() then g = core.contiguous(g) end
  return g
end

function Optimizer:step(closure)
  local loss
  if closure ~= nil then
    if type(closure) ~= "function" then
      error(("%s:step: closure must be a function, got %s"):format(self._name, type(closure)), 2)
    end
    loss = closure()
  end
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local g = grad_for(self, p)
      if g then
        if p:is_freed() then error(("%s:step: a parameter has been freed"):format(self._name), 2) end
        self:_update(p, g, group)
      end
    end
  end
  return loss
end

-- State tensors of each kind, in the order state_dict lists them.
local STATE_TENSORS = { "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq" }

function Optimizer:state_dict()
  local sd = { state = {}, param_groups = {} }
  local k = 0
  for gi, group in ipairs(self.param_groups) do
    local g = { params = {} }
    for key, v in pairs(group) do
      if key ~= "params" then g[key] = type(v) == "table" and { v[1], v[2] } or v end
    end
    for _, p in ipairs(group.params) do
      k = k + 1
      g.params[#g.params + 1] = k
      local st = self.state[p]
      if st then
        local s = { step = st.step }
        for _, name in ipairs(STATE_TENSORS) do
          if st[name] then s[name] = core.copy(st[name]) end
        end
        sd.state[k] = s
      end
    end
    sd.param_groups[gi] = g
  end
  return sd
end

function Optimizer:load_state_dict(sd)
  local fname = self._name .. ":load_state_dict"
  if type(sd) ~= "table" or type(sd.state) ~= "table" or type(sd.param_groups) ~= "table" then
    error(("%s: a table {state =, param_groups =} expected"):format(fname), 2)
  end
  if #sd.param_groups ~= #self.param_groups then
    error(("%s: %d parameter groups given, the optimizer has %d"):format(fname, #sd.param_groups, #self.param_groups), 2)
  end
  local by_index = {}
  for gi, group in ipairs(self.param_groups) do
    local g = sd.param_groups[gi]
    if type(g) ~= "table" or type(g.params) ~= "table" or #g.params ~= #group.params then
      error(("%s: group %d has %d parameters, the given one %s"):format(fname, gi, #group.params,
        type(g) == "table" and type(g.params) == "table" and tostring(#g.params) or "none"), 2)
    end
    for i, p in ipairs(group.params) do by_index[g.params[i]] = p end
  end
  -- check everything before changing anything
  for k, s in pairs(sd.state) do
    local p = by_index[k]
    if not p then error(("%s: state for parameter %s, which no group lists"):format(fname, tostring(k)), 2) end
    if type(s) ~= "table" then error(("%s: state[%s] must be a table"):format(fname, tostring(k)), 2) end
    if s.step ~= nil and not is_integer(s.step) then
      error(("%s: state[%s].step must be an integer"):format(fname, tostring(k)), 2)
    end
    for _, name in ipairs(STATE_TENSORS) do
      local t = s[name]
      if t ~= nil then
        if not is_tensor(t) or t:is_freed() or t:dtype() ~= "float32" then
          error(("%s: state[%s].%s must be a live float32 tensor"):format(fname, tostring(k), name), 2)
        end
        local a, b = table.concat(t:shape(), "x"), table.concat(p:shape(), "x")
        if a ~= b then
          error(("%s: state[%s].%s has shape %s, the parameter %s"):format(fname, tostring(k), name, a, b), 2)
        end
      end
    end
  end
  for gi, group in ipairs(self.param_groups) do
    for key, v in pairs(sd.param_groups[gi]) do
      if key ~= "params" then
        if self.defaults[key] == nil then
          error(("%s: group %d has unknown option '%s'"):format(fname, gi, tostring(key)), 2)
        end
        check_option(fname, key, v, 2)
        group[key] = type(v) == "table" and { v[1], v[2] } or v
      end
    end
  end
  self.state = {}
  for k, s in pairs(sd.state) do
    local st = { step = s.step }
    for _, name in ipairs(STATE_TENSORS) do
      if s[name] then st[name] = core.copy(s[name]) end
    end
    self.state[by_index[k]] = st
  end
end

---------------------------------------------------------------------------------------
-- SGD

local SGD = class("SGD", Optimizer)
M.SGD = setmetatable(SGD, { __index = Optimizer, __call = function(cls, params, opts)
  local self = new_optimizer(cls, "optim.SGD",
    { lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false }, params, opts)
  for _, g in ipairs(self.param_groups) do
    if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
      error("optim.SGD: nesterov momentum requires a momentum and zero dampening", 2)
    end
  end
  return self
end })

function SGD:_update(p, g, group)
  local st = self.state[p]
  if not st then st = {}; self.state[p] = st end
  local opts = { lr = group.lr, momentum = group.momentum, dampening = group.dampening,
                 weight_decay = group.weight_decay, nesterov = group.nesterov }
  if group.momentum ~= 0 then
    if not st.momentum_buffer then
      st.momentum_buffer = core.empty(p:shape())
      opts.first = true
    end
    opts.momentum_buffer = st.momentum_buffer
  end
  st.step = (st.step or 0) + 1
  core.sgd_step_(p, g, opts)
end

---------------------------------------------------------------------------------------
-- Adam, AdamW

local function adam_class(name, weight_decay, decoupled)
  local cls = class(name, Optimizer)
  M[name] = setmetatable(cls, { __index = Optimizer, __call = function(c, params, opts)
    return new_optimizer(c, "optim." .. name,
      { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = weight_decay, amsgrad = false }, params, opts)
  end })
  function cls:_update(p, g, group)
    local st = self.state[p]
    if not st then
      st = { step = 0, exp_avg = core.zeros(p:shape()), exp_avg_sq = core.zeros(p:shape()) }
      self.state[p] = st
    end
    if group.amsgrad and not st.max_exp_avg_sq then st.max_exp_avg_sq = core.zeros(p:shape()) end
    st.step = st.step + 1
    core.adam_step_(p, g, {
      exp_avg = st.exp_avg, exp_avg_sq = st.exp_avg_sq,
      max_exp_avg_sq = group.amsgrad and st.max_exp_avg_sq or nil,
      step = st.step, lr = group.lr, beta1 = group.betas[1], beta2 = group.betas[2], eps = group.eps,
      weight_decay = group.weight_decay, decoupled = decoupled,
    })
  end
  return cls
end
adam_class("Adam", 0, false)
adam_class("AdamW", 1e-2, true)

---------------------------------------------------------------------------------------
-- Learning-rate schedulers

local lr_scheduler = {}
M.lr_scheduler = lr_scheduler

local Scheduler = {}
Scheduler.__index = Scheduler

local function check_optimizer(fname, opt)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    error(("%s: an optimizer expected, got %s"):format(fname, type(opt)), 4)
  end
end

-- A scheduler whose lr for base lr b at epoch e is factor(b, e); sets it for epoch 0.
local function new_scheduler(name, opt, lr_at)
  local self = setmetatable({ _name = name, optimizer = opt, lr_at = lr_at, last_epoch = 0, base_lrs = {} }, Scheduler)
  for i, g in ipairs(opt.param_groups) do
    if g.initial_lr == nil then g.initial_lr = g.lr end
    self.base_lrs[i] = g.initial_lr
  end
  self:_apply()
  return self
end

function Scheduler:_apply()
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    g.lr = self.lr_at(self.base_lrs[i], self.last_epoch)
    self._last_lr[i] = g.lr
  end
end

function Scheduler:step()
  self.last_epoch = self.last_epoch + 1
  self:_apply()
end

function Scheduler:get_last_lr()
  local out = {}
  for i, v in ipairs(self._last_lr) do out[i] = v end
  return out
end

function Scheduler:state_dict()
  local base = {}
  for i, v in ipairs(self.base_lrs) do base[i] = v end
  return { last_epoch = self.last_epoch, base_lrs = base }
end

function Scheduler:load_state_dict(sd)
  if type(sd) ~= "table" or not is_integer(sd.last_epoch) or type(sd.base_lrs) ~= "table" then
    error(("%s:load_state_dict: a table {last_epoch =, base_lrs =} expected"):format(self._name), 2)
  end
  self.last_epoch = sd.last_epoch
  for i, v in ipairs(sd.base_lrs) do self.base_lrs[i] = v end
  self:_apply()
end

local function positive_integer(fname, what, v)
  if not is_integer(v) or v < 1 then
    error(("%s: %s must be a positive integer, got %s"):format(fname, what, tostring(v)), 4)
  end
  return v
end

local function number_arg(fname, what, v, dflt)
  if v == nil then return dflt end
  if type(v) ~= "number" or v ~= v then
    error(("%s: %s must be a number, got %s"):format(fname, what, tostring(v)), 4)
  end
  return v
end

function lr_scheduler.StepLR(opt, step_size, gamma)
  local fname = "optim.lr_scheduler.StepLR"
  check_optimizer(fname, opt)
  step_size = positive_integer(fname, "step_size", step_size)
  gamma = number_arg(fname, "gamma", gamma, 0.1)
  return new_scheduler(fname, opt, function(base, e) return base * gamma ^ math.floor(e / step_size) end)
end

function lr_scheduler.CosineAnnealingLR(opt, T_max, eta_min)
  local fname = "optim.lr_scheduler.CosineAnnealingLR"
  check_optimizer(fname, opt)
  T_max = positive_integer(fname, "T_max", T_max)
  eta_min = number_arg(fname, "eta_min", eta_min, 0)
  return new_scheduler(fname, opt, function(base, e)
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * e / T_max)) / 2
  end)
end

local function linear_factor(s, f, total)
  return function(base, e) return base * (s + (f - s) * math.min(e, total) / total) end
end

function lr_scheduler.LinearLR(opt, opts)
  local fname = "optim.lr_scheduler.LinearLR"
  check_optimizer(fname, opt)
  if opts ~= nil and type(opts) ~= "table" then error(("%s: options must be a table"):format(fname), 2) end
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "start_factor" and k ~= "end_factor" and k ~= "total_iters" then
      error(("%s: unknown option '%s' (known: end_factor, start_factor, total_iters)"):format(fname, tostring(k)), 2)
    end
  end
  local s = number_arg(fname, "start_factor", opts.start_factor, 1 / 3)
  local f = number_arg(fname, "end_factor", opts.end_factor, 1)
  if not (s > 0 and s <= 1) or not (f >= 0 and f <= 1) then
    error(("%s: start_factor must be in (0, 1] and end_factor in [0, 1]"):format(fname), 2)
  end
  local total = positive_integer(fname, "total_iters", opts.total_iters == nil and 5 or opts.total_iters)
  return new_scheduler(fname, opt, linear_factor(s, f, total))
end

function lr_scheduler.SequentialLR(opt, schedulers, milestones)
  local fname = "optim.lr_scheduler.SequentialLR"
  check_optimizer(fname, opt)
  if type(schedulers) ~= "table" or #schedulers < 1 then
    error(("%s: schedulers must be a non-empty list"):format(fname), 2)
  end
  if type(milestones) ~= "table" or #milestones ~= #schedulers - 1 then
    error(("%s: milestones must list %d epochs (one fewer than the schedulers)"):format(fname, #schedulers - 1), 2)
  end
  for i, s in ipairs(schedulers) do
    if getmetatable(s) ~= Scheduler or s.optimizer ~= opt then
      error(("%s: schedulers[%d] must be a scheduler of the same optimizer"):format(fname, i), 2)
    end
  end
  for i, m in ipairs(milestones) do
    if not is_integer(m) or m < 1 or (i > 1 and m <= milestones[i - 1]) then
      error(("%s: milestones must be increasing positive integers"):format(fname), 2)
    end
  end
  return new_scheduler(fname, opt, function(base, e)
    local i, start = 1, 0
    while milestones[i] and e >= milestones[i] do start = milestones[i]; i = i + 1 end
    return schedulers[i].lr_at(base, e - start)
  end)
end

--- Linear warmup from base_lr / warmup to base_lr over `warmup` steps, then cosine
-- annealing to eta_min over the remaining T_max - warmup.
function lr_scheduler.warmup_cosine(opt, warmup, T_max, eta_min)
  local fname = "optim.lr_scheduler.warmup_cosine"
  check_optimizer(fname, opt)
  warmup = positive_integer(fname, "warmup", warmup)
  T_max = positive_integer(fname, "T_max", T_max)
  if T_max <= warmup then error(("%s: T_max must be larger than warmup"):format(fname), 2) end
  eta_min = number_arg(fname, "eta_min", eta_min, 0)
  local warm = linear_factor(1 / warmup, 1, warmup)
  local rest = T_max - warmup
  return new_scheduler(fname, opt, function(base, e)
    if e < warmup then return warm(base, e) end
    return eta_min + (base - eta_min) * (1 + math.cos(math.pi * (e - warmup) / rest)) / 2
  end)
end

return M
