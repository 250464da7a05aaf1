-- Lua Language Server definitions (meta/*.lua) for lumus's modules.
--
--   lua5.4 tools/gen_meta.lua      prints a stub, under its meta file's name, for every
--                                  public name of the modules that meta/ lacks (paste it
--                                  there, then fill in the types); nothing when meta/ is
--                                  complete. lumus.* and Tensor methods with a line in
--                                  tools/meta_sigs.txt get typed stubs.
--   lua5.4 tools/gen_meta.lua --bootstrap DIR
--                                  writes a whole meta file set into DIR from
--                                  introspection and tools/meta_sigs.txt: how meta/ began
--                                  (meta/ has been edited by hand since: types of nn,
--                                  optim, models.gpt2, tune, autograd, reference).
--
-- Run from the repository root after `make`. spec/meta_spec.lua keeps meta/ and the
-- modules in step (spec/support/meta_names.lua says how names are found on each side).
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = "build/?.so;" .. package.cpath
local names = dofile("spec/support/meta_names.lua")

-- Splits at the commas outside {}, () and <>: {a?: x, b?: y} and table<K, V> are one item.
local function split_top(text)
  local items, depth, start = {}, 0, 1
  text = text .. ","
  for i = 1, #text do
    local c = text:sub(i, i)
    if c == "{" or c == "(" or c == "<" then depth = depth + 1
    elseif c == "}" or c == ")" or c == ">" then depth = depth - 1
    elseif c == "," and depth == 0 then
      local item = text:sub(start, i - 1):gsub("^%s+", ""):gsub("%s+$", "")
      if item ~= "" then items[#items + 1] = item end
      start = i + 1
    end
  end
  return items
end

-- tools/meta_sigs.txt: name|params|returns|description; a returns field may hold unions
-- (its pieces have no ":"), a description no "|".
local function read_sigs()
  local sigs, methods_only = {}, {}
  for line in io.lines("tools/meta_sigs.txt") do
    if line ~= "" and not line:match("^#") then
      local pieces = {}
      for piece in (line .. "|"):gmatch("([^|]*)|") do pieces[#pieces + 1] = piece end
      local name = table.remove(pieces, 1)
      local desc = table.remove(pieces)
      local ret = { table.remove(pieces) }
      while #pieces > 1 and pieces[#pieces] ~= "" and not pieces[#pieces]:find(":") do
        table.insert(ret, 1, table.remove(pieces))
      end
      local params = table.concat(pieces, "|")
      local sig = { params = {}, returns = table.concat(ret, "|"), desc = desc }
      for _, p in ipairs(split_top(params)) do
        local pname, ptype = p:match("^([%w_]+%??):(.*)$")
        sig.params[#sig.params + 1] = { name = pname, type = ptype }
      end
      if name:sub(1, 1) == ":" then methods_only[name:sub(2)] = sig else sigs[name] = sig end
    end
  end
  return sigs, methods_only
end

local function annotate(out, sig, skip_first)
  out[#out + 1] = "---" .. sig.desc
  local plist = {}
  for i, p in ipairs(sig.params) do
    if not (skip_first and i == 1) then
      out[#out + 1] = ("---@param %s %s"):format(p.name, p.type)
      plist[#plist + 1] = p.name:gsub("%?$", "")
    end
  end
  if sig.returns ~= "nil" and sig.returns ~= "" then
    for _, r in ipairs(split_top(sig.returns)) do
      out[#out + 1] = "---@return " .. (r == "..." and "any ..." or r)
    end
  end
  return table.concat(plist, ", ")
end

-- Parameter names of a Lua function (Lua 5.2 and later); "..." otherwise.
local function param_names(f)
  if type(f) ~= "function" or not debug.getlocal then return "..." end
  local info = debug.getinfo(f, "u")
  if not info or not info.nparams or info.what == "C" then return "..." end
  local list = {}
  for i = 1, info.nparams do list[i] = debug.getlocal(f, i) end
  if info.isvararg then list[#list + 1] = "..." end
  return table.concat(list, ", ")
end

local function stub(out, var, name, value, method)
  if type(value) == "function" then
    local params = param_names(value)
    if method then params = params:gsub("^self,?%s*", "") end
    for p in params:gmatch("[%w_]+") do out[#out + 1] = ("---@param %s any"):format(p) end
    out[#out + 1] = "---@return any"
    out[#out + 1] = ("function %s%s%s(%s) end"):format(var, method and ":" or ".", name, params)
  else
    out[#out + 1] = ("---@type %s"):format(type(value) == "table" and "table" or type(value))
    out[#out + 1] = ("%s.%s = nil"):format(var, name)
  end
end

local function sorted_keys(set)
  local list = {}
  for k in pairs(set) do list[#list + 1] = k end
  table.sort(list)
  return list
end

local sigs, methods_only = read_sigs()

if arg[1] ~= "--bootstrap" then
  local missing = names.compare(".")
  local classes = names.real_tables()
  local by_file = {}
  for _, m in ipairs(missing) do
    by_file[m.file] = by_file[m.file] or {}
    table.insert(by_file[m.file], m)
  end
  for _, file in ipairs(sorted_keys(by_file)) do
    print("-- " .. file)
    local _, class_var = {}, {}
    local f = io.open(file, "r")
    if f then f:close(); _, class_var = names.meta_file(file) end
    for _, m in ipairs(by_file[file]) do
      local out = { ("-- %s.%s"):format(m.class, m.name) }
      local var = class_var[m.class] or m.class:match("([%w_]+)$")
      local method = m.class:match("[A-Z]") ~= nil
      local sig, skip
      if m.class == "lumus" then sig = sigs[m.name]
      elseif m.class == "lumus.Tensor" then
        sig, skip = methods_only[m.name], false
        if not sig and sigs[m.name] then sig, skip = sigs[m.name], true end
      end
      if sig then
        local params = annotate(out, sig, skip)
        out[#out + 1] = ("function %s%s%s(%s) end"):format(var, method and ":" or ".", m.name, params)
      else
        stub(out, var, m.name, classes[m.class][m.name], method)
      end
      print(table.concat(out, "\n") .. "\n")
    end
  end
  os.exit(0)
end

-- ---- --bootstrap DIR: every meta file anew, into DIR.
local DIR = arg[2]
if not DIR then io.stderr:write("usage: lua5.4 tools/gen_meta.lua [--bootstrap DIR]\n"); os.exit(2) end
local real = names.real_tables()

local LUMUS_HEADER = [[
---@meta lumus
-- Lua Language Server definitions for lumus (https://luals.github.io): point
-- "workspace.library" at this directory (README: Editor support). Checked against the
-- real modules by spec/meta_spec.lua; tools/gen_meta.lua prints stubs for new names.

---@alias lumus.dtype "float32"|"float16"|"bfloat16"|"int32"|"bool"
---A shape: a list of sizes, or one size for a 1-D tensor.
---@alias lumus.Shape integer[]|integer
---@alias lumus.Scalar number|boolean

---@class lumus.OutOpts
---@field out? lumus.Tensor a preallocated tensor of the result's shape to write into

---@class lumus.DtypeOpts
---@field dtype? lumus.dtype element type (default "float32")

---@class lumus.DimOpts
---@field dim? integer 1-based dimension (negative: from the end; default the last)
---@field out? lumus.Tensor

---@class lumus.ReduceOpts
---@field dim? integer 1-based dimension (negative: from the end); none: every element
---@field keepdim? boolean keep the reduced dimension as size 1
---@field correction? integer var only: divide by n - correction (default 1)
---@field out? lumus.Tensor
---@field indices? lumus.Tensor max/min with dim: int32 tensor for the indices

---@class lumus.LossOpts
---@field reduction? "mean"|"sum"|"none"
---@field ignore_index? integer cross_entropy: targets to skip (default -100)
---@field pos_weight? lumus.Tensor binary_cross_entropy_with_logits: weight of positives [C]

---@class lumus.RngState
---@field seed integer
---@field offset integer

---@class lumus.DeviceInfo
---@field name string
---@field kind "discrete"|"integrated"|"virtual"|"cpu"|"other"
---@field driver string
---@field api_version string
---@field subgroup_size integer
---@field device_local_bytes integer
---@field index? integer devices() only: the index LUMUS_DEVICE takes
---@field selected? boolean devices() only: the device this state uses
]]

local FIELD_TYPES = {
  ["lumus.version"] = 'string',
  ["lumus.Tensor"] = '{methods: lumus.Tensor}',
  ["lumus.tune"] = 'lumus.tune',
  ["lumus.autograd"] = 'lumus.autograd',
  ["lumus.nn"] = 'lumus.nn',
  ["lumus.optim"] = 'lumus.optim',
  ["lumus.reference"] = 'lumus.reference',
}
local FIELD_VALUES = {
  ["lumus.tune"] = 'require("lumus.tune")', ["lumus.autograd"] = 'require("lumus.autograd")',
  ["lumus.nn"] = 'require("lumus.nn")', ["lumus.optim"] = 'require("lumus.optim")',
  ["lumus.reference"] = 'require("lumus.reference")',
  ["lumus.Tensor"] = "{ methods = Tensor }",
}

local function write(path, text)
  path = DIR .. "/" .. path:gsub("^meta/", "")
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  print("wrote " .. path)
end

local function class_block(out, cname, var, tbl, method, sig_for)
  out[#out + 1] = "---@class " .. cname
  out[#out + 1] = ("local %s = {}"):format(var)
  out[#out + 1] = ""
  local fields = {}
  for _, k in ipairs(sorted_keys(tbl)) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then
      local v = tbl[k]
      local sig, skip = sig_for and sig_for(k)
      if type(v) ~= "function" then
        fields[#fields + 1] = k
      elseif sig then
        local params = annotate(out, sig, skip)
        out[#out + 1] = ("function %s%s%s(%s) end"):format(var, method and ":" or ".", k, params)
        out[#out + 1] = ""
      else
        stub(out, var, k, v, method)
        out[#out + 1] = ""
      end
    end
  end
  for _, k in ipairs(fields) do
    local full = cname .. "." .. k
    out[#out + 1] = ("---@type %s"):format(FIELD_TYPES[full] or type(tbl[k]))
    local v = tbl[k]
    local value = FIELD_VALUES[full] or (type(v) == "string" and ("%q"):format(v)) or (type(v) == "number" and tostring(v)) or "{}"
    out[#out + 1] = ("%s.%s = %s"):format(var, k, value)
    out[#out + 1] = ""
  end
end

-- meta/lumus.lua: the module's functions, the Tensor class, the capture Graph.
do
  local out = { LUMUS_HEADER }
  out[#out + 1] = [[
---A tensor in device memory: 1 to 8 dimensions, one dtype. Every op whose first
---argument is a tensor is a method too (t:add(b)); + - * / and unary - are the ops.
---@class lumus.Tensor
---@operator add(lumus.Tensor|number): lumus.Tensor
---@operator sub(lumus.Tensor|number): lumus.Tensor
---@operator mul(lumus.Tensor|number): lumus.Tensor
---@operator div(lumus.Tensor|number): lumus.Tensor
---@operator unm: lumus.Tensor
local Tensor = {}
]]
  class_block(out, "lumus.Graph", "Graph", real["lumus.Graph"], true, function(k)
    local s = { replay = { params = {}, returns = "...", desc = "Submits the recorded ops again; returns the captured function's results." },
                free = { params = {}, returns = "nil", desc = "Releases the recording (also <close> and __gc)." },
                is_freed = { params = {}, returns = "boolean", desc = "Whether free() was called." },
                stats = { params = {}, returns = "{ops: integer, storages: integer, inputs: integer}", desc = "Counts of the recording." } }
    return s[k]
  end)
  class_block(out, "lumus", "lumus", real["lumus"], false, function(k) return sigs[k] end)
  -- Tensor methods: a function's signature without its first parameter, or a method's own.
  local methods = {}
  for _, k in ipairs(sorted_keys(real["lumus.Tensor"])) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" then methods[#methods + 1] = k end
  end
  for _, k in ipairs(methods) do
    local sig, skip = methods_only[k], false
    if not sig and sigs[k] then sig, skip = sigs[k], true end
    if sig then
      local params = annotate(out, sig, skip)
      out[#out + 1] = ("function Tensor:%s(%s) end"):format(k, params)
    else
      stub(out, "Tensor", k, real["lumus.Tensor"][k], true)
    end
    out[#out + 1] = ""
  end
  out[#out + 1] = "return lumus\n"
  write("meta/lumus.lua", table.concat(out, "\n"))
end

-- The other files: one block per class, stubs with the Lua functions' parameter names.
local FILES = {
  { "meta/lumus_tune.lua", "lumus.tune", { "lumus.tune" } },
  { "meta/lumus_autograd.lua", "lumus.autograd", { "lumus.autograd" } },
  { "meta/lumus_reference.lua", "lumus.reference", { "lumus.reference" } },
  { "meta/lumus_nn.lua", "lumus.nn", {} },
  { "meta/lumus_optim.lua", "lumus.optim", {} },
  { "meta/lumus_models_gpt2.lua", "lumus.models.gpt2", {} },
}
for _, spec in ipairs(FILES) do
  local file, modname, classes = spec[1], spec[2], spec[3]
  if #classes == 0 then
    for _, cname in ipairs(sorted_keys(real)) do
      if names.file_for(cname) == file and cname ~= modname then classes[#classes + 1] = cname end
    end
    table.insert(classes, modname)
  end
  local out = { ("---@meta %s\n-- Lua Language Server definitions for %s (see meta/lumus.lua).\n"):format(modname, modname) }
  local module_var
  for _, cname in ipairs(classes) do
    local var = cname == modname and modname:match("([%w_]+)$") or cname:match("([%w_]+)$")
    if cname == modname then module_var = var end
    class_block(out, cname, var, real[cname], cname ~= modname and cname:match("[A-Z]") ~= nil)
  end
  out[#out + 1] = ("return %s\n"):format(module_var)
  write(file, table.concat(out, "\n"))
end
