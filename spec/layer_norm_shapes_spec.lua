-- lumus.layer_norm_forward on every row length: every D in 1..80 and a seeded random set
-- of (rows, D) with odd and prime D up to 70000, under every form forced through
-- lumus.tune.layer_norm (row, group, subgroup, stream, split, the automatic choice),
-- in place (out = x) and out of place, with and without weight and bias, against the
-- float64 reference (lumus.reference); and rows of NaN, inf and huge values beside
-- ordinary ones.
--
-- Rows whose D is not a multiple of 4 are read by a GPU's forms as the aligned vec4s of
-- the flattened tensor that cover them ("masked"; lavapipe reads floats unless the hook
-- asks for them with scalar = false, as here): adjacent rows share the vec4 at their
-- boundary, so these rows are where a kernel could read or write a neighbour's elements;
-- row counts are odd so every skew (row * D mod 4) occurs, outputs out of place start
-- as NaN so an element left unwritten shows, and in place any write into a neighbour's
-- elements changes that neighbour's input.
--
-- Tolerances as in spec/layer_norm_spec.lua: y within 1e-4 * max(1, |ref|) per element
-- and 1e-5 relative L2, mean within 1e-5 * max(1, |ref|), invstd within 1e-4 relative.
local lumus = require "lumus"
local ref = require "lumus.reference"

local Y_MAX, INVSTD_REL = 1e-4, 1e-4   -- as spec/support/layer_norm_check.lua
local NAN = 0 / 0
local config = lumus.tune.layer_norm

local mismatch = dofile("spec/support/layer_norm_check.lua").mismatch

