-- lumus.matmul and lumus.linear against the float64 reference (lua/lumus/reference.lua).
--
-- Tolerance. Inputs are float32 values (ref.random_table rounds them), so the reference
-- sees exactly what the GPU sees and only the kernel's float32 arithmetic differs. A sum
-- of K products in float32 (with or without FMA, in any order) is within
-- K * 2^-24 * sum_k |a_ik| |b_kj| of the exact value (the classical gamma_K bound, to
-- first order), so every element is checked against
--   |c - ref| <= 2 * K * 2^-24 * (|a| |b|)_ij + 2^-23 * |bias_j|
-- where (|a| |b|) is the reference product of the absolute values. The bound cannot
-- flake, and an element computed from a wrong entry of a or b, or not written at all
-- (outputs are NaN-poisoned and passed as opts.out), is off by O(1) and fails it. The
-- typical error is far smaller: the relative L2 error is also held to 1e-6 (seen ~1e-7).
--
-- Tile shapes: lavapipe's automatic choice is the 64x64 tile for most of these sizes, so
-- every built-in tile (and two unusual ones) is also forced through the internal tuning
-- hook lumus.tune.matmul, on sizes that are and are not multiples of the tile.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local U = 2 ^ -24
local REL_L2 = 1e-6
local NAN = 0 / 0

local function abs_table(t)
  if type(t) == "number" then return math.abs(t) end
  local out = {}
  for i = 1, #t do out[i] = abs_table(t[i]) end
  return out
end

