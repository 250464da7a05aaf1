-- float16 and bfloat16 reductions over the last dimension read 8 elements per load when
-- the row length is a multiple of 8 (4 when a multiple of 4, else 1): every width must
-- give the reference's results. Sums: float32 accumulation rounded once to the dtype
-- (bound: one rounding of |want| + 8 * 2^-24 * sum|x| + 1e-6); max/min/arg*: exact.
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local NAN, INF = 0 / 0, math.huge
local ROUNDING = { float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }




local function check_all(x, xt, what)
  local dt = x:dtype()
  for _, name in ipairs { "sum", "mean" } do
    local want = ref[name](xt, { dim = 2 })
    local n = #xt[1]
    local bound = {}
    for i, w in ipairs(want) do
      local mag = 0
      for _, v in ipairs(xt[i]) do if math.abs(v) < INF then mag = mag + math.abs(v) end end
      if name == "mean" then mag = mag / n end
      bound[i] = ROUNDING[dt] * math.abs(w) + 8 * 2 ^ -24 * mag + 1e-6
    end
    checks.close(lumus[name](x, { dim = 2 }):to("float32"), want, { abs = bound, what = name .. " " .. what })
  end
  for _, name in ipairs { "max", "min" } do
    local v, i = lumus[name](x, { dim = 2 })
    local wv, wi = ref[name](xt, { dim = 2 })
    checks.same_values(checks.flat(v:to("float32")), wv, name .. " " .. what)
    assert.are.same(wi, checks.flat(i), name .. " indices " .. what)
  end
  for _, name in ipairs { "argmax", "argmin" } do
    assert.are.same(ref[name](xt, { dim = 2 }), checks.flat(lumus[name](x, { dim = 2 })), name .. " " .. what)
  end
end

describe("float16 and bfloat16 reductions over rows of every load width", function()
  it("match the reference on random rows, ties and special values", function()
    if not lumus.device().narrow_storage then pending("the device lacks 16-bit storage") return end
    local g = ref.rng(2401)
    for _, dt in ipairs { "float16", "bfloat16" } do
      for _, d in ipairs { 8, 16, 4096, 4104, 4100, 4099, 24 } do
        local rows = {}
        for k = 1, 6 do
          rows[k] = {}
          for i = 1, d do
            rows[k][i] = k % 2 == 0 and math.floor(g.uniform() * 6) - 3 or (g.uniform() - 0.5) * 100
          end
        end
        rows[1][d] = 1000                              -- the max in the last load
        rows[2][math.max(1, d - 5)] = NAN              -- a NaN late in the row
        rows[3][2] = INF; rows[3][d] = -INF
        rows[4][1] = 2 ^ -20; rows[4][2] = -2 ^ -20    -- subnormal in float16
        rows[5][math.floor(d / 2)] = -INF
        local x = lumus.tensor(rows, { dtype = dt })
        local xt = x:to("float32"):to_table()
        local what_d = ("%s d %d"):format(dt, d)
        check_all(x, xt, ("%s d %d"):format(dt, d))
        if d % 4 == 0 then
          -- over dim 1: d columns of 6 rows, 4 adjacent columns per load
          for _, name in ipairs { "max", "min" } do
            local v, i = lumus[name](x, { dim = 1 })
            local wv, wi = ref[name](xt, { dim = 1 })
            checks.same_values(checks.flat(v:to("float32")), wv, name .. " columns " .. what_d)
            assert.are.same(wi, checks.flat(i), name .. " column indices " .. what_d)
          end
          checks.close(lumus.sum(x, { dim = 1 }):to("float32"), ref.sum(xt, { dim = 1 }),
            { rel = ROUNDING[dt], abs = 1e-3, what = "sum columns " .. what_d })
        end
        x:free()
      end
      -- over everything: argmax/argmin of a flattened row
      local flat = {}
      for i = 1, 8192 do flat[i] = (i % 97) - 40 end
      flat[5000] = 500
      local x = lumus.tensor(flat, { dtype = dt })
      assert.are.same({ 5000 }, checks.flat(lumus.argmax(x)))
      assert.are.same({ 97 }, checks.flat(lumus.argmin(x)))   -- the first -40
    end
  end)
end)
