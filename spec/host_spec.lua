-- Embedding lumus in a C host (src/lumus.h): the example host of examples/host/, and
-- the C tests of tests/ (a host's own Vulkan device and buffers; many lua_States on
-- many threads). The binaries are built by `make examples`, which `make test` runs first.
local shell = dofile("spec/support/shell.lua")
local ROOT, run = shell.ROOT, shell.run

-- rel: a path under the build directory of the Lua under test.
local function binary(rel)
  local path = ROOT .. "/" .. shell.BUILD .. "/" .. rel
  local f = io.open(path, "rb")
  assert(f, path .. " is missing: run `make examples` first")
  f:close()
  return path
end

local function has_validation_layer()
  local out = run("ls /usr/share/vulkan/explicit_layer.d/ /etc/vulkan/explicit_layer.d/ 2>/dev/null")
  return out:find("khronos_validation", 1, true) ~= nil
end

-- The three frame-time figures the host prints, as numbers.
local function frame_times(out)
  local med, p90, max = out:match("frame time ms: median ([%d.]+) p90 ([%d.]+) max ([%d.]+)")
  assert(med, "no frame time line in:\n" .. out)
  return tonumber(med), tonumber(p90), tonumber(max)
end

describe("the example host (examples/host)", function()
  local script = ROOT .. "/examples/host/frame.lua"

  it("linked statically, runs the frame script from anywhere with no module path", function()
    local bin = binary("examples/host_static")
    -- From /tmp, with search paths that lead nowhere: only lumus_open's copy can load.
    local out, code = run(("cd /tmp && LUA_PATH='/nonexistent/?.lua' LUA_CPATH='/nonexistent/?.so' %s 30 %s 64 256")
      :format(bin, script))
    assert.are.equal(0, code, out)
    assert.matches("lumus linked statically", out)
    assert.matches("frames: 30 of layer_norm_forward on 64x256", out)
    local med, p90, max = frame_times(out)
    assert.is_true(med > 0 and med <= p90 and p90 <= max, out)
    assert.matches("PASS: last frame's y against the float64 reference", out)
  end)

  it("loading the module with plain require, finds it through LUA_PATH/LUA_CPATH", function()
    local bin = binary("examples/host_require")
    local env = ("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua' LUA_CPATH='%s/%s/?.so'"):format(ROOT, ROOT, ROOT, shell.BUILD)
    local out, code = run(("cd /tmp && %s %s 20 %s 32 100"):format(env, bin, script))
    assert.are.equal(0, code, out)
    assert.matches("loaded with require", out)
    assert.matches("frames: 20 of layer_norm_forward on 32x100", out)
    frame_times(out)
    assert.matches("PASS:", out)
    -- and without a path to the module, says so and fails
    out, code = run(("cd /tmp && LUA_PATH='/nonexistent/?.lua' LUA_CPATH='/nonexistent/?.so' %s 1 %s"):format(bin, script))
    assert.are.equal(1, code, out)
    assert.matches("module 'lumus' not found", out)
  end)

  it("exits with status 1 when the script's check fails", function()
    local bin = binary("examples/host_static")
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write([[
      local lumus = require "lumus"
      local t = lumus.zeros({ 4 })
      return { frame = function(i) lumus.fill(t, i) end,
               check = function() return t:to_table()[1] == -1, "t[1] is " .. t:to_table()[1] end }
    ]])
    f:close()
    local out, code = run(("%s 3 %s"):format(bin, path))
    os.remove(path)
    assert.are.equal(1, code, out)
    assert.matches("FAIL: t%[1%] is 3", out)
  end)
end)

describe("a host's own Vulkan device (tests/wrap.c)", function()
  local function check(out, code)
    assert.are.equal(0, code, out)
    assert.matches("runs on the host's device", out)
    assert.matches("37x200 layer_norm_forward on host buffers", out)
    assert.matches("5x1001 layer_norm_forward on host buffers", out)
    assert.matches("lumus_wait_semaphore holds lumus's submit", out)
    assert.matches("PASS: an out that partly overlaps an input through wrappers of one buffer is refused", out)
    assert.matches("wrap: all passed", out)
    assert.is_nil(out:find("FAIL", 1, true), out)
  end

  it("attaches it, wraps its buffers, runs layer_norm_forward and syncs, matching float64 from C", function()
    check(run(binary("tests/wrap")))
  end)

  it("does all that with no message from the validation layer on the host's instance", function()
    if not has_validation_layer() then pending("validation layer not installed (vulkan-validationlayers)") return end
    local out, code = run("LUMUS_VALIDATION=1 " .. binary("tests/wrap"))
    check(out, code)
    assert.matches("validation layer reported nothing", out)
  end)
end)

describe("many lua_States on many threads (tests/threads.c)", function()
  local function check(out, code)
    assert.are.equal(0, code, out)
    for _, mode in ipairs { "own", "shared", "locked" } do
      assert.matches("PASS: " .. mode .. ": 2 threads x 40 layer_norm_forward calls", out)
    end
    assert.matches("threads: all passed", out)
  end

  it("give correct results with their own devices, one shared device, and the host's queue lock", function()
    check(run(binary("tests/threads")))
  end)

  it("use the shared queue with no threading message from the validation layer", function()
    if not has_validation_layer() then pending("validation layer not installed (vulkan-validationlayers)") return end
    check(run("LUMUS_VALIDATION=1 " .. binary("tests/threads")))
  end)
end)
