-- lumus.matmul and lumus.linear on a seeded random sweep of shapes, through every kernel
-- path, in float32, float16 and bfloat16, against the float64 reference.
--
-- Paths are forced with the internal hook lumus.tune.matmul(M, N, K, {path=, split=}):
-- "gemv" (the small-M kernel, M <= 64 in blocks of 16 rows, both B layouts, with the K
-- split forced to 1, 2, 8 and automatic), "tiled" (the register-blocked kernel) and "auto".
--
-- Tolerance, per element: inputs are exactly representable in the tested dtype (they are
-- read back after conversion), so only the kernel's float32 accumulation and the final
-- rounding to the output dtype differ from the float64 reference:
--   |c - ref| <= 2 * K * 2^-24 * (|a| |b|)_ij + 2^-23 * |bias_j| + h * |ref_ij|
-- with h = 0 for float32, 2^-11 (half an ulp) for float16 and 2^-8 for bfloat16 (plus
-- the smallest float16 subnormal step for float16). A wrong or missing element is off
-- by O(1) and fails it (outputs are NaN-poisoned where out= is passed).
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local SEED = 20261203
local U = 2 ^ -24
local HALF = { float32 = 0, float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }

local function abs_table(t)
  if type(t) == "number" then return math.abs(t) end
  local out = {}
  for i = 1, #t do out[i] = abs_table(t[i]) end
  return out
end

-- A tensor of dtype holding the random table, and the table of its exact values.
local function operand(shape, gen, dtype)
  local t = lumus.tensor(ref.random_table(shape, gen))
  if dtype ~= "float32" then t = t:to(dtype) end
  local exact = dtype == "float32" and t:to_table() or t:to("float32"):to_table()
  return t, exact
end

-- The table with its last two dimensions swapped (the reference has no transpose_a).
local function transposed(t)
  if type(t[1][1]) == "table" then
    local out = {}
    for i = 1, #t do out[i] = transposed(t[i]) end
    return out
  end
  local out = {}
  for j = 1, #t[1] do
    out[j] = {}
    for i = 1, #t do out[j][i] = t[i][j] end
  end
  return out
end

