-- The build: lumus/core.so exports only the public API, and a plain build checks its
-- tools and fails naming what is missing instead of installing anything.
local shell = dofile("spec/support/shell.lua")
local ROOT, BUILD, run = shell.ROOT, shell.BUILD, shell.run

describe("lumus/core.so", function()
  it("exports only luaopen_* and lumus_* functions", function()
    local _, has_nm = run("command -v nm")
    if has_nm ~= 0 then pending("nm is not installed (Debian package binutils)") return end
    local out, code = run(("nm -D --defined-only %s/%s/lumus/core.so"):format(ROOT, BUILD))
    assert.are.equal(0, code, out)
    local names = {}
    for name in out:gmatch("%x+ T ([%w_]+)") do
      names[#names + 1] = name
      assert(name:match("^luaopen_") or name:match("^lumus_"), "exported: " .. name)
    end
    local set = {}
    for _, n in ipairs(names) do set[n] = true end
    for _, want in ipairs { "luaopen_lumus_core", "lumus_attach_vulkan", "lumus_push_buffer", "lumus_push_tensor",
                            "lumus_to_tensor", "lumus_check_tensor", "lumus_sync_point", "lumus_tensor_sync_point",
                            "lumus_wait_semaphore", "lumus_context_count" } do
      assert(set[want], want .. " is not exported:\n" .. out)
    end
    assert.is_nil(out:find(" [TDB] lm_"), "internal symbols are exported:\n" .. out)
  end)
end)

describe("a plain build", function()
  -- A make run into an empty build directory with one tool replaced by a missing one.
  local function build_with(var, value)
    local dir = os.tmpname()
    os.remove(dir)
    local out, code = run(("make -C %s --no-print-directory BUILD=%s %s=%s all"):format(ROOT, dir, var, value))
    run("rm -rf " .. dir)
    return out, code
  end

  it("fails naming a missing tool and its Debian package, installing nothing", function()
    for _, c in ipairs {
      { "GLSLC", "/nonexistent/glslc", "/nonexistent/glslc %(Debian package glslc%)" },
      { "SPIRV_VAL", "/nonexistent/spirv-val", "/nonexistent/spirv%-val %(Debian package spirv%-tools%)" },
      { "LUA_INCDIR", "/nonexistent/include", "/nonexistent/include/lua%.h %(Debian package lib[%w.%-]+%-dev%)" },   -- the LUA_VERSION's
    } do
      local out, code = build_with(c[1], c[2])
      assert.are_not.equal(0, code, out)
      assert.matches("missing to build lumus", out)
      assert.matches(c[3], out)
      assert.matches("make deps", out)
      assert.is_nil(out:find("apt-get", 1, true), out)
      assert.is_nil(out:find("glslc .*%.comp"), "it compiled shaders anyway:\n" .. out)
    end
  end)
end)
