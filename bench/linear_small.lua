-- bench/linear_small.lua: device time of a small model's linear on each kernel, and of
-- its fused forms (issue 21). For each shape MxNxK (an M x K input, an [N, K] weight):
--   matmul      lumus.linear on matmul's kernels (tune.linear{path = "matmul"}: the
--               small-M path up to 64 rows, else the tiled kernel)
--   small       the small-model kernel (tune.linear{path = "small"}: shaders/linear_small.comp)
--   auto        what lumus.linear runs by default (the kernel named in the table)
--   lin+gelu    linear, then lumus.gelu tanh: two dispatches (auto)
--   lin(gelu)   lumus.linear with {activation = "gelu_tanh"}: one (auto)
--   ln+lin+gelu layer_norm_forward, linear, gelu: three dispatches (auto)
--   ln_lin(gelu) lumus.layer_norm_linear with {activation = "gelu_tanh"}: one
-- Each is timed as a chain of --n calls where every call reads the previous result (a
-- barrier between them, as in a model; N = K) or, for N ~= K, --n independent calls;
-- µs per call, median of --samples lumus.gpu_time samples.
-- Then whole frames (bench/frame.lua's RxDxL: L x (LayerNorm, Linear DxD, GELU tanh) and a
-- Linear D->1 head) as the ops run them unfused, with fused activations, and as
-- layer_norm_linear blocks: device time per frame.
--   lua5.4 bench/linear_small.lua [--shapes 64x256x256,...] [--frames 64x256x8,128x512x16]
--                                 [--n 40] [--samples 15] [--csv FILE]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require("common")
local lumus = common.load_lumus()
local tune = lumus.tune

local USAGE = "lua5.4 bench/linear_small.lua [--shapes MxNxK,...] [--frames RxDxL,...] [--n 40] [--samples 15] [--csv FILE]"
local opts = common.parse_args(arg, { shapes = true, frames = true, n = true, samples = true, csv = true }, {}, USAGE)
local SHAPES = opts.shapes or
  "16x256x256,32x256x256,64x256x256,128x256x256,128x512x512,100x300x300,256x512x512,256x768x768,"
  .. "512x512x512,512x1024x1024,200x2048x2048,64x1024x256,128x2048x512,512x3072x768,1024x768x768,"
  .. "128x2304x768,128x768x3072,32x768x3072"
local FRAMES = opts.frames or "64x256x8,128x512x16"
local N_CALLS = common.int_opt(opts.n, 40)
local SAMPLES = common.int_opt(opts.samples, 15)

print("# lumus linear for small models: device time per call — " .. common.device_line(lumus))
print(("chains of %d calls (dependent when N = K); median of %d lumus.gpu_time samples; µs per call\n")
  :format(N_CALLS, SAMPLES))

local function gelu(t, out) return lumus.gelu(t, { approximate = "tanh", out = out }) end

