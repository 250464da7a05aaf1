-- What the packaging specs (install_spec, rock_spec) run against an installed lumus: a
-- script started in another directory with only the install tree's module paths, that
-- checks add and layer_norm_forward against the float64 reference and says where
-- lumus and lumus.core were loaded from and which version they are.
local shell = dofile("spec/support/shell.lua")

local M = {}

M.SCRIPT = [[
local lumus = require "lumus"
local ref = require "lumus.reference"
local xt = { { 1, 2, 3, 4 }, { 10, 20, 30, 50 } }
local yt = { { 0.5, -1, 2, 0.25 }, { 3, 3, -3, 7 } }
local c = ref.compare(lumus.layer_norm_forward(lumus.tensor(xt)):to_table(), ref.layer_norm_forward(xt))
assert(c.max_rel <= 1e-5, "layer_norm_forward differs from the reference")
c = ref.compare(lumus.add(lumus.tensor(xt), lumus.tensor(yt)):to_table(), ref.add(xt, yt))
assert(c.max_rel <= 1e-6, "add differs from the reference")
local function searchpath(name, path)
  for template in path:gmatch("[^;]+") do
    local file = template:gsub("%?", (name:gsub("%.", "/")))
    local f = io.open(file, "rb")
    if f then f:close() return file end
  end
end
print("core from " .. searchpath("lumus.core", package.cpath))
print("lua from " .. searchpath("lumus", package.path))
print("version " .. lumus.version)
]]

-- Runs SCRIPT with `lua` (lua5.4 unless given) in `dir` with only the tree's paths
-- (searchpath above stands in for package.searchpath, which Lua 5.1 lacks).
function M.run_script(dir, luadir, libdir, lua)
  local file = dir .. "/installed_check.lua"
  local f = assert(io.open(file, "w"))
  f:write(M.SCRIPT)
  f:close()
  local env = ("LUA_PATH='%s/?.lua;%s/?/init.lua' LUA_CPATH='%s/?.so'"):format(luadir, luadir, libdir)
  local out, code = shell.run(("cd %s && %s %s installed_check.lua"):format(dir, env, lua or "lua5.4"))
  os.remove(file)
  return out, code
end

-- A path as a Lua pattern that matches it literally.
function M.literal(path)
  return (path:gsub("%p", "%%%0"))
end

return M
