---@meta lumus.models.gpt2
-- Lua Language Server definitions for lumus.models.gpt2 (see meta/lumus.lua).

---@class lumus.models.gpt2.Config
local Config = {}

---@type number
Config.layer_norm_epsilon = 1e-05

---@type number
Config.n_embd = 768

---@type number
Config.n_head = 12

---@type number
Config.n_layer = 12

---@type number
Config.n_positions = 1024

---@type number
Config.vocab_size = 50257

---@class lumus.models.gpt2.Model
local Model = {}

---@param ids any
---@param cache any
---@return any
function Model:forward(ids, cache) end

---@return any
function Model:free() end

---@param ids any
---@param n any
---@param opts any
---@return any
function Model:generate(ids, n, opts) end

---@param batch any
---@param max_len any
---@return any
function Model:new_cache(batch, max_len) end

---@return any
function Model:parameters() end

---@class lumus.models.gpt2
local gpt2 = {}

---@param path any
---@param config any
---@param opts any
---@param model_opts any
---@return any
function gpt2.from_safetensors(path, config, opts, model_opts) end

---@param tensors any
---@param config any
---@param opts any
---@return any
function gpt2.from_tensors(tensors, config, opts) end

---@type table
gpt2.Model = {}

---@type table
gpt2.config_small = {}

return gpt2
