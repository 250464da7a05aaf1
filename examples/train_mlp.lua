-- Trains a small MLP classifier with lumus.nn, autograd and lumus.optim on a synthetic
-- dataset made here: interleaved spirals (default) or gaussian blobs, one class per arm
-- or blob, points in 2-D. Prints the loss and the training accuracy as it goes and the
-- final accuracy, and exits with status 1 if --min-acc is given and not reached.
--
-- Run from the repository root:
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" lua5.4 examples/train_mlp.lua
-- Options:
--   --data spirals|blobs   the dataset (default spirals)
--   --classes N            arms or blobs (default 3)
--   --points N             points per class (default 100)
--   --hidden N             width of the two hidden layers (default 64)
--   --steps N              full-batch AdamW steps (default 120)
--   --lr X                 peak learning rate (default 0.02; cosine-annealed to 0)
--   --every N              print every N steps (default steps / 10)
--   --min-acc X            exit 1 if the final accuracy is below X
--   --seed N               dataset and initialization seed (default 1)
-- A few seconds on lavapipe with the defaults; --points 10000 --hidden 1024 on a GPU.
local lumus = require "lumus"
local ref = require "lumus.reference"
local nn, optim = lumus.nn, lumus.optim

local opts = { data = "spirals", classes = 3, points = 100, hidden = 64, steps = 120, lr = 0.02, seed = 1 }
local NUMERIC = { classes = true, points = true, hidden = true, steps = true, lr = true, every = true, ["min-acc"] = true, seed = true }
do
  local i = 1
  while i <= #arg do
    local k, v = arg[i]:match("^%-%-(.+)$"), arg[i + 1]
    if not k or v == nil or (opts[k] == nil and not NUMERIC[k]) then
      io.stderr:write("usage: lua5.4 examples/train_mlp.lua [--data spirals|blobs] [--classes N] [--points N] "
        .. "[--hidden N] [--steps N] [--lr X] [--every N] [--min-acc X] [--seed N]\n")
      os.exit(2)
    end
    opts[k] = NUMERIC[k] and assert(tonumber(v), "--" .. k .. " takes a number") or v
    i = i + 2
  end
end
local C, P, STEPS = math.floor(opts.classes), math.floor(opts.points), math.floor(opts.steps)
local EVERY = math.floor(opts.every or math.max(1, math.floor(STEPS / 10)))

-- The dataset: N = C * P points x [N, 2] and labels [N] (int32, 1-based).
local g = ref.rng(opts.seed)
local xs, labels = {}, {}
for c = 1, C do
  for i = 1, P do
    local x1, x2
    if opts.data == "spirals" then
      local r = i / P                                          -- radius 0..1
      local theta = (c - 1) * 2 * math.pi / C + 4 * r + g.normal() * 0.2
      x1, x2 = r * math.sin(theta), r * math.cos(theta)
    elseif opts.data == "blobs" then
      local a = (c - 1) * 2 * math.pi / C
      x1, x2 = math.cos(a) + g.normal() * 0.3, math.sin(a) + g.normal() * 0.3
    else
      io.stderr:write("--data must be spirals or blobs\n")
      os.exit(2)
    end
    xs[#xs + 1] = { x1, x2 }
    labels[#labels + 1] = c
  end
end
local N = #xs
local x = lumus.tensor(xs)
local y = lumus.tensor(labels, { dtype = "int32" })

-- Cross-entropy of logits [N, C] against 1-based int32 targets, mean over rows:
-- lumus.cross_entropy where this build has it; otherwise a stand-in with the same value
-- (from log_softmax) and gradient ((softmax - onehot) / N, through sum(z * G), whose
-- own value is cancelled).
local eye = {}
local function one_hot(t, c)
  if not eye[c] then
    local rows = {}
    for i = 1, c do rows[i] = {}; for j = 1, c do rows[i][j] = i == j and 1 or 0 end end
    eye[c] = lumus.tensor(rows)
  end
  return lumus.embedding(t, eye[c])
end
local cross_entropy = lumus.cross_entropy or function(z, t)
  local n, c = z:size(1), z:size(2)
  local G, value = lumus.no_grad(function()
    local oh = one_hot(t, c)
    local v = lumus.scale(lumus.sum(lumus.mul(lumus.log_softmax(z), oh):reshape({ n * c })), -1 / n)
    return lumus.scale(lumus.sub(lumus.softmax(z), oh), 1 / n), v
  end)
  local s = lumus.sum(lumus.mul(z, G):reshape({ n * c }))
  return lumus.add(lumus.sub(s, s:detach()), value)
end

nn.manual_seed(opts.seed)
local H = math.floor(opts.hidden)
local model = nn.Sequential(
  nn.Linear(2, H), nn.GELU(),
  nn.Linear(H, H), nn.GELU(),
  nn.Linear(H, C))
local opt = optim.AdamW(model:parameters(), { lr = opts.lr, weight_decay = 1e-4 })
local sched = optim.lr_scheduler.CosineAnnealingLR(opt, STEPS)

local function accuracy(logits)
  local pred = lumus.argmax(logits, { dim = 2 }):to_table()
  local right = 0
  for i = 1, N do if pred[i] == labels[i] then right = right + 1 end end
  return right / N
end

print(("%s: %d points in %d classes; MLP 2 -> %d -> %d -> %d; %d AdamW steps on %s")
  :format(opts.data, N, C, H, H, C, STEPS, lumus.device().name))
local t0 = os.clock()
local wall0 = lumus.clock()
local acc
for step = 1, STEPS do
  opt:zero_grad()
  local logits = model(x)
  local loss = cross_entropy(logits, y)
  loss:backward()
  opt:step()
  sched:step()
  if step % EVERY == 0 or step == 1 or step == STEPS then
    acc = lumus.no_grad(accuracy, logits)
    print(("step %5d  loss %.4f  accuracy %.3f"):format(step, loss:to_table()[1], acc))
  end
end
lumus.synchronize()
local wall = lumus.clock() - wall0
model:eval()
acc = lumus.no_grad(function() return accuracy(model(x)) end)
print(("final accuracy %.3f (%.2f s, %.1f ms per step; cpu %.2f s)"):format(acc, wall, wall / STEPS * 1e3, os.clock() - t0))
if opts["min-acc"] and acc < opts["min-acc"] then
  io.stderr:write(("accuracy %.3f is below --min-acc %.3f\n"):format(acc, opts["min-acc"]))
  os.exit(1)
end
