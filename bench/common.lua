-- bench/common.lua: helpers shared by the lumus benchmark scripts.
--
-- Loaded by the scripts in bench/ as `require "common"` after they put their own folder
-- on package.path (see M.setup_paths, which each script copies in a two-line prelude).
-- Nothing here touches the GPU except through the `lumus` module handed in.

local M = {}

local unpack = table.unpack

---------------------------------------------------------------------------------------
-- Module loading
---------------------------------------------------------------------------------------

-- The folder of the running script (from arg[0]), "." when run from the repo root.
function M.script_dir()
  local a0 = arg and arg[0] or ""
  return a0:match("^(.*)[/\\][^/\\]*$") or "."
end

-- Loads lumus. The caller is expected to set LUA_PATH/LUA_CPATH (bench/run_h200.sh
-- does); if `require "lumus"` fails, the checkout's own lua/ and build/ folders (next to
-- bench/) are tried before giving up, so `lua5.4 bench/x.lua` works from a fresh build.
function M.load_lumus()
  local ok, lumus = pcall(require, "lumus")
  if ok then return lumus end
  local first_err = lumus
  local root = M.script_dir() .. "/.."
  package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
  package.cpath = root .. "/build/?.so;" .. package.cpath
  package.loaded["lumus"], package.loaded["lumus.core"] = nil, nil
  ok, lumus = pcall(require, "lumus")
  if ok then return lumus end
  io.stderr:write("bench: cannot load lumus (set LUA_PATH/LUA_CPATH, or run `make`)\n",
                  tostring(first_err), "\n")
  os.exit(2)
end

-- The pure-Lua float64 reference, or nil (with a warning) if it is not there.
function M.load_reference()
  local ok, ref = pcall(require, "lumus.reference")
  if ok and type(ref) == "table" and type(ref.layer_norm_forward) == "function" then
    return ref
  end
  io.stderr:write("bench: warning: lumus.reference unavailable, correctness checks skipped: ",
                  tostring(ref), "\n")
  return nil
end

-- lumus.core, however init.lua exposes it (as lumus.core or only in package.loaded).
function M.core_of(lumus)
  if type(lumus.core) == "table" then return lumus.core end
  local c = package.loaded["lumus.core"]
  if type(c) == "table" then return c end
  return nil
end

---------------------------------------------------------------------------------------
-- Clock
---------------------------------------------------------------------------------------

-- A wall clock in seconds for host timing. lumus.clock() (monotonic, high resolution) is
-- preferred. Plain Lua 5.4 has only os.clock(), which is *CPU time of this process*: it
-- does not advance while the process sleeps in a blocking wait (e.g. vkWaitForFences), so
-- host times measured with it are lower bounds. A warning says so once.
function M.make_clock(lumus)
  if type(lumus.clock) == "function" then return lumus.clock, "lumus.clock (monotonic)" end
  io.stderr:write("bench: warning: lumus.clock() missing; using os.clock(), which is CPU time ",
                  "(excludes time asleep in waits): host timings are lower bounds\n")
  return os.clock, "os.clock (CPU time; lower bound)"
end

---------------------------------------------------------------------------------------
-- Statistics
---------------------------------------------------------------------------------------

local function sorted_copy(t)
  local s = {}
  for i = 1, #t do s[i] = t[i] end
  table.sort(s)
  return s
end

-- Median of a list of numbers (mean of the two middle values for even lengths).
function M.median(t)
  local n = #t
  if n == 0 then return nil end
  local s = sorted_copy(t)
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

-- p-th percentile (0..100), nearest rank.
function M.percentile(t, p)
  local n = #t
  if n == 0 then return nil end
  local s = sorted_copy(t)
  local k = math.max(1, math.min(n, math.ceil(p / 100 * n)))
  return s[k]
end

function M.min(t)
  local m = math.huge
  for i = 1, #t do if t[i] < m then m = t[i] end end
  return m
end

---------------------------------------------------------------------------------------
-- Device timing
---------------------------------------------------------------------------------------

-- Median device seconds of fn over n lumus.gpu_time calls (and the samples), after `warm`
-- untimed calls and at least WARM_SECONDS of back-to-back calls. (On the H200, phases
-- were seen in which the large shapes ran at ~40% speed, copy included; an idle GPU's
-- clocks were suspected, but a test idling 0.5-2 s first did not reproduce them, so the
-- cause is unknown: bench/layer_norm.lua alternates rounds and keeps the best.)
M.WARM_SECONDS = 0.25
function M.device_time(lumus, fn, n, warm)
  for _ = 1, warm or 0 do fn() end
  local t0 = lumus.clock()
  repeat
    for _ = 1, 10 do fn() end
    lumus.synchronize()
  until lumus.clock() - t0 >= M.WARM_SECONDS
  local ts = {}
  for i = 1, n do ts[i] = lumus.gpu_time(fn) end
  return M.median(ts), ts
