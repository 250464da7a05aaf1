-- bench/profile_gpt2.lua: GPT-2 small with random weights under bench/op_profile.lua: a prefill
-- of T tokens, then 32 decode steps after a 128-token prefill.
--   lua5.4 bench/op_profile.lua bench/profile_gpt2.lua [T] [tiny]   (tiny: a 2-layer toy config)
local lumus = require "lumus"
local gpt2 = require "lumus.models.gpt2"
local T = tonumber(arg[1] or "512")
local c = gpt2.config_small
if arg[2] then c = { n_layer = 2, n_head = 2, n_embd = 64, vocab_size = 97, n_positions = 128, layer_norm_epsilon = 1e-5 } end
for k, v in pairs(gpt2.config_small) do if c[k] == nil then c[k] = v end end
local d, v = c.n_embd, c.vocab_size
local t = {}
local function r(name, shape) t[name] = lumus.mul(lumus.randn(shape), 0.02) end
r("wte.weight", { v, d }); r("wpe.weight", { c.n_positions, d })
for i = 0, c.n_layer - 1 do
  local p = "h." .. i .. "."
  t[p .. "ln_1.weight"] = lumus.ones({ d }); t[p .. "ln_1.bias"] = lumus.zeros({ d })
  t[p .. "ln_2.weight"] = lumus.ones({ d }); t[p .. "ln_2.bias"] = lumus.zeros({ d })
  r(p .. "attn.c_attn.weight", { d, 3 * d }); r(p .. "attn.c_attn.bias", { 3 * d })
  r(p .. "attn.c_proj.weight", { d, d }); r(p .. "attn.c_proj.bias", { d })
  r(p .. "mlp.c_fc.weight", { d, 4 * d }); r(p .. "mlp.c_fc.bias", { 4 * d })
  r(p .. "mlp.c_proj.weight", { 4 * d, d }); r(p .. "mlp.c_proj.bias", { d })
end
t["ln_f.weight"] = lumus.ones({ d }); t["ln_f.bias"] = lumus.zeros({ d })
local model = gpt2.from_tensors(t, c)
local ids = {}
for i = 1, T do ids[i] = (i * 7919) % v + 1 end
local x = lumus.tensor({ ids }, { dtype = "int32" })
for _ = 1, 2 do model:forward(x) end
lumus.synchronize()
PROFILE.reset()
local N = 3
local t0 = lumus.clock()
for _ = 1, N do model:forward(x) end
lumus.synchronize()
PROFILE.report(("GPT-2 prefill of %d tokens (host %.2f ms per forward)"):format(T, (lumus.clock() - t0) * 1e3 / N), N)
-- decode: 32 single-token steps after a 128-token prefill
local cache = model:new_cache(1, math.min(256, c.n_positions))
local pre = lumus.tensor({ { (table.unpack or unpack)(ids, 1, 128) } }, { dtype = "int32" })
model:forward(pre, cache)
lumus.synchronize()
PROFILE.reset()
local nxt = lumus.tensor({ { 5 } }, { dtype = "int32" })
t0 = lumus.clock()
for _ = 1, 32 do model:forward(nxt, cache) end
lumus.synchronize()
PROFILE.report(("GPT-2 decode, 32 steps (host %.2f ms per step)"):format((lumus.clock() - t0) * 1e3 / 32), 32)

