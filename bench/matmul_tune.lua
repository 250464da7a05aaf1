-- bench/matmul_tune.lua: which float32 matmul configuration wins on which shapes.
--
-- Times every configuration in CONFIGS (a tile and thread order forced through
-- lumus.tune.matmul, a forced K split, or the automatic choice) on the headline shapes,
-- the training step's backward forms, GPT-2 prefill's linears and a seeded random sweep
-- of M, N, K in 1..8192, in one run, so that the choice rule in src/ops/matmul.c is set
-- from measurements on the same device. Forms: nn = matmul(a [M, K], b [K, N]); nt =
-- linear(x [M, K], w [N, K], bias) (b read transposed); tn = matmul(a [K, M], b [K, N],
-- {transpose_a = true}) (a weight gradient x^T dy). Each configuration's output is checked
-- on sampled entries against float64 sums (within 2 K 2^-24 sum|a||b|, the float32 bound).
-- Timing: per shape, rounds over all configurations (a round: each configuration's
-- median of --samples lumus.gpu_time calls), the best round kept, so a clock phase of
-- the device hits every configuration alike.
--
--   lua5.4 bench/matmul_tune.lua [--quick] [--sweep N] [--samples N] [--rounds N]
--       [--budget S] [--baseline torch.csv] [--csv out.csv] [--list-shapes]
--
-- --budget S stops starting new shapes after S seconds (the tables cover those done).
--
-- --list-shapes prints the nn-form shapes as MxKxN,... for bench/torch_matmul.py --shapes
-- (its matmul rows are the baseline for every form: cuBLAS runs transposed forms at the
-- same speed); --quick is a lavapipe smoke run (small shapes, two configurations).
-- LUMUS_PIPELINE_STATS=1 in the environment adds each pipeline's register count (NVIDIA)
-- on stderr.
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"

local USAGE = [==[
usage: lua5.4 bench/matmul_tune.lua [--quick] [--sweep N] [--samples N] [--rounds N]
  [--budget S] [--baseline torch.csv] [--csv FILE] [--list-shapes]]==]
local known = {}
for name in ("quick sweep samples rounds budget baseline csv list-shapes"):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, { quick = true, ["list-shapes"] = true }, USAGE)

local QUICK = opt.quick and true or false
local SEED = 20261204
local SWEEP = common.int_opt(opt.sweep, QUICK and 3 or 8)
local SWEEP_MAX = QUICK and 160 or 8192
local SAMPLES = common.int_opt(opt.samples, 3)
local ROUNDS = common.int_opt(opt.rounds, 1)
local BUDGET = tonumber(opt.budget) or 1e9

