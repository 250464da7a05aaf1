-- layer_norm_forward's and tune.layer_norm's arguments: eps within float32, strict raw
-- options tables, and messages that name the function however it is called.
local lumus = require "lumus"
local ref = require "lumus.reference"
local compat = require "lumus.compat"
local checks = dofile("spec/support/check.lua")

local FLT_MAX = (2 - 2 ^ -23) * 2 ^ 127

local function expect(pattern, ...)
  local e = checks.errors(lumus.layer_norm_forward, pattern, ...)
  assert(e:find("lumus.layer_norm_forward", 1, true), "message does not name lumus.layer_norm_forward: " .. e)
  return e
end

describe("layer_norm_forward eps", function()
  local xt = ref.random_table({ 3, 8 }, ref.rng(7))
  local x = lumus.tensor(xt)

  it("raises for eps beyond float32 (which made every output NaN), NaN, infinities and negatives", function()
    for _, eps in ipairs { 1e39, FLT_MAX * (1 + 2 ^ -30), 2 ^ 128, 1e300, math.huge, -math.huge, 0 / 0, -1e-5,
                           -FLT_MAX, compat.mininteger } do
      expect("bad argument #4 to 'lumus%.layer_norm_forward' %(eps must be a finite number >= 0 that float32 holds",
             x, nil, nil, eps)
    end
  end)

  it("names the value it got and the bound", function()
    local e = expect("#4.*eps", x, nil, nil, 1e39)
    assert.matches("at most 3%.40282346638", e)
    assert.matches("got 1e%+39", e)
  end)

  it("raises for a positive eps that float32 rounds to 0, and for non-numbers", function()
    expect("#4.*eps is too small to be represented as float32", x, nil, nil, 1e-60)
    expect("#4.*eps must be a number, got string", x, nil, nil, "1e-5")
    expect("#4.*eps must be a number, got table", x, nil, nil, {})
    expect("#4.*eps must be a number, got boolean", x, nil, nil, false)
  end)

  it("accepts the largest float32 and matches the reference there", function()
    local y, m, r = lumus.layer_norm_forward(x, nil, nil, FLT_MAX)
    local wy, wm, wr = ref.layer_norm_forward(xt, nil, nil, FLT_MAX)
    checks.close(y, wy, { rel = 1e-5, abs = 1e-30, what = "y" })
    checks.close(m, wm, { mixed = 1e-6, what = "mean" })
    checks.close(r, wr, { rel = 1e-5, what = "invstd" })
  end)

  it("accepts eps = 0 and -0 (PyTorch does) and matches the reference on non-constant rows", function()
    -- the reference refuses eps = 0; 1e-300 is 0 to float64 beside these variances
    local wy, wm, wr = ref.layer_norm_forward(xt, nil, nil, 1e-300)
    for _, eps in ipairs { 0, compat.negative_zero, 0.0 } do
      local y, m, r = lumus.layer_norm_forward(x, nil, nil, eps)
      checks.close(y, wy, { mixed = 1e-5, what = "y" })
      checks.close(m, wm, { mixed = 1e-6, what = "mean" })
      checks.close(r, wr, { rel = 1e-5, what = "invstd" })
    end
  end)

  it("accepts small eps that float32 keeps (subnormal included) and integers", function()
    local wy = ref.layer_norm_forward(xt, nil, nil, 1)
    checks.close(lumus.layer_norm_forward(x, nil, nil, 1), wy, { mixed = 1e-5 })
    local sy = ref.layer_norm_forward(xt, nil, nil, 1e-40)
    checks.close(lumus.layer_norm_forward(x, nil, nil, 1e-40), sy, { mixed = 1e-5 })
  end)
end)

describe("layer_norm_forward options", function()
  local x = lumus.ones({ 2, 4 })

  it("raises for an unknown option, naming it and the known ones", function()
    expect("#5.*unknown option 'output' %(known: out, mean, invstd%)", x, nil, nil, nil, { output = lumus.empty({ 2, 4 }) })
    expect("#5.*unknown option 'eps'", x, nil, nil, nil, { eps = 1e-3 })
    expect("#5.*unknown option: a number key", x, nil, nil, nil, { lumus.empty({ 2, 4 }) })
    expect("#5.*options table expected, got number", x, nil, nil, nil, 7)
  end)

  it("reads options raw: a metatable is never consulted", function()
    local y = lumus.empty({ 2, 4 })
    local opts = setmetatable({}, { __index = function() error("read through __index") end })
    local got = lumus.layer_norm_forward(x, nil, nil, nil, opts)
    assert.are_not.equal(y, got)
    local proxied = setmetatable({}, { __index = { out = y } })
    assert.are_not.equal(y, (lumus.layer_norm_forward(x, nil, nil, nil, proxied)))
    local y2, m2, r2 = lumus.layer_norm_forward(x, nil, nil, nil, { out = y, mean = lumus.empty({ 2 }),
                                                                    invstd = lumus.empty({ 2 }) })
    assert.are.equal(y, y2)
    assert.are.same({ 2 }, m2:shape()); assert.are.same({ 2 }, r2:shape())
  end)

  it("names the function through pcall and by the call site's name otherwise", function()
    local e = expect("#2.*weight must have shape %[4%]", x, lumus.ones({ 3 }))
    assert.matches("^bad argument #2 to 'lumus%.layer_norm_forward'", e)
    local ok, e2 = pcall(function() local v = lumus.layer_norm_forward(x, nil, nil, 1e39) return v end)
    assert.is_false(ok)
    assert.matches("bad argument #4 to '[%w.]*layer_norm_forward' %(eps must be", e2)
    local w = lumus.ones({ 4 })
    expect("#5.*out overlaps weight %(they alias", lumus.ones({ 1, 4 }), w, nil, nil, { out = w:reshape({ 1, 4 }) })
  end)
end)