-- Checks tensor `got` against the reference of the product of tables at and bt
-- (opts: transpose_b, bias as a list). Returns the comparison.
local function check(got, at, bt, opts, what)
  opts = opts or {}
  local want = ref.matmul(at, bt, opts)
  assert.are.same(ref.shape(want), got:shape())
  local scale = ref.flatten(ref.matmul(abs_table(at), abs_table(bt), { transpose_b = opts.transpose_b }))
  local as = ref.shape(at)
  local k = as[#as]
  local bias = opts.bias
  local bounds = {}
  for i = 1, #scale do
    local bterm = bias and 2 * U * math.abs(bias[(i - 1) % #bias + 1]) or 0
    bounds[i] = 2 * k * U * scale[i] + bterm
  end
  return checks.close(got, want, { abs = bounds, rel_l2 = REL_L2, what = what })
end

local function concat(t) return table.concat(t, "x") end

-- Result shape of matmul for these operand shapes (as the README states it).
local function product_shape(as, bs, trans)
  local s = {}
  for i = 1, #as do s[i] = as[i] end
  s[#s] = trans and bs[#bs - 1] or bs[#bs]
  return s
end

-- a b (+ bias) into out (nil: a new tensor): matmul takes no bias, so a bias goes through
-- linear's epilogue where linear computes the product (b [N, K], 2-D), else is added.
local function product(a, b, bias, trans, out)
  if bias and trans and #b:shape() == 2 then return lumus.linear(a, b, bias, { out = out }) end
  local r = lumus.matmul(a, b, { out = out, transpose_b = trans })
  if bias then lumus.add(r, bias, { out = r }) end
  return r
end

-- One product: random a (shape as) and b (shape bs), optional bias of length nb;
-- computed into a NaN-poisoned out, and (when `fresh`) without out as well.
local function run_case(as, bs, opts)
  opts = opts or {}
  local rng = ref.rng(opts.seed or 7)
  local at = ref.random_table(as, rng)
  local bt = ref.random_table(bs, rng)
  local trans = opts.transpose_b
  local shape = product_shape(as, bs, trans)
  local biast = opts.bias and ref.random_table({ shape[#shape] }, rng) or nil
  local a, b = lumus.tensor(at), lumus.tensor(bt)
  local bias = biast and lumus.tensor(biast) or nil
  local out = lumus.full(shape, NAN)
  local r = product(a, b, bias, trans, out)
  assert.are.equal(out, r)
  local what = ("%s x %s%s%s"):format(concat(as), concat(bs), trans and " (b transposed)" or "",
                                     bias and " + bias" or "")
  local c = check(out, at, bt, { transpose_b = trans, bias = biast }, what)
  if opts.fresh then
    local r2 = product(a, b, bias, trans)
    check(r2, at, bt, { transpose_b = trans, bias = biast }, what .. " (allocated)")
    r2:free()
  end
  for _, t in ipairs { a, b, bias, out } do t:free() end
  return c
end

-- Runs f with the matmul tile forced to `tile` ({bm, bn, bk, tm, tn}), then restores
-- the automatic choice.
local function with_tile(tile, f)
  lumus.tune.matmul(1, 1, 1, { bm = tile[1], bn = tile[2], bk = tile[3], tm = tile[4], tn = tile[5] })
  local ok, err = pcall(f)
  lumus.tune.matmul(1, 1, 1, {})
  if not ok then error(err, 0) end
end

describe("matmul", function()
  for _, s in ipairs {
    { 1, 1, 1 }, { 3, 5, 7 }, { 33, 65, 17 }, { 64, 64, 64 }, { 130, 8, 132 }, { 5, 1000, 3 },
    { 4, 1000, 8 }, { 1, 37, 1 }, { 100, 1, 36 },
  } do
    local m, k, n = s[1], s[2], s[3]
    it(("matches the reference for M x K x N = %dx%dx%d"):format(m, k, n), function()
      run_case({ m, k }, { k, n }, { fresh = true })
    end)
  end

  it("treats a's leading dimensions as rows ([..., K] x [K, N] -> [..., N]), 1-D a too", function()
    run_case({ 2, 3, 7, 12 }, { 12, 5 })
    run_case({ 3, 5, 8 }, { 8, 16 }, { bias = true })
    run_case({ 9 }, { 9, 4 }, { fresh = true })
    run_case({ 8 }, { 4, 8 }, { transpose_b = true })
  end)

  it("reads b transposed ([..., K] x [N, K]^T) without a separate pass", function()
    run_case({ 33, 17 }, { 65, 17 }, { transpose_b = true, fresh = true })
    run_case({ 36, 20 }, { 44, 20 }, { transpose_b = true })            -- vec4 path
    run_case({ 130, 9 }, { 66, 9 }, { transpose_b = true, bias = true })
  end)

  it("adds a bias [N] in the same dispatch", function()
    run_case({ 33, 17 }, { 17, 65 }, { bias = true, fresh = true })
    run_case({ 32, 16 }, { 16, 64 }, { bias = true })                   -- vec4 path
  end)

  it("multiplies batches ([B..., M, K] x [B..., K, N])", function()
    run_case({ 2, 3, 33, 17 }, { 2, 3, 17, 65 }, { fresh = true })
    run_case({ 3, 16, 12 }, { 3, 12, 8 }, { bias = true })             -- vec4 path
    run_case({ 3, 33, 17 }, { 3, 65, 17 }, { transpose_b = true, bias = true })
  end)

  it("is correct with every built-in tile and unusual ones forced, on sizes that are and are not tile multiples", function()
    for _, tile in ipairs {
      { 128, 128, 8, 8, 8 }, { 128, 64, 8, 8, 8 }, { 64, 64, 8, 8, 8 }, { 32, 32, 8, 4, 4 },
      { 32, 64, 16, 4, 8 }, { 64, 32, 8, 8, 4 },
    } do
      with_tile(tile, function()
        local t = concat(tile)
        run_case({ 130, 20 }, { 20, 132 }, { seed = 1 })                              -- vec4, edges
        run_case({ 70, 37 }, { 37, 45 }, { seed = 2, bias = true })                   -- scalar
        run_case({ 2, 65, 19 }, { 2, 33, 19 }, { seed = 3, transpose_b = true })      -- batched, transposed
        local cfg = lumus.tune.matmul(130, 132, 20)
        assert.are.same(tile, { cfg.bm, cfg.bn, cfg.bk, cfg.tm, cfg.tn }, t)
      end)
    end
    local cfg = lumus.tune.matmul(4096, 4096, 4096)
    assert.is_true(cfg.bm >= 32 and cfg.workgroup >= 1)              -- automatic again
  end)

  it("is correct with the K order rotated by tile row (the GPU default), partial K steps included", function()
    for _, tile in ipairs { { 32, 32, 8, 4, 4 }, { 64, 64, 8, 8, 8 }, { 128, 64, 8, 8, 8 } } do
      lumus.tune.matmul(1, 1, 1, { bm = tile[1], bn = tile[2], bk = tile[3], tm = tile[4], tn = tile[5], rotate = true })
      local ok, err = pcall(function()
        assert.is_true(lumus.tune.matmul(300, 40, 44).rotate)
        run_case({ 300, 44 }, { 44, 40 }, { seed = 4, bias = true })                  -- vec4, 6 K steps
        run_case({ 270, 37 }, { 37, 45 }, { seed = 5 })                               -- scalar, partial step
        run_case({ 2, 130, 20 }, { 2, 33, 20 }, { seed = 6, transpose_b = true })     -- batched, transposed
        run_case({ 200, 3 }, { 3, 8 }, { seed = 8 })                                  -- one K step
      end)
      lumus.tune.matmul(1, 1, 1, {})
      if not ok then error(err, 0) end
    end
    assert.are.equal(lumus.device().kind ~= "cpu", lumus.tune.matmul(8, 8, 8).rotate)   -- automatic again
  end)

  it("folds a grid past maxComputeWorkGroupCount[0] (70,000 batched 1x1 products)", function()
    local count = 70000
    local g = ref.rng(11)
    local av, bv = {}, {}
    for i = 1, count do av[i] = ref.f32(g.normal()); bv[i] = ref.f32(g.normal()) end
    local a = lumus.tensor(av):reshape({ count, 1, 1 })
    local b = lumus.tensor(bv):reshape({ count, 1, 1 })
    local c = lumus.matmul(a, b)
    assert.are.same({ count, 1, 1 }, c:shape())
    local got = ref.flatten(c:to_table())
    for i = 1, count do
      local want = av[i] * bv[i]
      assert(math.abs(got[i] - want) <= U * math.abs(want), ("batch %d: %.9g vs %.9g"):format(i, got[i], want))
    end
  end)

  it("keeps inputs alive when they are freed right after the call", function()
    local rng = ref.rng(5)
    local at, bt = ref.random_table({ 20, 12 }, rng), ref.random_table({ 12, 24 }, rng)
    local a, b = lumus.tensor(at), lumus.tensor(bt)
    local c = lumus.matmul(a, b)
    a:free(); b:free()
    check(c, at, bt, {}, "freed inputs")
  end)

  it("returns device memory in use to its starting value", function()
    collectgarbage(); collectgarbage(); lumus.synchronize()
    local start = lumus.memory().in_use
    local a, b, bias = lumus.ones({ 40, 24 }), lumus.ones({ 24, 36 }), lumus.ones({ 36 })
    local out = lumus.empty({ 40, 36 })
    for _ = 1, 10 do
      local c = lumus.matmul(a, b)
      lumus.add(c, bias, { out = c })
      c:free()
      lumus.matmul(a, b, { out = out })
    end
    local w = lumus.ones({ 8, 24 })
    local y = lumus.linear(a, w)
    assert.are.same({ 40, 8 }, y:shape())
    assert.is_true(lumus.memory().in_use > start)
    for _, t in ipairs { a, b, bias, out, w, y } do t:free() end
    lumus.synchronize()
    assert.are.equal(start, lumus.memory().in_use)
  end)
end)

describe("linear", function()
  -- x [..., in], weight [out, in] (torch layout), bias [out] or nil.
  local function run_linear(xs, out_f, with_bias, seed)
    local rng = ref.rng(seed or 9)
    local xt = ref.random_table(xs, rng)
    local wt = ref.random_table({ out_f, xs[#xs] }, rng)
    local bt = with_bias and ref.random_table({ out_f }, rng) or nil
    local x, w = lumus.tensor(xt), lumus.tensor(wt)
    local b = bt and lumus.tensor(bt) or nil
    local shape = {}
    for i = 1, #xs do shape[i] = xs[i] end
    shape[#shape] = out_f
    local out = lumus.full(shape, NAN)
    assert.are.equal(out, lumus.linear(x, w, b, { out = out }))
    local what = ("linear %s -> %d%s"):format(concat(xs), out_f, bt and " + bias" or "")
    local want = ref.linear(xt, wt, bt)
    local c = check(out, xt, wt, { transpose_b = true, bias = bt }, what)
    assert.are.same(ref.shape(want), out:shape())
    local y = lumus.linear(x, w, b)
    check(y, xt, wt, { transpose_b = true, bias = bt }, what .. " (allocated)")
    for _, t in ipairs { x, w, b, out, y } do t:free() end
    return c
  end

  it("matches reference.linear (x W^T + b), with and without bias", function()
    run_linear({ 4, 7, 33 }, 17, true)
    run_linear({ 4, 7, 33 }, 17, false)
    run_linear({ 64, 48 }, 96, true)        -- vec4 path
    run_linear({ 5 }, 3, true)              -- a single input vector
    run_linear({ 1, 1 }, 1, false)
  end)

  it("agrees with reference.matmul on b transposed plus bias", function()
    local rng = ref.rng(4)
    local xt, wt, bt = ref.random_table({ 3, 4 }, rng), ref.random_table({ 2, 4 }, rng), ref.random_table({ 2 }, rng)
    local a = ref.flatten(ref.linear(xt, wt, bt))
    local b = ref.flatten(ref.matmul(xt, wt, { transpose_b = true, bias = bt }))
    assert.are.same(b, a)
    -- and by hand: y[1][1] = x[1] . w[1] + b[1]
    local s = bt[1]
    for i = 1, 4 do s = s + xt[1][i] * wt[1][i] end
    assert.are.equal(s, a[1])
  end)
end)

describe("matmul and linear errors", function()
  local a, b = lumus.ones({ 3, 5 }), lumus.ones({ 5, 7 })
  local function expect(fn, pattern, ...)
    local e = checks.errors(lumus[fn], pattern, ...)
    assert(e:find(fn, 1, true), "message does not name the function: " .. e)
  end

  it("rejects mismatched K, naming both shapes", function()
    expect("matmul", "#2.*b's first dimension must be K = 5 %(the last dimension of a, shape 3x5%), got shape 4x7",
           a, lumus.ones({ 4, 7 }))
    expect("matmul", "#2.*b's last dimension must be K = 5 .*got shape 7x4 %(transpose_b%)",
           a, lumus.ones({ 7, 4 }), { transpose_b = true })
    expect("matmul", "#2.*K = 1 .*shape 1%), got shape 2x1", lumus.ones({ 1 }), lumus.ones({ 2, 1 }))
  end)
  it("rejects a 1-D b of the wrong length and batch dimensions that do not broadcast", function()
    expect("matmul", "#2.*b's length must be K = 5 %(the last dimension of a, shape 3x5%), got shape 4", a, lumus.ones({ 4 }))
    expect("matmul", "#2.*batch dimensions of b %(shape 3x5x7%) and a %(shape 2x4x5%) do not broadcast: 3 against 2 in batch dimension 1",
           lumus.ones({ 2, 4, 5 }), lumus.ones({ 3, 5, 7 }))
  end)
  it("rejects a bias option (linear takes the bias), bad options and a wrong out", function()
    expect("matmul", "#3.*unknown option 'bias'", a, b, { bias = lumus.ones({ 7 }) })
    expect("matmul", "#3.*transpose_b must be a boolean, got number", a, b, { transpose_b = 1 })
    expect("matmul", "#3.*options table expected", a, b, 5)
    expect("matmul", "#3.*out must have shape 3x7, got 7x3", a, b, { out = lumus.empty({ 7, 3 }) })
    expect("matmul", "#3.*out overlaps a", a, lumus.ones({ 5, 5 }), { out = a })
    local sq = lumus.ones({ 5, 5 })
    expect("matmul", "#3.*out overlaps b", lumus.ones({ 5, 5 }), sq, { out = sq:reshape({ 5, 5 }) })
    local o = lumus.empty({ 1, 10 })
    expect("linear", "#4.*out overlaps bias", lumus.ones({ 1, 5 }), lumus.ones({ 10, 5 }), o:reshape({ 10 }), { out = o })
  end)
  it("rejects non-tensors and freed tensors", function()
    expect("matmul", "#1.*tensor expected", { { 1 } }, b)
    expect("matmul", "#2.*tensor expected", a, "b")
    local f = lumus.ones({ 5, 7 }); f:free()
    expect("matmul", "#2.*tensor has been freed", a, f)
  end)
  it("checks linear's weight and bias against x", function()
    local x = lumus.ones({ 4, 6 })
    expect("linear", "#2.*weight must have shape %[out_features, 6%] %(in_features = 6, the last dimension of x, shape 4x6%), got 6x3",
           x, lumus.ones({ 6, 3 }))
    expect("linear", "#2.*weight must have shape %[out_features, 6%].*got 6", x, lumus.ones({ 6 }))
    expect("linear", "#3.*bias must have shape %[3%] %(out_features, the first dimension of weight%), got 6",
           x, lumus.ones({ 3, 6 }), lumus.ones({ 6 }))
    expect("linear", "#4.*out must have shape 4x3, got 4x6", x, lumus.ones({ 3, 6 }), nil, { out = lumus.empty({ 4, 6 }) })
    expect("linear", "#4.*out overlaps x", x, lumus.ones({ 6, 6 }), nil, { out = x })
    expect("linear", "#3.*tensor expected", x, lumus.ones({ 3, 6 }), { 1, 2, 3 })
  end)
  it("rejects impossible tuning requests", function()
    local ok, e = pcall(lumus.tune.matmul, 8, 8, 8, { bm = 64, bn = 64, bk = 8, tm = 3, tn = 4 })
    assert.is_false(ok)
    assert.matches("tm and tn must be", e)
    ok, e = pcall(lumus.tune.matmul, 8, 8, 8, { bm = 64 })
    assert.is_false(ok)
    assert.matches("give all of bm, bn, bk, tm, tn", e)
    ok, e = pcall(lumus.tune.matmul, 8, 8, 8, { bm = 512, bn = 512, bk = 64, tm = 16, tn = 16 })
    assert.is_false(ok)
    assert.matches("shared memory", e)
  end)
end)

describe("matmul under LUMUS_VALIDATION=1", function()
  -- (a tile's sixth entry: the row thread order with the tile as specialization constants;
  -- the script goes to the shell on one line, so it holds no comment)
  it("records every tile, both load widths, transposed, bias and batches with no validation message", function()
    local script = [[
      local lumus = require "lumus"
      assert(lumus.device().validation, "validation layer not enabled")
      for _, t in ipairs { { 128, 128, 8, 8, 8 }, { 128, 64, 8, 8, 8 }, { 64, 64, 8, 8, 8 }, { 32, 32, 8, 4, 4 },
                           { 128, 64, 8, 8, 8, "row" }, {} } do
        lumus.tune.matmul(1, 1, 1, { bm = t[1], bn = t[2], bk = t[3], tm = t[4], tn = t[5], rotate = t[1] == 64 or nil,
                                     order = t[6], builtin = t[6] == nil })
        for _, s in ipairs { { 33, 17, 65 }, { 32, 16, 64 } } do
          local m, k, n = s[1], s[2], s[3]
          local a = lumus.ones({ 2, m, k })
          lumus.matmul(a, lumus.ones({ 2, k, n })):to_table()
          lumus.matmul(a, lumus.ones({ n, k }), { transpose_b = true }):to_bytes()
          lumus.linear(a, lumus.ones({ n, k }), lumus.zeros({ n })):to_bytes()
        end
      end
      print("messages", lumus.tune.validation_messages())
    ]]
    local cmd = ("LUMUS_VALIDATION=1 LUA_PATH=%q LUA_CPATH=%q " .. LUA .. " -e %q 2>&1; echo rc=$?"):format(package.path, package.cpath, script)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()   -- (5.1 and LuaJIT give no exit status here: the shell echoes it)
    local ok = out:match("rc=(%d+)%s*$") == "0"
    out = out:gsub("rc=%d+%s*$", "")
    if out:find("VK_LAYER_KHRONOS_validation is not installed", 1, true) then
      pending("validation layer not installed (vulkan-validationlayers)")
      return
    end
    assert.is_true(ok, out)
    assert.matches("messages\t0", out)
    assert.is_nil(out:find("validation:", 1, true), out)
  end)
end)
