--- GPT-2 inference on lumus (require "lumus.models.gpt2").
--
--   local gpt2 = require "lumus.models.gpt2"
--   local model = gpt2.from_safetensors("model.safetensors" [, config [, {progress =} [, {dtype =}]]])
--   local model = gpt2.from_tensors(tensors, config [, {dtype =}])  -- name -> lumus tensor
--   local cache = model:new_cache(batch, max_len)       -- per-layer KV caches
--   local logits = model:forward(ids, cache)            -- ids int32 [B, T] -> [B, T, vocab]
--   local new = model:generate(ids, n [, {greedy =, temperature =, top_k =, top_p =, seed =}])
--
-- TOKEN IDS ARE 1-BASED, as every lumus position: a GPT-2 tokenizer's id t is t + 1 here,
-- and an id returned by generate is the tokenizer's id + 1 (examples/gpt2.lua converts).
--
-- config: n_layer, n_head, n_embd, vocab_size, n_positions, layer_norm_epsilon (1e-5);
-- gpt2.config_small is GPT-2 small's (124M). Tensor names and layouts are Hugging Face's
-- GPT2LMHeadModel, with or without the "transformer." prefix: wte.weight [vocab, n_embd],
-- wpe.weight [n_positions, n_embd], h.N.ln_1.{weight,bias}, h.N.attn.c_attn.{weight
-- [n_embd, 3 n_embd], bias}, h.N.attn.c_proj.{weight [n_embd, n_embd], bias},
-- h.N.ln_2.*, h.N.mlp.c_fc.{weight [n_embd, 4 n_embd], bias}, h.N.mlp.c_proj.{weight
-- [4 n_embd, n_embd], bias}, ln_f.*. The Conv1D weights (y = x W + b, W [in, out]) are
-- transposed once on load into nn.TransformerBlock's [out, in]. lm_head.weight, if
-- present, is used; else the head is tied to wte. GELU is the tanh form ("gelu_new").
-- Weights of other dtypes are converted on load to opts.dtype ("float32", the default;
-- "float16" or "bfloat16" where this build's matmul, linear and layer_norm take them).
--
-- forward(ids, cache): without a cache the T positions are 1..T; with one, they continue
-- from cache.length (prefill, then one token at a time), and the cache grows by T.
-- generate(ids, n, opts) runs an eager prefill and n - 1 single-token steps of a
-- decoder (model:new_decoder, below): each step is one replay of a captured graph
-- (lumus.capture) where the build can capture it, else the same ops eagerly. Tokens are
-- sampled on the device (lumus.sample; greedy = true: argmax inside the captured step)
-- and the new ids are read back once at the end (int32 [B, n - 1] and [B]). The model
-- keeps the last decoder (its cache and graph) for the next call of the same batch,
-- sampling kind and max length rounded up to 64. ids: int32 tensor [T] or [B, T], or a
-- Lua list of ids.
-- Returns the n new ids: a list for one row ([T] tensor or list), a list of B lists
-- otherwise. seed: lumus.manual_seed(seed) first (the global stream).
local lumus = require "lumus"

local M = {}

M.config_small = { n_layer = 12, n_head = 12, n_embd = 768, vocab_size = 50257, n_positions = 1024,
  layer_norm_epsilon = 1e-5 }

local Tensor = lumus.Tensor
local function is_tensor(v) return getmetatable(v) == Tensor end
local function shape_string(s) return table.concat(s, "x") end

local CONFIG_KEYS = { n_layer = true, n_head = true, n_embd = true, vocab_size = true, n_positions = true,
  layer_norm_epsilon = true }

local function check_config(fname, config)
  if type(config) ~= "table" then error(("%s: config must be a table, got %s"):format(fname, type(config)), 3) end
  local c = {}
  for k, v in pairs(config) do
    if not CONFIG_KEYS[k] then error(("%s: unknown config key '%s'"):format(fname, tostring(k)), 3) end
    c[k] = v
  end
  for _, k in ipairs({ "n_layer", "n_head", "n_embd", "vocab_size", "n_positions" }) do
    local v = c[k]
    if type(v) ~= "number" or v ~= math.floor(v) or v < 1 then
      error(("%s: config.%s must be a positive integer, got %s"):format(fname, k, tostring(v)), 3)
    end
  end
  if c.n_embd % c.n_head ~= 0 then
    error(("%s: config.n_embd %d must be divisible by n_head %d"):format(fname, c.n_embd, c.n_head), 3)
  end
  c.layer_norm_epsilon = c.layer_norm_epsilon or 1e-5
  return c
end

local Model = {}
Model.__index = Model
M.Model = Model

--- A model from Hugging Face GPT-2 tensors (see the header). The given tensors are
-- used as they are where no conversion or transpose is needed (the model then shares
-- them with the caller).
function M.from_tensors(tensors, config, opts)
  local fname = "gpt2.from_tensors"
  if type(tensors) ~= "table" then error(("%s: tensors must be a table, got %s"):format(fname, type(tensors)), 2) end
  local c = check_config(fname, config)
  opts = opts or {}
  for k in pairs(opts) do
    if k ~= "dtype" then error(("%s: unknown option '%s' (known: dtype)"):format(fname, tostring(k)), 2) end
  end
  local dtype = opts.dtype or "float32"
  if dtype ~= "float32" and dtype ~= "float16" and dtype ~= "bfloat16" then
    error(("%s: option dtype must be \"float32\", \"float16\" or \"bfloat16\", got %s"):format(fname, tostring(dtype)), 2)
  end
  local nn = lumus.nn
  local function get(name, shape, optional)
    local t = tensors["transformer." .. name]
    if t == nil then t = tensors[name] end
    if t == nil then
      if optional then return nil end
      error(("%s: missing tensor 'transformer.%s' (or '%s')"):format(fname, name, name), 3)
    end
    if not is_tensor(t) then error(("%s: '%s' must be a tensor, got %s"):format(fname, name, type(t)), 3) end
    if shape_string(t:shape()) ~= shape_string(shape) then
      error(("%s: '%s' has shape %s, expected %s"):format(fname, name, shape_string(t:shape()), shape_string(shape)), 3)
    end
    if t:dtype() ~= dtype then t = t:to(dtype) end
    return t
  end
  local d, v = c.n_embd, c.vocab_size
  local self = setmetatable({ config = c, blocks = {}, dtype = dtype }, Model)
  self.wte = get("wte.weight", { v, d })
  self.wpe = get("wpe.weight", { c.n_positions, d })
  for i = 0, c.n_layer - 1 do
    local p = ("h.%d."):format(i)
    local blk = nn.TransformerBlock(d, c.n_head, { mlp_ratio = 4, activation = "gelu_tanh", norm = "layer",
      eps = c.layer_norm_epsilon, causal = true, init = false })
    -- The block's own empty parameters are replaced by the loaded (transposed) ones.
    local function set(m, name, t)
      m[name]:free()
      m:register_parameter(name, t)
    end
    -- the transposed copy; a converted [in, out] tensor (not the caller's) is freed at
    -- once rather than left to the collector (a float16 load's would otherwise hold half
    -- the model's size until some later collection)
    local function conv1d(name, n_in, n_out)
      local w = get(name, { n_in, n_out })
      local t = w:transpose(1, 2)
      local c = t:contiguous()
      if c ~= t then t:free() end
      if w ~= tensors["transformer." .. name] and w ~= tensors[name] then w:free() end
      return c
    end
    set(blk, "ln1_weight", get(p .. "ln_1.weight", { d }))
    set(blk, "ln1_bias", get(p .. "ln_1.bias", { d }))
    set(blk, "ln2_weight", get(p .. "ln_2.weight", { d }))
    set(blk, "ln2_bias", get(p .. "ln_2.bias", { d }))
    set(blk, "fc_weight", conv1d(p .. "mlp.c_fc.weight", d, 4 * d))
    set(blk, "fc_bias", get(p .. "mlp.c_fc.bias", { 4 * d }))
    set(blk, "proj_weight", conv1d(p .. "mlp.c_proj.weight", 4 * d, d))
    set(blk, "proj_bias", get(p .. "mlp.c_proj.bias", { d }))
    set(blk.attn, "in_proj_weight", conv1d(p .. "attn.c_attn.weight", d, 3 * d))
    set(blk.attn, "in_proj_bias", get(p .. "attn.c_attn.bias", { 3 * d }))
    set(blk.attn, "out_proj_weight", conv1d(p .. "attn.c_proj.weight", d, d))
    set(blk.attn, "out_proj_bias", get(p .. "attn.c_proj.bias", { d }))
    self.blocks[i + 1] = blk
  end
  self.ln_f_weight = get("ln_f.weight", { d })
  self.ln_f_bias = get("ln_f.bias", { d })
  local head = tensors["lm_head.weight"]
  if head ~= nil then
    if not is_tensor(head) or shape_string(head:shape()) ~= shape_string({ v, d }) then
      error(("%s: 'lm_head.weight' must be a [%d, %d] tensor"):format(fname, v, d), 2)
    end
    if head:dtype() ~= dtype then head = head:to(dtype) end
  end
  self.lm_head = head or self.wte
  return self
end

--- A model from a .safetensors file (lumus.load_safetensors). config defaults to
-- gpt2.config_small; opts are passed to load_safetensors (e.g. progress =), model_opts
-- to from_tensors ({dtype =}). Tensors of
-- the file that the model does not use are freed.
function M.from_safetensors(path, config, opts, model_opts)
  if type(lumus.load_safetensors) ~= "function" then
    error("gpt2.from_safetensors: lumus.load_safetensors is not available in this build of lumus", 2)
  end
  local tensors = opts and lumus.load_safetensors(path, opts) or lumus.load_safetensors(path)
  local model = M.from_tensors(tensors, config or M.config_small, model_opts)
  -- The tensors the model holds, found without parameters(), which would mark them
  -- requires_grad: a loaded model runs inference (outputs reused) until a trainer calls
  -- model:parameters().
  local used = { [model.wte] = true, [model.wpe] = true, [model.ln_f_weight] = true, [model.ln_f_bias] = true,
    [model.lm_head] = true }
  local function hold(m)
    for _, name in ipairs(m._params) do used[m[name]] = true end
    for _, child in ipairs(m._modules) do hold(child) end
  end
  for _, blk in ipairs(model.blocks) do hold(blk) end
  for _, t in pairs(tensors) do
    if is_tensor(t) and not used[t] then t:free() end
  end
  return model
end

--- Every parameter tensor: wte, wpe, the blocks' (in order), ln_f, lm_head if untied.
function Model:parameters()
  local list = { self.wte, self.wpe }
  for _, blk in ipairs(self.blocks) do
    for _, p in ipairs(blk:parameters()) do list[#list + 1] = p end
  end
  list[#list + 1] = self.ln_f_weight
  list[#list + 1] = self.ln_f_bias
  if self.lm_head ~= self.wte then list[#list + 1] = self.lm_head end
  -- marked requires_grad as the blocks' are (float32 only: autograd's dtype)
  for _, p in ipairs(list) do
    if not p:is_freed() and p:dtype() == "float32" and not p:requires_grad() then p:requires_grad(true) end
  end
  return list
end

function Model:free()
  if self.decoder then self.decoder:free(); self.decoder = nil end
  for _, p in ipairs(self:parameters()) do p:free() end
end

---------------------------------------------------------------------------------------
-- Cache: one nn.KVCache per layer; length = positions held.

local Cache = {}
Cache.__index = Cache

function Model:new_cache(batch, max_len)
  local c = self.config
  max_len = max_len or c.n_positions
  if type(max_len) ~= "number" or max_len ~= math.floor(max_len) or max_len < 1 or max_len > c.n_positions then
    error(("gpt2:new_cache: max_len must be an integer in 1..%d (n_positions), got %s")
      :format(c.n_positions, tostring(max_len)), 2)
  end
  local layers = {}
  for i, blk in ipairs(self.blocks) do layers[i] = blk:new_cache(batch, max_len, { dtype = self.dtype }) end
  return setmetatable({ layers = layers, length = 0, max_len = max_len, batch = batch }, Cache)
end

function Cache:reset()
  for _, l in ipairs(self.layers) do l:reset() end
  self.length = 0
  return self
end

function Cache:free()
  for _, l in ipairs(self.layers) do l:free() end
end

---------------------------------------------------------------------------------------

--- logits [B, T, vocab] for int32 ids [B, T] (1-based), positions from cache.length + 1;
-- with {logits = "last"} only the last position's, [B, 1, vocab] (ln_f and the LM head
-- on one row per sequence instead of T: what a prefill before sampling needs).
function Model:forward(ids, cache, opts)
  local c = self.config
  local last_only = false
  if opts ~= nil then
    if type(opts) ~= "table" then error(("gpt2:forward: options must be a table, got %s"):format(type(opts)), 2) end
    for k, v in pairs(opts) do
      if k ~= "logits" then error(("gpt2:forward: unknown option '%s' (known: logits)"):format(tostring(k)), 2) end
      if v ~= "all" and v ~= "last" then
        error(("gpt2:forward: option logits must be \"all\" or \"last\", got %s"):format(tostring(v)), 2)
      end
    end
    last_only = opts.logits == "last"
  end
  if not is_tensor(ids) or ids:dim() ~= 2 or ids:dtype() ~= "int32" then
    error(("gpt2:forward: ids must be an int32 tensor [B, T] of 1-based token ids, got %s")
      :format(is_tensor(ids) and ids:dtype() .. " of shape " .. shape_string(ids:shape()) or type(ids)), 2)
  end
  local b, t = ids:size(1), ids:size(2)
  local start = 0
  if cache ~= nil then
    if getmetatable(cache) ~= Cache then error("gpt2:forward: cache must come from model:new_cache", 2) end
    if cache.batch ~= b then
      error(("gpt2:forward: the cache is for batch %d, ids have %d rows"):format(cache.batch, b), 2)
    end
    start = cache.length
    if start + t > cache.max_len then
      error(("gpt2:forward: %d cached + %d new positions exceed the cache's max_len %d")
        :format(start, t, cache.max_len), 2)
    end
  elseif t > c.n_positions then
    error(("gpt2:forward: %d positions exceed n_positions %d"):format(t, c.n_positions), 2)
  end
  -- a call autograd records (training) keeps its intermediates: the graph holds them
  local keep = lumus.is_grad_enabled() and (self.wte:requires_grad() or self.blocks[1].ln1_weight:requires_grad())
  local function free(...) if not keep then for i = 1, select("#", ...) do select(i, ...):free() end end end
  local tok = lumus.embedding(ids, self.wte)                     -- [B, T, D]
  -- positions start+1 .. start+T are consecutive rows of wpe: a view, read by add
  local h = lumus.add(tok, self.wpe:narrow(1, start + 1, t))
  free(tok)
  for i, blk in ipairs(self.blocks) do
    local nh = blk:forward(h, cache and cache.layers[i])
    free(h)
    h = nh
  end
  local last = last_only and t > 1 and h:narrow(2, t, 1)
  local logits = self:head(last or h, keep)
  if last then free(last) end
  free(h)
  if cache ~= nil then cache.length = start + t end
  return logits
end

--- logits [B, T, vocab] of the last block's output h [B, T, D]: ln_f, then the LM head.
-- keep: the call is recorded by autograd (training): its intermediates stay for the graph.
function Model:head(h, keep)
  local n = require("lumus.nn_transformer").layer_norm(h, self.ln_f_weight, self.ln_f_bias,
    self.config.layer_norm_epsilon, keep)
  local logits = lumus.matmul(n, self.lm_head, { transpose_b = true })
  if not keep then n:free() end
  return logits
end

---------------------------------------------------------------------------------------
-- Decoder: the single-token step with every per-step quantity on the device, so that
-- one step can be captured (lumus.capture) and replayed per token.
--
--   local d = model:new_decoder(batch, max_len [, {greedy =, capture = true}])
--   local logits = d:prefill(ids)       -- eager forward of ids [B, T] into d.cache: the
--                                       -- last position's logits [B, 1, vocab]
--   d:feed(next_ids)                    -- int32 [B]: the tokens at position T + 1
--   local logits = d:step()             -- [B, 1, vocab] for the fed tokens
--   ... with greedy, step() itself feeds the argmax of its logits to the next step
--   local rows = d:ids(first, last)     -- the fed ids at positions first..last, read back
--
-- The device state: tok (int32 [B], the tokens of the next step), pos (int32 [1], their
-- 1-based position), ids recorded per position (int32 [B, max_len]). A step looks up
-- attend = (keys <= pos) (keys = 1..max_len) as row pos of a table of them made once
-- (index_select; and write = (keys == pos), from pos as a float, where a cache is
-- written by where), records tok at pos
-- (index_copy), embeds tok plus wpe's row pos (index_select), writes each layer's k and
-- v at pos (nn.KVCache:write_at: index_copy, or an exact where under write), attends
-- over the whole cache under attend (a mask), computes the logits, and sets pos to pos
-- + 1 (index_select of 2..max_len + 1); greedy also writes argmax(logits) into tok. The step's ops are the same whether captured or eager, so a
-- replay gives the eager step's bits. The graph is captured at the first step()
-- (capture = false, or a build or model whose ops cannot be captured, runs the step
-- eagerly each time). d.length: the positions held (a host count, for the bound checks).

local Decoder = {}
Decoder.__index = Decoder
M.Decoder = Decoder
local residual_fusable, make_fused

-- fn() with autograd recording nothing (where autograd is installed): the decoder's ops
-- write into its own tensors (out =), which a recorded call may not.
local function inference(fn)
  if lumus.no_grad then return lumus.no_grad(fn) end
  return fn()
end

-- Residual adds inside the linears (one row per step): the attention output o and the
-- block's input x lie side by side in one [1, 1, 2E] buffer, so that out_proj over it
-- with the weight [W_out | I] gives x + o W_out^T + b in one product; likewise fc's
-- output g and the sum r in [1, 1, hidden + E] under [W_proj | I]. Each op writes its
-- result into its place (out =), which must be contiguous and 16-byte aligned: one row,
-- and E and hidden elements whole multiples of 16 bytes. Two ops fewer per block; the
-- combined weights are extra memory ((E + hidden) x E elements per block beyond the
-- model's), refreshed when the model's weights are written (t:_version()). The sums
-- are the same terms added in another order (float32 accumulation): within rounding of
-- the add after the product.
local FUSED_ACTIVATIONS = { gelu_tanh = "gelu_tanh", gelu = "gelu", relu = "relu", silu = "silu" }

residual_fusable = function(model, batch)
  local transformer = require "lumus.nn_transformer"
  if batch ~= 1 or transformer.force_composite or lumus.scaled_dot_product_attention == nil or lumus.cat == nil then
    return false
  end
  local blk = model.blocks[1]
  local es = model.dtype == "float32" and 4 or 2
  if blk == nil or blk.norm ~= "layer" or FUSED_ACTIVATIONS[blk.activation] == nil or blk.fc_bias == nil
    or blk.attn.out_proj_bias == nil or (blk.dim * es) % 16 ~= 0 or (blk.hidden * es) % 16 ~= 0 then
    return false
  end
  return true
end

-- (Re)writes the combined weights of block i from the model's (no autograd: inference).
local function refresh_fused(d, i)
  local f, blk = d.fused[i], d.model.blocks[i]
  inference(function()
    lumus.cat({ blk.attn.out_proj_weight, d.eye }, 2, { out = f.out_w })
    lumus.cat({ blk.proj_weight, d.eye }, 2, { out = f.proj_w })
  end)
  f.versions = { blk.attn.out_proj_weight:_version(), blk.proj_weight:_version() }
end

make_fused = function(d)
  local m = d.model
  local blk = m.blocks[1]
  local e, hidden, h = blk.dim, blk.hidden, blk.heads
  local dt = m.dtype
  local ar = lumus.arange(1, e + 1, { dtype = "float32" })
  local eye_mask = lumus.eq(ar:view({ e, 1 }), ar:view({ 1, e }))
  local eye32 = lumus.where(eye_mask, 1.0, 0.0)
  d.eye = dt == "float32" and eye32 or eye32:to(dt)
  if d.eye ~= eye32 then eye32:free() end
  ar:free(); eye_mask:free()
  d.fused = {}
  for i = 1, #m.blocks do
    local att = lumus.zeros({ 1, 1, 2 * e }, { dtype = dt })         -- [o | x]
    local mlp = lumus.zeros({ 1, 1, hidden + e }, { dtype = dt })    -- [g | r]
    d.fused[i] = {
      att = att, o = att:narrow(3, 1, e):view({ 1, h, 1, blk.attn.head_dim }), x = att:narrow(3, e + 1, e),
      mlp = mlp, g = mlp:narrow(3, 1, hidden), r = mlp:narrow(3, hidden + 1, e),
      out_w = lumus.empty({ e, 2 * e }, { dtype = dt }), proj_w = lumus.empty({ e, hidden + e }, { dtype = dt }),
    }
    refresh_fused(d, i)
  end
  d.h_last = lumus.zeros({ 1, 1, e }, { dtype = dt })
end

-- The blocks of one step with the residual adds fused (see above): h0 (the embedding
-- sum) is written into block 1's x; returns the last block's output (d.h_last).
local function fused_blocks(d, at)
  local transformer = require "lumus.nn_transformer"
  local m = d.model
  local n = #m.blocks
  for i, blk in ipairs(m.blocks) do
    local f, attn = d.fused[i], blk.attn
    local h, hd = attn.num_heads, attn.head_dim
    local qkv = transformer.layer_norm_linear(f.x, blk.ln1_weight, blk.ln1_bias, blk.eps, attn.in_proj_weight,
      attn.in_proj_bias)
    local heads = qkv:view({ 1, 1, 3, h, hd })
    local parts = heads:permute({ 3, 1, 4, 2, 5 })                       -- [3, 1, H, 1, hd]
    local q, kv = parts:select(1, 1), parts:narrow(1, 2, 2)               -- q; k and v
    local k, v = d.cache.layers[i]:write_at(kv, at)
    lumus.scaled_dot_product_attention(q, k, v, { mask = at.mask, scale = 1 / math.sqrt(hd), out = f.o })
    -- every handle on qkv's memory freed, so that it is free at once
    heads:free(); parts:free(); q:free(); kv:free(); qkv:free()
    lumus.linear(f.att, f.out_w, attn.out_proj_bias, { out = f.r })      -- r = x + attn
    transformer.layer_norm_linear(f.r, blk.ln2_weight, blk.ln2_bias, blk.eps, blk.fc_weight, blk.fc_bias,
      FUSED_ACTIVATIONS[blk.activation], f.g)
    lumus.linear(f.mlp, f.proj_w, blk.proj_bias, { out = i < n and d.fused[i + 1].x or d.h_last })   -- r + mlp
  end
  return d.h_last
end

function Model:new_decoder(batch, max_len, opts)
  local fname = "gpt2:new_decoder"
  opts = opts or {}
  if type(opts) ~= "table" then error(("%s: options must be a table, got %s"):format(fname, type(opts)), 2) end
  for k in pairs(opts) do
    if k ~= "greedy" and k ~= "capture" and k ~= "fuse_residual" then
      error(("%s: unknown option '%s' (known: capture, fuse_residual, greedy)"):format(fname, tostring(k)), 2)
    end
  end
  if type(batch) ~= "number" or batch ~= math.floor(batch) or batch < 1 then
    error(("%s: batch must be a positive integer, got %s"):format(fname, tostring(batch)), 2)
  end
  local c = self.config
  if type(max_len) ~= "number" or max_len ~= math.floor(max_len) or max_len < 1 or max_len > c.n_positions then
    error(("%s: max_len must be an integer in 1..%d (n_positions), got %s")
      :format(fname, c.n_positions, tostring(max_len)), 2)
  end
  local d = setmetatable({ model = self, batch = batch, max_len = max_len, greedy = opts.greedy == true,
    use_capture = opts.capture ~= false and lumus.capture ~= nil, length = 0 }, Decoder)
  d.cache = self:new_cache(batch, max_len)
  d.tok = lumus.zeros({ batch }, { dtype = "int32" })
  d.pos = lumus.ones({ 1 }, { dtype = "int32" })
  d.keys = lumus.arange(1, max_len + 1, { dtype = "float32" })
  -- row p: keys <= p, the positions a query at p attends (bool [max_len, max_len])
  d.attend_rows = lumus.le(d.keys:view({ 1, max_len }), d.keys:view({ max_len, 1 }))
  d.next_pos = lumus.arange(2, max_len + 2, { dtype = "int32" })
  d.id_rows = lumus.zeros({ batch, max_len }, { dtype = "int32" })
  if opts.fuse_residual ~= false and residual_fusable(self, batch) then make_fused(d) end
  return d
end

-- One decode step's ops (see above); returns logits [B, 1, vocab] (the model's dtype).
-- Only index_select, index_copy, embedding, comparisons, where, copy and the model's
-- ops: dtype conversions (to) cannot be captured from a view (lumus.capture raises for
-- them).
local function decode_step(d)
  local m, b = d.model, d.batch
  local at = { attend = lumus.index_select(d.attend_rows, 1, d.pos), pos = d.pos }   -- [1, max_len]
  if not d.cache.layers[1]:writes_by_index() then
    local pos_f = lumus.index_select(d.keys, 1, d.pos)            -- float32 [1]: pos
    at.write = lumus.eq(d.keys, pos_f)
    pos_f:free()
  end
  lumus.index_copy(d.id_rows, 2, d.pos, d.tok:view({ b, 1 }), { out = d.id_rows })
  local te = lumus.embedding(d.tok:view({ b, 1 }), m.wte)         -- [B, 1, D]
  local pe = lumus.index_select(m.wpe, 1, d.pos)                  -- [1, D]
  local h
  if d.fused then
    lumus.add(te, pe, { out = d.fused[1].x })
    at.mask = at.attend:view({ 1, 1, 1, d.max_len })
    h = fused_blocks(d, at)
    at.mask:free()
  else
    h = lumus.add(te, pe)
    for i, blk in ipairs(m.blocks) do
      local nh = blk:forward(h, d.cache.layers[i], at)
      h:free()
      h = nh
    end
  end
  te:free(); pe:free()
  at.attend:free()
  if at.write then at.write:free() end
  local logits = m:head(h)
  if not d.fused then h:free() end
  local nxt = lumus.index_select(d.next_pos, 1, d.pos)            -- pos + 1
  d.pos:copy(nxt)
  nxt:free()
  if d.greedy then
    local rows = logits:view({ b, m.config.vocab_size })
    lumus.argmax(rows, { dim = 2, out = d.tok })
    rows:free()
  end
  return logits
end

--- Eager prefill of ids [B, T] (positions 1..T) into the decoder's cache; the last
-- position's logits [B, 1, vocab]. Follow with feed(next ids).
function Decoder:prefill(ids)
  self.cache:reset()
  local t = ids:size(2)
  if t > self.max_len then
    error(("gpt2 decoder:prefill: %d positions exceed max_len %d"):format(t, self.max_len), 2)
  end
  local logits = self.model:forward(ids, self.cache, { logits = "last" })
  self.length = t
  self.pos:fill(t + 1)
  return logits
end

--- The tokens (int32 [B]) of the next step, at position length + 1.
function Decoder:feed(ids)
  self.tok:copy(ids)
  return self
end

--- One step: the logits [B, 1, vocab] (model dtype) of the fed tokens (the captured graph's
-- tensor when captured: valid until the next step).
function Decoder:step()
  if self.length + 1 > self.max_len then
    error(("gpt2 decoder:step: the cache's max_len %d is full"):format(self.max_len), 2)
  end
  if self.fused then   -- the combined weights follow the model's (trained meanwhile)
    for i, f in ipairs(self.fused) do
      local blk = self.model.blocks[i]
      if blk.attn.out_proj_weight:_version() ~= f.versions[1] or blk.proj_weight:_version() ~= f.versions[2] then
        refresh_fused(self, i)
      end
    end
  end
  local logits
  if self:capture() then
    logits = self.graph:replay()
  else
    if self.last_logits then self.last_logits:free() end
    logits = inference(function() return decode_step(self) end)
    self.last_logits = logits
  end
  self.length = self.length + 1
  return logits
end

--- Records the step's graph now, if the decoder captures and has none yet (step()
-- does it at its first call otherwise); true when the decoder has a graph.
function Decoder:capture()
  if self.graph == nil and self.use_capture then
    local ok, g = pcall(lumus.capture, function() return inference(function() return decode_step(self) end) end)
    if ok then self.graph = g else self.use_capture, self.capture_error = false, g end
  end
  return self.graph ~= nil
end

--- The fed ids at positions first..last of each row (read back: one transfer), as a
-- list of B lists of 1-based ids.
function Decoder:ids(first, last)
  local view = self.id_rows:narrow(2, first, last - first + 1)
  local rows = view:contiguous()
  local t = rows:to_table()
  if rows ~= view then rows:free() end
  return t
end

function Decoder:free()
  if self.graph then self.graph:free(); self.graph = nil end
  if self.last_logits then self.last_logits:free(); self.last_logits = nil end
  self.cache:free()
  for _, t in ipairs({ self.tok, self.pos, self.keys, self.attend_rows, self.next_pos, self.id_rows }) do t:free() end
  if self.fused then
    for _, f in ipairs(self.fused) do
      for _, t in ipairs({ f.att, f.mlp, f.out_w, f.proj_w }) do t:free() end
    end
    self.eye:free(); self.h_last:free()
    self.fused = nil
  end
end

local GENERATE_OPTS = { greedy = true, temperature = true, top_k = true, top_p = true, seed = true }

--- n new token ids (1-based) after ids; see the header.
function Model:generate(ids, n, opts)
  local fname = "gpt2:generate"
  opts = opts or {}
  if type(opts) ~= "table" then error(("%s: options must be a table, got %s"):format(fname, type(opts)), 2) end
  local sample_opts = {}
  for k, v in pairs(opts) do
    if not GENERATE_OPTS[k] then
      error(("%s: unknown option '%s' (known: greedy, seed, temperature, top_k, top_p)"):format(fname, tostring(k)), 2)
    end
    if k ~= "seed" then sample_opts[k] = v end
  end
  if type(n) ~= "number" or n ~= math.floor(n) or n < 1 then
    error(("%s: n must be a positive integer, got %s"):format(fname, tostring(n)), 2)
  end
  local one_row, owned = false, nil
  if type(ids) == "table" and not is_tensor(ids) then
    owned = lumus.tensor({ ids }, { dtype = "int32" })
    ids, one_row = owned, true
  elseif is_tensor(ids) and ids:dim() == 1 then
    ids, one_row = ids:view({ 1, ids:size(1) }), true
  end
  if not is_tensor(ids) or ids:dim() ~= 2 then
    error(("%s: ids must be an int32 tensor [T] or [B, T] or a list of ids"):format(fname), 2)
  end
  local b, t = ids:size(1), ids:size(2)
  if t + n - 1 > self.config.n_positions then
    error(("%s: %d prompt + %d new tokens exceed n_positions %d"):format(fname, t, n, self.config.n_positions), 2)
  end
  if opts.seed ~= nil then lumus.manual_seed(opts.seed) end
  -- The decoder is kept for the next call of the same batch, length class and sampling
  -- kind, so that its captured step is reused.
  local greedy = opts.greedy == true
  local max_len = math.min(self.config.n_positions, math.ceil((t + n - 1) / 64) * 64)
  local d = self.decoder
  if not (d and d.batch == b and d.max_len == max_len and d.greedy == greedy) then
    if d then d:free() end
    d = self:new_decoder(b, max_len, { greedy = greedy })
    self.decoder = d
  end
  local logits = d:prefill(ids)
  local last_row = logits:select(2, 1)
  if last_row:dtype() ~= "float32" then last_row = last_row:to("float32") end
  local first = lumus.sample(last_row, sample_opts)                -- int32 [B]
  logits:free()
  d:feed(first)
  first:free()
  for _ = 2, n do
    local step_logits = d:step()
    if not greedy then
      local row = step_logits:select(2, 1)
      if row:dtype() ~= "float32" then row = row:to("float32") end
      local nxt = lumus.sample(row, sample_opts)
      d:feed(nxt)
      nxt:free()
    end
  end
  -- new token k < n was fed at position t + k; the last one is still in d.tok
  local out = n > 1 and d:ids(t + 1, t + n - 1) or {}
  local last = d.tok:to_table()
  for r = 1, b do
    out[r] = out[r] or {}
    out[r][n] = last[r]
  end
  if owned then owned:free() end
  return one_row and out[1] or out
end

return M
