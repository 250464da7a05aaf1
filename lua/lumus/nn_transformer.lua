--- Transformer modules for lumus.nn (attached by lua/lumus/nn.lua):
--
--   nn.MultiheadAttention(E, H [, {bias = true, causal = false, init = true}])
--     x [B, T, E] -> [B, T, E]: one fused q/k/v projection (in_proj_weight [3E, E],
--     in_proj_bias [3E], torch layout: y = x W^T + b; q, k, v are its thirds, each head
--     hd = E / H contiguous columns), attention over heads, out_proj_weight [E, E],
--     out_proj_bias [E]. causal: query i sees keys 1..i, aligned to the end when keys
--     outnumber queries (a KV cache): the last query sees every key.
--     mha:forward(x [, cache]): with a cache (mha:new_cache(B, max_len) or nn.KVCache),
--     the new keys and values are written at positions cache.length + 1 .. + T, the
--     queries attend to positions 1 .. cache.length + T, and cache.length grows by T.
--     mha:forward(x, cache, at): the decode step with the position on the device (for
--     lumus.capture): T = 1; k and v are written at the new position (cache:write_at(kv,
--     at): at.pos, int32 [1], the position, or at.write, bool [max_len] true there, as
--     cache:writes_by_index() says), at.attend (bool, max_len elements) selects the keys
--     attended; cache.length is left to the caller.
--   nn.KVCache(B, H, max_len, hd [, {dtype = "float32"}])
--     k, v: [B, H, max_len, hd], the two halves of kv [2, B, H, max_len, hd], allocated
--     once and written in place (narrow + copy; write_at: index_copy or where at a device
--     position);
--     cache.length (positions held, from 0), cache:append(k, v) -> the k and v views of
--     1..length, cache:reset(), cache:free().
--   nn.TransformerBlock(D, H [, {mlp_ratio = 4, hidden =, activation = "gelu_tanh",
--     norm = "layer", eps = 1e-5, bias = true, causal = true, init = true}])
--     pre-norm: h = x + attn(norm1(x)); y = h + proj(act(fc(norm2(h)))).
--     activation: "gelu_tanh", "gelu" (erf), "relu", "silu"; norm: "layer" (weight and
--     bias) or "rms" (weight only). Parameters: ln1_weight, ln1_bias, ln2_weight,
--     ln2_bias, fc_weight [hidden, D], fc_bias, proj_weight [D, hidden], proj_bias, then
--     the attention's. block:forward(x [, cache [, at]]) passes the cache (and at) to its attention.
--
-- init = false leaves the parameters uninitialized (lumus.empty), for loading weights;
-- otherwise weights are uniform(-1/sqrt(in), 1/sqrt(in)) from the device generator
-- (lumus.manual_seed fixes them), biases 0, norm weights 1.
-- These modules return a new tensor per call (m.output is the last one) and free their
-- intermediates as they go, except in a call autograd records (grad enabled and the input
-- or a parameter of the module or its children requires grad): there the graph holds
-- them, and training works (scaled_dot_product_attention has a backward).
-- Attention runs lumus.scaled_dot_product_attention where this build has it, else the
-- composite below (matmul, scale, causal mask by where, softmax, matmul).
local lumus = require "lumus"

local M = {}

local Tensor = lumus.Tensor
local function is_tensor(v) return getmetatable(v) == Tensor end
local function shape_string(t) return table.concat(t:shape(), "x") end

local function positive_int(fname, what, v)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 1 or v >= 2 ^ 31 then
    error(("%s: %s must be a positive integer, got %s"):format(fname, what, tostring(v)), 4)
  end
  return math.floor(v)
end

