--- lumus: GPU tensors and kernels for Lua on Vulkan compute.
-- This module loads the C core (lumus.core) and adds the Lua-level API: printing of
-- tensors, and the reference and nn submodules on demand.
local core = require "lumus.core"
local compat = require "lumus.compat"

local M = {}
for k, v in pairs(core) do M[k] = v end
M._host = nil                       -- lumus.compat's C helpers, not part of the API
-- Tuning hooks and counters for specs and benchmarks, apart from the ops (C names each
-- one lumus.tune.<name> in messages).
M.tune = core.tune
package.loaded["lumus.tune"] = core.tune

local Tensor = core.Tensor          -- the metatable of lumus.Tensor
local methods = Tensor.methods
-- Registered as a loaded module so that error messages from methods called without
-- method syntax name them ("bad argument #1 to 'lumus.Tensor.shape'").
package.loaded["lumus.Tensor"] = methods

local MAX_SHOWN = 6                 -- per dimension before eliding with "..."

-- v as printed; int32 elements as integers (whatever number type the Lua version has).
local function fmt(v, int)
  if type(v) == "boolean" then return ("%10s"):format(tostring(v)) end
  if int then return ("%10d"):format(v) end
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" end
  if v == -math.huge then return "-inf" end
  return string.format("%10.4f", v)
end

-- Indices of one dimension to show: all, or the first and last few around a "...".
local function shown(n)
  if n <= MAX_SHOWN then
    local all = {}
    for i = 1, n do all[i] = i end
    return all, false
  end
  local h = math.floor(MAX_SHOWN / 2)
  local idx = {}
  for i = 1, h do idx[#idx + 1] = i end
  for i = n - h + 1, n do idx[#idx + 1] = i end
  return idx, true
end

-- Reads one row (the last dimension) starting at flat element `first` (1-based).
-- (float16 and bfloat16 tensors are printed from t:float(), which holds them exactly.)
local ROW_FORMAT = { float32 = "f32", int32 = "i32", bool = "u8" }
local function read_row(t, first, n)
  local f = ROW_FORMAT[t:dtype()]
  local row = compat.unpack_bytes(f, t:to_bytes(first, n), 1, n)
  if f == "u8" then for i = 1, n do row[i] = row[i] ~= 0 end end
  return row
end

local function tensor_tostring(t)
  if getmetatable(t) ~= Tensor then   -- called directly, e.g. getmetatable(x).__tostring(5)
    error(("bad argument #1 to '__tostring' (tensor expected, got %s)"):format(type(t)), 2)
  end
  if t:is_freed() then return t:describe() end
  local described = t:describe()
  if not ROW_FORMAT[t:dtype()] then t = t:float() end
  local shape = t:shape()
  local nd = #shape
  local strides = {}
  local s = 1
  for i = nd, 1, -1 do strides[i] = s; s = s * shape[i] end
  local lines = {}
  local d = shape[nd]
  local cols, elide_cols = shown(d)
  local int = t:dtype() == "int32"
  -- Every leading index combination that is shown, in order.
  local function walk(dim, base, prefix)
    if dim == nd then
      local row
      if elide_cols then
        local h = math.floor(MAX_SHOWN / 2)
        local head = read_row(t, base + 1, h)
        local tail = read_row(t, base + d - h + 1, h)
        row = {}
        for i = 1, h do row[#row + 1] = fmt(head[i], int) end
        row[#row + 1] = "       ..."
        for i = 1, h do row[#row + 1] = fmt(tail[i], int) end
      else
        local r = read_row(t, base + 1, d)
        row = {}
        for i = 1, d do row[i] = fmt(r[i], int) end
      end
      lines[#lines + 1] = (prefix ~= "" and prefix .. " " or "") .. table.concat(row, " ")
      return
    end
    local idx, elide = shown(shape[dim])
    local h = math.floor(MAX_SHOWN / 2)
    for k, i in ipairs(idx) do
      if elide and k == h + 1 then lines[#lines + 1] = "..." end
      walk(dim + 1, base + (i - 1) * strides[dim], prefix .. "[" .. i .. "]")
    end
  end
  walk(1, 0, "")
  lines[#lines + 1] = described
  return table.concat(lines, "\n")
end
Tensor.__tostring = tensor_tostring

-- Every op whose first argument is a tensor is a method too (t:add(b), t:relu(); the C
-- core registers them in both places). Arithmetic operators: t + u, t - 2, 2 - t,
-- t * u, 1 / t, -t. A number may stand on either side; the C functions order the
-- operands themselves.
Tensor.__add, Tensor.__sub, Tensor.__mul, Tensor.__div = core.add, core.sub, core.mul, core.div
Tensor.__unm = function(t) return core.neg(t) end   -- Lua passes the operand twice

-- Autograd: t:requires_grad(true), loss:backward(), t:grad(), lumus.no_grad(fn)
-- (lua/lumus/autograd.lua; it wraps the ops only once a tensor requires grad).
require("lumus.autograd").attach(M)
-- Losses with their gradients (lua/lumus/loss.lua).
require("lumus.loss").attach(M)
-- lumus.sample (lua/lumus/sampling.lua): next-token sampling from existing kernels.
require("lumus.sampling").attach(M)
require("lumus.composite").attach(M)

-- Submodules load on first use: lumus.reference, lumus.nn, lumus.optim.
setmetatable(M, {
  __index = function(_, k)
    if k == "reference" or k == "nn" or k == "optim" then
      local mod = require("lumus." .. k)
      rawset(M, k, mod)
      return mod
    end
  end,
})

return M
