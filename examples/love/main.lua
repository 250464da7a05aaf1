-- lumus in LÖVE: a small MLP (pattern.lua) computes every pixel of a 128 x 128 image from
-- its coordinates and the time, on the GPU through lumus, every frame; LÖVE draws it.
--
--   love examples/love                       -- from the repository root (LÖVE 11, LuaJIT)
--   love examples/love --eager               -- the eager path instead of a captured graph
--
-- lumus must be built for LuaJIT (`make LUA_VERSION=jit`, into build-jit/; see README.md
-- in this folder). It is found through the environment variable LUMUS_ROOT (a lumus
-- checkout, default: two folders above this one): its Lua files in $LUMUS_ROOT/lua and the
-- C module in $LUMUS_ROOT/build-jit (LUMUS_CPATH, a package.cpath pattern, overrides that).
--
-- Each frame writes the time into the captured input tensor, replays the captured forward
-- (one submit), and reads the packed 8-bit pixels back with to_bytes into an ImageData.
-- The bottom strip shows the frame cost of lumus (host time of the model call and the
-- readback), the time to hand the pixels to LÖVE, and the device time of one forward
-- (lumus.gpu_time of an eager forward, sampled every SAMPLE_EVERY frames).
--
-- Options for headless runs (spec/love_spec.lua):
--   --frames N          quit after N frames (exit code 0); the time advances 1/30 s a frame
--   --screenshot FILE   write a PNG of the window at the last frame
--   --check FILE        write what the spec checks: the model's pixels at the first and
--                       last frames, the screen's pixels at the last one, the eager result
--   --eager             run the model eagerly every frame instead of replaying a capture
local pattern = require "pattern"

local SCALE = 4                -- screen pixels per model pixel
local SAMPLE_EVERY = 60        -- frames between device-time samples
local FIXED_STEP = 1 / 30      -- seconds per frame in --frames runs
local WINDOW = 60              -- frames in the displayed medians

local options = { eager = false }
local lumus, params, input, time_sin, time_cos, graph, packed
local image_data, image, font, device_name
local frame, seconds = 0, 0
local host_ms, upload_ms, gpu_ms = {}, {}, nil
local first_bytes, last_bytes, done

local function fail(message)
  error("lumus LÖVE example: " .. message, 0)
end

local function parse(args)
  local i = 1
  while args[i] ~= nil do
    local a = args[i]
    if a == "--frames" then
      options.frames = tonumber(args[i + 1])
      if not options.frames or options.frames < 1 or options.frames ~= math.floor(options.frames) then
        fail("--frames takes a positive whole number, got " .. tostring(args[i + 1]))
      end
      i = i + 2
    elseif a == "--screenshot" or a == "--check" then
      if not args[i + 1] then fail(a .. " takes a file name") end
      options[a:sub(3)] = args[i + 1]
      i = i + 2
    elseif a == "--eager" then
      options.eager = true
      i = i + 1
    else
      fail("unknown argument " .. tostring(a) .. " (options: --frames N, --screenshot FILE, --check FILE, --eager)")
    end
  end
  if (options.screenshot or options.check) and not options.frames then
    fail("--screenshot and --check need --frames N (they are written at the last frame)")
  end
end

-- Where lumus is: $LUMUS_ROOT, else the checkout this example sits in.
local function add_lumus_paths()
  local root = os.getenv("LUMUS_ROOT")
  if not root or root == "" then root = love.filesystem.getSource() .. "/../.." end
  local cpath = os.getenv("LUMUS_CPATH")
  if not cpath or cpath == "" then cpath = root .. "/build-jit/?.so" end
  package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
  package.cpath = cpath .. ";" .. package.cpath
end

