-- A tiny character-level language model trained on the project's README.md: each
-- character is predicted from the CONTEXT characters before it by
--   Embedding(V, E) -> concatenate the window -> Linear(CONTEXT * E, H) -> GELU -> Linear(H, V)
-- with cross-entropy and AdamW on random windows. Prints the loss as it goes, then
-- samples text (lumus.multinomial over softmax(logits / temperature)) and, with --save,
-- writes the weights (lumus.save_safetensors where this build has it, else a small
-- format of its own: see save()).
--
-- Run from the repository root:
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" lua5.4 examples/char_lm.lua
-- Options:
--   --steps N         AdamW steps (default 200)
--   --batch N         windows per step (default 64)
--   --context N       characters of context (default 8)
--   --embed N         embedding width (default 16)
--   --hidden N        hidden width (default 128)
--   --lr X            learning rate (default 0.01)
--   --every N         print every N steps (default steps / 10)
--   --sample N        characters to sample at the end (default 200)
--   --temperature X   sampling temperature (default 0.8)
--   --text PATH       training text (default README.md)
--   --save PATH       write the weights there
--   --seed N          seed (default 1)
local lumus = require "lumus"
local ref = require "lumus.reference"
local nn, optim = lumus.nn, lumus.optim

local opts = { steps = 200, batch = 64, context = 8, embed = 16, hidden = 128, lr = 0.01, sample = 200,
               temperature = 0.8, text = "README.md", seed = 1 }
local STRING = { text = true, save = true }
do
  local i = 1
  while i <= #arg do
    local k, v = arg[i]:match("^%-%-(.+)$"), arg[i + 1]
    if not k or v == nil or (opts[k] == nil and k ~= "every" and k ~= "save") then
      io.stderr:write("usage: lua5.4 examples/char_lm.lua [--steps N] [--batch N] [--context N] [--embed N] "
        .. "[--hidden N] [--lr X] [--every N] [--sample N] [--temperature X] [--text PATH] [--save PATH] [--seed N]\n")
      os.exit(2)
    end
    opts[k] = STRING[k] and v or assert(tonumber(v), "--" .. k .. " takes a number")
    i = i + 2
  end
end
local STEPS, B, K = math.floor(opts.steps), math.floor(opts.batch), math.floor(opts.context)
local E, H = math.floor(opts.embed), math.floor(opts.hidden)
local EVERY = math.floor(opts.every or math.max(1, math.floor(STEPS / 10)))

