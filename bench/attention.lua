-- bench/attention.lua: lumus.scaled_dot_product_attention throughput against PyTorch's
-- F.scaled_dot_product_attention (bench/torch_attention.py, same run).
--
-- Cases (as torch_attention.py): q, k, v [B, H, T, hd] with B 8, H 12, hd 64, T 1024 and
-- 4096, causal and not, float32 and float16; TFLOP/s counting 4*B*H*T^2*hd (halved when
-- causal); then the decode shape, one query over 1024 keys (B 1, H 12), in µs, and
-- GPT-2 small's prefill shape (B 1, H 12, T 512, causal). Median
-- device time (lumus.gpu_time) into a preallocated out, the kernel plan
-- (lumus.tune.attention: block_q x block_k, lanes, splits), and a check of sampled rows
-- against float64 attention of the same inputs (within 2e-5 float32, 3e-3 float16 of
-- max(1, |want|): "ok" or "FAIL"). With --baseline, PyTorch's figures and lumus's
-- share of its throughput. Then, on the first shape, a sweep of kernel forms (the flash
-- kernel's tiles, tune.attention's flash_tile, each with and without the register prefetch
-- of the next K/V tile; the tensor-core kernel with and without it) and of the row-tile
-- kernel's forced register tiles (kernel = "rows", the kernel before the flash one). The plan column says "coop" where
-- float16 runs on tensor cores (shaders/attention_coop.comp; its block is 64 query rows,
-- whatever block_q the SIMT plan shows); "flash-fixed" is the flash kernel's variant with
-- the register tile compiled in; the form sweep forces tiles through specialization
-- constants (its first rows are the same tile: the two variants side by side).
--
--   lua5.4 bench/attention.lua [--preset h200|lavapipe] [--iters N] [--warmup N]
--       [--samples N] [--baseline torch_attention.csv] [--csv out.csv] [--quick]
--
-- h200 (default on a GPU) takes well under a minute; lavapipe (default on a CPU device)
-- runs small shapes only, to check the script.
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"

local fmt = common.fmt

local USAGE = [==[
usage: lua5.4 bench/attention.lua [--preset h200|lavapipe] [--iters N] [--warmup N]
  [--samples N] [--baseline torch_attention.csv] [--csv FILE] [--quick]]==]
local known = {}
for name in ("preset iters warmup samples baseline csv quick"):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, { quick = true }, USAGE)

local lumus = common.load_lumus()
local ref = common.load_reference()
local dev_line, dev = common.device_line(lumus)

local PRESETS = {
  h200 = { B = 8, H = 12, hd = 64, lengths = { 1024, 4096 }, decode_tk = 1024, decode_h = 12, prefill_t = 512, iters = 20, warmup = 3, samples = 4 },
  lavapipe = { B = 1, H = 2, hd = 64, lengths = { 128 }, decode_tk = 512, decode_h = 2, prefill_t = 64, iters = 2, warmup = 1, samples = 2 },
}
local preset_name = opt.preset or (dev.kind == "cpu" and "lavapipe") or "h200"
local P = PRESETS[preset_name]
if not P then io.stderr:write("unknown preset ", preset_name, "\n", USAGE, "\n"); os.exit(2) end
-- --quick: fewer timed calls and no row-tile sweep (a short device budget)
local iters = common.int_opt(opt.iters, opt.quick and math.min(P.iters, 5) or P.iters)
local warmup = common.int_opt(opt.warmup, opt.quick and math.min(P.warmup, 2) or P.warmup)
local samples = common.int_opt(opt.samples, P.samples)
local TOL = { float32 = 2e-5, float16 = 3e-3 }

local baseline = {}
if opt.baseline then
  local header, rows = chart.read_csv(opt.baseline)
  if not header then
    io.stderr:write("bench: warning: cannot read ", opt.baseline, ": ", tostring(rows), "\n")
  else
    for _, r in ipairs(rows) do baseline[tostring(r.case) .. " " .. tostring(r.dtype)] = r end
  end
end

