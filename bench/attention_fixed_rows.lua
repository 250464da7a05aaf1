-- float16 attention on tensor cores (shaders/attention_coop_regs.comp), three softmax forms
-- in one process: "old" (rows of accumulator components read from the index matrices,
-- the scale a multiply on every score: coop_fixed_rows = false, coop_fold_scale = false),
-- "fold" (the scale in exp2's fma outside edge tiles: coop_fixed_rows = false) and "new"
-- (that and the rows as compile-time constants: the default).
-- 1. A seeded sweep of shapes (odd lengths, Tq != Tk, causal, masks, scales of either sign)
--    through both forms against float64 attention of the same float16 inputs, within
--    3e-3 * max(1, |want|) (bench/attention.lua's float16 tolerance).
--    Then whether the device takes the rows as constants at all (one line).
-- 2. Timing of B8 H12 hd64, T 1024 and 4096, causal or not, both forms (and coop_rows 128).
-- Usage (repository root, build in build/lumus): lua5.4 bench/attention_fixed_rows.lua [check]
package.path = "bench/?.lua;" .. package.path
local common = require "common"
local lumus = common.load_lumus()
local ref = common.load_reference()
print(common.device_line(lumus), "khr", lumus.device().cooperative_matrix_khr)

local FORMS = {
  { name = "old", opts = { coop_fixed_rows = false, coop_fold_scale = false } },
  { name = "fold", opts = { coop_fixed_rows = false } },
  { name = "new", opts = {} },
}
local TOL = 3e-3

do
  local g = ref.rng(20261216)
  local function int(lo, hi) return lo + math.floor(g.uniform() * (hi - lo + 1)) end
  local function table_of(r, c, f)
    local t = {}
    for i = 1, r do
      t[i] = {}
      for j = 1, c do t[i][j] = f() end
    end
    return t
  end
  local function worst(got, want)
    local w, ok = 0, true
    local function walk(a, b)
      if type(b) == "table" then
        for i = 1, #b do walk(a[i], b[i]) end
        return
      end
      local e = math.abs(a - b)
      if not (e <= TOL * math.max(1, math.abs(b))) then ok = false end
      if e > w or e ~= e then w = e end
    end
    walk(got, want)
    return w, ok
  end
  print()
  print("| case | B x H x Tq x Tk | hd | causal | mask | scale | coop | old (worst abs error) | fold | new |")
  print("|---:|:---|---:|:---|:---|---:|:---|:---|:---|:---|")
  local total, failed = 0, 0
  for case = 1, 14 do
    local hd = ({ 64, 16, 32, 128, 48, 80, 64 })[(case - 1) % 7 + 1]
    local tq = case % 5 == 0 and int(32, 60) or int(60, 400)
    local tk = case % 3 == 0 and tq or int(50, 420)
    local B, H = 1, int(1, 2)
    local causal = case % 2 == 0
    local scale = ({ false, -0.2, 0.0, 0.9, false, 2.5, false })[(case - 1) % 7 + 1]
    local q = lumus.randn({ B, H, tq, hd }):to("float16")
    local k = lumus.randn({ B, H, tk, hd }):to("float16")
    local v = lumus.randn({ B, H, tk, hd }):to("float16")
    local opts, ropts, mdesc = { causal = causal }, { causal = causal }, "-"
    if scale then opts.scale, ropts.scale = scale, scale end
    if case % 4 == 1 then
      local mt = table_of(tq, tk, function() return g.uniform() < 0.8 end)
      for j = 1, tk do mt[1][j] = false end
      opts.mask, ropts.mask, mdesc = lumus.tensor(mt, { dtype = "bool" }), mt, "bool"
    elseif case % 4 == 2 then
      local mt = table_of(tq, tk, function() return g.uniform() < 0.1 and -math.huge or g.normal() end)
      opts.mask, mdesc = lumus.tensor(mt):to("float16"), "float"
      ropts.mask = opts.mask:float():to_table()
    end
    local want = ref.scaled_dot_product_attention(q:float():to_table(), k:float():to_table(), v:float():to_table(), ropts)
    local cells, coop = {}, nil
    for _, f in ipairs(FORMS) do
      coop = lumus.tune.attention(B * H, tq, tk, hd, f.opts).coop
      local okc, y = pcall(lumus.scaled_dot_product_attention, q, k, v, opts)
      local w, ok = 0 / 0, false
      if okc then w, ok = worst(y:float():to_table(), want) else io.stderr:write(tostring(y), "\n") end
      total = total + 1
      if not ok then failed = failed + 1 end
      cells[#cells + 1] = ("%s (%.2g)"):format(ok and "ok" or "FAIL", w)
    end
    lumus.tune.attention(1, 1, 1, 1, {})
    print(("| %d | %dx%dx%dx%d | %d | %s | %s | %s | %s | %s |"):format(case, B, H, tq, tk, hd, tostring(causal), mdesc,
      scale and tostring(scale) or "default", tostring(coop), table.concat(cells, " | ")))
  end
  print()
  print(("Correctness: %d of %d within tolerance"):format(total - failed, total))
  -- Whether "new" takes the rows as constants here: coop_fixed_rows = "required" gives NaN
  -- where the device's component order is not NVIDIA's (then "new" runs as "fold").
  local q = lumus.randn({ 1, 2, 128, 64 }):to("float16")
  local plan = lumus.tune.attention(2, 128, 128, 64, { coop_fixed_rows = "required" })
  local y = lumus.scaled_dot_product_attention(q, q, q):float()
  lumus.tune.attention(1, 1, 1, 1, {})
  local total_sum = y:sum():item()
  local nan = total_sum ~= total_sum
  print(("Rows as constants (coop_fixed_rows = \"required\", coop %s): %s"):format(tostring(plan.coop),
    not plan.coop and "not applicable" or nan and "NOT taken (NaN)" or "taken"))
end

if arg[1] == "check" then return end   -- the sweep only (e.g. on lavapipe, where timing means nothing)
print()
print("| T | causal | coop_rows | old µs | fold µs | new µs | old TFLOP/s | fold TFLOP/s | new TFLOP/s | new / old time | max abs fold - old | max abs new - fold |")
print("|---:|:---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for _, T in ipairs { 1024, 4096 } do
  local q = lumus.randn({ 8, 12, T, 64 }):to("float16")
  local k = lumus.randn({ 8, 12, T, 64 }):to("float16")
  local v = lumus.randn({ 8, 12, T, 64 }):to("float16")
  local outs = {}
  for i = 1, #FORMS do outs[i] = lumus.empty({ 8, 12, T, 64 }, { dtype = "float16" }) end
  for _, causal in ipairs { false, true } do
    for _, rows in ipairs { 64, 128 } do
      local us = {}
      for i, f in ipairs(FORMS) do
        local o = { coop_rows = rows }
        for key, val in pairs(f.opts) do o[key] = val end
        lumus.tune.attention(1, 1, 1, 1, o)
        us[i] = common.device_time(lumus, function() lumus.scaled_dot_product_attention(q, k, v, { causal = causal, out = outs[i] }) end, 15, 2) * 1e6
      end
      lumus.tune.attention(1, 1, 1, 1, {})
      local function diff(a, b) return (outs[a]:float() - outs[b]:float()):abs():max():item() end
      local flop = 4 * 8 * 12 * T * T * 64 / (causal and 2 or 1)
      print(("| %d | %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | %.3g | %.3g |"):format(T, tostring(causal), rows,
        us[1], us[2], us[3], flop / us[1] / 1e6, flop / us[2] / 1e6, flop / us[3] / 1e6, us[3] / us[1], diff(2, 1), diff(3, 2)))
    end
  end
  q:free(); k:free(); v:free()
  for i = 1, #FORMS do outs[i]:free() end
end
