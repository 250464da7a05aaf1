-- lumus.layer_norm_forward against the float64 reference (lua/lumus/reference.lua).
--
-- Tolerances. Inputs are rounded to float32 before the reference sees them (the
-- reference is fed exactly what the tensor holds), so the only error left is the
-- kernel's float32 arithmetic:
--   y       relative L2 error <= 1e-5, and |y - ref| <= 1e-4 * max(1, |ref|) per element
--   mean    |mean - ref| <= 1e-5 * max(1, |ref|) (times the data's scale when it is > 1)
--   invstd  |invstd / ref - 1| <= 1e-4
-- Rows with a large common offset (1e4 + N(0, 1) noise) are held to the same y bound,
-- i.e. max abs error <= 1e-4 for y ~ N(0, 1). A float32 mean of such a row is itself
-- only good to ~5e-4 (half an ulp at 1e4), so a kernel that used it uncorrected would
-- be at ~1e-3; lumus's corrected two-pass statistics reach ~1e-6, and E[x^2] - E[x]^2
-- would be off by O(1).
--
-- Outputs are poisoned with NaN (lumus.full(shape, 0/0)) and passed through the
-- `out`/`mean`/`invstd` options, so an element the kernel fails to write fails the
-- comparison; the default-allocation path (no options) is checked too.
--
-- Large inputs (70,000 rows, rows past maxComputeWorkGroupCount, tensors past
-- maxStorageBufferRange) are compared in full where the reference is cheap (D = 5)
-- and on a deterministic sample of rows otherwise; each test says which.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local Y_REL_L2, Y_MAX, MEAN_MAX, INVSTD_REL = 1e-5, 1e-4, 1e-5, 1e-4
local NAN = 0 / 0

-- Shape of mean and invstd for an x of this shape ({1} for a 1-D x).
local function stat_shape(shape)
  local s = {}
  for i = 1, #shape - 1 do s[i] = shape[i] end
  if #s == 0 then s[1] = 1 end
  return s
end

-- |got - want| <= max_rel_abs * max(1, |want|) per element; returns the statistics.
local function check(got, want, what, max_rel_abs)
  return checks.close(got, want, { mixed = max_rel_abs, what = what })
end

-- Checks y, mean and invstd (tables) against the reference's.
local function check_all(y, m, r, wy, wm, wr, what, scale)
  local cy = check(y, wy, what .. " y", Y_MAX)
  assert(cy.rel_l2 <= Y_REL_L2, ("%s y: relative L2 error %.3g > %.3g"):format(what, cy.rel_l2, Y_REL_L2))
  check(m, wm, what .. " mean", MEAN_MAX * math.max(1, scale or 1))
  checks.close(r, wr, { rel = INVSTD_REL, what = what .. " invstd" })
  return cy
end

-- Runs one case on the GPU and against the reference. opts:
--   seed, offset, scale (x = offset + scale * N(0, 1)), weight, bias (booleans), eps
--   default_alloc: also run without options and check those outputs
local function run_case(shape, opts)
  opts = opts or {}
  local rng = ref.rng(opts.seed or 1)
  local offset, scale = opts.offset or 0, opts.scale or 1
  local xt = ref.random_table(shape, function() return offset + scale * rng.normal() end)
  local d = shape[#shape]
  local wt = opts.weight and ref.random_table({ d }, function() return 1 + 0.5 * rng.normal() end) or nil
  local bt = opts.bias and ref.random_table({ d }, function() return rng.normal() end) or nil
  local eps = opts.eps            -- nil: the default, 1e-5, on both sides
  local x = lumus.tensor(xt)
  local w = wt and lumus.tensor(wt) or nil
  local b = bt and lumus.tensor(bt) or nil
  local y = lumus.full(shape, NAN)
  local m = lumus.full(stat_shape(shape), NAN)
  local r = lumus.full(stat_shape(shape), NAN)
  local ry, rm, rr = lumus.layer_norm_forward(x, w, b, eps, { out = y, mean = m, invstd = r })
  assert.are.equal(y, ry); assert.are.equal(m, rm); assert.are.equal(r, rr)
  local wy, wm, wr = ref.layer_norm_forward(xt, wt, bt, eps)
  local what = ("shape %s"):format(table.concat(shape, "x"))
  local cy = check_all(y:to_table(), m:to_table(), r:to_table(), wy, wm, wr, what, scale)
  if opts.default_alloc then
    local y2, m2, r2 = lumus.layer_norm_forward(x, w, b, eps)
    assert.are.same(shape, y2:shape())
    assert.are.same(stat_shape(shape), m2:shape())
    assert.are.same(stat_shape(shape), r2:shape())
    check_all(y2:to_table(), m2:to_table(), r2:to_table(), wy, wm, wr, what .. " (allocated)", scale)
    for _, t in ipairs { y2, m2, r2 } do t:free() end
  end
  for _, t in ipairs { x, w, b, y, m, r } do t:free() end
  return cy
end

-- Runs f with the layer_norm form for rows of D forced through the internal tuning
-- hook (tune: e.g. { form = "group" }, { stream = true, wg = 32 }), restoring the
-- automatic choice afterwards. Returns false when the hook is absent.
local function with_form(d, tune, f)
  local config = lumus.tune.layer_norm
  if not config then return false end
  config(d, tune)
  local ok, err = pcall(f)
  config(d, {})
  if not ok then error(err, 0) end
  return true
end

local function with_stream_variant(d, f, wg)
  return with_form(d, { stream = true, wg = wg }, f)
end

---------------------------------------------------------------------------------------
-- Large inputs without large Lua tables: x is a periodic sequence of float32 values
-- with a prime period, built with string.rep, so rows (and rows a grid or buffer
-- boundary apart) differ, and any element's value is known without a table of all.

local PERIOD = 65521   -- prime: no row length or power of two is a multiple of it

-- Returns the bytes of `numel` floats and value(k) for 0-based flat index k.
local function periodic_input(numel, seed, f)
  local g = ref.rng(seed)
  f = f or g.normal
  local vals = {}
  for i = 1, PERIOD do vals[i] = ref.f32(f()) end
  local base = compat.pack_bytes("f32", vals)
  local bytes = base:rep(math.floor(numel / PERIOD)) .. base:sub(1, 4 * (numel % PERIOD))
  return bytes, function(k) return vals[k % PERIOD + 1] end
end

-- n float32 values of tensor t from 1-based element `first`.
local read_floats = checks.floats

-- Sorted, distinct 0-based row indices: the given ones (clamped) plus `extra`
-- deterministic pseudo-random ones.
local function sample_rows(rows, given, extra, seed)
  local set, list = {}, {}
  local g = ref.rng(seed)
  for _, k in ipairs(given) do
    if k >= 0 and k < rows then set[k] = true end
  end
  for _ = 1, extra do set[math.floor(g() * rows)] = true end
  for k in pairs(set) do list[#list + 1] = k end
  table.sort(list)
  return list
end

-- Runs layer_norm_forward (poisoned outputs, weight and bias) on a periodic x of
-- {rows, d} and checks the sampled rows against the reference.
local function run_large(rows, d, sample, seed)
  local bytes, value = periodic_input(rows * d, seed)
  local x = lumus.from_bytes(bytes, { rows, d })
  bytes = nil
  local g = ref.rng(seed + 1)
  local wt = ref.random_table({ d }, function() return 1 + 0.5 * g.normal() end)
  local bt = ref.random_table({ d }, g)
  local w, b = lumus.tensor(wt), lumus.tensor(bt)
  local y = lumus.full({ rows, d }, NAN)
  local m, r = lumus.full({ rows }, NAN), lumus.full({ rows }, NAN)
  lumus.layer_norm_forward(x, w, b, 1e-5, { out = y, mean = m, invstd = r })
  x:free()                           -- recorded work keeps its inputs alive
  for _, k in ipairs(sample) do
    local xr = {}
    for j = 1, d do xr[j] = value(k * d + j - 1) end
    local wy, wm, wr = ref.layer_norm_forward(xr, wt, bt, 1e-5)
    check_all(read_floats(y, k * d + 1, d), read_floats(m, k + 1, 1), read_floats(r, k + 1, 1),
      wy, wm, wr, ("%dx%d row %d"):format(rows, d, k))
  end
  for _, t in ipairs { w, b, y, m, r } do t:free() end
end

-- Workgroups the device can launch in one grid dimension.
local function grid_limit()
  local c = lumus.device().max_workgroup_count
  return c.x or c[1]
end

---------------------------------------------------------------------------------------

describe("layer_norm_forward", function()
  local sweep = {
    { 1, 64 }, { 3, 64 }, { 4, 64 }, { 5, 48 }, { 63, 33 }, { 64, 32 }, { 65, 31 }, { 127, 17 },
    { 768, 16 }, { 1000, 9 }, { 1024, 8 }, { 4097, 4 }, { 8192, 3 }, { 65536, 2 }, { 65537, 2 },
  }
  -- second pass over the sweep: no weight and/or no bias, other eps, other seeds
  local variants = {
    { weight = false, bias = false, eps = 1e-3 },
    { weight = false, bias = true, eps = 0.1 },
    { weight = true, bias = false },           -- default eps
  }
  for i, case in ipairs(sweep) do
    local d, rows = case[1], case[2]
    it(("matches the reference for D = %d (%d rows, weight and bias, eps 1e-5)"):format(d, rows), function()
      run_case({ rows, d }, { seed = i, weight = true, bias = true, eps = 1e-5 })
    end)
    local v = variants[i % #variants + 1]
    it(("matches the reference for D = %d (%d rows, %s weight, %s bias, eps %s, both output paths)")
      :format(d, rows, v.weight and "with" or "no", v.bias and "with" or "no", v.eps or "default"), function()
      run_case({ rows, d }, { seed = 100 + i, weight = v.weight, bias = v.bias, eps = v.eps,
                              offset = (i % 5) - 2, scale = 0.5 + (i % 3), default_alloc = true })
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
      run_case({ 3, 1024 }, { seed = 35 + k, eps = eps, bias = true, scale = 3 })
    end
  end)

  it("handles 1-D, 3-D, 4-D and 8-D inputs", function()
    run_case({ 300 }, { seed = 41, weight = true, bias = true, default_alloc = true })
    run_case({ 1 }, { seed = 44, default_alloc = true })
    run_case({ 2, 3, 64 }, { seed = 42, weight = true, bias = true, default_alloc = true })
    run_case({ 2, 2, 3, 20 }, { seed = 43, bias = true, default_alloc = true })
    run_case({ 3, 5, 2, 129 }, { seed = 45, weight = true, eps = 1e-3 })
    run_case({ 1, 2, 1, 3, 1, 2, 2, 7 }, { seed = 46, weight = true, bias = true, default_alloc = true })
  end)

  it("keeps float32 accuracy for rows with a large common offset (1e4 + noise of std 1)", function()
    -- y ~ N(0,1): the Y_MAX bound is a max abs error of 1e-4; the kernel reaches ~1e-6.
    local c = run_case({ 8, 4096 }, { seed = 51, offset = 1e4, weight = true, bias = true })
    assert(c.max_abs < 1e-4, "offset rows: max abs error " .. c.max_abs)
    for k, shape in ipairs { { 40, 5 }, { 16, 768 }, { 3, 4097 }, { 2, 65536 }, { 2, 65537 } } do
      c = run_case(shape, { seed = 52 + k, offset = 1e4 })
      assert(c.max_abs < 1e-4, "offset rows: max abs error " .. c.max_abs)
    end
    run_case({ 40, 48 }, { seed = 59, offset = -3e4 })
  end)

  -- The automatic choice differs by device (a CPU gets the row form, a GPU the group,
  -- subgroup, split or streaming form), so every form is forced here in turn.
  it("matches with each form forced: group, subgroup, row", function()
    if not lumus.tune.layer_norm then pending("no lumus.tune.layer_norm hook"); return end
    for _, form in ipairs { "group", "subgroup", "row" } do
      for k, d in ipairs { 1, 3, 4, 5, 64, 130, 1000, 4097 } do
        with_form(d, { form = form }, function()
          local got = lumus.tune.layer_norm(d).variant
          if form ~= "subgroup" then assert.are.equal(form, got) end
          run_case({ 5, d }, { seed = 130 + k, weight = k % 2 == 0, bias = true, default_alloc = k == 3 })
          run_case({ 3, d }, { seed = 140 + k, offset = 1e4 })
        end)
      end
    end
  end)

  it("matches with the streaming variant forced, for short rows too", function()
    local ran = with_stream_variant(1, function() end)
    if not ran then pending("no lumus.tune.layer_norm hook"); return end
    for k, d in ipairs { 1, 3, 4, 5, 64, 1000, 4097 } do
      with_stream_variant(d, function()
        run_case({ 7, d }, { seed = 60 + k, weight = k % 2 == 0, bias = true, default_alloc = true })
        run_case({ 3, d }, { seed = 70 + k, offset = 1e4 })
      end)
    end
  end)

  -- The split form (several workgroups per row) is the default only on GPUs for rows
  -- too long for one workgroup; here it is forced through the tuning hook. On a CPU
  -- device partners may not run at once, so both ways of finishing are checked: the
  -- exchange of the parts' statistics, and the fallback (spin_limit = 0) in which a
  -- part that finds a partner missing reads the whole row itself. Both record
  -- protocols are checked: 64-bit tagged words (the default where the device has 64-bit
  -- buffer atomics, as lavapipe does) and 32-bit words behind fences.
  it("matches with the split form forced (parts exchanging statistics, and the fallback)", function()
    local config = lumus.tune.layer_norm
    if not config then pending("no lumus.tune.layer_norm hook"); return end
    local cases = {
      { d = 4096, parts = 2 }, { d = 4100, parts = 3 }, { d = 4099, parts = 2 },
      { d = 64, parts = 4, wg = 32 }, { d = 7, parts = 2, wg = 32 }, { d = 1001, parts = 5 },
    }
    local protocols = {}
    for k, case in ipairs(cases) do
      for _, spin in ipairs { -1, 0 } do
        for _, records in ipairs { "tagged", "fenced" } do
          local c = config(case.d, { parts = case.parts, wg = case.wg, spin_limit = spin, records = records })
          protocols[c.records] = true
          local ok, err = pcall(function()
            assert.are.equal("split", c.variant)
            assert.are.equal(math.min(case.parts, c.vectors), c.parts)
            if records == "fenced" then assert.are.equal("fenced", c.records) end
            run_case({ 3, case.d }, { seed = 90 + k, weight = true, bias = k % 2 == 0, default_alloc = spin == 0 })
            run_case({ 2, case.d }, { seed = 100 + k, offset = 1e4 })
          end)
          config(case.d, {})
          if not ok then
            error(("d = %d, parts = %d, spin_limit = %d, records = %s: %s"):format(case.d, case.parts, spin, c.records, err), 0)
          end
        end
      end
    end
    assert.is_true(protocols.fenced)
    if lumus.device().int64_atomics then assert.is_true(protocols.tagged) end
  end)

  -- The split form's scratch belongs to the context and outlives each call: records are
  -- tagged with a per-call epoch and tickets run on from call to call. Calls queued
  -- back to back (no synchronize between them) with different row counts, forms and
  -- protocols must each be right, across growth of the scratch and the epoch's wrap.
  it("keeps its split scratch from call to call (epochs, tickets, growth, wrap)", function()
    local config = lumus.tune.layer_norm
    if not config then pending("no lumus.tune.layer_norm hook"); return end
    lumus.empty_cache()   -- the scratch as a fresh process has it (earlier specs may have grown it)
    local g = ref.rng(160)
    local steps = {
      { 2, 4096, { parts = 2 } }, { 5, 4096, { parts = 2 } }, { 1, 1001, { parts = 5 } },
      { 9, 4100, { parts = 3, records = "fenced" } }, { 4, 4096, { parts = 2, tickets = false } },
      { 3, 4096, { parts = 4, spin_limit = 0 } }, { 12, 64, { parts = 4, wg = 32 } },
      { 2, 4099, { parts = 2 } }, { 7, 4096, { parts = 4, classes = 2 } },
      { 5, 1001, { parts = 6, classes = 3 } }, { 3, 4096, { parts = 4, classes = 4 } },
      { 6, 4099, { parts = 2, classes = 2, records = "fenced" } }, { 4, 4096, { parts = 2, classes = 2, tickets = false } },
    }
    local function run_steps(label)
      local pending_checks = {}
      for k, st in ipairs(steps) do
        local rows, d, tune = st[1], st[2], st[3]
        config(d, tune)
        local xt = ref.random_table({ rows, d }, function() return 3 + g.normal() end)
        local y = lumus.full({ rows, d }, NAN)
        lumus.layer_norm_forward(lumus.tensor(xt), nil, nil, 1e-5, { out = y })
        config(d, {})
        pending_checks[k] = { y, xt }
      end
      for k, c in ipairs(pending_checks) do
        local err = ref.compare(c[1]:to_table(), ref.layer_norm_forward(c[2])).max_abs
        assert(err < 1e-4, ("%s, step %d: max abs error %g"):format(label, k, err))
      end
    end
    run_steps("first pass")
    local m = lumus.memory()
    assert(m.internal > 0 and m.internal <= m.in_use, "the scratch counts as internal memory")
    local small = m.internal
    -- More rows than the scratch has records for: it grows (and is zeroed again).
    steps[#steps + 1] = { 300, 4096, { parts = 8, wg = 32 } }
    run_steps("after growth")
    assert(lumus.memory().internal > small, "the scratch grew")
    -- Close to the 32-bit epoch's end: it is zeroed and starts again rather than wrap.
    config(4096, { epoch = 0xfffffffd })
    assert.are.equal(0xfffffffd, config(4096).epoch)
    run_steps("across the epoch's wrap")
    assert(config(4096).epoch < #steps + 2, "the epoch started again")
    local ok, err = pcall(config, 4096, { epoch = 1 })
    assert.is_false(ok)
    assert.matches("epoch must be in", err, 1, true)
  end)

  -- SM classes: a workgroup takes its (row, part) jobs from a counter of its
  -- multiprocessor's class, moving on to the next class when its own has none left;
  -- lavapipe has no SM ids, so a forced class count runs on stand-in ids. Every job
  -- must be taken exactly once (rows past the first few would stay NaN otherwise), and
  -- the counters must be back at zero for the next call.
  it("matches with SM classes forced (jobs taken by class, counters reset per call)", function()
    local config = lumus.tune.layer_norm
    if not config then pending("no lumus.tune.layer_norm hook"); return end
    for k, case in ipairs {
      { d = 4096, parts = 4, classes = 2 }, { d = 4096, parts = 8, classes = 4, wg = 32 },
      { d = 4099, parts = 6, classes = 3 }, { d = 1000, parts = 4, classes = 4 },
      { d = 64, parts = 4, classes = 13, wg = 32 }, { d = 4096, parts = 5, classes = 2 },
    } do
      local c = config(case.d, { parts = case.parts, classes = case.classes, wg = case.wg })
      local ok, err = pcall(function()
        assert.are.equal("split", c.variant)
        -- As many classes as divide the parts (5 parts and 2 classes: none, so 1).
        local want = case.classes
        while case.parts % want ~= 0 do want = want - 1 end
        assert.are.equal(want, c.classes)
        for rep = 1, 2 do
          run_case({ 5, case.d }, { seed = 170 + 2 * k + rep, weight = true, bias = true })
          run_case({ 2, case.d }, { seed = 190 + k, offset = 1e4 })
        end
      end)
      config(case.d, {})
      if not ok then error(("d = %d, parts = %d, classes = %d: %s"):format(case.d, case.parts, case.classes, err), 0) end
    end
    if lumus.device().sm_count == 0 then
      assert.are.equal(1, config(65536, { form = "split" }).classes)   -- automatic: only with SM ids
      config(65536, {})
    end
    local ok, err = pcall(config, 1000, { classes = 14 })
    assert.is_false(ok)
    assert.matches("classes must be in 0..13", err, 1, true)
  end)

  it("counts the split form's tickets and fallbacks in its scratch (tuning hook)", function()
    local config = lumus.tune.layer_norm
    if not config then pending("no lumus.tune.layer_norm hook"); return end
    collectgarbage(); lumus.synchronize()
    local before = lumus.memory().in_use
    config(4096, { parts = 2, spin_limit = 0, return_scratch = true })
    local ok, err = pcall(function()
      local x = lumus.full({ 5, 4096 }, 1.5)
      local y, m, r, scratch = lumus.layer_norm_forward(x)
      assert.are.same({ 16 * (5 * 2 + 1) }, scratch:shape())
      local tickets, fallbacks = compat.unpack(compat.unpack_bytes("u32", scratch:to_bytes(1, 2), 1, 2))
      assert.are.equal(10, tickets)                       -- one per workgroup
      assert.is_true(fallbacks <= 10)
      -- spin_limit = 0: the first part of a row to run never waits, so unless both
      -- parts of a row ran at once, at least one of them read the whole row itself.
      assert.is_true(fallbacks >= 1)
      for _, t in ipairs { x, y, m, r, scratch } do t:free() end
    end)
    config(4096, {})
    if not ok then error(err, 0) end
    lumus.synchronize(); collectgarbage()
    assert.are.equal(before, lumus.memory().in_use)
  end)

  it("does not use the split form in place (out = x), where its fallback could read y", function()
    local config = lumus.tune.layer_norm
    if not config then pending("no lumus.tune.layer_norm hook"); return end
    config(1000, { parts = 2, spin_limit = 0 })
    local ok, err = pcall(function()
      local rng = ref.rng(120)
      local xt = ref.random_table({ 4, 1000 }, function() return rng.normal() end)
      local x = lumus.tensor(xt)
      lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = x })
      local wy = ref.layer_norm_forward(xt)
      check(x:to_table(), wy, "in place with parts = 2", Y_MAX)
    end)
    config(1000, {})
    if not ok then error(err, 0) end
  end)

  it("refuses bad split tuning values", function()
    local config = lumus.tune.layer_norm
    if not config then pending("no lumus.tune.layer_norm hook"); return end
    local ok, err = pcall(config, 1000, { parts = 129 })
    assert.is_false(ok)
    assert.matches("parts must be in 0..128", err, 1, true)
    ok, err = pcall(config, 1000, { spin_limit = 60000 })
    assert.is_false(ok)
    assert.matches("spin_limit must be in 0..50000", err, 1, true)
    ok, err = pcall(config, 1000, { records = "plain" })
    assert.is_false(ok)
    assert.matches('records must be "tagged" or "fenced", got "plain"', err, 1, true)
    config(1000, {})
  end)

  it("normalizes 70,000 short rows, comparing every row (past maxComputeWorkGroupCount[0] on lavapipe)", function()
    local rows, d = 70000, 5
    local rng = ref.rng(61)
    local parts = {}
    local flat = {}
    for i = 1, rows * d do
      local v = ref.f32(rng.normal() + (i % 7))
      flat[i] = v
      parts[i] = compat.pack_bytes("f32", { v })
    end
    local x = lumus.from_bytes(table.concat(parts), { rows, d })
    local y = lumus.full({ rows, d }, NAN)
    local m = lumus.full({ rows }, NAN)
    local r = lumus.full({ rows }, NAN)
    lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = y, mean = m, invstd = r })
    local yb, mb, rb = y:to_bytes(), m:to_bytes(), r:to_bytes()
    for row = 1, rows do
      local xr = {}
      for j = 1, d do xr[j] = flat[(row - 1) * d + j] end
      local wy, wm, wr = ref.layer_norm_forward(xr)
      local gm = compat.unpack_bytes("f32", mb, (row - 1) * 4 + 1, 1)[1]
      local gr = compat.unpack_bytes("f32", rb, (row - 1) * 4 + 1, 1)[1]
      assert(math.abs(gm - wm[1]) <= MEAN_MAX * (1 + math.abs(wm[1])), "mean of row " .. row)
      assert(math.abs(gr / wr[1] - 1) <= INVSTD_REL, "invstd of row " .. row)
      for j = 1, d do
        local gy = compat.unpack_bytes("f32", yb, ((row - 1) * d + j - 1) * 4 + 1, 1)[1]
        assert(math.abs(gy - wy[j]) <= Y_MAX * (1 + math.abs(wy[j])), ("y[%d][%d] = %s, want %s"):format(row, j, gy, wy[j]))
      end
    end
  end)

  it("covers rows past maxComputeWorkGroupCount[0] in every variant (sampled rows)", function()
    local gx = grid_limit()
    if gx > 2 ^ 22 then
      pending(("the grid limit (%d) is too large to exceed cheaply"):format(gx))
      return
    end
    local config = lumus.tune.layer_norm
    -- short rows (a subgroup per row, many rows per workgroup), vec4 and scalar; rows
    -- of a workgroup each, vec4 and scalar; the streaming form (forced, when possible)
    local cases = {
      { d = 4, form = "subgroup" }, { d = 5, form = "subgroup" }, { d = 256, form = "group" },
      { d = 65, form = "group" }, { d = 8, stream = true }, { d = 7, stream = true },
      { d = 4, form = "row" }, { d = 5 },
    }
    for k, case in ipairs(cases) do
      local function go()
        local per_group = config and config(case.d).rows_per_group or 1
        local rows = (gx + 3) * per_group
        local edge = gx * per_group               -- first row of the second grid row
        run_large(rows, case.d, sample_rows(rows,
          { 0, 1, per_group - 1, per_group, edge - 1, edge, edge + 1, edge + per_group, rows - 2, rows - 1 },
          20, 200 + k), 300 + k)
      end
      if case.stream then
        -- small workgroups: 65,538 workgroups of the default 1024 take ~40 s on lavapipe
        if config then with_stream_variant(case.d, go, 32) end
      elseif case.form then
        if config then with_form(case.d, { form = case.form }, go) end
      else
        go()
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
    -- and through a view of x, with weight and bias, for a vec4 row length
    local x2t = ref.random_table({ 4, 256 }, rng.normal)
    local wt, bt = ref.random_table({ 256 }, rng), ref.random_table({ 256 }, rng)
    local x2 = lumus.tensor(x2t)
    local v = x2:reshape({ 2, 2, 256 })
    lumus.layer_norm_forward(v, lumus.tensor(wt), lumus.tensor(bt), 1e-5, { out = v })
    check(x2:to_table(), (ref.layer_norm_forward(x2t, wt, bt)), "in-place view y", Y_MAX)
  end)

  it("allocates only the outputs not given", function()
    local rng = ref.rng(72)
    local xt = ref.random_table({ 5, 33 }, rng)
    local x = lumus.tensor(xt)
    local y = lumus.full({ 5, 33 }, NAN)
    local ry, m, r = lumus.layer_norm_forward(x, nil, nil, nil, { out = y })
    assert.are.equal(y, ry)
    assert.are.same({ 5 }, m:shape())
    local wy, wm, wr = ref.layer_norm_forward(xt)
    check_all(y:to_table(), m:to_table(), r:to_table(), wy, wm, wr, "out only")
    local m2 = lumus.full({ 5 }, NAN)
    local y3, rm2, r3 = lumus.layer_norm_forward(x, nil, nil, nil, { mean = m2 })
    assert.are.equal(m2, rm2)
    check_all(y3:to_table(), m2:to_table(), r3:to_table(), wy, wm, wr, "mean only")
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

  it("reads inputs freed right after the call (the recorded work keeps them alive)", function()
    local rng = ref.rng(73)
    local xt, wt = ref.random_table({ 16, 300 }, rng), ref.random_table({ 300 }, rng)
    local x, w = lumus.tensor(xt), lumus.tensor(wt)
    local y, m, r = lumus.layer_norm_forward(x, w)
    x:free(); w:free()
    local wy, wm, wr = ref.layer_norm_forward(xt, wt)
    check_all(y:to_table(), m:to_table(), r:to_table(), wy, wm, wr, "freed inputs")
  end)

  it("handles tensors larger than maxStorageBufferRange", function()
    local range = lumus.device().max_storage_buffer_range
    local d = 1024
    local rows = math.floor(range / (4 * d)) + 64                 -- just past the range
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
    for k = 0, rows - 1 do parts[k + 1] = string.rep(compat.pack_bytes("f32", row_values(k), 4), math.floor(d / 4)) end
    local x = lumus.from_bytes(table.concat(parts), { rows, d })
    parts = nil
    local y, m = lumus.layer_norm_forward(x)
    for _, k in ipairs { 0, math.floor(rows / 2), rows - 2, rows - 1 } do
      local v = row_values(k)
      local xr = {}
      for j = 1, d do xr[j] = v[(j - 1) % 4 + 1] end
      local wy, wm = ref.layer_norm_forward(xr)
      local got = compat.unpack_bytes("f32", y:to_bytes(k * d + 1, d), 1, d)
      got[d + 1] = nil
      check(got, wy, "y row " .. k, Y_MAX)
      assert.is_true(math.abs(compat.unpack_bytes("f32", m:to_bytes(k + 1, 1), 1, 1)[1] - wm[1]) < 1e-4)
    end
    x:free(); y:free()
  end)

  it("handles long rows (the streaming form) in a tensor larger than maxStorageBufferRange (sampled rows)", function()
    local range = lumus.device().max_storage_buffer_range
    local d = 2 ^ 18 + 3                               -- scalar loads, streaming form
    local rows = math.floor(range / (4 * d)) + 2
    if rows * d * 4 > 600 * 2 ^ 20 then
      pending("maxStorageBufferRange is too large to exceed cheaply on this device")
      return
    end
    -- row `past` straddles the range's end, row `past + 1` lies wholly beyond it
    local past = math.floor(range / (4 * d))
    run_large(rows, d, sample_rows(rows, { past, past + 1 }, 0, 1), 400)
  end)

  it("handles rows of 163,840 x 256 (160 MiB, past maxStorageBufferRange and the grid limit; sampled rows)", function()
    local rows, d = 163840, 256
    local range = lumus.device().max_storage_buffer_range
    local past = math.floor(range / (4 * d))
    run_large(rows, d, sample_rows(rows, { 0, 65534, 65535, 65536, past - 1, past, past + 1, rows - 1 }, 40, 2), 500)
  end)
end)

describe("layer_norm_forward errors", function()
  local x = lumus.ones({ 2, 4 })
  local function err_of(...) return checks.error_of(lumus.layer_norm_forward, ...) end
  local function expect(pattern, ...)
    local e = checks.errors(lumus.layer_norm_forward, pattern, ...)
    assert(e:find("layer_norm_forward", 1, true), "message does not name the function: " .. e)
  end

  it("rejects a non-tensor x", function()
    expect("#1.*tensor expected", nil)
    expect("#1.*tensor expected", { 1, 2 })
    expect("#1.*tensor expected", "x")
    expect("#1.*tensor expected", io.stdout)         -- other userdata
  end)
  it("names the function when called with an ordinary call too", function()
    local ok, e = pcall(function() return lumus.layer_norm_forward({ { 1, 2 } }) end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to '[%w.]*layer_norm_forward' %(tensor expected", e)
  end)
  it("rejects weight and bias of the wrong shape or type", function()
    expect("#2.*weight must have shape %[4%]", x, lumus.ones({ 3 }))
    expect("#2.*weight", x, lumus.ones({ 1, 4 }))
    expect("#3.*bias must have shape %[4%]", x, nil, lumus.ones({ 5 }))
    expect("#3.*bias", x, nil, lumus.ones({ 2, 2 }))
    expect("#2.*tensor expected", x, 3)
    expect("#2.*tensor expected", x, { 1, 1, 1, 1 })
    expect("#3.*tensor expected", x, nil, { 0, 0, 0, 0 })
  end)
  it("rejects bad eps", function()
    -- (eps = 0 is accepted, as in PyTorch; spec/layer_norm_args_spec.lua)
    expect("#4.*eps must be a finite number >= 0", x, nil, nil, -1e-5)
    expect("#4.*eps must be a finite number >= 0", x, nil, nil, 0 / 0)
    expect("#4.*eps must be a finite number >= 0", x, nil, nil, math.huge)
    expect("#4.*eps must be a number, got string", x, nil, nil, "1e-5")
    expect("#4.*eps", x, nil, nil, {})
    expect("#4.*eps", x, nil, nil, true)
    expect("#4.*too small", x, nil, nil, 1e-60)
  end)
  it("rejects freed tensors", function()
    local f = lumus.ones({ 2, 4 }); f:free()
    expect("#1.*tensor has been freed", f)
    local w = lumus.ones({ 4 }); w:free()
    expect("#2.*tensor has been freed", x, w)
    local b = lumus.ones({ 4 }); b:free()
    expect("#3.*tensor has been freed", x, nil, b)
    local o = lumus.ones({ 2, 4 }); o:free()
    expect("#5.*out: tensor has been freed", x, nil, nil, nil, { out = o })
    local m = lumus.ones({ 2 }); m:free()
    expect("#5.*mean.*tensor has been freed", x, nil, nil, nil, { mean = m })
    -- x freed through a view's original: the view itself still works
    local base = lumus.ones({ 8 })
    local view = base:reshape({ 2, 4 })
    base:free()
    assert.are.same({ 2, 4 }, lumus.layer_norm_forward(view):shape())
  end)
  it("rejects outputs of the wrong shape", function()
    expect("#5.*out must have shape 2x4, got 4x2", x, nil, nil, nil, { out = lumus.empty({ 4, 2 }) })
    expect("#5.*out", x, nil, nil, nil, { out = lumus.empty({ 2, 5 }) })
    expect("#5.*mean must have shape 2, got 3", x, nil, nil, nil, { mean = lumus.empty({ 3 }) })
    expect("#5.*mean", x, nil, nil, nil, { mean = lumus.empty({ 2, 4 }) })
    expect("#5.*invstd must have shape 2", x, nil, nil, nil, { invstd = lumus.empty({ 2, 1 }) })
    expect("#5.*out must be a tensor", x, nil, nil, nil, { out = {} })
    expect("#5.*mean", x, nil, nil, nil, { mean = 3 })
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
    -- mean aliasing x through a view of an x with D = 1, in the general "overlap or
    -- alias" form the contract leaves open
    local x4 = lumus.ones({ 4, 1 })
    local e = err_of(x4, nil, nil, nil, { mean = x4:reshape({ 4 }) })
    assert.is_truthy(e:find("overlap") or e:find("alias"), e)
    assert.is_truthy(e:find("mean"), e)
  end)
  it("leaves the outputs untouched when the arguments are rejected", function()
    local y = lumus.full({ 2, 4 }, 7)
    err_of(x, nil, nil, -1, { out = y })
    assert.are.same({ { 7, 7, 7, 7 }, { 7, 7, 7, 7 } }, y:to_table())
  end)
end)
