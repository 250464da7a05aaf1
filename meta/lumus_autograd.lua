---@meta lumus.autograd
-- Lua Language Server definitions for lumus.autograd (see meta/lumus.lua).

---@class lumus.autograd
local autograd = {}

---@param L any
---@return any
function autograd.attach(L) end

---@param v any
---@return any
function autograd.exp(v) end

---@param name any
---@param entry any
---@param f any
---@return any
function autograd.function_op(name, entry, f) end

---@param name any
---@return any
function autograd.install_op(name) end

---@param t any
---@return any
function autograd.positive_mask(t) end

---@param g any
---@param shape any
---@return any
function autograd.reduce_to(g, shape) end

---@param name any
---@param entry any
---@return any
function autograd.register(name, entry) end

---@param v any
---@return any
function autograd.tanh(v) end

---@type table
autograd.lumus = {}

---@type table
autograd.ops = {}

return autograd
