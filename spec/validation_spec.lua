-- The specs' main paths under the Khronos validation layer print no message.
local lumus = require "lumus"

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
      print("messages", lumus._validation_messages())
    ]]
    local cmd = ("LUMUS_VALIDATION=1 LUA_PATH=%q LUA_CPATH=%q lua5.4 -e %q 2>&1")
      :format(package.path, package.cpath, script)
    local p = io.popen(cmd)
    local out = p:read("a")
    local ok = p:close()
    if out:find("VK_LAYER_KHRONOS_validation is not installed", 1, true) then
      pending("validation layer not installed (vulkan-validationlayers)")
      return
    end
    assert.is_true(ok, out)
    assert.matches("messages\t0", out)
    assert.is_nil(out:find("validation:", 1, true), out)
  end)

  it("with no usable device, names the CPU driver package", function()
    local cmd = ("LUMUS_DEVICE=no-such-device LUA_PATH=%q LUA_CPATH=%q lua5.4 -e %q 2>&1")
      :format(package.path, package.cpath, 'print(pcall(require("lumus").device))')
    local p = io.popen(cmd)
    local out = p:read("a")
    p:close()
    assert.matches("LUMUS_DEVICE=no%-such%-device matches none", out)
    local cmd2 = ("VK_DRIVER_FILES=/nonexistent.json VK_ICD_FILENAMES=/nonexistent.json LUA_PATH=%q LUA_CPATH=%q lua5.4 -e %q 2>&1")
      :format(package.path, package.cpath, 'print(pcall(require("lumus").device))')
    p = io.popen(cmd2)
    out = p:read("a")
    p:close()
    assert.matches("no Vulkan device found", out)
    assert.matches("mesa%-vulkan%-drivers", out)
  end)

  it("selects a device by index with LUMUS_DEVICE", function()
    local cmd = ("LUMUS_DEVICE=0 LUA_PATH=%q LUA_CPATH=%q lua5.4 -e %q 2>&1")
      :format(package.path, package.cpath, 'io.write(require("lumus").device().index)')
    local p = io.popen(cmd)
    local out = p:read("a")
    p:close()
    assert.are.equal("0", out)
    assert.is_string(lumus.device().name)
  end)
end)
