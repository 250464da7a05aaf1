-- float16 and bfloat16 log (shaders/elementwise.comp's log_narrow: log1p's series near 1,
-- the device's log2 elsewhere), exhaustively: for every one of the 65536 bit patterns of
-- each format, the result within one ulp of its format (one subnormal spacing below the
-- normal range) of the float64 reference rounded to that format; NaN, -inf, +inf and
-- negative inputs as float32's log.
local lumus = require("lumus")
local compat = require "lumus.compat"
local ref = require("lumus.reference")

local abs, inf = math.abs, math.huge

local FORMATS = {
  float16 = { round = ref.round_float16, frac = 10, emin = -14 },
  bfloat16 = { round = ref.round_bfloat16, frac = 7, emin = -126 },
}

-- The e with 2^e <= a < 2^(e+1) (5.1's math.log has no base argument).
local function floor_log2(a)
  local e = math.floor(math.log(a) / math.log(2))
  while 2.0 ^ e > a do e = e - 1 end
  while 2.0 ^ (e + 1) <= a do e = e + 1 end
  return e
end

local function spacing(w, fmt)
  local e = w == 0 and fmt.emin or math.max(floor_log2(abs(w)), fmt.emin)
  return 2.0 ^ (e - fmt.frac)
end

describe("16-bit log", function()
  for dtype, fmt in pairs(FORMATS) do
    it(dtype .. ": every input's log within one " .. dtype .. " ulp of the reference", function()
      local parts = {}
      for b = 0, 65535 do parts[#parts + 1] = compat.pack_bytes("u16", { b }) end
      local x = lumus.from_bytes(table.concat(parts), { 65536 }, { dtype = dtype })
      local xv = x:to_table()
      local got = lumus.log(x):to_table()
      local bad, first = 0, nil
      for i = 1, #xv do
        local v, g = xv[i], got[i]
        local ok
        if v ~= v or v < 0 then ok = g ~= g
        elseif v == 0 then ok = g == -inf
        elseif v == inf then ok = g == inf
        else
          local w = fmt.round(math.log(v))
          ok = g == g and abs(g) ~= inf and abs(g - w) <= spacing(w, fmt)
        end
        if not ok then
          bad = bad + 1
          first = first or ("x = %.9g: log %.9g"):format(v, g)
        end
      end
      assert.are.equal(0, bad, dtype .. " log: " .. tostring(first))
    end)
  end
end)
