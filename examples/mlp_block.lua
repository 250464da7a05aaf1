-- A pre-norm transformer MLP block with lumus.nn:
--
--   y = x + W2 gelu(W1 LayerNorm(x) + b1) + b2      D = 768, hidden = 3072, tanh GELU
--
-- built from nn modules, run on a batch of tokens, checked against a float64 reference
-- composition (lumus.reference) and timed: median device time (lumus.gpu_time) and
-- median host time end to end (forward + synchronize). Exits with status 1 if the
-- result is off, 2 if this build of lumus lacks a kernel the block needs.
--
-- Run from the repository root:
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" lua5.4 examples/mlp_block.lua
-- Options:
--   --tokens N   tokens in the batch (default 64: seconds on lavapipe; try 8192 on a GPU)
--   --check N    tokens checked against the reference, spread from first to last
--                (default: all of them, at most 64; "all" checks every token). The
--                float64 reference takes ~7 s in plain Lua, mostly reading the 4.7M
--                parameters into tables, plus ~0.01 s per token.
--   --iters N    timed forward passes (default 5 on a CPU device, 50 otherwise)
-- LUMUS_DEVICE=<index or name part> picks another device.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local nn = lumus.nn

local D, HIDDEN = 768, 3072
local TOL = 1e-4    -- max |y - ref| / max(1, |ref|); float32 error here is ~1e-6

local function usage(msg)
  io.stderr:write(msg, "\nusage: lua5.4 examples/mlp_block.lua [--tokens N] [--check N|all] [--iters N]\n")
  os.exit(2)
end

local opt, known = {}, { tokens = true, check = true, iters = true }
do
  local i = 1
  while arg and i <= #arg do
    local a = arg[i]
    local name, value = a:match("^%-%-(%w+)=(.*)$")
    if not name then
      name = a:match("^%-%-(%w+)$")
      if not name then usage("unexpected argument " .. a) end
      i = i + 1
      value = arg[i]
    end
    if not known[name] then usage("unknown option --" .. name) end
    if value == nil then usage("--" .. name .. " needs a value") end
    opt[name] = value
    i = i + 1
  end
end
local function int_arg(name, default)
  if opt[name] == nil then return default end
  local n = compat.integer(tonumber(opt[name]))
  if not n or n < 1 then usage(("--%s must be a positive integer, got %s"):format(name, opt[name])) end
  return n
end

local dev = lumus.device()
local tokens = int_arg("tokens", 64)
local check_n = opt.check == "all" and tokens or math.min(tokens, int_arg("check", 64))
local iters = int_arg("iters", dev.kind == "cpu" and 5 or 50)
print(("device: %s (%s, Vulkan %s, subgroup size %d)"):format(dev.name, dev.kind, dev.api_version, dev.subgroup_size))

for _, k in ipairs { "gelu", "add", "linear", "layer_norm_forward" } do
  if type(lumus[k]) ~= "function" then
    io.stderr:write(("mlp_block: this build of lumus lacks lumus.%s, which the block needs "
      .. "(elementwise ops: gelu, add)\n"):format(k))
    os.exit(2)
  end
end

-- The block, with seeded (reproducible) parameters. LayerNorm's weight and bias are
-- loaded with non-trivial values so that they matter in the check.
local t_build = lumus.clock()
local block = nn.Residual(nn.Sequential(
  nn.LayerNorm(D),
  nn.Linear(D, HIDDEN, { seed = 1 }),
  nn.GELU({ approximate = "tanh" }),
  nn.Linear(HIDDEN, D, { seed = 2 })))
local g = ref.rng(2026)
block.block:get(1):load {
  weight = ref.random_table({ D }, function() return 1 + 0.1 * g.normal() end),
  bias = ref.random_table({ D }, function() return 0.1 * g.normal() end),
}
print(block)
print(("parameters: %d tensors, %d floats; built in %.2f s")
  :format(#block:parameters(), (function()
    local n = 0
    for _, p in ipairs(block:parameters()) do n = n + p:numel() end
    return n
  end)(), lumus.clock() - t_build))

-- Input: tokens x D, N(0, 1), float32 (the reference reads the same values back).
local xt = ref.random_table({ tokens, D }, g)
local x = lumus.tensor(xt)

local y = block(x)              -- warm-up: builds the pipelines
lumus.synchronize()

-- Timing. Device time: timestamps around one forward pass (5 dispatches). Host time:
-- forward + synchronize, end to end, on a monotonic clock.
local function median(t)
  table.sort(t)
  local n = #t
  return n % 2 == 1 and t[math.floor((n + 1) / 2)] or (t[math.floor(n / 2)] + t[math.floor(n / 2) + 1]) / 2
end
local dev_t, host_t = {}, {}
for i = 1, iters do
  dev_t[i] = lumus.gpu_time(function() block(x) end)   -- block.output is reused
  local t0 = lumus.clock()
  block(x)
  lumus.synchronize()
  host_t[i] = lumus.clock() - t0
end
local flops = 2 * 2 * tokens * D * HIDDEN
local dev_s, host_s = median(dev_t), median(host_t)
print(("forward of %d tokens: device %.3f ms (%.1f GFLOP/s in the two matmuls), host end to end %.3f ms; median of %d")
  :format(tokens, dev_s * 1e3, flops / dev_s / 1e9, host_s * 1e3, iters))

-- The float64 reference composition, on check_n tokens spread over the batch.
local p = block:parameters()
local tab = {}
for i, t in ipairs(p) do tab[i] = t:to_table() end
local ln_w, ln_b, w1, b1, w2, b2 = tab[1], tab[2], tab[3], tab[4], tab[5], tab[6]
local function gelu_tanh(v)
  return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)))
end
local rows, picked = {}, {}
for k = 0, check_n - 1 do
  local r = check_n == 1 and 1 or 1 + math.floor(k * (tokens - 1) / (check_n - 1))
  rows[#rows + 1] = r
  picked[#picked + 1] = xt[r]
end
local t_ref = lumus.clock()
local h = ref.layer_norm_forward(picked, ln_w, ln_b, 1e-5)
h = ref.linear(h, w1, b1)
for _, row in ipairs(h) do for j = 1, #row do row[j] = gelu_tanh(row[j]) end end
h = ref.linear(h, w2, b2)
for i, row in ipairs(h) do for j = 1, #row do row[j] = row[j] + picked[i][j] end end
local t_ref_s = lumus.clock() - t_ref

local got = {}
for i, r in ipairs(rows) do
  got[i] = compat.unpack_bytes("f32", y:to_bytes((r - 1) * D + 1, D), 1, D)
  got[i][D + 1] = nil
end
local c = ref.compare(got, h)
print(("checked %d of %d tokens against the float64 reference (%.1f s in plain Lua): max abs error %.2e, "
  .. "max error relative to max(1, |ref|) %.2e, relative L2 %.2e; tolerance %.0e")
  :format(check_n, tokens, t_ref_s, c.max_abs, c.max_rel, c.rel_l2, TOL))
local ok = c.max_rel <= TOL
print(ok and "PASS" or "FAIL: the block differs from the reference beyond float32 tolerance")
os.exit(ok and 0 or 1)
