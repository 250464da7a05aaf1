-- The specs' main paths under the Khronos validation layer print no message; device
-- selection through the environment.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local lumus = require "lumus"

-- Runs a Lua snippet in a fresh lua5.4 with extra environment settings; returns its
-- output (stdout and stderr) and whether it exited successfully.
local function run_lua(env, code)
  local cmd = ("%s LUA_PATH=%q LUA_CPATH=%q " .. LUA .. " -e %q 2>&1; echo rc=$?"):format(env, package.path, package.cpath, code)
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()   -- (5.1 and LuaJIT give no exit status here: the shell echoes it)
  local ok = out:match("rc=(%d+)%s*$") == "0"
  out = out:gsub("rc=%d+%s*$", "")
  return out, ok
end

describe("LUMUS_VALIDATION=1", function()
  it("runs tensors, transfers and every layer_norm form with no validation message", function()
    local script = [[
      local lumus = require "lumus"
      assert(lumus.device().validation, "validation layer not enabled")
      local ref = require "lumus.reference"
      for _, d in ipairs { 3, 64, 768, 1000, 70000 } do
        local x = lumus.full({ 3, d }, 1)
        local y, m, r = lumus.layer_norm_forward(x, lumus.ones({ d }), lumus.zeros({ d }))
        y:to_table(); m:to_bytes()
        lumus.copy(x, { out = y })
      end
      local t = lumus.tensor({ { 1, 2 }, { 3, 4 } })
      print(lumus.gpu_time(function() lumus.layer_norm_forward(t) end) >= 0)
      t:free()
      print("messages", lumus.tune.validation_messages())
    ]]
    local out, ok = run_lua("LUMUS_VALIDATION=1", script)
    if out:find("VK_LAYER_KHRONOS_validation is not installed", 1, true) then
      pending("validation layer not installed (vulkan-validationlayers)")
      return
    end
    assert.is_true(ok, out)
    assert.matches("messages\t0", out)
    assert.is_nil(out:find("validation:", 1, true), out)
  end)

  it("with no usable device, names the CPU driver package", function()
    local probe = 'print(pcall(require("lumus").device))'
    local out = run_lua("LUMUS_DEVICE=no-such-device", probe)
    assert.matches("LUMUS_DEVICE=no%-such%-device matches none", out)
    out = run_lua("VK_DRIVER_FILES=/nonexistent.json VK_ICD_FILENAMES=/nonexistent.json", probe)
    assert.matches("no Vulkan device found", out)
    assert.matches("mesa%-vulkan%-drivers", out)
  end)

  it("selects a device by index with LUMUS_DEVICE", function()
    local out = run_lua("LUMUS_DEVICE=0", 'io.write(require("lumus").device().index)')
    assert.are.equal("0", out)
    assert.is_string(lumus.device().name)
  end)
end)
