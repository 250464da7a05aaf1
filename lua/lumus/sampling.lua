--- lumus.sample: next-token sampling on the device, from existing kernels.
--
--   local ids = lumus.sample(logits [, {greedy =, temperature = 1, top_k =, top_p =}])
--
-- logits: float32 [N, V] (or [V], one row). Returns int32 [N] of 1-based ids, on the device:
-- reading one id back is a 4-byte transfer.
--   greedy = true (or temperature = 0, or top_k = 1): lumus.argmax over each row (no
--     random numbers drawn).
--   otherwise: softmax(logits / temperature), restricted to the top_k largest logits when
--     top_k is given, then to the nucleus when top_p is given (the fewest most likely
--     candidates whose probability mass reaches top_p: candidate i, best first, is kept
--     while the mass of the candidates before it is below top_p; the best one always is),
--     renormalized, and one id drawn per row by lumus.multinomial from the global
--     Philox stream (lumus.manual_seed / get_rng_state fix it).
-- top_p without top_k considers the best min(V, 1024) candidates (lumus.topk's limit):
-- the nucleus is exact whenever those hold at least top_p of the mass, else it is cut at
-- 1024 candidates.
-- Dispatches per call: argmax (1) for greedy; scale, softmax, multinomial without top_k or
-- top_p; with them topk, softmax, [matmul, lt, where,] multinomial, gather.
-- lumus.reference.sample_distribution(logits, opts) is the float64 distribution drawn from.
local M = {}

local TOPK_MAX = 1024

local KNOWN = { greedy = true, temperature = true, top_k = true, top_p = true }

-- (not a parameter named arg: Lua 5.1 gives a vararg function's `arg` to its extra arguments)
local function fail(argn, fmt, ...)
  error(("bad argument #%d to 'sample' (%s)"):format(argn, fmt:format(...)), 3)
end

-- The options, checked; returns greedy, temperature, top_k (or nil), top_p (or nil).
local function read_options(opts, v)
  if opts == nil then return false, 1, nil, nil end
  if type(opts) ~= "table" then fail(2, "options must be a table, got %s", type(opts)) end
  for k in pairs(opts) do
    if not KNOWN[k] then
      error(("sample: unknown option '%s' (known: greedy, temperature, top_k, top_p)"):format(tostring(k)), 3)
    end
  end
  local greedy = opts.greedy
  if greedy == nil then greedy = false end
  if type(greedy) ~= "boolean" then fail(2, "option greedy must be a boolean, got %s", type(greedy)) end
  local t = opts.temperature
  if t == nil then t = 1 end
  if type(t) ~= "number" or not (t >= 0) or t == math.huge then
    fail(2, "option temperature must be a finite number >= 0, got %s", tostring(t))
  end
  local k = opts.top_k
  if k ~= nil then
    if type(k) ~= "number" or k ~= math.floor(k) or k < 1 then
      fail(2, "option top_k must be a positive integer, got %s", tostring(k))
    end
    k = math.floor(math.min(k, v))
    if k > TOPK_MAX then fail(2, "option top_k must be at most %d, got %d", TOPK_MAX, k) end
  end
  local p = opts.top_p
  if p ~= nil and (type(p) ~= "number" or not (p > 0 and p <= 1)) then
    fail(2, "option top_p must be a number in (0, 1], got %s", tostring(p))
  end
  if p == 1 then p = nil end
  return greedy or t == 0 or k == 1, t, k, p
end

-- strict_lower[k]: the [k, k] float32 matrix with 1 where row < column, so that
-- probs [N, k] x it = the mass of the candidates before each one (an exclusive cumsum).
local strict_lower = setmetatable({}, { __mode = "v" })

local function exclusive_cumsum_matrix(lumus, k)
  local m = strict_lower[k]
  if m == nil or m:is_freed() then
    local r = lumus.arange(1, k + 1, { dtype = "float32" }):view({ k, 1 })
    local c = lumus.arange(1, k + 1, { dtype = "float32" }):view({ 1, k })
    m = lumus.where(lumus.lt(r, c), 1, 0)
    strict_lower[k] = m
  end
  return m
end

function M.attach(lumus)
  local Tensor = lumus.Tensor

  function lumus.sample(logits, opts)
    if getmetatable(logits) ~= Tensor then fail(1, "logits must be a tensor, got %s", type(logits)) end
    local nd = logits:dim()
    if nd ~= 1 and nd ~= 2 then
      fail(1, "logits must be [N, V] or [V], got shape %s", table.concat(logits:shape(), "x"))
    end
    if logits:dtype() ~= "float32" then fail(1, "logits must be float32, got %s", logits:dtype()) end
    local x = nd == 1 and logits:view({ 1, logits:size(1) }) or logits
    local n, v = x:size(1), x:size(2)
    local greedy, t, k, p = read_options(opts, v)
    if greedy then return lumus.argmax(x, { dim = 2 }) end
    local scaled = t == 1 and x or lumus.scale(x, 1 / t)
    if k == nil and p == nil then
      local probs = lumus.softmax(scaled)
      local ids = lumus.multinomial(probs, 1):view({ n })
      if scaled ~= x then scaled:free() end
      probs:free()
      return ids
    end
    k = k or math.min(v, TOPK_MAX)
    local vals, idx = lumus.topk(scaled, k)
    if scaled ~= x then scaled:free() end
    local probs = lumus.softmax(vals)
    vals:free()
    if p ~= nil then
      local before = lumus.matmul(probs, exclusive_cumsum_matrix(lumus, k))
      local keep = lumus.lt(before, p)
      local kept = lumus.where(keep, probs, 0)
      before:free(); keep:free(); probs:free()
      probs = kept
    end
    local pos = lumus.multinomial(probs, 1)           -- [n, 1], 1..k
    local ids = lumus.gather(idx, 2, pos):view({ n })
    probs:free(); pos:free(); idx:free()
    return ids
  end
  -- a method too (logits:sample{...}), as every op whose first argument is a tensor
  lumus.Tensor.methods.sample = lumus.sample
end

return M
