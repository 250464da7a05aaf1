-- bench/matmul_coop.lua: float16 matmul and linear on tensor cores, each block form of
-- shaders/matmul_coop.comp forced in turn (lumus.tune.matmul's coop_form) and the
-- automatic choice, on the headline shapes and a seeded random sweep (M, N, K log-uniform
-- in 64..8192, K and N rounded to multiples of 8 as the kernel needs). Median device time
-- (lumus.gpu_time), TFLOP/s counting 2*M*N*K, and a check of sampled entries against
-- float64 dot products of the float16 inputs (float32 accumulation bound plus half an
-- ulp of float16). Needs a device with cooperative matrices.
--
--   lua5.4 bench/matmul_coop.lua [--shapes MxKxN,...] [--sweep N] [--seed N] [--iters N]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"

local USAGE = "usage: lua5.4 bench/matmul_coop.lua [--shapes MxKxN,...] [--sweep N] [--seed N] [--iters N]"
local known = { shapes = true, sweep = true, seed = true, iters = true }
local opt = common.parse_args(arg, known, {}, USAGE)
local lumus = common.load_lumus()
local ref = common.load_reference()
local dev_line, dev = common.device_line(lumus)
if not dev.cooperative_matrix then print(dev_line .. ": no cooperative matrices"); os.exit(0) end

local iters = common.int_opt(opt.iters, 20)
local shapes = {}
for item in (opt.shapes or "4096x4096x4096,8192x768x3072,8192x3072x768,8192x8192x8192,2048x2048x2048"):gmatch("[^,%s]+") do
  local m, k, n = item:match("^(%d+)x(%d+)x(%d+)$")
  shapes[#shapes + 1] = { tonumber(m), tonumber(k), tonumber(n) }
end
local seed = common.int_opt(opt.seed, 20261204)
local state = seed
local function uniform()   -- 31-bit LCG, printed seed repeats the sweep
  state = (state * 1103515245 + 12345) % 2147483648
  return state / 2147483648
end
local function logu(lo, hi) return math.floor(math.exp(math.log(lo) + uniform() * (math.log(hi) - math.log(lo))) + 0.5) end
for _ = 1, common.int_opt(opt.sweep, 10) do
  local m, k, n = logu(64, 8192), logu(64, 8192), logu(64, 8192)
  shapes[#shapes + 1] = { m, (k + 7) // 8 * 8, (n + 7) // 8 * 8 }
end

local forms = { 0 }
for f = 1, 16 do
  if not pcall(lumus.tune.matmul, 1, 1, 1, { coop_form = f }) then break end
  forms[#forms + 1] = f
end
lumus.tune.matmul(1, 1, 1, {})

local gen = common.normal_gen(seed, ref)
local function operand(r, c)
  local bytes = common.matrix_bytes(gen, r, c)
  return lumus.from_bytes(bytes, { r, c }):to("float16")
end

-- Sampled entries against float64 dot products of the float16 inputs.
local function check(c, a, b, tb, M, K, N)
  local worst = 0
  for s = 1, 6 do
    local i, j = 1 + (s * 7919) % M, 1 + (s * 104729) % N
    local arow = a:narrow(1, i, 1):to("float32"):to_table()[1]
    local bcol = (tb and b:narrow(1, j, 1) or b:narrow(2, j, 1)):to("float32"):contiguous():to_table()
    local sum, scale = 0, 0
    for q = 1, K do
      local bv = tb and bcol[1][q] or bcol[q][1]
      sum, scale = sum + arow[q] * bv, scale + math.abs(arow[q] * bv)
    end
    local got = c:narrow(1, i, 1):narrow(2, j, 1):to("float32"):to_table()[1][1]
    local bound = 2 * K * 2 ^ -24 * scale + 2 ^ -11 * math.abs(sum) * 1.001 + 2 ^ -25
    local r = math.abs(got - sum) / bound
    if not (r <= worst) then worst = r end
  end
  return worst
end

print(("# float16 matmul on tensor cores by block form — %s"):format(dev_line))
print(("median of %d device-time samples; sweep seed %d; form 0 = automatic (its pick in brackets)\n"):format(iters, seed))
local header = { "op", "M x K x N" }
for _, f in ipairs(forms) do header[#header + 1] = f == 0 and "auto TFLOP/s" or ("form %d"):format(f) end
header[#header + 1] = "worst err/bound"
local rows = {}
for _, s in ipairs(shapes) do
  local M, K, N = s[1], s[2], s[3]
  local a = operand(M, K)
  local b = operand(K, N)
  local w = operand(N, K)
  local c = lumus.empty({ M, N }, { dtype = "float16" })
  for _, op in ipairs { "matmul", "linear" } do
    local row = { op, ("%dx%dx%d"):format(M, K, N) }
    local worst = 0
    for _, f in ipairs(forms) do
      lumus.tune.matmul(1, 1, 1, { path = "coop", coop_form = f })
      local fn = op == "matmul" and function() lumus.matmul(a, b, { out = c }) end
        or function() lumus.linear(a, w, nil, { out = c }) end
      local t = common.device_time(lumus, fn, iters, 2)
      local cell = common.fmt(2 * M * N * K / t / 1e12)
      if f == 0 then cell = cell .. (" [%d]"):format(lumus.tune.matmul(M, N, K).coop_form) end
      row[#row + 1] = cell
      local r = op == "matmul" and check(c, a, b, false, M, K, N) or check(c, a, w, true, M, K, N)
      if not (r <= worst) then worst = r end
    end
    lumus.tune.matmul(1, 1, 1, {})
    row[#row + 1] = (worst <= 1 and "ok " or "FAIL ") .. common.fmt(worst)
    rows[#rows + 1] = row
    io.stdout:flush()
  end
  a:free(); b:free(); w:free(); c:free()
end
print(common.markdown_table(header, rows))
