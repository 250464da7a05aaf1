-- bench/transpose.lua: strided copies that transpose (x:permute(p):contiguous() into a
-- preallocated out) in each form of lumus.tune.transpose (tile64, tile32, general),
-- against the same-run contiguous copy of the same bytes; GB/s count bytes read +
-- written, % is of that copy. One run shows every form side by side.
--
--   lua5.4 bench/transpose.lua [--reps 20] [--quick]
--
-- Cases: 8192x8192 float32 and float16 (transpose(1, 2)), 4097x3001 float32, batched
-- [12, 1024, 64] float32 permute {1, 3, 2}, [64, 12, 128, 64] permute {1, 3, 2, 4}
-- (a head split: no transpose of the unit-stride dim, general form only) and
-- [32, 128, 512] permute {3, 2, 1}. --quick uses small sizes (lavapipe).
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()

local reps, quick = 20, false
local i = 1
while i <= #arg do
  if arg[i] == "--reps" then reps = tonumber(arg[i + 1]); i = i + 2
  elseif arg[i] == "--quick" then quick = true; i = i + 1
  else error("usage: lua5.4 bench/transpose.lua [--reps 20] [--quick]") end
end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local function time(fn)
  fn(); lumus.synchronize()
  local ts = {}
  for k = 1, reps do ts[k] = lumus.gpu_time(fn) end
  return median(ts)
end

local cases = quick and {
  { "512x512 float32 transpose(1, 2)", { 512, 512 }, { 2, 1 }, "float32" },
  { "512x512 float16 transpose(1, 2)", { 512, 512 }, { 2, 1 }, "float16" },
  { "257x131 float32", { 257, 131 }, { 2, 1 }, "float32" },
  { "[12, 128, 64] permute {1, 3, 2}", { 12, 128, 64 }, { 1, 3, 2 }, "float32" },
} or {
  { "8192x8192 float32 transpose(1, 2)", { 8192, 8192 }, { 2, 1 }, "float32" },
  { "8192x8192 float16 transpose(1, 2)", { 8192, 8192 }, { 2, 1 }, "float16" },
  { "4097x3001 float32 transpose(1, 2)", { 4097, 3001 }, { 2, 1 }, "float32" },
  { "4097x3001 float16 transpose(1, 2)", { 4097, 3001 }, { 2, 1 }, "float16" },
  { "[12, 1024, 64] float32 permute {1, 3, 2}", { 12, 1024, 64 }, { 1, 3, 2 }, "float32" },
  { "[64, 12, 128, 64] float32 permute {1, 3, 2, 4}", { 64, 12, 128, 64 }, { 1, 3, 2, 4 }, "float32" },
  { "[32, 128, 512] float32 permute {3, 2, 1}", { 32, 128, 512 }, { 3, 2, 1 }, "float32" },
}
local forms = { "tile64", "tile32", "general" }
local saved = lumus.tune.transpose()

print(("# Transposing copies — %s"):format(common.device_line(lumus)))
print(("%s; median of %d lumus.gpu_time samples; GB/s = (read + written) / time")
  :format(os.date("!%Y-%m-%d %H:%M UTC"), reps))
print()
print("| case | copy GB/s | tile64 GB/s | % of copy | tile32 GB/s | % of copy | general GB/s | % of copy | check |")
print("|:---|---:|---:|---:|---:|---:|---:|---:|:---|")
for _, c in ipairs(cases) do
  local name, shape, perm, dtype = c[1], c[2], c[3], c[4]
  local x = lumus.randn(shape):to(dtype)
  local v = x:permute(perm)
  local y = lumus.empty(v:shape(), { dtype = dtype })
  local flat = lumus.empty(shape, { dtype = dtype })
  local bytes = 2 * x:numel() * (dtype == "float32" and 4 or 2)
  local tc = time(function() lumus.copy(x, { out = flat }) end)
  local row = { name, ("%.0f"):format(bytes / tc / 1e9) }
  local ref
  for _, form in ipairs(forms) do
    lumus.tune.transpose({ form = form })
    local tt = time(function() lumus.copy(v, { out = y }) end)
    row[#row + 1] = ("%.0f"):format(bytes / tt / 1e9)
    row[#row + 1] = ("%.1f"):format(100 * tc / tt)
    local b = y:to_bytes()
    if not ref then ref = b elseif b ~= ref then row.bad = form end
  end
  row[#row + 1] = row.bad and ("DIFFERS (" .. row.bad .. ")") or "same bytes"
  print("| " .. table.concat(row, " | ") .. " |")
  x:free(); y:free(); flat:free()
end
lumus.tune.transpose({ form = saved })
