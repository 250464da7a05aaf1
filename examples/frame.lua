-- A model run inside every frame of a game or app loop, eagerly and replayed from a
-- capture:
--
--   8 x (LayerNorm(256), Linear(256, 256), GELU tanh) on 64 rows, Linear(256, 1), then the
--   64 floats of the head read back to the host.
--
-- The eager frame calls the nn modules each frame (each op checks its arguments and
-- records); the replayed frame captures the same forward once with lumus.capture and
-- then submits the recorded commands with g:replay(). Each frame feeds a new input
-- (copied into the captured input tensor) and reads the result; the two ways must give
-- bit-identical results. Prints the median host time of a frame each way.
--
-- Run from the repository root:
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" lua5.4 examples/frame.lua [frames]
local lumus = require "lumus"
local compat = require "lumus.compat"
local nn = lumus.nn

local ROWS, D, BLOCKS = 64, 256, 8
local FRAMES = tonumber(arg and arg[1]) or 50

nn.manual_seed(2026)
local layers = {}
for _ = 1, BLOCKS do
  layers[#layers + 1] = nn.LayerNorm(D)
  layers[#layers + 1] = nn.Linear(D, D)
  layers[#layers + 1] = nn.GELU({ approximate = "tanh" })
end
layers[#layers + 1] = nn.Linear(D, 1)
local model = nn.Sequential(compat.unpack(layers))

-- The frame's input lives in one tensor; each frame copies its new contents in.
local x = lumus.zeros({ ROWS, D })
local function input_for(frame)
  local t = {}
  for r = 1, ROWS do
    local row = {}
    for c = 1, D do row[c] = math.sin(0.01 * frame * r + 0.1 * c) end
    t[r] = row
  end
  return lumus.tensor(t)
end
local inputs = {}
for f = 1, FRAMES do inputs[f] = input_for(f) end

local function median(ts)
  table.sort(ts)
  return ts[math.floor((#ts + 1) / 2)]
end

-- Eager: the modules run every frame.
local eager, t_eager = {}, {}
for f = 1, FRAMES do
  local t0 = lumus.clock()
  x:copy(inputs[f])
  eager[f] = model:forward(x):to_bytes()
  t_eager[f] = lumus.clock() - t0
end

-- Replayed: the forward recorded once; the copy of each frame's input stays eager.
local graph, y = lumus.capture(function() return model:forward(x) end)
local t_replay, same = {}, 0
for f = 1, FRAMES do
  local t0 = lumus.clock()
  x:copy(inputs[f])
  graph:replay()
  local out = y:to_bytes()
  t_replay[f] = lumus.clock() - t0
  if out == eager[f] then same = same + 1 end
end

print(("%s: %d frames of %d ops"):format(lumus.device().name, FRAMES, graph:stats().ops))
print(("eager frame  %8.1f us median"):format(median(t_eager) * 1e6))
print(("replay frame %8.1f us median"):format(median(t_replay) * 1e6))
print(("first frame's head: %s ..."):format(table.concat(compat.unpack_bytes("f32", eager[1], 1, 3), ", ")))
print(("replayed frames bit-identical to eager: %d of %d"):format(same, FRAMES))
graph:free()
if same ~= FRAMES then os.exit(1) end
