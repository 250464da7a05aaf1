-- bench/frame_profile.lua: the frame of bench/frame.lua at a small size, for counting
-- host instructions with callgrind (bench/frame_callgrind.py runs it): N frames of
--   nn      model:forward(x) only (Lua modules and op calls that record)
--   frame   model:forward(x) and the read back of the head
--   replay  g:replay() and the read back
-- on 8 rows, D 64, 8 blocks (the host path of the 64 x 256 frame; kernels small enough
-- for lavapipe under valgrind). With "small", linear takes the small-model kernel
-- (lumus.tune.linear path "small"), so LayerNorm, Linear and GELU run as one
-- layer_norm_linear as on the H200; otherwise lavapipe's automatic choice (LayerNorm,
-- then linear with the GELU). Prints "ops N", the ops a frame records.
--   lua5.4 bench/frame_profile.lua N nn|frame|replay [small]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local lumus = require("common").load_lumus()
local nn = lumus.nn
local R, D, L, N = 8, 64, 8, tonumber(arg[1] or 50)
local mode = arg[2] or "nn"
if arg[3] == "small" then lumus.tune.linear(1, 1, 1, { path = "small" }) end
nn.manual_seed(1)
local mods = {}
for _ = 1, L do
  mods[#mods + 1] = nn.LayerNorm(D); mods[#mods + 1] = nn.Linear(D, D); mods[#mods + 1] = nn.GELU({ approximate = "tanh" })
end
mods[#mods + 1] = nn.Linear(D, 1)
local model = nn.Sequential(table.unpack(mods))
local x = lumus.ones({ R, D })
model:forward(x):to_bytes()
local g = lumus.capture(function() return model:forward(x) end)
g:replay(); lumus.synchronize()
print(("ops %d"):format(g:stats().ops))
local y = mods[#mods].output
local function loop()
  if mode == "nn" then for _ = 1, N do model:forward(x) end
  elseif mode == "frame" then for _ = 1, N do model:forward(x); y:to_bytes() end
  else for _ = 1, N do g:replay(); y:to_bytes() end end
end
xpcall(loop, debug.traceback)
lumus.synchronize()