local function median(list)
  local sorted = {}
  for i = 1, #list do sorted[i] = list[i] end
  table.sort(sorted)
  return sorted[math.floor((#sorted + 1) / 2)]
end

local function push(list, v)
  list[#list + 1] = v
  if #list > WINDOW then table.remove(list, 1) end
end

local function forward()
  return pattern.forward(lumus, params, input)
end

function love.load(args)
  args = args or {}
  for i = 1, #args do
    if args[i] == "--frames" then
      -- headless: an error prints and exits with code 1 instead of showing LÖVE's error screen
      love.errorhandler = function(message)
        io.stderr:write(debug.traceback("Error: " .. tostring(message), 3), "\n")
        return nil
      end
    end
  end
  parse(args)
  add_lumus_paths()
  local ok, loaded = pcall(require, "lumus")
  if not ok then
    fail("cannot load lumus: set LUMUS_ROOT to a lumus checkout built with `make LUA_VERSION=jit`"
      .. " (or LUMUS_CPATH to its C module's package.cpath pattern)\n" .. tostring(loaded))
  end
  lumus = loaded

  params = pattern.device_layers(lumus)
  input = lumus.tensor(pattern.inputs(pattern.phase(0)))
  -- the time columns of the input: written each frame, read by every replay
  time_sin, time_cos = input:narrow(2, 4, 1), input:narrow(2, 5, 1)
  if not options.eager then graph, packed = lumus.capture(forward) end

  image_data = love.image.newImageData(pattern.WIDTH, pattern.HEIGHT, "rgba8")
  image = love.graphics.newImage(image_data)
  image:setFilter("nearest", "nearest")
  font = love.graphics.newFont(13)
  device_name = lumus.device().name
end

-- One frame of the model: the time in, the pixels out; returns the bytes.
local function run_model(phase)
  local t0 = lumus.clock()
  time_sin:fill(math.sin(phase))
  time_cos:fill(math.cos(phase))
  if graph then graph:replay() else packed = forward() end
  local bytes = packed:to_bytes()
  local t1 = lumus.clock()
  image_data = love.image.newImageData(pattern.WIDTH, pattern.HEIGHT, "rgba8", bytes)
  image:replacePixels(image_data)
  push(host_ms, (t1 - t0) * 1e3)
  push(upload_ms, (lumus.clock() - t1) * 1e3)
  return bytes
end

function love.update(dt)
  if done then
    love.event.quit(0)
    return
  end
  frame = frame + 1
  if options.frames then seconds = (frame - 1) * FIXED_STEP else seconds = seconds + dt end
  local bytes = run_model(pattern.phase(seconds))
  if frame == 1 then first_bytes = bytes end
  if frame == options.frames then last_bytes = bytes end
  if frame % SAMPLE_EVERY == 2 then
    -- not part of the frame cost above: an extra eager forward, timed on the device
    gpu_ms = lumus.gpu_time(forward) * 1e3
  end
  if options.frames and frame > options.frames + 10 then fail("the screenshot of the last frame never came") end
end

local function fmt(v) if v then return ("%.2f ms"):format(v) end return "-" end

-- The screen's pixel at the centre of each model pixel, as rgba8 bytes in the model's order.
local function screen_pixels(shot)
  local raw, width = shot:getString(), shot:getWidth()
  local out = {}
  for j = 0, pattern.HEIGHT - 1 do
    for i = 0, pattern.WIDTH - 1 do
      local x, y = i * SCALE + SCALE / 2, j * SCALE + SCALE / 2
      local at = 4 * (y * width + x) + 1
      out[#out + 1] = raw:sub(at, at + 3)
    end
  end
  return table.concat(out)
end

local function write_file(path, text)
  local f, err = io.open(path, "wb")
  if not f then fail("cannot write " .. tostring(err)) end
  f:write(text)
  f:close()
end

local function finish(shot)
  if options.screenshot then write_file(options.screenshot, shot:encode("png"):getString()) end
  if options.check then
    local eager = forward():to_bytes()
    local parts = {
      "lumus-love-check 1\n",
      ("width %d height %d frames %d step %.17g mode %s\n"):format(pattern.WIDTH, pattern.HEIGHT,
        frame, FIXED_STEP, graph and "replay" or "eager"),
      ("host_ms %.3f upload_ms %.3f gpu_ms %.3f\n"):format(median(host_ms), median(upload_ms), gpu_ms or -1),
      ("device %s\n"):format(device_name),
      ("first %d\n"):format(#first_bytes), first_bytes, "\n",
      ("last %d\n"):format(#last_bytes), last_bytes, "\n",
      ("eager %d\n"):format(#eager), eager, "\n",
    }
    local screen = screen_pixels(shot)
    parts[#parts + 1] = ("screen %d\n"):format(#screen)
    parts[#parts + 1] = screen
    parts[#parts + 1] = "\nend\n"
    write_file(options.check, table.concat(parts))
  end
  done = true
end

function love.draw()
  love.graphics.setColor(1, 1, 1, 1)
  love.graphics.draw(image, 0, 0, 0, SCALE, SCALE)
  local h = pattern.HEIGHT * SCALE
  love.graphics.setFont(font)
  love.graphics.print(("lumus on %s   frame %d   %d fps"):format(device_name, frame, love.timer.getFPS()), 8, h + 4)
  love.graphics.print(("lumus per frame: %s host (model + readback, median of %d)"):format(
    fmt(median(host_ms)), #host_ms), 8, h + 22)
  love.graphics.print(("device time of a forward: %s   pixels to LÖVE: %s"):format(fmt(gpu_ms),
    fmt(median(upload_ms))), 8, h + 40)
  love.graphics.print(("%d x %d pixels, MLP 5-32-32-32-3, %s"):format(pattern.WIDTH, pattern.HEIGHT,
    graph and "replaying a captured graph" or "eager (no capture)"), 8, h + 58)
  if options.frames and frame == options.frames and not done then
    love.graphics.captureScreenshot(finish)
  end
end

function love.keypressed(key)
  if key == "escape" then love.event.quit(0) end
end
