-- NaN, infinities, huge and subnormal values: what each op returns (docs/semantics.md),
-- checked on the GPU and in lumus.reference against written-out expected values, and
-- swept over every row-kernel path (vec4 and float rows, the subgroup form, workgroup
-- sizes, register-held and streamed vectors) for sum, mean and softmax.
-- The rules are PyTorch's float32 ones: NaN in gives NaN out; sum of a row with +-inf is
-- +-inf, with both or with NaN NaN, and a sum beyond float32's range is +-inf (a mean too,
-- its sum overflowing first); softmax gives 0 for -inf entries and all NaN for a row with
-- NaN, with +inf (exp(inf - inf)), or of only -inf.
local lumus = require "lumus"
local ref = require "lumus.reference"

local NAN, INF = 0 / 0, math.huge
local U = 2 ^ -24                                  -- float32 unit roundoff
local F32_OVERFLOW = 2.0 ^ 128 - 2.0 ^ 103         -- the smallest value float32 rounds to inf
local row_config = lumus.tune.rows

local function flat(t) return type(t[1]) == "table" and ref.flatten(t) or t end
local function fmt(v) return ("%.9g"):format(v) end

-- got[i] == want[i] exactly, NaN only against NaN.
local function exact(got, want, what)
  got, want = flat(got), flat(want)
  assert.are.equal(#want, #got, what .. ": element count")
  for i = 1, #want do
    local g, w = got[i], want[i]
    local ok = (w ~= w and g ~= g) or g == w
    assert(ok, ("%s: element %d is %s, want %s"):format(what, i, fmt(g), fmt(w)))
  end
end

-- Like exact, but finite wants within rel * |want| + abs_tol.
local function near(got, want, rel, abs_tol, what)
  got, want = flat(got), flat(want)
  assert.are.equal(#want, #got, what .. ": element count")
  for i = 1, #want do
    local g, w = got[i], want[i]
    local ok
    if w ~= w or w == INF or w == -INF then ok = (w ~= w and g ~= g) or g == w
    else ok = math.abs(g - w) <= rel * math.abs(w) + abs_tol end
    assert(ok, ("%s: element %d is %s, want %s"):format(what, i, fmt(g), fmt(w)))
  end
end

local function gpu(op, rows, opts) return lumus[op](lumus.tensor(rows), opts):to_table() end

describe("written-out semantics", function()
  -- {row, sum, mean, softmax}
  local CASES = {
    { { 1, NAN, 2 }, NAN, NAN, { NAN, NAN, NAN } },
    { { 1, 2, NAN, 4 }, NAN, NAN, { NAN, NAN, NAN, NAN } },
    { { 1, INF, 2 }, INF, INF, { NAN, NAN, NAN } },
    { { INF, 1 }, INF, INF, { NAN, NAN } },
    { { 1, -INF, 2 }, -INF, -INF, { 1 / (1 + math.exp(1)), 0, 1 / (1 + math.exp(-1)) } },
    { { -INF, 0 }, -INF, -INF, { 0, 1 } },
    { { -INF, -INF, -INF }, -INF, -INF, { NAN, NAN, NAN } },
    { { INF, -INF }, NAN, NAN, { NAN, NAN } },
    { { INF, INF, 1 }, INF, INF, { NAN, NAN, NAN } },
    { { 3e38, 3e38 }, INF, INF, { 0.5, 0.5 } },
    { { -3e38, -3e38, -3e38 }, -INF, -INF, { 1 / 3, 1 / 3, 1 / 3 } },
    { { 3e38, -3e38 }, 0, 0, { 1, 0 } },
    { { 3e38, 1, 2, 3 }, ref.f32(3e38), ref.f32(3e38) / 4, { 1, 0, 0, 0 } },
  }

  it("sum, mean and softmax on the GPU", function()
    for ci, c in ipairs(CASES) do
      local what = ("case %d"):format(ci)
      near(gpu("sum", c[1]), { c[2] }, U, 0, "sum " .. what)
      near(gpu("mean", c[1]), { c[3] }, 2 * U, 0, "mean " .. what)
      near(gpu("softmax", c[1]), c[4], 5e-6, 0, "softmax " .. what)
    end
  end)

  it("sum, mean and softmax in lumus.reference", function()
    for ci, c in ipairs(CASES) do
      local x = ref.map(c[1], ref.f32)
      local what = ("case %d"):format(ci)
      near(ref.sum(x), { c[2] }, 1e-15, 0, "ref.sum " .. what)
      near(ref.mean(x), { c[3] }, 1e-15, 0, "ref.mean " .. what)
      near(ref.softmax(x), c[4], 1e-15, 0, "ref.softmax " .. what)
    end
  end)

  it("a NaN row leaves the rows beside it alone", function()
    local rows = { { 1, 2, 3 }, { 1, NAN, 2 }, { 0, 0, 0 } }
    local e = math.exp(1)
    near(gpu("softmax", rows),
         { { 1 / (1 + e + e * e), e / (1 + e + e * e), e * e / (1 + e + e * e) },
           { NAN, NAN, NAN }, { 1 / 3, 1 / 3, 1 / 3 } }, 5e-6, 0, "softmax rows")
    exact(gpu("sum", rows, { dim = -1 }), { 6, NAN, 0 }, "sum rows")
  end)

  -- x and the results of relu, gelu (erf form), gelu_tanh, erf, neg.
  local X = { NAN, INF, -INF, 3e38, -3e38, 1e20, -1e20, 0, 1e-40, -1e-40, 1, -1 }
  local UNARY = {
    relu = { NAN, INF, 0, ref.f32(3e38), 0, ref.f32(1e20), 0, 0, ref.f32(1e-40), 0, 1, 0 },
    gelu = { NAN, INF, NAN, ref.f32(3e38), 0, ref.f32(1e20), 0, 0, ref.f32(1e-40) / 2,
             -ref.f32(1e-40) / 2, 0.8413447460685429, -0.15865525393145707 },
    gelu_tanh = { NAN, INF, NAN, ref.f32(3e38), 0, ref.f32(1e20), 0, 0, ref.f32(1e-40) / 2,
                  -ref.f32(1e-40) / 2, 0.8411919906082768, -0.15880800939172324 },
    erf = { NAN, 1, -1, 1, -1, 1, -1, 0, ref.f32(1e-40) * 2 / math.sqrt(math.pi),
            -ref.f32(1e-40) * 2 / math.sqrt(math.pi), 0.8427007929497149, -0.8427007929497149 },
    neg = { NAN, -INF, INF, -ref.f32(3e38), ref.f32(3e38), -ref.f32(1e20), ref.f32(1e20), 0,
            -ref.f32(1e-40), ref.f32(1e-40), -1, 1 },
  }
  local REF_UNARY = {
    relu = ref.relu, neg = ref.neg,
    gelu = function(t) return ref.gelu(t) end,
    gelu_tanh = function(t) return ref.gelu(t, "tanh") end,
    erf = function(t) return ref.map(t, ref.erf) end,
  }

  -- Subnormal results may be flushed to zero by a device (Vulkan leaves float32
  -- denormals to the implementation): 1e-40 in and out may then read 0.
  local function near_or_flushed(got, want, rel, what)
    got, want = flat(got), flat(want)
    for i = 1, #want do
      if want[i] == want[i] and want[i] ~= 0 and math.abs(want[i]) < 2 ^ -126 and got[i] == 0 then
        got[i] = want[i]
      end
    end
    near(got, want, rel, 3e-45, what)               -- 3e-45: two subnormal steps
  end

  it("elementwise unary ops on NaN, infinities, huge and subnormal values", function()
    -- Lengths 12 (vec4 loads), 3 (only the vec4 kernel's scalar tail), 15 (both).
    for _, n in ipairs { 12, 3, 15 } do
      local xs, want = {}, {}
      for op, vals in pairs(UNARY) do
        want[op] = {}
        for i = 1, n do xs[i] = X[(i - 1) % #X + 1]; want[op][i] = vals[(i - 1) % #X + 1] end
      end
      for op in pairs(UNARY) do
        near_or_flushed(gpu(op, xs), want[op], 1e-6, ("%s, n = %d"):format(op, n))
        near(REF_UNARY[op](ref.map(xs, ref.f32)), want[op], 1e-12, 0, ("ref.%s, n = %d"):format(op, n))
      end
    end
  end)

  it("elementwise binary ops on NaN, infinities and overflow", function()
    -- {a, b, a + b, a - b, a * b, a / b}
    local ROWS = {
      { NAN, 1, NAN, NAN, NAN, NAN },
      { 1, NAN, NAN, NAN, NAN, NAN },
      { INF, -INF, NAN, INF, -INF, NAN },
      { INF, INF, INF, NAN, INF, NAN },
      { 0, INF, INF, -INF, NAN, 0 },
      { 1, 0, 1, 1, 0, INF },
      { -1, 0, -1, -1, 0, -INF },
      { 0, 0, 0, 0, 0, NAN },
      { 3e38, 3e38, INF, 0, INF, 1 },
      { -3e38, 3e38, 0, -INF, -INF, -1 },
      { 3e38, 0.5, ref.f32(3e38) + 0.5, ref.f32(3e38) - 0.5, ref.f32(3e38) / 2, INF },
      { 1e20, 1e20, ref.f32(1e20) * 2, 0, INF, 1 },
    }
    local a, b, want = {}, {}, { add = {}, sub = {}, mul = {}, div = {} }
    for i, r in ipairs(ROWS) do
      a[i], b[i] = r[1], r[2]
      want.add[i], want.sub[i], want.mul[i], want.div[i] = r[3], r[4], r[5], r[6]
    end
    local ta, tb = lumus.tensor(a), lumus.tensor(b)
    for op, w in pairs(want) do
      near(lumus[op](ta, tb):to_table(), w, 3 * U, 0, op)
      near(ref[op](ref.map(a, ref.f32), ref.map(b, ref.f32)), w, 1e-15, 0, "ref." .. op)
    end
    -- Broadcast with a period of 3 (the float kernel) and a number operand.
    local a2 = { { 1, INF, NAN }, { -INF, 3e38, 0 } }
    near(lumus.mul(lumus.tensor(a2), lumus.tensor({ 0, 2, 1 })):to_table(),
         { { 0, INF, NAN }, { NAN, INF, 0 } }, 0, 0, "mul broadcast")
    near(lumus.div(lumus.tensor(a2), 0):to_table(),
         { { INF, INF, NAN }, { -INF, INF, NAN } }, 0, 0, "div by the number 0")
  end)
end)

describe("row kernels on every path", function()
  -- Workgroup / register-item overrides: automatic (the subgroup form for short rows),
  -- one vector per thread held (the rest streamed), more held, wide workgroups.
  local CONFIGS = { { wg = 0, items = 0 }, { wg = 32, items = 1 }, { wg = 64, items = 2 },
                    { wg = 32, items = 8 }, { wg = 256, items = 0 }, { wg = 1024, items = 0 } }
  local LENGTHS = { 1, 2, 3, 4, 5, 7, 8, 12, 33, 64, 130, 513, 1000, 1028, 4096, 4099 }

  -- Ordinary values in [-1, 1], float32.
  local function base(d, seed)
    local r = {}
    for i = 1, d do r[i] = ref.f32(math.sin(i * 0.7 + seed)) end
    return r
  end

  -- The test rows of length d: {name, row}. Positions spread over the row, so that
  -- specials land on different lanes, vector components and the streamed part.
  local function rows_of(d)
    local p, q, m = 1, d, math.floor((d * 5) / 8) + 1
    local function with(seed, set)
      local r = base(d, seed)
      for k, v in pairs(set) do r[k] = v end
      return r
    end
    local rows = {
      { "ordinary", base(d, 0) },
      { "NaN first", with(1, { [p] = NAN }) },
      { "NaN last", with(2, { [q] = NAN }) },
      { "NaN inside", with(3, { [m] = NAN }) },
      { "+inf", with(4, { [m] = INF }) },
      { "-inf", with(5, { [q] = -INF }) },
      { "two -inf", with(6, { [p] = -INF, [m] = -INF }) },
      { "all -inf", with(7, (function() local t = {} for i = 1, d do t[i] = -INF end return t end)()) },
      { "huge, overflowing", with(8, { [p] = 3e38, [q] = 3e38 }) },
      { "-huge, overflowing", with(9, { [p] = -3e38, [m] = -3e38 }) },
      { "huge, finite", with(10, { [m] = ref.f32(1e38), [q] = ref.f32(1e38) }) },
      { "subnormal", (function() local t = {} for i = 1, d do t[i] = ref.f32(1e-40) end return t end)() },
      { "ordinary again", base(d, 11) },
    }
    if d > 1 then
      rows[#rows + 1] = { "+inf and -inf", with(12, { [p] = INF, [q] = -INF }) }
      rows[#rows + 1] = { "NaN and +inf", with(13, { [q] = NAN, [p] = INF }) }
      rows[#rows + 1] = { "NaN and -inf", with(14, { [m] = NAN, [p] = -INF }) }
    end
    return rows
  end

  -- Expected sum (with its tolerance), mean and softmax of a row, by the rules above.
  local function expect(row)
    local nan, pinf, ninf, s, abs_sum, mx = false, false, false, 0, 0, -INF
    for _, v in ipairs(row) do
      if v ~= v then nan = true
      elseif v == INF then pinf = true
      elseif v == -INF then ninf = true
      else s = s + v; abs_sum = abs_sum + math.abs(v) end
      if v == v and v > mx then mx = v end
    end
    local sum
    if nan or (pinf and ninf) then sum = NAN
    elseif pinf then sum = INF
    elseif ninf then sum = -INF
    elseif s >= F32_OVERFLOW then sum = INF
    elseif s <= -F32_OVERFLOW then sum = -INF
    else sum = s end
    local sm = {}
    if nan or pinf or mx == -INF then
      for i = 1, #row do sm[i] = NAN end
    else
      local total = 0
      for i = 1, #row do sm[i] = math.exp(row[i] - mx); total = total + sm[i] end
      for i = 1, #row do sm[i] = sm[i] / total end
    end
    return sum, 4 * U * abs_sum, sum / #row, sm
  end

  local function check_rows(rows, sums, means, softmaxes, what)
    for r, named in ipairs(rows) do
      local sum, tol, mean, sm = expect(named[2])
      local label = ("%s, row %q"):format(what, named[1])
      if named[1] == "subnormal" and sums[r] == 0 then      -- a device that flushes
        sum, mean, tol = 0, 0, 0
      end
      near({ sums[r] }, { sum }, 0, tol, "sum " .. label)
      near({ means[r] }, { mean }, U, tol / #named[2], "mean " .. label)
      near(softmaxes[r], sm, 5e-6, 1e-30, "softmax " .. label)
    end
  end

  it("sum, mean and softmax in lumus.reference follow the same rules", function()
    for _, d in ipairs { 1, 3, 8, 130 } do
      local rows = rows_of(d)
      local xs = {}
      for r, named in ipairs(rows) do xs[r] = named[2] end
      check_rows(rows, ref.sum(xs, { dim = -1 }), ref.mean(xs, { dim = -1 }), ref.softmax(xs), ("ref, d = %d"):format(d))
    end
  end)

  it("sum, mean and softmax on the GPU, every row path", function()
    local ok, err = pcall(function()
      for _, cfg in ipairs(CONFIGS) do
        row_config(1, cfg)
        for _, d in ipairs(LENGTHS) do
          local rows = rows_of(d)
          local xs = {}
          for r, named in ipairs(rows) do xs[r] = named[2] end
          local x = lumus.tensor(xs)
          local plan = row_config(d)
          local what = ("d = %d, workgroup %d, items %d, vec %d, rows/group %d"):format(
            d, plan.workgroup, plan.items, plan.vec, plan.rows_per_group)
          check_rows(rows, lumus.sum(x, { dim = -1 }):to_table(), lumus.mean(x, { dim = -1 }):to_table(),
                     lumus.softmax(x):to_table(), what)
          x:free()
        end
      end
    end)
    row_config(1, { wg = 0, items = 0 })
    if not ok then error(err, 0) end
  end)
end)
