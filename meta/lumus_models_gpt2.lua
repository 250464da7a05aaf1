---@meta lumus.models.gpt2
-- Lua Language Server definitions for lumus.models.gpt2 (see meta/lumus.lua): GPT-2
-- inference from Hugging Face weights. Token ids are 1-based: a tokenizer's id t is t + 1.

---@class lumus.models.gpt2.Config
---@field n_layer integer
---@field n_head integer
---@field n_embd integer
---@field vocab_size integer
---@field n_positions integer
---@field layer_norm_epsilon? number default 1e-5

---Per-layer KV caches for a model (model:new_cache).
---@class lumus.models.gpt2.Cache
---@field layers lumus.nn.KVCache[]
---@field length integer positions held
---@field max_len integer
---@field batch integer
local Cache = {}

---Forgets the positions (length = 0).
---@return self
function Cache:reset() end

---Frees every layer's keys and values.
function Cache:free() end

---@class lumus.models.gpt2.Model
---@field config lumus.models.gpt2.Config
---@field blocks lumus.nn.TransformerBlock[]
---@field dtype lumus.dtype
local Model = {}

---Logits [B, T, vocab] of int32 1-based ids [B, T]; with a cache, ids follow its positions.
---@param ids lumus.Tensor
---@param cache? lumus.models.gpt2.Cache
---@return lumus.Tensor
function Model:forward(ids, cache) end

---Per-layer KV caches for batch rows of up to max_len positions (default n_positions).
---@param batch integer
---@param max_len? integer
---@return lumus.models.gpt2.Cache
function Model:new_cache(batch, max_len) end

---Prefills ids, then decodes n tokens, each chosen on the device by lumus.sample.
---@param ids integer[]|lumus.Tensor 1-based token ids (a list, [T] or [B, T])
---@param n integer
---@param opts? {greedy?: boolean, temperature?: number, top_k?: integer, top_p?: number, seed?: integer}
---@return integer[]|integer[][] the new ids (one list per row for [B, T] input)
function Model:generate(ids, n, opts) end

---The parameter tensors.
---@return lumus.Tensor[]
function Model:parameters() end

---Frees the parameters.
function Model:free() end

---@class lumus.models.gpt2
local gpt2 = {}

---A model from Hugging Face GPT-2 tensors (name -> tensor, "transformer." prefix optional).
---@param tensors table<string, lumus.Tensor>
---@param config lumus.models.gpt2.Config
---@param opts? {dtype?: "float32"|"float16"|"bfloat16"}
---@return lumus.models.gpt2.Model
function gpt2.from_tensors(tensors, config, opts) end

---A model from a safetensors file (config default config_small).
---@param path string
---@param config? lumus.models.gpt2.Config
---@param opts? {progress?: fun(done: integer, total: integer)} lumus.load_safetensors's options
---@param model_opts? {dtype?: "float32"|"float16"|"bfloat16"}
---@return lumus.models.gpt2.Model
function gpt2.from_safetensors(path, config, opts, model_opts) end

---GPT-2 small (124M).
---@type lumus.models.gpt2.Config
gpt2.config_small = {}
---@class lumus.models.gpt2.Decoder
---@field capture_error? string why the step runs eagerly, when capture failed
---@field prefill fun(self: lumus.models.gpt2.Decoder, ids: lumus.Tensor): lumus.Tensor prefills ids [B, T]; the last position's logits
---@field feed fun(self: lumus.models.gpt2.Decoder, ids: lumus.Tensor) the next tokens, ids [B, 1]
---@field step fun(self: lumus.models.gpt2.Decoder) one decode step (replayed when captured)
---@field capture fun(self: lumus.models.gpt2.Decoder) records the step once for replay
---@field ids fun(self: lumus.models.gpt2.Decoder, first?: integer, last?: integer): lumus.Tensor the generated ids, int32 [B, n]
---@field free fun(self: lumus.models.gpt2.Decoder) frees the decoder's cache and graph
local Decoder = {}

---Logits of hidden states h through ln_f and the LM head.
---@param h lumus.Tensor
---@param keep? boolean keep intermediates (autograd records the call)
---@return lumus.Tensor
function Model:head(h, keep) end

---A decoder for batch B up to max_len positions whose step keeps token, position and cache length on the device.
---@param batch integer
---@param max_len? integer
---@param opts? {greedy?: boolean, capture?: boolean, fuse_residual?: boolean}
---@return lumus.models.gpt2.Decoder
function Model:new_decoder(batch, max_len, opts) end

gpt2.Decoder = Decoder


gpt2.Model = Model

return gpt2
