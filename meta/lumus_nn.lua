---@meta lumus.nn
-- Lua Language Server definitions for lumus.nn (see meta/lumus.lua). Modules are
-- callable (m(x) is m:forward(x)) and reuse their outputs: m.output is overwritten by the
-- next call (README: Modules).

---The base class: parameters, children, training mode, loading and state dicts.
---`local M = nn.Module:extend("Name")`, then `M:__init(...)` and `M:forward(x)`.
---@class lumus.nn.Module
---@field output? lumus.Tensor the last call's result, reused by the next call
---@field training boolean set by train()/eval(), children's too
local Module = {}

---A subclass of this module class, printed as nn.<name>.
---@param name string
---@return table class a callable class: class(...) runs class:__init(...)
function Module:extend(name) end

---Registers a parameter tensor as self[name].
---@param name string
---@param t lumus.Tensor
---@return lumus.Tensor
function Module:register_parameter(name, t) end

---Registers a child module (its parameters follow this module's); self[name] when named.
---@generic M: lumus.nn.Module
---@param m M
---@param name? string
---@return M
function Module:register_module(m, name) end

---Names fields holding output tensors the module keeps and reuses (released by clear_state).
---@param ... string
function Module:register_buffers(...) end

---Computes the output (m(x) calls it).
---@param x lumus.Tensor
---@param ... any
---@return lumus.Tensor
function Module:forward(x, ...) end

---The module as printed, e.g. "nn.Linear(768 -> 3072)".
---@return string
function Module:describe() end

---The parameter tensors in a fixed order, marked requires_grad(true).
---@return lumus.Tensor[]
function Module:parameters() end

---{{"1.weight", t}, ...}: parameters with dotted names.
---@return {[1]: string, [2]: lumus.Tensor}[]
function Module:named_parameters() end

---Marks or unmarks every parameter, children's included.
---@param flag? boolean default true
---@return self
function Module:requires_grad_(flag) end

---Drops every parameter's gradient.
function Module:zero_grad() end

---Sets training mode recursively (Dropout is the identity when false).
---@param mode? boolean default true
---@return self
function Module:train(mode) end

---train(false).
---@return self
function Module:eval() end

---{["block.2.weight"] = t, ...}: the parameter tensors themselves.
---@return table<string, lumus.Tensor>
function Module:state_dict() end

---Copies sd's tensors into the parameters; strict: no missing or unexpected keys.
---@param sd table<string, lumus.Tensor>
---@param opts? {strict?: boolean}
function Module:load_state_dict(sd, opts) end

---Copies values (nested or flat tables, float32 bytes, tensors) into the parameters.
---@param values table
---@param opts? {strict?: boolean}
---@return self
function Module:load(values, opts) end

---Releases the kept outputs, children's included.
---@return self
function Module:clear_state() end

---Frees the parameters and the outputs.
function Module:free() end

---x W^T + b (lumus.linear); weight [out, in], bias [out].
---@class lumus.nn.Linear : lumus.nn.Module
---@overload fun(in_features: integer, out_features: integer, opts?: {bias?: boolean, seed?: integer}): lumus.nn.Linear
---@field weight lumus.Tensor
---@field bias? lumus.Tensor
---@field in_features integer
---@field out_features integer
local Linear = {}

---@param x lumus.Tensor of shape [..., in_features]
---@return lumus.Tensor
function Linear:forward(x) end

---@return string
function Linear:describe() end

---LayerNorm over the last dimension; weight (ones) and bias (zeros) [D] when affine.
---@class lumus.nn.LayerNorm : lumus.nn.Module
---@overload fun(d: integer, opts?: {eps?: number, affine?: boolean}): lumus.nn.LayerNorm
---@field weight? lumus.Tensor
---@field bias? lumus.Tensor
---@field eps number
---@field mean? lumus.Tensor the last call's per-row mean
---@field invstd? lumus.Tensor the last call's per-row 1/sqrt(var + eps)
local LayerNorm = {}

---@param x lumus.Tensor of shape [..., D]
---@return lumus.Tensor
function LayerNorm:forward(x) end

---@return string
function LayerNorm:describe() end

---lumus.gelu (erf form, or tanh).
---@class lumus.nn.GELU : lumus.nn.Module
---@overload fun(opts?: {approximate?: "none"|"tanh"}): lumus.nn.GELU
local GELU = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function GELU:forward(x) end

---@return string
function GELU:describe() end

---lumus.relu.
---@class lumus.nn.ReLU : lumus.nn.Module
---@overload fun(): lumus.nn.ReLU
local ReLU = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function ReLU:forward(x) end

---lumus.silu.
---@class lumus.nn.SiLU : lumus.nn.Module
---@overload fun(): lumus.nn.SiLU
local SiLU = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function SiLU:forward(x) end

---lumus.tanh.
---@class lumus.nn.Tanh : lumus.nn.Module
---@overload fun(): lumus.nn.Tanh
local Tanh = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Tanh:forward(x) end

---lumus.sigmoid.
---@class lumus.nn.Sigmoid : lumus.nn.Module
---@overload fun(): lumus.nn.Sigmoid
local Sigmoid = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Sigmoid:forward(x) end

---lumus.softmax over dim (the last by default).
---@class lumus.nn.Softmax : lumus.nn.Module
---@overload fun(opts?: {dim?: integer}): lumus.nn.Softmax
---@field dim integer
local Softmax = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Softmax:forward(x) end

---@return string
function Softmax:describe() end

---lumus.log_softmax over dim (the last by default).
---@class lumus.nn.LogSoftmax : lumus.nn.Module
---@overload fun(opts?: {dim?: integer}): lumus.nn.LogSoftmax
---@field dim integer
local LogSoftmax = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function LogSoftmax:forward(x) end

---@return string
function LogSoftmax:describe() end

---lumus.leaky_relu with the module's parameters.
---@class lumus.nn.LeakyReLU : lumus.nn.Module
---@overload fun(negative_slope?: number): lumus.nn.LeakyReLU
---@field opts table
local LeakyReLU = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function LeakyReLU:forward(x) end

---@return string
function LeakyReLU:describe() end

---lumus.elu with the module's parameters.
---@class lumus.nn.ELU : lumus.nn.Module
---@overload fun(alpha?: number): lumus.nn.ELU
---@field opts table
local ELU = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function ELU:forward(x) end

---@return string
function ELU:describe() end

---lumus.softplus with the module's parameters.
---@class lumus.nn.Softplus : lumus.nn.Module
---@overload fun(beta?: number, threshold?: number): lumus.nn.Softplus
---@field opts table
local Softplus = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Softplus:forward(x) end

---@return string
function Softplus:describe() end

---lumus.hardtanh with the module's parameters.
---@class lumus.nn.Hardtanh : lumus.nn.Module
---@overload fun(min_val?: number, max_val?: number): lumus.nn.Hardtanh
---@field opts table
local Hardtanh = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Hardtanh:forward(x) end

---@return string
function Hardtanh:describe() end

---lumus.relu6 with the module's parameters.
---@class lumus.nn.ReLU6 : lumus.nn.Module
---@overload fun(): lumus.nn.ReLU6
---@field opts table
local ReLU6 = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function ReLU6:forward(x) end

---@return string
function ReLU6:describe() end

---lumus.hardsigmoid with the module's parameters.
---@class lumus.nn.Hardsigmoid : lumus.nn.Module
---@overload fun(): lumus.nn.Hardsigmoid
---@field opts table
local Hardsigmoid = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Hardsigmoid:forward(x) end

---@return string
function Hardsigmoid:describe() end

---lumus.hardswish with the module's parameters.
---@class lumus.nn.Hardswish : lumus.nn.Module
---@overload fun(): lumus.nn.Hardswish
---@field opts table
local Hardswish = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Hardswish:forward(x) end

---@return string
function Hardswish:describe() end

---lumus.mish with the module's parameters.
---@class lumus.nn.Mish : lumus.nn.Module
---@overload fun(): lumus.nn.Mish
---@field opts table
local Mish = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Mish:forward(x) end

---@return string
function Mish:describe() end

---lumus.logsigmoid with the module's parameters.
---@class lumus.nn.LogSigmoid : lumus.nn.Module
---@overload fun(): lumus.nn.LogSigmoid
---@field opts table
local LogSigmoid = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function LogSigmoid:forward(x) end

---@return string
function LogSigmoid:describe() end

---x itself.
---@class lumus.nn.Identity : lumus.nn.Module
---@overload fun(): lumus.nn.Identity
local Identity = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Identity:forward(x) end

---lumus.flatten from start_dim (2 by default) to end_dim (-1).
---@class lumus.nn.Flatten : lumus.nn.Module
---@overload fun(start_dim?: integer, end_dim?: integer): lumus.nn.Flatten
local Flatten = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Flatten:forward(x) end

---@return string
function Flatten:describe() end

---lumus.rms_norm over the last dimension; weight [D] (ones) when affine.
---@class lumus.nn.RMSNorm : lumus.nn.Module
---@overload fun(d: integer, opts?: {eps?: number, affine?: boolean}): lumus.nn.RMSNorm
---@field weight lumus.Tensor?
local RMSNorm = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function RMSNorm:forward(x) end

---@return string
function RMSNorm:describe() end

---Training: zeroes each element with probability p and scales the rest by 1/(1-p);
---evaluation: x itself.
---@class lumus.nn.Dropout : lumus.nn.Module
---@overload fun(p?: number): lumus.nn.Dropout
---@field p number
local Dropout = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Dropout:forward(x) end

---@return string
function Dropout:describe() end

---Rows of weight [num, dim] for int32 1-based ids: [...] -> [..., dim].
---@class lumus.nn.Embedding : lumus.nn.Module
---@overload fun(num_embeddings: integer, embedding_dim: integer, opts?: {seed?: integer}): lumus.nn.Embedding
---@field weight lumus.Tensor
---@field num_embeddings integer
---@field embedding_dim integer
local Embedding = {}

---@param ids lumus.Tensor int32, 1-based
---@return lumus.Tensor
function Embedding:forward(ids) end

---@return string
function Embedding:describe() end

---The modules in order.
---@class lumus.nn.Sequential : lumus.nn.Module
---@overload fun(...: lumus.nn.Module): lumus.nn.Sequential
local Sequential = {}

---Appends a module.
---@param m lumus.nn.Module
---@return self
function Sequential:add(m) end

---The i-th module (1-based).
---@param i integer
---@return lumus.nn.Module
function Sequential:get(i) end

---The number of modules.
---@return integer
function Sequential:size() end

---@param x lumus.Tensor
---@return lumus.Tensor
function Sequential:forward(x) end

---@return string
function Sequential:describe() end

---x + block(x).
---@class lumus.nn.Residual : lumus.nn.Module
---@overload fun(block: lumus.nn.Module): lumus.nn.Residual
---@field block lumus.nn.Module
local Residual = {}

---@param x lumus.Tensor
---@return lumus.Tensor
function Residual:forward(x) end

---@return string
function Residual:describe() end

---Loads the block's values ({block = ...} or the block's own form).
---@param values table
---@param opts? {strict?: boolean}
---@return self
function Residual:load(values, opts) end

