-- bench/gpt2.lua: GPT-2 small on lumus against bench/torch_gpt2.py's results (issue 17).
--
--   lua5.4 bench/gpt2.lua [--dir /tmp/gpt2] [--csv gpt2.csv] [--model gpt2_small]
--
-- Reads --dir/<model>.safetensors and .json (bench/gpt2_make_weights.py) and, when
-- present, torch_logits.bin and torch_ids.txt (bench/torch_gpt2.py). Batch 1:
--   logits of the fixed 128-token prompt (GPT-2 id i: (i * 7919 + 13) % vocab, +1 for
--     lumus) against PyTorch's: max |lumus - torch| / max |torch| must be <= 1e-4;
--   the 64 greedy ids against PyTorch's (how many agree from the start);
--   decode tokens/s as torch_gpt2.py measures it: prefill, then 63 single-token steps
--     with the KV cache, each sampling on the device and reading back one 4-byte id,
--     timed over the steps (float32, then float16 with the weights converted on load);
--   the prefill of 512 tokens: median of 5, wall time of forward + synchronize.
-- Exits non-zero when the logits or the greedy ids do not match.
local script_dir = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = script_dir .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()
local gpt2 = require "lumus.models.gpt2"

local dir, csv_path, name = "/tmp/gpt2", nil, "gpt2_small"
local i = 1
while i <= #arg do
  local a = arg[i]
  if a == "--dir" then dir = arg[i + 1]; i = i + 1
  elseif a == "--csv" then csv_path = arg[i + 1]; i = i + 1
  elseif a == "--model" then name = arg[i + 1]; i = i + 1
  else io.stderr:write("bench/gpt2.lua: unknown argument " .. a .. "\n"); os.exit(2) end
  i = i + 1
end

local PROMPT_LEN, NEW_TOKENS, PREFILL = 128, 64, 512

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function read_config(path)
  local s = read_file(path)
  if not s then io.stderr:write("bench/gpt2.lua: missing " .. path .. " (run bench/gpt2_make_weights.py)\n"); os.exit(2) end
  local c = {}
  for k, v in s:gmatch('"([%w_]+)"%s*:%s*([%d%.eE%-]+)') do c[k] = tonumber(v) end
  return { n_layer = c.n_layer, n_head = c.n_head, n_embd = c.n_embd, vocab_size = c.vocab_size,
    n_positions = c.n_positions, layer_norm_epsilon = c.layer_norm_epsilon }
end

local config = read_config(("%s/%s.json"):format(dir, name))
local weights = ("%s/%s.safetensors"):format(dir, name)
local V = config.vocab_size

local function prompt(n)
  local ids = {}
  for k = 0, n - 1 do ids[k + 1] = (k * 7919 + 13) % V + 1 end   -- lumus ids are 1-based
  return ids
end

local function load(dtype)
  local t0 = lumus.clock()
  local model = gpt2.from_safetensors(weights, config, nil, { dtype = dtype })
  lumus.synchronize()
  return model, lumus.clock() - t0
end

