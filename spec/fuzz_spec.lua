-- Fuzzing the public surface from Lua: every function of the lumus module table and
-- every Tensor method (found at run time, so ops added later are fuzzed too) is called
-- with random argument lists built from hostile values. Each call runs in pcall and may
-- only succeed or raise a string naming the function; afterwards every tensor the
-- fuzzer did not hand out for writing still holds its bytes, and device memory in use
-- returns to where it started. A successful call of an op with a float64 counterpart
-- in lumus.reference (elementwise, row ops, matmul, linear, layer_norm_forward, copy,
-- fill, factories) must also give its values (see "Values" below), also under random
-- forced tunings of the LayerNorm and row kernels.
--
-- LUMUS_FUZZ_CALLS (default 100000) and LUMUS_FUZZ_SEED set the run; a failure message
-- gives the seed and the call number to replay. LUMUS_FUZZ_MAX_CALL_S bounds one call.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"

local CALLS = compat.integer(tonumber(os.getenv("LUMUS_FUZZ_CALLS") or "")) or 100000
local SEED = compat.integer(tonumber(os.getenv("LUMUS_FUZZ_SEED") or "")) or 5150
-- No call may take longer (a hang); under valgrind a pipeline compile alone takes seconds.
local MAX_CALL_S = tonumber(os.getenv("LUMUS_FUZZ_MAX_CALL_S") or "") or 10

-- Change state shared by the whole lua_State: fuzzed on their own below, then restored
-- (so are the tuning hooks, the functions of lumus.tune).
-- save_safetensors writes files named by its (random) first argument: spec/safetensors_spec.lua
-- feeds it and load_safetensors bad input instead. warm_up builds every pipeline the
-- machine's cache file lists (hundreds once a suite has run: a minute under ASan), so
-- spec/pipeline_cache_spec.lua checks it, and its arguments, with a private cache file.
local SEPARATE = { set_memory_limit = true, manual_seed = true, set_rng_state = true, save_safetensors = true,
                   warm_up = true }
-- Write into their first argument, so that tensor is not expected to keep its bytes (so
-- does any name ending in "_", the Torch convention for in-place ops); copy(dst, src)
-- writes dst.
local WRITES_FIRST = { fill = true, write_bytes = true, copy = true }
-- Return a view of their first argument (the same storage), or a list of views. Such a
-- result is not kept as junk: a later write through it would change a group the fuzzer
-- thinks unwritten. A function missing here shows as a group's value changing between
-- two calls that only read it (seed 35 found flatten); a spec below checks the list.
local VIEWS = { transpose = true, permute = true, narrow = true, select = true, reshape = true, view = true,
                expand = true, unsqueeze = true, squeeze = true, contiguous = true, detach = true,
                flatten = true, t = true, split = true, chunk = true }
local function writes_first(name) return WRITES_FIRST[name] or name:sub(-1) == "_" end
-- Output-style keys an options table may carry (any table argument is fair game).
local KEYS = { "out", "mean", "invstd", "weight", "bias", "eps", "transpose_b", "transpose_a", "dim", "alpha", "beta", "x",
               "mask", "causal", "scale", "offset", "interleaved" }

local MARK = "fuzz: raised by the fuzzer's own callback"   -- errors from our metamethods
local MARK_TABLE = setmetatable({}, { __tostring = function() return MARK end })