describe("tune.layer_norm options", function()
  local config = lumus.tune.layer_norm
  after_each(function() config(1, {}) end)

  local function expect_tune(pattern, ...)
    local e = checks.errors(config, pattern, ...)
    assert(e:find("lumus.tune.layer_norm", 1, true), "message does not name lumus.tune.layer_norm: " .. e)
    return e
  end

  it("takes every key that bench/ and spec/ pass", function()
    local before = config(4096)
    for _, t in ipairs {
      { form = "split", wg = 64, items_target = 4, parts = 2, spin_limit = 100, tickets = false,
        records = "fenced", classes = 2, return_scratch = false },
      { stream = true, wg = 32 }, { subgroup_items = 8 }, { form = "row" }, { form = "group" },
      { form = "subgroup" }, { form = "stream" }, { form = "auto" }, { epoch = before.epoch },
      { records = "tagged", tickets = true, stream = false },
      { form = "split2", pipelined = false, lag = 5 }, { form = "split2", lag = 100 },
      { shifted_params = true }, { shifted_params = false }, { split2_items = 6 }, { masked_aligned = true },
    } do
      assert.is_table(config(4096, t))
      config(4096, {})
    end
    local c = config(4096, { parts = 2, wg = 64 })
    assert.are.equal("split", c.variant)
    assert.are.equal(2, c.parts)
  end)

  it("raises for unknown keys and bad values, naming the key, and changes nothing", function()
    local before = config(3000)
    for _, bad in ipairs {
      { { item_target = 4 }, "unknown option 'item_target' %(known: form, stream, wg," },
      { { bias = true }, "unknown option 'bias'" },
      { { 4 }, "unknown option: a number key" },
      { { form = "tiled" }, 'form must be "auto", "group", "subgroup", "stream", "split", "row", "tile" or "split2", got "tiled"' },
      { { form = 3 }, "form must be .* got number" },
      { { tickets = 0 }, "tickets must be a boolean, got number" },
      { { stream = 1 }, "stream must be a boolean, got number" },
      { { return_scratch = "yes" }, "return_scratch must be a boolean, got string" },
      { { records = true }, "records must be \"tagged\" or \"fenced\", got boolean" },
      { { parts = 129 }, "parts must be in 0..128 %(0: automatic%), got 129" },
      { { classes = 14 }, "classes must be in 0..13 .* got 14" },
      { { spin_limit = -2 }, "spin_limit must be in 0..50000, got %-2" },
      { { wg = 48 }, "wg must be a power of two up to 1024 %(0: default%), got 48" },
      { { epoch = 2 ^ 32 }, "epoch must be in %d+..2%^32%-1" },
      { { wg = 64, parts = "2" }, "parts must be an integer, got string" },
      { { lag = -1 }, "lag must be in 0..1048576 %(0: automatic%), got %-1" },
      { { lag = 2 ^ 21 }, "lag must be in 0..1048576 %(0: automatic%), got 2097152" },
      { { pipelined = 1 }, "pipelined must be a boolean, got number" },
      { { shifted_params = "yes" }, "shifted_params must be a boolean, got string" },
      { { split2_items = 17 }, "split2_items must be in 0..16 %(0: default%), got 17" },
      { { masked_aligned = 1 }, "masked_aligned must be a boolean, got number" },
    } do
      expect_tune("bad argument #2 to 'lumus%.tune%.layer_norm' %(" .. bad[2], 3000, bad[1])
      assert.are.same(before, config(3000))
    end
    expect_tune("bad argument #2 .*options table expected, got number", 3000, 5)
    expect_tune("bad argument #1 .*D must be in 1%.%.2%^31%-1, got 0", 0)
    expect_tune("bad argument #1 .*number has no integer representation", 1.5)
  end)

  it("reads the tune table raw", function()
    local before = config(4096)
    local t = setmetatable({}, { __index = function(_, k) if k == "form" then return "split" end error("read " .. k) end })
    assert.are.same(before, config(4096, t))
  end)
end)
