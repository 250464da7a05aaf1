-- Float64 references for the transformer specs (plain Lua, nested tables [rows][cols]):
-- multi-head attention, a pre-norm transformer block and a GPT-2 forward with Hugging
-- Face's tensor names and layouts. Loaded with dofile("spec/support/gpt2_ref.lua").
local ref = require "lumus.reference"

local M = {}

local exp, sqrt, tanh = math.exp, math.sqrt, math.tanh

-- x [T][in] times w: torch layout w [out][in] (y = x w^T + b) or, with conv1d, [in][out].
function M.linear(x, w, b, conv1d)
  local y = {}
  local n_out = conv1d and #w[1] or #w
  for t = 1, #x do
    local row, xr = {}, x[t]
    for o = 1, n_out do
      local s = b and b[o] or 0
      if conv1d then
        for i = 1, #xr do s = s + xr[i] * w[i][o] end
      else
        local wr = w[o]
        for i = 1, #xr do s = s + xr[i] * wr[i] end
      end
      row[o] = s
    end
    y[t] = row
  end
  return y
end

function M.layer_norm(x, w, b, eps)
  local y = {}
  for t = 1, #x do
    local r, n = x[t], #x[t]
    local m = 0
    for i = 1, n do m = m + r[i] end
    m = m / n
    local v = 0
    for i = 1, n do v = v + (r[i] - m) ^ 2 end
    local inv = 1 / sqrt(v / n + eps)
    local o = {}
    for i = 1, n do o[i] = (r[i] - m) * inv * (w and w[i] or 1) + (b and b[i] or 0) end
    y[t] = o
  end
  return y
end

