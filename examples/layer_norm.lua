-- Normalizes a batch with lumus.layer_norm_forward on the default device, times it, and
-- checks the result against the pure-Lua float64 reference.
-- Run from the repository root:  make example
local lumus = require "lumus"
local ref = require "lumus.reference"

local rows, d = 1024, 768
local dev = lumus.device()
print(("device: %s (%s, Vulkan %s, subgroup size %d)"):format(dev.name, dev.kind, dev.api_version, dev.subgroup_size))

-- A batch of activations with a per-row offset, and a weight and bias, all random.
local rng = ref.rng(2026)
local xt = ref.random_table({ rows, d }, function() return 3 + 2 * rng.normal() end)
local wt = ref.random_table({ d }, function() return 1 + 0.1 * rng.normal() end)
local bt = ref.random_table({ d }, function() return 0.1 * rng.normal() end)
local x, w, b = lumus.tensor(xt), lumus.tensor(wt), lumus.tensor(bt)

-- Outputs allocated once and reused, as a per-frame loop would.
local y, mean, invstd = lumus.empty({ rows, d }), lumus.empty({ rows }), lumus.empty({ rows })
local opts = { out = y, mean = mean, invstd = invstd }
lumus.layer_norm_forward(x, w, b, 1e-5, opts)   -- warm-up: builds the pipeline
lumus.synchronize()

local iters = 20
local t0 = lumus.clock()
for _ = 1, iters do lumus.layer_norm_forward(x, w, b, 1e-5, opts) end
lumus.synchronize()
local host_us = (lumus.clock() - t0) / iters * 1e6
local gpu_us = lumus.gpu_time(function() lumus.layer_norm_forward(x, w, b, 1e-5, opts) end) * 1e6
local bytes = 4 * (2 * rows * d + 2 * d + 2 * rows)
print(("layer_norm_forward %dx%d: %.1f us per call (host, %d calls + synchronize), %.1f us device time, %.2f GB/s")
  :format(rows, d, host_us, iters, gpu_us, bytes / (gpu_us * 1e-6) / 1e9))

local t1 = lumus.clock()
local ry, rmean, rinvstd = ref.layer_norm_forward(xt, wt, bt, 1e-5)
print(("pure-Lua float64 reference: %.1f ms"):format((lumus.clock() - t1) * 1e3))

local cy = ref.compare(y:to_table(), ry)
local cm = ref.compare(mean:to_table(), rmean)
local ci = ref.compare(invstd:to_table(), rinvstd)
print(("y: max abs error %.2e, relative L2 %.2e;  mean: max abs %.2e;  invstd: max rel %.2e")
  :format(cy.max_abs, cy.rel_l2, cm.max_abs, ci.max_rel))
print("first row, first values:")
print(y:reshape({ rows * d }):to_bytes(1, 4) and
  ("  %.5f %.5f %.5f %.5f"):format(string.unpack("<ffff", y:to_bytes(1, 4))))

local ok = cy.rel_l2 <= 1e-5 and cy.max_rel <= 1e-4 and cm.max_rel <= 1e-5 and ci.max_rel <= 1e-4
print(ok and "PASS: matches the reference (tolerances: rel L2 1e-5, max 1e-4)" or "FAIL: differs from the reference")
os.exit(ok and 0 or 1)