---Fused q/k/v projection, attention per head, output projection of x [B, T, E].
---@class lumus.nn.MultiheadAttention : lumus.nn.Module
---@overload fun(embed_dim: integer, num_heads: integer, opts?: {bias?: boolean, causal?: boolean, init?: boolean}): lumus.nn.MultiheadAttention
---@field embed_dim integer
---@field num_heads integer
---@field head_dim integer
---@field causal boolean
---@field in_proj_weight lumus.Tensor of shape [3E, E]
---@field in_proj_bias? lumus.Tensor
---@field out_proj_weight lumus.Tensor of shape [E, E]
---@field out_proj_bias? lumus.Tensor
local MultiheadAttention = {}

---@param x lumus.Tensor of shape [B, T, E]
---@param cache? lumus.nn.KVCache keys and values of earlier positions, appended to
---@return lumus.Tensor
function MultiheadAttention:forward(x, cache) end

---A KV cache for this module: [batch, heads, max_len, head_dim].
---@param batch integer
---@param max_len integer
---@param opts? {dtype?: lumus.dtype}
---@return lumus.nn.KVCache
function MultiheadAttention:new_cache(batch, max_len, opts) end

---@return string
function MultiheadAttention:describe() end

---Pre-norm transformer block: h = x + attn(norm1(x)), h + proj(act(fc(norm2(h)))).
---@class lumus.nn.TransformerBlock : lumus.nn.Module
---@overload fun(dim: integer, heads: integer, opts?: {mlp_ratio?: number, hidden?: integer, activation?: "gelu_tanh"|"gelu"|"relu"|"silu", norm?: "layer"|"rms", eps?: number, bias?: boolean, causal?: boolean, init?: boolean}): lumus.nn.TransformerBlock
---@field attn lumus.nn.MultiheadAttention
local TransformerBlock = {}

