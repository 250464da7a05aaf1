---@meta lumus.autograd
-- Lua Language Server definitions for lumus.autograd (see meta/lumus.lua and
-- docs/autograd.md): how ops get their backward. Most scripts need only
-- t:requires_grad(true), loss:backward(), t:grad() and lumus.no_grad (meta/lumus.lua).

---One op's backward: the argument positions with gradients, what to save, and the
---gradients of those inputs given the output's gradient g.
---@class lumus.autograd.Entry
---@field inputs integer[]
---@field save? fun(args: table, results: table): table
---@field backward fun(g: lumus.Tensor, saved: table, need: boolean[]): lumus.Tensor?, ...

---@class lumus.autograd
local autograd = {}

---Adds or replaces the backward of op name (lumus.<name> and t:<name>()).
---@param name string
---@param entry lumus.autograd.Entry
function autograd.register(name, entry) end

---A differentiable function written over raw ops (PyTorch's autograd.Function): runs f
---with nothing recorded inside and records one node with entry's save and backward.
---@param name string
---@param entry lumus.autograd.Entry
---@param f function
---@return function
function autograd.function_op(name, entry, f) end

---g summed down to shape (the inverse of a broadcast).
---@param g lumus.Tensor
---@param shape integer[]
---@return lumus.Tensor
function autograd.reduce_to(g, shape) end

---Internal: wraps op name with its recording form (register does it when needed).
---@param name string
function autograd.install_op(name) end

---Internal: attaches the autograd API to the lumus module table (lumus/init.lua calls it).
---@param lumus table
function autograd.attach(lumus) end

---Helper for backward functions: 1 where t > 0, else 0 (NaN stays NaN).
---@param t lumus.Tensor
---@return lumus.Tensor
function autograd.positive_mask(t) end

---Helper for backward functions: exp(v) for v <= 0, from the core's ops.
---@param v lumus.Tensor
---@return lumus.Tensor
function autograd.exp(v) end

---Helper for backward functions: tanh(v) from the core's ops.
---@param v lumus.Tensor
---@return lumus.Tensor
function autograd.tanh(v) end

---The backward entries by op name.
---@type table<string, lumus.autograd.Entry>
autograd.ops = {}

---The lumus module table the API is attached to.
---@type table
autograd.lumus = {}

---The softmax probabilities attention's backward recomputes from its saved inputs.
---@param s table the saved values of a scaled_dot_product_attention node
---@return lumus.Tensor
function autograd.attention_probabilities(s) end

---Whether autograd's wrappers are installed over lumus's ops.
---@return boolean
function autograd.is_installed() end

return autograd