local rows, csv = {}, { "shape,variant,kernel,us_per_call,gflops" }
for shape in SHAPES:gmatch("[^,]+") do
  local M, N, K = shape:match("^(%d+)x(%d+)x(%d+)$")
  if not M then io.stderr:write("bench/linear_small.lua: bad shape '" .. shape .. "' (want MxNxK)\n"); os.exit(2) end
  M, N, K = tonumber(M), tonumber(N), tonumber(K)
  local dependent = N == K
  local x = lumus.randn({ M, K })
  local w = lumus.randn({ N, K }):scale(1 / math.sqrt(K))
  local b = lumus.randn({ N }):scale(0.1)
  local lw, lb = lumus.ones({ K }), lumus.zeros({ K })
  local ring, tmp, tmp2 = {}, lumus.empty({ M, N }), lumus.empty({ M, K })
  for i = 1, 2 do ring[i] = lumus.empty({ M, N }) end
  -- f(input, out) records one call of the variant into out.
  local variants = {
    { "matmul", "matmul", function(i, o) return lumus.linear(i, w, b, { out = o }) end },
    { "small", "small", function(i, o) return lumus.linear(i, w, b, { out = o }) end },
    { "auto", "auto", function(i, o) return lumus.linear(i, w, b, { out = o }) end },
    { "lin+gelu", "auto", function(i, o) lumus.linear(i, w, b, { out = tmp }); return gelu(tmp, o) end },
    { "lin(gelu)", "auto", function(i, o) return lumus.linear(i, w, b, { out = o, activation = "gelu_tanh" }) end },
    { "ln+lin+gelu", "auto", function(i, o)
        lumus.layer_norm_forward(i, lw, lb, 1e-5, { out = tmp2 })
        lumus.linear(tmp2, w, b, { out = tmp })
        return gelu(tmp, o)
      end },
    { "ln_lin(gelu)", "auto", function(i, o)
        return lumus.layer_norm_linear(i, lw, lb, w, b, { out = o, activation = "gelu_tanh" })
      end },
  }
  for _, v in ipairs(variants) do
    local name, path, f = v[1], v[2], v[3]
    local cfg = tune.linear(M, N, K, { path = path })
    local t = common.device_time(lumus, function()
      if dependent then
        local a, c = ring[1], ring[2]
        f(x, a)
        for _ = 2, N_CALLS do f(a, c); a, c = c, a end
      else
        for i = 1, N_CALLS do f(x, ring[(i - 1) % 2 + 1]) end
      end
    end, SAMPLES, 2)
    local us = t / N_CALLS * 1e6
    local gf = 2 * M * N * K / (us * 1e-6) / 1e9
    local kernel = cfg.kernel .. (cfg.kernel == "small" and ("(%dx%d)"):format(cfg.bm, cfg.bn) or "")
    rows[#rows + 1] = { shape .. (dependent and "" or " (indep.)"), name, kernel, common.fmt(us, 3), common.fmt(gf, 1) }
    csv[#csv + 1] = ("%s,%s,%s,%.4f,%.2f"):format(shape, name, cfg.kernel, us, gf)
  end
  tune.linear(M, N, K, { path = "auto" })
  x:free(); w:free(); b:free(); tmp:free(); tmp2:free(); ring[1]:free(); ring[2]:free()
end
print(common.markdown_table({ "MxNxK", "variant", "kernel", "µs/call", "GFLOP/s" }, rows, { "l", "l", "l", "r", "r" }))
print()

-- Whole frames, device time.
local frows = {}
for shape in FRAMES:gmatch("[^,]+") do
  local R, D, L = shape:match("^(%d+)x(%d+)x(%d+)$")
  if not R then io.stderr:write("bench/linear_small.lua: bad frame '" .. shape .. "' (want RxDxL)\n"); os.exit(2) end
  R, D, L = tonumber(R), tonumber(D), tonumber(L)
  local x = lumus.randn({ R, D })
  local lw, lb = lumus.ones({ D }), lumus.zeros({ D })
  local ws, bs = {}, {}
  for i = 1, L do ws[i] = lumus.randn({ D, D }):scale(1 / math.sqrt(D)); bs[i] = lumus.zeros({ D }) end
  local hw, hb = lumus.randn({ 1, D }), lumus.zeros({ 1 })
  local h1, h2, h3, y = lumus.empty({ R, D }), lumus.empty({ R, D }), lumus.empty({ R, D }), lumus.empty({ R, 1 })
  local forms = {
    { "unfused (3L+1 dispatches)", function()
        local cur = x
        for i = 1, L do
          lumus.layer_norm_forward(cur, lw, lb, 1e-5, { out = h1 })
          lumus.linear(h1, ws[i], bs[i], { out = h2 })
          gelu(h2, h3); cur = h3
        end
        lumus.linear(cur, hw, hb, { out = y })
      end },
    { "linear(activation) (2L+1)", function()
        local cur = x
        for i = 1, L do
          lumus.layer_norm_forward(cur, lw, lb, 1e-5, { out = h1 })
          lumus.linear(h1, ws[i], bs[i], { out = h3, activation = "gelu_tanh" }); cur = h3
        end
        lumus.linear(cur, hw, hb, { out = y })
      end },
    { "layer_norm_linear (L+1)", function()
        local cur, other = x, h2
        for i = 1, L do
          lumus.layer_norm_linear(cur, lw, lb, ws[i], bs[i], { out = other, activation = "gelu_tanh" })
          cur = other; other = (other == h2) and h3 or h2
        end
        lumus.linear(cur, hw, hb, { out = y })
      end },
  }
  for _, fm in ipairs(forms) do
    for _, path in ipairs({ "auto", "matmul" }) do
      tune.linear(R, D, D, { path = path })
      local t = common.device_time(lumus, fm[2], SAMPLES, 3)
      frows[#frows + 1] = { shape, fm[1], path, common.fmt(t * 1e6, 1) }
      csv[#csv + 1] = ("frame %s,%s,%s,%.3f,"):format(shape, fm[1], path, t * 1e6)
    end
  end
  tune.linear(R, D, D, { path = "auto" })
end
print("## Frames: device time per frame (µs; path = tune.linear's setting)")
print()
print(common.markdown_table({ "frame RxDxL", "form", "linear path", "µs/frame" }, frows, { "l", "l", "l", "r" }))
if opts.csv then
  local fh = assert(io.open(opts.csv, "w"))
  fh:write(table.concat(csv, "\n"), "\n")
  fh:close()
end
