-- layer_norm_forward against the float64 reference (lua/lumus/reference.lua).
--
-- Tolerances: inputs are rounded to float32 before the reference sees them, so the only
-- error left is the kernel's float32 arithmetic. y: relative L2 error <= 1e-5 and max
-- abs error <= 1e-4 * (1 + |ref|); mean: max error <= 1e-5 * (1 + |ref|); invstd:
-- relative error <= 1e-4. Outputs are poisoned with NaN before each run (through the
-- `out` options), so an element the kernel fails to write fails the comparison.
local lumus = require "lumus"
local ref = require "lumus.reference"

local Y_REL_L2, Y_MAX, MEAN_MAX, INVSTD_REL = 1e-5, 1e-4, 1e-5, 1e-4

local function stat_shape(shape)
  local s = {}
  for i = 1, #shape - 1 do s[i] = shape[i] end
  if #s == 0 then s[1] = 1 end
  return s
end

local function check(got, want, what, max_rel_abs)
  local c = ref.compare(got, want)
  assert(c.max_rel <= max_rel_abs, ("%s: max error %.3g (relative to 1+|ref|) > %.3g"):format(what, c.max_rel, max_rel_abs))
  return c
end

-- Runs one case on the GPU (poisoned outputs) and against the reference.
local function run_case(shape, opts)
  opts = opts or {}
  local rng = ref.rng(opts.seed or 1)
  local offset, scale = opts.offset or 0, opts.scale or 1
  local xt = ref.random_table(shape, function() return offset + scale * rng.normal() end)
  local d = shape[#shape]
  local wt = opts.weight and ref.random_table({d}, function() return 1 + 0.5 * rng.normal() end) or nil
  local bt = opts.bias and ref.random_table({d}, function() return rng.normal() end) or nil
  local eps = opts.eps or 1e-5
  local x = lumus.tensor(xt)
  local w = wt and lumus.tensor(wt) or nil
  local b = bt and lumus.tensor(bt) or nil
  local y = lumus.full(shape, 0 / 0)
  local m = lumus.full(stat_shape(shape), 0 / 0)
  local r = lumus.full(stat_shape(shape), 0 / 0)
  local ry, rm, rr = lumus.layer_norm_forward(x, w, b, eps, { out = y, mean = m, invstd = r })
  assert.are.equal(y, ry); assert.are.equal(m, rm); assert.are.equal(r, rr)
  local wy, wm, wr = ref.layer_norm_forward(xt, wt, bt, eps)
  local cy = check(y:to_table(), wy, "y", Y_MAX)
  assert(cy.rel_l2 <= Y_REL_L2, ("y: relative L2 error %.3g > %.3g"):format(cy.rel_l2, Y_REL_L2))
  check(m:to_table(), wm, "mean", MEAN_MAX * math.max(1, scale))
  -- invstd relative error: compare invstd / ref - 1 element by element
  local gi, wi = ref.flatten(r:to_table()), ref.flatten(wr)
  for i = 1, #wi do
    local e = math.abs(gi[i] / wi[i] - 1)
    assert(e <= INVSTD_REL, ("invstd: relative error %.3g at row %d"):format(e, i))
  end
  for _, t in ipairs { x, w, b, y, m, r } do t:free() end
  return cy
end

describe("layer_norm_forward", function()
  local sweep = {
    { 1, 64 }, { 3, 64 }, { 4, 64 }, { 5, 48 }, { 63, 33 }, { 64, 32 }, { 65, 31 }, { 127, 17 },
    { 768, 16 }, { 1000, 9 }, { 1024, 8 }, { 4097, 4 }, { 8192, 3 }, { 65536, 2 }, { 65537, 2 },
  }
  for i, case in ipairs(sweep) do
    local d, rows = case[1], case[2]
    it(("matches the reference for D = %d (%d rows, weight and bias)"):format(d, rows), function()
      run_case({ rows, d }, { seed = i, weight = true, bias = true })
    end)
  end

  it("matches without weight, without bias, and with neither", function()
    run_case({ 9, 768 }, { seed = 21, weight = false, bias = true })
    run_case({ 9, 768 }, { seed = 22, weight = true, bias = false })
    run_case({ 9, 100 }, { seed = 23 })
  end)

  it("matches for several eps and seeds", function()
    for k, eps in ipairs { 1e-5, 1e-3, 0.1, 10 } do
      run_case({ 5, 257 }, { seed = 30 + k, eps = eps, weight = true, bias = true, scale = 0.01 })
    end
  end)

  it("handles 1-D, 3-D and 4-D inputs", function()
    run_case({ 300 }, { seed = 41, weight = true, bias = true })
    run_case({ 2, 3, 64 }, { seed = 42, weight = true, bias = true })
    run_case({ 2, 2, 3, 20 }, { seed = 43, bias = true })
  end)

  it("keeps float32 accuracy for rows with a large common offset (1e4 + noise of std 1)", function()
    -- y ~ N(0,1), so the Y_MAX bound is ~1e-4 relative; the kernel reaches ~1e-6.
    local c = run_case({ 8, 4096 }, { seed = 51, offset = 1e4, weight = true, bias = true })
    assert(c.max_abs < 1e-4, "offset rows: max abs error " .. c.max_abs)
    run_case({ 40, 48 }, { seed = 52, offset = -3e4 })
  end)

  it("normalizes 70,000 short rows (past maxComputeWorkGroupCount[0] on lavapipe)", function()
    local rows, d = 70000, 5
    local rng = ref.rng(61)
    local parts = {}
    local flat = {}
    for i = 1, rows * d do
      local v = ref.f32(rng.normal() + (i % 7))
      flat[i] = v
      parts[i] = string.pack("<f", v)
    end
    local x = lumus.from_bytes(table.concat(parts), { rows, d })
    local y = lumus.full({ rows, d }, 0 / 0)
    local m = lumus.full({ rows }, 0 / 0)
    local r = lumus.full({ rows }, 0 / 0)
    lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = y, mean = m, invstd = r })
    local yb, mb = y:to_bytes(), m:to_bytes()
    for row = 1, rows do
      local xr = {}
      for j = 1, d do xr[j] = flat[(row - 1) * d + j] end
      local wy, wm = ref.layer_norm_forward(xr)
      local gm = string.unpack("<f", mb, (row - 1) * 4 + 1)
      assert(math.abs(gm - wm[1]) <= MEAN_MAX * (1 + math.abs(wm[1])), "mean of row " .. row)
      for j = 1, d do
        local gy = string.unpack("<f", yb, ((row - 1) * d + j - 1) * 4 + 1)
        assert(math.abs(gy - wy[j]) <= Y_MAX * (1 + math.abs(wy[j])), ("y[%d][%d] = %s, want %s"):format(row, j, gy, wy[j]))
      end
    end
  end)

  it("works in place (out = x)", function()
    local rng = ref.rng(71)
    local xt = ref.random_table({ 6, 130 }, rng.normal)
    local x = lumus.tensor(xt)
    local y = lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = x })
    assert.are.equal(x, y)
    check(x:to_table(), (ref.layer_norm_forward(xt)), "in-place y", Y_MAX)
  end)

  it("allocates outputs of the right shapes when no options are given", function()
    local x = lumus.ones({ 2, 3, 8 })
    local y, m, r = lumus.layer_norm_forward(x)
    assert.are.same({ 2, 3, 8 }, y:shape())
    assert.are.same({ 2, 3 }, m:shape())
    assert.are.same({ 2, 3 }, r:shape())
    assert.are.same({ 1 }, select(2, lumus.layer_norm_forward(lumus.ones(4))):shape())
    -- constant rows: y = 0, invstd = 1/sqrt(eps)
    for _, v in ipairs(ref.flatten(y:to_table())) do assert.are.equal(0, v) end
    assert(math.abs(ref.flatten(r:to_table())[1] - 1 / math.sqrt(1e-5)) < 1)
  end)

  it("handles tensors larger than maxStorageBufferRange", function()
    local range = lumus.device().max_storage_buffer_range
    local d = 1024
    local rows = range // (4 * d) + 64                 -- just past the range
    if rows * d * 4 > 600 * 2 ^ 20 then
      pending("maxStorageBufferRange is too large to exceed cheaply on this device")
      return
    end
    -- row k holds a pattern that depends on k, so rows past the range are told apart
    local function row_values(k)
      local a, b = k % 251, (k * 7) % 13
      return { a, a + b, a - b, a + 2 * b }
    end
    local parts = {}
    for k = 0, rows - 1 do parts[k + 1] = string.rep(string.pack("<ffff", table.unpack(row_values(k))), d // 4) end
    local x = lumus.from_bytes(table.concat(parts), { rows, d })
    parts = nil
    local y, m = lumus.layer_norm_forward(x)
    for _, k in ipairs { 0, rows // 2, rows - 2, rows - 1 } do
      local v = row_values(k)
      local xr = {}
      for j = 1, d do xr[j] = v[(j - 1) % 4 + 1] end
      local wy, wm = ref.layer_norm_forward(xr)
      local got = { string.unpack(("<" .. ("f"):rep(d)), y:to_bytes(k * d + 1, d)) }
      got[d + 1] = nil
      check(got, wy, "y row " .. k, Y_MAX)
      assert.is_true(math.abs(string.unpack("<f", m:to_bytes(k + 1, 1)) - wm[1]) < 1e-4)
    end
    x:free(); y:free()
  end)
end)

describe("layer_norm_forward errors", function()
  local x = lumus.ones({ 2, 4 })
  local function err_of(...)
    local ok, e = pcall(lumus.layer_norm_forward, ...)
    assert.is_false(ok)
    return tostring(e)
  end
  local function expect(pattern, ...)
    local e = err_of(...)
    assert(e:find("layer_norm_forward", 1, true), "message does not name the function: " .. e)
    assert(e:find(pattern), ("message %q lacks %q"):format(e, pattern))
  end

  it("rejects a non-tensor x", function()
    expect("#1.*tensor expected", nil)
    expect("#1.*tensor expected", { 1, 2 })
    expect("#1.*tensor expected", "x")
  end)
  it("rejects weight and bias of the wrong shape", function()
    expect("#2.*weight must have shape %[4%]", x, lumus.ones({ 3 }))
    expect("#2.*weight", x, lumus.ones({ 1, 4 }))
    expect("#3.*bias must have shape %[4%]", x, nil, lumus.ones({ 5 }))
    expect("#2.*tensor expected", x, 3)
  end)
  it("rejects bad eps", function()
    expect("#4.*eps must be a positive", x, nil, nil, 0)
    expect("#4.*eps must be a positive", x, nil, nil, -1e-5)
    expect("#4.*eps must be a positive", x, nil, nil, 0 / 0)
    expect("#4.*eps must be a positive", x, nil, nil, math.huge)
    expect("#4.*eps must be a number, got string", x, nil, nil, "1e-5")
    expect("#4.*too small", x, nil, nil, 1e-60)
  end)
  it("rejects freed tensors", function()
    local f = lumus.ones({ 2, 4 }); f:free()
    expect("#1.*tensor has been freed", f)
    local w = lumus.ones({ 4 }); w:free()
    expect("#2.*tensor has been freed", x, w)
    local o = lumus.ones({ 2, 4 }); o:free()
    expect("#5.*out: tensor has been freed", x, nil, nil, nil, { out = o })
  end)
  it("rejects outputs of the wrong shape", function()
    expect("#5.*out must have shape 2x4, got 4x2", x, nil, nil, nil, { out = lumus.empty({ 4, 2 }) })
    expect("#5.*mean must have shape 2, got 3", x, nil, nil, nil, { mean = lumus.empty({ 3 }) })
    expect("#5.*invstd must have shape 2", x, nil, nil, nil, { invstd = lumus.empty({ 2, 1 }) })
    expect("#5.*out must be a tensor", x, nil, nil, nil, { out = {} })
    expect("#5.*options table expected", x, nil, nil, nil, 7)
  end)
  it("rejects outputs that alias inputs unsafely", function()
    local m = lumus.empty({ 2 })
    expect("#5.*mean overlaps invstd", x, nil, nil, nil, { mean = m, invstd = m })
    local w = lumus.ones({ 4 })
    local x1 = lumus.ones({ 1, 4 })
    expect("#5.*out overlaps weight", x1, w, nil, nil, { out = w:reshape({ 1, 4 }) })
    local s1 = lumus.ones({ 1 })
    local xs = lumus.ones({ 1, 1 })
    expect("#5.*mean overlaps x", xs, nil, nil, nil, { mean = xs:reshape({ 1 }) })
    expect("#5.*invstd overlaps bias", xs, nil, s1, nil, { invstd = s1 })
  end)
end)
