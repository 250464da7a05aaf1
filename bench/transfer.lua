--- bench/transfer.lua: host <-> device throughput for 64 MiB, beside a plain Lua string
-- copy of the same bytes in the same run.  lua5.4 bench/transfer.lua [--mib 64] [--runs 5]
local lumus = require "lumus"
local mib = 64
local runs = 5
for i = 1, #arg, 2 do
  if arg[i] == "--mib" then mib = tonumber(arg[i + 1]) elseif arg[i] == "--runs" then runs = tonumber(arg[i + 1]) end
end
local n = mib * 2 ^ 20 // 4
local bytes = n * 4
local function median(t) table.sort(t); return t[(#t + 1) // 2] end
local function timed(fn)
  local ts = {}
  for i = 1, runs do
    collectgarbage()
    local t0 = lumus.clock()
    fn()
    ts[i] = lumus.clock() - t0
  end
  return median(ts)
end

local s = string.rep(string.pack("<ffff", 1.5, -2, 3.25, 4), n // 4)
-- A real copy of s: concatenation builds a new string of #s + 1 bytes (one memcpy of s).
local t_copy = timed(function() local c = s .. "!"; assert(#c == bytes + 1) end)
local x
local t_from = timed(function() if x then x:free() end; x = lumus.from_bytes(s, { n }); lumus.synchronize() end)
local t_to = timed(function() local b = x:to_bytes(); assert(#b == bytes) end)
local tbl = {}
for i = 1, n do tbl[i] = (i % 1000) * 0.5 end
local y
local t_tab = timed(function() if y then y:free() end; y = lumus.tensor(tbl); lumus.synchronize() end)
local t_totab = timed(function() local t = y:to_table(); assert(#t == n) end)

local dev = lumus.device()
print(("# transfers of %d MiB — %s, %s, median of %d runs"):format(mib, dev.name, os.date("!%Y-%m-%d"), runs))
print("| transfer | ms | MB/s | time / string copy |")
print("|---|---|---|---|")
local function row(name, t) print(("| %s | %.1f | %.0f | %.2fx |"):format(name, t * 1e3, bytes / t / 1e6, t / t_copy)) end
row("Lua string copy (s .. \"!\")", t_copy)
row("lumus.from_bytes + synchronize", t_from)
row("t:to_bytes()", t_to)
row("lumus.tensor(flat table of 16M numbers) + synchronize", t_tab)
row("t:to_table()", t_totab)
