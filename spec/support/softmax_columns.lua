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

return M
