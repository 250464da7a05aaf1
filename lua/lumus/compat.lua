--- lumus.compat: what differs between Lua 5.1, LuaJIT 2.1, Lua 5.3 and 5.4, behind one
-- set of functions, so that lumus's Lua files (and specs) run unchanged on each and give
-- the same bits. Byte packing, float32 rounding and the reference generators' 64-bit
-- integer steps are C (lumus.core._host, src/ops/host_pack.c): 5.1 and LuaJIT have
-- neither string.pack nor integer operators.
--   local compat = require "lumus.compat"
--   compat.unpack(list, i, j)           table.unpack / unpack
--   compat.pack(...)                    table.pack: {n = select("#", ...), ...}
--   compat.is_integer(v)                an integral finite number (3 and 3.0 alike)
--   compat.integers                     true where numbers have an integer subtype (5.3+)
--   compat.is_integer_type(v)           v has the integer subtype (5.3+), or is integral
--                                       (5.1, LuaJIT: what the C core takes for one)
--   compat.maxinteger, compat.mininteger  the extreme integers a number holds exactly:
--                                       math.maxinteger/mininteger (5.3+), +-2^53
--   compat.integer(v)                   v if integral, as an integer where the language has
--                                       them (5.3+: 3.0 gives 3, printed "3"), else nil
--   compat.pack_bytes(kind, list [, n]) little-endian bytes of list[1..n]
--   compat.unpack_bytes(kind, bytes [, pos [, n]])  a list of values read back
--       kind: "f32", "f64", "i64", "i32", "u32", "u16" or "u8" (i64 exact to 2^53 on
--       5.1 and LuaJIT, whose numbers are doubles)
--   compat.f32(x)                       x rounded to float32
--   compat.float_bits(x), compat.bits_float(u)   float32 <-> its 32-bit word
--   compat.philox(c0, c1, c2, c3, k0, k1)       one Philox4x32-10 block: 4 words
--   compat.philox_block(seed, offset, block)    block of lumus's generator: 4 words
--   compat.splitmix64(seed, i)          the i-th uniform in [0, 1) of SplitMix64
--   compat.nan_payloads                 true where a NaN keeps its sign and payload as a Lua
--                                       number (not LuaJIT, which makes every NaN one NaN)
--   compat.load(source, name, env)      a chunk from a string, with env as its globals
--   compat.close_variables              true where `local x <close>` parses (5.4+)
--   compat.negative_zero                -0.0 (Lua 5.1 merges the constants -0.0 and 0 of a
--                                       function, so a literal -0.0 may read as 0 there)
--   compat.execute(cmd)                 os.execute's success as a boolean (5.1 gives a status)
--   compat.on_collect(fn)               an object whose collection calls fn (5.1 and LuaJIT
--                                       run __gc of userdata only: a newproxy there)
--   compat.gc_incremental(pause, stepmul)  incremental collector parameters (0: unchanged)
local host = require("lumus.core")._host

local M = {}

M.unpack = table.unpack or unpack   -- luacheck: ignore (5.1's global)

function M.pack(...) return { n = select("#", ...), ... } end

function M.is_integer(v)
  return type(v) == "number" and v == math.floor(v) and v - v == 0   -- not inf, not NaN
end

local math_type = math.type   -- 5.3+
M.integers = math_type ~= nil
function M.is_integer_type(v)
  if math_type then return math_type(v) == "integer" end
  return M.is_integer(v)
end

M.maxinteger = math.maxinteger or 2 ^ 53
M.mininteger = math.mininteger or -2 ^ 53

local tointeger = math.tointeger   -- 5.3+
function M.integer(v)
  if not M.is_integer(v) then return nil end
  return tointeger and tointeger(v) or v   -- beyond 64 bits (5.3+): the float itself
end

function M.pack_bytes(kind, list, n) return host.pack(kind, list, n or #list) end
M.unpack_bytes = host.unpack
M.f32 = host.f32
M.float_bits = host.float_bits
M.bits_float = host.bits_float
M.philox = host.philox
M.nan_payloads = host.float_bits(host.bits_float(0x7fc00001)) == 0x7fc00001
M.philox_block = host.philox_block
M.splitmix64 = host.splitmix64

-- 5.2+ load takes an environment; 5.1 has loadstring and setfenv instead.
local setfenv_ = rawget(_G, "setfenv")
function M.load(source, name, env)
  if not setfenv_ then
    if env == nil then return load(source, name, "t") end   -- (an explicit nil env is no globals)
    return load(source, name, "t", env)
  end
  local f, err = (rawget(_G, "loadstring"))(source, name)
  if f and env then setfenv_(f, env) end
  return f, err
end

M.close_variables = M.load("local x <close> = nil", "=probe") ~= nil

M.negative_zero = -1 / math.huge

function M.execute(cmd)
  local r = os.execute(cmd)
  return r == true or r == 0
end

local newproxy_ = rawget(_G, "newproxy")
function M.on_collect(fn)
  if not newproxy_ then return setmetatable({}, { __gc = fn }) end
  local p = newproxy_(true)
  getmetatable(p).__gc = fn
  return p
end

function M.gc_incremental(pause, stepmul)
  if M.close_variables then return collectgarbage("incremental", pause, stepmul) end   -- 5.4
  if pause ~= 0 then collectgarbage("setpause", pause) end
  if stepmul ~= 0 then collectgarbage("setstepmul", stepmul) end
end

return M
