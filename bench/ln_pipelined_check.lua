-- LayerNorm's two-stage split pipelined in one dispatch against its two dispatches on a
-- real GPU, where workgroups truly race (lavapipe's specs check the same on a CPU): y,
-- mean and invstd bit for bit equal in 10 runs of each lag (automatic; the least, = parts;
-- the least with no polling, so records not yet published are computed from x; past every
-- ticket), and the scratch's ticket and fallback counts. Prints one line per case.
--   lua5.4 bench/ln_pipelined_check.lua
local lumus = require "lumus"
local compat = require "lumus.compat"
local bad, n = 0, 0
for _, sh in ipairs { { 8, 437695 }, { 56, 46499 }, { 300, 262144 }, { 1080, 196917 }, { 4, 264496 }, { 1, 291077 }, { 2050, 110459 } } do
  local rows, d = sh[1], sh[2]
  for _, dt in ipairs { "float32", "float16", "bfloat16" } do
    lumus.manual_seed(rows + d)
    local x = lumus.randn({ rows, d }):mul(3):add(1000):to(dt)
    local w, b = lumus.randn({ d }):to(dt), lumus.randn({ d }):to(dt)
    lumus.tune.layer_norm(d, { form = "split2", pipelined = false })
    local y0, m0, s0 = lumus.layer_norm_forward(x, w, b, 1e-5)
    local ref = y0:to_bytes() .. m0:to_bytes() .. s0:to_bytes()
    for _, t in ipairs { { form = "split2" }, { form = "split2", lag = 1 }, { form = "split2", lag = 1, spin_limit = 0 }, { form = "split2", lag = 100000 } } do
      lumus.tune.layer_norm(d, t)
      local plan = lumus.tune.layer_norm(d, nil, rows, dt)
      local same = 0
      for rep = 1, 10 do
        local y, m, s = lumus.layer_norm_forward(x, w, b, 1e-5)
        if y:to_bytes() .. m:to_bytes() .. s:to_bytes() == ref then same = same + 1 end
      end
      t.return_scratch = true
      lumus.tune.layer_norm(d, t)
      local _, _, _, scratch = lumus.layer_norm_forward(x, w, b, 1e-5)
      local tickets, fallbacks = compat.unpack(compat.unpack_bytes("u32", scratch:to_bytes(1, 2), 1, 2))
      n = n + 1
      if same ~= 10 then bad = bad + 1 end
      print(("%dx%d %s lag=%s spin=%s parts=%d plan_lag=%d: %d/10 equal, tickets %d (want %d), fallbacks %d"):format(rows, d, dt,
        tostring(t.lag), tostring(t.spin_limit), plan.parts, plan.lag, same, tickets, rows * plan.parts + plan.lag, fallbacks))
    end
    lumus.tune.layer_norm(d, {})
  end
end
print(("pipe_check: %d of %d cases differ"):format(bad, n))
