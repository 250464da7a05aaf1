-- lumus.scaled_dot_product_attention against the float64 reference.
-- Tolerances (element-wise, mixed: |got - want| <= tol * max(1, |want|)): float32 2e-5;
-- float16 3e-3 and bfloat16 2.4e-2 (the reference is fed the rounded inputs, so what is
-- left is float32 accumulation plus the output's rounding, 2^-11 and 2^-8 relative, and
-- the probabilities' float32 error times |v|).
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local NAN = 0 / 0

local TOL = { float32 = 2e-5, float16 = 3e-3, bfloat16 = 2.4e-2 }
local sdpa = lumus.scaled_dot_product_attention

local g = ref.rng(1717)
-- A nested table of f() values (any type) of this shape.
local function table_of(shape, f, d)
  d = d or 1
  local t = {}
  for i = 1, shape[d] do
    if d == #shape then t[i] = f() else t[i] = table_of(shape, f, d + 1) end
  end
  return t
end

local function randt(shape, dtype)
  local t = lumus.tensor(ref.random_table(shape, g.normal), dtype and { dtype = dtype } or nil)
  return t, t:to_table()
end

local function check(q, k, v, qt, kt, vt, opts, ropts, what, dtype)
  local y = sdpa(q, k, v, opts)
  assert.are.equal(q:dtype(), y:dtype())
  checks.close(y, ref.scaled_dot_product_attention(qt, kt, vt, ropts or opts),
               { mixed = TOL[dtype or "float32"], what = what })
  return y
end

describe("scaled_dot_product_attention", function()
  it("matches the reference over head dimensions, lengths and causal (float32)", function()
    for _, c in ipairs {
      { 1, 1, 1, 1, 1 }, { 1, 1, 5, 5, 8 }, { 2, 3, 17, 17, 13 }, { 1, 2, 33, 33, 32 }, { 2, 1, 70, 70, 64 },
      { 1, 1, 40, 40, 80 }, { 1, 2, 19, 19, 96 }, { 1, 1, 65, 65, 128 }, { 1, 1, 9, 12, 256 }, { 1, 1, 7, 7, 3 },
      { 1, 2, 100, 100, 64 }, { 1, 1, 31, 31, 255 },
    } do
      local B, H, Tq, Tk, D = compat.unpack(c)
      local q, qt = randt { B, H, Tq, D }
      local k, kt = randt { B, H, Tk, D }
      local v, vt = randt { B, H, Tk, D }
      for _, causal in ipairs { false, true } do
        check(q, k, v, qt, kt, vt, { causal = causal }, nil, ("%dx%dx%dx%d hd %d causal %s"):format(B, H, Tq, Tk, D, tostring(causal)))
      end
    end
  end)

  it("aligns the causal mask bottom-right for a KV cache (Tk > Tq), unlike PyTorch's top-left", function()
    for _, c in ipairs { { 1, 2, 1, 37, 16 }, { 2, 2, 5, 40, 24 }, { 1, 1, 30, 100, 64 }, { 1, 1, 3, 3, 8 } } do
      local B, H, Tq, Tk, D = compat.unpack(c)
      local q, qt = randt { B, H, Tq, D }
      local k, kt = randt { B, H, Tk, D }
      local v, vt = randt { B, H, Tk, D }
      check(q, k, v, qt, kt, vt, { causal = true }, nil, ("kv cache %d of %d"):format(Tq, Tk))
    end
    -- the last query row sees every key: the same as no mask there
    local q = randt { 1, 1, 4, 8 }
    local k = randt { 1, 1, 10, 8 }
    local v = randt { 1, 1, 10, 8 }
    local a = sdpa(q, k, v, { causal = true }):to_table()[1][1][4]
    local b = sdpa(q, k, v):to_table()[1][1][4]
    checks.close(a, b, { mixed = 1e-6, what = "last row" })
    -- the first query row sees keys 1..7: the same as attending to k[1..7] alone
    local first = sdpa(q:narrow(3, 1, 1), k:narrow(3, 1, 7), v:narrow(3, 1, 7)):to_table()[1][1][1]
    checks.close(sdpa(q, k, v, { causal = true }):to_table()[1][1][1], first, { mixed = 1e-6, what = "first row" })
  end)

  it("decodes one query over long keys through split key tiles", function()
    for _, c in ipairs { { 1, 2, 1, 1000, 64 }, { 1, 3, 1, 257, 13 }, { 2, 1, 2, 513, 32 }, { 1, 1, 1, 4, 8 } } do
      local B, H, Tq, Tk, D = compat.unpack(c)
      local q, qt = randt { B, H, Tq, D }
      local k, kt = randt { B, H, Tk, D }
      local v, vt = randt { B, H, Tk, D }
      check(q, k, v, qt, kt, vt, {}, nil, ("decode %d of %d"):format(Tq, Tk))
      check(q, k, v, qt, kt, vt, { causal = true }, nil, ("decode causal %d of %d"):format(Tq, Tk))
    end
    -- a long cache on few rows: on a CPU device the keys split so that no workgroup
    -- loops past llvmpipe's iteration budget
    local q, qt = randt { 1, 8, 2, 4 }
    local k, kt = randt { 1, 8, 9001, 4 }
    local v, vt = randt { 1, 8, 9001, 4 }
    check(q, k, v, qt, kt, vt, { causal = true }, nil, "long cache")
    if lumus.device().kind == "cpu" then
      local plan = lumus.tune.attention(8, 2, 9001, 4)
      assert.is_true(plan.tiles_per_split <= 256, "tiles per workgroup on a CPU device")
    end
    -- the plan does split on this device for such a shape, so the path above ran
    assert.is_true(lumus.tune.attention(2, 1, 1000, 64).splits > 1)
    assert.are.equal(1, lumus.tune.attention(1, 1, 1, 64).splits)
  end)

  it("takes a bool mask (true: attend) and a float mask (added), broadcast", function()
    local B, H, Tq, Tk, D = 2, 3, 9, 21, 16
    local q, qt = randt { B, H, Tq, D }
    local k, kt = randt { B, H, Tk, D }
    local v, vt = randt { B, H, Tk, D }
    for _, mshape in ipairs { { Tq, Tk }, { B, 1, Tq, Tk }, { B, H, Tq, Tk }, { 1, Tk }, { H, 1, Tk } } do
      local mt = table_of(mshape, function() return g.uniform() < 0.7 end)
      -- keep key 1 for every row so no row is fully masked here
      local function keep_first(t) if type(t[1]) == "table" then for _, s in ipairs(t) do keep_first(s) end else t[1] = true end end
      keep_first(mt)
      local mask = lumus.tensor(mt, { dtype = "bool" })
      check(q, k, v, qt, kt, vt, { mask = mask }, { mask = mt }, "bool mask " .. table.concat(mshape, "x"))
      check(q, k, v, qt, kt, vt, { mask = mask, causal = true }, { mask = mt, causal = true }, "bool mask + causal")
      local ft = ref.random_table(mshape, function() return (g.uniform() - 0.5) * 6 end)
      local fm = lumus.tensor(ft)
      check(q, k, v, qt, kt, vt, { mask = fm }, { mask = ft }, "float mask " .. table.concat(mshape, "x"))
    end
    -- -inf entries of a float mask act as false
    local ft = ref.random_table({ Tq, Tk }, function() return g.uniform() < 0.5 and -math.huge or 0 end)
    for i = 1, Tq do ft[i][2] = 0 end
    check(q, k, v, qt, kt, vt, { mask = lumus.tensor(ft) }, { mask = ft }, "-inf float mask")
  end)

  it("gives 0 for a row whose keys are all masked (PyTorch's SDPA since 2.5), NaN for NaN", function()
    local q, qt = randt { 1, 2, 4, 8 }
    local k, kt = randt { 1, 2, 6, 8 }
    local v, vt = randt { 1, 2, 6, 8 }
    local mt = {}
    for i = 1, 4 do mt[i] = {} for j = 1, 6 do mt[i][j] = i ~= 2 end end   -- row 2 sees nothing
    local y = check(q, k, v, qt, kt, vt, { mask = lumus.tensor(mt, { dtype = "bool" }) }, { mask = mt }, "row 2 masked")
    local yt = y:to_table()
    for h = 1, 2 do for c = 1, 8 do assert.are.equal(0, yt[1][h][2][c]) end end
    -- causal with Tk < Tq: the first Tq - Tk rows see no key
    local y2 = sdpa(q, k:narrow(3, 1, 2), v:narrow(3, 1, 2), { causal = true }):to_table()
    for i = 1, 2 do for c = 1, 8 do assert.are.equal(0, y2[1][1][i][c]) end end
    assert.are_not.equal(0, y2[1][1][3][1])
    -- and through the split path: one decode row, every key masked
    local qd = randt { 1, 1, 1, 8 }
    local kd, vd = randt { 1, 1, 600, 8 }, randt { 1, 1, 600, 8 }
    local none = lumus.zeros({ 1, 600 }, { dtype = "bool" })
    for _, val in ipairs(sdpa(qd, kd, vd, { mask = none }):to_table()[1][1][1]) do assert.are.equal(0, val) end
    -- NaN in a query row: that row is NaN, the others are not
    qt[1][1][3][5] = NAN
    local yn = sdpa(lumus.tensor(qt), k, v):to_table()
    for c = 1, 8 do assert.is_true(yn[1][1][3][c] ~= yn[1][1][3][c]) end
    assert.is_true(yn[1][1][2][1] == yn[1][1][2][1])
    checks.close(yn, ref.scaled_dot_product_attention(qt, kt, vt), { mixed = 2e-5, what = "NaN row" })
  end)

  it("works in float16 and bfloat16 with float32 accumulation", function()
    for _, dtype in ipairs { "float16", "bfloat16" } do
      for _, c in ipairs { { 1, 2, 33, 33, 64, false }, { 2, 1, 20, 20, 13, true }, { 1, 2, 1, 700, 64, false }, { 1, 1, 8, 50, 128, true } } do
        local B, H, Tq, Tk, D, causal = compat.unpack(c)
        local q, qt = randt({ B, H, Tq, D }, dtype)
        local k, kt = randt({ B, H, Tk, D }, dtype)
        local v, vt = randt({ B, H, Tk, D }, dtype)
        check(q, k, v, qt, kt, vt, { causal = causal }, nil, dtype .. " " .. table.concat(c, " ", 1, 5), dtype)
      end
      local q, qt = randt({ 1, 1, 5, 8 }, dtype)
      local k, kt = randt({ 1, 1, 7, 8 }, dtype)
      local v, vt = randt({ 1, 1, 7, 8 }, dtype)
      local ft = ref.random_table({ 5, 7 }, function() return g.uniform() - 0.5 end)
      local fm = lumus.tensor(ft, { dtype = dtype })
      check(q, k, v, qt, kt, vt, { mask = fm }, { mask = fm:to_table() }, dtype .. " float mask", dtype)
    end
  end)

  it("reads views through their strides: heads split by view + transpose, narrow, expand", function()
    local B, T, H, D = 2, 11, 3, 16
    local x, xt = randt { B, T, 3 * H * D }
    local qkv = x:view({ B, T, 3, H, D })
    local function part(i) return qkv:narrow(3, i, 1):view({ B, T, H, D }):transpose(2, 3) end
    -- view of a narrow is not allowed on non-contiguous tensors? build with select-like narrows instead
    local q, k, v = part(1), part(2), part(3)
    local function tbl(i)
      local t = {}
      for b = 1, B do t[b] = {} for h = 1, H do t[b][h] = {} for s = 1, T do
        local row = {}
        for d = 1, D do row[d] = xt[b][s][(i - 1) * H * D + (h - 1) * D + d] end
        t[b][h][s] = row
      end end end
      return t
    end
    local qt, kt, vt = tbl(1), tbl(2), tbl(3)
    check(q, k, v, qt, kt, vt, { causal = true }, nil, "qkv views")
    -- a KV cache narrowed to the filled part
    local cache, ct = randt { 1, 2, 64, 8 }
    local q1, q1t = randt { 1, 2, 3, 8 }
    local kv = cache:narrow(3, 1, 20)
    local kvt = {}
    for h = 1, 2 do kvt[h] = {} for s = 1, 20 do kvt[h][s] = ct[1][h][s] end end
    check(q1, kv, kv, q1t, { kvt }, { kvt }, { causal = true }, nil, "narrowed cache")
    -- grouped-query heads: k and v of one head expanded over 4
    local k1, k1t = randt { 1, 1, 9, 8 }
    local v1, v1t = randt { 1, 1, 9, 8 }
    local q4, q4t = randt { 1, 4, 9, 8 }
    check(q4, k1:expand({ 1, 4, 9, 8 }), v1:expand({ 1, 4, 9, 8 }), q4t, k1t, v1t, {}, nil, "expanded heads")
    check(q4, k1, v1, q4t, k1t, v1t, {}, nil, "broadcast heads")
    -- heads narrowed along hd from an unaligned start: element loads instead of vec4s
    local w, wt = randt { 1, 2, 7, 10 }
    local wn = w:narrow(4, 2, 8)
    local wnt = { {} }
    for h = 1, 2 do wnt[1][h] = {} for s = 1, 7 do wnt[1][h][s] = { compat.unpack(wt[1][h][s], 2, 9) } end end
    check(wn, wn, wn, wnt, wnt, wnt, { causal = true }, nil, "unaligned narrow")
    -- a last dimension that is not contiguous goes through a copy
    local kT, kTt = randt { 1, 1, 8, 9 }
    local kk = kT:transpose(3, 4)
    local kkt = { { {} } }
    for s = 1, 9 do kkt[1][1][s] = {} for d = 1, 8 do kkt[1][1][s][d] = kTt[1][1][d][s] end end
    check(q4:narrow(2, 1, 1), kk, v1, { { q4t[1][1] } }, kkt, v1t, {}, nil, "transposed k")
  end)

  it("computes the same under every forced register tile (tune.attention)", function()
    local q, qt = randt { 1, 3, 37, 20 }
    local k, kt = randt { 1, 3, 45, 20 }
    local v, vt = randt { 1, 3, 45, 20 }
    local want = ref.scaled_dot_product_attention(qt, kt, vt, { causal = true })
    for _, rc in ipairs { { 1, 1 }, { 2, 2 }, { 8, 1 }, { 8, 2 }, { 4, 4 }, { 3, 5 } } do
      local plan = lumus.tune.attention(3, 37, 45, 20, { rows_per_lane = rc[1], keys_per_lane = rc[2] })
      assert.are.same({ rc[1], rc[2] }, { plan.rows_per_lane, plan.keys_per_lane })
      checks.close(sdpa(q, k, v, { causal = true }), want, { mixed = 2e-5, what = ("tile %dx%d"):format(rc[1], rc[2]) })
    end
    lumus.tune.attention(1, 1, 1, 1, {})
    checks.errors(lumus.tune.attention, "give both", 1, 1, 1, 1, { rows_per_lane = 2 })
    checks.errors(lumus.tune.attention, "must be in 0..8", 1, 1, 1, 1, { rows_per_lane = 9, keys_per_lane = 1 })
  end)

  it("takes scale and out", function()
    local q, qt = randt { 1, 2, 6, 8 }
    local k, kt = randt { 1, 2, 6, 8 }
    local v, vt = randt { 1, 2, 6, 8 }
    check(q, k, v, qt, kt, vt, { scale = 0.05 }, nil, "scale")
    local out = lumus.zeros({ 1, 2, 6, 8 })
    local y = sdpa(q, k, v, { out = out, causal = true })
    assert.are.equal(out, y)
    checks.close(out, ref.scaled_dot_product_attention(qt, kt, vt, { causal = true }), { mixed = 2e-5, what = "out" })
    -- method form
    checks.close(q:scaled_dot_product_attention(k, v), ref.scaled_dot_product_attention(qt, kt, vt), { mixed = 2e-5, what = "method" })
  end)

  it("raises clear errors for bad arguments", function()
    local q = lumus.zeros { 1, 2, 3, 8 }
    local k = lumus.zeros { 1, 2, 5, 8 }
    local e = checks.errors(sdpa, "#1.*q must be 4%-D", lumus.zeros { 2, 3, 8 }, k, k)
    assert.matches("scaled_dot_product_attention", e)
    checks.errors(sdpa, "#2.*k has shape 1x2x5x4; with q 1x2x3x8", q, lumus.zeros { 1, 2, 5, 4 }, k)
    checks.errors(sdpa, "#3.*v has shape", q, k, lumus.zeros { 1, 2, 6, 8 })
    checks.errors(sdpa, "#2.*k has shape", q, lumus.zeros { 1, 3, 5, 8 }, k)
    checks.errors(sdpa, "#2.*k must have q's dtype %(float32%), got float16", q, k:half(), k)
    checks.errors(sdpa, "#1.*q must be float32, float16 or bfloat16, got int32", q:int(), k:int(), k:int())
    checks.errors(sdpa, "#1.*head dimension must be in 1..256, got 300", lumus.zeros { 1, 1, 2, 300 }, lumus.zeros { 1, 1, 2, 300 }, lumus.zeros { 1, 1, 2, 300 })
    checks.errors(sdpa, "#4.*unknown option 'is_causal'", q, k, k, { is_causal = true })
    checks.errors(sdpa, "#4.*causal must be a boolean", q, k, k, { causal = 1 })
    checks.errors(sdpa, "#4.*scale must be a finite number", q, k, k, { scale = math.huge })
    checks.errors(sdpa, "#4.*mask has shape 3x4, which does not broadcast to %[B, H, Tq, Tk%] = 1x2x3x5", q, k, k, { mask = lumus.zeros { 3, 4 } })
    checks.errors(sdpa, "#4.*mask must be bool or q's dtype %(float32%), got int32", q, k, k, { mask = lumus.zeros({ 3, 5 }):int() })
    checks.errors(sdpa, "#4.*mask must be a tensor", q, k, k, { mask = true })
    checks.errors(sdpa, "#4.*out", q, k, k, { out = lumus.zeros { 1, 2, 3, 7 } })
    checks.errors(sdpa, "#4.*out must be float32", q, k, k, { out = lumus.zeros({ 1, 2, 3, 8 }):half() })
    checks.errors(sdpa, "#4.*out overlaps q", q, k, k, { out = q })
    checks.errors(sdpa, "#1.*tensor expected", 5, k, k)
  end)
end)