local g = ref.rng(SEED)
local function int(n) return math.floor(g.uniform() * n) + 1 end   -- 1..n
local function pick(list) return list[int(#list)] end
local function chance(p) return g.uniform() < p end

-- The surface, sorted by name so a seed always makes the same calls.
local function discover()
  local probe = lumus.zeros(1)
  local mt = getmetatable(probe)
  probe:free()
  local list, names_of = {}, {}
  local function add(name, f, kind)
    list[#list + 1] = { name = name, f = f, kind = kind }
    names_of[f] = names_of[f] or {}
    table.insert(names_of[f], name)
  end
  for name, f in pairs(lumus) do
    if type(f) == "function" and not SEPARATE[name] then add(name, f, "function") end
  end
  for name, f in pairs(mt.methods) do
    if type(f) == "function" then add(name, f, "method") end
  end
  for _, mm in ipairs { "__tostring", "__close", "__gc" } do
    if type(mt[mm]) == "function" then add(mm, mt[mm], "metamethod") end
  end
  table.sort(list, function(a, b) return a.kind .. a.name < b.kind .. b.name end)
  return list, names_of
end

---------------------------------------------------------------------------------------
-- Tensors the fuzzer owns. A group is one storage: a base tensor and views of it, with
-- the bytes it must hold while no handle of it was passed for writing ("dirty").
-- Sentinel groups are never passed at all: allocated between the others, they catch a
-- kernel writing past the end of its tensor.
local SHAPES = { { 4 }, { 2, 4 }, { 4, 4 }, { 3 }, { 1 }, { 2, 2, 4 }, { 8 }, { 1, 4 }, { 3, 5 }, { 2, 3, 1, 4 },
                 { 5, 2 }, { 4, 3 } }

local function random_bytes_f32(n)
  local parts = {}
  for i = 1, n do
    local v = g.normal() * 4
    if chance(0.02) then v = pick { 0 / 0, math.huge, -math.huge, compat.negative_zero, 1e38, 1e-40 } end
    parts[i] = compat.pack_bytes("f32", { v })
  end
  return table.concat(parts)
end

local function numel_of(shape)
  local n = 1
  for i = 1, #shape do n = n * shape[i] end
  return n
end

local alloc   -- the fuzzer's own allocations (below)

local function new_group(shape, sentinel)
  local n = numel_of(shape)
  local bytes = random_bytes_f32(n)
  local base = alloc(lumus.from_bytes, bytes, shape)
  local grp = { base = base, handles = { base }, bytes = bytes, sentinel = sentinel, dirty = false }
  if not sentinel then
    for _, alt in ipairs { { n }, { 1, n }, { n, 1 } } do
      grp.handles[#grp.handles + 1] = base:reshape(alt)
    end
  end
  return grp
end

local groups, sentinels, by_tensor = {}, {}, setmetatable({}, { __mode = "k" })
local junk = {}            -- results, old dirty tensors, freed handles: no expectations
local JUNK_MAX = 48

local function current_group(grp) return groups[grp.index] == grp end

local function register(grp) for _, h in ipairs(grp.handles) do by_tensor[h] = grp end end

local function refill(i)
  local old = groups[i]
  if old then for _, h in ipairs(old.handles) do junk[int(JUNK_MAX)] = h end end
  groups[i] = new_group(SHAPES[(i - 1) % #SHAPES + 1], false)
  groups[i].index = i
  register(groups[i])
end

local function add_junk(v)   -- small ones only, so the junk never fills the memory cap
  if getmetatable(v) == getmetatable(groups[1].base) and (v:is_freed() or v:numel() <= 4096) then
    junk[int(JUNK_MAX)] = v
  end
end

-- The fuzzer's own allocations: if the cap is full, drop the junk and try again.
function alloc(f, ...)
  local ok, t = pcall(f, ...)
  if ok then return t end
  junk = {}
  collectgarbage("collect"); collectgarbage("collect"); lumus.synchronize()
  return f(...)
end

---------------------------------------------------------------------------------------
-- Values. `dirty` collects the tensors a call may write (those placed in tables).
local NUMBERS = { 0, 1, 2, 3, 4, 8, -1, -2, 0.5, 1.5, compat.negative_zero, 1e-5, 1e-45, 3.0, 2 ^ 31, 2 ^ 32 + 1,
                  2 ^ 40, 2 ^ 53, 2 ^ 63, compat.maxinteger, compat.mininteger, math.floor(compat.maxinteger / 2),
                  0 / 0, math.huge, -math.huge, 1e300, -1e300, 2 ^ 31 - 1, 65536 }
local SIZES_OK = { 1, 2, 3, 4, 5, 8 }
local SIZES_BAD = { 0, -1, -4, 2 ^ 31, 2 ^ 32, 2 ^ 40, 2 ^ 41, 2 ^ 62, compat.maxinteger, compat.mininteger,
                    1.5, 0.5, 0 / 0, math.huge, -math.huge, "2", true, {}, 3.0 }

local any_value   -- forward

local function random_tensor(dirty, for_write)
  local r = g.uniform()
  local t
  if r < 0.75 then
    local grp = pick(groups)
    t = pick(grp.handles)
  elseif r < 0.95 and #junk > 0 then
    t = junk[int(#junk)]
  else
    t = alloc(lumus.ones, pick(SHAPES)); t:free()   -- a freed tensor
  end
  if t ~= nil and for_write then dirty[#dirty + 1] = t end
  return t
end

local function valid_shape()
  local nd = chance(0.9) and int(3) or int(8)
  local s = {}
  for i = 1, nd do s[i] = nd > 3 and int(2) or pick(SIZES_OK) end
  return s
end

local function hostile_shape()
  local r = int(12)
  if r == 1 then return {} end
  if r == 2 then local s = {} for i = 1, 9 + int(100) do s[i] = 1 end return s end
  if r == 3 then return { 1, nil, 3 } end
  if r == 4 then return { [2] = 4 } end
  if r == 5 then return { 2 ^ 31, 2 ^ 31 } end
  if r == 6 then return { compat.maxinteger, 2 } end
  if r == 7 then return { 2 ^ 20, 2 ^ 20, 2 ^ 20 } end
  if r == 8 then
    return setmetatable({}, { __len = function() return 3 end, __index = function() return 2 end })
  end
  if r == 9 then
    return setmetatable({ 2, 2 }, { __len = function() error(MARK) end, __index = function() error(MARK) end })
  end
  local s = valid_shape()
  s[int(#s)] = pick(SIZES_BAD)
  return s
end

local function nested_numbers(dirty)
  local shape = valid_shape()
  local function build(d)
    local t = {}
    for i = 1, shape[d] do
      if d == #shape then
        t[i] = chance(0.97) and g.normal() or pick { 0 / 0, math.huge, 1e300, compat.negative_zero, compat.maxinteger }
      else
        t[i] = build(d + 1)
      end
    end
    return t
  end
  local t = build(1)
  local r = int(14)
  -- mostly well formed; else one defect: a hole, a string, a ragged row, a tensor, a
  -- cycle, a shared row, too deep, a metatable
  local function leaf_parent(x)
    while type(x[1]) == "table" do x = x[int(#x)] end
    return x
  end
  if r == 1 then local p = leaf_parent(t); p[int(#p)] = nil
  elseif r == 2 then local p = leaf_parent(t); p[int(#p)] = pick { "1", true, {}, print }
  elseif r == 3 and type(t[1]) == "table" then t[int(#t)] = { 1 }
  elseif r == 4 then local p = leaf_parent(t); p[int(#p)] = random_tensor(dirty, false)
  elseif r == 5 then t[1] = t
  elseif r == 6 and type(t[1]) == "table" then for i = 2, #t do t[i] = t[1] end
  elseif r == 7 then for _ = 1, 8 do t = { t } end
  elseif r == 8 then setmetatable(t, { __index = function() error(MARK) end, __len = function() return 1e9 end })
  end
  return t
end

local function options_table(dirty, depth)
  local t = {}
  for _ = 1, int(3) do
    local k = pick(KEYS)
    if chance(0.7) then t[k] = random_tensor(dirty, true) else t[k] = any_value(dirty, depth + 1) end
  end
  if chance(0.15) then
    -- metamethods that error or answer junk; lumus must read options raw
    local mode = int(4)
    setmetatable(t, {
      __index = function(_, k)
        if mode == 1 then error(MARK) end
        if mode == 2 then return random_tensor(dirty, true) end
        if mode == 3 then return pick(NUMBERS) end
        return k
      end,
      __len = function() if mode == 1 then error(MARK) end return -1 end,
      __pairs = function() error(MARK) end,
    })
  end
  return t
end

local function random_string()
  local r = int(4)
  if r == 1 then return "" end
  if r == 2 then return pick { "3", "0x10", "1e400", "nan", "-1", "4 4" } end
  if r == 3 then return random_bytes_f32(pick { 1, 2, 4, 8, 16, 32 }) end
  local b = {}
  for i = 1, int(40) do b[i] = string.char(int(256) - 1) end
  return table.concat(b)
end

local CALLBACKS
local function callback() return pick(CALLBACKS) end

function any_value(dirty, depth)
  depth = depth or 0
  local r = g.uniform()
  if r < 0.30 then return random_tensor(dirty, false) end
  if r < 0.40 then return nil end
  if r < 0.55 then return pick(NUMBERS) end
  if r < 0.63 then return valid_shape() end
  if r < 0.67 then return hostile_shape() end
  if r < 0.72 then return random_string() end
  if r < 0.74 then return chance(0.5) end
  if r < 0.82 and depth < 2 then return options_table(dirty, depth) end
  if r < 0.87 then return nested_numbers(dirty) end
  if r < 0.89 then return callback() end
  if r < 0.90 then return pick { io.stdout, coroutine.create(function() end), MARK_TABLE } end
  return pick(SIZES_OK)
end

local function first_arg(dirty, entry)
  local r = g.uniform()
  if entry.kind ~= "function" and r < 0.8 then return random_tensor(dirty, false) end
  if r < 0.45 then return random_tensor(dirty, false) end
  if r < 0.60 then return chance(0.8) and valid_shape() or hostile_shape() end
  if r < 0.70 then return nested_numbers(dirty) end
  if r < 0.75 then return random_string() end
  return any_value(dirty)
end

-- Half the calls draw their arguments around one shape S, so that ops get operands that
-- fit (and their deeper checks and kernels run): a tensor of shape S or a view of it, a
-- vector of S's last size, S itself, a shape of as many elements, S's byte string, an
-- element index, an options table whose tensors have shape S.
local function coherent_options(dirty, gi)
  local o = {}
  -- options are strict (a key the function does not take raises): most tables hold
  -- out= alone, so that the out paths run
  if chance(0.4) then
    for _ = 1, int(3) do
      local t = chance(0.5) and pick(groups).base or groups[gi].base
      dirty[#dirty + 1] = t
      o[pick(KEYS)] = t
    end
  end
  if chance(0.6) then o.out = groups[gi].base; dirty[#dirty + 1] = groups[gi].base end
  return o
end

local function coherent_value(dirty, gi, position)
  local grp = groups[gi]
  local shape = SHAPES[gi]
  local n = numel_of(shape)
  local r = g.uniform()
  -- the second argument is most often a second operand: fewer nils there
  if position == 2 then r = 0.15 + 0.85 * r end
  if r < 0.30 then return nil end
  if r < 0.40 then   -- a vector of S's last size (weights, biases)
    local d = shape[#shape]
    for j, s2 in ipairs(SHAPES) do if #s2 == 1 and s2[1] == d then return groups[j].base end end
    return grp.base
  end
  if r < 0.52 then   -- a matrix [k, n] or [n, k] for S's last size k (matmul, linear)
    local d = shape[#shape]
    local fits = {}
    for j, s2 in ipairs(SHAPES) do
      if #s2 == 2 and (s2[1] == d or s2[2] == d) then fits[#fits + 1] = groups[j].base end
    end
    if #fits > 0 then return pick(fits) end
  end
  if r < 0.58 then return chance(0.8) and grp.base or pick(grp.handles) end
  if r < 0.72 then return pick { 1, 2, n, n + 1, 1e-5, 0.5, -1, #shape, 3.5 } end
  if r < 0.80 then return coherent_options(dirty, gi) end
  if r < 0.86 then return pick { { compat.unpack(shape) }, { n }, { -1 }, { 1, -1 }, { n, 1 }, n } end
  if r < 0.88 then return chance(0.8) and grp.bytes or grp.bytes:sub(2) end
  return any_value(dirty)
end

local function coherent_args(dirty, entry, nargs)
  local gi = int(#groups)
  local grp = groups[gi]
  local args = {}
  if nargs > 0 then
    local r = g.uniform()
    if entry.kind ~= "function" or r < 0.60 then
      args[1] = chance(0.8) and grp.base or pick(grp.handles)
      if writes_first(entry.name) then dirty[#dirty + 1] = args[1] end
    elseif r < 0.78 then args[1] = { compat.unpack(SHAPES[gi]) }
    elseif r < 0.85 then args[1] = grp.bytes
    elseif r < 0.91 then args[1] = nested_numbers(dirty)
    elseif r < 0.95 then args[1] = callback()
    else args[1] = any_value(dirty) end
  end
  for a = 2, nargs do args[a] = coherent_value(dirty, gi, a) end
  if entry.name == "from_bytes" and chance(0.5) then   -- string, then its shape
    args[1], args[2] = grp.bytes, { compat.unpack(SHAPES[gi]) }
  end
  return args
end

---------------------------------------------------------------------------------------
-- Checks.
local failures, nfailures = {}, 0
local function fail(msg)
  nfailures = nfailures + 1
  if #failures < 20 then failures[#failures + 1] = msg end
end

local NAMES, ALIASES
local function names_the_function(e, entry, nargs, passed_fn)
  for _, name in ipairs(ALIASES[entry.f]) do
    if e:find("to '" .. name .. "'", 1, true) or e:find("." .. name .. "'", 1, true)
       or e:find("calling '" .. name .. "'", 1, true) or e:find("^" .. name .. ":")
       or e:find("[.: ]" .. name .. ":") then
      local n = tonumber(e:match("bad argument #(%d+)"))
      if n and n > nargs + 1 then return false, "argument number past the arguments given" end
      return true
    end
  end
  -- the error may come from a function it was handed (gpu_time), or from a method that
  -- a function written in Lua calls (__tostring reads with to_bytes)
  if passed_fn or debug.getinfo(entry.f, "S").what == "Lua" then
    for _, name in ipairs(NAMES) do if e:find(name, 1, true) then return true end end
  end
  return false, "does not name the function"
end

local function check_error(e, entry, nargs, passed_fn, where)
  if rawequal(e, MARK_TABLE) then return end
  if type(e) ~= "string" then return fail(where .. ": error value is a " .. type(e)) end
  if e:find(MARK, 1, true) then return end
  if e:find("to '?'", 1, true) or e:find("^%?:") then return fail(where .. ": unnamed: " .. e) end
  local ok, why = names_the_function(e, entry, nargs, passed_fn)
  if not ok then fail(("%s: %s: %q"):format(where, why, e)) end
end

-- Every clean group still holds its bytes; dirty ones are replaced.
local function check_groups(where)
  for _, list in ipairs { groups, sentinels } do
    for i, grp in ipairs(list) do
      local live
      for _, h in ipairs(grp.handles) do if not h:is_freed() then live = h break end end
      if grp.dirty or not live then
        if list == groups then refill(i) else
          if not live then fail(where .. ": a sentinel tensor was freed") end
        end
      else
        -- (a finalizer of the fuzzer's may free this handle during the read itself)
        local read_ok, got = pcall(live.to_bytes, live)
        if not read_ok then
          if not tostring(got):find("tensor has been freed", 1, true) then fail(where .. ": " .. tostring(got)) end
          if list == groups then refill(i) end
        elseif got ~= grp.bytes then
          fail(("%s: %s tensor %s changed"):format(where, grp.sentinel and "sentinel" or "unwritten",
                                                     live:describe()))
          if list == groups then refill(i) else grp.bytes = got end
        end
      end
    end
  end
end

---------------------------------------------------------------------------------------
-- Values: every successful call of an op whose result is known is checked against
-- lumus.reference (float64), on the inputs as they were before the call. Tensors stay
-- small (SHAPES, junk up to 4096 elements). The ops called most often are checked on a
-- sample of their calls (VALUE_RATE), the others on every call. Not to wait
-- for the device at every call, the values are taken on the device: a copy (lumus.copy)
-- of each input before the call, unless the fuzzer knows its bytes, and of each result
-- after it; they are read and checked in batches, at the fuzzer's own reads of its
-- groups (a mismatch gives the call number and its arguments all the same).
--
-- Tolerances (abs bound per element; a NaN wants a NaN, an infinity the same infinity):
--   neg, relu, copy, fill, factories: exact;  add, sub, mul, scale: 2 ulp;  div: 3 ulp
--   (divisors beyond 2^+-126, where Vulkan does not bound div, are not checked);
--   erf, gelu*: 1e-6 max(1, |want|);  softmax: 1e-5 |want| + 1e-6;
--   exp, log, sqrt, rsqrt, sin, cos, expm1, exp2, log2, log10: 2 ulp; tanh, sigmoid,
--   log1p, reciprocal, atan, atan2, sinh, cosh, asinh, acosh, atanh: 3; square: 1; silu, pow, tan, asin, acos: 4; floor, ceil, round, trunc, sign, maximum, minimum, clamp,
--   where, comparisons (0/1): exact; float16/bfloat16 results: the reference rounded to
--   the format, within one of its ulps;
--   sum, mean: 1e-6 sum|x| (/ D) over the row's finite entries;  matmul, linear:
--   1e-6 sum|a||b| (+ 1e-6 |bias|);  layer_norm_forward y: 1e-4 (|w| or 1) max(1, |y0|)
--   + 1e-6 |bias|, mean: 1e-6 max|x|, invstd: 1e-4 relative.
-- Not checked: where float32 overflow makes the result depend on the order of operations
-- (a bound above 1e37), layer_norm rows with a non-finite or huge (|x| > 1e15) value
-- (their semantics are spec/layer_norm_spec's), eps = 0 on a constant row.
-- Subnormals: a device may flush them (docs/semantics.md), so an element also passes
-- against the reference on the inputs with subnormals flushed to zero, and 0 passes
-- where the wanted value is subnormal.
local FLT_MAX = (2 - 2 ^ -23) * 2 ^ 127
-- Each check costs a device copy of the operands and results (about as much as the call):
-- these rates keep the fuzz spec's run time within about a quarter of what it is without.
local VALUE_RATE = { neg = 0.15, relu = 0.15, erf = 0.15, gelu = 0.15, gelu_erf = 0.15, gelu_tanh = 0.15,
                     softmax = 0.25, sum = 0.15, mean = 0.15, add = 0.4, sub = 0.4, mul = 0.4, div = 0.4, copy = 0.4 }
local FLT_MIN = 2 ^ -126
local ULP = 2 ^ -23
local huge, abs = math.huge, math.abs
local T_MT   -- the tensor metatable (set by the test)

local function is_tensor(v) return getmetatable(v) == T_MT end

local function floats(bytes)
  local out = {}
  for i = 1, math.floor(#bytes / 4) do out[i] = (compat.unpack_bytes("f32", bytes, 4 * i - 3, 1)[1]) end
  return out
end

-- The elements of bytes in a dtype as numbers (bool: 0 or 1; float16/bfloat16 exactly).
local function elements(bytes, dtype)
  if dtype == nil or dtype == "float32" then return floats(bytes) end
  local out = {}
  if dtype == "int32" then
    for i = 1, math.floor(#bytes / 4) do out[i] = (compat.unpack_bytes("i32", bytes, 4 * i - 3, 1)[1]) end
  elseif dtype == "bool" then
    for i = 1, #bytes do out[i] = bytes:byte(i) end
  else
    for i = 1, math.floor(#bytes / 2) do
      local h = compat.unpack_bytes("u16", bytes, 2 * i - 1, 1)[1]
      local bits = h * 0x10000                   -- bfloat16: the top half of a float32
      if dtype == "float16" then
        local e, m = math.floor(h / 1024) % 32, h % 1024
        local v = e == 31 and (m == 0 and huge or 0 / 0) or e == 0 and m * 2.0 ^ -24 or (1024 + m) * 2.0 ^ (e - 25)
        out[i] = h >= 0x8000 and -v or v
      else
        out[i] = (compat.unpack_bytes("f32", compat.pack_bytes("u32", { bits }), 1, 1)[1])
      end
    end
  end
  return out
end

-- The value of a tensor argument before the call: {shape =, flat =, nested =, dtype =},
-- nil when it cannot be read (freed). A clean group's bytes are known without a read.
local function snapshot_of(shape, bytes, dtype)
  local flat = elements(bytes, dtype)
  return { shape = shape, flat = flat, nested = ref.nest(flat, shape), bytes = bytes, dtype = dtype or "float32" }
end

-- t's value now: a snapshot where its bytes are known, else {shape =, copy =} (a copy
-- recorded on the device, read later by `realize`); nil when t cannot be read.
local function capture(t, group_of, current)
  -- (a finalizer of the fuzzer's may free t meanwhile)
  local ok, shape = pcall(t.shape, t)
  local okn, numel = pcall(t.numel, t)
  if not ok or not okn or numel > 4096 then return nil end
  local okd, dtype = pcall(t.dtype, t)
  if not okd then return nil end
  local grp = group_of and group_of[t]
  if grp and not grp.dirty and current(grp) then return snapshot_of(shape, grp.bytes) end
  local okc, c = pcall(lumus.copy, t)
  if not okc then return nil end
  return { shape = shape, copy = c, dtype = dtype }
end

-- A captured value as a snapshot (reading its copy), or nil.
local function realize(v)
  if type(v) ~= "table" or not v.copy then return v end
  local ok, bytes = pcall(v.copy.to_bytes, v.copy)
  pcall(v.copy.free, v.copy)
  if not ok then return nil end
  return snapshot_of(v.shape, bytes, v.dtype)
end

local function subnormal(v) return v ~= 0 and abs(v) < FLT_MIN end

local function flushed(flat)
  local out, any = {}, false
  for i = 1, #flat do
    if subnormal(flat[i]) then out[i] = flat[i] < 0 and compat.negative_zero or 0.0; any = true else out[i] = flat[i] end
  end
  return out, any
end

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

local function elementwise_bounds(want, rel, absb)
  local tol = {}
  for i = 1, #want do tol[i] = rel * abs(want[i]) + (absb or 0) end
  return tol
end

local function rows_of(flat, d)
  local rows = {}
  for r = 1, math.floor(#flat / d) do
    local row = {}
    for j = 1, d do row[j] = flat[(r - 1) * d + j] end
    rows[r] = row
  end
  return rows
end

local function f32_arg(v)   -- a number argument as the op rounds it
  if compat.is_integer_type(v) then v = v + 0.0 end
  return ref.f32(v)
end

local function opts_at(args, i) local o = args[i] if type(o) == "table" and not is_tensor(o) then return o end end

-- Oracles: (in, args) -> list of {want = flat, tol = flat, shape =} for the results in
-- order, or nil to skip. `in[i]` is argument i: a snapshot for a tensor, a float32
-- for a number, else the value itself.
local ORACLES = {}

-- A float16 or bfloat16 result is the float32 one rounded once: the reference rounded to
-- that format, within the bound or one ulp of the format (the double rounding).
local FORMAT = { float16 = { ref.round_float16, 2 ^ -10, 2 ^ -24 }, bfloat16 = { ref.round_bfloat16, 2 ^ -7, FLT_MIN } }
local function in_format(want, tol, dtype)
  local f = FORMAT[dtype]
  if not f then return want, tol end
  for i = 1, #want do
    want[i] = f[1](want[i])
    tol[i] = math.max(tol[i], f[2] * abs(want[i]) + f[3])
  end
  return want, tol
end

local function unary(f, tolf)
  return function(inp)
    local x = inp[1]
    if type(x) ~= "table" or not x.flat then return nil end
    local want = ref.flatten(f(x.nested))
    local tol
    want, tol = in_format(want, tolf(want), x.dtype)
    return { { want = want, tol = tol, shape = x.shape } }
  end
end
local function exact(want) return elementwise_bounds(want, 0, 0) end
local function mixed(want)
  local tol = {}
  for i = 1, #want do tol[i] = 1e-6 * math.max(1, abs(want[i])) end
  return tol
end
ORACLES.neg = unary(function(t) return ref.neg(t) end, exact)
ORACLES.relu = unary(function(t) return ref.relu(t) end, exact)
ORACLES.abs = unary(function(t) return ref.map(t, math.abs) end, exact)
ORACLES.erf = unary(function(t) return ref.map(t, ref.erf) end, mixed)
ORACLES.gelu_erf = unary(function(t) return ref.gelu(t) end, mixed)
ORACLES.gelu_tanh = unary(function(t) return ref.gelu(t, "tanh") end, mixed)
ORACLES.gelu = function(inp, args)
  local o = opts_at(args, 2)
  local approx = o and rawget(o, "approximate") or "none"
  return unary(function(t) return ref.gelu(t, approx) end, mixed)(inp)
end
ORACLES.scale = function(inp)
  if type(inp[2]) ~= "number" then return nil end
  return unary(function(t) return ref.scale(t, inp[2]) end, function(w) return elementwise_bounds(w, 2 * ULP, FLT_MIN) end)(inp)
end

-- Binary ops broadcast (NumPy rules); `rel` bounds the float32 result, `bool` results
-- are 0/1.
local function binary(name, rel, bool)
  return function(inp)
    local a, b = inp[1], inp[2]
    local va = type(a) == "table" and a.nested or a
    local vb = type(b) == "table" and b.nested or b
    if type(va) ~= "number" and type(va) ~= "table" or type(vb) ~= "number" and type(vb) ~= "table" then return nil end
    local r = ref[name](va, vb)
    if type(r) ~= "table" then return nil end
    local shape, level = {}, r            -- (booleans for comparisons: ref.shape wants numbers)
    while type(level) == "table" do shape[#shape + 1] = #level; level = level[1] end
    local want = {}
    local function flat_into(t) for i = 1, #t do if type(t[i]) == "table" then flat_into(t[i]) else want[#want + 1] = t[i] end end end
    flat_into(r)
    if bool then
      for i = 1, #want do want[i] = want[i] and 1 or 0 end
      return { { want = want, tol = elementwise_bounds(want, 0, 0), shape = shape } }
    end
    local tol = elementwise_bounds(want, rel, FLT_MIN)
    if name == "div" then   -- Vulkan bounds div only for divisors in 2^-126..2^126
      local db = type(b) == "table" and ref.flatten(ref.add(ref.mul(va, 0), vb)) or nil
      for i = 1, #want do
        local d = db and db[i] or b
        if d ~= 0 and (abs(d) < FLT_MIN or abs(d) > 2 ^ 126) then tol[i] = huge end
      end
    end
    want, tol = in_format(want, tol, (type(a) == "table" and a or b).dtype)
    return { { want = want, tol = tol, shape = shape } }
  end
end
ORACLES.add = binary("add", 2 * ULP)
ORACLES.sub = binary("sub", 2 * ULP)
ORACLES.mul = binary("mul", 2 * ULP)
ORACLES.div = binary("div", 3 * ULP)
-- The elementwise math and comparisons (bounds as spec/elementwise_ops_spec.lua's, in
-- ulps taken relatively; exact where the op rounds once).
ORACLES.pow = binary("pow", 4 * ULP)
ORACLES.atan2 = binary("atan2", 3 * ULP)
ORACLES.maximum = binary("maximum", 0)
ORACLES.minimum = binary("minimum", 0)
for _, op in ipairs { "eq", "ne", "lt", "le", "gt", "ge" } do ORACLES[op] = binary(op, 0, true) end
for op, ulps in pairs { exp = 2, log = 2, sqrt = 2, rsqrt = 2, tanh = 3, sigmoid = 3, silu = 4, sin = 2, cos = 2,
                        expm1 = 2, log1p = 3, square = 1, reciprocal = 3, exp2 = 2, log2 = 2, log10 = 2,
                        tan = 4, atan = 3, asin = 4, acos = 4, sinh = 3, cosh = 3, asinh = 3, acosh = 3,
                        atanh = 3 } do
  ORACLES[op] = unary(function(t) return ref[op](t) end, function(w) return elementwise_bounds(w, ulps * ULP, FLT_MIN) end)
end
for _, op in ipairs { "floor", "ceil", "round", "trunc", "sign" } do
  ORACLES[op] = unary(function(t) return ref[op](t) end, exact)
end
ORACLES.clamp = function(inp, args)
  local lo, hi = inp[2], inp[3]
  if (lo ~= nil and type(lo) ~= "number") or (hi ~= nil and type(hi) ~= "number") or (lo == nil and hi == nil) then return nil end
  return unary(function(t) return ref.clamp(t, lo, hi) end, exact)(inp)
end
ORACLES.where = function(inp)
  local m, a, b = inp[1], inp[2], inp[3]
  if type(m) ~= "table" or not m.flat or m.dtype ~= "bool" then return nil end
  local va = type(a) == "table" and a.nested or a
  local vb = type(b) == "table" and b.nested or b
  if type(va) ~= "number" and type(va) ~= "table" or type(vb) ~= "number" and type(vb) ~= "table" then return nil end
  local r = ref.where(m.nested, va, vb)
  local shape = ref.shape(r)
  local want = ref.flatten(r)
  local dtype = (type(a) == "table" and a.dtype) or (type(b) == "table" and b.dtype) or "float32"
  local tol
  want, tol = in_format(want, elementwise_bounds(want, 0, 0), dtype)
  return { { want = want, tol = tol, shape = shape } }
end

-- Reductions, softmax and topk over opts.dim (the reference takes the same options):
-- sum, mean: 1e-6 sum|x| (/ count) over the finite entries of each output's column;
-- var: 1e-5 sum(x^2) / count; max, min and their indices, argmax, argmin, topk: exact;
-- softmax: 1e-5 |want| + 1e-6; log_softmax: 1e-5 |want| + 1e-5.
local function reduce_opts(o)
  local r = {}
  if o then
    if compat.is_integer_type(rawget(o, "dim")) then r.dim = rawget(o, "dim") end
    r.keepdim = rawget(o, "keepdim") == true or nil
    r.correction = compat.is_integer_type(rawget(o, "correction")) and rawget(o, "correction") or nil
    r.largest = rawget(o, "largest")
  end
  return r
end
-- Index results are read through a device copy: checked where int32 tensors copy.
local int_copies
local function ints_readable()
  if int_copies == nil then
    int_copies = pcall(function() lumus.copy(lumus.argmax(lumus.zeros({ 1 }))):free() end)
  end
  return int_copies
end
local function ints_bytes(nested)
  local out = {}
  for i, v in ipairs(ref.flatten(nested)) do out[i] = compat.pack_bytes("i32", { v }) end
  return table.concat(out)
end
-- Results in float16/bfloat16 are also rounded once to that dtype.
local ROUNDING = { float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }
local function values_of(nested, tolf, dtype)
  local want, tol = ref.flatten(nested), {}
  local r = ROUNDING[dtype] or 0
  for i = 1, #want do tol[i] = tolf(i, want[i]) + r * abs(want[i]) end
  return { want = want, tol = tol, shape = ref.shape(nested) }
end
local function reduction_op(kind)
  return function(inp, args)
    local x = inp[1]
    if type(x) ~= "table" or not x.flat then return nil end
    local o = reduce_opts(opts_at(args, 2))
    if kind == "softmax" or kind == "log_softmax" then
      local eps = kind == "softmax" and 1e-6 or 1e-5
      return { values_of(ref[kind](x.nested, o), function(_, w) return 1e-5 * abs(w) + eps end, x.dtype) }
    end
    local v, idx = ref[kind](x.nested, o)
    if kind == "argmax" or kind == "argmin" then
      if not ints_readable() then return nil end
      return { { bytes = ints_bytes(v), shape = ref.shape(v) } }
    end
    if kind == "max" or kind == "min" then
      local vals = values_of(v, function() return 0 end, x.dtype)
      if idx and ints_readable() then return { vals, { bytes = ints_bytes(idx), shape = ref.shape(idx) } } end
      return { vals }
    end
    local mags = ref.flatten(ref.sum(ref.map(x.nested, function(e)
      if kind == "var" then return e * e end
      return abs(e) < huge and abs(e) or 0 end), o))
    local count = math.floor(#x.flat / #mags)
    return { values_of(v, function(i)
      if mags[i] > 1e37 then return huge end
      if kind == "var" then return 1e-5 * mags[i] / math.max(1, count - (o.correction or 1)) + FLT_MIN end
      return 1e-6 * mags[i] / (kind == "mean" and count or 1) + FLT_MIN
    end, x.dtype) }
  end
end
for _, kind in ipairs { "softmax", "log_softmax", "sum", "mean", "var", "max", "min", "argmax", "argmin" } do
  ORACLES[kind] = reduction_op(kind)
end
ORACLES.topk = function(inp, args)
  local x, k = inp[1], args[2]
  if type(x) ~= "table" or not x.flat or not compat.is_integer_type(k) then return nil end
  local v, idx = ref.topk(x.nested, k, reduce_opts(opts_at(args, 3)))
  if not ints_readable() then return { values_of(v, function() return 0 end) } end
  return { values_of(v, function() return 0 end), { bytes = ints_bytes(idx), shape = ref.shape(idx) } }
end

local function abs_nested(t) return ref.map(t, abs) end

local function product_bounds(want, bound, bias_abs, n)
  local tol = {}
  for i = 1, #want do
    local b = 1e-6 * bound[i] + (bias_abs and 1e-6 * bias_abs[(i - 1) % n + 1] or 0) + FLT_MIN
    tol[i] = (b ~= b or bound[i] > 1e37) and huge or b
  end
  return tol
end

ORACLES.matmul = function(inp, args)
  local a, b = inp[1], inp[2]
  if type(a) ~= "table" or not a.flat or type(b) ~= "table" or not b.flat then return nil end
  local o = opts_at(args, 3)
  local ro = { transpose_b = o and rawget(o, "transpose_b") == true, transpose_a = o and rawget(o, "transpose_a") == true }
  local r = ref.matmul(a.nested, b.nested, ro)
  local shape = ref.shape(r)
  local want = #shape > 1 and ref.flatten(r) or r
  local bound = ref.matmul(abs_nested(a.nested), abs_nested(b.nested), ro)
  bound = #shape > 1 and ref.flatten(bound) or bound
  return { { want = want, tol = product_bounds(want, bound), shape = shape } }
end

ORACLES.linear = function(inp, args)
  local x, w = inp[1], inp[2]
  if type(x) ~= "table" or not x.flat or type(w) ~= "table" or not w.flat then return nil end
  local bias = nil
  if is_tensor(args[3]) then
    if type(inp[3]) ~= "table" or not inp[3].flat then return nil end
    bias = inp[3].flat
  end
  local r = ref.linear(x.nested, w.nested, bias)
  local shape = ref.shape(r)
  local want = #shape > 1 and ref.flatten(r) or r
  local bound = ref.linear(abs_nested(x.nested), abs_nested(w.nested))
  bound = #shape > 1 and ref.flatten(bound) or bound
  local babs = bias and ref.map(bias, abs)
  return { { want = want, tol = product_bounds(want, bound, babs, w.shape[1]), shape = shape } }
end

-- Indexing moves elements: exact, in the input's dtype (ids int32, 1-based; outside: 0).
local function indexed(f)
  return function(inp, args)
    local want = f(inp, args)
    if not want then return nil end
    local shape = ref.shape(want)
    want = ref.flatten(want)
    return { { want = want, tol = exact(want), shape = shape } }
  end
end
local function snap(v, dtype) return type(v) == "table" and v.flat and (not dtype or v.dtype == dtype) and v end
ORACLES.index_select = indexed(function(inp, args)
  local x, ids = snap(inp[1]), snap(inp[3], "int32")
  if x and ids and compat.is_integer_type(args[2]) then return ref.index_select(x.nested, args[2], ids.flat) end
end)
ORACLES.gather = indexed(function(inp, args)
  local x, ids = snap(inp[1]), snap(inp[3], "int32")
  if x and ids and compat.is_integer_type(args[2]) then return ref.gather(x.nested, args[2], ids.nested) end
end)
ORACLES.embedding = indexed(function(inp)
  local ids, w = snap(inp[1], "int32"), snap(inp[2])
  if ids and w then return ref.embedding(ids.nested, w.nested) end
end)

ORACLES.layer_norm_forward = function(inp, args)
  local x = inp[1]
  if type(x) ~= "table" or not x.flat then return nil end
  local function vec(i)
    if args[i] == nil then return nil, true end
    if type(inp[i]) ~= "table" or not inp[i].flat then return nil, false end
    return inp[i].flat, true
  end
  local w, okw = vec(2)
  local b, okb = vec(3)
  if not (okw and okb) then return nil end
  local eps = inp[4]
  if eps == nil then eps = 1e-5 elseif type(eps) ~= "number" then return nil end
  local d = x.shape[#x.shape]
  local rows = rows_of(x.flat, d)
  local function finite(v) return v == nil or abs(v) < huge end
  local y, mean, invstd, ty, tm, ti = {}, {}, {}, {}, {}, {}
  for r, row in ipairs(rows) do
    local ok, peak, constant_row = true, 0, true
    for j = 1, d do
      if not (abs(row[j]) <= 1e15) then ok = false end
      if row[j] ~= row[1] then constant_row = false end
      peak = math.max(peak, abs(row[j]))
    end
    if constant_row and eps < FLT_MIN then ok = false end   -- 0 / sqrt(0): PyTorch's NaN, not checked here
    local ry, rm, rr = ref.layer_norm_forward(row, w, b, eps > 0 and eps or 1e-300)
    rm, rr = rm[1], rr[1]
    local std = 1 / rr
    -- float32 rounds the row's mean (by about an ulp of its largest entry): that error,
    -- times invstd, on top of a 1e-4 relative one
    local shift = 8 * ULP * peak
    for j = 1, d do
      local k = (r - 1) * d + j
      y[k] = ry[j]
      local scale_w = w and abs(w[j]) or 1
      local n0 = (row[j] - rm) * rr
      local t = 1e-4 * scale_w * math.max(1, abs(n0)) + shift * rr * scale_w + (b and 1e-6 * abs(b[j]) or 0) + FLT_MIN
      if not ok or not finite(w and w[j]) or not finite(b and b[j]) or not (abs(ry[j]) < 1e37) then t = huge end
      ty[k] = t
    end
    mean[r], invstd[r] = rm, rr
    tm[r] = ok and 1e-6 * peak + FLT_MIN or huge
    -- d invstd / d var = -invstd^3 / 2; the variance is off by the mean's rounding
    ti[r] = ok and 1e-4 * rr + 0.5 * rr ^ 3 * (shift * shift + 2 * shift * std) or huge
  end
  y, ty = in_format(y, ty, x.dtype)   -- float16/bfloat16 x: y rounded once to x's dtype
  local sshape = { compat.unpack(x.shape) }
  if #sshape > 1 then sshape[#sshape] = nil else sshape = { 1 } end
  return { { want = y, tol = ty, shape = x.shape }, { want = mean, tol = tm, shape = sshape },
           { want = invstd, tol = ti, shape = sshape } }
end

local function constant(v, n)
  local want = {}
  for i = 1, n do want[i] = v end
  return want
end
-- Factories and fill: every element is the value (shapes are checked where the shape
-- argument is a plain list).
local function factory(value_of)
  return function(inp, args, res)
    local v = value_of(inp)
    if type(v) ~= "number" or not res[1] then return nil end
    local shape = res[1].shape
    local s = args[1]
    if type(s) == "table" and not is_tensor(s) and getmetatable(s) == nil then
      local plain = {}
      for i = 1, #s do plain[i] = s[i] end
      shape = plain
    elseif compat.is_integer_type(s) then shape = { s } end
    local n = 1
    for i = 1, #shape do n = n * shape[i] end
    return { { want = constant(v, n), tol = constant(0, n), shape = shape } }
  end
end
ORACLES.zeros = factory(function() return 0 end)
ORACLES.ones = factory(function() return 1 end)
ORACLES.full = factory(function(inp) return inp[2] end)
-- v as an element of dtype d holds it, as a number (bool: 0 or 1).
local function as_dtype(v, d)
  local w = ref.to_dtype(v, d or "float32")
  if type(w) == "boolean" then return w and 1 or 0 end
  return w
end
ORACLES.fill = function(inp, args, res)
  if type(inp[2]) ~= "number" or type(inp[1]) ~= "table" or not res.same_as_first then return nil end
  local n = #inp[1].flat
  return { { want = constant(as_dtype(inp[2], inp[1].dtype), n), tol = constant(0, n), shape = inp[1].shape } }
end
-- copy(t [, opts]) clones t; copy(dst, src) writes src (broadcast to dst's shape by
-- NumPy's rules) into dst and returns dst.
local function broadcast_to(src, shape)
  local n, nd, sd = 1, #shape, #src.shape
  for i = 1, nd do n = n * shape[i] end
  local want = {}
  for flat = 0, n - 1 do
    local rest, si, stride = flat, 0, 1
    for d = nd, 1, -1 do
      local idx = rest % shape[d]
      rest = math.floor(rest / shape[d])
      local sdim = d - (nd - sd)
      if sdim >= 1 then
        local size = src.shape[sdim]
        si = si + (size == 1 and 0 or idx) * stride
        stride = stride * size
      end
    end
    want[flat + 1] = src.flat[si + 1]
  end
  return want
end
ORACLES.copy = function(inp, args)
  local x = inp[1]
  if type(x) ~= "table" or not x.flat then return nil end
  if is_tensor(args[2]) then
    local src = inp[2]
    if type(src) ~= "table" or not src.flat then return nil end
    local want = broadcast_to(src, x.shape)
    for i = 1, #want do want[i] = as_dtype(want[i], x.dtype) end   -- copy between dtypes converts
    return { { want = want, tol = constant(0, #want), shape = x.shape } }
  end
  return { { want = x.flat, tol = constant(0, #x.flat), shape = x.shape, bytes = x.bytes } }
end
-- Random numbers: bit for bit, from the generator state before the call (inp.rng).
local function random_factory(draw)
  return function(inp, args, res)
    if not inp.rng or not res[1] then return nil end
    local o = opts_at(args, 2)
    local want = ref.flatten(draw(res[1].shape, inp.rng, 0, o and rawget(o, "dtype")))
    return { { want = want, tol = constant(0, #want), shape = res[1].shape } }
  end
end
ORACLES.rand = random_factory(ref.rand)
ORACLES.randn = random_factory(ref.randn)
local function random_fill(draw, d2, d3)
  return function(inp, args, res)
    local x = inp[1]
    if not inp.rng or type(x) ~= "table" or not x.flat or not res.same_as_first then return nil end
    local want = ref.flatten(draw(x.shape, inp.rng, args[2] or d2, args[3] or d3))
    return { { want = want, tol = constant(0, #want), shape = x.shape } }
  end
end
ORACLES.uniform_ = random_fill(ref.uniform, 0, 1)
ORACLES.normal_ = random_fill(ref.normal, 0, 1)
local function int32_bytes(list)
  local parts = {}
  for i = 1, #list do parts[i] = compat.pack_bytes("i32", { list[i] }) end
  return table.concat(parts)
end
-- (int32 results are checked where lumus.copy, which captures them, takes int32)
ORACLES.multinomial = function(inp, args, res)
  local p, o = inp[1], opts_at(args, 3)
  if not inp.rng or type(p) ~= "table" or not p.flat or not res[1] then return nil end
  local want = ref.flatten(ref.multinomial(p.nested, compat.integer(tonumber(args[2])), o and rawget(o, "replacement") or false, inp.rng))
  return { { bytes = int32_bytes(want) } }
end
ORACLES.arange = function(inp, args, res)
  if not res[1] then return nil end
  local nums = {}
  for i = 1, 3 do if type(args[i]) == "number" then nums[i] = args[i] else break end end
  local o = opts_at(args, #nums + 1)
  local integers = true
  for i = 1, #nums do integers = integers and compat.is_integer_type(nums[i]) end
  local dtype = o and rawget(o, "dtype") or (integers and "int32" or "float32")
  local start, stop, step = 0, nums[1], nums[3]
  if #nums >= 2 then start, stop = nums[1], nums[2] end
  local want = ref.arange(start, stop, step, dtype)
  if dtype == "int32" then return { { bytes = int32_bytes(want) } } end
  return { { want = want, tol = constant(0, #want), shape = { #want } } }
end
ORACLES.from_bytes = function(inp, args)
  if type(args[1]) ~= "string" then return nil end
  local want = floats(args[1])
  return { { want = want, tol = constant(0, #want), bytes = args[1] } }
end

-- Conversions (t:to(dtype), t:half(), ...): every element as lumus.reference converts it.
local function conversion(dtype_of)
  return function(inp, args)
    local x, d = inp[1], dtype_of(args)
    if type(x) ~= "table" or not x.flat or type(d) ~= "string" then return nil end
    local want = {}
    for i = 1, #x.flat do want[i] = as_dtype(x.flat[i], d) end
    return { { want = want, tol = constant(0, #want), shape = x.shape } }
  end
end
ORACLES.to = conversion(function(args) return args[2] end)
for name, d in pairs { float = "float32", half = "float16", bfloat16 = "bfloat16", int = "int32", bool = "bool" } do
  ORACLES[name] = conversion(function() return d end)
end
-- t:write_bytes(s [, first]): t's bytes with s at element first (1-based).
ORACLES.write_bytes = function(inp, args, res)
  local x, s, first = inp[1], args[2], args[3] or 1
  if type(x) ~= "table" or not x.bytes or type(s) ~= "string" or not compat.is_integer_type(first) or not res.same_as_first then
    return nil
  end
  local at = (first - 1) * math.floor(#x.bytes / #x.flat)
  return { { bytes = x.bytes:sub(1, at) .. s .. x.bytes:sub(at + #s + 1), shape = x.shape } }
end

-- Scatter-adds and losses: only on finite, moderate values (a float32 sum may overflow
-- where the float64 reference does not), within (m + 1) 2^-24 of the magnitudes summed.
local function moderate(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if not v then return false end
    for _, x in ipairs(v.flat) do
      if type(x) ~= "number" or x ~= x or abs(x) > 2 ^ 60 then return false end
    end
  end
  return true
end
local function scatter_oracle(f)
  return function(inp, args)
    local t, ids, src = snap(inp[1], "float32"), snap(inp[3], "int32"), snap(inp[4], "float32")
    if not (moderate(t, src) and ids and compat.is_integer_type(args[2])) then return nil end
    local ok, want = pcall(f, t.nested, args[2], f == ref.index_add and ids.flat or ids.nested, src.nested)
    if not ok then return nil end
    local _, mags = pcall(f, ref.map(t.nested, abs), args[2], f == ref.index_add and ids.flat or ids.nested, ref.map(src.nested, abs))
    local shape, m = ref.shape(want), #src.flat
    want, mags = ref.flatten(want), ref.flatten(mags)
    local tol = {}
    for i = 1, #want do tol[i] = (m + 1) * 2 ^ -24 * mags[i] + FLT_MIN end
    return { { want = want, tol = tol, shape = shape } }
  end
end
ORACLES.index_add = scatter_oracle(ref.index_add)
ORACLES.scatter_add = scatter_oracle(ref.scatter_add)
local function loss_oracle(f, target_dtype, opts_at_arg)
  return function(inp, args)
    local x, t = snap(inp[1], "float32"), snap(inp[2], target_dtype)
    local o = args[opts_at_arg]
    if not (moderate(x, t) and (o == nil or type(o) == "table")) then return nil end
    local reduction = o and rawget(o, "reduction") or "mean"
    if o and (next(o, nil) ~= nil and not (next(o, nil) == "reduction" and next(o, "reduction") == nil)) then return nil end
    local ok, want = pcall(f, x.nested, target_dtype == "int32" and t.flat or t.nested, { reduction = reduction })
    if not ok then return nil end
    local shape = reduction == "none" and x.shape or { 1 }
    if target_dtype == "int32" and reduction == "none" then shape = { x.shape[1] } end
    want = type(want[1]) == "table" and ref.flatten(want) or want
    local tol = {}
    local n = #x.flat
    for i = 1, #want do tol[i] = 1e-5 * math.max(1, abs(want[i])) * math.sqrt(n) end
    return { { want = want, tol = tol, shape = shape } }
  end
end
ORACLES.mse_loss = loss_oracle(ref.mse_loss, "float32", 3)
ORACLES.binary_cross_entropy_with_logits = loss_oracle(ref.binary_cross_entropy_with_logits, "float32", 3)
ORACLES.cross_entropy = loss_oracle(ref.cross_entropy, "int32", 3)
-- rms_norm, rope and scaled_dot_product_attention on float32 inputs (rows with values
-- beyond 1e15 or below 1e-15 in magnitude, or non-finite, are not checked: their
-- semantics are the specs'): rms_norm 2e-5 |want|; rope 1e-5 |pair|; attention
-- (1e-5 + 4e-6 hd |q| |k| scale) max|v| of the head.
local function f32_snap(v) return type(v) == "table" and v.flat and (v.dtype == nil or v.dtype == "float32") and v end
local function tame(flat, lo)
  for i = 1, #flat do
    local a = abs(flat[i])
    if not (a <= 1e15) or (lo and a ~= 0 and a < 1e-15) then return false end
  end
  return true
end
ORACLES.rms_norm = function(inp, args)
  local x = f32_snap(inp[1])
  if not x then return nil end
  local w, o = nil, opts_at(args, 3)
  if is_tensor(args[2]) then
    w = f32_snap(inp[2])
    if not w then return nil end
    w = w.flat
  elseif args[2] ~= nil then
    o = opts_at(args, 2)
  end
  local eps = o and rawget(o, "eps") or 1e-6
  if type(eps) ~= "number" then return nil end
  local d = x.shape[#x.shape]
  local want, tol = {}, {}
  for r, row in ipairs(rows_of(x.flat, d)) do
    local ok = tame(row, true) and (not w or tame(w))
    local y = ref.rms_norm(row, w, eps)
    for j = 1, d do
      local k = (r - 1) * d + j
      want[k] = y[j]
      tol[k] = ok and 2e-5 * abs(y[j]) + 4 * FLT_MIN or huge
    end
  end
  return { { want = want, tol = tol, shape = x.shape } }
end
ORACLES.rope = function(inp, args)
  local x = f32_snap(inp[1])
  if not x or #x.shape < 2 then return nil end
  local o = opts_at(args, 2) or {}
  local ro = { base = rawget(o, "base"), offset = rawget(o, "offset"), interleaved = rawget(o, "interleaved") }
  if ro.base ~= nil and type(ro.base) ~= "number" then return nil end
  ro.offset = ro.offset ~= nil and compat.integer(tonumber(ro.offset)) or ro.offset
  local y = ref.flatten(ref.rope(x.nested, ro))
  local d = x.shape[#x.shape]
  local tol = {}
  for r, row in ipairs(rows_of(x.flat, d)) do
    local peak = 0
    for j = 1, d do peak = math.max(peak, abs(row[j])) end
    for j = 1, d do tol[(r - 1) * d + j] = tame(row) and 1e-5 * peak + 4 * FLT_MIN or huge end
  end
  return { { want = y, tol = tol, shape = x.shape } }
end
ORACLES.scaled_dot_product_attention = function(inp, args)
  local q, k, v = f32_snap(inp[1]), f32_snap(inp[2]), f32_snap(inp[3])
  local o = opts_at(args, 4) or {}
  if not (q and k and v) or rawget(o, "mask") ~= nil then return nil end
  local hd = q.shape[4]
  local scale = rawget(o, "scale") or 1 / math.sqrt(hd)
  if type(scale) ~= "number" then return nil end
  local function peak(flat) local m = 0 for i = 1, #flat do m = math.max(m, abs(flat[i])) end return m end
  if not (tame(q.flat) and tame(k.flat) and tame(v.flat)) then return nil end
  local spread = hd * peak(q.flat) * peak(k.flat) * abs(scale)
  if spread > 1e4 then return nil end
  local want = ref.flatten(ref.scaled_dot_product_attention(q.nested, k.nested, v.nested,
                                                            { causal = rawget(o, "causal") == true, scale = scale }))
  local t = (1e-5 + 4e-6 * spread) * peak(v.flat) + 4 * FLT_MIN
  return { { want = want, tol = constant(t, #want), shape = q.shape } }
end
-- gelu_backward (float32, same shapes, |values| <= 1e15): 1e-6 max(1, |want|) + 1e-6 |grad|.
ORACLES.gelu_backward = function(inp, args)
  local g, x = f32_snap(inp[1]), f32_snap(inp[2])
  if not (g and x) or #g.flat ~= #x.flat or not (tame(g.flat) and tame(x.flat)) then return nil end
  local o = opts_at(args, 3)
  local approx = o and rawget(o, "approximate") or "none"
  if approx ~= "none" and approx ~= "tanh" then return nil end
  local want = ref.flatten(ref.gelu_backward(g.nested, x.nested, approx))
  local tol = {}
  for i = 1, #want do tol[i] = 1e-6 * math.max(1, abs(want[i])) + 1e-6 * abs(g.flat[i]) end
  return { { want = want, tol = tol, shape = x.shape } }
end

local function describe_value(v, inp)
  if is_tensor(v) then
    if type(inp) ~= "table" then return "tensor (unread)" end
    local vals = {}
    for i = 1, math.min(#inp.flat, 32) do vals[i] = ("%.9g"):format(inp.flat[i]) end
    return ("tensor %s {%s%s}"):format(table.concat(inp.shape, "x"), table.concat(vals, ", "), #inp.flat > 32 and ", ..." or "")
  elseif type(v) == "table" then
    local parts = {}
    for k, x in next, v do
      if #parts > 8 then break end
      parts[#parts + 1] = ("%s=%s"):format(tostring(k), is_tensor(x) and ("tensor %s"):format(x:is_freed() and "(freed)" or table.concat(x:shape(), "x")) or tostring(x))
    end
    table.sort(parts)
    return "{" .. table.concat(parts, ", ") .. "}" .. (getmetatable(v) and " (with a metatable)" or "")
  elseif type(v) == "number" then
    return ("%.17g"):format(v)
  end
  return tostring(v)
end

local function describe_call(name, args, nargs, inp)
  local parts = {}
  for i = 1, nargs do parts[i] = describe_value(args[i], inp[i]) end
  return ("%s(%s)"):format(name, table.concat(parts, ", "))
end

local function element_ok(got, want, tol)
  if not (tol < 1e37) then return true end   -- overflow territory: not checked
  if want ~= want then return got ~= got end
  if want == huge or want == -huge then return got == want end
  if got ~= got or got == huge or got == -huge then return false end
  if abs(got - want) <= tol then return true end
  return subnormal(want) and got == 0
end

-- Checks the results of a successful call (`results`: realized snapshots, nil where a
-- result could not be read); returns nil or a message.
local function check_values(name, args, nargs, inp, results)
  local oracle = ORACLES[name]
  if not oracle then return nil end
  local ok, outs = pcall(oracle, inp, args, results)
  if not ok then return "the reference raised: " .. tostring(outs) end
  if not outs then return nil end
  -- the same on the inputs with subnormals flushed (either passes)
  local alt
  local finp, any = {}, false
  for i = 1, nargs do
    local v = inp[i]
    if type(v) == "table" and v.flat then
      local f, a = flushed(v.flat)
      if a then any = true; finp[i] = { shape = v.shape, flat = f, nested = ref.nest(f, v.shape) } else finp[i] = v end
    elseif type(v) == "number" and subnormal(v) then any = true; finp[i] = v < 0 and compat.negative_zero or 0.0
    else finp[i] = v end
  end
  if any and name ~= "copy" and name ~= "from_bytes" and name ~= "fill" and name ~= "full" then
    local ok2, o2 = pcall(oracle, finp, args, results)
    if ok2 then alt = o2 end
  end
  for k, out in ipairs(outs) do
    local t = results[k]
    if t == nil then return nil end   -- freed by a finalizer of ours before it was copied
    if t == false then return ("result %d is not a tensor"):format(k) end
    local bytes = t.bytes
    if out.shape and not same_shape(t.shape, out.shape) then
      return ("result %d has shape %s, want %s"):format(k, table.concat(t.shape, "x"), table.concat(out.shape, "x"))
    end
    if out.bytes then
      if bytes ~= out.bytes then return ("result %d: bytes differ from the input's"):format(k) end
    else
      local got = t.flat
      if #got ~= #out.want then return ("result %d has %d elements, want %d"):format(k, #got, #out.want) end
      for i = 1, #got do
        if not element_ok(got[i], out.want[i], out.tol[i])
           and not (alt and alt[k] and element_ok(got[i], alt[k].want[i], alt[k].tol[i])) then
          return ("result %d element %d: got %.9g, want %.9g (bound %.3g)"):format(k, i, got[i], out.want[i], out.tol[i])
        end
      end
    end
  end
  return nil
end

-- Forced tunings: the first TUNED calls of every TUNE_EVERY run with a random tuning of
-- the LayerNorm and row kernels (or the defaults), under which the value checks above
-- then run; the other calls with the defaults. (Each tuning compiles its own pipelines.) Workgroups stay
-- at most 128 threads: on lavapipe a workgroup runs on one CPU thread and wider ones
-- (the streaming form's default is the largest) cost milliseconds a call here;
-- spec/layer_norm_tuning_spec.lua covers them. The split form's parts poll for their
-- partners at most spin_limit times (always set: lavapipe runs parts one after another,
-- so the default bound costs milliseconds a call) before reading the row themselves.
-- (Short runs, as under valgrind where each new pipeline takes seconds to compile, get two
-- tunings.)
local TUNED = 200
local TUNE_EVERY = math.max(2 * TUNED, CALLS < 10000 and math.floor(CALLS / 2) or 1000)
local LN_TUNING = { { "form", { "auto", "group", "subgroup", "stream", "split", "row", "split2", "tile" } },
                    { "scalar", { true, false } },
                    { "wg", { 1, 2, 4, 8, 32, 64, 128 } }, { "items_target", { 0, 1, 2, 4, 8 } },
                    { "parts", { 0, 1, 2, 3, 4, 8, 16 } }, { "classes", { 0, 1, 2, 3 } },
                    { "records", { "tagged", "fenced" } }, { "tickets", { true, false } },
                    { "spin_limit", { 0, 1, 16, 256, 2048 } }, { "lean_masks", { true, false } },
                    { "segment_shuffles", { true, false } }, { "pipelined", { true, false } },
                    { "lag", { 0, 1, 7, 300 } }, { "shifted_params", { true, false } },
                    { "split2_items", { 0, 2, 6, 8 } }, { "masked_aligned", { true, false } } }
local ROW_TUNING = { { "wg", { 0, 1, 2, 4, 8, 16, 32, 64, 128 } }, { "items", { 0, 1, 2, 3, 4, 8 } },
                     { "scalar", { true, false } } }

local function reset_tunings()
  lumus.tune.layer_norm(1, {})
  lumus.tune.rows(1, {})
  lumus.tune.softmax_cols({ short_rows = "auto", long_rows = "auto" })
  lumus.tune.reduce({})
end

local function tuning_string(name, t)
  local parts = {}
  for k, v in pairs(t) do parts[#parts + 1] = ("%s=%s"):format(k, tostring(v)) end
  table.sort(parts)
  return ("tune.%s{%s}"):format(name, table.concat(parts, ", "))
end

-- Sets random tunings; returns what was set, for messages.
local function random_tunings()
  reset_tunings()
  if chance(0.3) then return "default tunings" end
  local said = {}
  for _, hook in ipairs { { "layer_norm", LN_TUNING }, { "rows", ROW_TUNING } } do
    local t = {}
    for _, kv in ipairs(hook[2]) do if chance(0.5) or kv[1] == "wg" or kv[1] == "spin_limit" then t[kv[1]] = pick(kv[2]) end end
    if pcall(lumus.tune[hook[1]], 8, t) then said[#said + 1] = tuning_string(hook[1], t)
    else lumus.tune[hook[1]](1, {}) end
  end
  -- softmax's forms for short rows (the tile form is automatic only on GPUs) and long
  -- ones (the split form likewise)
  local sc = { short_rows = pick { "auto", "tile", "row" }, long_rows = pick { "auto", "split", "row" } }
  lumus.tune.softmax_cols(sc)
  said[#said + 1] = tuning_string("softmax_cols", sc)
  -- reductions' row forms and masked units (both automatic only on GPUs), and split
  -- reductions finished by a second dispatch
  local rc = { rows = pick { "auto", "lanes", "subgroup", "tile" }, masked = pick { true, false },
               two_dispatches = pick { true, false } }
  lumus.tune.reduce(rc)
  said[#said + 1] = tuning_string("reduce", rc)
  return table.concat(said, " ")
end

---------------------------------------------------------------------------------------
describe("fuzzing every public function and method", function()
  local surface, names_of = discover()
  do local probe = lumus.zeros(1); T_MT = getmetatable(probe); probe:free() end
  NAMES, ALIASES = {}, names_of
  for _, e in ipairs(surface) do NAMES[#NAMES + 1] = e.name end

  it(("survives %d random calls (seed %d) with errors that name the function"):format(CALLS, SEED), function()
    assert.is_true(#surface >= 20, "surface too small: " .. #surface)
    collectgarbage("collect"); collectgarbage("collect"); lumus.synchronize()
    -- (less what the context keeps across calls: the scratch a call may make or grow)
    local function held() local m = lumus.memory(); return m.in_use - m.internal end
    local start = held()
    local saved_limit = lumus.memory().limit
    -- no call may allocate much: a cap 32 MiB above what is in use
    lumus.set_memory_limit(lumus.memory().in_use + 32 * 2 ^ 20)
    lumus.manual_seed(SEED)   -- the random ops' numbers depend on the seed only, not on earlier specs

    for i = 1, #SHAPES do
      refill(i)
      sentinels[i] = new_group(SHAPES[i], true)
    end
    CALLBACKS = {
      function() end,
      function() error(MARK) end,
      function() error(MARK_TABLE) end,
      function(...) return ... end,
      function() return lumus.ones({ 2, 2 }) end,
      function(x) if getmetatable(x) == getmetatable(groups[1].base) and not x:is_freed() then return x:to_bytes() end end,
      lumus.synchronize, lumus.memory, lumus.zeros, lumus.gpu_time, lumus.copy,
    }

    local ok_calls, err_calls, slowest, slowest_at = 0, 0, 0, ""
    local value_checks, tunings = 0, "default tunings"
    local pending = {}   -- calls whose values are checked at the next batch
    local function check_pending()
      for _, p in ipairs(pending) do
        for a = 1, p.nargs do p.inp[a] = realize(p.inp[a]) end
        for k = 1, p.results.n do p.results[k] = realize(p.results[k]) end
        value_checks = value_checks + 1
        local ok2, e2 = pcall(check_values, p.name, p.args, p.nargs, p.inp, p.results)
        if not ok2 or e2 then
          fail(("%s: wrong value: %s\n    call: %s\n    under %s"):format(p.where, tostring(e2),
               describe_call(p.name, p.args, p.nargs, p.inp), p.tunings))
        end
      end
      pending = {}
    end
    finally(reset_tunings)
    for call = 1, CALLS do
      if call % TUNE_EVERY == 1 then tunings = random_tunings()
      elseif call % TUNE_EVERY == TUNED + 1 then reset_tunings(); tunings = "default tunings" end
      local entry = surface[int(#surface)]
      local where = ("seed %d call %d %s"):format(SEED, call, entry.name)
      local dirty = {}
      local nargs = chance(0.1) and 0 or int(6)
      local args
      if chance(0.5) then
        nargs = math.min(nargs, int(5))
        args = coherent_args(dirty, entry, nargs)
      else
        args = {}
        for a = 1, nargs do args[a] = a == 1 and first_arg(dirty, entry) or any_value(dirty) end
      end
      local passed_fn = false
      for a = 1, nargs do if type(args[a]) == "function" then passed_fn = true end end
      -- a function it was handed (gpu_time's) may write any tensor argument
      for a = 1, nargs do
        if by_tensor[args[a]] and (passed_fn or (a == 1 and writes_first(entry.name))) then
          dirty[#dirty + 1] = args[a]
        end
      end
      -- now and then a finalizer that frees, or calls lumus, while some later call runs
      if chance(call % 10000 <= 1000 and 0.1 or 0.01) then
        local victim = pick(groups)
        local kind = int(3)
        local tt = pick(victim.handles)
        compat.on_collect(function()
          if kind == 1 then tt:free()
          elseif kind == 2 then pcall(lumus.zeros, { 3 })
          else pcall(lumus.copy, tt) end
        end)
      end
      -- the inputs' values before the call, for the value checks
      local inp
      if ORACLES[entry.name] and not passed_fn and chance(VALUE_RATE[entry.name] or 1) then
        inp = { rng = lumus.get_rng_state() }
        for a = 1, nargs do
          local v = args[a]
          if is_tensor(v) then inp[a] = capture(v, by_tensor, current_group)
          elseif type(v) == "number" then inp[a] = f32_arg(v) end
        end
      end
      for _, t in ipairs(dirty) do local grp = by_tensor[t]; if grp then grp.dirty = true end end

      -- the first thousand calls of every ten thousand run with the GC always mid-cycle, so the
      -- finalizers above run inside lumus calls, at their allocations
      if call % 10000 == 1 then compat.gc_incremental(0, 1000)
      elseif call % 10000 == 1001 then compat.gc_incremental(200, 100) end
      local t0 = lumus.clock()
      local res = compat.pack(pcall(entry.f, compat.unpack(args, 1, nargs)))
      local dt = lumus.clock() - t0
      if dt > slowest then slowest, slowest_at = dt, where end

      if res[1] then
        ok_calls = ok_calls + 1
        -- a view of a group's tensor shares its storage: as junk it could be written
        -- without the group being marked dirty, so it is not kept
        if not (VIEWS[entry.name] and by_tensor[args[1]]) then
          for r = 2, res.n do add_junk(res[r]) end
        end
        if inp then
          local results = { same_as_first = rawequal(res[2], args[1]), n = res.n - 1 }
          for r = 2, res.n do
            -- capture gives nil when a finalizer of ours freed the result meanwhile (an op
            -- may return its input, e.g. t:float() of a float32 t): that result is skipped.
            if is_tensor(res[r]) then results[r - 1] = capture(res[r]) else results[r - 1] = false end
          end
          pending[#pending + 1] = { name = entry.name, args = args, nargs = nargs, inp = inp, results = results,
                                    where = where, tunings = tunings }
        end
      else
        err_calls = err_calls + 1
        check_error(res[2], entry, nargs, passed_fn, where)
      end
      -- a group whose base was freed (free, __gc, __close) is replaced now, so coherent
      -- calls keep getting live operands
      for a = 1, nargs do
        local grp = by_tensor[args[a]]
        if grp and groups[grp.index] == grp and grp.base:is_freed() then refill(grp.index) end
      end
      if call % 500 == 0 then check_pending(); check_groups(where) end
    end
    compat.gc_incremental(200, 100)
    check_pending()
    check_groups("end")
    reset_tunings()

    -- free everything the fuzzer made; memory in use is back where it started
    for _, list in ipairs { groups, sentinels } do
      for _, grp in ipairs(list) do for _, h in ipairs(grp.handles) do h:free() end end
    end
    -- by_tensor too: on 5.1 and LuaJIT its weak keys are not ephemerons, so an entry (h ->
    -- its group, whose handles hold h) keeps replaced groups alive until the table goes
    groups, sentinels, junk, CALLBACKS = {}, {}, {}, nil
    by_tensor = setmetatable({}, { __mode = "k" })
    -- collected until nothing more goes: on 5.1 and LuaJIT autograd graphs and chains of
    -- finalizers take a cycle per level
    local last
    repeat
      last = held()
      collectgarbage("collect"); collectgarbage("collect"); lumus.synchronize()
    until held() == last
    lumus.set_memory_limit(saved_limit)
    assert.are.equal(0, nfailures, table.concat(failures, "\n"))
    assert.are.equal(start, held())
    assert.is_true(slowest < MAX_CALL_S, ("slowest call %.2f s (%s)"):format(slowest, slowest_at))
    assert.is_true(ok_calls > CALLS / 20 and err_calls > CALLS / 4,
                   ("too few successes or errors: %d ok, %d errors"):format(ok_calls, err_calls))
    assert.is_true(value_checks > CALLS / 100, ("only %d calls had their values checked"):format(value_checks))
    -- and the module still computes
    local x = lumus.tensor({ { 1, 2, 3, 4 } })
    local want = ref.layer_norm_forward({ { 1, 2, 3, 4 } })
    assert.is_true(ref.compare(lumus.layer_norm_forward(x):to_table(), want).max_abs < 1e-5)
  end)

  it("knows every function that returns a view of its first argument", function()
    -- each function and method on a fresh tensor and a few argument lists; a tensor it
    -- returns (or lists) that is not the argument itself but writes through to it is a view
    local ARGS = { {}, { 1 }, { 2 }, { 1, 2 }, { 2, 1 }, { { 8 } }, { { 4, 2 } }, { 1, 1, 2 } }
    local missing = {}
    for _, e in ipairs(surface) do
      if e.kind ~= "metamethod" and e.name ~= "free" and not VIEWS[e.name] then
        for _, extra in ipairs(ARGS) do
          local base = lumus.zeros({ 2, 4 })
          local res = compat.pack(pcall(e.f, base, compat.unpack(extra)))
          local outs = {}
          for r = 2, res.n do
            local v = res[r]
            if is_tensor(v) then outs[#outs + 1] = v
            elseif type(v) == "table" then for _, w in ipairs(v) do if is_tensor(w) then outs[#outs + 1] = w end end end
          end
          for _, v in ipairs(outs) do
            if not rawequal(v, base) and not v:is_freed() and not base:is_freed() and pcall(v.fill, v, 7)
               and base:sum():item() ~= 0 then
              missing[e.name] = true
            end
          end
          if not base:is_freed() then base:free() end
        end
      end
    end
    local names = {}
    for name in pairs(missing) do names[#names + 1] = name end
    table.sort(names)
    assert.are.same({}, names)
  end)

  it("set_memory_limit: random arguments either set the documented limit or raise, then restore", function()
    collectgarbage("collect"); lumus.synchronize()
    local m0 = lumus.memory()
    local total = m0.device_total
    local n = math.max(200, math.floor(CALLS / 200))
    local g2 = ref.rng(SEED + 1)
    for i = 1, n do
      local v = i % 7 == 0 and nil or NUMBERS[math.floor(g2.uniform() * #NUMBERS) + 1]
      if i % 11 == 0 then v = pick { "1024", {}, true, print, m0.in_use + 4096 } end
      local before = lumus.memory().limit
      local ok, e = pcall(lumus.set_memory_limit, v)
      local after = lumus.memory().limit
      if ok then
        local want = v == nil and total or math.min(compat.integer(tonumber(v)), total)   -- (the C side converts "1024")
        assert.are.equal(want, after, tostring(v))
      else
        assert.are.equal(before, after)
        assert.matches("set_memory_limit", e)
      end
      -- a small allocation under whatever limit is set: fine or a clean refusal
      local ok2, e2 = pcall(lumus.zeros, { 64 })
      if ok2 then e2:free() else assert.matches("out of device memory", e2) end
    end
    lumus.set_memory_limit(m0.limit)
    assert.are.equal(m0.limit, lumus.memory().limit)
    lumus.zeros({ 1024 }):free()
  end)

  it("manual_seed, set_rng_state: random arguments either set the documented state or raise", function()
    local s0 = lumus.get_rng_state()
    local g2 = ref.rng(SEED + 2)
    for i = 1, math.max(200, math.floor(CALLS / 200)) do
      local v = NUMBERS[math.floor(g2.uniform() * #NUMBERS) + 1]
      if i % 5 == 0 then v = { seed = v, offset = NUMBERS[math.floor(g2.uniform() * #NUMBERS) + 1] } end
      if i % 11 == 0 then v = pick { "1024", {}, true, print, { seed = 1 }, { seed = 1, offset = 2, x = 3 } } end
      local name = type(v) == "table" and "set_rng_state" or "manual_seed"
      local before = lumus.get_rng_state()
      local ok, e = pcall(lumus[name], v)
      local after = lumus.get_rng_state()
      if ok then
        local want = type(v) == "table" and { seed = v.seed, offset = v.offset } or { seed = tonumber(v), offset = 0 }
        assert.are.same(want, after)
        assert.is_true(compat.is_integer_type(after.seed))
      else
        assert.are.same(before, after)
        assert.matches(name, e)
      end
    end
    lumus.set_rng_state(s0)
    assert.are.same(s0, lumus.get_rng_state())
  end)

  it("every tuning hook (lumus.tune): random arguments are accepted or raise naming it; {} resets", function()
    local hooks = {}
    for name, f in pairs(lumus.tune) do if type(f) == "function" then hooks[#hooks + 1] = name end end
    table.sort(hooks)
    assert.is_true(#hooks >= 4)
    -- a hook takes sizes, then a tune table; {} after as many sizes as it needs resets it
    local function reset(f)
      for nsizes = 0, 4 do
        local args = {}
        for i = 1, nsizes do args[i] = 1 end
        args[nsizes + 1] = {}
        if pcall(f, compat.unpack(args, 1, nsizes + 1)) then return true end
      end
      return false
    end
    local g4 = ref.rng(SEED + 3)
    local function r(k) return math.floor(g4.uniform() * k) + 1 end
    -- keys of every hook's tune table (options are strict: a key of another hook raises)
    local keys = { "wg", "items", "items_target", "bm", "bn", "bk", "tm", "tn", "rotate", "form", "parts",
                   "stream", "subgroup_items", "spin_limit", "tickets", "split", "max_x" }
    local own = { rows = { "wg", "items" }, grid = { "max_x" }, matmul = { "bm", "bn", "bk", "tm", "tn", "rotate" },
                  layer_norm = { "items_target", "wg", "form", "parts", "stream", "subgroup_items", "spin_limit", "tickets" } }
    local vals = { 0, 1, 2, 3, 4, 8, 16, 64, 128, 1024, 4096, -1, 0.5, 2 ^ 31, 2 ^ 62, "4", "row", true, false, {} }
    local n = math.max(100, math.floor(CALLS / 500))
    for _, name in ipairs(hooks) do
      local f = lumus.tune[name]
      assert(reset(f), name .. " has no reset with {}")
      for _ = 1, n do
        local args = {}
        local nargs = r(5)
        for i = 1, nargs - 1 do args[i] = r(4) == 1 and vals[r(#vals)] or r(3000) end
        local tune = {}
        local pool = own[name] and r(4) > 1 and own[name] or keys
        for _ = 1, r(4) do tune[pool[r(#pool)]] = vals[r(#vals)] end
        args[nargs] = r(5) == 1 and vals[r(#vals)] or tune
        local ok, e = pcall(f, compat.unpack(args, 1, nargs))
        if not ok then
          assert(type(e) == "string" and e:find("tune." .. name, 1, true), ("%s raised %s"):format(name, tostring(e)))
        end
        reset(f)
      end
    end
    -- after the resets every kernel computes as before
    local xt = ref.random_table({ 3, 40 }, g4)
    local c = ref.compare(lumus.layer_norm_forward(lumus.tensor(xt)):to_table(), ref.layer_norm_forward(xt))
    assert.is_true(c.max_abs < 1e-4)
    if lumus.matmul and ref.matmul then
      local a, b = ref.random_table({ 5, 7 }, g4), ref.random_table({ 7, 3 }, g4)
      local mm = ref.compare(lumus.matmul(lumus.tensor(a), lumus.tensor(b)):to_table(), ref.matmul(a, b))
      assert.is_true(mm.max_abs < 1e-4)
    end
  end)

  it("random valid tunings of tune.layer_norm and tune.rows compute layer_norm and the row ops right", function()
    finally(reset_tunings)
    local g5 = ref.rng(SEED + 4)
    local function r(k) return math.floor(g5.uniform() * k) + 1 end
    local function pick5(list) return list[r(#list)] end
    local n = math.max(2, math.floor(CALLS / 2000))   -- (each tuning compiles pipelines: few in short runs)
    for i = 1, n do
      local d = pick5 { 1, 3, 4, 5, 7, 8, 12, 33, 100, 257, 1000 }
      local rows = pick5 { 1, 2, 3, 5 }
      local lt, rt = {}, {}
      for _, kv in ipairs(LN_TUNING) do if r(2) == 1 or kv[1] == "wg" or kv[1] == "spin_limit" then lt[kv[1]] = pick5(kv[2]) end end
      for _, kv in ipairs(ROW_TUNING) do if r(2) == 1 then rt[kv[1]] = pick5(kv[2]) end end
      local under = tuning_string("layer_norm", lt) .. " " .. tuning_string("rows", rt)
      reset_tunings()
      if pcall(lumus.tune.layer_norm, d, lt) and pcall(lumus.tune.rows, d, rt) then
        local xt = ref.random_table({ rows, d }, g5)
        local wt = ref.flatten(ref.random_table({ d }, g5))
        local bt = ref.flatten(ref.random_table({ d }, g5))
        local affine = r(2) == 1
        local x = lumus.tensor(xt)
        local w, b = affine and lumus.tensor(wt) or nil, affine and lumus.tensor(bt) or nil
        local inp = { { shape = { rows, d }, flat = ref.flatten(xt), nested = xt },
                      w and { shape = { d }, flat = wt, nested = wt }, b and { shape = { d }, flat = bt, nested = bt } }
        local function run(name, f, args, nargs)
          local res = compat.pack(f(compat.unpack(args, 1, nargs)))
          local results = { n = res.n }
          for k = 1, res.n do results[k] = snapshot_of(res[k]:shape(), res[k]:to_bytes()) end
          local e = check_values(name, args, nargs, inp, results)
          if e then
            error(("%s of %s: %s\n    under %s"):format(name, describe_call("x", args, nargs, inp), e, under), 0)
          end
        end
        run("layer_norm_forward", lumus.layer_norm_forward, { x, w, b }, 3)
        run("softmax", lumus.softmax, { x }, 1)
        run("sum", lumus.sum, { x }, 1)
        run("mean", lumus.mean, { x }, 1)
      end
    end
  end)

  -- layer_norm_backward under random valid tunings of its hook (every form, forced where
  -- it fits, else planned as automatic): dx within 2e-5 of max(1, |ref|), dweight and
  -- dbias within 1e-5 of their column's sum of |terms| plus 1e-6 (spec/layer_norm_backward_spec's
  -- bounds), against the float64 reference from the same float32 statistics.
  it("random valid tunings of tune.layer_norm_backward compute layer_norm_backward right", function()
    finally(function() lumus.tune.layer_norm_backward(4, nil, {}) end)
    local g6 = ref.rng(SEED + 5)
    local function r(k) return math.floor(g6.uniform() * k) + 1 end
    local function pick6(list) return list[r(#list)] end
    local LNB_TUNING = { { "form", { "auto", "fused", "columns", "rows", "split", "quad" } },
                         { "wg", { 0, 32, 64, 128 } }, { "items", { 0, 1, 2, 3, 8 } },
                         { "rows_at_once", { 0, 1, 2, 3, 4 } }, { "groups", { 0, 1, 2, 5 } },
                         { "prefetch", { true, false } }, { "stat_parts", { 0, 1, 3 } },
                         { "reduce_loads", { 0, 1, 5, 16 } }, { "reduce", { "auto", "fold", "dispatch" } } }
    for _ = 1, math.max(4, math.floor(CALLS / 5000)) do
      local d = pick6 { 4, 5, 7, 12, 33, 100, 257, 1000, 1027 }
      local rows = pick6 { 1, 2, 3, 5, 9 }
      local t = {}
      for _, kv in ipairs(LNB_TUNING) do if r(2) == 1 then t[kv[1]] = pick6(kv[2]) end end
      lumus.tune.layer_norm_backward(d, rows, t)
      local xt = ref.random_table({ rows, d }, g6)
      local dyt = ref.random_table({ rows, d }, g6)
      local wt = ref.flatten(ref.random_table({ d }, g6))
      local X, W = lumus.tensor(xt), lumus.tensor(wt)
      local _, m, rs = lumus.layer_norm_forward(X, W)
      local mt, rt = m:to_table(), rs:to_table()
      local dx, dw, db = lumus.layer_norm_backward(lumus.tensor(dyt), X, m, rs, W)
      local rdx, rdw, rdb = ref.layer_norm_backward(dyt, xt, mt, rt, wt)
      local under = ("%dx%d under %s"):format(rows, d, tuning_string("layer_norm_backward", t))
      local gx, gw, gb = dx:to_table(), dw:to_table(), db:to_table()
      for j = 1, d do
        local sw, sb = 0, 0
        for i = 1, rows do
          local e = math.abs(gx[i][j] - rdx[i][j])
          assert(e <= 2e-5 * math.max(1, math.abs(rdx[i][j])), ("dx[%d][%d] off by %g, %s"):format(i, j, e, under))
          sw = sw + math.abs(dyt[i][j] * (xt[i][j] - mt[i]) * rt[i])
          sb = sb + math.abs(dyt[i][j])
        end
        assert(math.abs(gw[j] - rdw[j]) <= 1e-5 * sw + 1e-6, ("dweight[%d] off, %s"):format(j, under))
        assert(math.abs(gb[j] - rdb[j]) <= 1e-5 * sb + 1e-6, ("dbias[%d] off, %s"):format(j, under))
      end
    end
  end)

  it("tune.layer_norm: random tuning either raises or still computes layer_norm right", function()
    local n = math.max(100, math.floor(CALLS / 1000))
    local runs = 0
    local g3 = ref.rng(SEED + 2)
    local function r(k) return math.floor(g3.uniform() * k) + 1 end
    local vals = { 0, 1, 2, 3, 4, 8, 16, 32, 64, 65, 1024, -1, 0.5, 2 ^ 40, "4", true, false, 50000 }
    for i = 1, n do
      local d = ({ 1, 3, 4, 8, 33, 100, 1000, 0, -5, 2 ^ 31, 1.5 })[r(11)]
      local tune = {}
      for _, k in ipairs { "items_target", "wg", "stream", "subgroup_items", "parts", "spin_limit", "tickets",
                           "classes", "epoch", "lean_masks", "segment_shuffles" } do
        if r(3) == 1 then tune[k] = vals[r(#vals)] end
      end
      if r(3) == 1 then tune.form = ({ "auto", "group", "subgroup", "stream", "split", "row", "x", 3 })[r(8)] end
      local ok, e = pcall(lumus.tune.layer_norm, d, r(5) > 1 and tune or nil)
      if not ok then
        assert.matches("tune.layer_norm", e, 1, true)
      elseif runs < math.floor(n / 3) and compat.is_integer_type(d) and d <= 1000 then
        runs = runs + 1
        local xt = ref.random_table({ 3, d }, g3)
        local y = lumus.layer_norm_forward(lumus.tensor(xt)):to_table()
        local c = ref.compare(y, ref.layer_norm_forward(xt))
        if not (c.max_abs < 1e-4) then
          local parts = {}
          for k, v in pairs(tune) do parts[#parts + 1] = ("%s=%s"):format(k, tostring(v)) end
          table.sort(parts)
          error(("D=%d {%s} (%s form): max_abs %g"):format(d, table.concat(parts, ", "), e.variant, c.max_abs))
        end
      end
      lumus.tune.layer_norm(1, {})   -- back to the defaults
    end
    assert.is_true(runs > 0)
  end)
end)
