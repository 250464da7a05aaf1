-- Shared checks of softmax / log_softmax over a non-last dimension (the column kernels'
-- forms: spec/softmax_held_spec.lua, spec/softmax_split_spec.lua). Tolerances: softmax
-- 1e-5 |want| + 1e-6; log_softmax 2e-6 max(1, |want|).
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")
local NAN, INF = 0 / 0, math.huge
local assert = require "luassert"   -- (busted gives spec files its assert; this file needs its own)

local M = {}

function M.check_both(x, xt, opts, what)
  checks.close(lumus.softmax(x, opts), ref.softmax(xt, opts), { rel = 1e-5, abs = 1e-6, what = "softmax " .. what })
  checks.close(lumus.log_softmax(x, opts), ref.log_softmax(xt, opts), { mixed = 2e-6, what = "log_softmax " .. what })
end

-- Softmax over dim 1 of an r x cols table (cols >= 6) whose columns hold PyTorch's
-- special cases: a NaN at row nan_row of column 2 and +inf in column 3 (all NaN), only
-- -inf in column 4 (all NaN), -inf in every other row of column 5 (0; log: -inf), and
-- column 6's max at row max_row. Checks the reference, NaN where PyTorch gives NaN, and
-- that two runs agree bit for bit.
function M.special_columns(r, cols, nan_row, max_row)
  local xt = {}
  for i = 1, r do
    xt[i] = {}
    for c = 1, cols do xt[i][c] = math.sin(i * 0.01 + c) * 3 end
  end
  xt[nan_row][2] = NAN
  xt[17][3] = INF
  for i = 1, r do xt[i][4] = -INF end
  for i = 1, r, 2 do xt[i][5] = -INF end
  xt[max_row][6] = 80
  local x = lumus.tensor(xt)
  M.check_both(x, xt, { dim = 1 }, "special columns")
  local a, b = lumus.softmax(x, { dim = 1 }):to_table(), lumus.softmax(x, { dim = 1 }):to_table()
  for i = 1, r do
    for c = 1, cols do
      if a[i][c] == a[i][c] then assert.are.equal(a[i][c], b[i][c]) end
    end
  end
  assert.is_true(a[1][2] ~= a[1][2] and a[r][3] ~= a[r][3] and a[9][4] ~= a[9][4])
  assert.are.equal(0, a[1][5])
  assert.are.equal(-INF, lumus.log_softmax(x, { dim = 1 }):to_table()[1][5])
  x:free()
end

-- Softmax over the last dim of `rows` (>= 6) rows of d: special_columns' cases along rows
-- (row 2 ends in NaN, row 3 starts with +inf, row 4 only -inf: all NaN; row 5 -inf in
-- every other place: 0, log -inf; row 6 one dominant entry). Checks the reference, NaN
-- where PyTorch gives NaN, and that two runs agree bit for bit.
function M.special_rows(rows, d)
  local xt = {}
  for i = 1, rows do
    xt[i] = {}
    for k = 1, d do xt[i][k] = math.sin(i * 0.37 + k) * 3 end
  end
  xt[2][d] = NAN
  xt[3][1] = INF
  for k = 1, d do xt[4][k] = -INF end
  for k = 1, d, 2 do xt[5][k] = -INF end
  xt[6][d] = 80
  local x = lumus.tensor(xt)
  M.check_both(x, xt, {}, "special rows of " .. d)
  local a, b = lumus.softmax(x):to_table(), lumus.softmax(x):to_table()
  for i = 1, rows do
    for k = 1, d do
      if a[i][k] == a[i][k] then assert.are.equal(a[i][k], b[i][k]) end
    end
  end
  assert.is_true(a[2][1] ~= a[2][1] and a[3][d] ~= a[3][d] and a[4][1] ~= a[4][1])
  assert.are.equal(0, a[5][1])
  assert.are.equal(-INF, lumus.log_softmax(x):to_table()[5][1])
  x:free()
end

-- check_dtype on each {rows, d} of `cases`, x uniform in [-15, 15) from generator g.
function M.check_cases(cases, dtype, g)
  for _, c in ipairs(cases) do
    local x = lumus.tensor(ref.random_table(c, function() return (g.uniform() - 0.5) * 30 end))
    M.check_dtype(x, dtype, table.concat(c, "x"))
    x:free()
  end
end

-- softmax and log_softmax of x (float32) in dtype against the reference: float32 as
-- check_both; float16 and bfloat16 against the reference of the rounded inputs with one
-- rounding of the output allowed on top (2^-11 and 2^-8 relative, log_softmax against
-- max(1, |want|)).
M.half_rel = { float16 = 2 ^ -11 + 1e-5, bfloat16 = 2 ^ -8 + 1e-5 }
function M.check_dtype(x, dtype, what)
  if dtype == "float32" then
    M.check_both(x, x:to_table(), {}, what)
    return
  end
  local h = x:to(dtype)
  local xt = h:float():to_table()   -- the rounded inputs
  local rel = M.half_rel[dtype]
  checks.close(lumus.softmax(h):float(), ref.softmax(xt), { rel = rel, abs = 1e-7, what = dtype .. " softmax " .. what })
  checks.close(lumus.log_softmax(h):float(), ref.log_softmax(xt), { mixed = rel, what = dtype .. " log_softmax " .. what })
  h:free()
end

return M
