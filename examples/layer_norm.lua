-- LayerNorm forward on the GPU with lumus: normalizes a batch of rows, times it, and
-- checks the result against the pure-Lua float64 reference. Exits with status 1 if
-- the result is off.
--
-- Run from the repository root:
--   make example
-- or, with other sizes (rows, then row length D):
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" lua5.4 examples/layer_norm.lua 4096 1024
-- LUMUS_DEVICE=<index or name part> picks another device; LUMUS_VALIDATION=1 turns on
-- the Vulkan validation layer.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"

local rows = compat.integer(tonumber(arg and arg[1] or "")) or 1024
local d = compat.integer(tonumber(arg and arg[2] or "")) or 768
local eps = 1e-5

local dev = lumus.device()
print(("device: %s (%s, Vulkan %s, subgroup size %d)")
  :format(dev.name, dev.kind, dev.api_version, dev.subgroup_size))

-- A batch of activations (offset 3, std 2), a weight near 1 and a small bias, drawn
-- from lumus.reference's seeded generator so every run sees the same numbers.
-- random_table rounds to float32, so the reference sees exactly what the GPU sees.
local rng = ref.rng(2026)
local xt = ref.random_table({ rows, d }, function() return 3 + 2 * rng.normal() end)
local wt = ref.random_table({ d }, function() return 1 + 0.1 * rng.normal() end)
local bt = ref.random_table({ d }, function() return 0.1 * rng.normal() end)
local x, w, b = lumus.tensor(xt), lumus.tensor(wt), lumus.tensor(bt)

-- Outputs allocated once and reused, as a per-frame loop would.
local y, mean, invstd = lumus.empty({ rows, d }), lumus.empty({ rows }), lumus.empty({ rows })
local opts = { out = y, mean = mean, invstd = invstd }
lumus.layer_norm_forward(x, w, b, eps, opts)   -- warm-up: builds the pipeline
lumus.synchronize()

-- Host time: lumus.clock() is a monotonic wall clock (os.clock() would count CPU time
-- of all threads, which on a CPU Vulkan driver includes the kernel's own threads).
-- The calls only record work; synchronize() waits for it.
local iters = 20
local t0 = lumus.clock()
for _ = 1, iters do lumus.layer_norm_forward(x, w, b, eps, opts) end
lumus.synchronize()
local host_us = (lumus.clock() - t0) / iters * 1e6
-- Device time of one call, from GPU timestamps.
local gpu_us = lumus.gpu_time(function() lumus.layer_norm_forward(x, w, b, eps, opts) end) * 1e6
local bytes = 4 * (2 * rows * d + 2 * d + 2 * rows)   -- x read, y written, w/b, mean/invstd
print(("layer_norm_forward %dx%d: %.1f us per call on the host (%d calls + synchronize), %.1f us device time (%.2f GB/s)")
  :format(rows, d, host_us, iters, gpu_us, bytes / (gpu_us * 1e-6) / 1e9))

local t1 = lumus.clock()
local ry, rmean, rinvstd = ref.layer_norm_forward(xt, wt, bt, eps)
print(("pure-Lua float64 reference: %.1f ms"):format((lumus.clock() - t1) * 1e3))

-- Compare. max_rel is |got - want| / max(1, |want|); invstd is checked relative.
local cy = ref.compare(y:to_table(), ry)
local cm = ref.compare(mean:to_table(), rmean)
local gi, worst_inv = invstd:to_table(), 0
for i = 1, rows do
  local e = math.abs(gi[i] / rinvstd[i] - 1)
  if not (e <= worst_inv) then worst_inv = e end      -- NaN-safe max
end
print(("y: max abs error %.2e, relative L2 %.2e;  mean: max abs %.2e;  invstd: max rel %.2e")
  :format(cy.max_abs, cy.rel_l2, cm.max_abs, worst_inv))
local shown = math.min(4, d)
local first = compat.unpack_bytes("f32", y:to_bytes(1, shown), 1, shown)
first[shown + 1] = nil
print("first row, first values: " .. ("%.5f "):rep(shown):format(compat.unpack(first)))

local ok = cy.rel_l2 <= 1e-5 and cy.max_rel <= 1e-4 and cm.max_rel <= 1e-5 and worst_inv <= 1e-4
if ok then
  print("PASS: matches the float64 reference (y: rel L2 <= 1e-5, max <= 1e-4; mean 1e-5; invstd 1e-4)")
else
  print("FAIL: differs from the float64 reference beyond float32 tolerances")
end
os.exit(ok and 0 or 1)
