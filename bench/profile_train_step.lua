-- bench/profile_train_step.lua: one training step of the pre-norm MLP block (bench/train_mlp.lua's
-- model, random data) under bench/op_profile.lua:
--   lua5.4 bench/op_profile.lua bench/profile_train_step.lua [tokens]
local lumus = require "lumus"
local nn, optim = lumus.nn, lumus.optim
local T = tonumber(arg[1] or "8192")
local D, H = 768, 3072
local block = nn.Residual(nn.Sequential(nn.LayerNorm(D), nn.Linear(D, H), nn.GELU({ approximate = "tanh" }), nn.Linear(H, D)))
local x = lumus.randn({ T, D })
local target = lumus.randn({ T, D })
local opt_w = optim.AdamW(block:parameters(), { lr = 1e-3, weight_decay = 0.01 })
local function step()
  opt_w:zero_grad()
  local loss = lumus.mse_loss(block(x), target)
  loss:backward()
  opt_w:step()
end
for _ = 1, 3 do step() end
lumus.synchronize()
PROFILE.reset()
local N = 5
local t0 = lumus.clock()
for _ = 1, N do step() end
lumus.synchronize()
PROFILE.report(("training step, %d tokens (host %.2f ms per step)"):format(T, (lumus.clock() - t0) * 1e3 / N), N)

