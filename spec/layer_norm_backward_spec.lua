-- lumus.layer_norm_backward against the float64 reference (reference.layer_norm_backward)
-- and against central finite differences of the float64 reference forward.
--
-- Tolerances. The reference is fed the float32 values the kernel sees (inputs made with
-- ref.random_table, and the mean and invstd the GPU forward saved), so what is left is
-- the kernel's float32 arithmetic:
--   dx               |dx - ref| <= 2e-5 * max(1, |ref|) per element (entries ~ N(0, 1))
--   dweight, dbias   |got - ref| <= 1e-5 * S_j + 1e-6 per column j, S_j the sum over rows
--                    of |dy * xhat| (dweight) or |dy| (dbias): float32 sums of R terms
--                    err by at most ~R ulps of S_j, and the sums here run over at most
--                    ~100 terms in one chain (a block of rows, then the partial rows).
-- Finite differences (h = 1e-4 in float64 on the float64 forward, truncation error
-- O(h^2)) against the kernel from float32 statistics: |got - fd| <= 1e-4 * max(1, |fd|).
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local NAN = 0 / 0
local tune = lumus.tune

local function stat_shape(shape)
  local s = {}
  for i = 1, #shape - 1 do s[i] = shape[i] end
  if #s == 0 then s[1] = 1 end
  return s
end

-- Per-column bounds for sums over rows of f(row, j) in float32.
local function column_bounds(rows, d, term)
  local b = {}
  for j = 1, d do
    local s = 0
    for r = 1, rows do s = s + math.abs(term(r, j)) end
    b[j] = 1e-5 * s + 1e-6
  end
  return b
end

