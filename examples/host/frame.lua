-- The script examples/host/host.c runs: loaded once, then frame(i) is called once per
-- frame. Each frame normalizes a batch of activations with layer_norm_forward (the
-- batch drifts and the bias changes from frame to frame, as a game's state would) and
-- reads a few values back, as a host that uses the result that frame must. Outputs are
-- allocated once, so a frame allocates no device memory.
-- check() compares the last frame against the pure-Lua float64 reference.
local lumus = require "lumus"
local ref = require "lumus.reference"
local compat = require "lumus.compat"

local rows, d = ...
local eps = 1e-5
local rng = ref.rng(42)
local xt = ref.random_table({ rows, d }, function() return 5 + 2 * rng.normal() end)
local wt = ref.random_table({ d }, function() return 1 + 0.1 * rng.normal() end)

local x, w = lumus.tensor(xt), lumus.tensor(wt)
local b = lumus.empty({ d })
local y, mean, invstd = lumus.empty({ rows, d }), lumus.empty({ rows }), lumus.empty({ rows })
local opts = { out = y, mean = mean, invstd = invstd }
local last_bias

local M = {}

function M.frame(i)
  last_bias = ref.f32(0.01 * i)
  lumus.fill(b, last_bias)
  lumus.layer_norm_forward(x, w, b, eps, opts)
  -- The host's use of this frame's result: the first values of row 1 (waits for it).
  return compat.unpack(compat.unpack_bytes("f32", y:to_bytes(1, 4)), 1, 4)
end

function M.check()
  local bt = {}
  for j = 1, d do bt[j] = last_bias end
  local ry = ref.layer_norm_forward(xt, wt, bt, eps)
  local c = ref.compare(y:to_table(), ry)
  local ok = c.rel_l2 <= 1e-5 and c.max_rel <= 1e-4
  return ok, ("last frame's y against the float64 reference: max rel error %.2e, rel L2 %.2e (limits 1e-4, 1e-5)")
    :format(c.max_rel, c.rel_l2)
end

return M
