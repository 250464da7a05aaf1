--- lumus.nn: neural-network modules for Lua scripts, built on lumus kernels.
--
--   local nn = require("lumus").nn
--   local block = nn.Residual(nn.Sequential(
--     nn.LayerNorm(768),
--     nn.Linear(768, 3072, { seed = 1 }),
--     nn.GELU({ approximate = "tanh" }),
--     nn.Linear(3072, 768, { seed = 2 })))
--   local y = block(x)                 -- x: lumus tensor [..., 768]; same as block:forward(x)
--   print(block)                       -- Torch-style description
--   for _, p in ipairs(block:parameters()) do ... end
--
-- Modules:
--   nn.Linear(in, out [, {bias = true, seed = n}])   y = x W^T + b; weight [out, in]
--                                     (torch layout), bias [out]; lumus.linear, one dispatch
--   nn.LayerNorm(D [, {eps = 1e-5, affine = true}])  over the last dimension; weight
--                                     (ones) and bias (zeros) [D] when affine
--   nn.GELU([{approximate = "none" | "tanh"}])       lumus.gelu
--   nn.ReLU()                                        lumus.relu
--   nn.Sequential(m1, m2, ...)        applies the modules in order; :add(m), :get(i), :size()
--   nn.Residual(block)                x + block(x) (lumus.add)
--   nn.Dropout([p = 0.5])             training: each element zeroed with probability p
--                                     (lumus.rand), the rest scaled by 1/(1-p); a fresh
--                                     tensor per call. Evaluation mode: x itself
--   nn.Embedding(num, dim [, {seed = n}])   lumus.embedding(ids, weight), 1-based int32
--                                     ids; weight [num, dim] from the standard normal
--   nn.SiLU(), nn.Tanh(), nn.Sigmoid()          lumus.silu, lumus.tanh, lumus.sigmoid
--   nn.Softmax([{dim = -1}]), nn.LogSoftmax([{dim = -1}])   lumus.softmax, lumus.log_softmax
--   nn.LeakyReLU([slope]), nn.ELU([alpha]), nn.Softplus([beta [, threshold]])   the functions
--   nn.Identity()                     x itself
--   nn.Flatten([start_dim = 2 [, end_dim = -1]])   lumus.flatten
--   nn.RMSNorm(D [, {eps = 1e-6, affine = true}])  lumus.rms_norm; weight [D] (ones)
--   nn.utils.clip_grad_norm_(params, max_norm [, {norm_type = 2}])  grads scaled in place
--                                     so their joint norm is at most max_norm; the norm
--
-- Every module has:
--   m:forward(x), m(x)                the output tensor, m.output (see "Outputs" below)
--   m.output                          the output of the last call
--   m:parameters()                    list of its parameter tensors, children's included,
--                                     in a fixed order (a module's own, then its children's);
--                                     marks them requires_grad(true) (see "Training")
--   m:named_parameters(), m:state_dict(), m:load_state_dict(sd [, {strict = true}])
--                                     dotted names: children by position ("2.weight"),
--                                     Residual's block as "block"
--   m:requires_grad_([flag]), m:zero_grad(), m:train([mode]), m:eval(), m.training
--   m:load(values [, {strict = true}])  copies values into the parameters, in place:
--                                     Linear/LayerNorm take {weight = v, bias = v}, each v a
--                                     nested table of the parameter's shape, a flat table of
--                                     its numel numbers, a string of float32 bytes
--                                     (little-endian, as compat.pack_bytes("f32", ...)) or a lumus tensor;
--                                     Sequential takes {[i] = values of child i}, Residual
--                                     its block's values. strict (default): every parameter
--                                     must be given. Shapes and sizes are checked.
--   m:clear_state()                   releases the output buffers (its own and its
--                                     children's) now; the next call makes new ones
--   m:free()                          releases the parameters' and the buffers' device
--                                     memory now
--   tostring(m)                       "nn.Linear(768 -> 3072)", "nn.LayerNorm(768)", ...
--
-- Initialization is deterministic. Linear draws weight then bias, row-major, from
-- uniform(-1/sqrt(in), 1/sqrt(in)) (torch's default bounds) with lumus.reference's
-- SplitMix64 generator, seeded by opts.seed; without a seed, from a seed drawn from the
-- module-level generator, which nn.manual_seed(n) resets (it starts at a fixed seed, so a
-- script builds the same model on every run).
--
-- Outputs (Torch7 nn semantics): m.output is reused; clone it to keep it
-- (lumus.copy(m.output)). Each module keeps its result tensor (LayerNorm also its mean
-- and invstd, as m.mean and m.invstd) and the next call with an input of the same shape
-- writes into it through the kernels' {out=}, so a per-frame model(x) allocates no device
-- memory after the first call. An input of another shape makes a new buffer and frees
-- the old one (a tensor still held from an earlier call then raises "tensor has been
-- freed"). A call whose input is the module's own output, x == m.output, gets a new
-- buffer rather than writing over its input (the elementwise modules, which can work in
-- place, write into it). Sequential's output is its last child's output (its input when
-- empty); Residual keeps its own buffer for x + block(x). Containers free nothing they
-- pass between children: each child's output lives until the child's next call,
-- clear_state() or free(). A module of one's own may return a fresh tensor per call
-- (containers accept it; the GC reclaims it) or keep self.output the same way.
--
-- Training: a call that autograd records (lumus.is_grad_enabled() and an input or one of
-- the module's own parameters requires grad) returns fresh tensors and keeps them as
-- m.output without reusing or freeing them (the graph may hold them; autograd refuses
-- out= too); the call cache is dropped. The next call outside recording starts new
-- buffers. So reuse holds inside lumus.no_grad and for modules whose parameters do not
-- require grad (never asked for by parameters(), or m:requires_grad_(false)).
--
-- Own modules: local Scale = nn.Module:extend("Scale"), then Scale:__init(...) (set
-- fields, call self:register_parameter(name, tensor) / self:register_module(m) so that
-- parameters() sees them, and self:register_buffers("output", ...) for the fields that
-- hold tensors it reuses, so that clear_state() and free() release them) and
-- Scale:forward(x); Scale(...) builds one.
local lumus = require "lumus"
local ref = require "lumus.reference"
local compat = require "lumus.compat"

local nn = {}

local Tensor = lumus.Tensor   -- the metatable of lumus tensors
local function is_tensor(v) return getmetatable(v) == Tensor end
-- Fetched at each call, not once: autograd replaces lumus.linear and the others with
-- recording wrappers at the first requires_grad(true).
local function linear(...) return lumus.linear(...) end
local function layer_norm_forward(...) return lumus.layer_norm_forward(...) end

---------------------------------------------------------------------------------------
-- Argument checks (errors point at the caller of the constructor: level 4 is the user's
-- code when called as check <- __init <- class call)

local function positive_int(fname, what, v, level)
  if compat.is_integer(v) and v >= 1 and v < 2 ^ 53 then v = compat.integer(v) end
  if not compat.is_integer(v) or v < 1 then
    error(("%s: %s must be a positive integer, got %s"):format(fname, what,
      type(v) == "number" and tostring(v) or type(v)), level or 4)
  end
  return v
end

local function opts_table(fname, opts, known, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(("%s: options must be a table, got %s"):format(fname, type(opts)), level or 4)
  end
  for k in pairs(opts) do
    if not known[k] then
      local names = {}
      for n in pairs(known) do names[#names + 1] = n end
      table.sort(names)
      error(("%s: unknown option '%s' (known: %s)"):format(fname, tostring(k), table.concat(names, ", ")), level or 4)
    end
  end
  return opts
end

local function boolean_opt(fname, opts, key, default, level)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= "boolean" then
    error(("%s: option %s must be a boolean, got %s"):format(fname, key, type(v)), level or 4)
  end
  return v
end

---------------------------------------------------------------------------------------
-- Seeds and initialization

local DEFAULT_SEED = 0x6c756d7573   -- "lumus"
local seeder = ref.rng(DEFAULT_SEED)

--- Resets the generator that seeds modules made without opts.seed.
function nn.manual_seed(seed)
  if not compat.is_integer(seed) then
    error(("nn.manual_seed: seed must be an integer, got %s"):format(tostring(seed)), 2)
  end
  seeder = ref.rng(seed)
end

local function next_seed() return math.floor(seeder.uniform() * 2 ^ 53) end

local PACK_CHUNK = 1024

-- float32 bytes of n values from uniform(-bound, bound), drawn in order from g.
local function uniform_bytes(g, n, bound)
  local parts, buf, uniform = {}, {}, g.uniform
  for i = 1, n, PACK_CHUNK do
    local m = math.min(PACK_CHUNK, n - i + 1)
    for j = 1, m do buf[j] = (2 * uniform() - 1) * bound end
    parts[#parts + 1] = compat.pack_bytes("f32", buf, m)
  end
  return table.concat(parts)
end

local function shape_string(s) return table.concat(s, "x") end

-- The module's buffer `buf` if a result for input x (a tensor) can be written into it:
-- not freed, not x itself, and of x's shape with the last dimension `last` (x's own when
-- nil). Otherwise nil: the op then makes a new one (and raises on a bad x).
local function reusable(buf, x, last)
  if buf == nil or rawequal(buf, x) or not is_tensor(x) or buf:is_freed() then return nil end
  local n = x:dim()
  if buf:dim() ~= n or buf:size(n) ~= (last or x:size(n)) then return nil end
  for i = 1, n - 1 do
    if buf:size(i) ~= x:size(i) then return nil end
  end
  return buf
end

-- Frees the buffer `old` that `new` replaces, unless it is still in use as the input x.
local function drop(old, new, x)
  if old ~= nil and old ~= new and not rawequal(old, x) then old:free() end
end

-- A module's last call, for the next one: called again with the same input tensors
-- (whose shapes cannot have changed: a tensor's shape is fixed) while its output buffers
-- are the same and live, a forward skips the checks above and passes the options table
-- of that call again, so a per-frame forward costs one op call and allocates nothing.
-- Inputs are held weakly: the cache keeps no tensor alive. `key` is any other value the
-- options depend on (GELU's approximate).
local WEAK = { __mode = "v" }

local function remember(self, opts, x, h, key)
  self._call = { inputs = setmetatable({ x, h }, WEAK), out = self.output, opts = opts, key = key }
end

-- The options table of the last call when this call may reuse it, else nil. (== is
-- identity here: tensors have no __eq, and a value that does is no tensor, which the
-- full path then rejects.)
local function cached_opts(self, x, h, key)
  local c = self._call
  if c == nil or x == nil then return nil end
  local ins, out = c.inputs, self.output
  if ins[1] ~= x or ins[2] ~= h or c.out ~= out or c.key ~= key or getmetatable(x) ~= Tensor
     or out:is_freed() then
    return nil
  end
  return c.opts
end

-- Would autograd record this module's call on x (and h)? Grad is enabled and an input or
-- one of the module's own parameters requires grad. Such a call returns fresh tensors:
-- a reused output could be a tensor the graph saved, and autograd refuses out= anyway.
-- Nothing records before the first requires_grad(true), which installs autograd's
-- wrappers: until then the answer is no without looking at the tensors.
local autograd = require "lumus.autograd"
local function records(self, x, h)
  if not autograd.is_installed() or not lumus.is_grad_enabled() then return false end
  if is_tensor(x) and x:requires_grad() then return true end
  if is_tensor(h) and h:requires_grad() then return true end
  for _, name in ipairs(self._params) do
    if self[name]:requires_grad() then return true end
  end
  return false
end

-- Keeps the fresh results of a recorded call as the module's outputs (fields[i] =
-- values[i]) without freeing the buffers they replace (the caller may hold them; the GC
-- reclaims them), and marks them as not reusable.
local function keep_fresh(self, fields, values)
  self._call = nil
  for i, f in ipairs(fields) do self[f] = values[i] end
  self._fresh = true
end

-- Before a call that reuses buffers: outputs of a recorded call belong to the graph and
-- are dropped, not written or freed.
local function forget_fresh(self)
  if self._fresh then
    for _, name in ipairs(self._buffers) do self[name] = nil end
    self.output = nil
    self._fresh = nil
  end
end

---------------------------------------------------------------------------------------
-- Module

local Module = {}
nn.Module = Module

-- A new module class: instances have the class as metatable (so __call and __tostring
-- work on them), methods are looked up along the parent chain, and calling the class
-- makes an instance and runs its __init.
local function make_class(name, parent)
  local cls = {}
  cls.__index = cls
  cls.__name = "nn." .. name
  cls._type = "nn." .. name
  cls.__call = function(self, ...) return self:forward(...) end
  cls.__tostring = function(self) return self:describe() end
  return setmetatable(cls, {
    __index = parent,
    __call = function(c, ...)
      local self = setmetatable({ _params = {}, _modules = {}, _names = {}, _buffers = {}, training = true }, c)
      self:__init(...)
      return self
    end,
    __tostring = function() return "nn." .. name .. " (class)" end,
  })
end

--- A subclass of this module class, named `name` (printed as nn.<name>).
function Module:extend(name)
  if type(name) ~= "string" or name == "" then
    error("nn.Module:extend: a class name (string) expected", 2)
  end
  return make_class(name, self)
end

function Module:__init() end

function Module:forward()
  error(("%s: forward is not implemented"):format(self._type), 2)
end

--- The printed form; containers print their children indented.
function Module:describe() return self._type end

--- Records a parameter tensor, kept as self[name]; parameters() lists them in order.
function Module:register_parameter(name, t)
  if type(name) ~= "string" then
    error(("%s:register_parameter: name must be a string, got %s"):format(self._type, type(name)), 2)
  end
  if not is_tensor(t) then
    error(("%s:register_parameter: %s must be a tensor, got %s"):format(self._type, name, type(t)), 2)
  end
  if not self._params[name] then
    self._params[#self._params + 1] = name
    self._params[name] = true
  end
  self[name] = t
  return t
end

local function is_module(m)
  local mt = getmetatable(m)
  return type(m) == "table" and type(mt) == "table" and type(mt.forward) == "function"
end

--- Records a child module; parameters() includes its parameters after this module's own.
-- `name` names it in state_dict keys (default: its position among the children).
function Module:register_module(m, name)
  if not is_module(m) then
    error(("%s:register_module: a module expected, got %s"):format(self._type, type(m)), 2)
  end
  self._modules[#self._modules + 1] = m
  self._names[#self._modules] = name ~= nil and tostring(name) or tostring(#self._modules)
  return m
end

-- The parameters as {name, tensor} pairs, this module's own first, then each child's
-- under "<child name>.".
local function named_parameters(self, prefix, out)
  for _, name in ipairs(self._params) do out[#out + 1] = { prefix .. name, self[name] } end
  for i, m in ipairs(self._modules) do
    named_parameters(m, prefix .. (self._names and self._names[i] or tostring(i)) .. ".", out)
  end
  return out
end

--- The parameter tensors, in a fixed order. They carry gradients: each is marked
-- requires_grad(true) (as torch's parameters are) unless m:requires_grad_(false) unmarked
-- them since.
function Module:parameters()
  local list = {}
  for i, np in ipairs(named_parameters(self, "", {})) do list[i] = np[2] end
  if not self._frozen then
    for _, p in ipairs(list) do
      -- (autograd differentiates float32 only: other parameters stay as they are)
      if not p:is_freed() and p:dtype() == "float32" and not p:requires_grad() then p:requires_grad(true) end
    end
  end
  return list
end

--- {{name, tensor}, ...} with dotted names ("1.weight", "block.2.bias"); marks the
-- tensors as parameters() does.
function Module:named_parameters()
  local list = named_parameters(self, "", {})
  self:parameters()
  return list
end

--- Marks (true) or unmarks (false) every parameter as requiring grad, children's
-- included. Unmarked, modules reuse their outputs again outside lumus.no_grad too.
function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  if type(flag) ~= "boolean" then
    error(("%s:requires_grad_: flag must be a boolean, got %s"):format(self._type, type(flag)), 2)
  end
  for _, np in ipairs(named_parameters(self, "", {})) do np[2]:requires_grad(flag) end
  local function mark(m)
    m._frozen = not flag or nil
    for _, c in ipairs(m._modules) do mark(c) end
  end
  mark(self)
  return self
end

--- Drops the parameters' gradients (p:zero_grad() each).
function Module:zero_grad()
  for _, np in ipairs(named_parameters(self, "", {})) do np[2]:zero_grad() end
  return self
end

--- Training mode (default) or evaluation mode (mode false), for this module and its
-- children: Dropout is the identity in evaluation mode.
function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then
    error(("%s:train: mode must be a boolean, got %s"):format(self._type, type(mode)), 2)
  end
  self.training = mode
  for _, m in ipairs(self._modules) do m:train(mode) end
  return self
end

function Module:eval() return self:train(false) end

--- {[dotted name] = parameter tensor}: the module's own tensors (not copies).
function Module:state_dict()
  local sd = {}
  for _, np in ipairs(named_parameters(self, "", {})) do sd[np[1]] = np[2] end
  return sd
end

--- Copies sd[name] into each parameter (shapes must match). strict (default): every
-- parameter must be given and every key must name one.
function Module:load_state_dict(sd, opts)
  local fname = self._type .. ":load_state_dict"
  if type(sd) ~= "table" then error(("%s: a table {name = tensor} expected, got %s"):format(fname, type(sd)), 2) end
  opts = opts_table(fname, opts, { strict = true }, 3)
  local strict = boolean_opt(fname, opts, "strict", true, 3)
  local params, by_name = named_parameters(self, "", {}), {}
  for _, np in ipairs(params) do by_name[np[1]] = np[2] end
  if strict then
    for k in pairs(sd) do
      if by_name[k] == nil then error(("%s: unexpected key '%s'"):format(fname, tostring(k)), 2) end
    end
  end
  for _, np in ipairs(params) do
    local v = sd[np[1]]
    if v == nil then
      if strict then error(("%s: missing key '%s'"):format(fname, np[1]), 2) end
    elseif not is_tensor(v) then
      error(("%s: %s must be a tensor, got %s"):format(fname, np[1], type(v)), 2)
    elseif shape_string(v:shape()) ~= shape_string(np[2]:shape()) then
      error(("%s: %s has shape %s, the parameter %s"):format(fname, np[1], shape_string(v:shape()), shape_string(np[2]:shape())), 2)
    end
  end
  lumus.no_grad(function()
    for _, np in ipairs(params) do
      local v = sd[np[1]]
      if v ~= nil and not rawequal(v, np[2]) then lumus.copy(np[2], v) end
    end
  end)
  return self
end

--- Records the names of fields that hold this module's own output buffers, which
-- clear_state() and free() release (an output borrowed from a child is not listed).
function Module:register_buffers(...)
  for i = 1, select("#", ...) do self._buffers[#self._buffers + 1] = select(i, ...) end
end

function Module:clear_state()
  for _, name in ipairs(self._buffers) do
    local t = self[name]
    if is_tensor(t) and not self._fresh then t:free() end
    self[name] = nil
  end
  self._fresh = nil
  self.output = nil
  self._call = nil
  for _, m in ipairs(self._modules) do m:clear_state() end
  return self
end

function Module:free()
  self:clear_state()
  for _, p in ipairs(self:parameters()) do p:free() end
end

-- Copies one value (nested table, flat table, bytes or tensor) into parameter t.
local function load_value(what, t, v)
  local shape = t:shape()
  local numel = t:numel()
  local src
  if is_tensor(v) then
    local vs = v:shape()
    if shape_string(vs) ~= shape_string(shape) then
      error(("%s: tensor of shape %s given for a parameter of shape %s"):format(what, shape_string(vs), shape_string(shape)), 0)
    end
    lumus.copy(v, { out = t })
    return
  elseif type(v) == "string" then
    if #v ~= numel * 4 then
      error(("%s: %d bytes given, %d expected (%d float32 values for shape %s)")
        :format(what, #v, numel * 4, numel, shape_string(shape)), 0)
    end
    src = lumus.from_bytes(v, shape)
  elseif type(v) == "table" then
    local ok, vs = pcall(ref.shape, v)
    if not ok then error(("%s: %s"):format(what, (tostring(vs):gsub("^reference%.shape: ", ""))), 0) end
    if #vs == 1 then
      if vs[1] ~= numel then
        error(("%s: flat table of %d numbers given, %d expected (shape %s)"):format(what, vs[1], numel, shape_string(shape)), 0)
      end
    elseif shape_string(vs) ~= shape_string(shape) then
      error(("%s: table of shape %s given for a parameter of shape %s"):format(what, shape_string(vs), shape_string(shape)), 0)
    end
    src = lumus.tensor(v)
    if #vs == 1 and #shape > 1 then src = src:reshape(shape) end
  else
    error(("%s: a table, a string of float32 bytes or a tensor expected, got %s"):format(what, type(v)), 0)
  end
  lumus.copy(src, { out = t })
  src:free()
end

--- Loads parameter values in place (see the header): string keys name this module's
-- parameters, integer keys its children (in registration order).
function Module:load(values, opts)
  local fname = self._type .. ":load"
  if type(values) ~= "table" then
    error(("%s: a table of parameter values expected, got %s"):format(fname, type(values)), 2)
  end
  opts = opts_table(fname, opts, { strict = true }, 3)
  local strict = boolean_opt(fname, opts, "strict", true, 3)
  local nchild = #self._modules
  for k in pairs(values) do
    if compat.is_integer(k) then
      if not self._modules[k] then
        error(("%s: key %d is not a child index (%s)"):format(fname, k,
          nchild > 0 and ("1..%d"):format(nchild) or "it has no children"), 2)
      end
    elseif not (type(k) == "string" and self._params[k]) then
      error(("%s: unknown parameter '%s' (this module has: %s)")
        :format(fname, tostring(k), #self._params > 0 and table.concat(self._params, ", ") or "none"), 2)
    end
  end
  for _, name in ipairs(self._params) do
    local v = values[name]
    if v == nil then
      if strict then error(("%s: missing parameter '%s' (pass {strict = false} to load some)"):format(fname, name), 2) end
    else
      local ok, err = pcall(lumus.no_grad, load_value, ("%s: %s"):format(fname, name), self[name], v)
      if not ok then error(err, 2) end
    end
  end
  for i, m in ipairs(self._modules) do
    if values[i] ~= nil then
      local ok, err = pcall(m.load, m, values[i], opts)
      if not ok then error(("%s: child %d: %s"):format(fname, i, err), 2) end
    elseif strict and #m:parameters() > 0 then
      error(("%s: missing values for child %d (%s; pass {strict = false} to load some)")
        :format(fname, i, tostring(m):match("^[^\n]*")), 2)
    end
  end
  return self
end

---------------------------------------------------------------------------------------
-- Linear

local Linear = make_class("Linear", Module)
nn.Linear = Linear

function Linear:__init(in_features, out_features, opts)
  self.in_features = positive_int("nn.Linear", "in_features", in_features)
  self.out_features = positive_int("nn.Linear", "out_features", out_features)
  opts = opts_table("nn.Linear", opts, { bias = true, seed = true })
  local with_bias = boolean_opt("nn.Linear", opts, "bias", true)
  local seed = opts.seed
  if seed ~= nil and not compat.is_integer(seed) then
    error(("nn.Linear: option seed must be an integer, got %s"):format(tostring(seed)), 3)
  end
  local g = ref.rng(seed or next_seed())
  local bound = 1 / math.sqrt(self.in_features)
  self:register_parameter("weight", lumus.from_bytes(
    uniform_bytes(g, self.out_features * self.in_features, bound), { self.out_features, self.in_features }))
  if with_bias then
    self:register_parameter("bias", lumus.from_bytes(uniform_bytes(g, self.out_features, bound), { self.out_features }))
  end
  self:register_buffers("output")
end

function Linear:forward(x)
  if records(self, x) then
    local y = linear(x, self.weight, self.bias)
    keep_fresh(self, { "output" }, { y })
    return y
  end
  forget_fresh(self)
  local opts = cached_opts(self, x)
  if opts then return linear(x, self.weight, self.bias, opts) end
  local old = self.output
  local buf = reusable(old, x, self.out_features)
  local y
  if buf then
    y = linear(x, self.weight, self.bias, { out = buf })
  else
    y = linear(x, self.weight, self.bias)
    drop(old, y, x)
    self.output = y
  end
  remember(self, { out = y }, x)
  return y
end

function Linear:describe()
  return ("nn.Linear(%d -> %d)%s"):format(self.in_features, self.out_features, self.bias and "" or " without bias")
end

---------------------------------------------------------------------------------------
-- LayerNorm

local LayerNorm = make_class("LayerNorm", Module)
nn.LayerNorm = LayerNorm

local DEFAULT_EPS = 1e-5

function LayerNorm:__init(d, opts)
  self.d = positive_int("nn.LayerNorm", "D (the normalized size)", d)
  opts = opts_table("nn.LayerNorm", opts, { eps = true, affine = true })
  local eps = opts.eps
  if eps == nil then eps = DEFAULT_EPS end
  if type(eps) ~= "number" or not (eps > 0) or eps == math.huge then
    error(("nn.LayerNorm: option eps must be a positive finite number, got %s"):format(tostring(eps)), 3)
  end
  self.eps = eps
  self.affine = boolean_opt("nn.LayerNorm", opts, "affine", true)
  if self.affine then
    self:register_parameter("weight", lumus.ones({ self.d }))
    self:register_parameter("bias", lumus.zeros({ self.d }))
  end
  self:register_buffers("output", "mean", "invstd")
end

function LayerNorm:forward(x)
  if records(self, x) then
    local y, mean, invstd = layer_norm_forward(x, self.weight, self.bias, self.eps)
    keep_fresh(self, { "output", "mean", "invstd" }, { y, mean, invstd })
    return y
  end
  forget_fresh(self)
  local opts = cached_opts(self, x)
  if opts and opts.mean == self.mean and opts.invstd == self.invstd
     and not opts.mean:is_freed() and not opts.invstd:is_freed() then
    return layer_norm_forward(x, self.weight, self.bias, self.eps, opts)
  end
  if not is_tensor(x) then error(("%s: input must be a tensor, got %s"):format(self:describe(), type(x)), 2) end
  local d = x:size(-1)
  if d ~= self.d then
    error(("%s: input's last dimension must be %d, got shape %s"):format(self:describe(), self.d, shape_string(x:shape())), 2)
  end
  -- mean and invstd always have the shape that goes with output's (x's without its
  -- last dimension), so the three are kept and replaced together.
  local old_y, old_mean, old_invstd = self.output, self.mean, self.invstd
  local buf = reusable(old_y, x)
  if buf and not old_mean:is_freed() and not old_invstd:is_freed() then
    opts = { out = buf, mean = old_mean, invstd = old_invstd }
    local y = layer_norm_forward(x, self.weight, self.bias, self.eps, opts)
    remember(self, opts, x)
    return y
  end
  local y, mean, invstd = layer_norm_forward(x, self.weight, self.bias, self.eps)
  drop(old_y, y, x); drop(old_mean, mean, x); drop(old_invstd, invstd, x)
  self.output, self.mean, self.invstd = y, mean, invstd
  remember(self, { out = y, mean = mean, invstd = invstd }, x)
  return y
end

function LayerNorm:describe()
  local extra = {}
  if self.eps ~= DEFAULT_EPS then extra[#extra + 1] = ("eps=%g"):format(self.eps) end
  if not self.affine then extra[#extra + 1] = "affine=false" end
  return ("nn.LayerNorm(%d%s)"):format(self.d, #extra > 0 and ", " .. table.concat(extra, ", ") or "")
end

---------------------------------------------------------------------------------------
-- Activations (elementwise kernels)

-- The lumus function `name`, or an error saying which build lacks it.
local function kernel(name, module)
  local f = lumus[name]
  if type(f) ~= "function" then
    error(("%s: lumus.%s is not available in this build of lumus"):format(module, name), 3)
  end
  return f
end

local GELU = make_class("GELU", Module)
nn.GELU = GELU

function GELU:__init(opts)
  opts = opts_table("nn.GELU", opts, { approximate = true })
  local a = opts.approximate
  if a == nil then a = "none" end
  if a ~= "none" and a ~= "tanh" then
    error(("nn.GELU: option approximate must be \"none\" or \"tanh\", got %s"):format(
      type(a) == "string" and ("%q"):format(a) or type(a)), 3)
  end
  self.approximate = a
  self:register_buffers("output")
end

-- y = f(x, [h,] opts) for the elementwise kernels, into self.output when it fits. They
-- may write in place, so an output that is x itself is reused as well. `like` is the
-- operand whose shape the result has (x, or h when it is the larger of a broadcast).
-- `key` as for cached_opts; `make_opts()` the options of a call without out.
local function elementwise_forward(self, f, x, h, make_opts, like, key)
  if records(self, x, h) then
    local o = make_opts(self)
    local y
    if h == nil then y = f(x, o) else y = f(x, h, o) end
    keep_fresh(self, { "output" }, { y })
    return y
  end
  forget_fresh(self)
  local opts = cached_opts(self, x, h, key)
  if opts then
    if h == nil then return f(x, opts) end
    return f(x, h, opts)
  end
  local old = self.output
  local buf = rawequal(old, x) and old or reusable(old, like or x)
  opts = make_opts(self)
  opts.out = buf
  local y
  if h == nil then y = f(x, opts) else y = f(x, h, opts) end
  if not buf then drop(old, y, x); self.output = y end
  opts.out = y
  remember(self, opts, x, h, key)
  return y
end

local function no_options() return {} end
local function gelu_options(self) return { approximate = self.approximate } end

function GELU:forward(x)
  return elementwise_forward(self, kernel("gelu", "nn.GELU"), x, nil, gelu_options, nil, self.approximate)
end

function GELU:describe()
  return self.approximate == "none" and "nn.GELU" or ('nn.GELU(approximate="%s")'):format(self.approximate)
end

local ReLU = make_class("ReLU", Module)
nn.ReLU = ReLU

function ReLU:__init(opts)
  if opts ~= nil then error("nn.ReLU: takes no arguments", 3) end
  self:register_buffers("output")
end

function ReLU:forward(x) return elementwise_forward(self, kernel("relu", "nn.ReLU"), x, nil, no_options) end

-- Activations without options, each one kernel: nn.SiLU, nn.Tanh, nn.Sigmoid.
for _, a in ipairs { { "SiLU", "silu" }, { "Tanh", "tanh" }, { "Sigmoid", "sigmoid" } } do
  local class_name, op = a[1], a[2]
  local C = make_class(class_name, Module)
  nn[class_name] = C
  function C:__init(opts)
    if opts ~= nil then error(("nn.%s: takes no arguments"):format(class_name), 3) end
    self:register_buffers("output")
  end
  function C:forward(x) return elementwise_forward(self, kernel(op, "nn." .. class_name), x, nil, no_options) end
end

-- nn.Softmax / nn.LogSoftmax([{dim = -1}]): over dim (the last by default; PyTorch
-- warns when dim is left out, lumus takes the last, where a model's logits are).
for _, a in ipairs { { "Softmax", "softmax" }, { "LogSoftmax", "log_softmax" } } do
  local class_name, op = a[1], a[2]
  local C = make_class(class_name, Module)
  nn[class_name] = C
  local fname = "nn." .. class_name
  function C:__init(opts)
    opts = opts_table(fname, opts, { dim = true })
    local d = opts.dim
    if d == nil then d = -1 end
    if type(d) ~= "number" or d ~= math.floor(d) or d == 0 then
      error(("%s: option dim must be a nonzero integer, got %s"):format(fname, tostring(d)), 3)
    end
    self.dim = d
    self:register_buffers("output")
  end
  local function dim_options(self) return { dim = self.dim } end
  function C:forward(x) return elementwise_forward(self, kernel(op, fname), x, nil, dim_options, nil, self.dim) end
  function C:describe() return ("%s(dim=%d)"):format(fname, self.dim) end
end

-- nn.LeakyReLU([negative_slope = 0.01]), nn.ELU([alpha = 1]), nn.Softplus([beta = 1
-- [, threshold = 20]]), nn.Hardtanh([min_val = -1 [, max_val = 1]]), nn.ReLU6(),
-- nn.Hardsigmoid(), nn.Hardswish(), nn.Mish(), nn.LogSigmoid(): the lumus functions of
-- the same names in lower case (several ops each, so a fresh output per call).
for _, a in ipairs { { "LeakyReLU", "leaky_relu", { "negative_slope" }, { 0.01 } }, { "ELU", "elu", { "alpha" }, { 1 } },
                     { "Softplus", "softplus", { "beta", "threshold" }, { 1, 20 } },
                     { "Hardtanh", "hardtanh", { "min_val", "max_val" }, { -1, 1 } },
                     { "ReLU6", "relu6", {}, {} }, { "Hardsigmoid", "hardsigmoid", {}, {} },
                     { "Hardswish", "hardswish", {}, {} }, { "Mish", "mish", {}, {} },
                     { "LogSigmoid", "logsigmoid", {}, {} } } do
  local class_name, op, keys, defaults = a[1], a[2], a[3], a[4]
  local C = make_class(class_name, Module)
  nn[class_name] = C
  local fname = "nn." .. class_name
  function C:__init(...)
    local args = { ... }
    self.opts = {}
    for i, key in ipairs(keys) do
      local v = args[i]
      if v == nil then v = defaults[i] end
      if type(v) ~= "number" or v ~= v then
        error(("%s: %s must be a number, got %s"):format(fname, key, tostring(v)), 3)
      end
      self.opts[key] = v
    end
    if select("#", ...) > #keys then error(("%s: takes at most %d arguments"):format(fname, #keys), 3) end
    lumus[op](lumus.zeros({ 1 }), self.opts)   -- the function checks the values (beta > 0)
  end
  function C:forward(x)
    if not is_tensor(x) then error(("%s: input must be a tensor, got %s"):format(fname, type(x)), 2) end
    local y = lumus[op](x, self.opts)
    self.output = y
    return y
  end
  function C:describe()
    local parts = {}
    for _, key in ipairs(keys) do parts[#parts + 1] = ("%s=%g"):format(key, self.opts[key]) end
    return ("%s(%s)"):format(fname, table.concat(parts, ", "))
  end
end

-- nn.Identity(): x itself.
local Identity = make_class("Identity", Module)
nn.Identity = Identity
function Identity:__init() end
function Identity:forward(x)
  if not is_tensor(x) then error(("nn.Identity: input must be a tensor, got %s"):format(type(x)), 2) end
  self.output = x
  return x
end

-- nn.Flatten([start_dim = 2 [, end_dim = -1]]): t:flatten (a view when the strides allow);
-- PyTorch's default keeps the batch dimension.
local Flatten = make_class("Flatten", Module)
nn.Flatten = Flatten
function Flatten:__init(start_dim, end_dim)
  for _, v in ipairs { { "start_dim", start_dim }, { "end_dim", end_dim } } do
    if v[2] ~= nil and (type(v[2]) ~= "number" or v[2] ~= math.floor(v[2]) or v[2] == 0) then
      error(("nn.Flatten: %s must be a nonzero integer, got %s"):format(v[1], tostring(v[2])), 3)
    end
  end
  self.start_dim, self.end_dim = start_dim or 2, end_dim or -1
end
function Flatten:forward(x)
  if not is_tensor(x) then error(("nn.Flatten: input must be a tensor, got %s"):format(type(x)), 2) end
  local y = lumus.flatten(x, self.start_dim, self.end_dim)
  self.output = y
  return y
end
function Flatten:describe() return ("nn.Flatten(start_dim=%d, end_dim=%d)"):format(self.start_dim, self.end_dim) end

-- nn.RMSNorm(D [, {eps = 1e-6, affine = true}]): lumus.rms_norm over the last dimension,
-- weight [D] (ones) when affine.
local RMSNorm = make_class("RMSNorm", Module)
nn.RMSNorm = RMSNorm
function RMSNorm:__init(d, opts)
  self.d = positive_int("nn.RMSNorm", "D (the normalized size)", d)
  opts = opts_table("nn.RMSNorm", opts, { eps = true, affine = true })
  local eps = opts.eps
  if eps == nil then eps = 1e-6 end
  if type(eps) ~= "number" or not (eps > 0) or eps == math.huge then
    error(("nn.RMSNorm: option eps must be a positive finite number, got %s"):format(tostring(eps)), 3)
  end
  self.eps = eps
  self.affine = boolean_opt("nn.RMSNorm", opts, "affine", true)
  if self.affine then self:register_parameter("weight", lumus.ones({ self.d })) end
  self:register_buffers("output")
end
local function eps_options(self) return { eps = self.eps } end
function RMSNorm:forward(x)
  return elementwise_forward(self, kernel("rms_norm", "nn.RMSNorm"), x, self.weight, eps_options, x, self.eps)
end
function RMSNorm:describe()
  local extra = {}
  if self.eps ~= 1e-6 then extra[#extra + 1] = ("eps=%g"):format(self.eps) end
  if not self.affine then extra[#extra + 1] = "affine=false" end
  return ("nn.RMSNorm(%d%s)"):format(self.d, #extra > 0 and ", " .. table.concat(extra, ", ") or "")
end

---------------------------------------------------------------------------------------
-- Dropout

local Dropout = make_class("Dropout", Module)
nn.Dropout = Dropout

function Dropout:__init(p)
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    error(("nn.Dropout: p must be a number in [0, 1], got %s"):format(tostring(p)), 3)
  end
  self.p = p
end

-- Training: each element is kept with probability 1 - p (lumus.rand(shape) >= p, from
-- lumus's generator) and scaled by 1 / (1 - p), so the expected output is x; a fresh
-- tensor per call. Evaluation mode, or p = 0: x itself.
function Dropout:forward(x)
  if not is_tensor(x) then error(("%s: input must be a tensor, got %s"):format(self:describe(), type(x)), 2) end
  if not self.training or self.p == 0 then
    self.output = x
    return x
  end
  local scale = self.p < 1 and 1 / (1 - self.p) or 0
  local keep = lumus.no_grad(function()
    local mask = lumus.where(lumus.ge(lumus.rand(x:shape()), self.p), scale, 0)
    if x:dtype() ~= "float32" then mask = mask:to(x:dtype()) end
    return mask
  end)
  local y = lumus.mul(x, keep)
  self.output = y
  return y
end

function Dropout:describe() return ("nn.Dropout(p=%g)"):format(self.p) end

---------------------------------------------------------------------------------------
-- Embedding

local Embedding = make_class("Embedding", Module)
nn.Embedding = Embedding

-- weight [num, dim] from the standard normal (torch's default), drawn row-major with
-- lumus.reference's generator seeded as Linear's.
function Embedding:__init(num, dim, opts)
  self.num_embeddings = positive_int("nn.Embedding", "num_embeddings", num)
  self.embedding_dim = positive_int("nn.Embedding", "embedding_dim", dim)
  opts = opts_table("nn.Embedding", opts, { seed = true })
  local seed = opts.seed
  if seed ~= nil and not compat.is_integer(seed) then
    error(("nn.Embedding: option seed must be an integer, got %s"):format(tostring(seed)), 3)
  end
  local g = ref.rng(seed or next_seed())
  local n = self.num_embeddings * self.embedding_dim
  local parts, buf = {}, {}
  for i = 1, n, PACK_CHUNK do
    local m = math.min(PACK_CHUNK, n - i + 1)
    for j = 1, m do buf[j] = g.normal() end
    parts[#parts + 1] = compat.pack_bytes("f32", buf, m)
  end
  self:register_parameter("weight", lumus.from_bytes(table.concat(parts), { self.num_embeddings, self.embedding_dim }))
end

--- ids: an int32 tensor of 1-based rows, any shape; the result [..., dim] is fresh.
function Embedding:forward(ids)
  if not is_tensor(ids) then error(("%s: ids must be an int32 tensor, got %s"):format(self:describe(), type(ids)), 2) end
  if ids:dtype() ~= "int32" then
    error(("%s: ids must be an int32 tensor (1-based rows), got %s"):format(self:describe(), ids:dtype()), 2)
  end
  local y = lumus.embedding(ids, self.weight)
  self.output = y
  return y
end

function Embedding:describe()
  return ("nn.Embedding(%d, %d)"):format(self.num_embeddings, self.embedding_dim)
end

---------------------------------------------------------------------------------------
-- Containers

-- Children lines, Torch-style: "(i): <child>" with the child's own lines indented.
local function child_lines(children)
  local lines = {}
  for i, m in ipairs(children) do
    lines[#lines + 1] = ("  (%d): %s"):format(i, (tostring(m):gsub("\n", "\n  ")))
  end
  return table.concat(lines, "\n")
end

local Sequential = make_class("Sequential", Module)
nn.Sequential = Sequential

function Sequential:__init(...)
  self.modules = self._modules
  for i = 1, select("#", ...) do
    local m = select(i, ...)
    if not is_module(m) then
      error(("nn.Sequential: argument %d is not a module (got %s)"):format(i, type(m)), 3)
    end
    self:register_module(m)
  end
end

--- Appends a module; returns the Sequential.
function Sequential:add(m)
  if not is_module(m) then error(("nn.Sequential:add: a module expected, got %s"):format(type(m)), 2) end
  self:register_module(m)
  self._plan = nil
  return self
end

function Sequential:get(i) return self._modules[i] end
function Sequential:size() return #self._modules end

--- Fusion of neighbouring children (on by default): seq:fusion(false) turns it off,
-- seq:fusion() tells whether it is on. Returns the Sequential when setting.
function Sequential:fusion(on)
  if on == nil then return self._fusion ~= false end
  if type(on) ~= "boolean" then
    error(("nn.Sequential:fusion: a boolean expected, got %s"):format(type(on)), 2)
  end
  self._fusion = on
  self._plan = nil
  return self
end

-- Fusion (docs/capture.md "Fused modules"): Linear followed by an activation module
-- (GELU, ReLU) runs as one lumus.linear with {activation =}; LayerNorm followed by Linear
-- (and an activation) as one lumus.layer_norm_linear. Only plain instances (the classes
-- themselves, no forward of their own) fuse, and a call fuses only when autograd would
-- not record it (module.records): under recording each child runs its own forward. The
-- fused result is the last fused child's output; the other fused children's outputs
-- (LayerNorm's output, mean, invstd; Linear's before the activation) are not written.
local FUSED_ACTIVATION = {
  [GELU] = function(m) return m.approximate == "tanh" and "gelu_tanh" or "gelu" end,
  [ReLU] = function() return "relu" end,
}

local function plain_instance(m, cls) return getmetatable(m) == cls and rawget(m, "forward") == nil end

-- Steps over the children: {module = m} runs m:forward; {ln =, lin =, act =} a fused run.
local function fusion_plan(mods)
  local plan, i, n = {}, 1, #mods
  while i <= n do
    local m = mods[i]
    local step
    if plain_instance(m, LayerNorm) and plain_instance(mods[i + 1], Linear) and mods[i + 1].in_features == m.d then
      step = { ln = m, lin = mods[i + 1], last = i + 1 }
    elseif plain_instance(m, Linear) then
      step = { lin = m, last = i }
    end
    if step then
      local a = mods[step.last + 1]
      if a ~= nil and FUSED_ACTIVATION[getmetatable(a)] and rawget(a, "forward") == nil then
        step.act, step.last = a, step.last + 1
      end
      if step.last == i then step = nil end   -- a Linear alone: its own forward
    end
    if step == nil then step = { module = m, last = i } end
    plan[#plan + 1] = step
    i = step.last + 1
  end
  plan.n = n
  return plan
end

-- Runs a fused step on x, or returns nil when it cannot (then each child runs its own).
local function run_fused(step, x)
  local ln, lin, act = step.ln, step.lin, step.act
  local c = step.call
  local owner = act or lin
  if c and c.x[1] == x and c.out == owner.output and getmetatable(x) == Tensor and not c.out:is_freed()
     and not records(lin, x) and not (ln and records(ln, x)) then
    if c.ln then return lumus.layer_norm_linear(x, ln.weight, ln.bias, lin.weight, lin.bias, c.opts) end
    if ln then
      -- LayerNorm by its own forward (its call cache), then linear on its output.
      local h = ln:forward(x)
      if h == c.h then return linear(h, lin.weight, lin.bias, c.opts) end
      return nil
    end
    return linear(x, lin.weight, lin.bias, c.opts)
  end
  local x_in = x
  if not is_tensor(x) or x:size(x:dim()) ~= lin.in_features or records(lin, x) or (ln and records(ln, x))
     or (act and records(act, x)) then
    return nil
  end
  if ln then
    -- LayerNorm joins only where layer_norm_linear is one dispatch for these rows (else
    -- it would normalize into a temporary on every call): asked once per input shape.
    local rows = math.floor(x:numel() / lin.in_features)
    if step.rows ~= rows then
      step.rows = rows
      step.ln_joins = lumus.tune.linear(math.max(rows, 1), lin.out_features, lin.in_features).layer_norm_fused
    end
    if not step.ln_joins then
      x = ln:forward(x)
      ln = nil
    end
  end
  forget_fresh(owner)
  local old = owner.output
  local buf = reusable(old, x, lin.out_features)
  local opts = { out = buf, activation = act and FUSED_ACTIVATION[getmetatable(act)](act) or nil }
  local y
  if ln then
    opts.eps = ln.eps
    y = lumus.layer_norm_linear(x, ln.weight, ln.bias, lin.weight, lin.bias, opts)
  else
    y = linear(x, lin.weight, lin.bias, opts)
  end
  if not buf then drop(old, y, x); owner.output = y end
  opts.out = y
  owner._call = nil
  step.call = { x = setmetatable({ x_in }, WEAK), out = y, opts = opts, ln = ln ~= nil, h = ln == nil and step.ln and x or nil }
  return y
end

-- output is borrowed: the last child's (or x), not a buffer of the Sequential's own.
function Sequential:forward(x)
  local cur = x
  local mods = self._modules
  if self._fusion == false or type(lumus.layer_norm_linear) ~= "function" then
    for _, m in ipairs(mods) do cur = m:forward(cur) end
  else
    local plan = self._plan
    if plan == nil or plan.n ~= #mods then plan = fusion_plan(mods); self._plan = plan end
    for k = 1, #plan do
      local step = plan[k]
      local m = step.module
      if m then
        cur = m:forward(cur)
      else
        local y = run_fused(step, cur)
        if y == nil then
          local first = step.ln or step.lin
          cur = first:forward(cur)
          if step.ln then cur = step.lin:forward(cur) end
          if step.act then cur = step.act:forward(cur) end
        else
          cur = y
        end
      end
    end
  end
  self.output = cur
  return cur
end

function Sequential:describe()
  local flow = { "[input" }
  for i = 1, #self._modules do flow[#flow + 1] = ("(%d)"):format(i) end
  flow[#flow + 1] = "output]"
  local s = "nn.Sequential {\n  " .. table.concat(flow, " -> ")
  if #self._modules > 0 then s = s .. "\n" .. child_lines(self._modules) end
  return s .. "\n}"
end

local Residual = make_class("Residual", Module)
nn.Residual = Residual

function Residual:__init(block)
  if not is_module(block) then
    error(("nn.Residual: a module expected, got %s"):format(type(block)), 3)
  end
  self.block = self:register_module(block, "block")
  self:register_buffers("output")
end

-- x + block(x) into its own buffer: the block's output stays the block's.
function Residual:forward(x)
  local h = self.block:forward(x)
  local like = x
  if is_tensor(h) and is_tensor(x) and h:dim() > x:dim() then like = h end
  return elementwise_forward(self, kernel("add", "nn.Residual"), x, h, no_options, like)
end

function Residual:describe()
  return "nn.Residual {\n  [input -> (1) -> + input -> output]\n" .. child_lines(self._modules) .. "\n}"
end

function Residual:load(values, opts)
  local ok, err = pcall(self.block.load, self.block, values, opts)
  if not ok then error(("nn.Residual:load: %s"):format(err), 2) end
  return self
end

-- MultiheadAttention, KVCache, TransformerBlock: lua/lumus/nn_transformer.lua.
require("lumus.nn_transformer").attach(nn)

---------------------------------------------------------------------------------------
-- Utilities

nn.utils = {}

-- clip_grad_norm_(params, max_norm [, {norm_type = 2}]): the norm of all the gradients
-- together (2: sqrt of the sum of squares; math.huge: the largest |g|); every gradient is
-- multiplied in place by min(1, max_norm / (norm + 1e-6)), a one-element tensor on the
-- device, so nothing waits for the device. Returns the norm (a one-element tensor).
-- Parameters without a gradient are skipped; with none at all the norm is 0.
function nn.utils.clip_grad_norm_(params, max_norm, opts)
  local fname = "nn.utils.clip_grad_norm_"
  if type(params) ~= "table" or is_tensor(params) then
    if is_tensor(params) then params = { params }
    else error(("%s: params must be a list of tensors, got %s"):format(fname, type(params)), 2) end
  end
  if type(max_norm) ~= "number" or not (max_norm >= 0) then
    error(("%s: max_norm must be a number >= 0, got %s"):format(fname, tostring(max_norm)), 2)
  end
  opts = opts_table(fname, opts, { norm_type = true }, 3)
  local p = opts.norm_type == nil and 2 or opts.norm_type
  if p ~= 2 and p ~= math.huge then
    error(("%s: option norm_type must be 2 or math.huge, got %s"):format(fname, tostring(p)), 2)
  end
  return lumus.no_grad(function()
    local grads = {}
    for i, t in ipairs(params) do
      if not is_tensor(t) then error(("%s: params[%d] must be a tensor, got %s"):format(fname, i, type(t)), 4) end
      local g = t:grad()
      if g ~= nil then grads[#grads + 1] = g end
    end
    if #grads == 0 then return lumus.zeros({ 1 }) end
    local total
    for _, g in ipairs(grads) do
      local part = p == 2 and lumus.sum(lumus.mul(g, g)) or (lumus.max(lumus.abs(g)))
      if total == nil then total = part
      elseif p == 2 then total = lumus.add(total, part)
      else total = lumus.maximum(total, part) end
    end
    if p == 2 then total = lumus.sqrt(total) end
    local coef = lumus.clamp(lumus.div(max_norm, lumus.add(total, 1e-6)), nil, 1)
    for _, g in ipairs(grads) do lumus.mul(g, coef, { out = g }) end
    return total
  end)
end

return nn