---@param x lumus.Tensor of shape [B, T, D]
---@param cache? lumus.nn.KVCache
---@return lumus.Tensor
function TransformerBlock:forward(x, cache) end

---Its attention's KV cache.
---@param batch integer
---@param max_len integer
---@param opts? {dtype?: lumus.dtype}
---@return lumus.nn.KVCache
function TransformerBlock:new_cache(batch, max_len, opts) end

---@return string
function TransformerBlock:describe() end

---Keys and values [B, H, max_len, hd] written in place; length counts the positions held.
---@class lumus.nn.KVCache
---@overload fun(batch: integer, heads: integer, max_len: integer, head_dim: integer, opts?: {dtype?: lumus.dtype}): lumus.nn.KVCache
---@field k lumus.Tensor
---@field v lumus.Tensor
---@field length integer
---@field max_len integer
local KVCache = {}

---Writes k, v [B, H, T, hd] after the held positions; returns the views of every
---position held (after the write).
---@param k lumus.Tensor
---@param v lumus.Tensor
---@return lumus.Tensor k
---@return lumus.Tensor v
function KVCache:append(k, v) end

---Forgets the positions (length = 0).
---@return self
function KVCache:reset() end

---Frees the key and value tensors.
function KVCache:free() end

---@class lumus.nn.utils
local utils = {}