end

---------------------------------------------------------------------------------------
-- Command line
---------------------------------------------------------------------------------------

-- Parses `--name value`, `--name=value` and bare `--flag` (when `flags[name]` is true).
-- Returns a table keyed by name with dashes turned into underscores.
-- Unknown options are an error unless listed in `known` (a set of names, dashes allowed).
function M.parse_args(argv, known, flags, usage)
  local opts = {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local name, value = a:match("^%-%-([%w%-_]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w%-_]+)$") end
    if not name then
      io.stderr:write("unexpected argument: ", a, "\n", usage or "", "\n"); os.exit(2)
    end
    if name == "help" or name == "h" then io.write(usage or "", "\n"); os.exit(0) end
    if not known[name] then
      io.stderr:write("unknown option --", name, "\n", usage or "", "\n"); os.exit(2)
    end
    if value == nil then
      if flags and flags[name] then
        value = true
      else
        i = i + 1
        value = argv[i]
        if value == nil then io.stderr:write("option --", name, " needs a value\n"); os.exit(2) end
      end
    end
    opts[name:gsub("%-", "_")] = value
    i = i + 1
  end
  return opts
end

-- The shapes of a CSV file with a header line naming its rows and D columns (bench/sweep.lua's
-- --write-shapes file: a seeded random sweep), as "ROWSxD,...".
local function shapes_of_file(file)
  local f = assert(io.open(file, "r"))
  local column, k = {}, 0
  for name in (f:read("l") or ""):gmatch("[^,]+") do k = k + 1; column[name] = k end
  local ri, di = column.rows, column.D or column.d
  if not (ri and di) then f:close(); error(file .. ": no rows and D columns in its header") end
  local items = {}
  for line in f:lines() do
    local fields = {}
    for v in line:gmatch("[^,]+") do fields[#fields + 1] = v end
    if fields[ri] and fields[di] then items[#items + 1] = fields[ri] .. "x" .. fields[di] end
  end
  f:close()
  return table.concat(items, ",")
end

-- "8192x768,4096x4096" -> { {8192, 768}, {4096, 4096} } (each also has .name = "8192x768");
-- "@file" reads them from a CSV file (shapes_of_file).
function M.parse_shapes(s)
  local list = {}
  local file = tostring(s):match("^@(.+)$")
  if file then s = shapes_of_file(file) end
  for item in tostring(s):gmatch("[^,%s]+") do
    local r, d = item:match("^(%d+)[xX](%d+)$")
    if not r then error("bad shape '" .. item .. "' (expected ROWSxD, e.g. 8192x768)") end
    r, d = math.tointeger(tonumber(r)), math.tointeger(tonumber(d))
    list[#list + 1] = { r, d, name = r .. "x" .. d }
  end
  return list
end

function M.int_opt(v, default)
  if v == nil then return default end
  local n = math.tointeger(tonumber(v))
  if not n then error("expected an integer, got '" .. tostring(v) .. "'") end
  return n
end

---------------------------------------------------------------------------------------
-- Random data
---------------------------------------------------------------------------------------

-- A seeded standard-normal generator: lumus.reference's rng (the same numbers on every
-- platform) when it is there, else Box-Muller over Lua 5.4's math.random (xoshiro256**).
function M.normal_gen(seed, ref)
  if ref and type(ref.rng) == "function" then
    local g = ref.rng(seed or 42)
    if type(g) == "table" and type(g.normal) == "function" then return g.normal end
  end
  math.randomseed(seed or 42)
  local spare
  return function()
    if spare then local v = spare; spare = nil; return v end
    local u1 = 1.0 - math.random()          -- (0, 1]: log is finite
    local u2 = math.random()
    local rad = math.sqrt(-2.0 * math.log(u1))
    spare = rad * math.sin(2.0 * math.pi * u2)
    return rad * math.cos(2.0 * math.pi * u2)
  end
end

local CHUNK = 1024   -- floats per string.pack/unpack call (keeps the Lua stack small)
local FMT = "<" .. string.rep("f", CHUNK)

-- Packs a list of numbers as little-endian float32 bytes.
function M.pack_floats(vals)
  local parts, n = {}, #vals
  for i = 1, n, CHUNK do
    local j = math.min(n, i + CHUNK - 1)
    local fmt = (j - i + 1 == CHUNK) and FMT or ("<" .. string.rep("f", j - i + 1))
    parts[#parts + 1] = string.pack(fmt, unpack(vals, i, j))
  end
  return table.concat(parts)
end

-- Unpacks `n` float32 values from bytes `s`, starting at float index `first` (0-based).
-- Returns a Lua list (float32 values, exactly representable as Lua floats).
function M.unpack_floats(s, first, n)
  first = first or 0
  n = n or (#s // 4 - first)
  local out, pos = {}, first * 4 + 1
  local k = 0
  while k < n do
    local m = math.min(CHUNK, n - k)
    local fmt = (m == CHUNK) and FMT or ("<" .. string.rep("f", m))
    local vals = { string.unpack(fmt, s, pos) }
    for i = 1, m do out[k + i] = vals[i] end
    pos = vals[m + 1]
    k = k + m
  end
  return out
end

-- Random float32 bytes for `n` values: scale * N(0,1) + shift.
function M.random_bytes(gen, n, scale, shift)
  scale, shift = scale or 1.0, shift or 0.0
  local vals = {}
  for i = 1, n do vals[i] = shift + scale * gen() end
  return M.pack_floats(vals)
end

-- `s` repeated n times (n <= 200), then `tail`, as ONE concatenation: Lua 5.4's OP_CONCAT
-- sizes the result and copies each piece once, where string.rep and table.concat fill a
-- luaL_Buffer and copy that again (twice the memory traffic and page faults for 1 GiB).
local concat_fns = {}
function M.repeat_string(s, n, tail)
  assert(n >= 1 and n <= 200, "repeat_string: 1..200 pieces")
  local f = concat_fns[n]
  if not f then
    f = assert(load("local s, t = ... return s" .. string.rep(" .. s", n - 1) .. " .. t"))
    concat_fns[n] = f
  end
  return f(s, tail or "")
end

-- Bytes for an R x D float32 matrix whose rows cycle through a random block of `k` rows.
-- Generating 268M normals in Lua would take minutes; repeating a block of a few MiB takes
-- one memcpy, and since caches work by address, repeated row contents do not make a
-- bandwidth benchmark easier. k is a power of two (at most R) with at least
-- `block_floats` values (default 2^20) and at most 128 repeats.
-- Returns the bytes, the block's bytes, and k: row r (0-based) holds block row r % k.
function M.matrix_bytes(gen, R, D, block_floats)
  block_floats = block_floats or (1 << 20)
  local k = 1
  while k < R and (k * D < block_floats or R // k > 128) do k = k * 2 end
  if k > R then k = R end
  local block = M.random_bytes(gen, k * D, 1.0, 0.25)
  local q, rem = R // k, R % k
  if q == 1 and rem == 0 then return block, block, k end
  return M.repeat_string(block, q, block:sub(1, rem * D * 4)), block, k
end

---------------------------------------------------------------------------------------
-- Formatting
---------------------------------------------------------------------------------------

-- Formats a number with a sensible number of digits for a table cell ("-" for nil).
function M.fmt(v, digits)
  if v == nil or v ~= v then return "-" end
  if type(v) ~= "number" then return tostring(v) end
  if digits then return string.format("%." .. digits .. "f", v) end
  local a = math.abs(v)
  if a >= 1000 then return string.format("%.0f", v)
  elseif a >= 100 then return string.format("%.1f", v)
  elseif a >= 10 then return string.format("%.2f", v)
  elseif a >= 1 or a == 0 then return string.format("%.2f", v)
  else return string.format("%.3g", v) end
end

-- A GitHub-flavoured Markdown table. `align` is an optional list of "l"/"r" per column.
function M.markdown_table(header, rows, align)
  local lines = {}
  lines[1] = "| " .. table.concat(header, " | ") .. " |"
  local seps = {}
  for i = 1, #header do
    seps[i] = (align and align[i] == "l") and ":---" or "---:"
  end
  lines[2] = "|" .. table.concat(seps, "|") .. "|"
  for _, r in ipairs(rows) do
    local cells = {}
    for i = 1, #header do cells[i] = tostring(r[i] == nil and "-" or r[i]) end
    lines[#lines + 1] = "| " .. table.concat(cells, " | ") .. " |"
  end
  return table.concat(lines, "\n")
end

-- One line describing the device, for headers and chart titles.
-- Writes a CSV file: the header line, then each row's first fields through string.format's
-- `fmt` (one line, no newline).
function M.write_csv(path, header, fmt, rows)
  local f = assert(io.open(path, "w"))
  f:write(header, "\n")
  for _, r in ipairs(rows) do f:write(fmt:format(unpack(r)), "\n") end
  f:close()
end

function M.device_line(lumus)
  local ok, d = pcall(lumus.device)
  if not ok or type(d) ~= "table" then return "unknown device", {} end
  local s = string.format("%s (%s, driver %s, Vulkan %s, subgroup %s)",
    tostring(d.name), tostring(d.kind), tostring(d.driver_version or d.driver),
    tostring(d.api_version), tostring(d.subgroup_size))
  return s, d
end

-- Renders a value (e.g. the kernel-config table) compactly on one line.
function M.describe(v)
  if type(v) ~= "table" then return tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. M.describe(v[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

return M