function M.gelu_tanh(x)
  return ref.map(x, function(v) return 0.5 * v * (1 + tanh(sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end)
end

function M.add(a, b) return ref.add(a, b) end

-- Attention of the rows of qkv [T][3E] (q, k, v thirds, H heads of E/H columns each),
-- queries at positions offset+1..offset+T over keys 1..offset+T where past = {k =, v =}
-- holds the first `offset` rows of keys and values [offset][E] (nil: none). Returns
-- the merged heads [T][E] and the keys and values [offset+T][E] for the next call.
function M.attention(qkv, h, causal, past)
  local e = #qkv[1] / 3
  local hd = e / h
  local keys, vals = {}, {}
  if past then
    for i = 1, #past.k do keys[i], vals[i] = past.k[i], past.v[i] end
  end
  local offset = #keys
  for t = 1, #qkv do
    local k, v = {}, {}
    for j = 1, e do k[j], v[j] = qkv[t][e + j], qkv[t][2 * e + j] end
    keys[offset + t], vals[offset + t] = k, v
  end
  local out = {}
  for t = 1, #qkv do
    local row = {}
    local last = causal and offset + t or #keys
    for head = 0, h - 1 do
      local base = head * hd
      local s, m = {}, -math.huge
      for j = 1, last do
        local d = 0
        for c = 1, hd do d = d + qkv[t][base + c] * keys[j][base + c] end
        s[j] = d / sqrt(hd)
        if s[j] > m then m = s[j] end
      end
      local z = 0
      for j = 1, last do s[j] = exp(s[j] - m); z = z + s[j] end
      for c = 1, hd do
        local acc = 0
        for j = 1, last do acc = acc + s[j] * vals[j][base + c] end
        row[base + c] = acc / z
      end
    end
    out[t] = row
  end
  return out, { k = keys, v = vals }
end

-- nn.MultiheadAttention on x [T][E] with parameters p (nested tables, torch layout).
function M.mha(x, p, h, causal, past)
  local qkv = M.linear(x, p.in_proj_weight, p.in_proj_bias)
  local o, kv = M.attention(qkv, h, causal, past)
  return M.linear(o, p.out_proj_weight, p.out_proj_bias), kv
end

-- nn.TransformerBlock (layer norm, gelu_tanh) on x [T][D]; p: its parameters by name,
-- p.attn the attention's.
function M.block(x, p, h, eps, past)
  local n1 = M.layer_norm(x, p.ln1_weight, p.ln1_bias, eps)
  local a, kv = M.mha(n1, p.attn, h, true, past)
  local r = M.add(x, a)
  local n2 = M.layer_norm(r, p.ln2_weight, p.ln2_bias, eps)
  local f = M.gelu_tanh(M.linear(n2, p.fc_weight, p.fc_bias))
  return M.add(r, M.linear(f, p.proj_weight, p.proj_bias)), kv
end

-- GPT-2 logits [T][V] for 1-based ids (one row) from w, name -> nested table with
-- Hugging Face's names (with the "transformer." prefix) and Conv1D layouts.
function M.gpt2_forward(w, cfg, ids)
  local eps = cfg.layer_norm_epsilon or 1e-5
  local x = {}
  for t, id in ipairs(ids) do
    local row = {}
    for j = 1, cfg.n_embd do row[j] = w["transformer.wte.weight"][id][j] + w["transformer.wpe.weight"][t][j] end
    x[t] = row
  end
  for l = 0, cfg.n_layer - 1 do
    local p = ("transformer.h.%d."):format(l)
    local n1 = M.layer_norm(x, w[p .. "ln_1.weight"], w[p .. "ln_1.bias"], eps)
    local qkv = M.linear(n1, w[p .. "attn.c_attn.weight"], w[p .. "attn.c_attn.bias"], true)
    local o = M.attention(qkv, cfg.n_head, true)
    x = M.add(x, M.linear(o, w[p .. "attn.c_proj.weight"], w[p .. "attn.c_proj.bias"], true))
    local n2 = M.layer_norm(x, w[p .. "ln_2.weight"], w[p .. "ln_2.bias"], eps)
    local f = M.gelu_tanh(M.linear(n2, w[p .. "mlp.c_fc.weight"], w[p .. "mlp.c_fc.bias"], true))
    x = M.add(x, M.linear(f, w[p .. "mlp.c_proj.weight"], w[p .. "mlp.c_proj.bias"], true))
  end
  local n = M.layer_norm(x, w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
  return M.linear(n, w["transformer.wte.weight"])
end

-- Greedy continuation of ids by n tokens (first largest logit, as lumus.argmax).
function M.gpt2_greedy(w, cfg, ids, n)
  local seq, new = {}, {}
  for i, v in ipairs(ids) do seq[i] = v end
  for _ = 1, n do
    local logits = M.gpt2_forward(w, cfg, seq)
    local last = logits[#logits]
    local best = 1
    for j = 2, #last do if last[j] > last[best] then best = j end end
    new[#new + 1] = best
    seq[#seq + 1] = best
  end
  return new
end

-- Random GPT-2 weights (nested tables, Hugging Face names and shapes): matrices
-- uniform(-scale, scale), biases uniform(-0.1, 0.1), norm weights 1 + uniform(-0.1, 0.1).
function M.gpt2_weights(cfg, seed, scale)
  local g = ref.rng(seed)
  local function mat(r, c, s)
    local m = {}
    for i = 1, r do
      local row = {}
      for j = 1, c do row[j] = (2 * g.uniform() - 1) * s end
      m[i] = row
    end
    return m
  end
  local function vec(n, center, s)
    local v = {}
    for i = 1, n do v[i] = center + (2 * g.uniform() - 1) * s end
    return v
  end
  local d, w = cfg.n_embd, {}
  w["transformer.wte.weight"] = mat(cfg.vocab_size, d, scale)
  w["transformer.wpe.weight"] = mat(cfg.n_positions, d, scale)
  for l = 0, cfg.n_layer - 1 do
    local p = ("transformer.h.%d."):format(l)
    w[p .. "ln_1.weight"], w[p .. "ln_1.bias"] = vec(d, 1, 0.1), vec(d, 0, 0.1)
    w[p .. "attn.c_attn.weight"], w[p .. "attn.c_attn.bias"] = mat(d, 3 * d, scale), vec(3 * d, 0, 0.1)
    w[p .. "attn.c_proj.weight"], w[p .. "attn.c_proj.bias"] = mat(d, d, scale), vec(d, 0, 0.1)
    w[p .. "ln_2.weight"], w[p .. "ln_2.bias"] = vec(d, 1, 0.1), vec(d, 0, 0.1)
    w[p .. "mlp.c_fc.weight"], w[p .. "mlp.c_fc.bias"] = mat(d, 4 * d, scale), vec(4 * d, 0, 0.1)
    w[p .. "mlp.c_proj.weight"], w[p .. "mlp.c_proj.bias"] = mat(4 * d, d, scale), vec(d, 0, 0.1)
  end
  w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = vec(d, 1, 0.1), vec(d, 0, 0.1)
  return w
end

return M
