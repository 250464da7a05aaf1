-- The public names of lumus's modules and classes, against the names the Lua Language
-- Server definitions in meta/ declare (spec/meta_spec.lua, tools/gen_meta.lua).
--
-- Real side: each class below names a table of the loaded modules whose string keys not
-- starting with "_" are public (metamethods, __init, _update are not).
-- Meta side: meta/*.lua is read as text: a `---@class Name` line followed by
-- `local Var = {}` (or `local Var = ...`) binds Var to Name in that file; then
-- `function Var.name(`, `function Var:name(` and `Var.name =` declare name on Name.
-- Portable Lua (5.1 to 5.4).
local M = {}

-- Loads the real modules and returns { [class name] = the table holding its members }.
-- Some tables exist only on objects, so one of each is made (on the default device).
function M.real_tables()
  local lumus = require "lumus"
  local nn, optim, ref = lumus.nn, lumus.optim, lumus.reference   -- loaded on first use
  local gpt2 = require "lumus.models.gpt2"
  local x = lumus.zeros({ 2 })
  local graph = lumus.capture(function() return lumus.add(x, 1) end)
  local param = lumus.zeros({ 1 })
  local sched = optim.lr_scheduler.StepLR(optim.SGD({ param }), 1)
  local classes = {
    ["lumus"] = lumus,
    ["lumus.Tensor"] = lumus.Tensor.methods,
    ["lumus.Graph"] = getmetatable(graph).__index,
    ["lumus.tune"] = lumus.tune,
    ["lumus.autograd"] = lumus.autograd,
    ["lumus.reference"] = ref,
    ["lumus.nn"] = nn,
    ["lumus.optim"] = optim,
    ["lumus.optim.lr_scheduler"] = optim.lr_scheduler,
    ["lumus.optim.LRScheduler"] = getmetatable(sched).__index,
    ["lumus.models.gpt2"] = gpt2,
    ["lumus.models.gpt2.Model"] = gpt2.Model,
  }
  -- A model's KV cache, made without a model: new_cache reads only config and blocks.
  local ok, cache = pcall(gpt2.Model.new_cache, { config = { n_positions = 1 }, blocks = {} }, 1, 1)
  if ok and getmetatable(cache) then classes["lumus.models.gpt2.Cache"] = getmetatable(cache).__index end
  -- nn's and optim's classes: their own methods (the base class's are Module's or
  -- Optimizer's); nn.KVCache is a constructor whose methods are its metatable's __index.
  for name, cls in pairs(nn) do
    if type(cls) == "table" then
      local own = cls
      if next(cls) == nil then own = getmetatable(cls).__index end
      classes["lumus.nn." .. name] = own
    end
  end
  for name, cls in pairs(optim) do
    if type(cls) == "table" and name ~= "lr_scheduler" then classes["lumus.optim." .. name] = cls end
  end
  graph:free()
  x:free()
  param:free()
  return classes
end

-- { [class name] = { [public name] = true } }.
function M.real_classes()
  local names = {}
  for cname, t in pairs(M.real_tables()) do
    local set = {}
    for k in pairs(t) do
      if type(k) == "string" and k:sub(1, 1) ~= "_" then set[k] = true end
    end
    names[cname] = set
  end
  return names
end

-- The meta file each class's definitions belong in.
function M.file_for(cname)
  if cname == "lumus" or cname == "lumus.Tensor" or cname == "lumus.Graph" then return "meta/lumus.lua" end
  local mod = cname:match("^lumus%.models%.gpt2") and "models.gpt2"
    or cname:match("^lumus%.optim") and "optim"
    or cname:match("^lumus%.nn") and "nn"
    or cname:match("^lumus%.([%w_]+)")
  return "meta/lumus_" .. mod:gsub("%.", "_") .. ".lua"
end

-- Reads one meta file: { [class name] = { [name] = line number } }, and
-- { [class name] = the local variable bound to it }.
function M.meta_file(path)
  local f = assert(io.open(path, "r"))
  local classes, vars, class_var = {}, {}, {}
  local pending_class
  local n = 0
  for line in f:lines() do
    n = n + 1
    local cname = line:match("^%-%-%-@class%s+([%w_%.]+)")
    if cname then
      pending_class = cname
    else
      local var = line:match("^local%s+([%w_]+)%s*=")
      if var and pending_class then
        vars[var] = pending_class
        class_var[pending_class] = var
        classes[pending_class] = classes[pending_class] or {}
        pending_class = nil
      elseif not line:match("^%-%-%-") then
        pending_class = nil
      end
      local v, name = line:match("^function%s+([%w_]+)[%.:]([%w_]+)%s*%(")
      if not v then v, name = line:match("^([%w_]+)%.([%w_]+)%s*=") end
      if v and vars[v] then classes[vars[v]][name] = n end
    end
  end
  f:close()
  return classes, class_var
end

-- Compares; returns two sorted lists of { class =, name =, file = }: names in the
-- modules that meta/ lacks, and names meta/ declares that the modules lack.
function M.compare(root)
  local real = M.real_classes()
  local files, meta = {}, {}
  for cname in pairs(real) do files[M.file_for(cname)] = true end
  for file in pairs(files) do
    local f = io.open(root .. "/" .. file, "r")
    if f then
      f:close()
      for cname, set in pairs(M.meta_file(root .. "/" .. file)) do
        meta[cname] = meta[cname] or { file = file, names = {} }
        for name in pairs(set) do meta[cname].names[name] = true end
      end
    end
  end
  local missing, extra = {}, {}
  for cname, set in pairs(real) do
    local m = meta[cname] and meta[cname].names or {}
    for name in pairs(set) do
      if not m[name] then missing[#missing + 1] = { class = cname, name = name, file = M.file_for(cname) } end
    end
  end
  for cname, m in pairs(meta) do
    for name in pairs(m.names) do
      if not (real[cname] and real[cname][name]) then
        extra[#extra + 1] = { class = cname, name = name, file = m.file }
      end
    end
  end
  local function order(a, b)
    if a.file ~= b.file then return a.file < b.file end
    if a.class ~= b.class then return a.class < b.class end
    return a.name < b.name
  end
  table.sort(missing, order)
  table.sort(extra, order)
  return missing, extra, real, meta
end

return M
