-- Packaging: `luarocks make` installs the module, its Lua files, the host API
-- (lumus.h, liblumus.a) and the editor definitions (meta/) into a tree; scripts and a
-- host built against the installed header run from another directory; `luarocks remove`
-- takes it all away. Offline: the rockspec's make build fetches nothing. `make
-- install`/`make uninstall` likewise. The released source rock: spec/rock_spec.lua.
local shell = dofile("spec/support/shell.lua")
local ROOT, run = shell.ROOT, shell.run

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function tempdir()
  local out, code = run("mktemp -d /tmp/lumus-install.XXXXXX")
  assert(code == 0, out)
  return (out:gsub("%s+$", ""))
end

-- The check run against an installed copy (spec/support/installed.lua).
local installed = dofile("spec/support/installed.lua")
local run_script = installed.run_script

-- For the Lua under test (make test LUA_VERSION=...): LuaRocks builds it for that Lua.
describe("luarocks make into a tree of its own", function()
  it("installs module, Lua files and header; scripts and hosts use them; remove takes them away", function()
    local tree, elsewhere = tempdir(), tempdir()
    local lr = shell.luarocks(tree)
    local out, code = run(("cd %s && %s make %s"):format(ROOT, lr, shell.LUAROCKS_MAKE_VARS))
    assert.are.equal(0, code, out)
    assert.matches("lumus scm%-1 is now installed", out)

    local luadir, libdir = tree .. "/share/lua/" .. shell.LUA_ABI, tree .. "/lib/lua/" .. shell.LUA_ABI
    local rockdir = run(lr .. " show --rock-dir lumus"):gsub("%s+$", "")
    local files = {
      luadir .. "/lumus/init.lua", luadir .. "/lumus/reference.lua", libdir .. "/lumus/core.so",
      rockdir .. "/include/lumus.h", rockdir .. "/static/liblumus.a", rockdir .. "/meta/lumus.lua",
    }
    for _, f in ipairs(files) do assert.is_true(exists(f), f .. " was not installed") end

    -- A script run from another directory loads the installed copy, not the checkout's.
    out, code = run_script(elsewhere, luadir, libdir, shell.LUA)
    assert.are.equal(0, code, out)
    assert.matches("core from " .. libdir:gsub("%p", "%%%0") .. "/lumus/core.so", out)
    assert.matches("lua from " .. luadir:gsub("%p", "%%%0") .. "/lumus/init.lua", out)

    -- A host compiled against the installed header and static library.
    local host = elsewhere .. "/host"
    out, code = run(("cc -std=c11 -O1 -DLUMUS_STATIC -I%s -I%s/include %s/examples/host/host.c "
      .. "-o %s %s/static/liblumus.a %s -lvulkan -ljansson -lm -lpthread")
      :format(shell.LUA_INCDIR, rockdir, ROOT, host, rockdir, shell.LUA_LINK))
    assert.are.equal(0, code, out)
    out, code = run(("cd %s && LUA_PATH='/nonexistent/?.lua' LUA_CPATH='/nonexistent/?.so' ./host 5 %s/examples/host/frame.lua 16 64")
      :format(elsewhere, ROOT))
    assert.are.equal(0, code, out)
    assert.matches("PASS:", out)

    out, code = run(lr .. " remove lumus")
    assert.are.equal(0, code, out)
    for _, f in ipairs(files) do assert.is_false(exists(f), f .. " is still there after luarocks remove") end
    out = run(("cd %s && find . -path '*lumus*' -print"):format(tree))
    assert.are.equal("", out)
    run(("rm -rf %s %s"):format(tree, elsewhere))
  end)
end)

describe("make install", function()
  it("puts module, Lua files, header and static library under PREFIX; make uninstall removes them", function()
    local prefix, elsewhere = tempdir(), tempdir()
    local out, code = run(("cd %s && make -s install PREFIX=%s"):format(ROOT, prefix))
    assert.are.equal(0, code, out)
    local luadir, libdir = prefix .. "/share/lua/5.4", prefix .. "/lib/lua/5.4"
    local files = { luadir .. "/lumus/init.lua", libdir .. "/lumus/core.so", prefix .. "/include/lumus.h",
                    prefix .. "/lib/liblumus.a" }
    for _, f in ipairs(files) do assert.is_true(exists(f), f .. " was not installed") end
    out, code = run_script(elsewhere, luadir, libdir)
    assert.are.equal(0, code, out)
    out, code = run(("cd %s && make -s uninstall PREFIX=%s"):format(ROOT, prefix))
    assert.are.equal(0, code, out)
    for _, f in ipairs(files) do assert.is_false(exists(f), f .. " is still there after make uninstall") end
    run(("rm -rf %s %s"):format(prefix, elsewhere))
  end)
end)
