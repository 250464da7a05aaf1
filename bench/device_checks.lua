-- Checks for a real GPU that the lavapipe specs cannot make (no busted needed there):
-- memory reserved by one small tensor and the device's memory budget; the NaN, infinity
-- and overflow semantics of docs/semantics.md on this driver (subnormal flushing and
-- fast math differ between drivers). Prints one line per check and "N passed, N failed".
--   lua5.4 bench/device_checks.lua
local lumus = require "lumus"

local passed, failed = 0, 0
local function check(ok, what)
  if ok then passed = passed + 1 else failed = failed + 1 end
  print(("%s  %s"):format(ok and "ok  " or "FAIL", what))
end
local function isnan(v) return v ~= v end
-- The spacing of float32 values at v (subnormal spacing below 2^-126).
local function ulp(v)
  local a = math.abs(v)
  if a < 2 ^ -126 then return 2 ^ -149 end
  local _, e = math.frexp(a)
  return 2.0 ^ (e - 24)
end
local inf = math.huge

print(("device: %s (%s)"):format(lumus.device().name, lumus.device().kind))

-- Memory: one 16-byte tensor.
local t = lumus.zeros({ 4 })
lumus.synchronize()
local m = lumus.memory()
print(("one 16-byte tensor: reserved %d bytes, budget %d bytes, blocks %d"):format(m.reserved, m.budget or -1, m.blocks))
check(m.reserved <= 4 * 2 ^ 20, "reserved <= 4 MiB after one small tensor")
check((m.budget or 0) > 0, "the device reports a memory budget (VK_EXT_memory_budget)")
t:free()
local before = lumus.memory().reserved
local big = lumus.zeros({ 64 * 2 ^ 20 })   -- 256 MiB
lumus.synchronize()
big:free()
lumus.synchronize()
local given = lumus.empty_cache()
print(("256 MiB tensor freed: empty_cache gave back %d bytes; reserved %d (was %d before it)"):format(given, lumus.memory().reserved, before))
check(lumus.memory().reserved <= before, "empty_cache returns the big block")

-- sum / mean with infinities and overflow.
local function row_sum(vals) return lumus.sum(lumus.tensor({ vals })):to_table()[1] end
for _, n in ipairs { 3, 8, 37, 4099 } do
  local v = {}
  for i = 1, n do v[i] = 1 end
  v[n] = inf
  check(row_sum(v) == inf, ("sum of a row of %d with +inf is +inf"):format(n))
  v[1] = -inf
  check(isnan(row_sum(v)), ("sum of a row of %d with +inf and -inf is NaN"):format(n))
  for i = 1, n do v[i] = 3e38 end
  check(row_sum(v) == inf, ("sum of %d values of 3e38 overflows to +inf"):format(n))
end

-- softmax keeps NaN.
for _, n in ipairs { 3, 4, 8, 37, 1024 } do
  local v = {}
  for i = 1, n do v[i] = i % 7 end
  v[2] = 0 / 0
  local r = lumus.softmax(lumus.tensor({ v })):to_table()[1]
  local all = true
  for i = 1, n do all = all and isnan(r[i]) end
  check(all, ("softmax of a row of %d with a NaN is all NaN"):format(n))
end