local function check(got, at, bt, opts, dtype, what)
  if opts.transpose_a then at = transposed(at) end
  local ro = { transpose_b = opts.transpose_b, bias = opts.bias }
  local want = ref.matmul(at, bt, ro)
  local scale = ref.flatten(ref.matmul(abs_table(at), abs_table(bt), { transpose_b = opts.transpose_b }))
  local flat_want = ref.flatten(want)
  local as = ref.shape(at)
  local k = as[#as]
  local h = HALF[dtype]
  local bounds = {}
  for i = 1, #scale do
    local bterm = opts.bias and 2 * U * math.abs(opts.bias[(i - 1) % #opts.bias + 1]) or 0
    bounds[i] = (2 * k * U * scale[i] + bterm) * (1 + h) + h * math.abs(flat_want[i]) * 1.001
    if dtype == "float16" then bounds[i] = bounds[i] + 2 ^ -25 end
  end
  if dtype ~= "float32" then
    assert.are.equal(dtype, got:dtype())
    got = got:to("float32")
  end
  return checks.close(got, want, { abs = bounds, what = what })
end

local function force(path, split)
  lumus.tune.matmul(1, 1, 1, { path = path, split = split })
end

local function reset() lumus.tune.matmul(1, 1, 1, {}) end

-- Sizes: 1, primes, 17, 33, 65, 127, multiples of 4 and not.
local POOL = { 1, 2, 3, 4, 5, 7, 8, 12, 13, 16, 17, 31, 32, 33, 47, 64, 65, 96, 127, 128, 130 }
local SMALL_M = { 1, 2, 3, 4, 5, 7, 8, 9, 13, 16 }

describe("matmul shape sweep (seed " .. SEED .. ")", function()
  local g = ref.rng(SEED)
  local function pick(list) return list[math.floor(g.uniform() * #list) + 1] end
  after_each(reset)

  describe("the small-M path", function()
    for _, split in ipairs { 0, 1, 2, 8 } do
      for case = 1, 6 do
        local m, k, n = pick(SMALL_M), pick(POOL), pick(POOL)
        local tb = case % 2 == 0
        it(("M=%d K=%d N=%d transpose_b=%s split=%d"):format(m, k, n, tostring(tb), split), function()
          force("gemv", split)
          assert.is_true(lumus.tune.matmul(m, n, k).gemv)
          local a, at = operand({ m, k }, g, "float32")
          local b, bt = operand(tb and { n, k } or { k, n }, g, "float32")
          local out = lumus.full({ m, n }, 0 / 0)
          check(lumus.matmul(a, b, { transpose_b = tb, out = out }), at, bt, { transpose_b = tb }, "float32", "matmul")
          local w, wt = operand({ n, k }, g, "float32")
          local bias = ref.random_table({ n }, g)
          check(lumus.linear(a, w, lumus.tensor(bias)), at, wt, { transpose_b = true, bias = bias }, "float32", "linear")
        end)
      end
    end

    for _, m in ipairs { 17, 33, 64 } do
      it(("M=%d in blocks of 16 rows, both layouts, float32 and bfloat16"):format(m), function()
        force("gemv")
        assert.is_true(lumus.tune.matmul(m, 20, 36).gemv)
        for _, dtype in ipairs { "float32", "bfloat16" } do
          for _, tb in ipairs { false, true } do
            local k, n = pick(POOL), pick(POOL)
            local a, at = operand({ m, k }, g, dtype)
            local b, bt = operand(tb and { n, k } or { k, n }, g, dtype)
            check(lumus.matmul(a, b, { transpose_b = tb }), at, bt, { transpose_b = tb }, dtype,
                  ("%s K=%d N=%d transpose_b=%s"):format(dtype, k, n, tostring(tb)))
          end
        end
      end)
    end

    it("reads a row-strided a and a narrowed b in place", function()
      force("gemv")
      local big, bigt = operand({ 5, 40 }, g, "float32")
      local a = big:narrow(2, 3, 33)      -- rows 40 apart, 33 columns
      local at = {}
      for i = 1, 5 do at[i] = {} for j = 1, 33 do at[i][j] = bigt[i][j + 2] end end
      local bb, bbt = operand({ 33, 20 }, g, "float32")
      local b = bb:narrow(2, 5, 9)
      local bt = {}
      for i = 1, 33 do bt[i] = {} for j = 1, 9 do bt[i][j] = bbt[i][j + 4] end end
      check(lumus.matmul(a, b), at, bt, {}, "float32", "strided")
    end)

    it("handles M = 1 from a 1-D a and a batched a over one b", function()
      force("gemv")
      local a, at = operand({ 17 }, g, "float32")
      local b, bt = operand({ 17, 9 }, g, "float32")
      check(lumus.matmul(a, b), at, bt, {}, "float32", "vector")
      local a3, a3t = operand({ 2, 3, 13 }, g, "float32")   -- 6 rows: one product
      local b2, b2t = operand({ 13, 7 }, g, "float32")
      check(lumus.matmul(a3, b2), a3t, b2t, {}, "float32", "stacked rows")
    end)
  end)

  describe("the tiled path", function()
    for case = 1, 10 do
      local m, k, n = pick(POOL), pick(POOL), pick(POOL)
      local tb, ta = case % 2 == 0, case % 3 == 0
      it(("M=%d K=%d N=%d transpose_a=%s transpose_b=%s"):format(m, k, n, tostring(ta), tostring(tb)), function()
        force("tiled")
        local a, at = operand(ta and { k, m } or { m, k }, g, "float32")
        local b, bt = operand(tb and { n, k } or { k, n }, g, "float32")
        local opts = { transpose_a = ta, transpose_b = tb }
        check(lumus.matmul(a, b, opts), at, bt, opts, "float32", "matmul")
      end)
    end

    -- b read transposed (linear's weight) through a [K, N] copy of it: automatic for large
    -- aligned products on a GPU (src/ops/matmul.c, b_copy_wanted), forced here.
    it("runs b read transposed through a copy of b, strided b, a bias and a split included", function()
      local function case(m, k, n, opts)
        lumus.tune.matmul(1, 1, 1, { copy_b = true, path = "tiled", split = opts.split })
        local a, at = operand({ m, k }, g, "float32")
        local bt, btt
        if opts.narrow then   -- rows of b 5 elements longer than K: ldb ~= K
          local wide, widet = operand({ n, k + 5 }, g, "float32")
          bt = wide:narrow(2, 3, k)
          btt = {}
          for i = 1, n do btt[i] = {} for j = 1, k do btt[i][j] = widet[i][j + 2] end end
        else
          bt, btt = operand({ n, k }, g, "float32")
        end
        local what = ("%dx%dx%d%s"):format(m, k, n, opts.narrow and " strided" or "")
        check(lumus.matmul(a, bt, { transpose_b = true }), at, btt, { transpose_b = true }, "float32", what)
        if not opts.narrow then
          local bias = ref.random_table({ n }, g)
          check(lumus.linear(a, bt, lumus.tensor(bias)), at, btt, { transpose_b = true, bias = bias }, "float32",
                what .. " linear")
        end
      end
      local function held() local m = lumus.memory() return m.in_use - m.internal end   -- (the split's kept scratch aside)
      collectgarbage(); collectgarbage()
      lumus.synchronize()
      local before = held()
      case(64, 32, 64, {})
      case(37, 19, 23, {})
      case(20, 33, 17, { narrow = true })
      case(33, 2048, 20, { split = 4 })
      reset()
      collectgarbage(); collectgarbage()
      lumus.synchronize()
      assert.are.equal(before, held(), "the copies of b go back")
    end)

    -- The float32 tiles with compiled-in variants (src/ops/matmul.c, BUILTIN_TILES).
    local COMPILED_IN = { ["128x128x8x8x8"] = true, ["128x64x8x8x8"] = true, ["64x64x8x8x8"] = true,
                          ["128x64x16x8x8"] = true, ["64x64x16x8x8"] = true }
    -- Each tile compiled in (float32) and given through specialization constants, in
    -- both thread orders: odd sizes (scalar loads, partial tiles and K steps), sizes of
    -- whole vec4s, each transpose, a bias and a batch.
    for _, tile in ipairs {
      { 128, 128, 8, 8, 8 }, { 128, 64, 8, 8, 8 }, { 64, 64, 8, 8, 8 }, { 128, 64, 16, 8, 8 }, { 64, 64, 16, 8, 8 },
      { 32, 32, 8, 4, 4 }, { 64, 32, 16, 8, 4 },
    } do
      for _, form in ipairs { { "row", false }, { "row", true }, { "warp", false }, { "warp", true } } do
        local order, builtin = form[1], form[2]
        it(("tile %s order %s builtin %s, each transpose"):format(table.concat(tile, "x"), order, tostring(builtin)), function()
          lumus.tune.matmul(1, 1, 1, { bm = tile[1], bn = tile[2], bk = tile[3], tm = tile[4], tn = tile[5],
                                       order = order, builtin = builtin })
          local cfg = lumus.tune.matmul(130, 132, 20)
          assert.are.equal(order, cfg.order)
          local compiled = builtin and COMPILED_IN[table.concat(tile, "x")] == true
          assert.are.equal(compiled, cfg.builtin)
          -- M x K x N, transpose_a, transpose_b (M, K, N multiples of 4: vec4 loads); then
          -- sizes the tile divides (the kernel without bounds tests) in each transpose.
          local am, an, ak = 2 * tile[1], tile[2], 3 * tile[3]
          assert.is_true(lumus.tune.matmul(am, an, ak).aligned)
          assert.is_false(lumus.tune.matmul(am, an, ak + 4).aligned)
          for _, s in ipairs {
            { 131, 37, 133, false, false }, { 68, 36, 72, true, false }, { 67, 37, 69, true, true },
            { 5, 19, 67, false, true }, { 68, 36, 72, true, true }, { 64, 8, 4, true, false },
            { am, ak, an, false, false }, { am, ak, an, true, false }, { am, ak, an, false, true }, { am, ak, an, true, true },
          } do
            local m, k, n, ta, tb = s[1], s[2], s[3], s[4], s[5]
            local a, at = operand(ta and { k, m } or { m, k }, g, "float32")
            local b, bt = operand(tb and { n, k } or { k, n }, g, "float32")
            local opts = { transpose_a = ta, transpose_b = tb }
            check(lumus.matmul(a, b, opts), at, bt, opts, "float32",
                  ("%dx%dx%d transpose_a=%s transpose_b=%s"):format(m, k, n, tostring(ta), tostring(tb)))
          end
          -- a linear with a bias, of sizes the tile divides
          local ax, axt = operand({ am, ak }, g, "float32")
          local aw, awt = operand({ an, ak }, g, "float32")
          local abias = ref.random_table({ an }, g)
          check(lumus.linear(ax, aw, lumus.tensor(abias)), axt, awt, { transpose_b = true, bias = abias }, "float32",
                "aligned linear")
          local x, xt = operand({ 70, 44 }, g, "float32")
          local w, wt = operand({ 36, 44 }, g, "float32")
          local bias = ref.random_table({ 36 }, g)
          check(lumus.linear(x, w, lumus.tensor(bias)), xt, wt, { transpose_b = true, bias = bias }, "float32", "linear")
          local ba, bat = operand({ 3, 33, 12 }, g, "float32")
          local bb, bbt = operand({ 3, 12, 20 }, g, "float32")
          check(lumus.matmul(ba, bb), bat, bbt, {}, "float32", "batched")
        end)
      end
    end

    it("batched products with both transposes", function()
      force("tiled")
      local a, at = operand({ 3, 17, 5 }, g, "float32")
      local b, bt = operand({ 3, 7, 17 }, g, "float32")
      local opts = { transpose_a = true, transpose_b = true }
      check(lumus.matmul(a, b, opts), at, bt, opts, "float32", "batched")
    end)
  end)

  describe("one column (N = 1) through the small-M path", function()
    for _, m in ipairs { 17, 130 } do
      it(("M=%d: b [K, 1], b [1, K] with transpose_b, 1-D b, linear with bias"):format(m), function()
        for _, path in ipairs { "auto", "gemv" } do
          force(path)
          local a, at = operand({ m, 33 }, g, "float32")
          local b, bt = operand({ 33, 1 }, g, "float32")
          check(lumus.matmul(a, b), at, bt, {}, "float32", "column")
          local bT, bTt = operand({ 1, 36 }, g, "float32")
          local a2, a2t = operand({ m, 36 }, g, "float32")
          check(lumus.matmul(a2, bT, { transpose_b = true }), a2t, bTt, { transpose_b = true }, "float32", "row")
          local v, vt = operand({ 33 }, g, "float32")
          local got = lumus.matmul(a, v)
          assert.are.same({ m }, got:shape())
          local col = {}
          for i = 1, 33 do col[i] = { vt[i] } end
          check(got:view({ m, 1 }), at, col, {}, "float32", "vector")
          local w1, w1t = operand({ 1, 36 }, g, "float32")
          local bias = ref.random_table({ 1 }, g)
          check(lumus.linear(a2, w1, lumus.tensor(bias)), a2t, w1t, { transpose_b = true, bias = bias }, "float32",
                "linear to one feature")
        end
      end)
    end
  end)

  describe("the automatic choice", function()
    for case = 1, 6 do
      local m, k, n = case <= 3 and pick(SMALL_M) or pick(POOL), pick(POOL), pick(POOL)
      it(("M=%d K=%d N=%d, batched over 2"):format(m, k, n), function()
        reset()
        local a, at = operand({ 2, m, k }, g, "float32")
        local b, bt = operand({ 2, k, n }, g, "float32")
        check(lumus.matmul(a, b), at, bt, {}, "float32", "batched auto")
      end)
    end
  end)

  for _, dtype in ipairs { "float16", "bfloat16" } do
    describe(dtype, function()
      for _, path in ipairs { "gemv", "tiled" } do
        for case = 1, 4 do
          local m = path == "gemv" and pick(SMALL_M) or pick(POOL)
          local k, n = pick(POOL), pick(POOL)
          local tb = case % 2 == 1
          it(("%s M=%d K=%d N=%d transpose_b=%s"):format(path, m, k, n, tostring(tb)), function()
            force(path)
            local a, at = operand({ m, k }, g, dtype)
            local b, bt = operand(tb and { n, k } or { k, n }, g, dtype)
            local out = lumus.full({ m, n }, 0 / 0):to(dtype)
            local c = lumus.matmul(a, b, { transpose_b = tb, out = out })
            assert.are.equal(out, c)
            check(c, at, bt, { transpose_b = tb }, dtype, "matmul")
            local bias, biast = operand({ n }, g, dtype)
            local w, wt = operand({ n, k }, g, dtype)
            check(lumus.linear(a, w, bias), at, wt, { transpose_b = true, bias = biast }, dtype, "linear")
          end)
        end
      end

      it("batched, with a transposed a", function()
        reset()
        local a, at = operand({ 2, 9, 6 }, g, dtype)
        local b, bt = operand({ 2, 9, 11 }, g, dtype)
        check(lumus.matmul(a, b, { transpose_a = true }), at, bt, { transpose_a = true }, dtype, "batched")
      end)

      if dtype == "float16" then
        -- Rows of K % 8 == 0, 16-byte aligned: the small-M path's weight-row form loads 8
        -- halves at once; rows 8 bytes off that alignment (a narrowed view), or strided by a
        -- multiple of 4 but not 8, take its 4-element loads. Row blocks (M > 16), K splits.
        local function cols(t, first, n)
          local out = {}
          for i = 1, #t do out[i] = { (table.unpack or unpack)(t[i], first, first + n - 1) } end
          return out
        end
        for _, s in ipairs { { 1, 8, 5 }, { 3, 24, 33 }, { 16, 136, 17 }, { 17, 264, 7 } } do
          for _, split in ipairs { 0, 2 } do
            local m, k, n = s[1], s[2], s[3]
            it(("gemv in 8-element loads M=%d K=%d N=%d split=%d, and off their alignment"):format(m, k, n, split), function()
              force("gemv", split)
              assert.is_true(lumus.tune.matmul(m, n, k).gemv)
              local a, at = operand({ m, k }, g, dtype)
              local w, wt = operand({ n, k }, g, dtype)
              check(lumus.linear(a, w), at, wt, { transpose_b = true }, dtype, "linear, aligned")
              check(lumus.matmul(a, w, { transpose_b = true }), at, wt, { transpose_b = true }, dtype, "matmul, aligned")
              local a4, a4t = operand({ m, k + 4 }, g, dtype)
              local w4, w4t = operand({ n, k + 4 }, g, dtype)
              -- from element 5: 8 bytes past a 16-byte boundary; rows k + 4 apart
              check(lumus.matmul(a4:narrow(2, 5, k), w4:narrow(2, 5, k), { transpose_b = true }), cols(a4t, 5, k),
                cols(w4t, 5, k), { transpose_b = true }, dtype, "matmul, rows 8 bytes off")
              check(lumus.matmul(a4:narrow(2, 1, k), w4:narrow(2, 1, k), { transpose_b = true }), cols(a4t, 1, k),
                cols(w4t, 1, k), { transpose_b = true }, dtype, "matmul, rows k + 4 apart")
            end)
          end
        end
      end
    end)
  end

  describe("the tensor-core path", function()
    it("lumus.device().cooperative_matrix says whether float16 products may use it", function()
      assert.are.equal("boolean", type(lumus.device().cooperative_matrix))
      assert.are.equal("boolean", type(lumus.device().cooperative_matrix_khr))
      -- KHR is one way to have them, never without them.
      assert.is_true(lumus.device().cooperative_matrix or not lumus.device().cooperative_matrix_khr)
    end)

    -- Where the device has no cooperative matrices (lavapipe) path = "coop" runs the
    -- tiled kernel; on a GPU with them these shapes cover whole and partial 128 x 128
    -- blocks and a K tail (bench/device_checks.lua checks the same on the H200).
    for _, s in ipairs { { 130, 40, 136, false }, { 64, 64, 64, true }, { 200, 24, 72, true } } do
      it(("float16 M=%d K=%d N=%d transpose_b=%s with path coop"):format(s[1], s[2], s[3], tostring(s[4])), function()
        force("coop")
        assert.are.equal("coop", lumus.tune.matmul(1, 1, 1).path)
        local m, k, n, tb = s[1], s[2], s[3], s[4]
        local a, at = operand({ m, k }, g, "float16")
        local b, bt = operand(tb and { n, k } or { k, n }, g, "float16")
        check(lumus.matmul(a, b, { transpose_b = tb }), at, bt, { transpose_b = tb }, "float16", "coop")
        local bias, biast = operand({ n }, g, "float16")
        local w, wt = operand({ n, k }, g, "float16")
        check(lumus.linear(a, w, bias), at, wt, { transpose_b = true, bias = biast }, "float16", "coop linear")
      end)
    end
  end)

  describe("under the Khronos validation layer", function()
    it("the small-M and tiled kernels in every dtype print no message", function()
      local script = [[
        local lumus = require "lumus"
        assert(lumus.device().validation, "validation layer not enabled")
        for _, dt in ipairs { "float32", "float16", "bfloat16" } do
          for _, path in ipairs { "gemv", "tiled", "coop" } do
            lumus.tune.matmul(1, 1, 1, { path = path })
            for _, s in ipairs { { 1, 64, 40 }, { 5, 33, 17 }, { 40, 64, 64 } } do
              local a = lumus.ones({ s[1], s[2] }):to(dt)
              local b = lumus.ones({ s[2], s[3] }):to(dt)
              local w = lumus.ones({ s[3], s[2] }):to(dt)
              lumus.matmul(a, b):to("float32"):to_table()
              lumus.linear(a, w, lumus.ones({ s[3] }):to(dt)):to("float32"):to_table()
            end
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
    end)
  end)

  describe("dtype rules", function()
    it("mixed dtypes raise, naming both", function()
      local h = lumus.ones({ 2, 2 }, { dtype = "float16" })
      local f = lumus.ones({ 2, 2 })
      checks.errors(lumus.matmul, "dtypes float16 %(a%) and float32 %(b%) differ %(convert with :to%(%)%)", h, f)
      checks.errors(lumus.linear, "dtypes float32 %(x%) and bfloat16 %(weight%) differ", f, f:to("bfloat16"))
      checks.errors(lumus.linear, "dtypes float16 %(x%) and float32 %(bias%) differ", h, h, lumus.ones({ 2 }))
      checks.errors(lumus.matmul, "a must be float32, float16 or bfloat16, got int32",
                    lumus.ones({ 2, 2 }, { dtype = "int32" }), f)
      checks.errors(lumus.matmul, "out must be float16", h, h, { out = lumus.empty({ 2, 2 }) })
    end)
  end)

  describe("tune.matmul path and split", function()
    it("reports and forces the path, and refuses bad values", function()
      reset()
      assert.is_true(lumus.tune.matmul(1, 50257, 768).gemv)
      assert.is_false(lumus.tune.matmul(65, 64, 64).gemv)
      assert.are.equal("tiled", lumus.tune.matmul(1, 1, 1, { path = "tiled" }).path)
      assert.is_false(lumus.tune.matmul(1, 64, 64).gemv)
      reset()
      assert.are.equal("auto", lumus.tune.matmul(1, 1, 1).path)
      checks.errors(lumus.tune.matmul, "path must be \"auto\", \"gemv\", \"tiled\" or \"coop\"", 1, 1, 1, { path = "fast" })
      checks.errors(lumus.tune.matmul, "#4.*coop_form must be 0 %(automatic%) to %d", 1, 1, 1, { coop_form = 99 })
      checks.errors(lumus.tune.matmul, "#4.*coop_form must be 0 %(automatic%) to %d", 1, 1, 1, { coop_form = -1 })
      checks.errors(lumus.tune.matmul, "split must be 0 %(automatic%) or a power of two", 1, 1, 1, { split = 3 })
      checks.errors(lumus.tune.matmul, "split must be at most 256", 1, 1, 1, { split = 512 })
      checks.errors(lumus.tune.matmul, "#4.*order must be \"auto\", \"row\" or \"warp\"", 1, 1, 1, { order = "diagonal" })
      checks.errors(lumus.tune.matmul, "#4.*builtin", 1, 1, 1, { builtin = 1 })
      -- a refused call changes nothing (the tile stays automatic)
      local before = lumus.tune.matmul(100, 100, 100)
      checks.errors(lumus.tune.matmul, "path must be", 1, 1, 1,
                    { bm = 32, bn = 32, bk = 8, tm = 4, tn = 4, path = "fast" })
      local after = lumus.tune.matmul(100, 100, 100)
      assert.are.same({ before.bm, before.bn, before.path }, { after.bm, after.bn, after.path })
    end)
  end)
end)
