-- Fuzzing the public surface from Lua: every function of the lumus module table and
-- every Tensor method (found at run time, so ops added later are fuzzed too) is called
-- with random argument lists built from hostile values. Each call runs in pcall and may
-- only succeed or raise a string naming the function; afterwards every tensor the
-- fuzzer did not hand out for writing still holds its bytes, and device memory in use
-- returns to where it started.
--
-- LUMUS_FUZZ_CALLS (default 100000) and LUMUS_FUZZ_SEED set the run; a failure message
-- gives the seed and the call number to replay. LUMUS_FUZZ_MAX_CALL_S bounds one call.
local lumus = require "lumus"
local ref = require "lumus.reference"

local CALLS = math.tointeger(tonumber(os.getenv("LUMUS_FUZZ_CALLS") or "")) or 100000
local SEED = math.tointeger(tonumber(os.getenv("LUMUS_FUZZ_SEED") or "")) or 5150
-- No call may take longer (a hang); under valgrind a pipeline compile alone takes seconds.
local MAX_CALL_S = tonumber(os.getenv("LUMUS_FUZZ_MAX_CALL_S") or "") or 10

-- Change state shared by the whole lua_State: fuzzed on their own below, then restored
-- (so are the tuning hooks, the functions of lumus.tune).
local SEPARATE = { set_memory_limit = true }
-- Write into their first argument, so that tensor is not expected to keep its bytes (so
-- does any name ending in "_", the Torch convention for in-place ops).
local WRITES_FIRST = { fill = true }
local function writes_first(name) return WRITES_FIRST[name] or name:sub(-1) == "_" end
-- Output-style keys an options table may carry (any table argument is fair game).
local KEYS = { "out", "mean", "invstd", "weight", "bias", "eps", "transpose_b", "dim", "alpha", "beta", "x" }

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
    if chance(0.02) then v = pick { 0 / 0, math.huge, -math.huge, -0.0, 1e38, 1e-40 } end
    parts[i] = string.pack("<f", v)
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
local NUMBERS = { 0, 1, 2, 3, 4, 8, -1, -2, 0.5, 1.5, -0.0, 1e-5, 1e-45, 3.0, 2 ^ 31, 2 ^ 32 + 1,
                  2 ^ 40, 2 ^ 53, 2 ^ 63, math.maxinteger, math.mininteger, math.maxinteger // 2,
                  0 / 0, math.huge, -math.huge, 1e300, -1e300, 2 ^ 31 - 1, 65536 }
