-- bench/gpt2_decode_graph_ops.lua: each op kind of GPT-2's decode step, eagerly and
-- replayed from a graph, in float32 and float16 (issue 17: float16's captured step with
-- the ids read at the end ran slower than float32's although its eager ops took less
-- device time).
--
--   lua5.4 bench/gpt2_decode_graph_ops.lua [--tiny] [--reps 12] [--replays 20]
--
-- For each dtype and op (the shapes of GPT-2 small's decode step at max_len 192, or a
-- 64-wide toy with --tiny for lavapipe): the op called --reps times in a row on fixed
-- tensors (as the step calls it once per layer), timed three ways, in µs per call:
--   eager device: lumus.gpu_time around the calls;
--   replay wall: the calls captured into one graph, --replays replays back to back and
--     one synchronize, host wall time (what the decoder's ids-at-the-end loop does);
--   replay sync: the same with a synchronize after every replay (wall time).
-- An op whose replay costs clearly more than its eager device time in one dtype only
-- is what makes that dtype's captured step slow. The whole step is timed likewise
-- (a model with random weights; fused residual adds on and off), with the host's time
-- per step of the back-to-back loop: all of it, in vkQueueSubmit, and waiting for a slot
-- of the stream's ring (lumus.tune.host_profile).
local script_dir = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()
local gpt2 = require "lumus.models.gpt2"

local tiny, REPS, REPLAYS = false, 12, 20
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--tiny" then tiny = true
  elseif a == "--reps" then REPS = tonumber(arg[i + 1]); i = i + 1
  elseif a == "--replays" then REPLAYS = tonumber(arg[i + 1]); i = i + 1
  else io.stderr:write("bench/gpt2_decode_graph_ops.lua: unknown argument " .. a .. "\n"); os.exit(2) end
  i = i + 1
end

local c = {}
for k, v in pairs(gpt2.config_small) do c[k] = v end
if tiny then c.n_layer, c.n_head, c.n_embd, c.vocab_size, c.n_positions = 2, 2, 64, 97, 256 end
local E, H, V = c.n_embd, c.n_head, c.vocab_size
local HD, HID, L = math.floor(E / H), 4 * E, 192

local function rnd(shape, dt)
  local t = lumus.mul(lumus.randn(shape), 0.02)
  if dt == "float32" then return t end
  local h = t:to(dt)
  t:free()
  return h
end

-- {name, fn} for each op of the step, on tensors of dtype dt (kept in `keep`)
local function ops_for(dt, keep)
  local function T(shape) local t = rnd(shape, dt); keep[#keep + 1] = t; return t end
  local function Z(shape, dtype) local t = lumus.zeros(shape, { dtype = dtype or dt }); keep[#keep + 1] = t; return t end
  local x, lw, lb = T({ 1, 1, E }), T({ E }), T({ E })
  local w_qkv, b_qkv, qkv = T({ 3 * E, E }), T({ 3 * E }), Z({ 1, 1, 3 * E })
  local w_out, b_out, att, r = T({ E, 2 * E }), T({ E }), T({ 1, 1, 2 * E }), Z({ 1, 1, E })
  local w_fc, b_fc, g = T({ HID, E }), T({ HID }), Z({ 1, 1, HID })
  local w_proj, b_proj, mlp, r2 = T({ E, HID + E }), T({ E }), T({ 1, 1, HID + E }), Z({ 1, 1, E })
  local kv = T({ 2, 1, H, L, HD })
  local q, o = T({ 1, H, 1, HD }), Z({ 1, H, 1, HD })
  local keys = lumus.arange(1, L + 1, { dtype = "float32" })
  local mask = lumus.le(keys, 130):view({ 1, 1, 1, L }); keep[#keep + 1] = mask
  keys:free()
  local pos = lumus.tensor({ 130 }, { dtype = "int32" }); keep[#keep + 1] = pos
  local heads = qkv:view({ 1, 1, 3, H, HD }):permute({ 3, 1, 4, 2, 5 }):narrow(1, 2, 2)   -- [2, 1, H, 1, hd]
  keep[#keep + 1] = heads
  local wte = T({ V, E })
  local logits = Z({ 1, 1, V })
  local rows = logits:view({ 1, V }); keep[#keep + 1] = rows
  local tok = Z({ 1 }, "int32")
  local k, v = kv:select(1, 1), kv:select(1, 2)
  keep[#keep + 1] = k; keep[#keep + 1] = v
  return {
    { ("layer_norm_forward 1x%d"):format(E), function()
      local y, m, s = lumus.layer_norm_forward(x, lw, lb, 1e-5); y:free(); m:free(); s:free() end },
    { ("linear %dx%d (qkv)"):format(3 * E, E), function() lumus.linear(x, w_qkv, b_qkv, { out = qkv }) end },
    { ("linear %dx%d (out_proj + residual)"):format(E, 2 * E), function() lumus.linear(att, w_out, b_out, { out = r }) end },
    { ("linear %dx%d gelu_tanh (fc)"):format(HID, E), function()
      lumus.linear(x, w_fc, b_fc, { activation = "gelu_tanh", out = g }) end },
    { ("linear %dx%d (proj + residual)"):format(E, HID + E), function() lumus.linear(mlp, w_proj, b_proj, { out = r2 }) end },
    { ("scaled_dot_product_attention 1x%dx1x%d over %d"):format(H, HD, L), function()
      lumus.scaled_dot_product_attention(q, k, v, { mask = mask, scale = 1 / math.sqrt(HD), out = o }) end },
    { ("index_copy kv 2x1x%dx%dx%d"):format(H, L, HD), function() lumus.index_copy(kv, 4, pos, heads, { out = kv }) end },
    { ("matmul 1x%d . %dx%d^T (head)"):format(E, V, E), function()
      lumus.matmul(x, wte, { transpose_b = true, out = logits }) end },
    { ("argmax 1x%d"):format(V), function() lumus.argmax(rows, { dim = 2, out = tok }) end },
  }
end

local function per_call_us(secs, n) return secs / n * 1e6 end

local function time_op(fn)
  for _ = 1, 2 do fn() end   -- pipelines
  lumus.synchronize()
  local eager = lumus.gpu_time(function() for _ = 1, REPS do fn() end end)
  local g = lumus.capture(function() for _ = 1, REPS do fn() end end)
  g:replay()
  lumus.synchronize()
  local t0 = lumus.clock()
  for _ = 1, REPLAYS do g:replay() end
  lumus.synchronize()
  local wall = lumus.clock() - t0
  t0 = lumus.clock()
  for _ = 1, REPLAYS do g:replay(); lumus.synchronize() end
  local sync = lumus.clock() - t0
  g:free()
  return per_call_us(eager, REPS), per_call_us(wall, REPS * REPLAYS), per_call_us(sync, REPS * REPLAYS)
end

print(("## GPT-2 decode step's ops, eager against replayed (%s), on %s\n")
  :format(tiny and "tiny 64-wide" or "GPT-2 small shapes, max_len 192", lumus.device().name))
print(("%d calls per graph, %d replays; µs per call\n"):format(REPS, REPLAYS))
print("| op | dtype | eager device | replay wall | replay, sync each |")
print("|:---|:---|---:|---:|---:|")
lumus.manual_seed(3)
for _, dt in ipairs({ "float32", "float16" }) do
  local keep = {}
  for _, op in ipairs(ops_for(dt, keep)) do
    local ok, e, w, s = pcall(time_op, op[2])
    if ok then print(("| %s | %s | %.2f | %.2f | %.2f |"):format(op[1], dt, e, w, s))
    else print(("| %s | %s | failed: %s | | |"):format(op[1], dt, tostring(e):gsub("|", "/"))) end
  end
  for _, t in ipairs(keep) do t:free() end
  collectgarbage()
end

-- The whole step: a model with random weights.
local W = {}
local function r(name, shape) W[name] = rnd(shape, "float32") end
r("wte.weight", { V, E }); r("wpe.weight", { c.n_positions, E })
for l = 0, c.n_layer - 1 do
  local p = "h." .. l .. "."
  W[p .. "ln_1.weight"] = lumus.ones({ E }); W[p .. "ln_1.bias"] = lumus.zeros({ E })
  W[p .. "ln_2.weight"] = lumus.ones({ E }); W[p .. "ln_2.bias"] = lumus.zeros({ E })
  r(p .. "attn.c_attn.weight", { E, 3 * E }); r(p .. "attn.c_attn.bias", { 3 * E })
  r(p .. "attn.c_proj.weight", { E, E }); r(p .. "attn.c_proj.bias", { E })
  r(p .. "mlp.c_fc.weight", { E, HID }); r(p .. "mlp.c_fc.bias", { HID })
  r(p .. "mlp.c_proj.weight", { HID, E }); r(p .. "mlp.c_proj.bias", { E })
end
W["ln_f.weight"] = lumus.ones({ E }); W["ln_f.bias"] = lumus.zeros({ E })
local ids = {}
for k = 0, 127 do ids[k + 1] = (k * 7919 + 13) % V + 1 end

local function restart(dec)
  local logits = dec:prefill(lumus.tensor({ ids }, { dtype = "int32" }))
  local first = lumus.sample(logits:select(2, 1):to("float32"), { greedy = true })
  logits:free()
  dec:feed(first)
  first:free()
end

print("\n| whole step | dtype | graph ops | eager device ms | replays back to back ms | replay + sync each ms | host µs per step (back to back, before the synchronize) | vkQueueSubmit µs per step | waiting µs per step, the final synchronize included (waits) |")
print("|:---|:---|---:|---:|---:|---:|---:|---:|---:|")
for _, dt in ipairs({ "float32", "float16" }) do
  local model = gpt2.from_tensors(W, c, { dtype = dt })
  for _, fuse in ipairs({ true, false }) do
    local label = fuse and "fused residual" or "residual adds apart"
    local e = model:new_decoder(1, L, { greedy = true, capture = false, fuse_residual = fuse })
    restart(e)
    e:step(); e:step()
    lumus.synchronize()
    local dev = lumus.gpu_time(function() for _ = 1, 10 do e:step() end end) / 10
    e:free()
    local d = model:new_decoder(1, L, { greedy = true, fuse_residual = fuse })
    restart(d)
    d:capture()
    d:step()
    lumus.synchronize()
    restart(d)
    lumus.synchronize()
    local prof = lumus.tune and lumus.tune.host_profile
    if prof then prof({ on = true }) end
    local t0 = lumus.clock()
    for _ = 1, 60 do d:step() end
    local host = (lumus.clock() - t0) / 60
    lumus.synchronize()
    local wall = (lumus.clock() - t0) / 60
    local hp = prof and prof() or {}
    if prof then prof({}) end
    restart(d)
    lumus.synchronize()
    t0 = lumus.clock()
    for _ = 1, 60 do d:step(); lumus.synchronize() end
    local sync = (lumus.clock() - t0) / 60
    print(("| %s | %s | %s | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f (%d) |"):format(label, dt,
      d.graph and d.graph:stats().ops or "-", dev * 1e3, wall * 1e3, sync * 1e3, host * 1e6,
      (hp.submit or 0) / 60 * 1e6, (hp.wait or 0) / 60 * 1e6, hp.waits or 0))
    d:free()
  end
  if dt ~= "float32" then model:free() end
  collectgarbage()
end
