---@meta lumus.optim
-- Lua Language Server definitions for lumus.optim (see meta/lumus.lua): PyTorch's
-- optimizers and learning-rate schedulers, one fused kernel per parameter and step.

---@class lumus.optim.ParamGroup
---@field params lumus.Tensor[]
---@field lr? number
---@field [string] any the optimizer's other options (momentum, betas, weight_decay, ...)

---The base of every optimizer.
---@class lumus.optim.Optimizer
---@field param_groups lumus.optim.ParamGroup[]
---@field state table<lumus.Tensor, table> per parameter: step, exp_avg, momentum_buffer, ...
local Optimizer = {}

---Updates every parameter that has a gradient; returns closure()'s result.
---@param closure? fun(): any
---@return any
function Optimizer:step(closure) end

---Drops the gradients (false: fills them with 0).
---@param set_to_none? boolean default true
function Optimizer:zero_grad(set_to_none) end

---Adds a group {params = {...}, lr = , ...} (options default to the optimizer's).
---@param group lumus.optim.ParamGroup
function Optimizer:add_param_group(group) end

---{state = {[k] = {step =, exp_avg =, ...}}, param_groups = {...}} with tensor copies.
---@return table
function Optimizer:state_dict() end

---Restores a state_dict (exact round trip).
---@param sd table
function Optimizer:load_state_dict(sd) end

---torch.optim.SGD.
---@class lumus.optim.SGD : lumus.optim.Optimizer
---@overload fun(params: lumus.Tensor[]|lumus.optim.ParamGroup[], opts?: {lr?: number, momentum?: number, dampening?: number, weight_decay?: number, nesterov?: boolean}): lumus.optim.SGD
local SGD = {}

---torch.optim.Adam (L2 weight decay).
---@class lumus.optim.Adam : lumus.optim.Optimizer
---@overload fun(params: lumus.Tensor[]|lumus.optim.ParamGroup[], opts?: {lr?: number, betas?: number[], eps?: number, weight_decay?: number, amsgrad?: boolean}): lumus.optim.Adam
local Adam = {}

---torch.optim.AdamW (decoupled weight decay, default 1e-2).
---@class lumus.optim.AdamW : lumus.optim.Optimizer
---@overload fun(params: lumus.Tensor[]|lumus.optim.ParamGroup[], opts?: {lr?: number, betas?: number[], eps?: number, weight_decay?: number, amsgrad?: boolean}): lumus.optim.AdamW
local AdamW = {}

---Sets each group's lr in closed form from the epoch count (0 at construction, +1 per step).
---@class lumus.optim.LRScheduler
---@field optimizer lumus.optim.Optimizer
---@field last_epoch integer
---@field base_lrs number[]
local LRScheduler = {}

---Advances one epoch and sets the groups' lr.
function LRScheduler:step() end

---The lr of each group.
---@return number[]
function LRScheduler:get_last_lr() end

---@return table
function LRScheduler:state_dict() end

---@param sd table
function LRScheduler:load_state_dict(sd) end

---@class lumus.optim.lr_scheduler
local lr_scheduler = {}

---base_lr * gamma^floor(epoch / step_size).
---@param opt lumus.optim.Optimizer
---@param step_size integer
---@param gamma? number default 0.1
---@return lumus.optim.LRScheduler
function lr_scheduler.StepLR(opt, step_size, gamma) end

---eta_min + (base_lr - eta_min)(1 + cos(pi epoch / T_max)) / 2.
---@param opt lumus.optim.Optimizer
---@param T_max integer
---@param eta_min? number default 0
---@return lumus.optim.LRScheduler
function lr_scheduler.CosineAnnealingLR(opt, T_max, eta_min) end

---A linear factor ramp.
---@param opt lumus.optim.Optimizer
---@param opts? {start_factor?: number, end_factor?: number, total_iters?: integer}
---@return lumus.optim.LRScheduler
function lr_scheduler.LinearLR(opt, opts) end

---schedulers[1] until epoch milestones[1], then schedulers[2] from its epoch 0, ...
---@param opt lumus.optim.Optimizer
---@param schedulers lumus.optim.LRScheduler[]
---@param milestones integer[]
---@return lumus.optim.LRScheduler
function lr_scheduler.SequentialLR(opt, schedulers, milestones) end

---Linear warmup, then cosine annealing.
---@param opt lumus.optim.Optimizer
---@param warmup integer
---@param T_max integer
---@param eta_min? number default 0
---@return lumus.optim.LRScheduler
function lr_scheduler.warmup_cosine(opt, warmup, T_max, eta_min) end

---@class lumus.optim
local optim = {}

optim.Optimizer = Optimizer
optim.SGD = SGD
optim.Adam = Adam
optim.AdamW = AdamW
optim.lr_scheduler = lr_scheduler

return optim
