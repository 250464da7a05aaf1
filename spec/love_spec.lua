-- examples/love runs in LÖVE 11 (LuaJIT) headless under Xvfb for a few frames: it must
-- exit cleanly, write its screenshot, and its frames must be right: the pixels lumus
-- computed against the model's float64 reference (lumus.reference) quantized the same
-- way, the replayed graph bit-identical to an eager forward, and the screen showing
-- exactly the pixels lumus returned.
--
-- Needs `love`, `xvfb-run` (Debian: love xvfb xauth) and lumus built for LuaJIT
-- (`make LUA_VERSION=jit`, build-jit/lumus/core.so); pending without them.
-- LUMUS_LOVE_SCREENSHOT=FILE keeps the replayed run's screenshot (docs/love_example.png
-- is one: `LUMUS_LOVE_SCREENSHOT=docs/love_example.png busted spec/love_spec.lua`).
local ROOT = io.popen("pwd"):read("*l")
local ref = require "lumus.reference"
local pattern = dofile(ROOT .. "/examples/love/pattern.lua")

local JIT_MODULE = ROOT .. "/build-jit/lumus/core.so"
local FRAMES = 12
local STEP = 1 / 30 -- the example's time step in --frames runs

local function succeeded(...)
  local ok, _, code = ...
  if type(ok) == "number" then return ok == 0 end -- Lua 5.1: the status
  return ok == true and (code == nil or code == 0)
end

local function has_command(name)
  return succeeded(os.execute("command -v " .. name .. " >/dev/null 2>&1"))
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function missing()
  if not has_command("love") then return "love is not installed (Debian: love)" end
  if not has_command("xvfb-run") then return "xvfb-run is not installed (Debian: xvfb xauth)" end
  if not exists(JIT_MODULE) then return "lumus is not built for LuaJIT (make LUA_VERSION=jit)" end
  return nil
end

-- Runs the example headless; returns its output (stdout and stderr) and exit code.
local function run_love(args, lumus_root)
  local p = io.popen(("cd %q && unset LD_PRELOAD; LUMUS_ROOT=%q SDL_AUDIODRIVER=dummy timeout 300 "
    .. "xvfb-run -a -s '-screen 0 1024x768x24' love examples/love %s 2>&1; echo rc=$?")
    :format(ROOT, lumus_root or ROOT, args))
  local out = p:read("*a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

-- The check file: a few "key value" header lines, then sections "name length\n<bytes>\n".
local function read_check(path)
  local f = assert(io.open(path, "rb"))
  local check = { sections = {} }
  assert.are.equal("lumus-love-check 1", f:read("*l"))
  check.header = f:read("*l") .. " " .. f:read("*l")
  check.device = f:read("*l")
  while true do
    local line = f:read("*l")
    if line == "end" or line == nil then break end
    local name, n = line:match("^(%a+) (%d+)$")
    assert(name, "bad check file line: " .. line)
    check.sections[name] = f:read(tonumber(n))
    f:read("*l")
  end
  f:close()
  return check
end

local reference_cache = {}
local function reference_levels(seconds)
  local phase = pattern.phase(seconds)
  if not reference_cache[phase] then reference_cache[phase] = pattern.reference(ref, phase) end
  return reference_cache[phase]
end

-- Every channel within one 8-bit level of the float64 reference; a level off only where
-- float32 and float64 fall on either side of a rounding boundary (floor(255 c + 1/2)), a
-- few channels in the 49,152 (measured: 0 or 1); alpha 255.
local function assert_matches_reference(bytes, seconds, what)
  local levels = reference_levels(seconds)
  local n = pattern.WIDTH * pattern.HEIGHT
  assert.are.equal(4 * n, #bytes, what)
  local off, worst = 0, 0
  for p = 0, n - 1 do
    for c = 1, 3 do
      local d = math.abs(bytes:byte(4 * p + c) - levels[3 * p + c])
      if d > 0 then off = off + 1 end
      if d > worst then worst = d end
    end
    if bytes:byte(4 * p + 4) ~= 255 then error(what .. ": pixel " .. (p + 1) .. " has alpha " .. bytes:byte(4 * p + 4)) end
  end
  assert(worst <= 1, ("%s: a channel is %d levels from the reference"):format(what, worst))
  assert(off <= 0.001 * 3 * n, ("%s: %d channels a level off the reference"):format(what, off))
end

local function test_run(mode_args, mode)
  local why = missing()
  if why then
    pending(why)
    return
  end
  local shot, check_path = os.tmpname(), os.tmpname()
  local out, rc = run_love(("--frames %d --screenshot %s --check %s %s"):format(FRAMES, shot, check_path, mode_args))
  assert.are.equal(0, rc, out)
  -- a clean exit: nothing printed but the rc line (LÖVE prints errors and tracebacks)
  assert.are.equal("rc=0", (out:gsub("^%s+", ""):gsub("%s+$", "")), out)

  local f = assert(io.open(shot, "rb"))
  local png = f:read("*a")
  f:close()
  assert.are.equal("\137PNG\r\n\26\n", png:sub(1, 8))
  local keep = os.getenv("LUMUS_LOVE_SCREENSHOT") -- where to keep the replayed run's screenshot
  if keep and keep ~= "" and mode == "replay" then
    local k = assert(io.open(keep, "wb"))
    k:write(png)
    k:close()
  end

  local check = read_check(check_path)
  os.remove(shot)
  os.remove(check_path)
  assert.matches("mode " .. mode, check.header)
  assert.matches("frames " .. FRAMES, check.header)
  local s = check.sections
  assert_matches_reference(s.first, 0, "frame 1")
  assert_matches_reference(s.last, (FRAMES - 1) * STEP, "frame " .. FRAMES)
  assert.is_true(s.first ~= s.last, "the image must move between frames")
  assert.is_true(s.eager == s.last, "the last frame must equal an eager forward bit for bit")
  -- the screen shows exactly the pixels lumus returned (rgba8, integer scale, nearest)
  assert.is_true(s.screen == s.last, "the screenshot's pixels differ from the model's")
  print(("\n  love example (%s): %s; %s"):format(mode, check.device, check.header:match("host_ms.*")))
end

describe("examples/love (LÖVE, headless)", function()
  it("draws the model's frames, replayed from a capture, and exits cleanly", function()
    test_run("", "replay")
  end)

  it("draws the same with the eager path (--eager)", function()
    test_run("--eager", "eager")
  end)

  it("rejects an unknown argument with an error and exit code 1", function()
    local why = missing()
    if why then
      pending(why)
      return
    end
    local out, rc = run_love("--frames 2 --bogus")
    assert.are.equal(1, rc, out)
    assert.matches("unknown argument %-%-bogus", out)
  end)

  it("says where it looked when lumus cannot be loaded, with exit code 1", function()
    local why = missing()
    if why then
      pending(why)
      return
    end
    local out, rc = run_love("--frames 2", "/nonexistent")
    assert.are.equal(1, rc, out)
    assert.matches("cannot load lumus: set LUMUS_ROOT", out, 1, true)
    assert.matches("/nonexistent/lua/lumus/init.lua", out, 1, true)
  end)
end)