-- Shapes: { M, K, N, form, group }.
local shapes = {}
local function add(m, k, n, form, group) shapes[#shapes + 1] = { m, k, n, form = form, group = group } end
if QUICK then
  add(96, 64, 80, "nn", "headline"); add(96, 64, 80, "nt", "headline"); add(40, 96, 24, "tn", "backward")
  add(24, 40, 20, "nn", "hot")
  shapes[#shapes].batch = 3
else
  -- (8192 x 768 x 3072 and 8192 x 3072 x 768 in the nn form are also the MLP block's
  -- input gradients dy W.)
  add(4096, 4096, 4096, "nn", "headline")
  add(256, 4096, 256, "nn", "hot")
  shapes[#shapes].batch = 264
  for _, s in ipairs { { 8192, 768, 3072 }, { 8192, 3072, 768 } } do
    add(s[1], s[2], s[3], "nn", "headline"); add(s[1], s[2], s[3], "nt", "headline")
  end
  -- The MLP block's weight gradients at 8192 tokens: dy^T x (tn, K = tokens).
  add(3072, 8192, 768, "tn", "backward"); add(768, 8192, 3072, "tn", "backward")
  -- GPT-2 small prefill, 512 tokens: qkv, attention output, MLP down, LM head.
  for _, s in ipairs { { 512, 768, 2304 }, { 512, 768, 768 }, { 512, 3072, 768 }, { 512, 768, 50257 } } do
    add(s[1], s[2], s[3], "nt", "prefill")
  end
end
do
  -- 31-bit LCG; sizes log-uniform in 1..SWEEP_MAX; products over 2^33 multiply-adds skipped.
  local state = SEED
  local function nxt() state = (state * 1103515245 + 12345) % 2147483648; return state end
  local top = 0
  while 2 ^ (top + 1) <= SWEEP_MAX do top = top + 1 end
  local function size()
    local lo = math.floor(2 ^ (nxt() % (top + 1)))
    return math.min(SWEEP_MAX, lo + nxt() % lo)
  end
  local count = 0
  while count < SWEEP do
    local m, k, n = size(), size(), size()
    if m * k * n <= 2 ^ 33 then
      count = count + 1
      add(m, k, n, ({ "nn", "nt", "tn" })[count % 3 + 1], "sweep")
    end
  end
end

local function shape_name(s)
  return (s.batch and (s.batch .. "x") or "") .. ("%dx%dx%d"):format(s[1], s[2], s[3])
end

if opt.list_shapes then
  local seen, list = {}, {}
  for _, s in ipairs(shapes) do
    local nm = shape_name(s)
    if not s.batch and not seen[nm] then seen[nm] = true; list[#list + 1] = nm end
  end
  io.write(table.concat(list, ","), "\n")
  os.exit(0)
end

local lumus = common.load_lumus()
local dev_line, dev = common.device_line(lumus)
local clock = common.make_clock(lumus)

-- Configurations: name, and the lumus.tune.matmul options (nil: automatic choice).
local function tile(bm, bn, bk, tm, tn, warp, ahead)
  return { name = ("%dx%dx%d/%dx%d w%d%s"):format(bm, bn, bk, tm, tn, warp, ahead and " a2" or ""),
           tune = { bm = bm, bn = bn, bk = bk, tm = tm, tn = tn, warp = warp, ahead = ahead } }
end
local CONFIGS
if QUICK then
  CONFIGS = { { name = "auto" }, tile(64, 64, 16, 8, 8, 2), tile(32, 32, 8, 4, 4, 0), tile(64, 64, 8, 8, 8, 2, 2),
              { name = "split 2", tune = { split = 2, path = "tiled" } } }
else
  CONFIGS = {
    { name = "auto" },
    tile(128, 128, 8, 8, 8, 0), tile(128, 128, 16, 8, 8, 3), tile(128, 128, 16, 8, 8, 3, 2),
    tile(128, 64, 8, 8, 8, 0), tile(128, 64, 16, 8, 8, 0), tile(128, 64, 16, 8, 8, 3),
    tile(128, 64, 16, 8, 8, 3, 2), tile(64, 64, 16, 8, 8, 2), tile(128, 64, 16, 8, 4, 3), tile(64, 32, 16, 4, 4, 2),
    { name = "split 4", tune = { split = 4, path = "tiled" } },
  }
end

local baseline = {}
if opt.baseline then
  local header, rows = chart.read_csv(opt.baseline)
  if not header then
    io.stderr:write("matmul_tune: warning: cannot read ", opt.baseline, ": ", tostring(rows), "\n")
  else
    for _, r in ipairs(rows) do
      if r.op == "matmul" then baseline[tostring(r.shape)] = tonumber(r.torch_ms) end
    end
  end
end

local gen = common.normal_gen(SEED, nil)
local U = 2 ^ -24

-- A rows x cols float32 tensor of repeated random rows, and value(r, c) (0-based).
local function matrix(rows, cols)
  local bytes, block, k = common.matrix_bytes(gen, rows, cols, 65536)
  local t = lumus.from_bytes(bytes, { rows, cols })
  return t, function(r, c) return (string.unpack("<f", block, (((r % k) * cols) + c) * 4 + 1)) end
end

local function device_time(fn, n)
  local ts = {}
  for i = 1, n do ts[i] = lumus.gpu_time(fn) end
  return common.median(ts)
end

local csv_rows, results = {}, {}
local t_start = clock()
for si, s in ipairs(shapes) do
  if clock() - t_start > BUDGET then
    io.stderr:write(("matmul_tune: budget of %g s spent; %d of %d shapes done\n"):format(BUDGET, si - 1, #shapes))
    break
  end
  local M, K, N, form = s[1], s[2], s[3], s.form
  -- a as stored: [M, K], or [K, M] for tn; b: [K, N], or [N, K] for nt.
  local a, av = matrix(form == "tn" and K or M, form == "tn" and M or K)
  local b, bv = matrix(form == "nt" and N or K, form == "nt" and K or N)
  local bias = form == "nt" and lumus.zeros({ N }) or nil
  -- hot: a batch of BATCH products that all read the same a and b (stride-0 batch
  -- dimensions), so the operands stay in L2: the kernel's rate with memory out of the way.
  local batch = s.batch or 1
  local out = lumus.empty(batch > 1 and { batch, M, N } or { M, N })
  local ax, bx = a, b
  if batch > 1 then
    ax = a:reshape({ 1, M, K }):expand({ batch, M, K })
    bx = b:reshape({ 1, K, N }):expand({ batch, K, N })
  end
  local A = form == "tn" and function(i, q) return av(q, i) end or av
  local B = form == "nt" and function(q, j) return bv(j, q) end or bv
  local run
  if form == "nn" then run = function() lumus.matmul(ax, bx, { out = out }) end
  elseif form == "nt" then run = function() lumus.linear(a, b, bias, { out = out }) end
  else run = function() lumus.matmul(a, b, { transpose_a = true, out = out }) end end
  -- Sampled entries: corners and pseudo-random ones, each against its float64 sum
  -- (computed once per shape).
  local entries = { { 0, 0 }, { M - 1, N - 1 } }
  for e = 1, 2 do entries[#entries + 1] = { (e * 7919 + si) % M, (e * 104729 + 3 * si) % N } end
  for _, e in ipairs(entries) do
    local sum, scale = 0, 0
    for q = 0, K - 1 do
      local p = A(e[1], q) * B(q, e[2])
      sum, scale = sum + p, scale + math.abs(p)
    end
    e.sum, e.bound = sum, 2 * K * U * scale
  end
  local function check()
    for _, e in ipairs(entries) do
      local got = (string.unpack("<f", out:to_bytes(e[1] * N + e[2] + 1, 1)))
      if not (math.abs(got - e.sum) <= e.bound) then return false end
    end
    return true
  end
  local best, info = {}, {}
  local flops = 2 * M * N * K * batch
  for round = 1, ROUNDS do
    for ci, c in ipairs(CONFIGS) do
      local ok_cfg, cfg = pcall(lumus.tune.matmul, M, N, K, c.tune or {})
      if ok_cfg then
        if round == 1 then
          info[ci] = c.tune and c.tune.split and ("split " .. cfg.split)
            or (cfg.gemv and "gemv") or ("%dx%dx%d/%dx%d w%d%s%s"):format(cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn,
              cfg.warp or 0, cfg.ahead == 2 and " a2" or "", cfg.split > 1 and (" s" .. cfg.split) or "")
          lumus.fill(out, 0 / 0)
          run()
          lumus.synchronize()
          info[ci] = info[ci] .. (check() and "" or " FAIL")
          local t0 = clock()
          repeat run(); run(); lumus.synchronize() until clock() - t0 >= 0.02
        end
        local t = device_time(run, SAMPLES)
        if not best[ci] or t < best[ci] then best[ci] = t end
      elseif round == 1 then
        info[ci] = "n/a"
      end
    end
  end
  lumus.tune.matmul(1, 1, 1, {})
  -- The automatic choice again, 10 calls per timed sample: the device kept busy between
  -- calls (as PyTorch's baseline keeps it), to see whether single calls lose clock time.
  local x10 = device_time(function() for _ = 1, 10 do run() end end, SAMPLES) / 10
  local torch_ms = baseline[shape_name(s)]
  results[si] = { s = s, best = best, info = info, torch_ms = torch_ms, x10 = x10 }
  for ci, c in ipairs(CONFIGS) do
    if best[ci] then
      csv_rows[#csv_rows + 1] = { s.group, form, M, K, N, c.name, info[ci], ("%.4f"):format(best[ci] * 1e3),
                                  ("%.1f"):format(flops / best[ci] / 1e9), torch_ms and ("%.4f"):format(torch_ms) or "" }
    end
  end
  a:free(); b:free(); out:free()
  if bias then bias:free() end
  collectgarbage()
end
local elapsed = clock() - t_start

print(("# lumus matmul configurations — %s"):format(dev_line))
print(("%s; best of %d rounds of a median of %d lumus.gpu_time samples; sweep seed %d (%d shapes, sizes log-uniform in 1..%d); %.0f s."):format(
  os.date("!%Y-%m-%d %H:%M UTC"), ROUNDS, SAMPLES, SEED, SWEEP, SWEEP_MAX, elapsed))
print("Cells: device ms (x = PyTorch ms / ours, matmul nn form, TF32 off); * marks the fastest. "
      .. "FAIL = a sampled entry outside the float32 bound. auto x10: the automatic choice timed over "
      .. "10 calls back to back. hot: 264 products reading the same a and b (L2-resident).")
print()
local header = { "group", "form", "M x K x N", "torch ms", "auto x10" }
for _, c in ipairs(CONFIGS) do header[#header + 1] = c.name end
local rows = {}
local logsum, logn = {}, {}
for _, r in ipairs(results) do
  local s = r.s
  local row = { s.group, s.form, shape_name(s), r.torch_ms and ("%.3f"):format(r.torch_ms) or "-",
                ("%.3f"):format(r.x10 * 1e3) .. (r.torch_ms and (" (%.2fx)"):format(r.torch_ms / (r.x10 * 1e3)) or "") }
  local fastest
  for ci in ipairs(CONFIGS) do
    if r.best[ci] and (not fastest or r.best[ci] < r.best[fastest]) then fastest = ci end
  end
  for ci, c in ipairs(CONFIGS) do
    local t = r.best[ci]
    if t then
      local cell = ("%.3f"):format(t * 1e3)
      if r.torch_ms then cell = cell .. (" (%.2fx)"):format(r.torch_ms / (t * 1e3)) end
      if ci == fastest then cell = cell .. " *" end
      if r.info[ci]:find("FAIL") then cell = cell .. " FAIL" end
      row[#row + 1] = cell
      -- Geometric mean of time relative to the fastest configuration, per group.
      local key = s.group .. "|" .. c.name
      logsum[key] = (logsum[key] or 0) + math.log(t / r.best[fastest])
      logn[key] = (logn[key] or 0) + 1
    else
      row[#row + 1] = "n/a"
    end
  end
  rows[#rows + 1] = row
end
print(common.markdown_table(header, rows, { "l", "l", "l" }))
print()
print("## What each configuration ran (auto: the tile the automatic choice took)")
print()
local irows = {}
for _, r in ipairs(results) do
  local row = { r.s.group, r.s.form, shape_name(r.s) }
  for ci in ipairs(CONFIGS) do row[#row + 1] = r.info[ci] or "-" end
  irows[#irows + 1] = row
end
local iheader = { "group", "form", "M x K x N" }
for _, c in ipairs(CONFIGS) do iheader[#iheader + 1] = c.name end
print(common.markdown_table(iheader, irows, { "l", "l", "l" }))
print()
print("## Geometric mean of time / the fastest configuration's, per group (1.00 = always fastest)")
print()
local groups = { "headline", "hot", "backward", "prefill", "sweep" }
local grows = {}
for _, c in ipairs(CONFIGS) do
  local row = { c.name }
  for _, gname in ipairs(groups) do
    local key = gname .. "|" .. c.name
    row[#row + 1] = logn[key] and ("%.2f"):format(math.exp(logsum[key] / logn[key])) or "-"
  end
  grows[#grows + 1] = row
end
local gheader = { "configuration" }
for _, gname in ipairs(groups) do gheader[#gheader + 1] = gname end
print(common.markdown_table(gheader, grows, { "l" }))

if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("group,form,M,K,N,config,ran,ms,gflops,torch_ms\n")
  for _, r in ipairs(csv_rows) do
    local cells = {}
    for i, v in ipairs(r) do cells[i] = tostring(v) end
    f:write(table.concat(cells, ","), "\n")
  end
  f:close()
end
