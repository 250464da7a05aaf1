--- lumus.reference: plain-Lua float64 implementations, the ground truth the specs (and
-- users) check the GPU against. They work on nested Lua tables, are slow, and aim only
-- at being obviously right.
local M = {}

--- Shape of a nested table: {rows, ..., D}. Raises on ragged or empty tables.
function M.shape(t)
  local shape = {}
  local level = t
  while type(level) == "table" do
    assert(#level > 0, "reference.shape: empty table")
    shape[#shape + 1] = #level
    level = level[1]
  end
  return shape
end

--- All numbers of a nested table, in row-major order.
function M.flatten(t, out)
  out = out or {}
  if type(t) ~= "table" then out[#out + 1] = t; return out end
  for i = 1, #t do
    if type(t[i]) == "table" then M.flatten(t[i], out) else out[#out + 1] = t[i] end
  end
  return out
end

--- Maps f over every row (innermost table) of a nested table, keeping the nesting.
-- f(row) returns the new row and any number of per-row scalars, collected into
-- tables nested like the rows' parents.
local function map_rows(t, f)
  if type(t[1]) ~= "table" then
    local r = table.pack(f(t))
    return table.unpack(r, 1, r.n)
  end
  local outs = {}
  local n
  for i = 1, #t do
    local r = table.pack(map_rows(t[i], f))
    n = r.n
    for k = 1, r.n do outs[k] = outs[k] or {}; outs[k][i] = r[k] end
  end
  return table.unpack(outs, 1, n)
end

--- LayerNorm forward over the last dimension, in float64.
-- x: nested table (1-D: one row). weight, bias: lists of D numbers or nil. eps: 1e-5.
-- Returns y (nested like x), mean and invstd (nested like x without its last level;
-- for a 1-D x they are lists of one number, as lumus returns tensors of shape {1}).
-- Mean first, then the biased variance from the deviations (two-pass).
function M.layer_norm_forward(x, weight, bias, eps)
  eps = eps or 1e-5
  local function row_norm(row)
    local d = #row
    local s = 0
    for i = 1, d do s = s + row[i] end
    local mean = s / d
    local q = 0
    for i = 1, d do local dv = row[i] - mean; q = q + dv * dv end
    local invstd = 1 / math.sqrt(q / d + eps)
    local y = {}
    for i = 1, d do
      local v = (row[i] - mean) * invstd
      if weight then v = v * weight[i] end
      if bias then v = v + bias[i] end
      y[i] = v
    end
    return y, mean, invstd
  end
  if type(x[1]) ~= "table" then
    local y, m, r = row_norm(x)
    return y, {m}, {r}
  end
  return map_rows(x, row_norm)
end

--- Errors of `got` against `want` (nested or flat, same element count):
-- {max_abs=, max_rel=, rel_l2=}; max_rel divides by max(|want|, 1).
function M.compare(got, want)
  local a, b = M.flatten(got), M.flatten(want)
  assert(#a == #b, ("reference.compare: %d elements against %d"):format(#a, #b))
  local max_abs, max_rel, num, den = 0, 0, 0, 0
  for i = 1, #a do
    local e = math.abs(a[i] - b[i])
    if e ~= e then e = math.huge end          -- NaN counts as infinitely wrong
    if e > max_abs then max_abs = e end
    local r = e / math.max(math.abs(b[i]), 1)
    if r > max_rel then max_rel = r end
    num = num + e * e
    den = den + b[i] * b[i]
  end
  return { max_abs = max_abs, max_rel = max_rel, rel_l2 = math.sqrt(num / math.max(den, 1e-300)) }
end

--- A small deterministic generator (the same numbers under every Lua 5.4 build):
-- rng(seed)() gives uniform [0, 1); rng(seed).normal() a standard normal.
function M.rng(seed)
  local state = (seed or 1) & 0x7fffffff
  local gen = {}
  local function uniform()
    -- 31-bit linear congruential step (glibc's constants), then scale.
    state = (state * 1103515245 + 12345) & 0x7fffffff
    return state / 0x80000000
  end
  function gen.normal()
    local u1 = uniform()
    if u1 < 1e-12 then u1 = 1e-12 end
    return math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * uniform())
  end
  gen.uniform = uniform
  return setmetatable(gen, { __call = function() return uniform() end })
end

--- Rounds to the nearest float32, as the GPU stores it.
function M.f32(v) return (string.unpack("<f", string.pack("<f", v))) end

--- A nested table of this shape filled by f(), each value rounded to float32.
function M.random_table(shape, f, level)
  level = level or 1
  local t = {}
  for i = 1, shape[level] do
    t[i] = level == #shape and M.f32(f()) or M.random_table(shape, f, level + 1)
  end
  return t
end

return M
