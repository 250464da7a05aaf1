-- bench/frame.lua: a model run inside a frame, eagerly and replayed from lumus.capture,
-- with the host cost of each step.
--
--   lua5.4 bench/frame.lua [--frames 2000] [--warmup 200] [--shapes 64x256x8,128x512x16]
--                          [--submit-idle 4,8] [--csv out.csv]
--
-- A frame of shape RxDxL: L x (nn.LayerNorm(D), nn.Linear(D, D), nn.GELU tanh) on an R x D
-- input, then nn.Linear(D, 1), then the R floats of the head read back (to_bytes). The
-- first shape is issue 21's frame (64 rows, 256 wide, 8 blocks); the second a wider and
-- deeper one. For each shape and mode, --frames frames are host-timed one by one (after
-- --warmup untimed ones) and median, p90, p99 and max reported:
--   eager    model:forward(x) and the read back, every frame
--   eager/k  the same with lumus.tune.stream{submit_idle = k} (for each k of --submit-idle,
--            default 4,8): the batch is submitted every k ops while the device is idle,
--            so the device runs the first ops while the host records the rest
--   replay   g:replay() of the same forward captured once, and the read back
-- Each mode runs with nn.Sequential's fusion on (the default: L x lumus.layer_norm_linear
-- with the GELU fused, then the head: L + 1 dispatches) and, as "unfused", off
-- (model:fusion(false): 3L + 1 dispatches).
-- Then the breakdown of one frame's host time (medians over the frames):
--   nn       model:forward (Lua modules + op calls that record), eager mode
--   ops      the same ops called directly into their outputs (lumus.layer_norm_forward ...
--            with out=), no nn modules: nn minus ops is the Lua module overhead
--   record   of ops: the C dispatch path (pipeline, hazards, commands; tune.host_profile);
--            ops minus record is argument checks and Lua/C call overhead
--   replay   g:replay() alone (the submit)
--   read     the read back: submit of pending work, wait for the device, copy
--   fused    the fused frame's ops called directly (layer_norm_linear x L, the head)
-- Then where each µs of the fused frame goes, eager and replayed (medians):
--   calls    host time of model:forward (eager) or of g:replay() (replayed)
--   read     the read back after them: submit, wait for the device, copy
--   device   lumus.gpu_time of model:forward or of g:replay() (median of 20)
--   idle read  the read back of a forward the device has finished (after a synchronize):
--            the read's own cost (on a discrete GPU a copy to host memory: a batch of its
--            own, its submit and wait)
--   host only  frame minus device: what the host adds to the device's time
-- and the host cost of each op kind, per call (median of 2000 calls into fixed outputs,
-- recorded without a wait): layer_norm_forward, linear, gelu, layer_norm_linear with
-- the GELU; and g:replay (each timed alone after a synchronize, --frames times) per op
-- of the graph.
-- Each frame's result is checked against the first eager frame (bit-identical).

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"

local USAGE = "usage: lua5.4 bench/frame.lua [--frames 2000] [--warmup 200] [--shapes 64x256x8,128x512x16]"
  .. " [--submit-idle 4,8] [--csv file]"
local opt = common.parse_args(arg, { frames = true, warmup = true, shapes = true, csv = true,
                                     ["submit-idle"] = true }, nil, USAGE)
