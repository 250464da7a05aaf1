-- bench/gpt2_decode_dtypes.lua: where GPT-2 decode in float16 loses against float32.
--
--   lua5.4 bench/gpt2_decode_dtypes.lua [--tiny] [--order "float16 float32 float16"]
--
-- GPT-2 small with random weights (--tiny: a 2-layer toy for lavapipe), one model per
-- entry of --order (the dtypes in turn, in one process, so that an effect of order or
-- warm-up shows as a difference between two runs of one dtype). For each: the captured
-- decoder step's op count; tokens/s of 63 replays with the ids read at the end and with
-- a synchronize after every replay; the device time of one replay (lumus.gpu_time); the
-- eager step's host time (no synchronize) and device time; and the host time of each
-- top-level op of the eager step (lumus.clock around each call, the step's ops as the
-- graph records them), summed per op name.
local script_dir = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()
local gpt2 = require "lumus.models.gpt2"

local tiny, order = false, { "float16", "float32", "float16" }
local i = 1
while i <= #arg do
  if arg[i] == "--tiny" then tiny = true
  elseif arg[i] == "--order" then
    order = {}
    for w in arg[i + 1]:gmatch("%S+") do order[#order + 1] = w end
    i = i + 1
  else io.stderr:write("bench/gpt2_decode_dtypes.lua: unknown argument " .. arg[i] .. "\n"); os.exit(2) end
  i = i + 1
end

local c = {}
for k, v in pairs(gpt2.config_small) do c[k] = v end
if tiny then c.n_layer, c.n_head, c.n_embd, c.vocab_size, c.n_positions = 2, 2, 64, 97, 256 end
local d, V = c.n_embd, c.vocab_size
lumus.manual_seed(5)
local W = {}
local function r(name, shape) W[name] = lumus.mul(lumus.randn(shape), 0.02) end
r("wte.weight", { V, d }); r("wpe.weight", { c.n_positions, d })
for l = 0, c.n_layer - 1 do
  local p = "h." .. l .. "."
  W[p .. "ln_1.weight"] = lumus.ones({ d }); W[p .. "ln_1.bias"] = lumus.zeros({ d })
  W[p .. "ln_2.weight"] = lumus.ones({ d }); W[p .. "ln_2.bias"] = lumus.zeros({ d })
  r(p .. "attn.c_attn.weight", { d, 3 * d }); r(p .. "attn.c_attn.bias", { 3 * d })
  r(p .. "attn.c_proj.weight", { d, d }); r(p .. "attn.c_proj.bias", { d })
  r(p .. "mlp.c_fc.weight", { d, 4 * d }); r(p .. "mlp.c_fc.bias", { 4 * d })
  r(p .. "mlp.c_proj.weight", { 4 * d, d }); r(p .. "mlp.c_proj.bias", { d })
end
W["ln_f.weight"] = lumus.ones({ d }); W["ln_f.bias"] = lumus.zeros({ d })

local PROMPT, STEPS = 128, 63
local ids = {}
for k = 0, PROMPT - 1 do ids[k + 1] = (k * 7919 + 13) % V + 1 end

-- the prompt prefilled into dec (again: the cache restarts), its greedy id fed
local function restart(dec)
  local logits = dec:prefill(lumus.tensor({ ids }, { dtype = "int32" }))
  local first = lumus.sample(logits:select(2, 1):to("float32"), { greedy = true })
  logits:free()
  dec:feed(first)
  first:free()
  return dec
end

local function decoder(model, capture)
  return restart(model:new_decoder(1, PROMPT + STEPS + 1, { greedy = true, capture = capture }))
end

-- seconds per step of STEPS steps from the prompt (sync_each: synchronize after every step)
local function rate(dec, sync_each)
  restart(dec)
  lumus.synchronize()
  local t0 = lumus.clock()
  for _ = 1, STEPS do
    dec:step()
    if sync_each then lumus.synchronize() end
  end
  lumus.synchronize()
  return (lumus.clock() - t0) / STEPS
end

local OPS = { "linear", "layer_norm_linear", "matmul", "layer_norm_forward", "scaled_dot_product_attention", "add",
  "embedding", "index_select", "index_copy", "where", "eq", "le", "argmax", "copy", "gelu_tanh", "contiguous" }

-- host seconds per op name over `n` eager steps (one op inside another counts once)
local function host_per_op(dec, n)
  local acc, depth, saved = {}, 0, {}
  for _, name in ipairs(OPS) do
    for _, tbl in ipairs({ lumus, lumus.Tensor.methods }) do
      local f = tbl[name]
      if type(f) == "function" then
        saved[#saved + 1] = { tbl, name, f }
        tbl[name] = function(...)
          if depth > 0 then return f(...) end
          depth = 1
          local t0 = lumus.clock()
          local ok, a, b, e = pcall(f, ...)
          local dt = lumus.clock() - t0
          depth = 0
          if not ok then error(a, 0) end
          local s = acc[name] or { name = name, calls = 0, secs = 0 }
          acc[name] = s
          s.calls, s.secs = s.calls + 1, s.secs + dt
          return a, b, e
        end
      end
    end
  end
  lumus.synchronize()
  local t0 = lumus.clock()
  local ok, err = pcall(function() for _ = 1, n do dec:step() end end)
  local total = lumus.clock() - t0
  for k = #saved, 1, -1 do saved[k][1][saved[k][2]] = saved[k][3] end
  lumus.synchronize()
  if not ok then error(err, 0) end
  local list = {}
  for _, s in pairs(acc) do list[#list + 1] = s end
  table.sort(list, function(a, b) return a.secs > b.secs end)
  return list, total / n
end

print(("## GPT-2 decode by dtype (%s, random weights), batch 1, context %d, on %s\n")
  :format(tiny and "tiny 2-layer" or "small", PROMPT, lumus.device().name))
print("| run | dtype | graph ops | captured tokens/s (ids at end) | captured, sync per step | replay device ms | eager host ms/step | eager device ms/step |")
print("|---:|:---|---:|---:|---:|---:|---:|---:|")
local per_op = {}
for run, dtype in ipairs(order) do
  local model = gpt2.from_tensors(W, c, { dtype = dtype })
  local dec = decoder(model)
  dec:capture()
  rate(dec, false)   -- warm-up
  local s_end = rate(dec, false)
  local s_sync = rate(dec, true)
  restart(dec)
  local replay = lumus.gpu_time(function() dec:step() end)
  local ops = dec.graph and dec.graph:stats().ops or 0
  dec:free()
  local e = decoder(model, false)
  for _ = 1, 3 do e:step() end
  local list, host = host_per_op(e, 20)
  local dev = lumus.gpu_time(function() e:step() end)
  e:free()
  print(("| %d | %s | %d | %.1f | %.1f | %.3f | %.3f | %.3f |"):format(run, dtype, ops, 1 / s_end, 1 / s_sync,
    replay * 1e3, host * 1e3, dev * 1e3))
  per_op[#per_op + 1] = { run = run, dtype = dtype, list = list }
  if dtype ~= "float32" then model:free() end   -- (float32 shares W)
  collectgarbage()
end
for _, p in ipairs(per_op) do
  print(("\n#### run %d (%s): host time per op of the eager step (20 steps)\n"):format(p.run, p.dtype))
  print("| op | calls per step | host us per call | host ms per step |")
  print("|:---|---:|---:|---:|")
  for _, s in ipairs(p.list) do
    print(("| %s | %.0f | %.1f | %.3f |"):format(s.name, s.calls / 20, s.secs / s.calls * 1e6, s.secs / 20 * 1e3))
  end
end
