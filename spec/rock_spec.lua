-- The released rock: `make rock` archives the checkout (git archive) and packs it with
-- the versioned rockspec (luarocks pack) into lumus-<version>-1.src.rock; `luarocks
-- install ./lumus-<version>-1.src.rock` builds that from scratch into a tree of its own
-- (no network: the only dependency is Lua itself), and a script run elsewhere with only
-- the tree's paths loads it and checks add and LayerNorm against the float64 reference.
-- The install compiles every shader: about a minute of two cores.
local shell = dofile("spec/support/shell.lua")
local installed = dofile("spec/support/installed.lua")
local ROOT, run = shell.ROOT, shell.run

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function trim(s) return (s:gsub("%s+$", "")) end

-- The versioned rockspec: exactly one lumus-<version>-<revision>.rockspec beside the scm one.
local function versioned_rockspec()
  local out = run(("cd %s && ls lumus-*.rockspec"):format(ROOT))
  local found = {}
  for name in out:gmatch("[^\n]+") do
    if name ~= "lumus-scm-1.rockspec" then found[#found + 1] = name end
  end
  return found
end

describe("the versioned rockspec", function()
  it("is the only one beside lumus-scm-1.rockspec, and its version is lumus.version", function()
    local found = versioned_rockspec()
    assert.are.equal(1, #found, "versioned rockspecs: " .. table.concat(found, ", "))
    local version, revision = found[1]:match("^lumus%-(%d+%.%d+%.%d+)%-(%d+)%.rockspec$")
    assert.is_truthy(version, found[1] .. " is not lumus-<x.y.z>-<revision>.rockspec")
    local text = read(ROOT .. "/" .. found[1])
    assert.matches('\nversion = "' .. installed.literal(version .. "-" .. revision) .. '"', text)
    assert.matches('url = "file://lumus%-' .. installed.literal(version) .. '%.tar%.gz"', text)
    assert.are.equal(version, require("lumus").version)
  end)

  it("and the scm rockspec allow Lua 5.1 to 5.4, say MIT like LICENSE, and name the build tools", function()
    local license = read(ROOT .. "/LICENSE")
    assert.matches("^MIT License\n", license)
    assert.matches("Copyright %(c%) 2026 the lumus authors", license)
    for _, name in ipairs({ versioned_rockspec()[1], "lumus-scm-1.rockspec" }) do
      local text = read(ROOT .. "/" .. name)
      assert.matches('"lua >= 5%.1, < 5%.5"', text, name)
      assert.matches('license = "MIT"', text, name)
      for _, tool in ipairs({ "glslc", "spirv%-val", "Vulkan", "jansson" }) do
        assert.matches(tool, text, name .. " does not name " .. tool)
      end
      local out, code = run(("cd %s && luarocks lint %s"):format(ROOT, name))
      assert.are.equal(0, code, out)
    end
  end)
end)

describe("make rock", function()
  it("packs a source rock that luarocks installs into a fresh tree, where scripts use it", function()
    local _, git = run(("git -C %s rev-parse --git-dir"):format(ROOT))
    if git ~= 0 then pending("not a git checkout: make dist archives a git commit") return end
    -- One build of the rock per CI run: the plain Lua 5.4 suite's (the rock installs for
    -- 5.4; the sanitizer and other-version suites would build the same thing again).
    if (os.getenv("LD_PRELOAD") or ""):find("asan", 1, true) then
      pending("the sanitizer run: the plain Lua 5.4 suite packs and installs the rock") return
    end
    if _VERSION ~= "Lua 5.4" then pending("the rock is packed and installed by the Lua 5.4 suite") return end
    local rockspec = versioned_rockspec()[1]
    local rock_version = rockspec:match("^lumus%-(.*)%.rockspec$")
    local version = rock_version:match("^(.*)%-%d+$")
    local tmp = trim(run("mktemp -d /tmp/lumus-rock.XXXXXX"))
    local dist, tree = tmp .. "/build/dist", tmp .. "/tree"

    -- The working tree's tracked files as they are now (git stash create: a commit of
    -- them that touches neither the index nor the stash; empty when nothing changed).
    local ref = trim(run(("git -C %s stash create"):format(ROOT)))
    if ref == "" then ref = "HEAD" end
    local out, code = run(("cd %s && make -s rock BUILD=%s/build DIST_REF=%s"):format(ROOT, tmp, ref))
    assert.are.equal(0, code, out)
    local rock = dist .. "/lumus-" .. rock_version .. ".src.rock"
    assert.is_true(exists(rock), rock .. " was not made:\n" .. out)

    -- The rock holds the committed rockspec and the tarball, which holds the sources.
    out = run(("unzip -Z1 %s | sort"):format(rock))
    assert.are.equal(("lumus-%s.rockspec\nlumus-%s.tar.gz\n"):format(rock_version, version), out)
    assert.are.equal(read(ROOT .. "/" .. rockspec), (run(("unzip -p %s %s"):format(rock, rockspec))))
    out = run(("tar tzf %s/lumus-%s.tar.gz"):format(dist, version))
    for _, f in ipairs({ "LICENSE", "Makefile", "src/lumus_core.c", "lua/lumus/init.lua", "meta/lumus.lua" }) do
      assert.matches("\nlumus%-" .. installed.literal(version) .. "/" .. installed.literal(f) .. "\n", "\n" .. out,
        f .. " is not in the tarball")
    end

    -- Installed from the rock alone, in another directory: a build from scratch.
    local elsewhere = tmp .. "/elsewhere"
    run("mkdir -p " .. elsewhere)
    run(("cp %s %s/"):format(rock, elsewhere))
    out, code = run(("cd %s && MAKEFLAGS=-j2 luarocks --lua-version=5.4 install ./lumus-%s.src.rock --tree %s")
      :format(elsewhere, rock_version, tree))
    assert.are.equal(0, code, out)
    assert.matches("lumus " .. installed.literal(rock_version) .. " is now installed", out)

    local luadir, libdir = tree .. "/share/lua/5.4", tree .. "/lib/lua/5.4"
    out, code = installed.run_script(elsewhere, luadir, libdir)
    assert.are.equal(0, code, out)
    assert.matches("core from " .. installed.literal(libdir .. "/lumus/core.so"), out)
    assert.matches("lua from " .. installed.literal(luadir .. "/lumus/init.lua"), out)
    assert.matches("version " .. installed.literal(version), out)

    -- The rock's directory has the Lua Language Server definitions and the host API.
    local rockdir = trim(run(("luarocks --lua-version=5.4 --tree %s show --rock-dir lumus"):format(tree)))
    for _, f in ipairs({ "meta/lumus.lua", "include/lumus.h", "static/liblumus.a" }) do
      assert.is_true(exists(rockdir .. "/" .. f), f .. " is not in the rock's directory " .. rockdir)
    end
    run("rm -rf " .. tmp)
  end)
end)
