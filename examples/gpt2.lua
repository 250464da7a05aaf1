-- GPT-2 text generation from token ids, on lumus.
--
--   lua5.4 examples/gpt2.lua model.safetensors 464 2068 7586 21831 [--n 64]
--       [--temperature 0.8] [--top-k 40] [--top-p 0.95] [--seed 1] [--dtype float16]
--       [--config small | n_layer,n_head,n_embd,vocab_size,n_positions]
--
-- Token ids on the command line and in the output are GPT-2's own (0-based, as a GPT-2
-- tokenizer gives them: 464 2068 7586 21831 is "The quick brown fox"); lumus works with
-- 1-based ids, so this script adds 1 on the way in and subtracts 1 on the way out.
-- Without --temperature/--top-k/--top-p the generation is greedy. The weights are a
-- Hugging Face GPT2LMHeadModel's model.safetensors (names with or without "transformer.").
local lumus = require "lumus"
local gpt2 = require "lumus.models.gpt2"

local function usage(msg)
  io.stderr:write((msg and msg .. "\n" or "") ..
    "usage: lua5.4 examples/gpt2.lua <weights.safetensors> <id> [<id> ...] [--n N] [--temperature T]\n" ..
    "       [--top-k K] [--top-p P] [--seed S] [--dtype float32|float16] [--config small|L,H,D,V,P]\n")
  os.exit(2)
end

local path, prompt = nil, {}
local n, dtype, config = 64, "float32", gpt2.config_small
local sample = {}
local i = 1
while i <= #arg do
  local a = arg[i]
  local function value()
    i = i + 1
    if arg[i] == nil then usage(a .. " needs a value") end
    return arg[i]
  end
  local function number()
    local v = tonumber(value())
    if v == nil then usage(a .. " needs a number") end
    return v
  end
  if a == "--n" then n = math.floor(number())
  elseif a == "--temperature" then sample.temperature = number()
  elseif a == "--top-k" then sample.top_k = math.floor(number())
  elseif a == "--top-p" then sample.top_p = number()
  elseif a == "--seed" then sample.seed = math.floor(number())
  elseif a == "--dtype" then dtype = value()
  elseif a == "--config" then
    local v = value()
    if v ~= "small" then
      local f = {}
      for x in v:gmatch("[^,]+") do f[#f + 1] = tonumber(x) end
      if #f ~= 5 then usage("--config needs small or five numbers L,H,D,V,P") end
      config = { n_layer = f[1], n_head = f[2], n_embd = f[3], vocab_size = f[4], n_positions = f[5] }
    end
  elseif a:sub(1, 2) == "--" then usage("unknown option " .. a)
  elseif path == nil then path = a
  else
    local id = tonumber(a)
    if id == nil or id ~= math.floor(id) or id < 0 then usage("token ids are integers >= 0, got " .. a) end
    prompt[#prompt + 1] = math.floor(id) + 1        -- GPT-2 id -> lumus's 1-based id
  end
  i = i + 1
end
if path == nil or #prompt == 0 then usage() end
if next(sample) == nil or (sample.seed and not (sample.temperature or sample.top_k or sample.top_p)) then
  sample.greedy = true
end

-- A terminal progress bar for load_safetensors (progress(done_bytes, total_bytes)).
local t0 = lumus.clock()
local function progress(done, total)
  local width = 40
  local frac = total > 0 and done / total or 1
  local fill = math.floor(frac * width + 0.5)
  io.stderr:write(("\rloading %s [%s%s] %5.1f%% %6.1f MiB"):format(path, ("#"):rep(fill),
    ("."):rep(width - fill), 100 * frac, done / 2 ^ 20))
  if done >= total then io.stderr:write("\n") end
end
local model = gpt2.from_safetensors(path, config, { progress = progress }, { dtype = dtype })
lumus.synchronize()
io.stderr:write(("loaded in %.2f s (%s on %s)\n"):format(lumus.clock() - t0, dtype, lumus.device().name))

local t1 = lumus.clock()
local ids = model:generate(prompt, n, sample)
local secs = lumus.clock() - t1

local out = {}
for k, id in ipairs(ids) do out[k] = tostring(id - 1) end   -- back to GPT-2's 0-based ids
print(table.concat(out, " "))
io.stderr:write(("%d tokens in %.3f s: %.1f tokens/s (prompt of %d, prefill included)\n")
  :format(n, secs, n / secs, #prompt))
