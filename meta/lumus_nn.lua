---@meta lumus.nn
-- Lua Language Server definitions for lumus.nn (see meta/lumus.lua).

---@class lumus.nn.Dropout
local Dropout = {}

---@return any
function Dropout:describe() end

---@param x any
---@return any
function Dropout:forward(x) end

---@class lumus.nn.Embedding
local Embedding = {}

---@return any
function Embedding:describe() end

---@param ids any
---@return any
function Embedding:forward(ids) end

---@class lumus.nn.GELU
local GELU = {}

---@return any
function GELU:describe() end

---@param x any
---@return any
function GELU:forward(x) end

---@class lumus.nn.KVCache
local KVCache = {}

---@param k any
---@param v any
---@return any
function KVCache:append(k, v) end

---@return any
function KVCache:free() end

---@return any
function KVCache:reset() end

---@class lumus.nn.LayerNorm
local LayerNorm = {}

---@return any
function LayerNorm:describe() end

---@param x any
---@return any
function LayerNorm:forward(x) end

---@class lumus.nn.Linear
local Linear = {}

---@return any
function Linear:describe() end

---@param x any
---@return any
function Linear:forward(x) end

---@class lumus.nn.Module
local Module = {}

---@return any
function Module:clear_state() end

---@return any
function Module:describe() end

---@return any
function Module:eval() end

---@param name any
---@return any
function Module:extend(name) end

---@return any
function Module:forward() end

---@return any
function Module:free() end

---@param values any
---@param opts any
---@return any
function Module:load(values, opts) end

---@param sd any
---@param opts any
---@return any
function Module:load_state_dict(sd, opts) end

---@return any
function Module:named_parameters() end

---@return any
function Module:parameters() end

---@return any
function Module:register_buffers(...) end

---@param m any
---@param name any
---@return any
function Module:register_module(m, name) end

---@param name any
---@param t any
---@return any
function Module:register_parameter(name, t) end

---@param flag any
---@return any
function Module:requires_grad_(flag) end

---@return any
function Module:state_dict() end

---@param mode any
---@return any
function Module:train(mode) end

---@return any
function Module:zero_grad() end

---@class lumus.nn.MultiheadAttention
local MultiheadAttention = {}

---@return any
function MultiheadAttention:describe() end

---@param x any
---@param cache any
---@return any
function MultiheadAttention:forward(x, cache) end

---@param batch any
---@param max_len any
---@param opts any
---@return any
function MultiheadAttention:new_cache(batch, max_len, opts) end

---@class lumus.nn.ReLU
local ReLU = {}

---@param x any
---@return any
function ReLU:forward(x) end

---@class lumus.nn.Residual
local Residual = {}

---@return any
function Residual:describe() end

---@param x any
---@return any
function Residual:forward(x) end

---@param values any
---@param opts any
---@return any
function Residual:load(values, opts) end

---@class lumus.nn.Sequential
local Sequential = {}

---@param m any
---@return any
function Sequential:add(m) end

---@return any
function Sequential:describe() end

---@param x any
---@return any
function Sequential:forward(x) end

---@param i any
---@return any
function Sequential:get(i) end

---@return any
function Sequential:size() end

---@class lumus.nn.TransformerBlock
local TransformerBlock = {}

---@return any
function TransformerBlock:describe() end

---@param x any
---@param cache any
---@return any
function TransformerBlock:forward(x, cache) end

---@param batch any
---@param max_len any
---@param opts any
---@return any
function TransformerBlock:new_cache(batch, max_len, opts) end

---@class lumus.nn
local nn = {}

---@param seed any
---@return any
function nn.manual_seed(seed) end

---@type table
nn.Dropout = {}

---@type table
nn.Embedding = {}

---@type table
nn.GELU = {}

---@type table
nn.KVCache = {}

---@type table
nn.LayerNorm = {}

---@type table
nn.Linear = {}

---@type table
nn.Module = {}

---@type table
nn.MultiheadAttention = {}

---@type table
nn.ReLU = {}

---@type table
nn.Residual = {}

---@type table
nn.Sequential = {}

---@type table
nn.TransformerBlock = {}

return nn