-- The tile forms over short rows (runs of whole rows staged in shared memory), forced
-- for every row length that fits: softmax, log_softmax, sum, max and argmax against
-- float64 sums in Lua, with a NaN row, a +inf row, an all -inf row and a row with some
-- -inf; float32, and float16 / bfloat16 from their rounded inputs (softmax relative
-- error 1e-5 + one output rounding; sum 1e-6 of the sum of |x| + one rounding; max and
-- argmax exact).
do
  local eps = { float32 = 0, float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }
  for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
    for _, d in ipairs { 1, 2, 3, 7, 13, 32, 61, 130, 500 } do
      local rows = math.max(7, 40000 // d)
      local xt = {}
      for r = 1, rows do
        local row = {}
        for k = 1, d do row[k] = math.sin(r * 1.37 + k * 0.71) * 6 end
        xt[r] = row
      end
      xt[1][d] = 0 / 0
      xt[2][1] = inf
      for k = 1, d do xt[3][k] = -inf end
      for k = 1, d, 2 do xt[4][k] = -inf end
      local x = lumus.tensor(xt, { dtype = dtype })
      xt = x:float():to_table()   -- the rounded inputs
      lumus.tune.softmax_cols({ short_rows = "tile" })
      lumus.tune.reduce({ rows = "tile" })
      local sm, lsm = lumus.softmax(x):float():to_table(), lumus.log_softmax(x):float():to_table()
      local sum = lumus.sum(x, { dim = 2 }):float():to_table()
      local mx, mi = lumus.max(x, { dim = 2 })
      mx, mi = mx:float():to_table(), mi:to_table()
      local am = lumus.argmax(x, { dim = 2 }):to_table()
      lumus.tune.softmax_cols({ short_rows = "auto" })
      lumus.tune.reduce({})
      local bad = {}
      for r = 1, rows do
        local row = xt[r]
        local m, nan, mpos = -inf, nil, 1
        local s, mag = 0, 0
        for k = 1, d do
          local v = row[k]
          if isnan(v) then nan = nan or k elseif v > m then m, mpos = v, k end
          s = s + v
          mag = mag + math.abs(v)
        end
        local want_pos = nan or mpos
        local want_max = nan and 0 / 0 or m
        if not (mi[r] == want_pos and am[r] == want_pos and (mx[r] == want_max or (isnan(mx[r]) and isnan(want_max)))) then
          bad[#bad + 1] = ("max/argmax row %d"):format(r)
        end
        if not ((isnan(s) and isnan(sum[r])) or s == sum[r] or math.abs(sum[r] - s) <= 1e-6 * mag + eps[dtype] * math.abs(s)) then
          bad[#bad + 1] = ("sum row %d: %.9g, want %.9g"):format(r, sum[r], s)
        end
        local all_nan = nan or m == inf or m == -inf
        local e = 0
        if not all_nan then for k = 1, d do e = e + math.exp(row[k] - m) end end
        for k = 1, d do
          local want = all_nan and 0 / 0 or math.exp(row[k] - m) / e
          local lwant = all_nan and 0 / 0 or (row[k] - m) - math.log(e)
          local got, lgot = sm[r][k], lsm[r][k]
          local ok = (isnan(want) and isnan(got)) or math.abs(got - want) <= (1e-5 + eps[dtype]) * math.abs(want) + 1e-7
          local lok = (isnan(lwant) and isnan(lgot)) or lgot == lwant or
                      math.abs(lgot - lwant) <= (2e-6 + eps[dtype]) * math.max(1, math.abs(lwant))
          if not (ok and lok) then bad[#bad + 1] = ("softmax row %d col %d: %.9g / %.9g, want %.9g / %.9g"):format(r, k, got, lgot, want, lwant) end
          if #bad > 3 then break end
        end
        if #bad > 3 then break end
      end
      check(#bad == 0, ("tile forms, %s %dx%d: softmax, log_softmax, sum, max, argmax%s"):format(dtype, rows, d,
        #bad > 0 and (": " .. table.concat(bad, "; ")) or ""))
      x:free()
    end
  end
end

-- max, min, argmax and argmin over rows as the device plans them and with masked 16-byte
-- units forced (the plan takes them only for x of 32 MiB or more), exact: each
-- row's peak (500) and valley (-500) at a position that moves from row to row, the rows between them walls of
-- +1000 or -1000 whose elements share units with the rows' ends; a NaN row (the first NaN
-- wins both), an all -inf row and an all +inf row (index 1). Rows of 131, 907 and 2973
-- and three odd lengths drawn log-uniformly from 29..60000 (seed 2607). sum and mean over the
-- same rows (masked units as sums plan them: rows of 512+ elements, or x of 10 MiB+)
-- within 1e-6 of the sum of |x| plus one rounding of a 16-bit result; float16 sums past
-- its largest finite value are infinities, and NaN and infinite rows stay so.
do
  local half_eps = { float32 = 0, float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }
  local lengths = { 131, 907, 2973 }
  math.randomseed(2607)
  for _ = 1, 3 do
    local d = math.max(29, math.floor(math.exp(math.random() * math.log(60000))))
    lengths[#lengths + 1] = d % 2 == 0 and d + 1 or d
  end
  for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
    for _, d in ipairs(lengths) do
      local xt = {}
      for r = 1, math.max(9, math.min(300, 900000 // d)) do
        local row = {}
        if r % 2 == 0 then
          for k = 1, d do row[k] = r % 4 == 0 and 1000 or -1000 end
        else
          for k = 1, d do row[k] = math.floor(math.sin(r * 1.37 + k * 0.71) * 6) end
          row[(r * 37) % d + 1] = 500
          local v = (r * 53) % d + 1
          if row[v] ~= 500 then row[v] = -500 end
        end
        xt[r] = row
      end
      xt[5][d - 1] = 0 / 0; xt[5][2] = 0 / 0
      for k = 1, d do xt[7][k] = -inf; xt[9][k] = inf end
      local x = lumus.tensor(xt, { dtype = dtype })
      xt = x:float():to_table()
      for _, masked in ipairs { "auto", true } do
        lumus.tune.reduce(masked == "auto" and {} or { masked = masked })
        local bad = {}
        for _, name in ipairs { "max", "min" } do
          local vals, idx = lumus[name](x, { dim = 2 })
          vals, idx = vals:float():to_table(), idx:to_table()
          local arg = lumus["arg" .. name](x, { dim = 2 }):to_table()
          for r = 1, #xt do
            local row, bi = xt[r], 1
            for k = 2, d do
              local v, b = row[k], row[bi]
              if not isnan(b) and (isnan(v) or (name == "max" and v > b) or (name == "min" and v < b)) then bi = k end
            end
            local want = row[bi]
            if not (idx[r] == bi and arg[r] == bi and (vals[r] == want or (isnan(want) and isnan(vals[r])))) then
              bad[#bad + 1] = ("%s row %d: %.9g at %d (arg %d), want %.9g at %d"):format(name, r, vals[r], idx[r], arg[r], want, bi)
            end
            if #bad > 3 then break end
          end
        end
        check(#bad == 0, ("max/min/argmax/argmin, masked %s, %s %dx%d%s"):format(
          tostring(lumus.tune.reduce().masked), dtype, #xt, d, #bad > 0 and (": " .. table.concat(bad, "; ")) or ""))
        bad = {}
        local sums, means = lumus.sum(x, { dim = 2 }):float():to_table(), lumus.mean(x, { dim = 2 }):float():to_table()
        for r = 1, #xt do
          local s, abs = 0, 0
          for k = 1, d do s = s + xt[r][k]; abs = abs + math.abs(xt[r][k]) end
          for _, c in ipairs { { "sum", sums[r], s }, { "mean", means[r], s / d } } do
            local what, got, want = c[1], c[2], c[3]
            local ok
            if isnan(want) then ok = isnan(got)
            elseif math.abs(want) == inf then ok = got == want
            elseif dtype == "float16" and math.abs(want) >= 65520 then ok = got == (want > 0 and inf or -inf)
            elseif dtype == "float16" and math.abs(want) > 65504 then ok = math.abs(got) >= 65504
            else ok = math.abs(got - want) <= (1e-6 * abs + half_eps[dtype] * math.abs(s)) / (what == "mean" and d or 1) end
            if not ok then bad[#bad + 1] = ("%s row %d: %.9g, want %.9g"):format(what, r, got, want) end
          end
          if #bad > 3 then break end
        end
        check(#bad == 0, ("sum/mean, masked %s, %s %dx%d%s"):format(
          tostring(lumus.tune.reduce().masked), dtype, #xt, d, #bad > 0 and (": " .. table.concat(bad, "; ")) or ""))
      end
      lumus.tune.reduce({})
      x:free()
    end
  end
end

-- Reductions split over few long rows (and columns) finish in one dispatch, the last
-- workgroup of each column group reducing the chunks' states (tune.reduce{two_dispatches =
-- false}, the default): max/min/argmax/argmin equal the two-dispatch form exactly, sum
-- and mean within 1e-6 of the sum of |x| (mean: over the count), var within 1e-6
-- relative (their states meet in another fixed tree), plus one rounding of a 16-bit
-- result; NaN and infinities alike; each result the same bits in 5 calls in a row, as the counter words
-- must return to 0 and no workgroup may read a state another has not yet made visible.
do
  lumus.manual_seed(2468)
  for _, case in ipairs { { { 3, 1000003 }, 2 }, { { 17, 785591 }, 2 }, { { 2, 1048576 }, 2 }, { { 64, 65537 }, 2 },
                          { { 200003, 5 }, 1 }, { { 100000, 64 }, 1 } } do
    local shape, dim = case[1], case[2]
    local n = shape[1] * shape[2]
    local base = lumus.randn(shape)
    local flat = base:view({ n })
    for at, v in pairs { [7] = 0 / 0, [n - 3] = math.huge, [n // 2] = -math.huge } do flat:narrow(1, at, 1):fill(v) end
    for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
      local x = base:to(dtype)
      local bad = {}
      for _, name in ipairs { "sum", "mean", "var", "max", "min", "argmax", "argmin" } do
        local function run()
          local a, b = lumus[name](x, { dim = dim })
          return a, (a:to_bytes() .. (b and b:to_bytes() or ""))
        end
        lumus.tune.reduce({ two_dispatches = true })
        local two, two_bytes = run()
        lumus.tune.reduce({})
        local one, one_bytes = run()
        if name == "max" or name == "min" or name == "argmax" or name == "argmin" then
          if one_bytes ~= two_bytes then bad[#bad + 1] = name .. " differs from two dispatches" end
        else
          local ta, tb = one:to("float32"):to_table(), two:to("float32"):to_table()
          -- sums are bounded by the magnitudes summed (cancellation leaves a small result)
          local mags = name ~= "var" and lumus[name](lumus.abs(x:to("float32")), { dim = dim }):to_table() or tb
          for i = 1, #tb do
            local p, q = ta[i], tb[i]
            local bound = 1e-6 * math.abs(mags[i]) + (dtype == "float32" and 0 or 2 ^ -8 * math.abs(q))
            if not ((isnan(p) and isnan(q)) or p == q or math.abs(p - q) <= bound) then
              bad[#bad + 1] = ("%s [%d] %.9g against %.9g"):format(name, i, p, q)
              break
            end
          end
        end
        for call = 2, 5 do
          if select(2, run()) ~= one_bytes then bad[#bad + 1] = ("%s call %d differs"):format(name, call); break end
        end
      end
      check(#bad == 0, ("split reductions in one dispatch, %s %s dim %d%s"):format(dtype, table.concat(shape, "x"), dim,
        #bad > 0 and (": " .. table.concat(bad, "; ")) or ""))
      if x ~= base then x:free() end
    end
    base:free()
  end
end

-- layer_norm_forward over rows that the one-pass split would cut into many parts (the
-- automatic plan takes the two-stage split there): the same results as the forced
-- one-pass split, within float32's rounding (float16: y within 0.02, a few of its roundings
-- at |y| of 4-8).
do
  for _, dt in ipairs { "float32", "float16" } do
    local s = { 140, 524291 }
    local x = (lumus.randn(s) * 3 + 100):to(dt)
    local w, b = lumus.randn({ s[2] }):to(dt), lumus.randn({ s[2] }):to(dt)
    local p = lumus.tune.layer_norm(s[2], nil, s[1], dt)
    local y1, m1, r1 = lumus.layer_norm_forward(x, w, b)
    lumus.tune.layer_norm(1, { form = "split" })
    local q = lumus.tune.layer_norm(s[2], nil, s[1], dt)
    local y2, m2, r2 = lumus.layer_norm_forward(x, w, b)
    lumus.tune.layer_norm(1, {})
    local dy = lumus.max(lumus.abs(y1:float() - y2:float())):to_table()[1]
    local dm = lumus.max(lumus.abs(m1 - m2)):to_table()[1]
    local dr = lumus.max(lumus.abs(r1 - r2) / r2):to_table()[1]
    check(dy <= (dt == "float32" and 2e-5 or 0.02) and dm <= 1e-4 and dr <= 1e-5,
      ("layer_norm %s 140x524291: %s/p%s against %s/p%s: max |dy| %.3g, |dmean| %.3g, rel invstd %.3g"):format(
        dt, p.variant, tostring(p.parts), q.variant, tostring(q.parts), dy, dm, dr))
    for _, t in ipairs { x, w, b, y1, y2, m1, m2, r1, r2 } do t:free() end
  end
end

-- layer_norm_backward over long rows and rows of D % 4 != 0 as the device plans them (the
-- split form: a row's slices in several resident workgroups exchanging their sums through
-- tagged 64-bit words; the quad form: four rows as one row of aligned vec4s) against the
-- two-pass columns form: dx within 2e-5 of max(1, |dx|), dweight and dbias within 1e-5 of
-- the column's sum of |dy * xhat| (|dy|) plus 1e-6 (float32 sums in two orders); each
-- result the same bits in 3 calls in a row; odd D, few rows (many small parts) and row
-- counts that leave a partial quad included.
do
  for _, s in ipairs { { 300, 65536 }, { 37, 20003 }, { 5, 200000 }, { 1, 1048573 }, { 9001, 803 }, { 5, 4095 },
                       { 1003, 1001 } } do
    local R, D = s[1], s[2]
    local x = lumus.randn(s) * 3 + 100
    local dy, w = lumus.randn(s), lumus.randn({ D })
    local _, m, r = lumus.layer_norm_forward(x, w)
    local plan = lumus.tune.layer_norm_backward(D, R)
    local a = { lumus.layer_norm_backward(dy, x, m, r, w) }
    local same = true
    for _ = 1, 3 do
      local b = { lumus.layer_norm_backward(dy, x, m, r, w) }
      for i = 1, 3 do same = same and a[i]:to_bytes() == b[i]:to_bytes() end
    end
    lumus.tune.layer_norm_backward(4, nil, { form = "columns" })
    local c = { lumus.layer_norm_backward(dy, x, m, r, w) }
    lumus.tune.layer_norm_backward(4, nil, {})
    local xhat = (x - m:unsqueeze(2)) * r:unsqueeze(2)
    local bw = lumus.sum(lumus.abs(dy * xhat), { dim = 1 }) * 1e-5 + 1e-6
    local bb = lumus.sum(lumus.abs(dy), { dim = 1 }) * 1e-5 + 1e-6
    local ddx = lumus.max(lumus.abs(a[1] - c[1]) / lumus.maximum(lumus.abs(c[1]), 1)):to_table()[1]
    local rw = lumus.max(lumus.abs(a[2] - c[2]) / bw):to_table()[1]
    local rb = lumus.max(lumus.abs(a[3] - c[3]) / bb):to_table()[1]
    check(same and ddx <= 2e-5 and rw <= 1 and rb <= 1,
      ("layer_norm_backward %dx%d %s/p%s against columns: same bits %s, dx %.3g, dweight %.3g, dbias %.3g of bound"):format(
        R, D, plan.form, tostring(plan.parts), tostring(same), ddx, rw, rb))
    for _, t in ipairs { x, dy, w, m, r, xhat, bw, bb, a[1], a[2], a[3], c[1], c[2], c[3] } do t:free() end
  end
end

-- layer_norm_backward's folded reduce (teams of workgroups counting themselves in on
-- integer counters; the last of a team adds its rows, the last team writes dweight and
-- dbias) against the same plan with the reduce stage as its own dispatch: dx the same bits
-- (the fold changes only the column sums), dweight and dbias within 1e-6 of the column's
-- sum of |dy * xhat| (|dy|) plus 1e-7 (float32 sums in two orders), and the folded result
-- the same bits in 3 calls in a row (the order is the plan's, not the GPU's). Every form
-- that folds, many groups, one group and a short last team included.
do
  for _, s in ipairs { { 8192, 768 }, { 4096, 4096 }, { 2028, 1028 }, { 20000, 2047 }, { 65536, 768 }, { 301, 97 },
                       { 3, 5 }, { 9001, 803, "quad" }, { 1000, 96, "rows" }, { 777, 1000, "fused", 777 },
                       { 5000, 256, "fused", 1 } } do
    local R, D = s[1], s[2]
    local x = lumus.randn({ R, D }) * 3 + 100
    local dy, w = lumus.randn({ R, D }), lumus.randn({ D })
    local _, m, r = lumus.layer_norm_forward(x, w)
    local function run(reduce)
      local plan = lumus.tune.layer_norm_backward(D, R, { form = s[3], groups = s[4], reduce = reduce })
      return plan, { lumus.layer_norm_backward(dy, x, m, r, w) }
    end
    local plan, a = run("fold")
    local same = true
    for _ = 1, 3 do
      local b = { lumus.layer_norm_backward(dy, x, m, r, w) }
      for i = 1, 3 do same = same and a[i]:to_bytes() == b[i]:to_bytes() end
      for i = 1, 3 do b[i]:free() end
    end
    local _, c = run("dispatch")
    lumus.tune.layer_norm_backward(4, nil, {})
    local xhat = (x - m:unsqueeze(2)) * r:unsqueeze(2)
    local bw = lumus.sum(lumus.abs(dy * xhat), { dim = 1 }) * 1e-6 + 1e-7
    local bb = lumus.sum(lumus.abs(dy), { dim = 1 }) * 1e-6 + 1e-7
    local rw = lumus.max(lumus.abs(a[2] - c[2]) / bw):to_table()[1]
    local rb = lumus.max(lumus.abs(a[3] - c[3]) / bb):to_table()[1]
    local dx_same = a[1]:to_bytes() == c[1]:to_bytes()
    check(plan.reduce == "fold" and same and dx_same and rw <= 1 and rb <= 1,
      ("layer_norm_backward %dx%d %s groups %d reduce %s against a dispatch: same bits %s, dx same %s, dweight %.3g, dbias %.3g of bound"):format(
        R, D, plan.form, plan.groups, plan.reduce, tostring(same), tostring(dx_same), rw, rb))
    for _, t in ipairs { x, dy, w, m, r, xhat, bw, bb, a[1], a[2], a[3], c[1], c[2], c[3] } do t:free() end
  end
end

-- layer_norm_forward: NaN rows, infinities, huge finite rows (every D class).
for _, d in ipairs { 7, 64, 768, 4096, 65536 } do
  local function ln(fill)
    local v = {}
    for i = 1, d do v[i] = fill(i) end
    local y, mean, invstd = lumus.layer_norm_forward(lumus.tensor({ v }), nil, nil, 1e-5)
    return y:to_table()[1], mean:to_table()[1], invstd:to_table()[1]
  end
  local y, mean, invstd = ln(function(i) return i == 2 and 0 / 0 or i % 5 end)
  check(isnan(mean) and isnan(invstd) and isnan(y[1]) and isnan(y[d]), ("layer_norm D=%d: a NaN row gives NaN mean, invstd, y"):format(d))
  y, mean, invstd = ln(function(i) return i == 1 and inf or i % 5 end)
  check(mean == inf and isnan(invstd) and isnan(y[d]), ("layer_norm D=%d: a row with +inf gives mean +inf, invstd NaN, y NaN"):format(d))
  y, mean, invstd = ln(function(i) return (i % 2 == 0) and 3e38 or -3e38 end)
  local ok = math.abs(mean) < 3e38 and (d % 2 == 1 or math.abs(y[1] + 1) < 1e-3 and math.abs(y[2] - 1) < 1e-3)
  for i = 1, d do ok = ok and y[i] == y[i] and math.abs(y[i]) < inf end
  check(ok, ("layer_norm D=%d: alternating +-3e38 gives finite y (y[1] %.6g, y[2] %.6g, mean %.6g)"):format(d, y[1], y[2], mean))
  y, mean, invstd = ln(function(i) return 1e20 * ((i % 3) - 1) end)
  ok = true
  for i = 1, d do ok = ok and y[i] == y[i] and math.abs(y[i]) < 10 end
  check(ok, ("layer_norm D=%d: |x| ~ 1e20 gives finite y (y[1] %.6g)"):format(d, y[1]))
end

-- layer_norm_forward on float16/bfloat16 rows as the device plans them (masked 4-element
-- vectors for odd D, the two-stage split for few long rows): y within one unit of the
-- dtype's last place of the float64 reference on the rounded inputs; a row with +inf NaN.
do
  local ref = require "lumus.reference"
  local unit = { float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }
  for _, dtype in ipairs { "float16", "bfloat16" } do
    for _, shape in ipairs { { 3000, 5 }, { 900, 17 }, { 517, 191 }, { 64, 771 }, { 160, 4096 }, { 9, 6867 }, { 140, 40000 }, { 3, 50001 }, { 2, 131071 }, { 5, 262144 } } do
      local rows, d = shape[1], shape[2]
      local xt = {}
      for r = 1, rows do
        local row = {}
        for j = 1, d do row[j] = 3 + math.sin(r * 1.7 + j * 0.61) * (1 + j % 7) end
        xt[r] = row
      end
      xt[rows][1 + (rows * 7) % d] = inf
      local wt, bt = {}, {}
      for j = 1, d do wt[j] = 1 + 0.25 * math.cos(j); bt[j] = 0.5 * math.sin(j) end
      local x = lumus.tensor(xt):to(dtype)
      local w, b = lumus.tensor(wt):to(dtype), lumus.tensor(bt):to(dtype)
      local y = lumus.layer_norm_forward(x, w, b, 1e-5):to("float32"):to_table()
      local want = ref.layer_norm_forward(x:to("float32"):to_table(), w:to("float32"):to_table(),
        b:to("float32"):to_table(), 1e-5)
      local plan = lumus.tune.layer_norm(d, nil, rows, dtype)
      local bad
      for r = 1, rows - 1 do
        for j = 1, d do
          if not (math.abs(y[r][j] - want[r][j]) <= unit[dtype] * math.abs(want[r][j]) + 1e-5) then
            bad = bad or ("y[%d][%d] = %.8g, want %.8g"):format(r, j, y[r][j], want[r][j])
          end
        end
      end
      for j = 1, d do if not isnan(y[rows][j]) then bad = bad or ("y[%d][%d] = %.8g, want NaN"):format(rows, j, y[rows][j]) end end
      check(not bad, ("layer_norm %s %dx%d (%s%s): y within a unit of the last place%s"):format(dtype, rows, d,
        plan.variant, plan.masked and ", masked" or "", bad and ": " .. bad or ""))
    end
  end
end

-- float16 results packed by the device's conversion (lumus.tune.elementwise{hw_half=true})
-- against the shader's software rounding to nearest even: the same bits for every one of
-- the 65536 float16 inputs (NaN payloads may differ), through ops whose results tie,
-- overflow and fall into subnormals. The default is on only where this holds.
if lumus.tune.elementwise and lumus.device().narrow_storage ~= false then
  local saved = lumus.tune.elementwise().hw_half
  local parts = {}
  for b = 0, 65535 do parts[#parts + 1] = string.pack("<I2", b) end
  local x = lumus.from_bytes(table.concat(parts), { 65536 }, { dtype = "float16" })
  local function diffs(f)
    lumus.tune.elementwise({ hw_half = false }); local a = f():to_bytes()
    lumus.tune.elementwise({ hw_half = true }); local b = f():to_bytes()
    local bad, first = 0, nil
    for i = 1, #a, 2 do
      local u, v = string.unpack("<I2", a, i), string.unpack("<I2", b, i)
      local nan_u = (u & 0x7c00) == 0x7c00 and (u & 0x3ff) ~= 0
      local nan_v = (v & 0x7c00) == 0x7c00 and (v & 0x3ff) ~= 0
      if u ~= v and not (nan_u and nan_v) then
        bad = bad + 1
        first = first or ("input %04x: software %04x, device %04x"):format((i - 1) // 2, u, v)
      end
    end
    return bad, first
  end
  for _, c in ipairs({ { "x * (1/3)", function() return x:mul(1 / 3) end },
                       { "x * 1e-3 (subnormals)", function() return x:mul(1e-3) end },
                       { "x * 1000 (overflow)", function() return x:mul(1000) end },
                       { "x + 3.3e-5 (ties near 1)", function() return x:add(3.3e-5) end },
                       { "exp(x)", function() return x:exp() end } }) do
    local bad, first = diffs(c[2])
    check(bad == 0, ("float16 %s: device packing equals software rounding (%d differ%s)")
      :format(c[1], bad, first and "; " .. first or ""))
  end
  lumus.tune.elementwise({ hw_half = saved })
  x:free()
end

-- float32 pow with exact products from fma (lumus.tune.elementwise{fused_fma=true}, the
-- default on NVIDIA) and from Dekker's split: within 4 ulp of the float64 reference over
-- bases 2^-20..2^20 and exponents up to +-41 (large |y log2 x| is where an unfused fma
-- would show, as errors of thousands of ulp).
if lumus.tune.elementwise then
  local ref = require "lumus.reference"
  local saved = lumus.tune.elementwise().fused_fma
  local xs, ys = {}, {}
  for i = 0, 4000 do
    xs[#xs + 1] = ref.f32(2.0 ^ (-20 + 40 * i / 4000))
    ys[#ys + 1] = ref.f32(({ 1.7, -2.5, 7.3, -0.3, 41, -13.1, 0.01, 3.5 })[i % 8 + 1])
  end
  local xt, yt = lumus.tensor(xs), lumus.tensor(ys)
  for _, on in ipairs({ true, false }) do
    lumus.tune.elementwise({ fused_fma = on })
    local got = lumus.pow(xt, yt):to_table()
    local worst, at = 0, 1
    for i = 1, #xs do
      local want = xs[i] ^ ys[i]
      if want < 3.4e38 and want > 1e-37 then
        local err = math.abs(got[i] - want) / ulp(want)
        if err > worst then worst, at = err, i end
      end
    end
    check(worst <= 4, ("float32 pow, fused_fma = %s: worst %.2f ulp (pow(%.9g, %.9g))"):format(tostring(on), worst, xs[at], ys[at]))
    -- number exponents with |y| <= 4 over bases 2^-60..2^60: whole vectors on pow's
    -- short path (shaders/elementwise.comp, pow_fast)
    local bases = {}
    for i = 0, 20000 do bases[#bases + 1] = ref.f32(2.0 ^ (-60 + 120 * i / 20000) * (1 + (i % 7) / 64)) end
    local bt = lumus.tensor(bases)
    for _, y in ipairs({ 1.7, -1.99, 0.3, 2.4, -3.9999998 }) do
      local y32 = ref.f32(y)
      local gy = lumus.pow(bt, y32):to_table()
      local w, wat = 0, 1
      for i = 1, #bases do
        local want = bases[i] ^ y32
        if want < 3.4e38 and want > 1e-37 then
          local err = math.abs(gy[i] - want) / ulp(want)
          if err > w then w, wat = err, i end
        end
      end
      check(w <= 4, ("float32 pow(t, %.9g), fused_fma = %s: worst %.2f ulp (x = %.9g)"):format(y32, tostring(on), w, bases[wat]))
    end
  end
  lumus.tune.elementwise({ fused_fma = saved })
end

-- sin, cos, tan (both reductions: Cody-Waite up to 4096, Payne-Hanek beyond), expm1,
-- log1p, exp2, log2, log10, square, reciprocal against float64 in ulps, with fused_fma on and off (the two-sums and
-- products must not be contracted by the driver); floor, round, sign exactly.
if lumus.sin then
  local ref = require "lumus.reference"
  local saved = lumus.tune.elementwise and lumus.tune.elementwise().fused_fma
  local g = ref.rng(11)
  local small, wide = {}, {}
  for i = 1, 20000 do small[i] = ref.f32((g.uniform() * 2 - 1) * 4096) end
  for k = 1, 2607 do
    local v = ref.f32(k * math.pi / 2)
    small[#small + 1], small[#small + 2] = ref.f32(v * (1 + 2 ^ -23)), ref.f32(v * (1 - 2 ^ -23))
  end
  for i = 1, 20000 do wide[i] = ref.f32((g.uniform() < 0.5 and -1 or 1) * 2 ^ (-30 + 157 * g.uniform())) end
  wide[#wide + 1] = ref.f32(16367173 * 2 ^ 72)
  local mid = {}
  for i = 1, 20000 do mid[i] = ref.f32((g.uniform() * 2 - 1) * 30) end
  local cases = {
    { "sin", small, math.sin, 2 }, { "cos", small, math.cos, 2 }, { "sin", wide, math.sin, 2 }, { "cos", wide, math.cos, 2 },
    { "expm1", mid, function(x) return ref.expm1(x) end, 2 }, { "log1p", ref.map(mid, math.abs), function(x) return ref.log1p(x) end, 3 },
    { "square", mid, function(x) return x * x end, 0.5 }, { "reciprocal", mid, function(x) return 1 / x end, 3 },
    { "exp2", mid, function(x) return ref.exp2(x) end, 2 }, { "log2", ref.map(wide, math.abs), function(x) return ref.log2(x) end, 2 },
    { "log10", ref.map(wide, math.abs), function(x) return ref.log10(x) end, 2 },
    { "tan", small, math.tan, 4 }, { "tan", wide, math.tan, 4 },
    { "atan", wide, math.atan, 3 }, { "asin", ref.map(mid, function(v) return ref.f32(v / 30) end), math.asin, 4 },
    { "acos", ref.map(mid, function(v) return ref.f32(v / 30) end), math.acos, 4 },
    { "sinh", mid, function(x) return ref.sinh(x) end, 3 }, { "cosh", mid, function(x) return ref.cosh(x) end, 3 },
    { "asinh", wide, function(x) return ref.asinh(x) end, 3 },
    { "acosh", ref.map(wide, function(v) return ref.f32(math.abs(v) + 1) end), function(x) return ref.acosh(x) end, 3 },
    { "atanh", ref.map(mid, function(v) return ref.f32(v / 30) end), function(x) return ref.atanh(x) end, 3 },
  }
  for _, on in ipairs(lumus.tune.elementwise and { true, false } or { saved }) do
    if lumus.tune.elementwise then lumus.tune.elementwise({ fused_fma = on }) end
    for _, c in ipairs(cases) do
      local got = lumus[c[1]](lumus.tensor(c[2])):to_table()
      local worst, at = 0, 1
      for i, x in ipairs(c[2]) do
        local want = c[3](x)
        if math.abs(want) < 3.4e38 then
          local err = math.abs(got[i] - want) / ulp(want)
          if not (err <= worst) then worst, at = err, i end
        end
      end
      check(worst <= c[4], ("float32 %s (%d inputs up to %.3g), fused_fma = %s: worst %.2f ulp (x = %.9g)"):format(
        c[1], #c[2], math.abs(c[2][#c[2]]), tostring(on), worst, c[2][at]))
    end
    -- atan2 over every quadrant: y from the wide sweep against x from the mid one and
    -- against y's neighbours (ratios near 1 and near tan(pi/8)).
    local ys, xs = {}, {}
    for i = 1, #mid do
      ys[#ys + 1], xs[#xs + 1] = wide[i], mid[i]
      ys[#ys + 1], xs[#xs + 1] = mid[i], ref.f32(mid[(i % #mid) + 1] * (0.3 + 1.2 * (i % 97) / 97))
    end
    local got = lumus.atan2(lumus.tensor(ys), lumus.tensor(xs)):to_table()
    local want = ref.atan2(ys, xs)
    local worst, at = 0, 1
    for i = 1, #ys do
      local err = math.abs(got[i] - want[i]) / ulp(want[i])
      if not (err <= worst) then worst, at = err, i end
    end
    check(worst <= 3, ("float32 atan2 (%d pairs), fused_fma = %s: worst %.2f ulp (atan2(%.9g, %.9g))"):format(
      #ys, tostring(on), worst, ys[at], xs[at]))
  end
  if lumus.tune.elementwise then lumus.tune.elementwise({ fused_fma = saved }) end
  local xs = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.3, 8388609, 0 / 0 }
  for _, name in ipairs { "floor", "round", "sign" } do
    local got, want = lumus[name](lumus.tensor(xs)):to_table(), ref[name](xs)
    local same = true
    for i = 1, #xs do same = same and (got[i] == want[i] or (got[i] ~= got[i] and want[i] ~= want[i])) end
    check(same, name .. " exact on halves, 2^23 + 1 and NaN")
  end
end

-- float16 and bfloat16 log, sin, cos, tan, expm1, log1p, atan, asin, acos and gelu over every
-- input of each format (the 16-bit paths lean on the driver's log2 and exp2 and on
-- products kept exact), as spec/support/narrow_exhaustive.lua checks them on lavapipe.
if lumus.sin and lumus.device().narrow_storage ~= false then
  local exhaustive = dofile("spec/support/narrow_exhaustive.lua")
  -- Whether float32 arithmetic here flushes subnormals (docs/semantics.md allows it): then
  -- a bfloat16 subnormal input may act as a zero.
  local sub = lumus.tensor({ 1e-40 })
  local flushes = (sub * 1.0):to_table()[1] == 0
  sub:free()
  print(("float32 subnormals: %s"):format(flushes and "flushed" or "kept"))
  for _, dtype in ipairs { "float16", "bfloat16" } do
    local x = exhaustive.every_pattern(dtype)
    local xv = x:to_table()
    for _, name in ipairs { "log", "sin", "cos", "tan", "expm1", "log1p", "atan", "asin", "acos", "gelu" } do
      local bad, first = exhaustive.count_bad(name, dtype, xv, lumus[name](x):to_table(), flushes)
      check(bad == 0, ("%s %s of every input within one ulp (%d not%s)"):format(dtype, name, bad, first and "; " .. first or ""))
    end
    x:free()
  end
end

-- matmul / linear on every kernel path and dtype against float64 (bench/matmul.lua checks
-- sampled entries of large products; these check every entry of odd-sized ones). Bound
-- per element: 2*K*2^-24*sum|a||b| for the accumulation plus half an ulp of the output
-- dtype times |ref| (inputs are exact in their dtype: they are read back after conversion).
do
  local ref = require "lumus.reference"
  local HALF = { float32 = 0, float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }
  local g = ref.rng(20261203)
  local function operand(shape, dtype)
    local t = lumus.tensor(ref.random_table(shape, g))
    if dtype ~= "float32" then t = t:to(dtype) end
    return t, (dtype == "float32" and t or t:to("float32")):to_table()
  end
  local function worst_ratio(got, at, bt, tb, dtype)
    local c = (dtype == "float32" and got or got:to("float32")):to_table()
    local M, K = #at, #at[1]
    local N = tb and #bt or #bt[1]
    local worst = 0
    for i = 1, M do
      for j = 1, N do
        local s, scale = 0, 0
        for q = 1, K do
          local p = at[i][q] * (tb and bt[j][q] or bt[q][j])
          s, scale = s + p, scale + math.abs(p)
        end
        local bound = 2 * K * 2 ^ -24 * scale * (1 + HALF[dtype]) + HALF[dtype] * math.abs(s) * 1.001 + 2 ^ -25
        local r = math.abs(c[i][j] - s) / bound
        if not (r <= worst) then worst = r end     -- NaN makes worst NaN
      end
    end
    return worst
  end
  local coop = lumus.device().cooperative_matrix
  print(("cooperative matrices (tensor cores): %s"):format(tostring(coop)))
  local paths = { "auto", "gemv", "tiled" }
  if coop ~= nil then paths[#paths + 1] = "coop" end
  -- The coop path once per block form of the tensor-core kernel (tune.matmul's coop_form).
  local runs = {}
  for _, path in ipairs(paths) do
    if path == "coop" then
      for f = 1, 16 do
        if not pcall(lumus.tune.matmul, 1, 1, 1, { coop_form = f }) then break end
        runs[#runs + 1] = { path = path, coop_form = f, name = ("coop form %d"):format(f) }
      end
    else
      runs[#runs + 1] = { path = path, name = path }
    end
  end
  lumus.tune.matmul(1, 1, 1, {})
  for _, dtype in ipairs { "float32", "float16", "bfloat16" } do
    for _, run in ipairs(runs) do
      local path = run.name
      local ok_path = pcall(lumus.tune.matmul, 1, 1, 1, { path = run.path, coop_form = run.coop_form })
      if ok_path then
        for _, s in ipairs { { 1, 768, 257 }, { 7, 33, 65 }, { 16, 64, 128 }, { 64, 256, 256 }, { 130, 72, 200 }, { 257, 136, 264 } } do
          local M, K, N = s[1], s[2], s[3]
          for _, tb in ipairs { false, true } do
            local a, at = operand({ M, K }, dtype)
            local b, bt = operand(tb and { N, K } or { K, N }, dtype)
            local r = worst_ratio(lumus.matmul(a, b, { transpose_b = tb }), at, bt, tb, dtype)
            check(r <= 1, ("matmul %s path %s %dx%dx%d transpose_b=%s: worst error / bound %.3g")
              :format(dtype, path, M, K, N, tostring(tb), r))
          end
        end
      end
    end
  end
  lumus.tune.matmul(1, 1, 1, {})
end

print(("device_checks: %d passed, %d failed"):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
