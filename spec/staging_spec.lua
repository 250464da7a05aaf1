-- Discrete GPUs move data through staging memory; lavapipe maps tensors directly. This
-- runs the tensor, async, hostile-input, interrupt and fuzz specs again in a child
-- busted with LUMUS_TEST_STAGING=1, so the staged transfer path is tested here as well.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
describe("the staging transfer path (LUMUS_TEST_STAGING=1)", function()
  it("is what LUMUS_TEST_STAGING=1 selects", function()
    local p = io.popen(("LUMUS_TEST_STAGING=1 LUA_PATH=%q LUA_CPATH=%q " .. LUA .. " -e %q 2>&1")
      :format(package.path, package.cpath, 'io.write(tostring(require("lumus").device().host_visible))'))
    local out = p:read("*a")
    p:close()
    assert.are.equal("false", out)
  end)

  it("passes the tensor, async, hostile, interrupt and fuzz specs", function()
    local cpath = package.cpath:match("^([^;]+)")          -- build/ or build-asan/
    local specs = "spec/tensor_spec.lua spec/async_spec.lua spec/hostile_spec.lua spec/interrupt_spec.lua spec/fuzz_spec.lua"
    local cmd = ("LUMUS_TEST_STAGING=1 LUMUS_FUZZ_CALLS=10000 busted --lua=" .. LUA .. " --cpath=%q -o TAP %s 2>&1; echo rc=$?")
      :format(cpath, specs)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    local ok = select(2, out:gsub("\nok ", ""))
    assert.is_nil(out:find("\nnot ok ", 1, true), out)
    assert.matches("rc=0%s*$", out)
    assert.is_true(ok >= 40, "only " .. ok .. " passed:\n" .. out)
  end)
end)
