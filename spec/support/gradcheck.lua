-- Gradient checks against central finite differences of the float64 reference.
-- Loaded with dofile from the repository root:
--
--   local gc = dofile("spec/support/gradcheck.lua")
--   gc.check("exp", lumus.exp, ref.exp, { { 3, 4 } })
--   gc.op("exp", { { 3, 4 } })                       -- lumus.exp against ref.exp
--   gc.check("where", lumus.where, ref.where, { gc.const(mask, mask_table), { 3, 4 }, { 4 } })
--
-- check(what, gpu_f, ref_f, inputs [, opts]): each input is
--   a shape ({3, 4})              random float32 values (standard normal), requires grad;
--   gc.input(shape, gen)          likewise with values gen(rng) (rounded to float32);
--   gc.const(tensor, value)       passed as is to gpu_f, `value` to ref_f (no gradient);
--   a number                      passed to both;
--   nil                           passed to both (give inputs.n then: { {3, 4}, nil, 0.3, n = 3 }).
-- gpu_f(...) runs on tensors that require grad; its first result y gets y:backward(c) for
-- a random c of y's shape (float32 values). For every differentiable input x the GPU's
-- x:grad() is compared with (L(x + h e_i) - L(x - h e_i)) / 2h, L(x) = sum(c * ref_f(...))
-- in float64 (ref_f's results are nested tables, flat lists or numbers). With h = 1e-4
-- (opts.h) the difference's truncation error is O(h^2 f''') ~ 1e-8 and its rounding
-- ~1e-12, so what remains is the GPU's float32 arithmetic: element i passes when
--   |grad_i - fd_i| <= tol * max(1, |fd_i|)      (opts.tol, default 2e-5)
-- The inputs are float32 values and ref_f sees exactly those, so forward and reference
-- differentiate at the same point.
local lumus = require "lumus"
local ref = require "lumus.reference"
local compat = require "lumus.compat"
local checks = dofile("spec/support/check.lua")

-- Wrapping starts at the first requires_grad(true) (lua/lumus/autograd.lua): do it now,
-- before a spec takes lumus.exp and friends as values.
lumus.ones({ 1 }):requires_grad(true)

local M = { TOL = 2e-5, H = 1e-4 }

local INPUT, CONST = {}, {}

function M.input(shape, gen) return { [INPUT] = true, shape = shape, gen = gen } end
function M.const(value, ref_value) return { [CONST] = true, value = value, ref = ref_value } end

-- A seed from the name, so each check draws its own values and repeats them.
local function seed_of(what)
  local h = 7
  for i = 1, #what do h = (h * 31 + what:byte(i)) % 2147483647 end
  return h
end

local function normal(rng) return rng.normal() end

-- Values of magnitude at least `lo` (away from a kink at 0).
function M.away(lo)
  return function(rng)
    local v = rng.normal()
    if math.abs(v) < lo then v = v < 0 and v - lo or v + lo end
    return v
  end
end
-- Positive values in [lo, lo + |normal|).
function M.positive(lo)
  lo = lo or 0.5
  return function(rng) return math.abs(rng.normal()) + lo end
end

local function flat_result(v)
  if type(v) == "number" then return { v } end
  if type(v[1]) == "table" then return ref.flatten(v) end
  return v
end

function M.check(what, gpu_f, ref_f, inputs, opts)
  opts = opts or {}
  local h, tol = opts.h or M.H, opts.tol or M.TOL
  local rng = ref.rng(seed_of(what))
  local n = inputs.n or #inputs
  local gpu_args, ref_args, diff = {}, {}, {}
  for i = 1, n do
    local v = inputs[i]
    if v == nil or type(v) == "number" then
      gpu_args[i], ref_args[i] = v, v
    elseif v[CONST] then
      gpu_args[i], ref_args[i] = v.value, v.ref
    else
      local shape, gen = v, normal
      if v[INPUT] then shape, gen = v.shape, v.gen or normal end
      local values = ref.random_table(shape, function() return ref.f32(gen(rng)) end)
      gpu_args[i] = lumus.tensor(values):requires_grad(true)
      ref_args[i] = values
      diff[#diff + 1] = i
    end
  end
  local y = gpu_f(compat.unpack(gpu_args, 1, n))
  assert(y:requires_grad(), what .. ": the result does not require grad")
  local c = ref.random_table(y:shape(), function() return ref.f32(rng.normal()) end)
  local fc = ref.flatten(c)
  y:backward(lumus.tensor(c))
  local function loss(args)
    local out = flat_result(ref_f(compat.unpack(args, 1, n)))
    assert(#out == #fc, ("%s: the reference gives %d values, the GPU %d"):format(what, #out, #fc))
    local s = 0
    for k = 1, #out do s = s + fc[k] * out[k] end
    return s
  end
  for _, i in ipairs(diff) do
    local x = ref_args[i]
    local shape = ref.shape(x)
    local flat = ref.flatten(x)
    local fd = {}
    local args = { compat.unpack(ref_args, 1, n) }
    for k = 1, #flat do
      local saved = flat[k]
      flat[k] = saved + h
      args[i] = ref.nest(flat, shape)
      local up = loss(args)
      flat[k] = saved - h
      args[i] = ref.nest(flat, shape)
      local down = loss(args)
      flat[k] = saved
      fd[k] = (up - down) / (2 * h)
    end
    local g = gpu_args[i]:grad()
    assert(g, ("%s: input %d has no gradient"):format(what, i))
    local gs = g:shape()
    assert(table.concat(gs, "x") == table.concat(shape, "x"),
      ("%s: gradient %d has shape %s, the input %s"):format(what, i, table.concat(gs, "x"), table.concat(shape, "x")))
    checks.close(g, fd, { mixed = tol, what = ("%s: d/d input %d"):format(what, i) })
  end
  return gpu_args
end

--- check() of lumus[name] against ref[name], with the same extra arguments for both.
function M.op(name, inputs, opts)
  return M.check(name, lumus[name], ref[name], inputs, opts)
end

return M
