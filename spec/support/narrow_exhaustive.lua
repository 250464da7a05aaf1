-- Exhaustive checks of 16-bit unary results: every one of the 65536 bit patterns of
-- float16 or bfloat16 through an op, each result within one ulp of its format (one
-- subnormal spacing below the normal range) of the float64 reference rounded to that
-- format, or the infinity it rounds to; where the input is special (NaN, infinities, the
-- ends of the domain, zeros) the exact float32 result, the sign of zero included. Used by
-- spec/elementwise_narrow_more_spec.lua on lavapipe and bench/device_checks.lua on a GPU
-- (loaded with dofile from the repository root).
local lumus = require("lumus")
local compat = require("lumus.compat")
local ref = require("lumus.reference")

local M = {}
local abs, inf, nan = math.abs, math.huge, 0 / 0

local FORMATS = {
  float16 = { round = ref.round_float16, frac = 10, emin = -14, max = 65504 },
  bfloat16 = { round = ref.round_bfloat16, frac = 7, emin = -126, max = 3.3895313892515355e38 },
}

-- The e with 2^e <= a < 2^(e+1) (5.1's math.log has no base argument).
local function floor_log2(a)
  local e = math.floor(math.log(a) / math.log(2))
  while 2.0 ^ e > a do e = e - 1 end
  while 2.0 ^ (e + 1) <= a do e = e + 1 end
  return e
end

-- The spacing of a format's values at w (fmt: frac fraction bits, emin the least normal
-- exponent; the subnormal spacing below it).
function M.spacing(w, fmt)
  local e = w == 0 and fmt.emin or math.max(floor_log2(abs(w)), fmt.emin)
  return 2.0 ^ (e - fmt.frac)
end
local spacing = M.spacing

local function nonfinite(v) return v ~= v or abs(v) == inf end

-- Each op: its float64 reference and its exact result where the input is special (nil
-- elsewhere).
M.OPS = {
  sin = { math.sin, function(v) if nonfinite(v) then return nan elseif v == 0 then return v end end },
  cos = { math.cos, function(v) if nonfinite(v) then return nan end end },
  tan = { math.tan, function(v) if nonfinite(v) then return nan elseif v == 0 then return v end end },
  expm1 = { ref.expm1, function(v)
    if v ~= v then return nan elseif v == inf then return inf elseif v == -inf then return -1 elseif v == 0 then return v end
  end },
  log1p = { ref.log1p, function(v)
    if v ~= v or v < -1 then return nan elseif v == -1 then return -inf elseif v == inf then return inf
    elseif v == 0 then return v end
  end },
  atan = { math.atan, function(v) if v ~= v then return nan elseif v == 0 then return v end end },
  asin = { math.asin, function(v) if v ~= v or abs(v) > 1 then return nan elseif v == 0 then return v end end },
  acos = { math.acos, function(v) if v ~= v or abs(v) > 1 then return nan end end },
  -- gelu, erf form: -inf gives NaN (-inf * 0) as the float32 kernel and PyTorch
  gelu = { function(v) return 0.5 * v * ref.erfc(-v / math.sqrt(2)) end, function(v)
    if v ~= v or v == -inf then return nan elseif v == inf then return inf elseif v == 0 then return v end
  end },
  log = { math.log, function(v)
    if v ~= v or v < 0 then return nan elseif v == 0 then return -inf elseif v == inf then return inf end
  end },
}

-- Whether g (a result in the format) is within one ulp of the exact value r. Past the
-- largest finite value inf is the rounded result, and the largest finite one is one ulp off.
local function close(g, r, fmt)
  local w = fmt.round(r)
  if abs(w) == inf then return g == w or (abs(g) == fmt.max and g * r > 0) end
  return g == g and abs(g) ~= inf and abs(g - w) <= spacing(w, fmt)
end

-- Whether g is exactly e: NaN for NaN, and zeros with their sign.
local function same(g, e)
  if e ~= e then return g ~= g end
  return g == e and (e ~= 0 or 1 / g == 1 / e)
end

-- A [65536] tensor of dtype holding every bit pattern in order.
function M.every_pattern(dtype)
  local parts = {}
  for b = 0, 65535 do parts[#parts + 1] = compat.pack_bytes("u16", { b }) end
  return lumus.from_bytes(table.concat(parts), { 65536 }, { dtype = dtype })
end

local TINY = 2.0 ^ -126   -- the least normal float32

-- Whether g is op's result for v: exact for a special v, else within one ulp.
local function result_ok(op, fmt, v, g)
  local e = M.OPS[op][2](v)
  if e ~= nil then return same(g, e) end
  return close(g, M.OPS[op][1](v), fmt)
end

-- How many results of op (got, a list) for the inputs xs (a list) of dtype fail the
-- check, and a description of the first. With `flushes` (a device that flushes float32
-- subnormals, as docs/semantics.md allows) a bfloat16 subnormal input may also give the
-- result for a zero of its sign, and a subnormal result may be 0.
function M.count_bad(op, dtype, xs, got, flushes)
  local fmt = FORMATS[dtype]
  local f, special = M.OPS[op][1], M.OPS[op][2]
  local bad, first = 0, nil
  for i = 1, #xs do
    local v, g = xs[i], got[i]
    local e = special(v)
    local ok = result_ok(op, fmt, v, g)
    if not ok and flushes and v ~= 0 and abs(v) < TINY then ok = result_ok(op, fmt, v > 0 and 0.0 or -0.0, g) end
    if not ok and flushes and g == 0 and abs(f(v)) < TINY then ok = true end   -- a subnormal result flushed
    if not ok then
      bad = bad + 1
      first = first or ("x = %.9g: %s %.9g, reference %.9g"):format(v, op, g, e or f(v))
    end
  end
  return bad, first
end

return M