local cases = {}
for _, dtype in ipairs { "float32", "float16" } do
  for _, t in ipairs(P.lengths) do
    for _, causal in ipairs { false, true } do
      cases[#cases + 1] = { name = ("B%d H%d T%d hd%d%s"):format(P.B, P.H, t, P.hd, causal and " causal" or ""),
                            dtype = dtype, B = P.B, H = P.H, tq = t, tk = t, causal = causal }
    end
  end
  cases[#cases + 1] = { name = ("decode B1 H%d Tq1 Tk%d hd%d"):format(P.decode_h, P.decode_tk, P.hd), dtype = dtype,
                        B = 1, H = P.decode_h, tq = 1, tk = P.decode_tk, causal = false, decode = true }
  cases[#cases + 1] = { name = ("prefill B1 H%d T%d hd%d causal"):format(P.decode_h, P.prefill_t, P.hd), dtype = dtype,
                        B = 1, H = P.decode_h, tq = P.prefill_t, tk = P.prefill_t, causal = true }
end

-- float64 attention of row i (1-based) of head (b, h), from the tensors' own values.
local function check_rows(q, k, v, y, c, list)
  local worst, ok = 0, true
  for _, e in ipairs(list) do
    local b, h, i = e[1], e[2], e[3]
    local function head(t, rows) return t:narrow(1, b, 1):narrow(2, h, 1):narrow(3, rows[1], rows[2]):float():to_table()[1][1] end
    local qr = head(q, { i, 1 })[1]
    local kk, vv = head(k, { 1, c.tk }), head(v, { 1, c.tk })
    local got = head(y, { i, 1 })[1]
    local last = c.causal and (i + c.tk - c.tq) or c.tk
    local s, mx = {}, -math.huge
    for j = 1, last do
      local a = 0
      for d = 1, #qr do a = a + qr[d] * kk[j][d] end
      s[j] = a / math.sqrt(#qr)
      if s[j] > mx then mx = s[j] end
    end
    local l = 0
    for j = 1, last do s[j] = math.exp(s[j] - mx); l = l + s[j] end
    for d = 1, #qr do
      local acc = 0
      for j = 1, last do acc = acc + s[j] * vv[j][d] end
      local want = acc / l
      local err = math.abs(got[d] - want)
      if not (err <= TOL[c.dtype] * math.max(1, math.abs(want))) then ok = false end
      if err > worst or err ~= err then worst = err end
    end
  end
  return worst, ok
end

print(("# scaled_dot_product_attention (%s)"):format(dev_line))
print()

-- Correctness on this device first: a seeded sweep of shapes (odd lengths, Tq != Tk,
-- masks, broadcast k and v) in every dtype, each through the kernel the plan picks
-- (on the H200: float16 on tensor cores, the others the SIMT flash kernel), against
-- float64 attention of the same (rounded) inputs, within TOL * max(1, |want|).
do
  local CHECK_TOL = { float32 = 2e-5, float16 = 3e-3, bfloat16 = 2.4e-2 }
  local g = ref.rng(20261204)
  local function int(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end
  local function table_of(shape, f, d)
    d = d or 1
    local t = {}
    for i = 1, shape[d] do
      if d == #shape then t[i] = f() else t[i] = table_of(shape, f, d + 1) end
    end
    return t
  end
  local function worst_of(got, want)
    local worst, ok = 0, true
    local function walk(a, b, tol)
      if type(b) == "table" then
        for i = 1, #b do walk(a[i], b[i], tol) end
        return
      end
      local e = math.abs(a - b)
      if not (e <= tol * math.max(1, math.abs(b))) then ok = false end
      if e > worst or e ~= e then worst = e end
    end
    return walk, function() return worst, ok end
  end
  local failed, total = 0, 0
  local lines = {}
  for case = 1, 18 do
    local dtype = ({ "float16", "float32", "bfloat16" })[(case - 1) % 3 + 1]
    local hd = ({ 64, 16, 32, 128, 96, 80, 48 })[(case - 1) % 7 + 1]
    local B, H = int(1, 2), int(1, 3)
    local tq = case % 4 == 0 and int(1, 40) or int(60, 200)
    local tk = case % 3 == 0 and tq or int(50, 210)
    if B * H * tq * tk * hd > 6e6 then B, H = 1, 1 end
    local causal = case % 2 == 0
    local kvb = case % 5 == 0 and 1 or B
    local q = lumus.randn({ B, H, tq, hd }, { dtype = dtype })
    local k = lumus.randn({ kvb, H, tk, hd }, { dtype = dtype })
    local v = lumus.randn({ kvb, H, tk, hd }, { dtype = dtype })
    local opts, ropts, mdesc = { causal = causal }, { causal = causal }, "-"
    if case % 3 == 1 then
      local mt = table_of({ tq, tk }, function() return g.uniform() < 0.8 end)
      for j = 1, tk do mt[1][j] = false end   -- row 1 attends nothing: 0
      opts.mask, ropts.mask, mdesc = lumus.tensor(mt, { dtype = "bool" }), mt, "bool"
    elseif case % 3 == 2 then
      local mt = table_of({ 1, tq, tk }, function() return g.uniform() < 0.1 and -math.huge or g.normal() end)
      opts.mask, ropts.mask, mdesc = lumus.tensor(mt, { dtype = dtype }), opts.mask, "float"
      ropts.mask = opts.mask:float():to_table()
    end
    -- a kernel that fails on this device is reported, not fatal to the rest of the bench
    local okcall, y = pcall(lumus.scaled_dot_product_attention, q, k, v, opts)
    local worst, ok = 0 / 0, false
    if okcall then
      local want = ref.scaled_dot_product_attention(q:float():to_table(), k:float():to_table(), v:float():to_table(), ropts)
      local walk, result = worst_of()
      walk(y:float():to_table(), want, CHECK_TOL[dtype])
      worst, ok = result()
    else
      io.stderr:write("attention: case ", case, " failed: ", tostring(y), "\n")
      y = nil
    end
    local plan = lumus.tune.attention(B * H, tq, tk, hd)
    local kernel = (dtype == "float16" and plan.coop and hd % 16 == 0) and "coop" or plan.kernel
    total = total + 1
    if not ok then failed = failed + 1 end
    lines[#lines + 1] = ("| %dx%dx%dx%d, k/v B %d | %d | %s | %s | %s | %s | %s (%.2g) |"):format(B, H, tq, tk, kvb, hd,
      dtype, tostring(causal), mdesc, kernel, ok and "ok" or "FAIL", worst)
    q:free(); k:free(); v:free()
    if y then y:free() end
  end
  print(("Correctness sweep: %d of %d cases within tolerance (float32 2e-5, float16 3e-3, bfloat16 2.4e-2 of max(1, |want|))")
    :format(total - failed, total))
  print()
  print("| B x H x Tq x Tk | hd | dtype | causal | mask | kernel | check (worst abs error) |")
  print("|:---|---:|:---|:---|:---|:---|:---|")
  for _, l in ipairs(lines) do print(l) end
  print()
  lumus.synchronize()
  lumus.empty_cache()
end

print(("preset %s, %d timed calls (median), %d sampled rows checked per case"):format(preset_name, iters, samples))
print()
print("| case | dtype | plan (kernel block_q x block_k, lanes, splits) | lumus µs | lumus TFLOP/s | torch µs | torch TFLOP/s | lumus / torch | check |")
print("|:---|:---|:---|---:|---:|---:|---:|---:|:---|")
local csv_rows = {}
local gen = ref.rng(20261203)
for _, c in ipairs(cases) do
  local q = lumus.randn({ c.B, c.H, c.tq, P.hd }, { dtype = c.dtype })
  local k = lumus.randn({ c.B, c.H, c.tk, P.hd }, { dtype = c.dtype })
  local v = lumus.randn({ c.B, c.H, c.tk, P.hd }, { dtype = c.dtype })
  local out = lumus.zeros({ c.B, c.H, c.tq, P.hd }, { dtype = c.dtype })
  local o = { causal = c.causal, out = out }
  local plan = lumus.tune.attention(c.B * c.H, c.tq, c.tk, P.hd)
  local okt, sec = pcall(common.device_time, lumus, function() lumus.scaled_dot_product_attention(q, k, v, o) end, iters, warmup)
  if not okt then
    io.stderr:write("attention: ", c.name, " ", c.dtype, " failed: ", tostring(sec), "\n")
    sec = 0 / 0
  end
  local us = sec * 1e6
  local flops = 4 * c.B * c.H * c.tq * c.tk * P.hd / (c.causal and 2 or 1)
  local tflops = flops / sec / 1e12
  local list = {}
  for s = 1, samples do
    list[s] = { math.floor(gen.uniform() * c.B) + 1, math.floor(gen.uniform() * c.H) + 1,
                s == 1 and c.tq or math.floor(gen.uniform() * c.tq) + 1 }
  end
  local worst, ok = check_rows(q, k, v, out, c, list)
  local base = baseline[c.name .. " " .. c.dtype]
  local tus = base and tonumber(base.torch_us)
  local ttf = base and tonumber(base.torch_tflops)
  print(("| %s | %s | %s %dx%d, %d, %d | %s | %s | %s | %s | %s | %s (%.2g) |"):format(
    c.name, c.dtype, (c.dtype == "float16" and plan.coop) and "coop" or (plan.fixed_tile and "flash-fixed" or plan.kernel), plan.block_q, plan.block_k, plan.lanes, plan.splits, fmt(us), fmt(tflops), fmt(tus), fmt(ttf),
    tus and ("%.0f%%"):format(100 * tus / us) or "-", ok and "ok" or "FAIL", worst))
  csv_rows[#csv_rows + 1] = { c.name, c.dtype, ("%.3f"):format(us), ("%.3f"):format(tflops), tus or "", ttf or "", ok and "ok" or "FAIL" }
  q:free(); k:free(); v:free(); out:free()
  lumus.synchronize()
  lumus.empty_cache()
end
-- Kernel forms forced through lumus.tune.attention on the first shape, to A/B them in one
-- run: the flash kernel's tiles, each with and without the register prefetch of the next
-- K/V tile, and the tensor-core kernel (float16) with and without it, with one or two
-- 16-row strips per subgroup ("coop x1", "coop x2"), the scores in registers or through
-- shared memory ("registers", "shared"). Where a tile does
-- not fit shared memory the plan falls back to the automatic one, as the plan column shows;
-- "fixed" marks the variant with the tile compiled in (the automatic plan's, last rows).
print()
print("Form sweep (T = " .. P.lengths[1] .. "; flash_tile = {workgroup, lanes, rows_per_lane, keys_per_lane} and prefetch forced):")
print()
print("| dtype | causal | kernel | forced tile | prefetch | plan (workgroup, lanes, rows x keys, block_q x block_k, P apart) | shared KiB | lumus µs | lumus TFLOP/s | check (2 rows) |")
print("|:---|:---|:---|:---|:---|:---|---:|---:|---:|:---|")
local FLASH_TILES = { { 128, 8, 4, 4 }, { 128, 16, 4, 4 }, { 256, 16, 4, 4 }, { 128, 16, 8, 4 }, { 128, 8, 4, 8 },
                      { 64, 8, 4, 4 }, { 64, 16, 4, 4 }, { 256, 8, 4, 4 } }
for _, dtype in ipairs { "float32", "float16" } do
  local t = P.lengths[1]
  local q = lumus.randn({ P.B, P.H, t, P.hd }, { dtype = dtype })
  local k = lumus.randn({ P.B, P.H, t, P.hd }, { dtype = dtype })
  local v = lumus.randn({ P.B, P.H, t, P.hd }, { dtype = dtype })
  local out = lumus.zeros({ P.B, P.H, t, P.hd }, { dtype = dtype })
  local forms = {}
  for _, ft in ipairs(FLASH_TILES) do
    for _, pf in ipairs { true, false } do forms[#forms + 1] = { kernel = "flash", flash_tile = ft, prefetch = pf } end
  end
  for _, pf in ipairs { true, false } do forms[#forms + 1] = { kernel = "auto", prefetch = pf } end
  -- the tensor-core kernel with two 16-row strips per subgroup (128 query rows per K/V tile)
  if dtype == "float16" then
    for _, pf in ipairs { true, false } do forms[#forms + 1] = { kernel = "auto", prefetch = pf, coop_strips = 2 } end
    -- one strip with the scores through shared memory (the register form's predecessor)
    for _, pf in ipairs { true, false } do forms[#forms + 1] = { kernel = "auto", prefetch = pf, coop_scores = "shared" } end
    -- the register form with 8 subgroups (128 query rows per K/V tile)
    for _, pf in ipairs { true, false } do forms[#forms + 1] = { kernel = "auto", prefetch = pf, coop_rows = 128 } end
  end
  for _, causal in ipairs { false, true } do
    for _, f in ipairs(forms) do
      local plan = lumus.tune.attention(P.B * P.H, t, t, P.hd, f)
      local kname = (f.kernel == "auto" and dtype == "float16" and plan.coop) and ("coop x" .. plan.coop_strips .. " " .. plan.coop_scores .. " " .. plan.coop_rows)
        or (plan.fixed_tile and "flash-fixed" or plan.kernel)
      local okt, sec = pcall(common.device_time, lumus,
        function() lumus.scaled_dot_product_attention(q, k, v, { out = out, causal = causal }) end, iters, warmup)
      if not okt then
        io.stderr:write("attention: form ", kname, " failed: ", tostring(sec), "\n")
        sec = 0 / 0
      end
      local c = { tq = t, tk = t, causal = causal, dtype = dtype }
      local worst, ok = check_rows(q, k, v, out, c, { { P.B, P.H, t }, { 1, 1, math.floor(gen.uniform() * t) + 1 } })
      ok = ok and okt
      print(("| %s | %s | %s | %s | %s | %d, %d, %dx%d, %dx%d, %s | %.1f | %s | %s | %s (%.2g) |"):format(dtype, tostring(causal), kname,
        f.flash_tile and table.concat(f.flash_tile, ",") or "auto", tostring(plan.prefetch),
        plan.workgroup, plan.lanes, plan.rows_per_lane, plan.keys_per_lane, plan.block_q, plan.block_k,
        tostring(plan.p_apart), plan.shared_bytes / 1024, fmt(sec * 1e6),
        fmt(4 * P.B * P.H * t * t * P.hd / (causal and 2 or 1) / sec / 1e12), ok and "ok" or "FAIL", worst))
    end
  end
  lumus.tune.attention(1, 1, 1, 1, {})
  q:free(); k:free(); v:free(); out:free()
  lumus.synchronize()
  lumus.empty_cache()
end
-- Register tiles of the row-tile kernel forced through lumus.tune.attention on the first
-- shape (where a tile does not fit shared memory the plan falls back to the automatic one).
if not opt.quick then
  print()
  print("Row-tile kernel register tile sweep (kernel = rows, rows_per_lane x keys_per_lane forced; T = " .. P.lengths[1] .. ", not causal):")
  print()
  print("| dtype | forced | plan (block_q x block_k, P apart) | shared KiB | lumus µs | lumus TFLOP/s |")
  print("|:---|:---|:---|---:|---:|---:|")
  for _, dtype in ipairs { "float32", "float16" } do
    local t = P.lengths[1]
    local q = lumus.randn({ P.B, P.H, t, P.hd }, { dtype = dtype })
    local k = lumus.randn({ P.B, P.H, t, P.hd }, { dtype = dtype })
    local v = lumus.randn({ P.B, P.H, t, P.hd }, { dtype = dtype })
    local out = lumus.zeros({ P.B, P.H, t, P.hd }, { dtype = dtype })
    for _, rc in ipairs { { 4, 4 }, { 8, 2 }, { 4, 2 }, { 8, 1 }, { 2, 4 }, { 2, 8 }, { 8, 4 } } do
      local plan = lumus.tune.attention(P.B * P.H, t, t, P.hd, { kernel = "rows", rows_per_lane = rc[1], keys_per_lane = rc[2] })
      local sec = common.device_time(lumus, function() lumus.scaled_dot_product_attention(q, k, v, { out = out }) end, iters, warmup)
      print(("| %s | %dx%d | %dx%d, %s | %.1f | %s | %s |"):format(dtype, rc[1], rc[2], plan.block_q, plan.block_k,
        tostring(plan.p_apart), plan.shared_bytes / 1024, fmt(sec * 1e6), fmt(4 * P.B * P.H * t * t * P.hd / sec / 1e12)))
    end
    lumus.tune.attention(1, 1, 1, 1, {})
    q:free(); k:free(); v:free(); out:free()
    lumus.synchronize()
    lumus.empty_cache()
  end
end
if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("case,dtype,lumus_us,lumus_tflops,torch_us,torch_tflops,check\n")
  for _, r in ipairs(csv_rows) do f:write(table.concat(r, ","), "\n") end
  f:close()
end