-- Runs forward then backward on the GPU and checks dx, dweight, dbias against the
-- reference; `opts.offset` adds a common offset to x, `opts.no_weight` drops weight.
local function check_case(shape, seed, opts)
  opts = opts or {}
  local rng = ref.rng(seed)
  local offset = opts.offset or 0
  local x = ref.random_table(shape, function() return offset + rng.normal() end)
  local dy = ref.random_table(shape, function() return rng.normal() end)
  local d = shape[#shape]
  local w = not opts.no_weight and ref.random_table({ d }, function() return 0.5 + rng.uniform() end) or nil
  local X, DY = lumus.tensor(x), lumus.tensor(dy)
  local W = w and lumus.tensor(w) or nil
  local _, m, r = lumus.layer_norm_forward(X, W, nil)
  local mt, rt = m:to_table(), r:to_table()
  local poison = lumus.full(shape, NAN)
  local dx, dw, db
  if W then
    dx, dw, db = lumus.layer_norm_backward(DY, X, m, r, W,
      { out = poison, dweight = lumus.full({ d }, NAN), dbias = lumus.full({ d }, NAN) })
    assert.are.equal(poison, dx)
  else
    dx = lumus.layer_norm_backward(DY, X, m, r, nil, { out = poison })
  end
  local rdx, rdw, rdb = ref.layer_norm_backward(dy, x, mt, rt, w)
  checks.close(dx, rdx, { mixed = 2e-5, what = "dx " .. table.concat(shape, "x") })
  if W then
    local fx, fdy, fm, fr = ref.flatten(x), ref.flatten(dy), ref.flatten(mt), ref.flatten(rt)
    local rows = math.floor(#fx / d)
    local bw = column_bounds(rows, d, function(i, j)
      local k = (i - 1) * d + j
      return fdy[k] * (fx[k] - fm[i]) * fr[i]
    end)
    local bb = column_bounds(rows, d, function(i, j) return fdy[(i - 1) * d + j] end)
    checks.close(dw, rdw, { abs = bw, what = "dweight " .. table.concat(shape, "x") })
    checks.close(db, rdb, { abs = bb, what = "dbias " .. table.concat(shape, "x") })
  end
end

local SHAPES = { { 8 }, { 1, 4 }, { 3, 8 }, { 5, 7 }, { 2, 3, 12 }, { 17, 33 }, { 13, 64 }, { 70, 5 },
                 { 9, 256 }, { 4, 1000 }, { 3, 1027 }, { 2, 4100 }, { 33, 96 },
                 { 1500, 64 }, { 3, 20000 } }

describe("layer_norm_backward", function()
  after_each(function() tune.layer_norm_backward(4, nil, { form = "auto" }) end)

  it("matches the float64 reference with and without weight (the automatic plan)", function()
    for i, shape in ipairs(SHAPES) do
      local plan = tune.layer_norm_backward(shape[#shape], 1)
      -- long rows: split on a GPU with 64-bit atomics and SM ids, else columns
      local long = lumus.device().sm_count > 0 and "split" or "columns"
      if shape[#shape] > 16384 then assert.are.equal(long, plan.form)
      else assert.is_true(plan.form ~= "columns" and plan.form ~= "split") end
      if plan.form == "rows" then   -- a row's segment covers it
        local n = shape[#shape] % 4 == 0 and shape[#shape] / 4 or shape[#shape]
        assert.is_true(plan.segment * plan.items >= n)
      end
      check_case(shape, i)
      check_case(shape, 100 + i, { no_weight = true })
    end
  end)

  it("matches the reference on the long-row form and forced plans", function()
    local plans = {
      { form = "columns" }, { form = "columns", groups = 3, rows_at_once = 1 },
      { form = "columns", wg = 32, rows_at_once = 3, groups = 1 },
      { form = "fused", groups = 1 }, { form = "fused", rows_at_once = 3, groups = 4 },
      { form = "fused", wg = 32, items = 3 }, { form = "fused", wg = 96 },
      { form = "fused", prefetch = true, groups = 2 }, { form = "fused", prefetch = true, rows_at_once = 3, wg = 32 }, { form = "fused", wg = 64, rows_at_once = 1, groups = 6 },
      { form = "rows" }, { form = "rows", wg = 32, groups = 2 }, { form = "rows", items = 1, rows_at_once = 3 },
      { form = "rows", wg = 64, rows_at_once = 4, groups = 1 }, { form = "rows", items = 16, groups = 5 },
      { form = "split" }, { form = "split", wg = 32, items = 1 }, { form = "split", wg = 64, prefetch = false },
      { form = "split", wg = 32, items = 3 },
      { form = "quad" }, { form = "quad", wg = 32, items = 2 }, { form = "quad", groups = 3 },
    }
    for p, plan in ipairs(plans) do
      local got = tune.layer_norm_backward(33, 17, plan)
      assert.are.equal(plan.form, got.form)
      if plan.groups then assert.are.equal(plan.groups, got.groups) end
      if plan.form == "split" then assert.are.equal(plan.prefetch ~= false, got.prefetch) end
      for i, shape in ipairs { { 17, 33 }, { 5, 7 }, { 3, 2, 40 }, { 1, 300 }, { 29, 64 }, { 130, 24 } } do
        check_case(shape, 1000 * p + i)
        check_case(shape, 2000 * p + i, { no_weight = true })
      end
    end
  end)

  it("folds the reduce stage into the fused, rows and quad forms' dispatch, or runs it as its own", function()
    -- Teams of about sqrt(groups) workgroups: many groups and a short last team included.
    for p, plan in ipairs { { form = "fused", groups = 37 }, { form = "rows", groups = 50 }, { form = "quad", groups = 11 },
                            { form = "fused", groups = 1 }, { form = "fused", groups = 2, wg = 32 } } do
      for r, reduce in ipairs { "fold", "dispatch" } do
        plan.reduce = reduce
        assert.are.equal(reduce, tune.layer_norm_backward(4, nil, plan).reduce)
        for i, shape in ipairs { { 150, 33 }, { 131, 64 }, { 3, 2, 40 }, { 1, 7 } } do
          check_case(shape, 5000 + 100 * p + 10 * r + i)
        end
      end
    end
    -- automatic: a dispatch (the fold is forced only, until a GPU has timed it); the
    -- columns and split forms always dispatch it
    assert.are.equal("dispatch", tune.layer_norm_backward(64, 100, { form = "auto" }).reduce)
    assert.are.equal("dispatch", tune.layer_norm_backward(64, 100, { form = "columns" }).reduce)
    assert.are.equal("dispatch", tune.layer_norm_backward(64, 100, { form = "split", wg = 32 }).reduce)
  end)

  it("plans a forced quad form as automatic where a quad row does not fit", function()
    -- 601 vec4s a quad row at 32 threads is 19 per thread (16 at most); D % 4 == 0; D < 4
    for _, c in ipairs { { 601, { form = "quad", wg = 32 } }, { 64, { form = "quad" } }, { 3, { form = "quad" } } } do
      local d, plan = c[1], c[2]
      assert.are_not.equal("quad", tune.layer_norm_backward(d, 5, plan).form)
      check_case({ 5, d }, 40 + d)
    end
    assert.are.equal("quad", tune.layer_norm_backward(601, 5, { form = "quad", wg = 64 }).form)
    check_case({ 5, 601 }, 39)
  end)

  it("matches the reference on a seeded sweep of shapes in every form that fits", function()
    local rng = ref.rng(20261203)
    for i = 1, 8 do
      local d = 1 + math.floor(400 * rng.uniform() ^ 2)
      if rng.uniform() < 0.5 then d = math.max(4, d - d % 4) end
      local rows = 1 + math.floor(150 * rng.uniform())
      for f, form in ipairs { "rows", "fused", "quad" } do
        local items = ({ 0, 1, 4, 16 })[1 + (i + f) % 4]
        tune.layer_norm_backward(4, nil, { form = form, items = items })
        check_case({ rows, d }, 3000 + 10 * i + f)
      end
    end
  end)

  it("keeps its accuracy on rows with a large common offset (1e4 + noise)", function()
    check_case({ 16, 256 }, 7, { offset = 1e4 })
    check_case({ 5, 77 }, 8, { offset = 1e4 })
    tune.layer_norm_backward(4, nil, { form = "columns" })
    check_case({ 16, 256 }, 9, { offset = 1e4 })
    tune.layer_norm_backward(4, nil, { form = "rows" })
    check_case({ 40, 96 }, 10, { offset = 1e4 })
    tune.layer_norm_backward(4, nil, { form = "split", wg = 32, items = 2 })
    check_case({ 12, 1000 }, 11, { offset = 1e4 })
  end)

  it("agrees with central finite differences of the float64 reference forward", function()
    local h = 1e-4
    for k, shape in ipairs { { 3, 5 }, { 2, 8 }, { 1, 2, 6 } } do
      local rng = ref.rng(50 + k)
      local d = shape[#shape]
      local x = ref.random_table(shape, function() return rng.normal() end)
      local c = ref.random_table(shape, function() return rng.normal() end)   -- loss = sum(c * y)
      local w = ref.random_table({ d }, function() return 0.5 + rng.uniform() end)
      local b = ref.random_table({ d }, function() return rng.normal() end)
      local fc = ref.flatten(c)
      local function loss(xv, wv)
        local y = ref.flatten((ref.layer_norm_forward(ref.nest(xv, shape), wv, b, 1e-5)))
        local s = 0
        for i = 1, #y do s = s + fc[i] * y[i] end
        return s
      end
      local fx = ref.flatten(x)
      local fd_x, fd_w = {}, {}
      for i = 1, #fx do
        local p, q = { compat.unpack(fx) }, { compat.unpack(fx) }
        p[i], q[i] = fx[i] + h, fx[i] - h
        fd_x[i] = (loss(p, w) - loss(q, w)) / (2 * h)
      end
      for j = 1, d do
        local p, q = { compat.unpack(w) }, { compat.unpack(w) }
        p[j], q[j] = w[j] + h, w[j] - h
        fd_w[j] = (loss(fx, p) - loss(fx, q)) / (2 * h)
      end
      local X, W, B = lumus.tensor(x), lumus.tensor(w), lumus.tensor(b)
      local _, m, r = lumus.layer_norm_forward(X, W, B, 1e-5)
      local dx, dw, db = lumus.layer_norm_backward(lumus.tensor(c), X, m, r, W)
      checks.close(dx, fd_x, { mixed = 1e-4, what = "dx vs finite differences" })
      checks.close(dw, fd_w, { mixed = 1e-4, what = "dweight vs finite differences" })
      -- loss is linear in b: dbias is sum over rows of c exactly
      local want_b = {}
      for j = 1, d do
        want_b[j] = 0
        for i = j, #fc, d do want_b[j] = want_b[j] + fc[i] end
      end
      checks.close(db, want_b, { mixed = 1e-6, what = "dbias" })
    end
  end)

  it("propagates NaN as PyTorch: a row's dx, a column's sums", function()
    for _, form in ipairs { "fused", "columns", "rows", "split", "quad" } do
      tune.layer_norm_backward(4, nil, { form = form, wg = form == "split" and 32 or nil, items = form == "split" and 1 or nil })
      local rng = ref.rng(3)
      local d = form == "quad" and 9 or 8   -- the quad form takes D % 4 != 0 (rows 1-4 one quad row)
      local x = ref.random_table({ 4, d }, function() return rng.normal() end)
      local dy = ref.random_table({ 4, d }, function() return rng.normal() end)
      local w = ref.random_table({ d }, function() return rng.normal() end)
      dy[2][3] = NAN          -- row 2's dx NaN; dweight[3], dbias[3] NaN
      x[4][5] = 0 / 0         -- row 4's statistics NaN: its dx, and every dweight, NaN
      local X, W = lumus.tensor(x), lumus.tensor(w)
      local _, m, r = lumus.layer_norm_forward(X, W)
      local dx, dw, db = lumus.layer_norm_backward(lumus.tensor(dy), X, m, r, W)
      local rdx, rdw, rdb = ref.layer_norm_backward(dy, x, m:to_table(), r:to_table(), w)
      assert.are.equal(form, tune.layer_norm_backward(d, 4).form)
      local gx = dx:to_table()
      for j = 1, d do
        assert.is_true(gx[2][j] ~= gx[2][j], "dx row 2 NaN")
        assert.is_true(gx[4][j] ~= gx[4][j], "dx row 4 NaN")
        assert.is_true(gx[1][j] == gx[1][j] and gx[3][j] == gx[3][j], "other rows finite")
      end
      local gb = db:to_table()
      for j = 1, d do assert.are.equal(j == 3, gb[j] ~= gb[j]) end
      checks.close(dx, rdx, { mixed = 2e-5, what = "dx" })
      checks.close(dw, rdw, { mixed = 1e-5, what = "dweight" })
      checks.close(db, rdb, { mixed = 1e-5, what = "dbias" })
    end
  end)

  it("gives identical bits from run to run", function()
    for _, plan in ipairs { { form = "auto" }, { form = "columns", groups = 5 }, { form = "fused" }, { form = "rows", groups = 7 },
                         { form = "rows", items = 8, groups = 3 }, { form = "split", wg = 32, items = 1 },
                         { form = "quad", groups = 9 }, { form = "fused", groups = 40, reduce = "dispatch" },
                         { form = "quad", groups = 9, reduce = "dispatch" } } do
      tune.layer_norm_backward(4, nil, plan)
      local rng = ref.rng(11)
      local shape = { 301, plan.form == "quad" and 97 or 96 }
      local X = lumus.tensor(ref.random_table(shape, function() return rng.normal() end))
      local DY = lumus.tensor(ref.random_table(shape, function() return rng.normal() end))
      local W = lumus.tensor(ref.random_table({ shape[2] }, function() return rng.normal() end))
      local _, m, r = lumus.layer_norm_forward(X, W)
      local a = { lumus.layer_norm_backward(DY, X, m, r, W) }
      for _ = 1, 3 do
        local b = { lumus.layer_norm_backward(DY, X, m, r, W) }
        for i = 1, 3 do assert.are.equal(a[i]:to_bytes(), b[i]:to_bytes()) end
      end
    end
  end)

  it("sums the partial rows in the same order whatever the reduce stage's loads in flight", function()
    -- reduce_loads changes how many partial rows a thread loads before adding, not the
    -- order of the additions: dweight and dbias keep their bits.
    for _, case in ipairs { { 3000, 37, { form = "quad", groups = 300 } }, { 2000, 64, { form = "fused", groups = 777 } },
                            { 500, 33, { form = "columns", groups = 101 } } } do
      local R, D, plan = case[1], case[2], case[3]
      local rng = ref.rng(23)
      local X = lumus.tensor(ref.random_table({ R, D }, function() return rng.normal() end))
      local DY = lumus.tensor(ref.random_table({ R, D }, function() return rng.normal() end))
      local W = lumus.tensor(ref.random_table({ D }, function() return rng.normal() end))
      local _, m, r = lumus.layer_norm_forward(X, W)
      local bits
      for _, loads in ipairs { 1, 3, 8, 16 } do
        plan.reduce_loads = loads
        local got = tune.layer_norm_backward(D, R, plan)
        assert.are.equal(plan.form, got.form)
        assert.are.equal(loads, got.reduce_loads)
        local _, dw, db = lumus.layer_norm_backward(DY, X, m, r, W)
        local b = dw:to_bytes() .. db:to_bytes()
        bits = bits or b
        assert.are.equal(bits, b, ("%dx%d %s, %d loads"):format(R, D, plan.form, loads))
      end
      assert.are.equal(8, tune.layer_norm_backward(D, R, { form = "auto" }).reduce_loads)
    end
  end)

  it("writes dx in place over dy or x (the split form forced: planned without it; the quad form in place), reads views, returns only dx without weight", function()
    for _, form in ipairs { "auto", "split", "quad" } do
      tune.layer_norm_backward(4, nil, { form = form, wg = form == "split" and 32 or nil })
      local rng = ref.rng(21)
      local d = form == "quad" and 13 or 12
      local x = ref.random_table({ 6, d }, function() return rng.normal() end)
      local dy = ref.random_table({ 6, d }, function() return rng.normal() end)
      local X = lumus.tensor(x)
      local _, m, r = lumus.layer_norm_forward(X)
      local rdx = ref.layer_norm_backward(dy, x, m:to_table(), r:to_table())
      local DY = lumus.tensor(dy)
      assert.are.equal(1, select("#", lumus.layer_norm_backward(DY, X, m, r)))
      assert.are.equal(DY, DY:layer_norm_backward(X, m, r, nil, { out = DY }))
      checks.close(DY, rdx, { mixed = 2e-5, what = "dx over dy" })
      local X2 = lumus.copy(X)
      lumus.layer_norm_backward(lumus.tensor(dy), X2, m, r, nil, { out = X2 })
      checks.close(X2, rdx, { mixed = 2e-5, what = "dx over x" })
      -- a transposed dy is read through a contiguous copy
      local DYT = lumus.tensor(dy):transpose(1, 2):contiguous():transpose(1, 2)
      assert.is_false(DYT:is_contiguous())
      checks.close(lumus.layer_norm_backward(DYT, X, m, r), rdx, { mixed = 2e-5, what = "dx from a view" })
    end
  end)

  it("frees its scratch once the work is done", function()
    for _, form in ipairs { "fused", "columns", "rows", "split", "quad" } do
      local d = form == "quad" and 41 or 40
      local X = lumus.ones({ 64, d })
      local W = lumus.ones({ d })
      local _, m, r = lumus.layer_norm_forward(X, W)
      local dx, dw, db = lumus.zeros({ 64, d }), lumus.zeros({ d }), lumus.zeros({ d })
      tune.layer_norm_backward(4, nil, { form = form })
      assert.are.equal(form, tune.layer_norm_backward(d, 64).form)
      -- settled: garbage of earlier specs must not be collected inside the measurement
      local _, before = checks.settle()
      for _ = 1, 5 do lumus.layer_norm_backward(X, X, m, r, W, { out = dx, dweight = dw, dbias = db }) end
      local _, after = checks.settle()
      assert.are.equal(before, after, form)
    end
  end)

  it("raises clear errors", function()
    local X, DY = lumus.ones({ 4, 8 }), lumus.ones({ 4, 8 })
    local W = lumus.ones({ 8 })
    local _, m, r = lumus.layer_norm_forward(X, W)
    local f = lumus.layer_norm_backward
    checks.errors(f, "#1 to 'lumus.layer_norm_backward' %(dy must have x's shape 4x8, got 4x7", lumus.ones({ 4, 7 }), X, m, r, W)
    checks.errors(f, "#3.*mean must have shape 4 ", DY, X, lumus.ones({ 8 }), r, W)
    checks.errors(f, "#4.*invstd must have shape 4 ", DY, X, m, lumus.ones({ 4, 1 }), W)
    checks.errors(f, "#5.*weight must have shape %[8%]", DY, X, m, r, lumus.ones({ 7 }))
    checks.errors(f, "#2.*tensor expected", DY, 5, m, r, W)
    checks.errors(f, "unknown option 'dx'", DY, X, m, r, W, { dx = lumus.ones({ 4, 8 }) })
    checks.errors(f, "dweight given without weight", DY, X, m, r, nil, { dweight = lumus.ones({ 8 }) })
    checks.errors(f, "dbias must have shape 8, got 4", DY, X, m, r, W, { dbias = lumus.ones({ 4 }) })
    checks.errors(f, "dweight overlaps weight", DY, X, m, r, W, { dweight = W })
    local B = lumus.ones({ 32 })
    checks.errors(f, "out overlaps mean", DY, X, B:narrow(1, 1, 4), r, W, { out = B:view({ 4, 8 }) })
    local gone = lumus.ones({ 4, 8 })
    gone:free()
    checks.errors(f, "#1.*freed", gone, X, m, r, W)
    checks.errors(tune.layer_norm_backward, "form must be \"auto\", \"fused\", \"columns\", \"rows\", \"split\" or \"quad\", got \"parts\"", 8, nil, { form = "parts" })
    checks.errors(tune.layer_norm_backward, "wg must be a multiple of 32 in 32..1024", 8, nil, { wg = 48 })
    checks.errors(tune.layer_norm_backward, "reduce_loads must be in 0..16", 8, nil, { reduce_loads = 17 })
    checks.errors(tune.layer_norm_backward, "reduce must be \"auto\", \"fold\" or \"dispatch\", got \"tree\"", 8, nil, { reduce = "tree" })
  end)
end)