local SIZES_OK = { 1, 2, 3, 4, 5, 8 }
local SIZES_BAD = { 0, -1, -4, 2 ^ 31, 2 ^ 32, 2 ^ 40, 2 ^ 41, 2 ^ 62, math.maxinteger, math.mininteger,
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
  if r == 6 then return { math.maxinteger, 2 } end
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
        t[i] = chance(0.97) and g.normal() or pick { 0 / 0, math.huge, 1e300, -0.0, math.maxinteger }
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
  if r < 0.86 then return pick { { table.unpack(shape) }, { n }, { -1 }, { 1, -1 }, { n, 1 }, n } end
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
    elseif r < 0.78 then args[1] = { table.unpack(SHAPES[gi]) }
    elseif r < 0.85 then args[1] = grp.bytes
    elseif r < 0.91 then args[1] = nested_numbers(dirty)
    elseif r < 0.95 then args[1] = callback()
    else args[1] = any_value(dirty) end
  end
  for a = 2, nargs do args[a] = coherent_value(dirty, gi, a) end
  if entry.name == "from_bytes" and chance(0.5) then   -- string, then its shape
    args[1], args[2] = grp.bytes, { table.unpack(SHAPES[gi]) }
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

-- Oracles for calls whose result is known, on a sample of successes.
local function check_result(entry, args, res, where)
  local n = entry.name
  if n == "from_bytes" and type(args[1]) == "string" and res:to_bytes() ~= args[1] then
    fail(where .. ": from_bytes did not round-trip")
  elseif (n == "zeros" or n == "ones") then
    local want = string.pack("<f", n == "zeros" and 0 or 1):rep(res:numel())
    if res:to_bytes() ~= want then fail(where .. ": " .. n .. " has wrong contents") end
  elseif n == "copy" and getmetatable(args[1]) == getmetatable(res) then
    if not args[1]:is_freed() and res:to_bytes() ~= args[1]:to_bytes() then fail(where .. ": copy differs") end
  end
end

---------------------------------------------------------------------------------------
describe("fuzzing every public function and method", function()
  local surface, names_of = discover()
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
    for call = 1, CALLS do
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
        setmetatable({}, { __gc = function()
          if kind == 1 then tt:free()
          elseif kind == 2 then pcall(lumus.zeros, { 3 })
          else pcall(lumus.copy, tt) end
        end })
      end
      for _, t in ipairs(dirty) do local grp = by_tensor[t]; if grp then grp.dirty = true end end

      -- the first thousand calls of every ten thousand run with the GC always mid-cycle, so the
      -- finalizers above run inside lumus calls, at their allocations
      if call % 10000 == 1 then collectgarbage("incremental", 0, 1000)
      elseif call % 10000 == 1001 then collectgarbage("incremental", 200, 100) end
      local t0 = lumus.clock()
      local res = table.pack(pcall(entry.f, table.unpack(args, 1, nargs)))
      local dt = lumus.clock() - t0
      if dt > slowest then slowest, slowest_at = dt, where end

      if res[1] then
        ok_calls = ok_calls + 1
        for r = 2, res.n do add_junk(res[r]) end
        if chance(0.05) and getmetatable(res[2]) == getmetatable(groups[1].base) and not res[2]:is_freed() then
          local ok2, e2 = pcall(check_result, entry, args, res[2], where)
          if not ok2 and not tostring(e2):find("tensor has been freed", 1, true) then fail(where .. ": " .. tostring(e2)) end
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
      if call % 500 == 0 then check_groups(where) end
    end
    collectgarbage("incremental", 200, 100)
    check_groups("end")

    -- free everything the fuzzer made; memory in use is back where it started
    for _, list in ipairs { groups, sentinels } do
      for _, grp in ipairs(list) do for _, h in ipairs(grp.handles) do h:free() end end
    end
    groups, sentinels, junk, CALLBACKS = {}, {}, {}, nil
    collectgarbage("collect"); collectgarbage("collect"); lumus.synchronize()
    collectgarbage("collect"); lumus.synchronize()
    lumus.set_memory_limit(saved_limit)
    assert.are.equal(0, nfailures, table.concat(failures, "\n"))
    assert.are.equal(start, held())
    assert.is_true(slowest < MAX_CALL_S, ("slowest call %.2f s (%s)"):format(slowest, slowest_at))
    assert.is_true(ok_calls > CALLS / 20 and err_calls > CALLS / 4,
                   ("too few successes or errors: %d ok, %d errors"):format(ok_calls, err_calls))
    -- and the module still computes
    local x = lumus.tensor({ { 1, 2, 3, 4 } })
    local want = ref.layer_norm_forward({ { 1, 2, 3, 4 } })
    assert.is_true(ref.compare(lumus.layer_norm_forward(x):to_table(), want).max_abs < 1e-5)
  end)

  it("set_memory_limit: random arguments either set the documented limit or raise, then restore", function()
    collectgarbage("collect"); lumus.synchronize()
    local m0 = lumus.memory()
    local total = m0.device_total
    local n = math.max(200, CALLS // 200)
    local g2 = ref.rng(SEED + 1)
    for i = 1, n do
      local v = i % 7 == 0 and nil or NUMBERS[math.floor(g2.uniform() * #NUMBERS) + 1]
      if i % 11 == 0 then v = pick { "1024", {}, true, print, m0.in_use + 4096 } end
      local before = lumus.memory().limit
      local ok, e = pcall(lumus.set_memory_limit, v)
      local after = lumus.memory().limit
      if ok then
        local want = v == nil and total or math.min(math.tointeger(v), total)
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
        if pcall(f, table.unpack(args, 1, nsizes + 1)) then return true end
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
    local n = math.max(100, CALLS // 500)
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
        local ok, e = pcall(f, table.unpack(args, 1, nargs))
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

  it("tune.layer_norm: random tuning either raises or still computes layer_norm right", function()
    local n = math.max(100, CALLS // 1000)
    local runs = 0
    local g3 = ref.rng(SEED + 2)
    local function r(k) return math.floor(g3.uniform() * k) + 1 end
    local vals = { 0, 1, 2, 3, 4, 8, 16, 32, 64, 65, 1024, -1, 0.5, 2 ^ 40, "4", true, false, 50000 }
    for i = 1, n do
      local d = ({ 1, 3, 4, 8, 33, 100, 1000, 0, -5, 2 ^ 31, 1.5 })[r(11)]
      local tune = {}
      for _, k in ipairs { "items_target", "wg", "stream", "subgroup_items", "parts", "spin_limit", "tickets",
                           "classes", "epoch" } do
        if r(3) == 1 then tune[k] = vals[r(#vals)] end
      end
      if r(3) == 1 then tune.form = ({ "auto", "group", "subgroup", "stream", "split", "row", "x", 3 })[r(8)] end
      local ok, e = pcall(lumus.tune.layer_norm, d, r(5) > 1 and tune or nil)
      if not ok then
        assert.matches("tune.layer_norm", e, 1, true)
      elseif runs < n // 3 and math.type(d) == "integer" and d <= 1000 then
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
