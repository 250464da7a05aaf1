---@meta lumus.tune
-- Lua Language Server definitions for lumus.tune (see meta/lumus.lua).

---@class lumus.tune
local tune = {}

---@return any
function tune.attention(...) end

---@return any
function tune.elementwise(...) end

---@return any
function tune.grid(...) end

---@return any
function tune.host_profile(...) end

---@return any
function tune.layer_norm(...) end

---@return any
function tune.layer_norm_backward(...) end

---@return any
function tune.matmul(...) end

---@return any
function tune.pipeline_cache(...) end

---@return any
function tune.rows(...) end

---@return any
function tune.stream(...) end

---@return any
function tune.stream_stats(...) end

---@return any
function tune.transpose(...) end

---@return any
function tune.validation_messages(...) end

return tune
