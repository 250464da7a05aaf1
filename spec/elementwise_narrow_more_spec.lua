-- float16 and bfloat16 log, sin, cos, tan, expm1, log1p, atan, asin, acos and gelu
-- (shaders/elementwise.comp's log_narrow, sincos_narrow, expm1_narrow, log1p_narrow and
-- gelu_erf_narrow;
-- the inverse functions' float32 paths rounded once) over every input of each
-- format, as spec/support/narrow_exhaustive.lua checks them: within one ulp of the
-- float64 reference rounded to the format, special inputs exact. bfloat16 values past
-- 65536 take sin's float32 path, which the same check covers. So does a transposed view
-- (the strided form of the kernel), whose results are the contiguous ones bit for bit
-- where both take one path (all but bfloat16's sin, cos and tan).
local lumus = require("lumus")
local exhaustive = dofile("spec/support/narrow_exhaustive.lua")

local NAMES = { "log", "sin", "cos", "tan", "expm1", "log1p", "atan", "asin", "acos", "gelu" }

describe("16-bit log, sin, cos, tan, expm1, log1p, atan, asin, acos and gelu", function()
  for _, dtype in ipairs { "float16", "bfloat16" } do
    local x, xv
    local function inputs()
      if not x then x = exhaustive.every_pattern(dtype); xv = x:to_table() end
      return x, xv
    end

    for _, name in ipairs(NAMES) do
      it(dtype .. ": every input's " .. name .. " within one " .. dtype .. " ulp of the reference", function()
        local t, tv = inputs()
        local bad, first = exhaustive.count_bad(name, dtype, tv, lumus[name](t):to_table())
        assert.are.equal(0, bad, dtype .. " " .. name .. ": " .. tostring(first))
      end)
    end

    it(dtype .. ": through a transposed view (the strided form) too", function()
      local view = inputs():view({ 256, 256 }):transpose(1, 2)
      assert.is_false(view:is_contiguous())
      local vv = view:contiguous():view({ 65536 }):to_table()
      for _, name in ipairs(NAMES) do
        local strided = lumus[name](view)
        local bad, first = exhaustive.count_bad(name, dtype, vv, strided:view({ 65536 }):to_table())
        assert.are.equal(0, bad, dtype .. " " .. name .. " of a view: " .. tostring(first))
        -- A bfloat16 vector holding an element past 65536 takes sin's float32 path as a
        -- whole, so there only the bound holds.
        if dtype == "float16" or not (name == "sin" or name == "cos" or name == "tan") then
          assert.is_true(strided:to_bytes() == lumus[name](view:contiguous()):to_bytes(), name .. " differs through the view")
        end
      end
    end)
  end
end)