local SUBMIT_IDLE = {}
for k in (opt.submit_idle or "4,8"):gmatch("%d+") do SUBMIT_IDLE[#SUBMIT_IDLE + 1] = tonumber(k) end
local FRAMES = common.int_opt(opt.frames, 2000)
local WARMUP = common.int_opt(opt.warmup, 200)
local SHAPES = opt.shapes or "64x256x8,128x512x16"

local lumus = common.load_lumus()
local clock = common.make_clock(lumus)
local nn = lumus.nn
local tune = lumus.tune

print("# frame: L x (LayerNorm, Linear DxD, GELU tanh) on R x D, Linear D->1, R floats read back")
print()
print((common.device_line(lumus)))
print(("frames %d (after %d warm-up), host-timed with lumus.clock; times in microseconds"):format(FRAMES, WARMUP))
-- The host's state, to judge host-side noise between runs (Linux; absent elsewhere).
local function first_line(path)
  local f = io.open(path)
  if not f then return nil end
  local l = f:read("*l")
  f:close()
  return l
end
local host = {}
local load = first_line("/proc/loadavg")
if load then host[#host + 1] = "load " .. load:match("^(%S+ %S+ %S+)") end
local gov = first_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
if gov then host[#host + 1] = "governor " .. gov end
local f = io.open("/proc/cpuinfo")
if f then
  for l in f:lines() do
    local model = l:match("^model name%s*:%s*(.+)$")
    if model then host[#host + 1] = model; break end
  end
  f:close()
end
if #host > 0 then print("host: " .. table.concat(host, "; ")) end
print()

local function stats(ts)
  return { median = common.median(ts) * 1e6, p90 = common.percentile(ts, 90) * 1e6,
           p99 = common.percentile(ts, 99) * 1e6, max = common.percentile(ts, 100) * 1e6 }
end

local function build(R, D, L)
  nn.manual_seed(21)
  local mods = {}
  for _ = 1, L do
    mods[#mods + 1] = nn.LayerNorm(D)
    mods[#mods + 1] = nn.Linear(D, D)
    mods[#mods + 1] = nn.GELU({ approximate = "tanh" })
  end
  mods[#mods + 1] = nn.Linear(D, 1)
  local model = nn.Sequential(table.unpack(mods))
  local gen = common.normal_gen(7)
  local x = lumus.from_bytes(common.random_bytes(gen, R * D, 1.0, 0.0), { R, D })
  return model, mods, x
end

-- Times `frames` calls of f one by one; returns the per-frame seconds.
local function time_frames(f, frames)
  local ts = {}
  for i = 1, frames do
    local t0 = clock()
    f()
    ts[i] = clock() - t0
  end
  return ts
end

local rows_out, csv = {}, {}
local breakdown_rows, per_op_rows, split_rows = {}, {}, {}

for shape in SHAPES:gmatch("[^,]+") do
  local R, D, L = shape:match("^(%d+)x(%d+)x(%d+)$")
  if not R then io.stderr:write("bench/frame.lua: bad shape '" .. shape .. "' (want RxDxL)\n"); os.exit(2) end
  R, D, L = tonumber(R), tonumber(D), tonumber(L)
  local model, mods, x = build(R, D, L)
  local nops = 3 * L + 1
  local head = mods[#mods]

  -- Eager: forward and read back, fused (the default) and unfused.
  local can_fuse = model.fusion ~= nil
  local function eager()
    local y = model:forward(x)
    return y:to_bytes()
  end
  local bad = 0
  local refs = {}
  local t_eager, t_eager_unfused
  for _, fused in ipairs(can_fuse and { false, true } or { true }) do
    if can_fuse then model:fusion(fused) end
    local ref = eager()
    refs[fused] = ref
    for _ = 1, WARMUP do eager() end
    local ts = time_frames(function() if eager() ~= ref then bad = bad + 1 end end, FRAMES)
    if fused then t_eager = ts else t_eager_unfused = ts end
  end
  local ref = refs[true]
  local t_idle = {}
  for _, k in ipairs(SUBMIT_IDLE) do
    tune.stream({ submit_idle = k })
    for _ = 1, WARMUP do eager() end
    t_idle[#t_idle + 1] = { "eager/" .. k, time_frames(function() if eager() ~= ref then bad = bad + 1 end end, FRAMES) }
    tune.stream({ submit_idle = 0 })
  end

  -- The fused eager frame split: forward's calls, the read back, the device's time.
  local t_calls_f, t_read_f, t_idle_read = {}, {}, {}
  for i = 1, FRAMES do
    local t0 = clock()
    local y = model:forward(x)
    local t1 = clock()
    y:to_bytes()
    t_calls_f[i], t_read_f[i] = t1 - t0, clock() - t1
  end
  for i = 1, FRAMES do
    model:forward(x)
    lumus.synchronize()
    local t0 = clock()
    head.output:to_bytes()
    t_idle_read[i] = clock() - t0
  end
  local dev_eager = common.device_time(lumus, function() model:forward(x) end, 20, 3)

  -- Breakdown of the eager frame: forward alone, then the read back.
  -- (unfused, so that nn minus ops below is the modules' own cost)
  if can_fuse then model:fusion(false) end
  local t_nn, t_read = {}, {}
  for i = 1, FRAMES do
    local t0 = clock()
    local y = model:forward(x)
    local t1 = clock()
    y:to_bytes()
    t_nn[i], t_read[i] = t1 - t0, clock() - t1
  end
  -- The same ops without nn modules, into the modules' outputs (made by the unfused calls).
  local direct = {}
  local cur = x
  for i = 1, #mods do
    local m = mods[i]
    local input = cur
    if m.eps then
      local opts = { out = m.output, mean = m.mean, invstd = m.invstd }
      direct[i] = function() return lumus.layer_norm_forward(input, m.weight, m.bias, m.eps, opts) end
    elseif m.in_features then
      local opts = { out = m.output }
      direct[i] = function() return lumus.linear(input, m.weight, m.bias, opts) end
    else
      local opts = { approximate = "tanh", out = m.output }
      direct[i] = function() return lumus.gelu(input, opts) end
    end
    cur = m.output
  end
  local function ops_forward() for i = 1, #direct do direct[i]() end end
  -- The fused frame's ops into fixed outputs: layer_norm_linear (GELU fused) per block.
  local fused_ops = {}
  if lumus.layer_norm_linear then
    local bufs = { lumus.empty({ R, D }), lumus.empty({ R, D }) }
    local cur = x
    for blk = 1, L do
      local ln, lin = mods[3 * blk - 2], mods[3 * blk - 1]
      local input, out = cur, bufs[(blk - 1) % 2 + 1]
      local o = { out = out, activation = "gelu_tanh", eps = ln.eps }
      fused_ops[#fused_ops + 1] = function()
        return lumus.layer_norm_linear(input, ln.weight, ln.bias, lin.weight, lin.bias, o)
      end
      cur = out
    end
    local hin, ho = cur, { out = head.output }
    fused_ops[#fused_ops + 1] = function() return lumus.linear(hin, head.weight, head.bias, ho) end
  end
  local t_fused_ops = {}
  if #fused_ops > 0 then
    for i = 1, FRAMES do
      local t0 = clock()
      for j = 1, #fused_ops do fused_ops[j]() end
      t_fused_ops[i] = clock() - t0
      head.output:to_bytes()
    end
  else
    t_fused_ops[1] = 0 / 0
  end
  local t_ops, t_rec = {}, {}
  for i = 1, FRAMES do
    tune.host_profile({ on = true })
    local t0 = clock()
    ops_forward()
    t_ops[i] = clock() - t0
    t_rec[i] = tune.host_profile({}).record
    head.output:to_bytes()
  end

  if can_fuse then model:fusion(true) end
  -- Replay (a failure here is reported, and the eager results still printed).
  local t_replay, t_sub, t_rread, t_replay_unfused = { 0 }, { 0 }, { 0 }, nil
  local dev_replay = 0 / 0
  local replay_ok, replay_err = pcall(function()
    if can_fuse then
      model:fusion(false)
      local gu = lumus.capture(function() return model:forward(x) end)
      local yu = model.output
      local function replay_u() gu:replay(); return yu:to_bytes() end
      for _ = 1, WARMUP do replay_u() end
      t_replay_unfused = time_frames(function() if replay_u() ~= refs[false] then bad = bad + 1 end end, FRAMES)
      gu:free()
      model:fusion(true)
    end
    local g = lumus.capture(function() return model:forward(x) end)
    local y = model.output
    local function replay() g:replay(); return y:to_bytes() end
    for _ = 1, WARMUP do replay() end
    t_replay = time_frames(function() if replay() ~= ref then bad = bad + 1 end end, FRAMES)
    for i = 1, FRAMES do
      local t0 = clock()
      g:replay()
      local t1 = clock()
      y:to_bytes()
      t_sub[i], t_rread[i] = t1 - t0, clock() - t1
    end
    dev_replay = common.device_time(lumus, function() g:replay() end, 20, 3)
    g:free()
  end)
  if not replay_ok then print(("ERROR: %s: replay: %s"):format(shape, tostring(replay_err))) end

  -- Per-op host cost: 2000 calls each into fixed outputs, no wait between them.
  local function per_call(f, n)
    f()
    lumus.synchronize()
    local ts = {}
    for i = 1, n do
      local t0 = clock()
      f()
      ts[i] = clock() - t0
    end
    lumus.synchronize()
    return common.median(ts) * 1e6
  end
  local kinds = { { "layer_norm_forward", direct[1] }, { "linear", direct[2] }, { "gelu", direct[3] } }
  if fused_ops[1] then kinds[#kinds + 1] = { "layer_norm_linear (gelu_tanh)", fused_ops[1] } end
  for _, k in ipairs(kinds) do
    tune.host_profile({ on = true })
    local us = per_call(k[2], 2000)
    local p = tune.host_profile({})
    per_op_rows[#per_op_rows + 1] = { shape, k[1], common.fmt(us, 3), common.fmt(p.record / p.records * 1e6, 3) }
  end
  local rep_us = 0 / 0
  if replay_ok then
    local g1 = lumus.capture(function() return model:forward(x) end)
    -- Each replay timed alone (after a synchronize): its submit, not the device's pace.
    local ts = {}
    for i = 1, FRAMES do
      lumus.synchronize()
      local t0 = clock()
      g1:replay()
      ts[i] = clock() - t0
    end
    lumus.synchronize()
    rep_us = common.median(ts) * 1e6
    g1:free()
  end
  local graph_ops = can_fuse and L + 1 or nops
  per_op_rows[#per_op_rows + 1] = { shape, ("g:replay (%d ops)"):format(graph_ops), common.fmt(rep_us, 3),
                                    common.fmt(rep_us / graph_ops, 3) .. " per op" }

  if bad > 0 then print(("WARNING: %s: %d frames differ from the first eager frame"):format(shape, bad)) end
  local fused_n = can_fuse and L + 1 or nops
  local modes = { { "eager", t_eager, fused_n } }
  if t_eager_unfused then modes[#modes + 1] = { "eager unfused", t_eager_unfused, nops } end
  for _, m in ipairs(t_idle) do modes[#modes + 1] = { m[1], m[2], fused_n } end
  if replay_ok then
    modes[#modes + 1] = { "replay", t_replay, fused_n }
    if t_replay_unfused then modes[#modes + 1] = { "replay unfused", t_replay_unfused, nops } end
  end
  for _, m in ipairs(modes) do
    local s = stats(m[2])
    rows_out[#rows_out + 1] = { shape, m[1], m[3], common.fmt(s.median, 1), common.fmt(s.p90, 1),
                                common.fmt(s.p99, 1), common.fmt(s.max, 1), common.fmt(s.p99 / s.median, 2) }
    csv[#csv + 1] = ("%s,%s,%d,%.2f,%.2f,%.2f,%.2f"):format(shape, m[1], m[3], s.median, s.p90, s.p99, s.max)
  end
  local med = function(t) return common.median(t) * 1e6 end
  local idle_read = med(t_idle_read)
  split_rows[#split_rows + 1] = { shape, "eager", common.fmt(med(t_eager), 1), common.fmt(med(t_calls_f), 1),
    common.fmt(med(t_read_f), 1), common.fmt(dev_eager * 1e6, 1), common.fmt(idle_read, 1),
    common.fmt(med(t_eager) - dev_eager * 1e6, 1) }
  if replay_ok then
    split_rows[#split_rows + 1] = { shape, "replay", common.fmt(med(t_replay), 1), common.fmt(med(t_sub), 1),
      common.fmt(med(t_rread), 1), common.fmt(dev_replay * 1e6, 1), common.fmt(idle_read, 1),
      common.fmt(med(t_replay) - dev_replay * 1e6, 1) }
  end
  breakdown_rows[#breakdown_rows + 1] = { shape, common.fmt(med(t_nn), 1), common.fmt(med(t_ops), 1),
    common.fmt(med(t_rec), 1), common.fmt(med(t_read), 1), common.fmt(med(t_sub), 1), common.fmt(med(t_rread), 1),
    common.fmt(med(t_nn) / nops, 2), common.fmt(med(t_ops) / nops, 2), common.fmt(med(t_rec) / nops, 2),
    common.fmt(med(t_fused_ops), 1) }
end

print("## Frame time (host, per frame)")
print()
print(common.markdown_table({ "frame RxDxL", "mode", "ops", "median", "p90", "p99", "max", "p99/median" }, rows_out))
print()
print("## Where each µs of the fused frame goes (medians)")
print()
print(common.markdown_table({ "frame", "mode", "frame", "calls (forward / g:replay)", "read back", "device (gpu_time)",
  "idle read back", "host only (frame - device)" }, split_rows))
print()
print("## Where an eager frame's host time goes (medians)")
print()
print(common.markdown_table({ "frame", "nn forward", "ops direct", "of which record", "read back",
  "replay submit", "replay read back", "nn/op", "ops/op", "record/op", "fused ops direct" }, breakdown_rows))
print()
print("## Host cost per op call (median of 2000, into fixed outputs, no wait)")
print()
print(common.markdown_table({ "frame", "op", "host per call (median)", "of which record (mean)" }, per_op_rows))

if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("shape,mode,ops,median_us,p90_us,p99_us,max_us\n", table.concat(csv, "\n"), "\n")
  f:close()
end
