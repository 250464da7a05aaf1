-- bench/first_call.lua: the first-call hitch. Times a GPT-2-small-shaped forward (token
-- and position embeddings, 12 pre-norm blocks with causal attention and a GELU MLP, the
-- final LayerNorm and the tied LM head) in fresh processes:
--
--   off        LUMUS_PIPELINE_CACHE=off: every pipeline compiled in the process
--   cold       an empty cache file: compiled, then saved when the process ends
--   cached     the file the cold process wrote: pipelines come from the cache
--   warm_up    the same file, lumus.warm_up() first (a loading screen), then the forward
--
-- and, in each process, the same forward repeated (warm: every pipeline built). The
-- issue's goal: a second process's first forward (cached) costs no more than twice a
-- warm one. NVIDIA's driver keeps a shader cache of its own (~/.nv/GLCache), which would
-- hide lumus's: it is turned off in the children (__GL_SHADER_DISK_CACHE=0) unless
-- --driver-cache is given.
--
--   lua5.4 bench/first_call.lua [--tokens 64] [--layers 12] [--vocab 50257] [--repeats 5]
--                               [--driver-cache] [--random-weights 1] [--csv FILE]
--
-- The weights (random, GPT-2 small's shapes) are made once and saved to a safetensors file
-- that each measured process loads before its first forward, as a real program loads its
-- checkpoint (--random-weights 1: each process draws them on the device instead).
--
-- Prints a Markdown table (times in ms): startup (require + context, which reads the
-- cache), warm_up, first forward, warm forward (median of the repeats), their ratio.
local function parse_args(argv)
  local o = { tokens = 64, layers = 12, vocab = 50257, repeats = 5, driver_cache = false }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "--driver-cache" then o.driver_cache = true
    elseif a == "--child" then o.child = argv[i + 1]; i = i + 1
    elseif a:match("^%-%-") and argv[i + 1] then
      local k = a:sub(3):gsub("%-", "_")
      o[k] = tonumber(argv[i + 1]) or argv[i + 1]
      i = i + 1
    else error("first_call.lua: unknown argument " .. a) end
    i = i + 1
  end
  return o
end

local opts = parse_args(arg or {})

---------------------------------------------------------------------------------------
-- The child: one process, one mode.
if opts.child then
  local clock = os.clock
  local t_start = clock()
  local lumus = require "lumus"
  clock = lumus.clock
  local t0 = clock()
  lumus.device()   -- makes the context: reads the pipeline cache
  local startup = clock() - t0
  local warm_s, warm_n = 0, 0
  if opts.child == "warm_up" then warm_n, warm_s = lumus.warm_up() end

  local T, D, H, L, V = opts.tokens, 768, 12, opts.layers, opts.vocab
  local hd = D // H
  -- The weights: made here (prepare, or --random-weights), else loaded from the file the
  -- prepare step wrote, as a real second process would load a checkpoint.
  local P
  local load_s = 0
  if opts.child == "prepare" or opts.random_weights then
    lumus.manual_seed(7)
    local function w(shape, scale) return lumus.randn(shape):scale(scale or 0.02) end
    P = { wte = w({ V, D }), wpe = w({ 1024, D }), lnf_w = lumus.ones(D), lnf_b = lumus.zeros(D) }
    for l = 1, L do
      local p = "h." .. l .. "."
      P[p .. "ln1_w"], P[p .. "ln1_b"] = lumus.ones(D), lumus.zeros(D)
      P[p .. "attn_w"], P[p .. "attn_b"] = w({ 3 * D, D }), lumus.zeros(3 * D)
      P[p .. "proj_w"], P[p .. "proj_b"] = w({ D, D }), lumus.zeros(D)
      P[p .. "ln2_w"], P[p .. "ln2_b"] = lumus.ones(D), lumus.zeros(D)
      P[p .. "fc_w"], P[p .. "fc_b"] = w({ 4 * D, D }), lumus.zeros(4 * D)
      P[p .. "out_w"], P[p .. "out_b"] = w({ D, 4 * D }), lumus.zeros(D)
    end
    if opts.child == "prepare" then
      lumus.save_safetensors(opts.weights, P, { format = "pt" })
      print("RESULT prepared=1")
      os.exit(0, true)
    end
  else
    t0 = clock()
    P = lumus.load_safetensors(opts.weights)
    lumus.synchronize()
    load_s = clock() - t0
  end
  local wte, wpe, lnf_w, lnf_b = P.wte, P.wpe, P.lnf_w, P.lnf_b
  local blocks = {}
  for l = 1, L do
    local p = "h." .. l .. "."
    blocks[l] = {}
    for _, k in ipairs({ "ln1_w", "ln1_b", "attn_w", "attn_b", "proj_w", "proj_b", "ln2_w", "ln2_b", "fc_w", "fc_b",
                         "out_w", "out_b" }) do
      blocks[l][k] = P[p .. k]
    end
  end
  local ids_t, pos_t = {}, {}
  for i = 1, T do ids_t[i] = (i * 7919) % V + 1; pos_t[i] = i end
  local ids = lumus.tensor(ids_t, { dtype = "int32" })
  local pos = lumus.tensor(pos_t, { dtype = "int32" })
  -- causal mask [T, T]: true above the diagonal (masked)
  local mask_rows = {}
  for i = 1, T do
    local r = {}
    for j = 1, T do r[j] = j > i end
    mask_rows[i] = r
  end
  local mask = lumus.tensor(mask_rows, { dtype = "bool" })
  lumus.synchronize()

  local function forward()
    local x = lumus.embedding(ids, wte) + lumus.embedding(pos, wpe)        -- [T, D]
    for l = 1, L do
      local b = blocks[l]
      local a = lumus.layer_norm_forward(x, b.ln1_w, b.ln1_b, 1e-5)
      local qkv = lumus.linear(a, b.attn_w, b.attn_b)                       -- [T, 3D]
      local parts = qkv:split(D, 2)
      local function heads(t) return t:reshape({ T, H, hd }):transpose(1, 2) end  -- [H, T, hd]
      local q, k, v = heads(parts[1]:contiguous()), heads(parts[2]:contiguous()), heads(parts[3]:contiguous())
      local s = lumus.matmul(q, k, { transpose_b = true }):scale(1 / math.sqrt(hd))   -- [H, T, T]
      s = lumus.where(mask, -math.huge, s)
      local p = lumus.softmax(s, { dim = -1 })
      local o = lumus.matmul(p, v):transpose(1, 2):contiguous():reshape({ T, D })
      x = x + lumus.linear(o, b.proj_w, b.proj_b)
      local m = lumus.layer_norm_forward(x, b.ln2_w, b.ln2_b, 1e-5)
      local f = lumus.gelu(lumus.linear(m, b.fc_w, b.fc_b), { approximate = "tanh" })
      x = x + lumus.linear(f, b.out_w, b.out_b)
    end
    x = lumus.layer_norm_forward(x, lnf_w, lnf_b, 1e-5)
    local logits = lumus.linear(x:narrow(1, T, 1), wte)                      -- last token: [1, V]
    return lumus.argmax(logits, { dim = -1 })
  end

  local function blocks_made() return lumus.tune.stream_stats().blocks_made end
  local b0 = blocks_made()
  t0 = clock()
  local tok = forward()
  local first_record = clock() - t0   -- recording: pipelines are made here
  tok:to_table()   -- waits for the device
  local first = clock() - t0
  local first_blocks = blocks_made() - b0
  local times = {}
  b0 = blocks_made()
  for r = 1, opts.repeats do
    t0 = clock()
    forward():to_table()
    times[r] = clock() - t0
  end
  table.sort(times)
  local warm = times[(#times + 1) // 2]
  local warm_blocks = blocks_made() - b0
  local pc = lumus.tune.pipeline_cache()
  print(("RESULT mode=%s startup=%.6f warm_up=%.6f warm_up_built=%d first=%.6f warm=%.6f built=%d hits=%d "
    .. "state=%s loaded_bytes=%d process=%.6f load=%.6f first_record=%.6f first_blocks=%d warm_blocks=%d")
    :format(opts.child, startup, warm_s, warm_n, first, warm, pc.built, pc.hits, pc.state, pc.loaded_bytes,
            os.clock() - t_start, load_s, first_record, first_blocks, warm_blocks))
  os.exit(0, true)   -- close the state: the cache is written when the context goes
end

---------------------------------------------------------------------------------------
-- The driver: the four modes in order, each a fresh process.
local lua = arg[-1] or "lua5.4"
local script = arg[0]
local cache = os.tmpname()
os.remove(cache)
local weights = os.tmpname()
local passthrough = ("--tokens %d --layers %d --vocab %d --repeats %d --weights %s%s"):format(opts.tokens, opts.layers,
  opts.vocab, opts.repeats, weights, opts.random_weights and " --random-weights 1" or "")

local function run(mode, cache_value)
  local env = ("LUA_PATH=%q LUA_CPATH=%q LUMUS_PIPELINE_CACHE=%q %s"):format(package.path, package.cpath, cache_value,
    opts.driver_cache and "" or "__GL_SHADER_DISK_CACHE=0")
  local cmd = ("env %s %s %s --child %s %s 2>&1"):format(env, lua, script, mode, passthrough)
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  local line = out:match("RESULT ([^\n]*)")
  if not line then
    io.stderr:write(("first_call.lua: mode %s failed:\n%s\n"):format(mode, out))
    return nil
  end
  local r = {}
  for k, v in line:gmatch("(%S+)=(%S+)") do r[k] = tonumber(v) or v end
  return r
end

local dev = (require "lumus").device()
print(("# First-call times, %s (%s), GPT-2 small shape: %d tokens, %d layers, vocab %d%s"):format(dev.name,
  dev.driver, opts.tokens, opts.layers, opts.vocab, opts.driver_cache and "" or "; driver's own shader cache off"))
print()
print("| mode | cache | startup ms | warm_up ms (built) | first forward ms | warm forward ms | first / warm | pipelines built | cache hits |")
print("|---|---|---|---|---|---|---|---|---|")
local rows, csv = {}, { "mode,state,startup_s,warm_up_s,warm_up_built,first_s,warm_s,ratio,built,hits,load_s,"
  .. "first_record_s,first_blocks,warm_blocks" }
local failed = false
local details = {}
if not opts.random_weights and not run("prepare", "off") then failed = true end
for _, m in ipairs({ { "off", "off" }, { "cold", cache }, { "cached", cache }, { "warm_up", cache } }) do
  local r = run(m[1], m[2])
  if r then
    rows[m[1]] = r
    local ratio = r.first / r.warm
    print(("| %s | %s | %.1f | %.1f (%d) | %.1f | %.1f | %.2f | %d | %d |"):format(m[1], r.state, r.startup * 1e3,
      r.warm_up * 1e3, r.warm_up_built, r.first * 1e3, r.warm * 1e3, ratio, r.built, r.hits))
    csv[#csv + 1] = ("%s,%s,%.6f,%.6f,%d,%.6f,%.6f,%.4f,%d,%d,%.6f,%.6f,%d,%d"):format(m[1], r.state, r.startup,
      r.warm_up, r.warm_up_built, r.first, r.warm, ratio, r.built, r.hits, r.load, r.first_record, r.first_blocks,
      r.warm_blocks)
    details[#details + 1] = ("| %s | %.1f | %.1f | %.1f | %d | %d |"):format(m[1], r.load * 1e3, r.first_record * 1e3,
      (r.first - r.first_record) * 1e3, r.first_blocks, r.warm_blocks)
  else
    failed = true
  end
end
os.remove(cache)
os.remove(weights)
print()
print("Where the first forward's time goes: recording (pipelines are made while recording) and the wait for")
print("the device and the read of the result; device memory blocks made (vkAllocateMemory) during the first")
print("forward and during the warm repeats; the weights' load from the safetensors file before it.")
print()
print("| mode | weights load ms | first: record ms | first: wait + read ms | blocks made, first | blocks made, warm |")
print("|---|---|---|---|---|---|")
for _, d in ipairs(details) do print(d) end
print()
if rows.cached then
  local ratio = rows.cached.first / rows.cached.warm
  print(("Goal (a second process's first forward <= 2x a warm one): cached first/warm = %.2f, %s."):format(ratio,
    ratio <= 2 and "met" or "NOT met"))
  if rows.warm_up then
    print(("With warm_up first (%.1f ms, %d pipelines): first/warm = %.2f."):format(rows.warm_up.warm_up * 1e3,
      rows.warm_up.warm_up_built, rows.warm_up.first / rows.warm_up.warm))
  end
end
if opts.csv then
  local f = assert(io.open(opts.csv, "w"))
  f:write(table.concat(csv, "\n"), "\n")
  f:close()
end
if failed then os.exit(1) end
