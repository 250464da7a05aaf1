-- The LayerNorm forward check the form specs share: `rows` rows of d normal values
-- around 2 (weight and bias when how.affine; in place when how.in_place; outputs out of
-- place start as NaN so an element left unwritten shows) against the float64 reference.
-- Tolerances: y within 1e-4 * max(1, |ref|) per element and 1e-5 relative L2, mean within
-- 1e-5 * max(1, |ref|), invstd within 1e-4 relative. Returns nil, or a message naming
-- what is off.
local lumus = require "lumus"
local ref = require "lumus.reference"

local Y_REL_L2, Y_MAX, MEAN_MAX, INVSTD_REL = 1e-5, 1e-4, 1e-5, 1e-4
local NAN = 0 / 0

local M = {}

function M.mismatch(rows, d, rng, how)
  local xt = ref.random_table({ rows, d }, function() return 2 + rng.normal() end)
  local wt, bt
  if how.affine then
    wt = ref.random_table({ d }, function() return 1 + 0.5 * rng.normal() end)
    bt = ref.random_table({ d }, function() return rng.normal() end)
  end
  local x = lumus.tensor(xt)
  local w, b = wt and lumus.tensor(wt), bt and lumus.tensor(bt)
  local y = how.in_place and x or lumus.full({ rows, d }, NAN)
  local m, r = lumus.full({ rows }, NAN), lumus.full({ rows }, NAN)
  lumus.layer_norm_forward(x, w, b, 1e-5, { out = y, mean = m, invstd = r })
  local gy, gm, gr = y:to_table(), m:to_table(), r:to_table()
  for _, t in ipairs { x, y, m, r, w, b } do t:free() end
  local wy, wm, wr = ref.layer_norm_forward(xt, wt, bt, 1e-5)
  local cy = ref.compare(gy, wy)
  if not (cy.max_rel <= Y_MAX and cy.rel_l2 <= Y_REL_L2) then
    return ("y: max error %.3g, relative L2 %.3g"):format(cy.max_rel, cy.rel_l2)
  end
  local cm = ref.compare(gm, wm)
  if not (cm.max_rel <= MEAN_MAX) then return ("mean: max error %.3g"):format(cm.max_rel) end
  for i = 1, rows do
    local e = math.abs(gr[i] / wr[i] - 1)
    if not (e <= INVSTD_REL) then return ("invstd: relative error %.3g at row %d"):format(e, i) end
  end
end

return M