local function options(fname, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(("%s: options must be a table, got %s"):format(fname, type(opts)), 4) end
  for k in pairs(opts) do
    if known[k] == nil then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(("%s: unknown option '%s' (known: %s)"):format(fname, tostring(k), table.concat(names, ", ")), 4)
    end
  end
  return opts
end

local function boolean(fname, opts, key, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "boolean" then error(("%s: option %s must be a boolean, got %s"):format(fname, key, type(v)), 4) end
  return v
end

-- Would autograd record module m's call on x? (nn.lua's rule, children included.)
local function records(m, x)
  if not lumus.is_grad_enabled() then return false end
  local autograd = lumus.autograd
  if autograd and autograd.is_installed and not autograd.is_installed() then return false end
  if is_tensor(x) and x:requires_grad() then return true end
  local function any(mod)
    for _, name in ipairs(mod._params) do
      if mod[name]:requires_grad() then return true end
    end
    for _, c in ipairs(mod._modules) do
      if any(c) then return true end
    end
    return false
  end
  return any(m)
end

-- Frees the tensors given unless the call is recorded (keep).
local function release(keep, ...)
  if keep then return end
  for i = 1, select("#", ...) do select(i, ...):free() end
end

-- Attention of q [B, H, T, hd] over k, v [B, H, L, hd] (L >= T), by existing kernels.
-- With causal, query i (1-based) sees keys 1 .. L - T + i.
function M.composite_attention(q, k, v, causal, scale)
  -- under autograd the graph holds the intermediates: nothing is freed
  local keep = lumus.is_grad_enabled() and (q:requires_grad() or k:requires_grad() or v:requires_grad())
  local raw = lumus.matmul(q, k, { transpose_b = true })   -- [B, H, T, L]
  local s = lumus.scale(raw, scale)
  release(keep, raw)
  local t, l = q:size(3), k:size(3)
  if causal and t > 1 then
    local last = lumus.arange(l - t + 1, l + 1, { dtype = "float32" }):view({ t, 1 })   -- last key each query sees
    local key = lumus.arange(1, l + 1, { dtype = "float32" }):view({ 1, l })
    local allowed = lumus.le(key, last)                          -- bool [T, L]
    local masked = lumus.where(allowed, s, -math.huge)
    release(keep, s, allowed)
    last:free(); key:free()
    s = masked
  end
  local p = lumus.softmax(s)
  release(keep, s)
  local o = lumus.matmul(p, v)                                   -- [B, H, T, hd]
  release(keep, p)
  return o
end

-- layer_norm_forward(x, w, b, eps) for any float dtype: natively where the build's
-- layer_norm_forward takes x's dtype (probed once per dtype), else in float32 with the
-- result converted back to x's dtype (statistics in float32 either way). Returns y only.
-- keep: the call is recorded by autograd (mean and invstd are saved by its graph).
local native_layer_norm = {}
local function layer_norm_native(dt)
  if dt ~= "float32" and native_layer_norm[dt] == nil then
    local probe = lumus.zeros({ 1, 4 }, { dtype = dt })
    local pw = lumus.ones({ 4 }, { dtype = dt })
    native_layer_norm[dt] = pcall(lumus.layer_norm_forward, probe, pw, pw, 1e-5)
    probe:free(); pw:free()
  end
  return dt == "float32" or native_layer_norm[dt]
end

function M.layer_norm(x, w, b, eps, keep)
  local dt = x:dtype()
  if layer_norm_native(dt) then
    local y, mean, invstd = lumus.layer_norm_forward(x, w, b, eps)
    release(keep, mean, invstd)
    return y
  end
  local x32, w32 = x:to("float32"), w:to("float32")
  local b32 = b and b:to("float32")
  local y32, mean, invstd = lumus.layer_norm_forward(x32, w32, b32, eps)
  mean:free(); invstd:free(); x32:free(); w32:free()
  if b32 then b32:free() end
  local y = y32:to(dt)
  y32:free()
  return y
end

-- act(layer_norm(x) w^T + b) (LayerNorm over x's last dimension, weight lw, bias lb):
-- one lumus.layer_norm_linear where its kernel normalizes inside the product (one
-- dispatch; lumus.tune.linear says for which shapes), else M.layer_norm then linear with
-- the normalized rows freed here (layer_norm_linear's own two-op path leaves its
-- temporaries to the garbage collector). act: linear's activation name or nil; out:
-- linear's out or nil; keep: the call is recorded by autograd.
function M.layer_norm_linear(x, lw, lb, eps, w, b, act, out, keep)
  local tune = lumus.tune
  if lumus.layer_norm_linear ~= nil and tune and tune.linear and layer_norm_native(x:dtype()) then
    local k = x:size(x:dim())
    local ok, cfg = pcall(tune.linear, math.floor(x:numel() / k), w:size(1), k)
    if ok and cfg.layer_norm_fused then
      return lumus.layer_norm_linear(x, lw, lb, w, b, { eps = eps, activation = act, out = out })
    end
  end
  local n = M.layer_norm(x, lw, lb, eps, keep)
  local y = lumus.linear(n, w, b, { activation = act, out = out })
  release(keep, n)
  return y
end

-- Set to true (specs) to use the composite even where the fused op exists.
M.force_composite = false

local function attention(q, k, v, causal, scale)
  local fused = lumus.scaled_dot_product_attention
  if fused ~= nil and not M.force_composite then
    return fused(q, k, v, { causal = causal and q:size(3) > 1, scale = scale })
  end
  return M.composite_attention(q, k, v, causal, scale)
end

-- Attention of q [B, H, 1, hd] over the whole cache k, v [B, H, L, hd], keys where
-- attend (bool, L elements) is true: the decode step with a device-side length.
local function attention_masked(q, k, v, attend, scale)
  local l = k:size(3)
  local mask = attend:view({ 1, 1, 1, l })
  local fused = lumus.scaled_dot_product_attention
  if fused ~= nil and not M.force_composite then
    local o = fused(q, k, v, { mask = mask, scale = scale })
    mask:free()   -- (the view's handle: attend's memory is the caller's)
    return o
  end
  local raw = lumus.matmul(q, k, { transpose_b = true })   -- [B, H, 1, L]
  local sc = lumus.scale(raw, scale)
  raw:free()
  local s = lumus.where(mask, sc, -math.huge)
  sc:free()
  local p = lumus.softmax(s)
  s:free()
  local o = lumus.matmul(p, v)
  p:free()
  return o
end

---------------------------------------------------------------------------------------
-- KV cache

local KVCache = {}
KVCache.__index = KVCache
KVCache.__name = "nn.KVCache"

local function new_kv_cache(b, h, max_len, hd, opts)
  local fname = "nn.KVCache"
  b = positive_int(fname, "batch", b)
  h = positive_int(fname, "heads", h)
  max_len = positive_int(fname, "max_len", max_len)
  hd = positive_int(fname, "head_dim", hd)
  opts = options(fname, opts, { dtype = true })
  local dtype = opts.dtype or "float32"
  -- keys and values in one tensor, so that write_at updates both with one where
  local kv = lumus.zeros({ 2, b, h, max_len, hd }, { dtype = dtype })
  return setmetatable({
    kv = kv, k = kv:select(1, 1), v = kv:select(1, 2),
    batch = b, heads = h, max_len = max_len, head_dim = hd, length = 0,
  }, KVCache)
end

--- Writes k, v [B, H, T, hd] at positions length+1 .. length+T; returns the k and v
-- views of positions 1 .. length (after the write). kv (optional): the same keys and
-- values as one [2, B, H, T, hd] view (as MultiheadAttention has them), written by one
-- copy instead of two.
function KVCache:append(k, v, kv)
  local t = k:size(3)
  if k:dim() ~= 4 or k:size(1) ~= self.batch or k:size(2) ~= self.heads or k:size(4) ~= self.head_dim then
    error(("nn.KVCache:append: k must be [%d, %d, T, %d], got shape %s")
      :format(self.batch, self.heads, self.head_dim, shape_string(k)), 3)
  end
  if self.length + t > self.max_len then
    error(("nn.KVCache:append: %d positions held + %d new exceed max_len %d")
      :format(self.length, t, self.max_len), 3)
  end
  if kv ~= nil then   -- k and v as one [2, B, H, T, hd] view: one strided copy
    self.kv:narrow(4, self.length + 1, t):copy(kv)
  else
    self.k:narrow(3, self.length + 1, t):copy(k)
    self.v:narrow(3, self.length + 1, t):copy(v)
  end
  self.length = self.length + t
  return self.k:narrow(3, 1, self.length), self.v:narrow(3, 1, self.length)
end

-- From this many positions on, write_at writes a kv of several rows by lumus.index_copy
-- at at.pos (a copy of kv to contiguous, then numel(kv) elements written) rather than by
-- a where over the whole cache (one dispatch, but reading and writing 2 * B * H *
-- max_len * hd elements). A field, so that specs can take either path; so is kv_write
-- (nil: automatic; "where" or "index_copy": that path).
M.kv_index_copy_min_len = 512
M.kv_write = nil

--- Whether write_at writes by index_copy at at.pos (true) or by where at at.write.
-- index_copy where the build has it and either one row per step (the kv that
-- MultiheadAttention passes, a view of its q/k/v projection, is then contiguous: one
-- dispatch writing only the new position) or a long cache.
function KVCache:writes_by_index()
  if lumus.index_copy == nil then return false end
  if M.kv_write ~= nil then return M.kv_write == "index_copy" end
  return self.batch == 1 or self.max_len >= M.kv_index_copy_min_len
end

--- Writes kv [2, B, H, 1, hd] (keys, then values; any view) at one position held on the
-- device, leaving the other positions as they are, so that the position never reaches
-- the host: by lumus.index_copy at at.pos (int32 [1], 1-based) or by one exact
-- lumus.where over the cache under at.write (bool [max_len], true at the position), as
-- writes_by_index() says (the other field may be absent). Returns the whole k and v
-- [B, H, max_len, hd]. cache.length is not changed: the caller tracks the position (a
-- captured decode step replays this with a new position).
function KVCache:write_at(kv, at)
  if not is_tensor(kv) or kv:dim() ~= 5 or kv:size(1) ~= 2 or kv:size(2) ~= self.batch or kv:size(3) ~= self.heads
    or kv:size(4) ~= 1 or kv:size(5) ~= self.head_dim then
    error(("nn.KVCache:write_at: kv must be [2, %d, %d, 1, %d], got %s")
      :format(self.batch, self.heads, self.head_dim, is_tensor(kv) and "shape " .. shape_string(kv) or type(kv)), 2)
  end
  if type(at) ~= "table" then error(("nn.KVCache:write_at: at must be a table, got %s"):format(type(at)), 2) end
  if self:writes_by_index() then
    local p = at.pos
    if not is_tensor(p) or p:dtype() ~= "int32" or p:numel() ~= 1 then
      error("nn.KVCache:write_at: at.pos must be an int32 tensor of 1 element (the 1-based position)", 2)
    end
    lumus.index_copy(self.kv, 4, p:view({ 1 }), kv, { out = self.kv })
  else
    local w = at.write
    if not is_tensor(w) or w:dtype() ~= "bool" or w:numel() ~= self.max_len then
      error(("nn.KVCache:write_at: at.write must be a bool tensor of %d elements"):format(self.max_len), 2)
    end
    lumus.where(w:view({ 1, 1, 1, self.max_len, 1 }), kv, self.kv, { out = self.kv })
  end
  return self.k, self.v
end

function KVCache:reset() self.length = 0; return self end
function KVCache:free() self.kv:free() end
KVCache.__tostring = function(self)
  return ("nn.KVCache(%dx%dx%dx%d, length %d)"):format(self.batch, self.heads, self.max_len, self.head_dim, self.length)
end

---------------------------------------------------------------------------------------

-- A [rows, cols] parameter: uniform(-1/sqrt(cols), 1/sqrt(cols)) from the device generator.
local function weight(rows, cols, init)
  local w = lumus.empty({ rows, cols })
  if init then w:uniform_(-1 / math.sqrt(cols), 1 / math.sqrt(cols)) end
  return w
end

local function vector(n, value, init)
  if not init then return lumus.empty({ n }) end
  return value == 0 and lumus.zeros({ n }) or lumus.ones({ n })
end

function M.attach(nn)
  nn.KVCache = setmetatable({}, {
    __call = function(_, ...) return new_kv_cache(...) end,
    __index = KVCache,
  })

  -------------------------------------------------------------------------------------
  local MHA = nn.Module:extend("MultiheadAttention")
  nn.MultiheadAttention = MHA

  function MHA:__init(embed_dim, num_heads, opts)
    local fname = "nn.MultiheadAttention"
    local e = positive_int(fname, "embed_dim", embed_dim)
    local h = positive_int(fname, "num_heads", num_heads)
    if e % h ~= 0 then
      error(("%s: embed_dim %d must be divisible by num_heads %d"):format(fname, e, h), 3)
    end
    opts = options(fname, opts, { bias = true, causal = true, init = true })
    self.embed_dim, self.num_heads, self.head_dim = e, h, math.floor(e / h)
    self.causal = boolean(fname, opts, "causal", false)
    local bias = boolean(fname, opts, "bias", true)
    local init = boolean(fname, opts, "init", true)
    self:register_parameter("in_proj_weight", weight(3 * e, e, init))
    if bias then self:register_parameter("in_proj_bias", vector(3 * e, 0, init)) end
    self:register_parameter("out_proj_weight", weight(e, e, init))
    if bias then self:register_parameter("out_proj_bias", vector(e, 0, init)) end
  end

  --- A KV cache for this module: [batch, heads, max_len, head_dim] keys and values.
  function MHA:new_cache(batch, max_len, opts)
    return new_kv_cache(batch, self.num_heads, max_len, self.head_dim, opts)
  end

  -- The attention of x [B, T, E] (checked by the caller); ln (optional): {weight, bias,
  -- eps} of a LayerNorm applied to x first, inside the q/k/v projection where the
  -- kernel takes it (M.layer_norm_linear). keep: the call is recorded by autograd.
  local function mha_forward(self, x, cache, at, ln, keep)
    local e, h, hd = self.embed_dim, self.num_heads, self.head_dim
    local b, t = x:size(1), x:size(2)
    local qkv                                                             -- [B, T, 3E]
    if ln then
      qkv = M.layer_norm_linear(x, ln[1], ln[2], ln[3], self.in_proj_weight, self.in_proj_bias, nil, nil, keep)
    else
      qkv = lumus.linear(x, self.in_proj_weight, self.in_proj_bias)
    end
    -- q, k, v [B, H, T, hd] and kv [2, B, H, T, hd] (keys, then values): views of qkv.
    -- Each view is a handle that keeps qkv's memory until it is freed or collected, so
    -- every one is freed once used (a chained view's intermediates too).
    local heads = qkv:view({ b, t, 3, h, hd })
    local parts = heads:permute({ 3, 1, 4, 2, 5 })                       -- [3, B, H, T, hd]
    local q, k, v = parts:select(1, 1), parts:select(1, 2), parts:select(1, 3)
    local kv = parts:narrow(1, 2, 2)
    local views = { heads, parts, q, k, v, kv }
    local o
    if at ~= nil then
      local ck, cv = cache:write_at(kv, at)   -- the cache's own k and v
      o = attention_masked(q, ck, cv, at.attend, 1 / math.sqrt(hd))
    else
      if cache ~= nil then
        k, v = cache:append(k, v, kv)         -- views of the cache's positions 1..length
        views[#views + 1], views[#views + 2] = k, v
      end
      o = attention(q, k, v, self.causal, 1 / math.sqrt(hd))
    end
    if not keep then
      for _, t_ in ipairs(views) do t_:free() end
    end
    release(keep, qkv)
    -- [B, H, T, hd] -> [B, T, E]: for T = 1 the same memory order, so a view
    local merged
    if t == 1 then
      merged = o:view({ b, t, e })
    else
      local ot = o:transpose(2, 3)
      local oc = ot:contiguous()
      merged = oc:view({ b, t, e })
      if oc ~= ot then release(keep, oc) end
      release(keep, ot)
    end
    release(keep, o)
    local y = lumus.linear(merged, self.out_proj_weight, self.out_proj_bias)
    release(keep, merged)
    self.output = y
    return y
  end

  -- The checks of forward's cache and at (error level: forward's caller).
  local function check_cache(self, x, cache, at, what)
    if cache ~= nil and getmetatable(cache) ~= KVCache then
      error(("%s: cache must be an nn.KVCache, got %s"):format(what, type(cache)), 3)
    end
    if at ~= nil and (cache == nil or x:size(2) ~= 1) then
      error(("%s: a device position (third argument) needs a cache and one new position per row, got T = %d")
        :format(what, x:size(2)), 3)
    end
  end

  function MHA:forward(x, cache, at)
    if not is_tensor(x) or x:dim() ~= 3 or x:size(3) ~= self.embed_dim then
      error(("%s: input must be a [B, T, %d] tensor, got %s"):format(self:describe(), self.embed_dim,
        is_tensor(x) and "shape " .. shape_string(x) or type(x)), 2)
    end
    check_cache(self, x, cache, at, self:describe())
    return mha_forward(self, x, cache, at, nil, records(self, x))
  end

  function MHA:describe()
    return ("nn.MultiheadAttention(%d, heads=%d%s%s)"):format(self.embed_dim, self.num_heads,
      self.causal and ", causal" or "", self.in_proj_bias and "" or ", no bias")
  end

  -------------------------------------------------------------------------------------
  local Block = nn.Module:extend("TransformerBlock")
  nn.TransformerBlock = Block

  local ACTIVATIONS = { gelu_tanh = "gelu_tanh", gelu = "gelu_erf", relu = "relu", silu = "silu" }

  function Block:__init(dim, heads, opts)
    local fname = "nn.TransformerBlock"
    local d = positive_int(fname, "dim", dim)
    local h = positive_int(fname, "heads", heads)
    opts = options(fname, opts, { mlp_ratio = true, hidden = true, activation = true, norm = true,
      eps = true, bias = true, causal = true, init = true })
    local ratio = opts.mlp_ratio or 4
    if type(ratio) ~= "number" or not (ratio > 0) then
      error(("%s: option mlp_ratio must be a positive number, got %s"):format(fname, tostring(ratio)), 3)
    end
    local hidden = opts.hidden and positive_int(fname, "option hidden", opts.hidden)
      or math.max(1, math.floor(d * ratio + 0.5))
    local act = opts.activation or "gelu_tanh"
    if ACTIVATIONS[act] == nil then
      error(("%s: option activation must be \"gelu_tanh\", \"gelu\", \"relu\" or \"silu\", got %s")
        :format(fname, tostring(act)), 3)
    end
    local norm = opts.norm or "layer"
    if norm ~= "layer" and norm ~= "rms" then
      error(("%s: option norm must be \"layer\" or \"rms\", got %s"):format(fname, tostring(norm)), 3)
    end
    local eps = opts.eps or 1e-5
    if type(eps) ~= "number" or not (eps >= 0) or eps == math.huge then
      error(("%s: option eps must be a finite number >= 0, got %s"):format(fname, tostring(eps)), 3)
    end
    local bias = boolean(fname, opts, "bias", true)
    local causal = boolean(fname, opts, "causal", true)
    local init = boolean(fname, opts, "init", true)
    self.dim, self.heads, self.hidden, self.activation, self.norm, self.eps =
      d, h, hidden, act, norm, eps
    self:register_parameter("ln1_weight", vector(d, 1, init))
    if norm == "layer" then self:register_parameter("ln1_bias", vector(d, 0, init)) end
    self:register_parameter("ln2_weight", vector(d, 1, init))
    if norm == "layer" then self:register_parameter("ln2_bias", vector(d, 0, init)) end
    self:register_parameter("fc_weight", weight(hidden, d, init))
    if bias then self:register_parameter("fc_bias", vector(hidden, 0, init)) end
    self:register_parameter("proj_weight", weight(d, hidden, init))
    if bias then self:register_parameter("proj_bias", vector(d, 0, init)) end
    self.attn = self:register_module(nn.MultiheadAttention(d, h, { bias = bias, causal = causal, init = init }))
  end

  function Block:new_cache(batch, max_len, opts) return self.attn:new_cache(batch, max_len, opts) end

  -- norm i (1 or 2) of x, a new tensor.
  local function normalize(self, x, i, keep)
    local w = self["ln" .. i .. "_weight"]
    if self.norm == "layer" then return M.layer_norm(x, w, self["ln" .. i .. "_bias"], self.eps, keep) end
    local sq = lumus.mul(x, x)
    local ms = lumus.mean(sq, { dim = -1, keepdim = true })
    local r = lumus.rsqrt(lumus.add(ms, self.eps))
    local y = lumus.mul(lumus.mul(x, r), w)
    release(keep, sq, ms, r)
    return y
  end

  -- linear's name of each activation (its fused epilogue)
  local LINEAR_ACTIVATIONS = { gelu_tanh = "gelu_tanh", gelu = "gelu", relu = "relu", silu = "silu" }

  -- LayerNorm runs inside the next linear where the kernel takes the rows
  -- (M.layer_norm_linear: one dispatch instead of two) and the activation in fc's store
  -- (one dispatch fewer than linear and activation one by one).
  function Block:forward(x, cache, at)
    if not is_tensor(x) or x:dim() ~= 3 or x:size(3) ~= self.dim then
      error(("%s: input must be a [B, T, %d] tensor, got %s"):format(self:describe(), self.dim,
        is_tensor(x) and "shape " .. shape_string(x) or type(x)), 2)
    end
    check_cache(self.attn, x, cache, at, self:describe())
    local keep = records(self, x)
    local act = LINEAR_ACTIVATIONS[self.activation]
    local fused = self.norm == "layer"
    local a
    if fused then
      a = mha_forward(self.attn, x, cache, at, { self.ln1_weight, self.ln1_bias, self.eps }, keep)
    else
      local n1 = normalize(self, x, 1, keep)
      a = mha_forward(self.attn, n1, cache, at, nil, keep)
      release(keep, n1)
    end
    local r = lumus.add(x, a)
    if not keep then
      a:free()
      self.attn.output = nil   -- (freed: r holds the sum)
    end
    local f
    if fused then
      f = M.layer_norm_linear(r, self.ln2_weight, self.ln2_bias, self.eps, self.fc_weight, self.fc_bias, act, nil, keep)
    else
      local n2 = normalize(self, r, 2, keep)
      f = lumus.linear(n2, self.fc_weight, self.fc_bias, { activation = act })
      release(keep, n2)
    end
    local p = lumus.linear(f, self.proj_weight, self.proj_bias)
    release(keep, f)
    local y = lumus.add(r, p)
    release(keep, r, p)
    self.output = y
    return y
  end

  function Block:describe()
    return ("nn.TransformerBlock(%d, heads=%d, hidden=%d, %s, %s norm%s)"):format(self.dim, self.heads,
      self.hidden, self.activation, self.norm, self.attn.causal and ", causal" or "")
  end
end

return M
