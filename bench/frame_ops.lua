-- bench/frame_ops.lua: where a frame's device time goes. For each op of the frame
-- (bench/frame.lua: LayerNorm, Linear DxD, tanh GELU on R rows), the device time of a
-- chain of N such ops where each reads the previous one's result (a barrier between
-- every two dispatches, as in the frame) and of N independent ones (same input, results
-- in a ring of tensors: no barrier), per op, median of lumus.gpu_time samples.
--   lua5.4 bench/frame_ops.lua [--shapes 64x256,128x512] [--n 50] [--csv FILE]
local here = (arg and arg[0] or ""):match("^(.*)[/\\][^/\\]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local common = require("common")
local lumus = common.load_lumus()

local opts = common.parse_args(arg, { shapes = true, n = true, csv = true, samples = true }, {},
  "lua5.4 bench/frame_ops.lua [--shapes 64x256,128x512] [--n 50] [--samples 20] [--csv FILE]")
local shapes = common.parse_shapes(opts.shapes or "64x256,128x512")
local N = common.int_opt(opts.n, 50)
local samples = common.int_opt(opts.samples, 20)

local ops = {
  { "layer_norm", function(x, w, b, out) return lumus.layer_norm_forward(x, w, b, 1e-5, { out = out }) end },
  { "linear", function(x, w, b, out) return lumus.linear(x, w, b, { out = out }) end },
  { "gelu_tanh", function(x, _, _, out) return lumus.gelu(x, { approximate = "tanh", out = out }) end },
  { "add", function(x, _, _, out) return lumus.add(x, x, { out = out }) end },
}

print("# lumus frame ops, device time per op — " .. common.device_line(lumus))
print(("chains of %d ops; median of %d lumus.gpu_time samples\n"):format(N, samples))
local rows, csv = {}, { "shape,op,dependent_us,independent_us" }
for _, s in ipairs(shapes) do
  local R, D = s[1], s[2]
  local x = lumus.randn({ R, D })
  local lw, lb = lumus.ones({ D }), lumus.zeros({ D })
  local w, b = lumus.randn({ D, D }):scale(1 / math.sqrt(D)), lumus.zeros({ D })
  local ring = {}
  for i = 1, 4 do ring[i] = lumus.empty({ R, D }) end
  for _, op in ipairs(ops) do
    local name, f = op[1], op[2]
    local ww, bb = w, b
    if name == "layer_norm" then ww, bb = lw, lb end
    local dep = common.device_time(lumus, function()
      local a, c = ring[1], ring[2]
      f(x, ww, bb, a)
      for _ = 2, N do f(a, ww, bb, c); a, c = c, a end
    end, samples, 3)
    local ind = common.device_time(lumus, function()
      for i = 1, N do f(x, ww, bb, ring[(i - 1) % 4 + 1]) end
    end, samples, 3)
    local shape = ("%dx%d"):format(R, D)
    rows[#rows + 1] = { shape, name, common.fmt(dep / N * 1e6, 3), common.fmt(ind / N * 1e6, 3) }
    csv[#csv + 1] = ("%s,%s,%.4f,%.4f"):format(shape, name, dep / N * 1e6, ind / N * 1e6)
  end
end
print(common.markdown_table({ "shape", "op", "dependent µs/op", "independent µs/op" }, rows,
  { "l", "l", "r", "r" }))
if opts.csv then
  local fh = assert(io.open(opts.csv, "w"))
  fh:write(table.concat(csv, "\n"), "\n")
  fh:close()
end
