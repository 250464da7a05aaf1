-- Numeric comparison and error checks shared by the specs. Loaded with dofile from the
-- repository root, where busted runs:
--
--   local checks = dofile("spec/support/check.lua")
--   checks.close(y, want, { mixed = 1e-4, rel_l2 = 1e-5, what = "y" })
--   local msg = checks.errors(lumus.matmul, "#2.*must be K", a, b)
--
-- close(got, want [, opts]) compares element by element, got a tensor, a nested table or
-- a flat list, want the float64 reference as a nested table or flat list: the same
-- shape when both are nested, else the same count of elements. Element i passes when
--   |got_i - want_i| <= rel * |want_i| + abs_i + mixed * max(1, |want_i|)
-- with opts.rel, opts.abs (a number, or a flat list of per-element bounds) and
-- opts.mixed all 0 by default (so the default is exact equality). A NaN in want passes
-- only against a NaN; an infinity only against the same infinity; a NaN or infinity in
-- got where want is finite fails whatever the bound. opts.rel_l2 also bounds the
-- relative L2 error sqrt(sum e^2 / sum want^2) over the finite references. opts.what
-- names the values in the message, which reports the element with the largest
-- error-to-bound ratio (index, got, want, error, bound) and how many elements failed.
-- Returns the statistics, as lumus.reference.compare does:
--   { n =, max_abs =, max_rel = (max of e / max(1, |want|)), rel_l2 =, worst = (index of
--     max_abs) }
local ref = require "lumus.reference"
local compat = require "lumus.compat"

local M = {}

local abs, huge, sqrt = math.abs, math.huge, math.sqrt

-- A flat list of numbers from a tensor, a nested table or a flat list.
function M.flat(v)
  if type(v) ~= "table" then v = v:to_table() end
  if type(v[1]) == "table" then return ref.flatten(v) end
  return v
end

local function fail(msg) error(msg, 3) end

function M.close(got, want, opts)
  opts = opts or {}
  local what = opts.what or "values"
  local rel, mixed = opts.rel or 0, opts.mixed or 0
  local abs_tol = opts.abs or 0
  local abs_list = type(abs_tol) == "table" and abs_tol or nil
  if type(got) ~= "table" then got = got:to_table() end
  if type(got[1]) == "table" and type(want[1]) == "table" then
    local gs, ws = table.concat(ref.shape(got), "x"), table.concat(ref.shape(want), "x")
    if gs ~= ws then fail(("%s: shape %s, want %s"):format(what, gs, ws)) end
  end
  local g, w = M.flat(got), M.flat(want)
  if #g ~= #w then fail(("%s: %d elements, want %d"):format(what, #g, #w)) end
  if abs_list and #abs_list ~= #w then
    fail(("%s: %d per-element bounds for %d elements"):format(what, #abs_list, #w))
  end
  local max_abs, max_rel, sq_err, sq_ref, worst = 0, 0, 0, 0, 1
  local bad, worst_bad, worst_ratio, worst_bound, worst_e = 0, nil, -1, 0, 0
  for i = 1, #w do
    local x, y = g[i], w[i]
    local e
    if x == y or (x ~= x and y ~= y) then
      e = 0
    else
      e = abs(x - y)
      if e ~= e or e == huge then e = huge end   -- NaN on one side, or unmatched infinity
    end
    if e > max_abs then max_abs, worst = e, i end
    local scale = abs(y)
    if scale ~= scale or scale == huge or scale < 1 then scale = 1 end
    if e / scale > max_rel then max_rel = e / scale end
    sq_err = sq_err + e * e
    if y == y and abs(y) ~= huge then sq_ref = sq_ref + y * y end
    if e > 0 then
      local bound = rel * abs(y) + (abs_list and abs_list[i] or abs_tol) + mixed * scale
      if e == huge or not (e <= bound) then
        bad = bad + 1
        local ratio = bound > 0 and e / bound or huge
        if ratio > worst_ratio or (ratio == worst_ratio and e > worst_e) then
          worst_bad, worst_ratio, worst_bound, worst_e = i, ratio, bound, e
        end
      end
    end
  end
  local rel_l2 = sq_err == 0 and 0 or (sq_ref == 0 and huge or sqrt(sq_err / sq_ref))
  if bad > 0 then
    local i = worst_bad
    fail(("%s: %d of %d elements out of bounds; worst: element %d is %.9g, want %.9g (error %.3g > bound %.3g)")
      :format(what, bad, #w, i, g[i], w[i], worst_e, worst_bound))
  end
  if opts.rel_l2 and not (rel_l2 <= opts.rel_l2) then
    fail(("%s: relative L2 error %.3g > %.3g"):format(what, rel_l2, opts.rel_l2))
  end
  return { n = #w, max_abs = max_abs, max_rel = max_rel, rel_l2 = rel_l2, worst = worst }
end

-- The message (a string) of the error that fn(...) raises; fails if it raises none.
function M.error_of(fn, ...)
  local ok, e = pcall(fn, ...)
  if ok then fail("expected an error, got none") end
  return tostring(e)
end

-- Like error_of, and the message must contain the Lua pattern `pattern` (nil: any
-- message). Returns the message.
function M.errors(fn, pattern, ...)
  local ok, e = pcall(fn, ...)
  if ok then fail(("expected an error matching %q, got none"):format(tostring(pattern))) end
  e = tostring(e)
  if pattern ~= nil and not e:find(pattern) then fail(("message %q lacks %q"):format(e, pattern)) end
  return e
end

-- Collects garbage until lumus's device allocations and memory in use stop changing:
-- earlier specs' garbage gone, for a baseline (a tensor's finalizer may free what another
-- cycle's finalizer then releases; Lua 5.1 and LuaJIT may need more than two cycles).
-- Returns the settled allocation count and bytes in use.
function M.settle()
  local lumus = require "lumus"
  local m, last
  repeat
    last = m
    collectgarbage(); collectgarbage()
    lumus.synchronize()
    m = lumus.memory()
  until last and last.allocations == m.allocations and last.in_use == m.in_use
  return m.allocations, m.in_use
end

-- n float32 values of tensor t from 1-based element `first` (default: all of t), read
-- with to_bytes: cheaper than to_table for a sample of a large tensor.
function M.floats(t, first, n)
  first = first or 1
  n = n or t:numel() - first + 1
  return compat.unpack_bytes("f32", t:to_bytes(first, n), 1, n)
end

-- Exact equality of two flat lists, NaN matching NaN; `what` names the check.
function M.same_values(got, want, what)
  for i = 1, #want do
    local g, w = got[i], want[i]
    if w ~= w then
      if g == g then fail(what .. ": entry " .. i .. " should be NaN, got " .. tostring(g)) end
    elseif g ~= w then
      fail(what .. ": entry " .. i .. " is " .. tostring(g) .. ", want " .. tostring(w))
    end
  end
end

return M
