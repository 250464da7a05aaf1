-- Shell helpers for the specs that build and start other programs (host_spec,
-- install_spec). Loaded with dofile from the repository root, where busted runs.
local M = {}

M.ROOT = io.popen("pwd"):read("*l")

-- The interpreter running the specs, for child Lua processes: LUMUS_LUA (make test sets
-- it), else the one of this Lua's version (busted --lua=...).
M.LUA = os.getenv("LUMUS_LUA") or (rawget(_G, "jit") and "luajit" or "lua" .. _VERSION:match("%d+%.%d+"))

-- The build directory of the Lua under test, relative to M.ROOT (host programs, C tests,
-- objects): LUMUS_BUILD (make test sets it), else the one .busted picks for this version.
M.BUILD = os.getenv("LUMUS_BUILD") or (rawget(_G, "jit") and "build-jit"
  or ({ ["Lua 5.1"] = "build-5.1", ["Lua 5.3"] = "build-5.3" })[_VERSION] or "build")

-- The Lua under test as make names it (5.4, 5.3, 5.1, jit), and what installing for it
-- needs: its module directories' version (5.1 for LuaJIT), its headers and library.
M.LUA_VERSION = os.getenv("LUMUS_LUA_VERSION")
  or (rawget(_G, "jit") and "jit" or _VERSION:match("%d+%.%d+"))
M.LUA_ABI = M.LUA_VERSION == "jit" and "5.1" or M.LUA_VERSION
M.LUA_INCDIR = M.LUA_VERSION == "jit" and "/usr/include/luajit-2.1" or "/usr/include/lua" .. M.LUA_VERSION
M.LUA_LINK = M.LUA_VERSION == "jit" and "-lluajit-5.1" or "-llua" .. M.LUA_VERSION

-- The luarocks command for the Lua under test with `tree` as its tree, and the variables
-- `luarocks make` needs for it: LuaRocks knows LuaJIT as Lua 5.1 with LuaJIT's
-- interpreter and headers (the README's command).
function M.luarocks(tree)
  return ("luarocks --lua-version=%s --tree %s"):format(M.LUA_ABI, tree)
end
M.LUAROCKS_MAKE_VARS = M.LUA_VERSION == "jit" and ("LUA=/usr/bin/luajit LUA_INCDIR=" .. M.LUA_INCDIR) or ""

-- Runs a shell command; returns its output (stdout and stderr) and exit code (echoed by
-- the shell: Lua 5.1's and LuaJIT's pipe close gives no exit status).
-- Under `make sanitize` the sanitizer runtime is preloaded into this process; the
-- compilers, luarocks and host binaries started here are not built for it.
function M.run(cmd)
  local p = io.popen("(unset LD_PRELOAD; " .. cmd .. ") 2>&1; echo rc=$?")
  local out = p:read("*a")
  p:close()
  local code = tonumber(out:match("rc=(%d+)%s*$"))
  return (out:gsub("rc=%d+%s*$", "")), code
end

-- Runs a chunk of Lua in a fresh interpreter of the running version (M.LUA) with this process's module paths; returns its
-- output and exit code. io.popen, not M.run: under `make sanitize` the module is the
-- ASan build, and the sanitizer runtime preloaded here must stay preloaded in the
-- child (which then also checks for leaks at exit).
function M.run_lua(code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local p = io.popen(("LUA_PATH=%q LUA_CPATH=%q timeout 120 %s %s 2>&1; echo rc=$?")
    :format(package.path, package.cpath, M.LUA, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

return M
