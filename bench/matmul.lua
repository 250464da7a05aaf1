-- bench/matmul.lua: float32 matmul and linear throughput, and the pre-norm MLP block.
--
-- For each shape M x K x N:
--   matmul   lumus.matmul(a [M, K], b [K, N]) into a preallocated output
--   linear   lumus.linear(x [M, K], weight [N, K], bias [N]): b read transposed, bias in
--            the epilogue (what nn.Linear runs)
-- median device time (lumus.gpu_time) and GFLOP/s counting 2*M*N*K, the tile the kernel
-- chose, and a check of sampled output entries against float64 dot products of the same
-- float32 inputs: each within 2 * K * 2^-24 * sum_k |a_ik b_kj| (the float32 error bound;
-- "ok" or "FAIL"). Given the CSV of bench/torch_matmul.py, PyTorch's time beside it.
-- Then a tile sweep (each tile forced through lumus.tune.matmul) on the sweep shapes,
-- and the MLP block y = x + W2 gelu(W1 LayerNorm(x) + b1) + b2 (D 768, hidden 3072, tanh
-- GELU) from lumus.nn modules: device time, host end-to-end time (forward + synchronize),
-- per-op device times, and sampled tokens against a float64 composition.
--
--   lua5.4 bench/matmul.lua [--preset h200|lavapipe] [--shapes MxKxN,...] [--iters N]
--       [--warmup N] [--samples N] [--tokens N] [--sweep MxKxN,...|none]
--       [--baseline torch.csv] [--csv out.csv] [--seed N] [--rotate on|off]
--       [--extra h200|lavapipe|none]
--
-- Presets: h200 (default on a GPU) takes ~30 s on an H200; lavapipe (default on a CPU
-- device) ~1-2 minutes on two cores. Inputs are N(0, 1) rows repeating a random block of
-- ~1M floats (common.matrix_bytes): generating 16M normals in Lua would take longer than
-- the benchmark, and caches work by address, so repeats do not make it easier.
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"

local fmt, median = common.fmt, common.median

local USAGE = [==[
usage: lua5.4 bench/matmul.lua [--preset h200|lavapipe] [--shapes MxKxN,...] [--iters N]
  [--warmup N] [--samples N] [--tokens N] [--sweep MxKxN,...|none] [--baseline torch.csv]
  [--csv FILE] [--seed N] [--rotate on|off] [--extra h200|lavapipe|none]]==]

local known = {}
for name in ("preset shapes iters warmup samples tokens sweep baseline csv seed rotate extra"):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, {}, USAGE)

local lumus = common.load_lumus()
local ref = common.load_reference()
local clock, clock_name = common.make_clock(lumus)
local dev_line, dev = common.device_line(lumus)

local PRESETS = {
  h200 = { shapes = "4096x4096x4096,8192x768x3072,8192x3072x768", iters = 30, warmup = 3,
           samples = 32, tokens = 8192, sweep = "4096x4096x4096,8192x768x3072", sweep_iters = 10,
           extra = "h200" },
  lavapipe = { shapes = "256x256x256,512x512x512,64x768x3072", iters = 3, warmup = 1,
               samples = 16, tokens = 64, sweep = "512x512x512", sweep_iters = 2, extra = "lavapipe" },
}
local preset_name = opt.preset or (dev.kind == "cpu" and "lavapipe") or "h200"
local preset = PRESETS[preset_name]
if not preset then io.stderr:write("unknown preset ", preset_name, "\n", USAGE, "\n"); os.exit(2) end

