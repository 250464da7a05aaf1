-- bench/love_pattern.lua: the frame cost of lumus in the LÖVE example (examples/love),
-- without LÖVE: the same model (examples/love/pattern.lua, an MLP 5-32-32-32-3 from each
-- pixel's coordinates and the time to its packed rgba8 colour) and the same per-frame work.
--
--   lua5.4 bench/love_pattern.lua [--frames 1000] [--warmup 100] [--sizes 128,512] [--csv out.csv]
--
-- For each image size (SxS pixels; 128 is the example's) and mode, --frames frames are
-- host-timed one by one (after --warmup untimed ones); median, p90, p99 and max of:
--   replay   time written into the captured input (two fills on views), g:replay(), to_bytes
--   eager    the same with the model's ops called every frame
-- and the device time of one forward (lumus.gpu_time of the eager forward, median of 20).
-- Each frame is split into its calls (the fills and the forward or g:replay(): host time)
-- and the read back (submit, wait for the device, copy), medians; "device (this mode)" is
-- lumus.gpu_time of the forward or of g:replay() (the replayed graph's device time).
-- Each replayed frame's bytes must equal the eager frame's of the same time (bit-identical).

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. here .. "/../examples/love/?.lua;" .. package.path
local common = require "common"
local pattern = require "pattern"

local USAGE = "usage: lua5.4 bench/love_pattern.lua [--frames 1000] [--warmup 100] [--sizes 128,512] [--csv file]"
local opt = common.parse_args(arg, { frames = true, warmup = true, sizes = true, csv = true }, nil, USAGE)
local FRAMES = common.int_opt(opt.frames, 1000)
local WARMUP = common.int_opt(opt.warmup, 100)
local SIZES = {}
for s in (opt.sizes or "128,512"):gmatch("%d+") do SIZES[#SIZES + 1] = tonumber(s) end

local lumus = common.load_lumus()
local clock = common.make_clock(lumus)

print("# LÖVE example's model: MLP 5-32-32-32-3 per pixel, packed to rgba8 on the device, read back")
print()
print((common.device_line(lumus)))
print(("frames %d (after %d warm-up), host-timed; times in microseconds"):format(FRAMES, WARMUP))
print()

local rows, csv = {}, {}
for _, size in ipairs(SIZES) do
  pattern.WIDTH, pattern.HEIGHT = size, size
  local params = pattern.device_layers(lumus)
  local input = lumus.tensor(pattern.inputs(pattern.phase(0)))
  local time_sin, time_cos = input:narrow(2, 4, 1), input:narrow(2, 5, 1)
  local function forward() return pattern.forward(lumus, params, input) end
  local graph, packed = lumus.capture(forward)

  local function frame(f, replay)
    local phase = pattern.phase(f / 30)
    time_sin:fill(math.sin(phase))
    time_cos:fill(math.cos(phase))
    local y
    if replay then
      graph:replay()
      y = packed
    else
      y = forward()
    end
    local t1 = clock()
    return y:to_bytes(), t1
  end

  local times = { replay = {}, eager = {} }
  local calls = { replay = {}, eager = {} }
  local same, checked = 0, 0
  for _, mode in ipairs({ "eager", "replay" }) do
    for f = 1, WARMUP do frame(f, mode == "replay") end
    for f = 1, FRAMES do
      local t0 = clock()
      local _, t1 = frame(f, mode == "replay")
      times[mode][f] = clock() - t0
      calls[mode][f] = t1 - t0
    end
  end
  for f = 1, 20 do
    checked = checked + 1
    if frame(f, true) == frame(f, false) then same = same + 1 end
  end
  local gpu = common.device_time(lumus, forward, 20, 3)
  local gpu_mode = { eager = gpu, replay = common.device_time(lumus, function() graph:replay() end, 20, 3) }
  for _, mode in ipairs({ "replay", "eager" }) do
    local ts = times[mode]
    local s = { common.median(ts) * 1e6, common.percentile(ts, 90) * 1e6, common.percentile(ts, 99) * 1e6,
                common.percentile(ts, 100) * 1e6 }
    local c = common.median(calls[mode]) * 1e6
    rows[#rows + 1] = { ("%dx%d"):format(size, size), mode, graph:stats().ops, common.fmt(s[1]), common.fmt(s[2]),
                        common.fmt(s[3]), common.fmt(s[4]), common.fmt(gpu * 1e6), common.fmt(c),
                        common.fmt(s[1] - c), common.fmt(gpu_mode[mode] * 1e6), ("%d/%d"):format(same, checked) }
    csv[#csv + 1] = ("%d,%s,%d,%.2f,%.2f,%.2f,%.2f,%.2f"):format(size, mode, graph:stats().ops, s[1], s[2], s[3], s[4],
      gpu * 1e6)
  end
  graph:free()
  if same ~= checked then
    io.stderr:write(("love_pattern: %dx%d: replayed frames differ from eager ones (%d of %d equal)\n")
      :format(size, size, same, checked))
    os.exit(1)
  end
end

print(common.markdown_table({ "pixels", "mode", "ops", "median", "p90", "p99", "max", "device (forward)",
  "calls (fills, forward / replay)", "read back", "device (this mode)", "replay == eager" },
  rows, { "l", "l" }))
if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("size,mode,ops,median_us,p90_us,p99_us,max_us,device_us\n", table.concat(csv, "\n"), "\n")
  f:close()
end