---Scales the gradients of params in place so that their joint norm is at most max_norm;
---returns that norm before clipping (a one-element tensor).
---@param params lumus.Tensor[]|lumus.Tensor
---@param max_norm number
---@param opts? {norm_type?: number}
---@return lumus.Tensor
function utils.clip_grad_norm_(params, max_norm, opts) end

---@class lumus.nn
local nn = {}

---Resets the generator that seeds Linear and Embedding made without a seed.
---@param seed integer
function nn.manual_seed(seed) end

nn.Module = Module
nn.Linear = Linear
nn.LayerNorm = LayerNorm
nn.GELU = GELU
nn.ReLU = ReLU
nn.SiLU = SiLU
nn.Tanh = Tanh
nn.Sigmoid = Sigmoid
nn.Softmax = Softmax
nn.LogSoftmax = LogSoftmax
nn.LeakyReLU = LeakyReLU
nn.ELU = ELU
nn.Softplus = Softplus
nn.Hardtanh = Hardtanh
nn.ReLU6 = ReLU6
nn.Hardsigmoid = Hardsigmoid
nn.Hardswish = Hardswish
nn.Mish = Mish
nn.LogSigmoid = LogSigmoid
nn.Identity = Identity
nn.Flatten = Flatten
nn.RMSNorm = RMSNorm

nn.utils = utils
nn.Dropout = Dropout
nn.Embedding = Embedding
nn.Sequential = Sequential
nn.Residual = Residual
nn.MultiheadAttention = MultiheadAttention

---Writes kv [2, B, H, 1, hd] (keys, then values) at a position held on the device:
---by index_copy at at.pos (int32 [1]) or by where under at.write (bool [max_len]), as
---writes_by_index() says; returns the whole k and v.
---@param kv lumus.Tensor
---@param at table {pos =, write =}
---@return lumus.Tensor k
---@return lumus.Tensor v
function KVCache:write_at(kv, at) end

---Whether write_at writes by index_copy at at.pos (one row, or a long cache) rather
---than by where under at.write.
---@return boolean
function KVCache:writes_by_index() end

---Turns the automatic fusion of LayerNorm/Linear/activation runs on or off (on by default).
---@param on? boolean
---@return lumus.nn.Sequential
function Sequential:fusion(on) end


nn.TransformerBlock = TransformerBlock
nn.KVCache = KVCache

return nn