local function parse_mkn(s)
  local list = {}
  if s == "none" then return list end
  for item in tostring(s):gmatch("[^,%s]+") do
    local m, k, n = item:match("^(%d+)[xX](%d+)[xX](%d+)$")
    if not m then io.stderr:write("bad shape '", item, "' (expected MxKxN)\n"); os.exit(2) end
    list[#list + 1] = { math.tointeger(tonumber(m)), math.tointeger(tonumber(k)), math.tointeger(tonumber(n)), name = item }
  end
  return list
end

local shapes = parse_mkn(opt.shapes or preset.shapes)
-- The extra shapes (--extra h200|lavapipe|none; bench/torch_matmul.py --extra lists the
-- same ones): small-M products (GEMV: a decode step's vocabulary projection, [1..8] rows
-- of a 4096 x 4096 weight, a game frame's 64 x 256 x 256), a seeded random sweep of
-- M, N, K in 1..8192 (the same generator in both scripts), and float16 / bfloat16
-- products (tensor-core work in PyTorch). Names carry the dtype: "4096x4096x4096 f16".
local EXTRA = {
  h200 = { small = "1x768x50257,1x4096x4096,2x4096x4096,4x4096x4096,8x4096x4096,16x4096x4096,64x256x256,64x768x3072",
           sweep = 12, sweep_max = 8192, half = "4096x4096x4096,8192x768x3072,8192x3072x768,1x768x50257",
           bf16 = "4096x4096x4096" },
  lavapipe = { small = "1x768x4099,4x256x256,64x256x256", sweep = 4, sweep_max = 300, half = "128x128x128,1x256x1001",
               bf16 = "128x128x128" },
  none = { small = "", sweep = 0, sweep_max = 1, half = "", bf16 = "" },
}
local extra = EXTRA[opt.extra or preset.extra]
if not extra then io.stderr:write("--extra takes h200, lavapipe or none\n"); os.exit(2) end
local SWEEP_SEED = 20261203
do
  local function add(list, dtype, suffix)
    for _, sh in ipairs(parse_mkn(list)) do
      sh.dtype, sh.name = dtype, sh.name .. suffix
      shapes[#shapes + 1] = sh
    end
  end
  add(extra.small, "float32", "")
  -- 31-bit LCG (as torch_matmul.py's sweep_shapes); sizes log-uniform in 1..sweep_max;
  -- products over 2^33 multiply-adds are skipped (each stays under a millisecond).
  local state = SWEEP_SEED
  local function nxt() state = (state * 1103515245 + 12345) % 2147483648; return state end
  local function size()
    local top = 0
    while 2 ^ (top + 1) <= extra.sweep_max do top = top + 1 end
    local lo = math.tointeger(2 ^ (nxt() % (top + 1)))
    return math.min(extra.sweep_max, lo + nxt() % lo)
  end
  local count = 0
  while count < extra.sweep do
    local m, k, n = size(), size(), size()
    if m * k * n <= 2 ^ 33 then
      count = count + 1
      shapes[#shapes + 1] = { m, k, n, name = ("%dx%dx%d"):format(m, k, n), dtype = "float32", sweep = true }
    end
  end
  add(extra.half, "float16", " f16")
  add(extra.bf16, "bfloat16", " bf16")
end
local sweep_shapes = parse_mkn(opt.sweep or preset.sweep)
local iters = common.int_opt(opt.iters, preset.iters)
local warmup = common.int_opt(opt.warmup, preset.warmup)
local samples = common.int_opt(opt.samples, preset.samples)
local tokens = common.int_opt(opt.tokens, preset.tokens)
local seed = common.int_opt(opt.seed, 20261202)
local U = 2 ^ -24
-- --rotate on|off forces matmul's K-order rotation (see shaders/matmul.comp) for A/B runs.
local ROTATE = ({ on = true, off = false })[opt.rotate or ""]
if opt.rotate and ROTATE == nil then io.stderr:write("--rotate takes on or off\n"); os.exit(2) end
if ROTATE ~= nil then lumus.tune.matmul(1, 1, 1, { rotate = ROTATE }) end

local gen = common.normal_gen(seed, ref)

-- Median device seconds of fn: `warm` calls, then at least WARM_SECONDS of back-to-back
-- calls (an idle GPU lowers its clocks), then n timed calls.
local WARM_SECONDS = 0.25
local function device_time(fn, n, warm)
  for _ = 1, warm or 0 do fn() end
  local t0 = clock()
  repeat
    for _ = 1, 3 do fn() end
    lumus.synchronize()
  until clock() - t0 >= WARM_SECONDS
  local ts = {}
  for i = 1, n do ts[i] = lumus.gpu_time(fn) end
  return median(ts)
end

-- The tile, then "warp" for the 4 x 8 thread patches and "bi" for a compiled-in tile
-- (builds without those report neither).
local function tile_name(cfg, dtype)
  if cfg.wide and (dtype or "float32") == "float32" then   -- (aligned float32 products: 128 x 128 x 16 in row order, linear through a copy of b)
    return ("128x128x16/8x8%s wide"):format(cfg.rotate and " rot" or "")
  end
  return ("%dx%dx%d/%dx%d%s%s%s"):format(cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn, cfg.rotate and " rot" or "",
    cfg.order == "warp" and " warp" or "", cfg.builtin and " bi" or "")
end

-- Row-major R x D float32 matrix from repeated random rows; value(r, c) is 0-based.
local function matrix(R, D)
  local bytes, block, k = common.matrix_bytes(gen, R, D)
  return bytes, function(r, c)
    return (string.unpack("<f", block, (((r % k) * D) + c) * 4 + 1))
  end
end

-- (i, j) pairs to check: the corners, then deterministic pseudo-random ones.
local function sample_entries(M, N, n)
  local list = { { 0, 0 }, { M - 1, N - 1 }, { 0, N - 1 }, { M - 1, 0 } }
  local g = ref and ref.rng(seed + M + N) or nil
  while #list < n do
    local u1, u2 = g and g() or math.random(), g and g() or math.random()
    list[#list + 1] = { math.floor(u1 * M), math.floor(u2 * N) }
  end
  return list
end

-- Largest |got - want| over the samples, and whether each is within the float32 bound.
local HALF = { float32 = 0, float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }
local function check_entries(out, M, N, K, aval, bval, bias, entries, dtype)
  local h = HALF[dtype or "float32"]
  if h > 0 then out = out:to("float32") end
  local worst, ok = 0, true
  for _, e in ipairs(entries) do
    local i, j = e[1], e[2]
    local s, scale = bias and bias[j + 1] or 0, 0
    for q = 0, K - 1 do
      local p = aval(i, q) * bval(q, j)
      s, scale = s + p, scale + math.abs(p)
    end
    local got = (string.unpack("<f", out:to_bytes(i * N + j + 1, 1)))
    local err = math.abs(got - s)
    -- float32: the accumulation bound; 16-bit inputs add their rounding (the samples are
    -- the float32 values before conversion) and the output's.
    local bound = 2 * K * U * scale + 2 * U * math.abs(bias and bias[j + 1] or 0)
    if h > 0 then bound = bound + 4 * h * (scale + math.abs(bias and bias[j + 1] or 0)) + 2 * h * math.abs(s) end
    if not (err <= bound) then ok = false end
    if err > worst or err ~= err then worst = err end
  end
  return worst, ok
end

-- Baseline rows from bench/torch_matmul.py, keyed "op MxKxN".
local baseline = {}
if opt.baseline then
  local header, rows = chart.read_csv(opt.baseline)
  if not header then
    io.stderr:write("bench: warning: cannot read ", opt.baseline, ": ", tostring(rows), "\n")
  else
    for _, r in ipairs(rows) do baseline[tostring(r.op) .. " " .. tostring(r.shape)] = r end
  end
end

---------------------------------------------------------------------------------------
-- Products

local function bench_shape(s)
  local M, K, N = s[1], s[2], s[3]
  local dtype = s.dtype or "float32"
  local function as_dtype(t)
    if dtype == "float32" then return t end
    local c = t:to(dtype)
    t:free()
    return c
  end
  local flops = 2 * M * N * K
  local abytes, aval = matrix(M, K)
  local a <close> = as_dtype(lumus.from_bytes(abytes, { M, K }))
  abytes = nil                                               -- luacheck: ignore
  local bbytes, bval = matrix(K, N)
  local b <close> = as_dtype(lumus.from_bytes(bbytes, { K, N }))
  bbytes = nil                                               -- luacheck: ignore
  local wbytes, wval = matrix(N, K)
  local w <close> = as_dtype(lumus.from_bytes(wbytes, { N, K }))
  wbytes = nil                                               -- luacheck: ignore
  local biasv = common.unpack_floats(common.random_bytes(gen, N, 0.1))
  local bias <close> = as_dtype(lumus.from_bytes(common.pack_floats(biasv), { N }))
  local out <close> = lumus.empty({ M, N }, { dtype = dtype })
  collectgarbage()
  local entries = sample_entries(M, N, samples)
  local cfg = lumus.tune.matmul(M, N, K)
  local tile = cfg.gemv and "gemv" or tile_name(cfg, dtype)
  -- float16 on tensor cores where the device has them and the rows are whole 16-byte
  -- chunks (src/ops/matmul.c, coop_problem); linear's weight needs only K.
  local coop = dtype == "float16" and dev.cooperative_matrix and not cfg.gemv and K % 8 == 0
  local tile_matmul = coop and N % 8 == 0 and "coop" or tile
  local tile_linear = coop and "coop" or tile
  local rows = {}
  local ops = {
    { "matmul", function() lumus.matmul(a, b, { out = out }) end, bval, nil, tile_matmul },
    { "linear", function() lumus.linear(a, w, bias, { out = out }) end,
      function(q, j) return wval(j, q) end, biasv, tile_linear },
  }
  for _, o in ipairs(ops) do
    local name, fn, bv, bb, tile = o[1], o[2], o[3], o[4], o[5]
    local t = device_time(fn, iters, warmup)
    local err, ok = check_entries(out, M, N, K, aval, bv, bb, entries, dtype)
    local es = dtype == "float32" and 4 or 2
    local row = { op = name, shape = s.name, M = M, K = K, N = N, tile = tile,
                  ms = t * 1e3, gflops = flops / t / 1e9, max_err = err, ok = ok,
                  gbps = (M * K + K * N + N + M * N) * es / t / 1e9 }
    local bl = baseline[name .. " " .. s.name]
    if bl and type(bl.torch_ms) == "number" then
      row.torch_ms, row.torch_gflops = bl.torch_ms, flops / (bl.torch_ms * 1e-3) / 1e9
      row.vs_torch = row.torch_ms / row.ms
    end
    rows[#rows + 1] = row
  end
  return rows
end

local date = os.date("!%Y-%m-%d %H:%M UTC")
print(("# lumus matmul / linear — %s"):format(dev_line))
print(("%s; preset %s; median of %d device-time samples (lumus.gpu_time) after warm-up; host clock %s.")
  :format(date, preset_name, iters, clock_name))
print("GFLOP/s counts 2*M*N*K. linear = x [M, K] times weight [N, K] transposed, plus bias [N].")
print(("float32 unless the shape says f16 / bf16 (inputs and output in that dtype, float32 accumulation); "
  .. "random sweep: seed %d (31-bit LCG, sizes log-uniform in 1..%d); tile \"gemv\" = the small-M kernel.")
  :format(SWEEP_SEED, extra.sweep_max))
print("GB/s (small M): bytes of a, b (or weight), bias and c once, per device time.")
print(("err: max |c - ref| over %d sampled entries against float64 sums; ok = every sample within "
  .. "2*K*2^-24*sum|a||b|."):format(samples))
print()
local HEADER = { "op", "M x K x N", "tile", "device ms", "GFLOP/s", "GB/s", "torch ms", "torch GFLOP/s", "vs torch", "err", "check" }
print("| " .. table.concat(HEADER, " | ") .. " |")
print("|:---|:---|:---|" .. string.rep("---:|", #HEADER - 3))
io.stdout:flush()

local results, all_ok = {}, true
for _, s in ipairs(shapes) do
  local ok, rows = pcall(bench_shape, s)
  collectgarbage()
  if not ok then
    all_ok = false
    print(("| - | %s | error: %s |"):format(s.name, (tostring(rows):gsub("[\r\n|]", " "))))
  else
    for _, r in ipairs(rows) do
      all_ok = all_ok and r.ok
      results[#results + 1] = r
      print(("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1e | %s |"):format(r.op, r.shape, r.tile,
        fmt(r.ms, 3), fmt(r.gflops), r.M <= 64 and fmt(r.gbps) or "-", fmt(r.torch_ms, 3), fmt(r.torch_gflops),
        r.vs_torch and ("%.2fx"):format(r.vs_torch) or "-", r.max_err, r.ok and "ok" or "FAIL"))
    end
  end
  io.stdout:flush()
end

---------------------------------------------------------------------------------------
-- Tile sweep

-- Each tile in the kernel's forms (tune.matmul's order and builtin): "row" with
-- specialization constants is the kernel as it was before the forms; tiles without a
-- compiled-in variant run the two orders only.
local SWEEP_TILES = {
  { 128, 128, 8, 8, 8 }, { 128, 128, 16, 8, 8 }, { 128, 64, 8, 8, 8 }, { 128, 64, 16, 8, 8 }, { 64, 128, 8, 8, 8 },
  { 64, 64, 8, 8, 8 }, { 64, 64, 16, 8, 8 }, { 128, 256, 8, 8, 16 }, { 32, 32, 8, 4, 4 },
}
local SWEEP_FORMS = { { "row", false }, { "warp", false }, { "row", true }, { "warp", true } }
if #sweep_shapes > 0 then
  print()
  print(("## Tile sweep (median of %d device-time samples; bm x bn x bk / tm x tn, thread order warp|row, "
    .. "bi = compiled-in tile)"):format(preset.sweep_iters))
  print()
  print("a^T b: matmul(a_t, b, {transpose_a = true}) with a_t [K, M] (a weight gradient's form, x^T dy).")
  print()
  print("| shape | tile | threads | shared KiB | matmul ms | matmul GFLOP/s | linear ms | linear GFLOP/s | a^T b ms | a^T b GFLOP/s | check |")
  print("|:---|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  for _, s in ipairs(sweep_shapes) do
    local M, K, N = s[1], s[2], s[3]
    local abytes, aval = matrix(M, K)
    local a <close> = lumus.from_bytes(abytes, { M, K })
    local a_t <close> = lumus.from_bytes(abytes, { K, M })   -- (timing only: the same floats)
    local bbytes = matrix(K, N)
    local b <close> = lumus.from_bytes(bbytes, { K, N })
    local wbytes, wval = matrix(N, K)
    local w <close> = lumus.from_bytes(wbytes, { N, K })
    abytes, bbytes, wbytes = nil, nil, nil                   -- luacheck: ignore
    local bias <close> = lumus.zeros({ N })
    local out <close> = lumus.empty({ M, N })
    local entries = sample_entries(M, N, 8)
    collectgarbage()
    for _, t in ipairs(SWEEP_TILES) do for f, form in ipairs(SWEEP_FORMS) do
      local ok, cfg = pcall(lumus.tune.matmul, M, N, K, { bm = t[1], bn = t[2], bk = t[3], tm = t[4], tn = t[5], rotate = ROTATE,
                                                          order = form[1], builtin = form[2] })
      local name = ok and tile_name(cfg):gsub(" rot", "") or ("%dx%dx%d/%dx%d"):format(table.unpack(t))
      -- (forms that come out as another row's: a tile with no compiled-in variant, an
      -- order the tile's thread grid does not allow; a tile this device refuses, once)
      local dup = (not ok and f > 1) or (ok and ((form[2] and not cfg.builtin) or (form[1] == "warp" and cfg.order ~= "warp")))
      if not dup and not ok then
        print(("| %s | %s | - | - | n/a: %s | | | | | | |"):format(s.name, name, (tostring(cfg):gsub("^.-%((.*)%)$", "%1"))))
      elseif not dup then
        local tm = device_time(function() lumus.matmul(a, b, { out = out }) end, preset.sweep_iters, 0)
        local tt = device_time(function() lumus.matmul(a_t, b, { transpose_a = true, out = out }) end, preset.sweep_iters, 0)
        local tl = device_time(function() lumus.linear(a, w, bias, { out = out }) end, preset.sweep_iters, 0)
        local flops = 2 * M * N * K
        -- out holds the linear product now: 8 sampled entries against float64 sums.
        local _, good = check_entries(out, M, N, K, aval, function(q, j) return wval(j, q) end, nil, entries)
        all_ok = all_ok and good
        print(("| %s | %s | %d | %.1f | %s | %s | %s | %s | %s | %s | %s |"):format(s.name, name, cfg.workgroup,
          cfg.shared_bytes / 1024, fmt(tm * 1e3, 3), fmt(flops / tm / 1e9), fmt(tl * 1e3, 3), fmt(flops / tl / 1e9),
          fmt(tt * 1e3, 3), fmt(flops / tt / 1e9), good and "ok" or "FAIL"))
      end
      io.stdout:flush()
    end end
    lumus.tune.matmul(1, 1, 1, { rotate = ROTATE })
  end
end

---------------------------------------------------------------------------------------
-- The MLP block

local D, HIDDEN = 768, 3072
local mlp
local missing = {}
for _, k in ipairs { "gelu", "add" } do if type(lumus[k]) ~= "function" then missing[#missing + 1] = "lumus." .. k end end
do
  print()
  print(("## Pre-norm MLP block, %d tokens: x + W2 gelu_tanh(W1 LayerNorm(x) + b1) + b2, D %d, hidden %d")
    :format(tokens, D, HIDDEN))
  print()
  local nn = lumus.nn
  local block = nn.Residual(nn.Sequential(nn.LayerNorm(D), nn.Linear(D, HIDDEN, { seed = 1 }),
    nn.GELU({ approximate = "tanh" }), nn.Linear(HIDDEN, D, { seed = 2 })))
  local ln, l1, l2 = block.block:get(1), block.block:get(2), block.block:get(4)
  local xbytes, xval = matrix(tokens, D)
  local x <close> = lumus.from_bytes(xbytes, { tokens, D })
  xbytes = nil                                               -- luacheck: ignore
  collectgarbage()
  local flops = 2 * 2 * tokens * D * HIDDEN
  mlp = { tokens = tokens }

  -- Per-op device times into preallocated outputs (the kernels the block runs).
  local hn <close> = lumus.empty({ tokens, D })
  local mean <close> = lumus.empty({ tokens })
  local invstd <close> = lumus.empty({ tokens })
  local h1 <close> = lumus.empty({ tokens, HIDDEN })
  local h2 <close> = lumus.empty({ tokens, D })
  local parts = {
    { "layer_norm_forward", function() lumus.layer_norm_forward(hn, ln.weight, ln.bias, 1e-5, { out = hn, mean = mean, invstd = invstd }) end },
    { ("linear %d -> %d"):format(D, HIDDEN), function() lumus.linear(hn, l1.weight, l1.bias, { out = h1 }) end },
    { ("linear %d -> %d"):format(HIDDEN, D), function() lumus.linear(h1, l2.weight, l2.bias, { out = h2 }) end },
  }
  if not missing[1] then
    table.insert(parts, 3, { "gelu (tanh)", function() lumus.gelu(h1, { approximate = "tanh" }):free() end })
    parts[#parts + 1] = { "add (residual)", function() lumus.add(x, h2):free() end }
  end
  lumus.copy(x, { out = hn })
  print("| part | device ms | note |")
  print("|:---|---:|:---|")
  for _, p in ipairs(parts) do
    local t = device_time(p[2], iters, warmup)
    local note = p[1]:match("^linear") and ("%s GFLOP/s"):format(fmt(flops / 2 / t / 1e9)) or ""
    print(("| %s | %s | %s |"):format(p[1], fmt(t * 1e3, 3), note))
    io.stdout:flush()
  end

  if missing[1] then
    print()
    print(("whole block: skipped, this build lacks %s (elementwise ops)"):format(table.concat(missing, ", ")))
  else
    local t = device_time(function() block(x) end, iters, warmup)   -- block.output is reused
    local host = {}
    for i = 1, iters do
      local t0 = clock()
      block(x)
      lumus.synchronize()
      host[i] = clock() - t0
    end
    mlp.ms, mlp.host_ms = t * 1e3, median(host) * 1e3
    local bl = baseline["mlp " .. tokens .. "x768x3072"]
    mlp.torch_ms = bl and bl.torch_ms
    print()
    print("| block | device ms | host end-to-end ms | GFLOP/s (matmuls) | torch ms | vs torch |")
    print("|:---|---:|---:|---:|---:|---:|")
    print(("| nn.Residual(LayerNorm, Linear, GELU, Linear), %d tokens | %s | %s | %s | %s | %s |"):format(tokens,
      fmt(mlp.ms, 3), fmt(mlp.host_ms, 3), fmt(flops / t / 1e9), fmt(mlp.torch_ms, 3),
      type(mlp.torch_ms) == "number" and ("%.2fx"):format(mlp.torch_ms / mlp.ms) or "-"))

    -- Sampled tokens against a float64 composition over flat parameter arrays.
    if ref and samples > 0 then
      local y <close> = block(x)
      local function floats(t) return common.unpack_floats(t:to_bytes()) end
      local lw, lb, w1, b1, w2, b2 = floats(ln.weight), floats(ln.bias), floats(l1.weight), floats(l1.bias), floats(l2.weight), floats(l2.bias)
      local worst = 0
      local picks = { 0, tokens - 1, tokens // 2 }
      for _, r in ipairs(picks) do
        local row = {}
        for c = 0, D - 1 do row[c + 1] = xval(r, c) end
        local hrow = ref.layer_norm_forward(row, lw, lb, 1e-5)
        local g = {}
        for j = 0, HIDDEN - 1 do
          local s, base = b1[j + 1], j * D
          for q = 1, D do s = s + hrow[q] * w1[base + q] end
          g[j + 1] = 0.5 * s * (1 + math.tanh(math.sqrt(2 / math.pi) * (s + 0.044715 * s ^ 3)))
        end
        local got = common.unpack_floats(y:to_bytes(r * D + 1, D))
        for j = 0, D - 1 do
          local s, base = b2[j + 1], j * HIDDEN
          for q = 1, HIDDEN do s = s + g[q] * w2[base + q] end
          local e = math.abs(got[j + 1] - (row[j + 1] + s)) / math.max(1, math.abs(row[j + 1] + s))
          if e > worst or e ~= e then worst = e end
        end
      end
      mlp.max_err = worst
      local ok = worst <= 1e-4
      all_ok = all_ok and ok
      print()
      print(("checked tokens %s against a float64 composition: max error relative to max(1, |ref|) %.2e (tolerance 1e-4: %s)")
        :format(table.concat(picks, ", "), worst, ok and "ok" or "FAIL"))
    end
  end
end

if opt.csv then
  chart.write_csv(opt.csv, { "op", "shape", "M", "K", "N", "tile", "ms", "gflops", "torch_ms",
    "torch_gflops", "vs_torch", "max_err", "ok" }, results)
end
print()
print(all_ok and "all checks passed" or "SOME CHECKS FAILED")
os.exit(all_ok and 0 or 1)
