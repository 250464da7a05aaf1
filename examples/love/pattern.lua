-- The model the LÖVE example draws: an MLP from a pixel's coordinates and the time to
-- its colour (a compositional pattern-producing network), with fixed weights.
--
--   inputs  [N, 5]  x, y, r = sqrt(x^2 + y^2), sin(phase), cos(phase)   (N = WIDTH * HEIGHT)
--   3 x (Linear(., HIDDEN), tanh), Linear(HIDDEN, 3), sigmoid          -> r, g, b in (0, 1)
--
-- On the device the colours are also quantized to 8 bits and packed into one int32 per
-- pixel whose little-endian bytes are r, g, b, 255: `to_bytes` of the result is the
-- "rgba8" pixel data LÖVE takes. The packing is exact in float32: every channel is
-- floor(255 c + 1/2), an integer, and r + 256 g + 65536 b - 2^24 lies in [-2^24, -1],
-- whose integers float32 holds exactly (and -2^24 + v is 0xFF000000 + v as an int32).
--
-- Used by main.lua (on the device, through lumus) and by spec/love_spec.lua (the float64
-- reference, through lumus.reference). Plain Lua 5.1: runs under LÖVE's LuaJIT.
local M = {}

M.WIDTH, M.HEIGHT = 128, 128
M.HIDDEN = 32
M.INPUTS = 5
M.LAYERS = 3 -- hidden layers
M.PERIOD = 8 -- seconds of one loop of the animation
M.START = 3  -- where in the loop the first frame is (seconds)

-- Park-Miller's generator: products stay below 2^46, so every Lua (doubles or
-- integers) computes the same sequence.
local function generator(seed)
  local state = seed
  return function()
    state = (state * 16807) % 2147483647
    return state / 2147483647
  end
end

-- A weight uniform in [-scale, scale) in steps of scale/128: a few significant bits,
-- exact in float32, so the device and the float64 reference use the same numbers.
local function weight(next_uniform, scale)
  return (math.floor(next_uniform() * 256) - 128) / 128 * scale
end

-- The layers: { {weight = [out][in] nested, bias = {out numbers}}, ... }.
function M.layers()
  local next_uniform = generator(20260)
  local layers = {}
  local fan_in = M.INPUTS
  for l = 1, M.LAYERS + 1 do
    local out = (l <= M.LAYERS) and M.HIDDEN or 3
    -- wide first-layer weights draw several bands across the image; the output biases
    -- lean negative, away from a washed-out white
    local scale = (l == 1) and 4 or (l <= M.LAYERS and 1 or 1.25)
    local w, b = {}, {}
    for o = 1, out do
      local row = {}
      for i = 1, fan_in do row[i] = weight(next_uniform, scale) end
      w[o] = row
      b[o] = weight(next_uniform, 0.5) - ((l > M.LAYERS) and 1 or 0)
    end
    layers[l] = { weight = w, bias = b }
    fan_in = out
  end
  return layers
end

-- The phase of the animation `seconds` after the first frame: one loop every PERIOD seconds.
function M.phase(seconds)
  return 2 * math.pi * (seconds + M.START) / M.PERIOD
end

-- The coordinates of pixel (column i, row j), 1-based: pixel centres in [-1, 1].
local function coordinate(i, size)
  return (2 * i - 1) / size - 1
end

-- The inputs as a nested table [N][5], pixels in row-major order (row j, column i), for
-- the time `phase`.
function M.inputs(phase)
  local s, c = math.sin(phase), math.cos(phase)
  local rows = {}
  for j = 1, M.HEIGHT do
    local y = coordinate(j, M.HEIGHT)
    for i = 1, M.WIDTH do
      local x = coordinate(i, M.WIDTH)
      rows[#rows + 1] = { x, y, math.sqrt(x * x + y * y), s, c }
    end
  end
  return rows
end

-- The layers as lumus tensors, and the place values of the packing.
function M.device_layers(lumus)
  local out = {}
  for l, layer in ipairs(M.layers()) do
    out[l] = { weight = lumus.tensor(layer.weight), bias = lumus.tensor(layer.bias) }
  end
  out.place = lumus.tensor({ 1, 256, 65536 })
  return out
end

-- The device model on the inputs `x` [N, 5] with `params` from M.device_layers: the
-- packed int32 pixels [N]. Only records ops (no host reads), so lumus.capture takes it.
function M.forward(lumus, params, x)
  local h = x
  for l = 1, M.LAYERS do
    h = lumus.tanh(lumus.linear(h, params[l].weight, params[l].bias))
  end
  local colour = lumus.sigmoid(lumus.linear(h, params[M.LAYERS + 1].weight, params[M.LAYERS + 1].bias))
  -- floor(255 c + 1/2): c + 1/2 > 0, so truncation toward zero is the floor
  local level = (colour * 255 + 0.5):to("int32"):to("float32")
  local packed = lumus.sum(level * params.place, { dim = 2 }) - 16777216
  return packed:to("int32")
end

-- The float64 reference through lumus.reference: the 8-bit levels as one flat list
-- {r1, g1, b1, r2, ...} in the pixels' order, quantized as on the device.
function M.reference(ref, phase)
  local h = M.inputs(phase)
  local layers = M.layers()
  for l = 1, M.LAYERS do
    h = ref.tanh(ref.linear(h, layers[l].weight, layers[l].bias))
  end
  local colour = ref.sigmoid(ref.linear(h, layers[M.LAYERS + 1].weight, layers[M.LAYERS + 1].bias))
  local levels = {}
  for p = 1, #colour do
    for c = 1, 3 do levels[#levels + 1] = math.floor(255 * colour[p][c] + 0.5) end
  end
  return levels
end

return M
