-- bench/gpt2.lua: GPT-2 small on lumus against bench/torch_gpt2.py's results (issue 17).
--
--   lua5.4 bench/gpt2.lua [--dir /tmp/gpt2] [--csv gpt2.csv] [--model gpt2_small]
--
-- Reads --dir/<model>.safetensors and .json (bench/gpt2_make_weights.py) and, when
-- present, torch_logits.bin, torch_ids.txt, torch_logits_f16.bin and torch_ids_f16.txt
-- (bench/torch_gpt2.py). Batch 1:
--   logits of the fixed 128-token prompt (GPT-2 id i: (i * 7919 + 13) % vocab, +1 for
--     lumus) against PyTorch's: max |lumus - torch| / max |torch| must be <= 1e-4
--     (float32) and <= 2e-2 (float16, against PyTorch's float16 model);
--   the 64 greedy ids against PyTorch's (how many agree from the start) on every path;
--   decode tokens/s as torch_gpt2.py measures it (prefill, then 63 single-token steps
--     timed), on four paths: model:forward per step with the id read back per step; the
--     decoder's step run eagerly; the captured step (model:new_decoder, one replay per
--     token) with the id read per step; the captured step with the ids read at the end
--     (what generate does); float32, then float16 with the weights converted on load;
--   the prefill of 512 tokens (median of 5, wall time of forward + synchronize), with
--     all logits (as PyTorch's) and with the last position's only ({logits = "last"});
--   the device time per op (lumus.gpu_time around each op) over a prefill and over one
--     decode step (the decoder's step run eagerly: the ops its graph replays).
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

-- Greedy decode as torch_gpt2.py, eagerly (model:forward with the cache per step, each
-- step's id read back): returns the n new ids (1-based) and the seconds of the n - 1
-- single-token steps.
local function decode_eager(model, ids, n)
  local cache = model:new_cache(1, #ids + n)
  local logits = model:forward(lumus.tensor({ ids }, { dtype = "int32" }), cache)
  local nxt = lumus.sample(logits:select(2, #ids):to("float32"), { greedy = true })
  logits:free()
  local new = { nxt:to_table()[1] }
  local t0 = lumus.clock()
  for _ = 2, n do
    logits = model:forward(nxt:view({ 1, 1 }), cache)
    nxt:free()
    nxt = lumus.sample(logits:select(2, 1):to("float32"), { greedy = true })
    logits:free()
    new[#new + 1] = nxt:to_table()[1]
  end
  local secs = lumus.clock() - t0
  nxt:free()
  cache:free()
  return new, secs
end

-- Greedy decode with the model's decoder (model:new_decoder): the prefill, then n - 1
-- steps, each one replay of the captured step (capture = false: the same step eagerly).
-- read_each: read the step's id back after every step (as torch_gpt2.py's .item()),
-- else once at the end. Returns the ids, the seconds of the steps, the decoder's graph
-- (nil when it ran eagerly) and its capture error if any.
local function decode_decoder(model, ids, n, read_each, capture)
  local d = model:new_decoder(1, #ids + n, { greedy = true, capture = capture })
  local logits = d:prefill(lumus.tensor({ ids }, { dtype = "int32" }))
  local first = lumus.sample(logits:select(2, 1):to("float32"), { greedy = true })
  logits:free()
  d:feed(first)
  local new = { first:to_table()[1] }
  first:free()
  d:capture()   -- recorded before the timed steps (generate's kept decoder has it already)
  local t0 = lumus.clock()
  for _ = 2, n do
    d:step()
    if read_each then new[#new + 1] = d.tok:to_table()[1] end
  end
  if not read_each and n > 1 then
    -- new id k (2 <= k < n) was fed at position #ids + k; the last is still in d.tok
    if n > 2 then
      for _, id in ipairs(d:ids(#ids + 2, #ids + n - 1)[1]) do new[#new + 1] = id end
    end
    new[#new + 1] = d.tok:to_table()[1]
  end
  local secs = lumus.clock() - t0
  local graph, err = d.graph and tostring(d.graph), d.capture_error
  d:free()
  return new, secs, graph, err
end

local function prefill_ms(model, len, opts)
  local x = lumus.tensor({ prompt(len) }, { dtype = "int32" })
  local times = {}
  for k = 1, 7 do
    lumus.synchronize()
    local t0 = lumus.clock()
    local l = model:forward(x, nil, opts)
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

-- The logits of the prompt (model dtype) against torch's file (float32 bytes): the
-- relative max |diff| / max |torch|, or nil when the file is missing.
local function compare_logits(model, file)
  local torch_bin = read_file(dir .. "/" .. file)
  if not (torch_bin and #torch_bin == PROMPT_LEN * V * 4) then return nil end
  local logits = model:forward(lumus.tensor({ ids }, { dtype = "int32" }))
  local l32 = logits:to("float32")
  logits:free()
  local max_err, max_ref = 0, 0
  local fmt = "<" .. ("f"):rep(V)
  for r = 1, PROMPT_LEN do
    local got = { string.unpack(fmt, l32:to_bytes((r - 1) * V + 1, V)) }
    local want = { string.unpack(fmt, torch_bin, (r - 1) * V * 4 + 1) }
    for j = 1, V do
      local e = math.abs(got[j] - want[j])
      if not (e <= max_err) then max_err = e end
      if math.abs(want[j]) > max_ref then max_ref = math.abs(want[j]) end
    end
  end
  l32:free()
  return max_err / max_ref, max_err, max_ref
end

local function read_ids(file)
  local s = read_file(dir .. "/" .. file)
  if not s then return nil end
  local want = {}
  for v in s:gmatch("%d+") do want[#want + 1] = tonumber(v) + 1 end
  return want
end

local function agreeing(a, b)
  local n = 0
  while n < #a and a[n + 1] == b[n + 1] do n = n + 1 end
  return n
end

-- Device time per op over one prefill of `len` tokens: each top-level lumus op the model
-- calls is run inside lumus.gpu_time (one synchronize per op, so the sum is device time
-- without overlap between ops; the whole forward's own gpu_time is printed beside it).
local PROFILED = { "linear", "layer_norm_linear", "matmul", "layer_norm_forward", "scaled_dot_product_attention", "gelu_tanh",
  "add", "embedding", "index_select", "where", "contiguous", "copy", "to", "argmax", "softmax", "scale", "eq", "le",
  "index_copy" }
local unpack = table.unpack or unpack

local function shapes_of(name, args)
  local parts = {}
  -- x and the weight (layer_norm_linear's is its fourth argument)
  for _, k in ipairs(name == "layer_norm_linear" and { 1, 4 } or { 1, 2 }) do
    local a = args[k]
    if getmetatable(a) == lumus.Tensor then parts[#parts + 1] = table.concat(a:shape(), "x") end
  end
  local o = args[#args]
  if type(o) == "table" and getmetatable(o) == nil and o.transpose_b then parts[#parts] = parts[#parts] .. "^T" end
  return name .. " " .. table.concat(parts, " . ")
end

-- Runs fn with each PROFILED op inside its own lumus.gpu_time; prints the table under
-- `title` (whole: the device seconds of fn under one gpu_time, measured before).
local function profile(title, fn, whole)
  local acc, keys, depth, saved = {}, {}, 0, {}
  local methods = lumus.Tensor.methods
  for _, name in ipairs(PROFILED) do
    for _, tbl in ipairs({ lumus, methods }) do
      local f = tbl[name]
      if type(f) == "function" then
        saved[#saved + 1] = { tbl, name, f }
        tbl[name] = function(...)
          if depth > 0 then return f(...) end
          local args, n = { ... }, select("#", ...)
          local res
          depth = depth + 1
          local ok, secs = pcall(lumus.gpu_time, function() res = { f(unpack(args, 1, n)) } end)
          depth = depth - 1
          if not ok then error(secs, 0) end
          local key = shapes_of(name, args)
          local e = acc[key]
          if not e then e = { key = key, calls = 0, secs = 0 }; acc[key] = e; keys[#keys + 1] = e end
          e.calls, e.secs = e.calls + 1, e.secs + secs
          return unpack(res)
        end
      end
    end
  end
  local ok, err = pcall(fn)
  for k = #saved, 1, -1 do saved[k][1][saved[k][2]] = saved[k][3] end
  if not ok then print("profile failed: " .. tostring(err)); return end
  table.sort(keys, function(a, b) return a.secs > b.secs end)
  local total, calls = 0, 0
  for _, e in ipairs(keys) do total, calls = total + e.secs, calls + e.calls end
  print(("\n#### device time per op, %s: %.3f ms under one gpu_time, ops one by one %.3f ms (%d calls)\n")
    :format(title, whole * 1e3, total * 1e3, calls))
  print("| op and shapes | calls | device ms | share |")
  print("|:---|---:|---:|---:|")
  for _, e in ipairs(keys) do
    print(("| %s | %d | %.3f | %.1f%% |"):format(e.key, e.calls, e.secs * 1e3, 100 * e.secs / total))
  end
end

local function profile_prefill(model, len, opts)
  local x = lumus.tensor({ prompt(len) }, { dtype = "int32" })
  local l = model:forward(x, nil, opts)    -- warm-up
  l:free()
  lumus.synchronize()
  local whole = lumus.gpu_time(function() l = model:forward(x, nil, opts) end)
  l:free()
  profile(("prefill of %d tokens (%s logits)"):format(len, opts and opts.logits or "all"),
    function() model:forward(x, nil, opts):free() end, whole)
  x:free()
end

-- One greedy decode step of the decoder (the ops a replay runs), eagerly, after the
-- 128-token prompt.
local function profile_step(model)
  local d = model:new_decoder(1, PROMPT_LEN + 8, { greedy = true, capture = false })
  d:prefill(lumus.tensor({ ids }, { dtype = "int32" })):free()
  d:feed(lumus.tensor({ ids[1] }, { dtype = "int32" }))
  d:step()
  lumus.synchronize()
  local whole = lumus.gpu_time(function() d:step() end)
  profile(("one decode step (the captured ops, run eagerly), context %d"):format(PROMPT_LEN + 2),
    function() d:step() end, whole)
  d:free()
end

local function decode_rows(label, m, want_ids)
  decode_eager(m, ids, 4)   -- warm-up: pipelines
  -- A whole captured decode first: a process's first few dozen back-to-back replays run
  -- at a fraction of the later ones' speed on the H200 (BENCHMARKS.md, 2026-12-04), which
  -- would charge whichever row comes first.
  decode_decoder(m, ids, NEW_TOKENS, false)
  local out = {}
  local new, secs = decode_eager(m, ids, NEW_TOKENS)
  out[#out + 1] = { label .. " eager forward per step", new, secs }
  local new_e, secs_e = decode_decoder(m, ids, NEW_TOKENS, true, false)
  out[#out + 1] = { label .. " decoder step eagerly, id read per step", new_e, secs_e }
  local new_c, secs_c, graph, err = decode_decoder(m, ids, NEW_TOKENS, true)
  out[#out + 1] = { label .. " captured step, id read per step", new_c, secs_c }
  local new_b, secs_b = decode_decoder(m, ids, NEW_TOKENS, false)
  out[#out + 1] = { label .. " captured step, ids read at the end", new_b, secs_b }
  print(("\n%s decode, %d new tokens after %d (tokens/s over the %d single-token steps); graph: %s%s\n")
    :format(label, NEW_TOKENS, PROMPT_LEN, NEW_TOKENS - 1, tostring(graph), err and (" (capture failed: " .. tostring(err) .. ")") or ""))
  print("| path | tokens/s | ms/token | ids as the eager path | ids vs PyTorch's " .. label .. " |")
  print("|:---|---:|---:|---:|---:|")
  for _, r in ipairs(out) do
    print(("| %s | %.1f | %.3f | %d/%d | %s |"):format(r[1], (NEW_TOKENS - 1) / r[3], r[3] * 1e3 / (NEW_TOKENS - 1),
      agreeing(r[2], new), NEW_TOKENS, want_ids and (agreeing(r[2], want_ids) .. "/" .. NEW_TOKENS) or "-"))
  end
  return out, new
end

local torch_ids = read_ids("torch_ids.txt")
local out32, new = decode_rows("float32", model, torch_ids)
local shown = {}
for k, id in ipairs(new) do shown[k] = tostring(id - 1) end
print("\ngreedy ids (0-based): " .. table.concat(shown, " "))
for _, r in ipairs(out32) do
  if torch_ids and agreeing(r[2], torch_ids) ~= NEW_TOKENS then
    print(("greedy ids vs PyTorch (%s): %d of %d agree from the start: FAIL"):format(r[1], agreeing(r[2], torch_ids), NEW_TOKENS))
    failed = true
  end
end
if torch_ids and not failed then print(("greedy ids vs PyTorch: %d of %d agree on every path: ok"):format(NEW_TOKENS, NEW_TOKENS)) end
model:generate(ids, NEW_TOKENS, { greedy = true })    -- warm-up (captures the kept decoder)
local gen_t0 = lumus.clock()
model:generate(ids, NEW_TOKENS, { greedy = true })
local gen_s = lumus.clock() - gen_t0

local pre_len = math.min(PREFILL, config.n_positions)
local pre = prefill_ms(model, pre_len)
local pre_last = prefill_ms(model, pre_len, { logits = "last" })
print(("\n| dtype | decode tokens/s (captured, ids at the end) | decode tokens/s (captured, id per step) | prefill %d ms (all logits) | prefill %d ms (last position's logits) | generate(64) s (prefill of 128 included) |")
  :format(pre_len, pre_len))
print("|:---|---:|---:|---:|---:|---:|")
local rate = (NEW_TOKENS - 1) / out32[4][3]
print(("| float32 | %.1f | %.1f | %.2f | %.2f | %.3f |"):format(rate, (NEW_TOKENS - 1) / out32[3][3], pre, pre_last, gen_s))
rows[#rows + 1] = { "float32", rate, pre, gen_s, (NEW_TOKENS - 1) / out32[3][3], (NEW_TOKENS - 1) / out32[1][3], pre_last }
profile_prefill(model, pre_len)
profile_prefill(model, pre_len, { logits = "last" })
profile_step(model)
model:free()
model = nil
collectgarbage()

-- float16: weights converted on load; logits against PyTorch's float16 model
-- (torch_logits_f16.bin) within F16_TOL relative: float16 rounds each op's result to 11
-- bits, differently ordered sums in the two programs differ by a few float16 ulps per
-- op, compounded over 12 layers.
local F16_TOL = 2e-2
local ok, err = pcall(function()
  local m16 = load("float16")
  local rel, max_err, max_ref = compare_logits(m16, "torch_logits_f16.bin")
  if rel then
    print(("\nfloat16 logits of the %d-token prompt vs PyTorch float16: max |diff| %.3g, max |torch| %.3g, relative %.3g (bound %g): %s")
      :format(PROMPT_LEN, max_err, max_ref, rel, F16_TOL, rel <= F16_TOL and "ok" or "FAIL"))
    if not (rel <= F16_TOL) then failed = true end
  else
    print("\nfloat16 logits: no torch_logits_f16.bin of the right size (run bench/torch_gpt2.py first): not compared")
  end
  local out16 = decode_rows("float16", m16, read_ids("torch_ids_f16.txt"))
  local p16 = prefill_ms(m16, pre_len)
  local p16_last = prefill_ms(m16, pre_len, { logits = "last" })
  local r16 = (NEW_TOKENS - 1) / out16[4][3]
  print(("\n| float16 | %.1f | %.1f | %.2f | %.2f | - |"):format(r16, (NEW_TOKENS - 1) / out16[3][3], p16, p16_last))
  print(("float16 greedy ids: %d of %d agree with float32 from the start"):format(agreeing(out16[4][2], new), NEW_TOKENS))
  rows[#rows + 1] = { "float16", r16, p16, 0, (NEW_TOKENS - 1) / out16[3][3], (NEW_TOKENS - 1) / out16[1][3], p16_last }
  profile_prefill(m16, pre_len)
  profile_step(m16)
  m16:free()
end)
if not ok then print(("\nfloat16 not run: %s"):format(tostring(err))) end

if csv_path then
  common.write_csv(csv_path, "dtype,decode_tokens_per_s,prefill512_ms,generate64_s,decode_id_per_step_tokens_per_s,"
    .. "decode_eager_tokens_per_s,prefill512_last_ms", "%s,%.3f,%.4f,%.4f,%.3f,%.3f,%.4f", rows)
end
if failed then os.exit(1) end