-- Adds to `bad` what is off in one finite row (x row xi) against the float64 reference:
-- y within Y_MAX, mean within 1e-5 * max(1, max |x|), invstd within INVSTD_REL (an invstd
-- below the smallest normal float32 may be flushed to 0).
local function check_row(bad, what, xi, gy, wy, gm, wm, gr, wr)
  local cy = ref.compare({ gy }, { wy })
  local amax = 0
  for j = 1, #xi do amax = math.max(amax, math.abs(xi[j])) end
  if not (cy.max_rel <= Y_MAX) then bad[#bad + 1] = ("%s: y max error %.3g"):format(what, cy.max_rel) end
  if not (math.abs(gm - wm) <= 1e-5 * math.max(1, amax)) then bad[#bad + 1] = what .. ": mean" end
  local flushed = wr < 2.0 ^ -126 and gr == 0
  if not flushed and not (math.abs(gr / wr - 1) <= INVSTD_REL) then bad[#bad + 1] = what .. ": invstd" end
end

local function label_of(tune)
  local parts = {}
  for _, k in ipairs { "form", "parts", "scalar" } do
    if tune[k] ~= nil then parts[#parts + 1] = ("%s=%s"):format(k, tostring(tune[k])) end
  end
  return #parts > 0 and table.concat(parts, " ") or "automatic"
end

local settings = {
  {},
  { form = "row" },
  { form = "group", scalar = false },
  { form = "subgroup", scalar = false },
  { form = "stream", scalar = false },
  { form = "split", parts = 2, scalar = false },
  { form = "split", parts = 3, scalar = false },
  { form = "group", scalar = true },
}

describe("layer_norm_forward on every row length", function()
  after_each(function() config(1, {}) end)

  for _, tune in ipairs(settings) do
    local label = label_of(tune)
    it(("matches the reference under %s for D = 1..80, in place and not, with and without weight and bias"):format(label), function()
      local rng = ref.rng(#label + 7)
      local bad = {}
      for d = 1, 80 do
        local c = config(d, tune)
        -- scalar = false reads a D that is not a multiple of 4 as masked vec4s (but in
        -- the row form, which reads floats); scalar = true as floats.
        if d % 4 ~= 0 and tune.scalar ~= nil and c.variant ~= "row" then
          assert.are.equal(not tune.scalar, c.masked, ("%s D=%d: masked"):format(label, d))
        end
        if tune.form and tune.form ~= "row" then assert.are.equal(tune.form, c.variant) end
        -- Each D takes one of the four combinations; each combination covers every D mod 4.
        local how = { in_place = d % 2 == 1, affine = (math.floor(d / 2)) % 2 == 0 }
        local why = mismatch(7, d, rng, how)
        if why then
          bad[#bad + 1] = ("D=%d%s%s: %s"):format(d, how.in_place and " in place" or "", how.affine and " affine" or "", why)
        end
      end
      assert(#bad == 0, ("%s: wrong for %d of D = 1..80:\n%s"):format(label, #bad, table.concat(bad, "\n")))
    end)
  end

  -- Many short rows per workgroup: the subgroup form packs several rows into a subgroup
  -- (a few lanes each), and a tensor whose row count is not a multiple of the rows per
  -- workgroup leaves segments past the last row.
  it("matches the reference for many short rows in the subgroup form, in place and not", function()
    local rng = ref.rng(11)
    for _, d in ipairs { 1, 2, 3, 5, 7, 13, 31, 64 } do
      config(d, { form = "subgroup", scalar = false })
      for _, in_place in ipairs { false, true } do
        local why = mismatch(301, d, rng, { in_place = in_place, affine = d % 2 == 1 })
        assert(why == nil, ("D=%d, 301 rows%s: %s"):format(d, in_place and " in place" or "", tostring(why)))
      end
    end
  end)

  -- Seeded random shapes, D log-uniform up to 70000 with odd and prime ones, under the
  -- forms that hold long rows.
  it("matches the reference on a seeded random set of (rows, D) up to D = 70000", function()
    local g = ref.rng(20261203)
    local function is_prime(n)
      if n < 2 then return false end
      for f = 2, math.floor(math.sqrt(n)) do if n % f == 0 then return false end end
      return true
    end
    local shapes = { { 3, 69997 }, { 2, 65537 } }   -- primes near the top of the range
    for i = 1, 6 do
      local d = math.max(1, math.floor(math.exp(g.uniform() * math.log(70000))))
      if i % 2 == 1 then while not is_prime(d) do d = d + 1 end elseif d % 2 == 0 then d = d + 1 end
      shapes[#shapes + 1] = { 1 + math.floor(g.uniform() * math.min(9, math.floor(200000 / d))), d }
    end
    local bad = {}
    for k, s in ipairs(shapes) do   -- weight and bias on every other shape
      local rows, d = s[1], s[2]
      for _, tune in ipairs { {}, { form = "group", scalar = false }, { form = "stream", scalar = false },
                              { form = "split", parts = 3, scalar = false } } do
        config(d, tune)
        for _, in_place in ipairs { false, true } do
          local why = mismatch(rows, d, g, { in_place = in_place, affine = k % 2 == 1 })
          if why then
            bad[#bad + 1] = ("%dx%d under %s%s: %s"):format(rows, d, label_of(tune), in_place and ", in place" or "", why)
          end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  -- Non-finite and huge rows take the scaled statistics, which read the row again from
  -- memory: masked, beside ordinary rows (whose statistics must not change), in every
  -- form that has them. Expectations as spec/layer_norm_semantics_spec.lua states them.
  it("keeps NaN, inf and huge rows to themselves with masked vec4 rows", function()
    local INF = math.huge
    local kinds = {
      function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[1] = NAN return r, "nan" end,
      function(d, g) local r = {} for i = 1, d do r[i] = 2 + g.normal() end return r end,
      function(d, g) local r = {} for i = 1, d do r[i] = g.normal() end r[d] = INF return r, "inf" end,
      function(d, g) local r = {} for i = 1, d do r[i] = (i % 2 == 0 and 3e38 or -2e38) * g.uniform() end return r end,
      function(d, g) local r = {} for i = 1, d do r[i] = 1e4 + g.normal() end return r end,
    }
    local bad = {}
    for _, tune in ipairs { { form = "group" }, { form = "subgroup" }, { form = "stream" }, { form = "split", parts = 2 },
                            { form = "split2" } } do
      tune.scalar = false
      for _, d in ipairs { 5, 7, 37, 4099 } do
        config(d, tune)
        local g = ref.rng(d)
        local xt, nonfinite = {}, {}
        for i = 1, 11 do
          local row, what = kinds[(i - 1) % #kinds + 1](d, g)
          for j = 1, d do row[j] = ref.f32(row[j]) end
          xt[i], nonfinite[i] = row, what
        end
        local x = lumus.tensor(xt)
        local y, m, r = lumus.layer_norm_forward(x, nil, nil, 1e-5)
        local gy, gm, gr = y:to_table(), m:to_table(), r:to_table()
        for _, t in ipairs { x, y, m, r } do t:free() end
        local wy, wm, wr = ref.layer_norm_forward(xt, nil, nil, 1e-5)
        for i = 1, #xt do
          local what = ("%s D=%d row %d"):format(label_of(tune), d, i)
          if nonfinite[i] then
            local ok = gr[i] ~= gr[i] and (nonfinite[i] == "nan" and gm[i] ~= gm[i] or gm[i] == INF)
            for j = 1, d do ok = ok and gy[i][j] ~= gy[i][j] end
            if not ok then bad[#bad + 1] = what .. ": not NaN / inf as PyTorch" end
          else
            check_row(bad, what, xt[i], gy[i], wy[i], gm[i], wm[i], gr[i], wr[i])
          end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  -- In the split form a part whose partner has not published its record in time computes
  -- that record itself from x. With spin_limit = 0 a part gives up at once, so on lavapipe
  -- (parts run one after another) a row's first part computes its partners' records while
  -- later parts read the records published before them: rows whose sums overflow (values
  -- near 3e38) must still come out the same in every part, the rescale decision and the
  -- statistics being functions of the row alone. Both record protocols; 2 to 5 parts.
  it("agrees across a row's parts on rows whose sums overflow, whoever computed the records", function()
    local bad = {}
    local g = ref.rng(20261204)
    for _, case in ipairs { { 4099, 2 }, { 4096, 3 }, { 1001, 5 }, { 37, 2 } } do
      local d, parts = case[1], case[2]
      for _, spin in ipairs { 0, -1 } do
        for _, records in ipairs { "tagged", "fenced" } do
          config(d, { form = "split", parts = parts, spin_limit = spin, records = records, scalar = false })
          local xt = {}
          for i = 1, 5 do
            local row = {}
            local big = i % 2 == 1   -- huge rows beside ordinary ones
            for j = 1, d do
              row[j] = ref.f32(big and (j % 2 == 0 and 3e38 or -2e38) * g.uniform() or 1e4 + g.normal())
            end
            xt[i] = row
          end
          local x = lumus.tensor(xt)
          local y, m, r = lumus.layer_norm_forward(x, nil, nil, 1e-5)
          local gy, gm, gr = y:to_table(), m:to_table(), r:to_table()
          for _, t in ipairs { x, y, m, r } do t:free() end
          config(d, {})
          local wy, wm, wr = ref.layer_norm_forward(xt, nil, nil, 1e-5)
          for i = 1, #xt do
            local what = ("D=%d parts=%d spin_limit=%d %s row %d"):format(d, parts, spin, records, i)
            check_row(bad, what, xt[i], gy[i], wy[i], gm[i], wm[i], gr[i], wr[i])
          end
        end
      end
    end
    assert(#bad == 0, table.concat(bad, "\n"))
  end)

  it("plans for a row count given to the tuning hook, and refuses a bad one", function()
    local c = config(1000, nil, 5)
    assert.is_string(c.variant)
    assert.are.equal(250, c.vectors)
    assert.are.equal(251, config(1001, { form = "group", scalar = false }).vectors)   -- ceil((1001 + 3) / 4)
    assert.are.equal(1001, config(1001, { form = "group", scalar = true }).vectors)
    local ok, err = pcall(config, 1000, nil, 0)
    assert.is_false(ok)
    assert.matches("bad argument #3 to '[%w.]*layer_norm' %(rows must be in 1..2^32%-1, got 0%)", err)
  end)
end)
