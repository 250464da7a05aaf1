-- Reductions split over r (few long columns: the grid would otherwise be small) finish in
-- one dispatch: each column group's last workgroup reduces the chunks' states, counted in
-- on a kept word that it sets back to 0 (STATE_LAST in shaders/reduce.comp). Against the
-- two-dispatch form (tune.reduce{two_dispatches = true}): max, min, argmax and argmin equal
-- bit for bit; sum, mean and var (whose states the two forms combine in different fixed
-- trees) within 1e-6 of the magnitudes summed (sum |x|, over the count for mean; var: of
-- itself) plus one rounding of a 16-bit dtype, NaN and infinities alike. Every result equal bit for bit call after call (the counters return to 0), for
-- every kind, dtype and load form (element, vector, column-vector, masked, subgroup);
-- inside a capture too. The counter words count as internal memory, by bytes. Accuracy
-- against float64 is reductions_spec's.
local lumus = require "lumus"
local ref = require "lumus.reference"
local NAN, INF = 0 / 0, math.huge

local KINDS = { "sum", "mean", "var", "max", "min", "argmax", "argmin" }
local EXACT = { max = true, min = true, argmax = true, argmin = true }
local ROUNDING = { float32 = 0, float16 = 2 ^ -11, bfloat16 = 2 ^ -8 }

-- a and b (sum, mean or var results) as float64 alike within 1e-6 * mags + rounding * |b|.
local function assert_close(a, b, mags, rounding, what)
  local ta, tb = ref.flatten(a:to("float32"):to_table()), ref.flatten(b:to("float32"):to_table())
  local tm = ref.flatten(mags:to("float32"):to_table())
  for i = 1, #tb do
    local x, y = ta[i], tb[i]
    local ok = (x ~= x and y ~= y) or x == y or math.abs(x - y) <= 1e-6 * math.abs(tm[i]) + rounding * math.abs(y)
    if not ok then error(("%s: element %d %.9g against two dispatches' %.9g"):format(what, i, x, y)) end
  end
end

-- Every result of op over x as bytes (values and indices).
local function run(name, x, opts)
  local a, b = lumus[name](x, opts)
  return a:to_bytes() .. (b and b:to_bytes() or "")
end

local function values(shape, g, specials)
  local t = ref.random_table(shape, g)
  if not specials then return t end
  local flat = ref.flatten(t)
  flat[3], flat[#flat - 2], flat[math.floor(#flat / 2)] = NAN, INF, -INF
  return ref.nest(flat, shape)
end

describe("split reductions in one dispatch", function()
  after_each(function() lumus.tune.reduce({}) end)

  local cases = {
    { { 3, 20000 }, { dim = 2 } },            -- rows, 4-wide loads
    { { 2, 40003 }, { dim = 2 } },            -- odd rows, element loads
    { { 5, 9001 }, {} },                      -- everything
    { { 20011, 3 }, { dim = 1 } },            -- columns
    { { 4099, 16 }, { dim = 1 } },            -- columns, 4 at a time
    { { 2, 9001, 5 }, { dim = 2, keepdim = true } },
  }
  for _, dt in ipairs { "float32", "float16", "bfloat16" } do
    it("match the two-dispatch form, and themselves bit for bit call after call (" .. dt .. ")", function()
      local g = ref.rng(7041)
      for ci, case in ipairs(cases) do
        local x = lumus.tensor(values(case[1], g, ci % 2 == 0)):to(dt)
        local what = table.concat(case[1], "x") .. " " .. dt
        for _, masked in ipairs { false, true } do
          for _, rows in ipairs { "lanes", "subgroup" } do
            for _, name in ipairs(KINDS) do
              local how = ("%s %s rows=%s masked=%s"):format(name, what, rows, tostring(masked))
              lumus.tune.reduce({ rows = rows, masked = masked, two_dispatches = true })
              local two = run(name, x, case[2])
              local two_values = not EXACT[name] and lumus[name](x, case[2])
              lumus.tune.reduce({ rows = rows, masked = masked })
              local one = run(name, x, case[2])
              if EXACT[name] then
                assert.are.equal(two, one, how)
              else
                local mags = name == "var" and two_values or lumus[name](lumus.abs(x:to("float32")), case[2])
                assert_close(lumus[name](x, case[2]), two_values, mags, ROUNDING[dt], how)
              end
              for call = 2, 3 do assert.are.equal(one, run(name, x, case[2]), how .. " call " .. call) end
            end
          end
        end
        x:free()
      end
    end)
  end

  it("keep their counter words as internal memory, which empty_cache releases", function()
    lumus.synchronize()
    lumus.empty_cache()
    local before = lumus.memory().internal
    lumus.tune.reduce({ two_dispatches = true })
    local x = lumus.rand({ 2, 50000 })
    lumus.sum(x, { dim = 2 })
    lumus.synchronize()
    assert.are.equal(before, lumus.memory().internal, "two dispatches keep no counters")
    lumus.tune.reduce({})
    lumus.sum(x, { dim = 2 })
    lumus.synchronize()
    assert.are.equal(before + 4096, lumus.memory().internal, "one page of counter words")
    lumus.max(x, { dim = 2 })
    lumus.synchronize()
    assert.are.equal(before + 4096, lumus.memory().internal, "kept, not made again")
    lumus.empty_cache()
    assert.are.equal(before, lumus.memory().internal)
    -- made again (and zeroed) after the release
    local want = lumus.sum(lumus.tensor(ref.random_table({ 2, 50000 }, ref.rng(3))), { dim = 2 })
    assert.are.equal(before + 4096, lumus.memory().internal)
    assert.is_true(want:to_table()[1] == want:to_table()[1])
    x:free()
  end)

  it("replay from a capture as they ran eagerly, without the kept counters", function()
    local x = lumus.tensor(values({ 3, 30011 }, ref.rng(11), true))
    local m, i = lumus.max(x, { dim = 2 })
    local eager = m:to_bytes() .. i:to_bytes() .. lumus.sum(x, { dim = 2 }):to_bytes()
    local graph, vm, vi = lumus.capture(function() return lumus.max(x, { dim = 2 }) end)
    local gs, s = lumus.capture(function() return lumus.sum(x, { dim = 2 }) end)
    for _ = 1, 3 do
      graph:replay()
      gs:replay()
      assert.are.equal(eager, vm:to_bytes() .. vi:to_bytes() .. s:to_bytes())
    end
    graph:free()
    gs:free()
  end)

  it("report two_dispatches and groups_per_sm, and reject values out of their range", function()
    assert.is_false(lumus.tune.reduce().two_dispatches)
    assert.is_true(lumus.tune.reduce({ two_dispatches = true }).two_dispatches)
    assert.is_false(lumus.tune.reduce({}).two_dispatches)
    assert.are.equal(0, lumus.tune.reduce().groups_per_sm)
    assert.are.equal(32, lumus.tune.reduce({ groups_per_sm = 32 }).groups_per_sm)
    assert.are.equal(0, lumus.tune.reduce({}).groups_per_sm)
    local function err(t) return select(2, pcall(lumus.tune.reduce, t)) end
    assert.matches("two_dispatches must be a boolean, got string", err({ two_dispatches = "yes" }), 1, true)
    assert.matches("groups_per_sm must be in 0..1024, got 1025", err({ groups_per_sm = 1025 }), 1, true)
    assert.matches("groups_per_sm must be in 0..1024, got -1", err({ groups_per_sm = -1 }), 1, true)
  end)
end)