-- The text as 1-based ids over its distinct bytes.
local f = assert(io.open(opts.text, "rb"))
local text = f:read("*a")
f:close()
local chars, id_of = {}, {}
for ch in text:gmatch(".") do if not id_of[ch] then id_of[ch] = true; chars[#chars + 1] = ch end end
table.sort(chars)
for i, ch in ipairs(chars) do id_of[ch] = i end
local V = #chars
local ids = {}
for i = 1, #text do ids[i] = id_of[text:sub(i, i)] end
print(("%s: %d characters, %d distinct; context %d, embedding %d, hidden %d, batch %d, %d steps")
  :format(opts.text, #text, V, K, E, H, B, STEPS))

nn.manual_seed(opts.seed)
lumus.manual_seed(opts.seed)
local emb = nn.Embedding(V, E)
local mlp = nn.Sequential(nn.Linear(K * E, H), nn.GELU({ approximate = "tanh" }), nn.Linear(H, V))

-- Rows of the identity: one-hot vectors for the cross-entropy stand-in and the lookup below.
local eye
local function one_hot(t)
  if not eye then
    local rows = {}
    for i = 1, V do rows[i] = {}; for j = 1, V do rows[i][j] = i == j and 1 or 0 end end
    eye = lumus.tensor(rows)
  end
  return lumus.embedding(t, eye)
end

-- The window embeddings [n, K * E] of ids [n, K]. Training the embedding needs
-- embedding's backward; a build without it looks rows up as one_hot(ids) @ weight,
-- which matmul differentiates.
local function embed(window)
  local n = window:size(1)
  if lumus.autograd.ops.embedding then return emb(window):reshape({ n, K * E }) end
  local oh = one_hot(window:reshape({ n * K }))
  return lumus.matmul(oh, emb.weight):reshape({ n, K * E })
end

-- lumus.cross_entropy where this build has it; otherwise the same value and gradient
-- (examples/train_mlp.lua says how).
local cross_entropy = lumus.cross_entropy or function(z, t)
  local n, c = z:size(1), z:size(2)
  local G, value = lumus.no_grad(function()
    local oh = one_hot(t)
    local v = lumus.scale(lumus.sum(lumus.mul(lumus.log_softmax(z), oh):reshape({ n * c })), -1 / n)
    return lumus.scale(lumus.sub(lumus.softmax(z), oh), 1 / n), v
  end)
  local s = lumus.sum(lumus.mul(z, G):reshape({ n * c }))
  return lumus.add(lumus.sub(s, s:detach()), value)
end

local params = emb:parameters()
for _, p in ipairs(mlp:parameters()) do params[#params + 1] = p end
local opt = optim.AdamW(params, { lr = opts.lr, weight_decay = 1e-4 })
local sched = optim.lr_scheduler.warmup_cosine(opt, math.max(1, math.floor(STEPS / 20)), STEPS + 1)

local g = ref.rng(opts.seed)
local function batch()
  local win, tgt = {}, {}
  for b = 1, B do
    local start = 1 + math.floor(g.uniform() * (#ids - K))
    local row = {}
    for j = 0, K - 1 do row[j + 1] = ids[start + j] end
    win[b], tgt[b] = row, ids[start + K]
  end
  return lumus.tensor(win, { dtype = "int32" }), lumus.tensor(tgt, { dtype = "int32" })
end

local wall0 = lumus.clock()
local first_loss, last_loss
for step = 1, STEPS do
  local win, tgt = batch()
  opt:zero_grad()
  local loss = cross_entropy(mlp(embed(win)), tgt)
  loss:backward()
  opt:step()
  sched:step()
  if step == 1 or step % EVERY == 0 or step == STEPS then
    local l = loss:to_table()[1]
    first_loss = first_loss or l
    last_loss = l
    print(("step %5d  loss %.4f  lr %.5f"):format(step, l, sched:get_last_lr()[1]))
  end
end
lumus.synchronize()
local wall = lumus.clock() - wall0
print(("trained in %.2f s (%.1f ms per step); loss %.4f -> %.4f (uniform guessing: %.4f)")
  :format(wall, wall / STEPS * 1e3, first_loss, last_loss, math.log(V)))

-- Sampling: the context starts as the text's first K characters.
mlp:eval()
local out = { text:sub(1, K) }
lumus.no_grad(function()
  local ctx = {}
  for j = 1, K do ctx[j] = ids[j] end
  for _ = 1, math.floor(opts.sample) do
    local logits = mlp(embed(lumus.tensor({ ctx }, { dtype = "int32" })))
    local probs = lumus.softmax(lumus.scale(logits, 1 / opts.temperature))
    local nxt = lumus.multinomial(probs, 1):to_table()[1][1]
    out[#out + 1] = chars[nxt]
    table.remove(ctx, 1)
    ctx[K] = nxt
  end
end)
print("sample:")
print(table.concat(out))

-- Weights by dotted name: "embedding.weight", "mlp.1.weight", ...
local function save(path)
  local tensors = { ["embedding.weight"] = emb.weight }
  for k, t in pairs(mlp:state_dict()) do tensors["mlp." .. k] = t end
  if lumus.save_safetensors then
    lumus.save_safetensors(path, tensors)
    return "safetensors"
  end
  -- Own format: per tensor, sorted by name, a line "<name> <dim1>x<dim2>...\n" and its
  -- float32 little-endian bytes.
  local names = {}
  for k in pairs(tensors) do names[#names + 1] = k end
  table.sort(names)
  local fh = assert(io.open(path, "wb"))
  for _, k in ipairs(names) do
    local t = tensors[k]
    fh:write(("%s %s\n"):format(k, table.concat(t:shape(), "x")), t:to_bytes())
  end
  fh:close()
  return "name/shape lines and float32 bytes"
end
if opts.save then print(("saved the weights to %s (%s)"):format(opts.save, save(opts.save))) end
