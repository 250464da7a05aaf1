-- bench/random.lua: lumus.rand / randn (as t:uniform_() / t:normal_() into one tensor,
-- and as new tensors) and multinomial, against a same-run write ceiling (lumus.fill)
-- and, with --baseline, PyTorch's same-run times (bench/torch_random.py).
--
-- Median device time (lumus.gpu_time); GB/s counts the 4n bytes written; "% of fill"
-- against lumus.fill of the same tensor in this run. The first and last 8 values of each
-- are checked bit for bit against lumus.reference (from the generator state before the
-- call): "bits ok".
--
--   lua5.4 bench/random.lua [--preset h200|lavapipe] [--n FLOATS] [--iters N] [--warmup N]
--       [--baseline torch_random.csv] [--csv FILE]
--
-- Presets: h200 (64M floats) on a GPU, lavapipe (4M floats) on a CPU device.

local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require "common"
local chart = require "chart"

local fmt = common.fmt
local USAGE = [==[
usage: lua5.4 bench/random.lua [--preset h200|lavapipe] [--n FLOATS] [--iters N] [--warmup N]
  [--baseline torch_random.csv] [--csv FILE]]==]
local known = {}
for name in ("preset n iters warmup baseline csv"):gmatch("%S+") do known[name] = true end
local opt = common.parse_args(arg, known, {}, USAGE)

local lumus = common.load_lumus()
local ref = common.load_reference()
local dev_line, dev = common.device_line(lumus)

local PRESETS = {
  h200 = { n = 64 << 20, iters = 50, warmup = 5 },
  lavapipe = { n = 4 << 20, iters = 5, warmup = 2 },
}
local preset_name = opt.preset or (dev.kind == "cpu" and "lavapipe") or "h200"
local preset = PRESETS[preset_name]
if not preset then io.stderr:write("unknown preset ", preset_name, "\n", USAGE, "\n"); os.exit(2) end
local N = common.int_opt(opt.n, preset.n)
local iters = common.int_opt(opt.iters, preset.iters)
local warmup = common.int_opt(opt.warmup, preset.warmup)

local baseline = {}
if opt.baseline then
  local header, rows = chart.read_csv(opt.baseline)
  if not header then
    io.stderr:write("bench: warning: cannot read ", opt.baseline, ": ", tostring(rows), "\n")
  else
    for _, r in ipairs(rows) do baseline[tostring(r.op)] = r end
  end
end

local function device_time(fn) return (common.device_time(lumus, fn, iters, warmup)) end

-- Bit-for-bit check of elements 1..8 and N-7..N of t against the reference's draw.
local function bits_ok(t, draw, state)
  if not ref then return nil end
  local function words(s) local w = {} for i = 1, #s // 4 do w[i] = string.unpack("<I4", s, 4 * i - 3) end return w end
  local got = words(t:to_bytes(1, 8) .. t:to_bytes(N - 7, 8))
  local want = {}
  for _, v in ipairs(draw(8, state)) do want[#want + 1] = string.unpack("<I4", string.pack("<f", v)) end
  for _, v in ipairs(draw(8, state, N - 8)) do want[#want + 1] = string.unpack("<I4", string.pack("<f", v)) end
  for i = 1, 16 do if got[i] ~= want[i] then return false end end
  return true
end

local t = lumus.empty(N)
local results = {}
local t_fill = device_time(function() lumus.fill(t, 1.5) end)
local CASES = {
  { "rand", "t:uniform_()", function() t:uniform_() end, ref and ref.rand },
  { "randn", "t:normal_()", function() t:normal_() end, ref and ref.randn },
  { "rand", "lumus.rand(n) (new tensor)", function() lumus.rand(N):free() end },
  { "randn", "lumus.randn(n) (new tensor)", function() lumus.randn(N):free() end },
}
for _, c in ipairs(CASES) do
  local tm = device_time(c[3])
  local ok
  if c[4] then
    lumus.manual_seed(7)
    local state = lumus.get_rng_state()
    c[3]()
    ok = bits_ok(t, c[4], state)
  end
  results[#results + 1] = { op = c[1], form = c[2], us = tm * 1e6, gbs = 4 * N / tm / 1e9, ok = ok }
end
t_fill = math.min(t_fill, device_time(function() lumus.fill(t, 1.5) end))
t:free()
local fill_gbs = 4 * N / t_fill / 1e9
table.insert(results, 1, { op = "fill", form = "lumus.fill (write ceiling)", us = t_fill * 1e6, gbs = fill_gbs })

-- Sampling one token per row of 64 rows of a GPT-2 vocabulary.
do
  lumus.manual_seed(3)
  local probs = lumus.rand({ 64, 50257 })
  local tm = device_time(function() lumus.multinomial(probs, 1, { replacement = true }):free() end)
  results[#results + 1] = { op = "multinomial", form = "64x50257, 1 sample per row", us = tm * 1e6 }
  probs:free()
end

print(("# lumus random numbers, float32 — %s"):format(dev_line))
print(("preset %s, n = %dM floats; median of %d device-time samples (lumus.gpu_time) after %d warm-up calls."):format(
  preset_name, N >> 20, iters, warmup))
print("GB/s counts the 4n bytes written; % of fill against lumus.fill of the same tensor in this run; "
  .. "torch: bench/torch_random.py in the same run (t.uniform_(), t.normal_(), torch.multinomial); "
  .. "bits ok: first and last 8 values equal lumus.reference's.")
print()
local rows = {}
for _, r in ipairs(results) do
  local bl = baseline[r.op]
  rows[#rows + 1] = { r.op, r.form, fmt(r.us), r.gbs and fmt(r.gbs) or "-",
                      r.gbs and fmt(100 * r.gbs / fill_gbs, 1) or "-",
                      bl and fmt(tonumber(bl.torch_us)) or "-",
                      bl and string.format("%.2f", tonumber(bl.torch_us) / r.us) or "-",
                      r.ok == nil and "-" or tostring(r.ok) }
end
print(common.markdown_table({ "op", "form", "µs", "GB/s", "% of fill", "torch µs", "torch / lumus", "bits ok" }, rows,
  { "l", "l", "r", "r", "r", "r", "r", "l" }))

if opt.csv then
  local f = assert(io.open(opt.csv, "w"))
  f:write("op,form,us,gbs,pct_of_fill,torch_us,bits_ok\n")
  for _, r in ipairs(results) do
    local bl = baseline[r.op]
    f:write(("%s,%s,%.3f,%s,%s,%s,%s\n"):format(r.op, r.form, r.us, r.gbs and ("%.1f"):format(r.gbs) or "",
      r.gbs and ("%.1f"):format(100 * r.gbs / fill_gbs) or "", bl and bl.torch_us or "", r.ok == nil and "" or tostring(r.ok)))
  end
  f:close()
end
