---@meta lumus.optim
-- Lua Language Server definitions for lumus.optim (see meta/lumus.lua).

---@class lumus.optim.Adam
local Adam = {}

---@class lumus.optim.AdamW
local AdamW = {}

---@class lumus.optim.LRScheduler
local LRScheduler = {}

---@return any
function LRScheduler:get_last_lr() end

---@param sd any
---@return any
function LRScheduler:load_state_dict(sd) end

---@return any
function LRScheduler:state_dict() end

---@return any
function LRScheduler:step() end

---@class lumus.optim.Optimizer
local Optimizer = {}

---@param group any
---@param level any
---@return any
function Optimizer:add_param_group(group, level) end

---@param sd any
---@return any
function Optimizer:load_state_dict(sd) end

---@return any
function Optimizer:state_dict() end

---@param closure any
---@return any
function Optimizer:step(closure) end

---@param set_to_none any
---@return any
function Optimizer:zero_grad(set_to_none) end

---@class lumus.optim.SGD
local SGD = {}

---@class lumus.optim.lr_scheduler
local lr_scheduler = {}

---@param opt any
---@param T_max any
---@param eta_min any
---@return any
function lr_scheduler.CosineAnnealingLR(opt, T_max, eta_min) end

---@param opt any
---@param opts any
---@return any
function lr_scheduler.LinearLR(opt, opts) end

---@param opt any
---@param schedulers any
---@param milestones any
---@return any
function lr_scheduler.SequentialLR(opt, schedulers, milestones) end

---@param opt any
---@param step_size any
---@param gamma any
---@return any
function lr_scheduler.StepLR(opt, step_size, gamma) end

---@param opt any
---@param warmup any
---@param T_max any
---@param eta_min any
---@return any
function lr_scheduler.warmup_cosine(opt, warmup, T_max, eta_min) end

---@class lumus.optim
local optim = {}

---@type table
optim.Adam = {}

---@type table
optim.AdamW = {}

---@type table
optim.Optimizer = {}

---@type table
optim.SGD = {}

---@type table
optim.lr_scheduler = {}

return optim
