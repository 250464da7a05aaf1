--- lumus.argcheck: argument checks for the ops written in Lua (lua/lumus/composite.lua,
-- lua/lumus/loss.lua), with the C ops' messages: "bad argument #n to 'lumus.name' (...)",
-- no position (as a C function's error has none).
local core = require "lumus.core"

local M = {}

local Tensor = core.Tensor
local methods = Tensor.methods

function M.argerror(name, n, msg)
  error(("bad argument #%d to 'lumus.%s' (%s)"):format(n, name, msg), 0)
end

--- The tensor at argument n (`what` names it in messages, "tensor" by default), live,
-- and of `dtype` when given. Returns it.
function M.tensor(name, n, v, what, dtype)
  what = what or "tensor"
  if getmetatable(v) ~= Tensor then M.argerror(name, n, ("%s must be a tensor, got %s"):format(what, type(v))) end
  if methods.is_freed(v) then M.argerror(name, n, what .. " has been freed") end
  if dtype and methods.dtype(v) ~= dtype then
    M.argerror(name, n, ("%s must be %s, got %s"):format(what, dtype, methods.dtype(v)))
  end
  return v
end

--- The options table at argument n: nil gives {}; otherwise a table (not a tensor) whose
-- keys are all in `known`, read raw into a fresh table.
function M.options(name, n, opts, known)
  if opts == nil then return {} end
  if type(opts) ~= "table" or getmetatable(opts) == Tensor then
    M.argerror(name, n, ("options must be a table, got %s"):format(type(opts)))
  end
  local out = {}
  for k, v in next, opts do
    if type(k) ~= "string" or not known[k] then
      local list = {}
      for key in pairs(known) do list[#list + 1] = key end
      table.sort(list)
      M.argerror(name, n, ("unknown option '%s' (known: %s)"):format(tostring(k), table.concat(list, ", ")))
    end
    out[k] = v
  end
  return out
end

return M
