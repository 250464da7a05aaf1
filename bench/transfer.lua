-- bench/transfer.lua: host <-> device transfer throughput for one payload (64 MiB by
-- default), beside plain Lua copies of the same data measured in the same run.
--
--   lua5.4 bench/transfer.lua [--mib 64] [--runs 5] [--table-runs 3] [--warmup 1]
--
-- Rows (median of the runs, MB = 10^6 bytes of float32 payload):
--   Lua string copy     s:sub(1). In Lua 5.4 this really copies: str_sub always calls
--                       lua_pushlstring, and long strings (> 40 bytes) are not interned,
--                       so it is one allocation plus one memcpy of 64 MiB. Not copies:
--                       `s .. ""` (concatenating an empty string returns s itself).
--                       Two copies: string.rep(s, 1) and table.concat({s}) (both fill a
--                       luaL_Buffer, then copy it into the new string). The script checks
--                       with collectgarbage("count") that its copy allocated the bytes.
--   from_bytes          lumus.from_bytes(s, {n}) + lumus.synchronize()
--   to_bytes            t:to_bytes() (waits for the tensor, then downloads into a string),
--                       with lumus.tune.stream{prefault=} off then on (pages of the new
--                       string faulted in one madvise: see src/storage.c)
--   write_bytes         t:write_bytes(s) into an existing tensor + lumus.synchronize()
--   Lua table copy      table.move into a fresh table (the fastest plain-Lua table copy;
--                       the table grows by rehashing, as any table built in Lua does)
--   tensor(table)       lumus.tensor(flat list of n numbers) + lumus.synchronize()
--   to_table            t:to_table() (a flat list of n numbers)
-- "vs string copy" is time / time of the string copy: 1.00x means as fast as Lua copying
-- the same bytes; "vs table copy" likewise for the table rows.

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"

local USAGE = "usage: lua5.4 bench/transfer.lua [--mib 64] [--runs 5] [--table-runs 3] [--warmup 1]"
local opt = common.parse_args(arg, { mib = true, runs = true, ["table-runs"] = true, warmup = true },
                              nil, USAGE)
local mib = common.int_opt(opt.mib, 64)
local runs = common.int_opt(opt.runs, 5)
local table_runs = common.int_opt(opt.table_runs, 3)
local warmup = common.int_opt(opt.warmup, 1)

local lumus = common.load_lumus()
local clock, clock_name = common.make_clock(lumus)
local dev_line = common.device_line(lumus)

local n = mib * (1 << 20) // 4        -- floats
local bytes = n * 4

-- Times fn (given the run index) `reps` times after `warm` untimed runs; the GC runs
-- before each timed run and is stopped during it. `after` (untimed) cleans up per run.
local function timed(reps, fn, after)
  local ts = {}
  for i = 1 - warmup, reps do
    collectgarbage(); collectgarbage("stop")
    local t0 = clock()
    local r = fn(i)
    local dt = clock() - t0
    collectgarbage("restart")
    if after then after(r) end
    if i >= 1 then ts[i] = dt end
  end
  return common.median(ts), common.min(ts)
end

