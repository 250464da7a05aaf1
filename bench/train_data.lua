-- bench/train_data.lua: the initial weights and data of the training parity benchmark
-- (bench/train_mlp.lua, bench/torch_train_mlp.py), made the same way on both sides.
--
--   lua5.4 bench/train_data.lua --tokens 8192 --out FILE   writes them (float32 LE, in
--                                                         the order of M.LAYOUT)
--   local data = require("train_data").make(tokens)       {name = float32 bytes}
--
-- Pure Lua, no lumus: the PyTorch side runs this script to get the file. Each array is
-- a counter-based SplitMix64 stream: value i (0-based) of stream s is
--   z = (s * 2^40 + i + 1) * 0x9E3779B97F4A7C15 (mod 2^64), then SplitMix64's mix,
--   u = (z >> 11) * 2^-53, v = float32((2u - 1) * bound)
-- The pre-norm MLP block: LayerNorm(768) (weight ones, bias zeros), Linear 768 -> 3072,
-- tanh GELU, Linear 3072 -> 768, residual; x and target [tokens, 768].
local M = {}

M.D, M.HIDDEN = 768, 3072

-- name, stream, element count (per tokens for x and target), bound
function M.layout(tokens)
  local D, H = M.D, M.HIDDEN
  return {
    { "fc1.weight", 1, H * D, 1 / math.sqrt(D) },
    { "fc1.bias", 2, H, 1 / math.sqrt(D) },
    { "fc2.weight", 3, D * H, 1 / math.sqrt(H) },
    { "fc2.bias", 4, D, 1 / math.sqrt(H) },
    { "x", 5, tokens * D, math.sqrt(3) },        -- unit variance
    { "target", 6, tokens * D, 1 },
  }
end

local K1, K2, K3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
local CHUNK = 1024
local FMT = "<" .. ("f"):rep(CHUNK)

-- float32 bytes of stream s, n values in (-bound, bound).
function M.stream(s, n, bound)
  local parts, buf = {}, {}
  local base = s << 40
  for c = 0, n - 1, CHUNK do
    local m = math.min(CHUNK, n - c)
    for j = 1, m do
      local z = (base + c + j) * K1
      z = (z ~ (z >> 30)) * K2
      z = (z ~ (z >> 27)) * K3
      z = z ~ (z >> 31)
      buf[j] = ((z >> 11) * 0x1p-53 * 2 - 1) * bound
    end
    parts[#parts + 1] = string.pack(m == CHUNK and FMT or "<" .. ("f"):rep(m), table.unpack(buf, 1, m))
  end
  return table.concat(parts)
end

function M.make(tokens)
  local out = {}
  for _, a in ipairs(M.layout(tokens)) do out[a[1]] = M.stream(a[2], a[3], a[4]) end
  return out
end

-- The block with its initial weights, and x and target, as lumus tensors (lumus is
-- passed in: this file itself stays free of it for the PyTorch side).
function M.block(lumus, tokens)
  local D, H, nn = M.D, M.HIDDEN, lumus.nn
  local data = M.make(tokens)
  local block = nn.Residual(nn.Sequential(nn.LayerNorm(D), nn.Linear(D, H), nn.GELU({ approximate = "tanh" }), nn.Linear(H, D)))
  block:load_state_dict({
    ["block.1.weight"] = lumus.ones({ D }), ["block.1.bias"] = lumus.zeros({ D }),
    ["block.2.weight"] = lumus.from_bytes(data["fc1.weight"], { H, D }), ["block.2.bias"] = lumus.from_bytes(data["fc1.bias"], { H }),
    ["block.4.weight"] = lumus.from_bytes(data["fc2.weight"], { D, H }), ["block.4.bias"] = lumus.from_bytes(data["fc2.bias"], { D }),
  })
  return block, lumus.from_bytes(data.x, { tokens, D }), lumus.from_bytes(data.target, { tokens, D })
end

if arg and arg[0] and arg[0]:match("train_data%.lua$") then
  local tokens, path = 8192, nil
  local i = 1
  while i <= #arg do
    if arg[i] == "--tokens" then tokens = math.tointeger(tonumber(arg[i + 1]))
    elseif arg[i] == "--out" then path = arg[i + 1]
    else io.stderr:write("usage: lua5.4 bench/train_data.lua [--tokens N] --out FILE\n"); os.exit(2) end
    i = i + 2
  end
  if not path or not tokens then io.stderr:write("usage: lua5.4 bench/train_data.lua [--tokens N] --out FILE\n"); os.exit(2) end
  local f = assert(io.open(path, "wb"))
  for _, a in ipairs(M.layout(tokens)) do f:write(M.stream(a[2], a[3], a[4])) end
  f:close()
end

return M