-- Greedy decode as torch_gpt2.py: returns the n new ids (1-based) and the seconds of
-- the n - 1 single-token steps.
local function decode(model, ids, n)
  local cache = model:new_cache(1, #ids + n)
  local logits = model:forward(lumus.tensor({ ids }, { dtype = "int32" }), cache)
  local nxt = lumus.sample(logits:select(2, #ids), { greedy = true })
  logits:free()
  local new = { (string.unpack("<i4", nxt:to_bytes())) }
  local t0 = lumus.clock()
  for _ = 2, n do
    logits = model:forward(nxt:view({ 1, 1 }), cache)
    nxt:free()
    nxt = lumus.sample(logits:select(2, 1), { greedy = true })
    logits:free()
    new[#new + 1] = string.unpack("<i4", nxt:to_bytes())
  end
  local secs = lumus.clock() - t0
  nxt:free()
  cache:free()
  return new, secs
end

local function prefill_ms(model)
  local x = lumus.tensor({ prompt(PREFILL) }, { dtype = "int32" })
  local times = {}
  for k = 1, 7 do
    lumus.synchronize()
    local t0 = lumus.clock()
    local l = model:forward(x)
    lumus.synchronize()
    if k > 2 then times[#times + 1] = (lumus.clock() - t0) * 1e3 end
    l:free()
  end
  table.sort(times)
  return times[math.floor((#times + 1) / 2)]
end

local failed = false
local rows = {}
print(("## lumus GPT-2 (%s, random weights), batch 1, on %s\n"):format(name, lumus.device().name))

-- float32: logits and greedy ids against PyTorch, then timings.
local model, load_s = load("float32")
print(("loaded %s in %.2f s"):format(weights, load_s))
local ids = prompt(PROMPT_LEN)
do
  local torch_bin = read_file(dir .. "/torch_logits.bin")
  local logits = model:forward(lumus.tensor({ ids }, { dtype = "int32" }))
  if torch_bin and #torch_bin == PROMPT_LEN * V * 4 then
    local max_err, max_ref = 0, 0
    local fmt = "<" .. ("f"):rep(V)
    for r = 1, PROMPT_LEN do
      local got = { string.unpack(fmt, logits:to_bytes((r - 1) * V + 1, V)) }
      local want = { string.unpack(fmt, torch_bin, (r - 1) * V * 4 + 1) }
      for j = 1, V do
        local e = math.abs(got[j] - want[j])
        if e > max_err then max_err = e end
        if math.abs(want[j]) > max_ref then max_ref = math.abs(want[j]) end
      end
    end
    local rel = max_err / max_ref
    print(("logits of the %d-token prompt vs PyTorch: max |diff| %.3g, max |torch| %.3g, relative %.3g (bound 1e-4): %s")
      :format(PROMPT_LEN, max_err, max_ref, rel, rel <= 1e-4 and "ok" or "FAIL"))
    if not (rel <= 1e-4) then failed = true end
  else
    print("logits: no torch_logits.bin of the right size in " .. dir .. " (run bench/torch_gpt2.py first): not compared")
  end
  logits:free()
end

decode(model, ids, 4)   -- warm-up: pipelines
local new, secs = decode(model, ids, NEW_TOKENS)
local shown = {}
for k, id in ipairs(new) do shown[k] = tostring(id - 1) end
print("greedy ids (0-based): " .. table.concat(shown, " "))
local torch_ids = read_file(dir .. "/torch_ids.txt")
if torch_ids then
  local want, agree = {}, 0
  for v in torch_ids:gmatch("%d+") do want[#want + 1] = tonumber(v) + 1 end
  while agree < #new and new[agree + 1] == want[agree + 1] do agree = agree + 1 end
  print(("greedy ids vs PyTorch: %d of %d agree from the start: %s"):format(agree, NEW_TOKENS,
    agree == NEW_TOKENS and "ok" or "FAIL"))
  if agree ~= NEW_TOKENS then failed = true end
end
local gen_t0 = lumus.clock()
model:generate(ids, NEW_TOKENS, { greedy = true })
local gen_s = lumus.clock() - gen_t0

print("\n| dtype | decode tokens/s | prefill 512 ms | generate(64) s (prefill of 128 included) |")
print("|:---|---:|---:|---:|")
local pre = prefill_ms(model)
local rate = (NEW_TOKENS - 1) / secs
print(("| float32 | %.1f | %.2f | %.3f |"):format(rate, pre, gen_s))
rows[#rows + 1] = { "float32", rate, pre, gen_s }
model:free()
model = nil
collectgarbage()

local ok, err = pcall(function()
  local m16 = load("float16")
  decode(m16, ids, 4)
  local new16, s16 = decode(m16, ids, NEW_TOKENS)
  local agree = 0
  while agree < #new16 and new16[agree + 1] == new[agree + 1] do agree = agree + 1 end
  local p16 = prefill_ms(m16)
  print(("| float16 | %.1f | %.2f | - |"):format((NEW_TOKENS - 1) / s16, p16))
  print(("float16 greedy ids: %d of %d agree with float32 from the start"):format(agree, NEW_TOKENS))
  rows[#rows + 1] = { "float16", (NEW_TOKENS - 1) / s16, p16, 0 }
  m16:free()
end)
if not ok then print(("| float16 | - | - | - |\n\nfloat16 not run: %s"):format(tostring(err))) end

if csv_path then
  local f = assert(io.open(csv_path, "w"))
  f:write("dtype,decode_tokens_per_s,prefill512_ms,generate64_s\n")
  for _, r in ipairs(rows) do f:write(("%s,%.3f,%.4f,%.4f\n"):format(r[1], r[2], r[3], r[4])) end
  f:close()
end
if failed then os.exit(1) end