-- The payload: random float32 bytes (a 1 MiB random block repeated).
local gen = common.normal_gen(7)
local block_n = math.min(n, 1 << 18)
local s = string.rep(common.random_bytes(gen, block_n), n // block_n)
  .. common.random_bytes(gen, n % block_n)
assert(#s == bytes)

-- Check that s:sub(1) really allocates a new string of #s bytes.
collectgarbage(); collectgarbage("stop")
local kb0 = collectgarbage("count")
local probe = s:sub(1)
local grew = (collectgarbage("count") - kb0) * 1024
collectgarbage("restart")
assert(#probe == bytes)
probe = nil                                                   -- luacheck: ignore
local copy_note = grew >= bytes * 0.99 and "verified: allocates a new string"
  or ("WARNING: only %.0f bytes allocated, not a copy"):format(grew)

local results = {}
local function add(name, t, tmin, base, base2)
  results[#results + 1] = { name = name, t = t, tmin = tmin, base = base, base2 = base2 }
end

-- Strings.
local t_str, t_str_min = timed(runs, function() return s:sub(1) end)
add("Lua string copy `s:sub(1)`", t_str, t_str_min)

local t_from, t_from_min = timed(runs, function()
  local x = lumus.from_bytes(s, { n })
  lumus.synchronize()
  return x
end, function(x) x:free() end)
add("lumus.from_bytes(s, {n}) + synchronize", t_from, t_from_min, t_str)

local x = lumus.from_bytes(s, { n })
lumus.synchronize()
local back = x:to_bytes()
local roundtrip_ok = back == s
back = nil                                                    -- luacheck: ignore
-- to_bytes with the large-string pre-faulting off, then on (lumus.tune.stream{prefault=}):
-- one run shows both; the default is on unless LUMUS_PREFAULT=0.
local has_prefault = lumus.tune and lumus.tune.stream and lumus.tune.stream().prefault ~= nil
local prefault_default = has_prefault and lumus.tune.stream().prefault
if has_prefault then
  lumus.tune.stream({ prefault = false })
  local t_off, t_off_min = timed(runs, function() return x:to_bytes() end,
    function(b) assert(#b == bytes) end)
  add("t:to_bytes() prefault off", t_off, t_off_min, t_str)
  lumus.tune.stream({ prefault = true })
end
local t_to, t_to_min = timed(runs, function() return x:to_bytes() end,
  function(b) assert(#b == bytes) end)
add(has_prefault and "t:to_bytes() prefault on" or "t:to_bytes()", t_to, t_to_min, t_str)
local back2 = x:to_bytes()
roundtrip_ok = roundtrip_ok and back2 == s
back2 = nil                                                   -- luacheck: ignore
if has_prefault then lumus.tune.stream({ prefault = prefault_default }) end

-- write_bytes into an existing tensor (no device allocation) + synchronize.
local t_wb, t_wb_min = timed(runs, function()
  x:write_bytes(s)
  lumus.synchronize()
end)
add("t:write_bytes(s) + synchronize", t_wb, t_wb_min, t_str)
x:free()

-- Tables (the same values as s).
local list = common.unpack_floats(s)
local t_tab, t_tab_min = timed(table_runs, function() return table.move(list, 1, n, 1, {}) end)
add("Lua table copy `table.move(list, 1, n, 1, {})`", t_tab, t_tab_min, t_str)

local t_tensor, t_tensor_min = timed(table_runs, function()
  local y = lumus.tensor(list)
  lumus.synchronize()
  return y
end, function(y) y:free() end)
add("lumus.tensor(list) + synchronize", t_tensor, t_tensor_min, t_str, t_tab)

local y = lumus.tensor(list)
local t_totab, t_totab_min = timed(table_runs, function() return y:to_table() end,
  function(t) assert(#t == n) end)
add("t:to_table()", t_totab, t_totab_min, t_str, t_tab)
y:free()

print(("# Transfers of %d MiB (%d float32) — %s"):format(mib, n, dev_line))
print(("%s; median of %d runs (%d for tables) after %d warm-up; host clock %s")
  :format(os.date("!%Y-%m-%d %H:%M UTC"), runs, table_runs, warmup, clock_name))
print()
print("| transfer | ms (median) | ms (min) | MB/s | GB/s | vs string copy | vs table copy |")
print("|:---|---:|---:|---:|---:|---:|---:|")
for _, r in ipairs(results) do
  print(("| %s | %.2f | %.2f | %.0f | %.2f | %s | %s |"):format(r.name, r.t * 1e3, r.tmin * 1e3,
    bytes / r.t / 1e6, bytes / r.t / 1e9, r.base and ("%.2fx"):format(r.t / r.base) or "1.00x",
    r.base2 and ("%.2fx"):format(r.t / r.base2) or "-"))
end
print()
print(("String copy: %s. Round trip from_bytes -> to_bytes equal: %s.")
  :format(copy_note, tostring(roundtrip_ok)))
if not roundtrip_ok then os.exit(1) end
