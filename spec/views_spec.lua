-- Strided views sharing storage: each view against the same view taken of the nested
-- table by the helpers below, views of views, writes through views, lifetimes, errors by
-- message, and non-contiguous inputs to every op against lumus.reference.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

-- ---- views of nested tables (the expectations) ----

local function get(t, idx)
  for i = 1, #idx do t = t[idx[i]] end
  return t
end

-- A nested table of `shape` whose element at index list idx is f(idx).
local function build(shape, f)
  local idx = {}
  local function level(d)
    local r = {}
    for i = 1, shape[d] do
      idx[d] = i
      if d == #shape then r[i] = f(idx) else r[i] = level(d + 1) end
    end
    return r
  end
  return level(1)
end

local function copy_list(l) local r = {} for i = 1, #l do r[i] = l[i] end return r end

local T = {}
function T.permute(t, perm)
  local s = ref.shape(t)
  local ns = {}
  for i = 1, #perm do ns[i] = s[perm[i]] end
  return build(ns, function(idx)
    local b = {}
    for i = 1, #perm do b[perm[i]] = idx[i] end
    return get(t, b)
  end)
end
function T.transpose(t, a, b)
  local n = #ref.shape(t)
  local perm = {}
  for i = 1, n do perm[i] = i end
  perm[a], perm[b] = perm[b], perm[a]
  return T.permute(t, perm)
end
function T.narrow(t, d, start, len)
  local s = copy_list(ref.shape(t))
  s[d] = len
  return build(s, function(idx)
    local b = copy_list(idx)
    b[d] = b[d] + start - 1
    return get(t, b)
  end)
end
function T.select(t, d, i)
  local s = copy_list(ref.shape(t))
  table.remove(s, d)
  return build(s, function(idx)
    local b = copy_list(idx)
    table.insert(b, d, i)
    return get(t, b)
  end)
end
function T.expand(t, sizes)
  local s = ref.shape(t)
  local lead = #sizes - #s
  local ns = {}
  for i = 1, #sizes do ns[i] = sizes[i] == -1 and s[i - lead] or sizes[i] end
  return build(ns, function(idx)
    local b = {}
    for i = 1, #s do b[i] = s[i] == 1 and 1 or idx[i + lead] end
    return get(t, b)
  end)
end
function T.reshape(t, shape) return ref.nest(ref.flatten(t), shape) end
function T.unsqueeze(t, d)
  local s = copy_list(ref.shape(t))
  table.insert(s, d, 1)
  return T.reshape(t, s)
end

local function random(shape, seed) return ref.random_table(shape, ref.rng(seed)) end
local function same(got, want, what) checks.close(got, want, { what = what }) end

-- A non-contiguous tensor equal to `want` (nested): the transpose of a contiguous
-- tensor holding want transposed in its last two dimensions (1-D: a narrow of a
-- larger tensor with a stride of 2 through a 2-D view).
local function strided(want)
  local s = ref.shape(want)
  if #s == 1 then
    local wide = build({ s[1], 2 }, function(idx) return idx[2] == 1 and want[idx[1]] or 0 / 0 end)
    local v = lumus.tensor(wide):select(2, 1)
    assert.is_false(v:is_contiguous())
    return v
  end
  local v = lumus.tensor(T.transpose(want, #s - 1, #s)):transpose(-2, -1)
  if s[#s] > 1 and s[#s - 1] > 1 then assert.is_false(v:is_contiguous()) end
  return v
end

describe("views", function()
  local base_t = random({ 3, 4, 5 }, 1)

  it("transpose, permute, narrow, select, expand, unsqueeze, squeeze match the table views", function()
    local x = lumus.tensor(base_t)
    same(x:transpose(1, 3), T.transpose(base_t, 1, 3), "transpose(1, 3)")
    same(x:transpose(-1, 2), T.transpose(base_t, 3, 2), "transpose(-1, 2)")
    same(x:permute({ 3, 1, 2 }), T.permute(base_t, { 3, 1, 2 }), "permute")
    same(x:permute({ -1, -3, -2 }), T.permute(base_t, { 3, 1, 2 }), "permute negative")
    same(x:narrow(2, 2, 3), T.narrow(base_t, 2, 2, 3), "narrow(2, 2, 3)")
    same(x:narrow(-1, 5, 1), T.narrow(base_t, 3, 5, 1), "narrow(-1, 5, 1)")
    same(x:select(1, 3), T.select(base_t, 1, 3), "select(1, 3)")
    same(x:select(3, 2), T.select(base_t, 3, 2), "select(3, 2)")
    same(x:select(2, -1), T.select(base_t, 2, 4), "select(2, -1)")
    local col = x:narrow(3, 1, 1)                          -- [3, 4, 1]
    same(col:expand({ 3, 4, 6 }), T.expand(T.narrow(base_t, 3, 1, 1), { 3, 4, 6 }), "expand")
    same(col:expand({ 2, -1, -1, 3 }), T.expand(T.narrow(base_t, 3, 1, 1), { 2, 3, 4, 3 }), "expand leading")
    same(x:unsqueeze(2), T.unsqueeze(base_t, 2), "unsqueeze(2)")
    same(x:unsqueeze(-1), T.unsqueeze(base_t, 4), "unsqueeze(-1)")
    assert.same({ 3, 4 }, col:squeeze():shape())
    assert.same({ 3, 4 }, col:squeeze(3):shape())
    assert.same({ 3, 4, 1 }, col:squeeze(1):shape())      -- not size 1: unchanged
    assert.same({ 1 }, lumus.tensor({ { 5 } }):squeeze():shape())
    same(col:squeeze(), T.select(base_t, 3, 1), "squeeze")
  end)

  it("reports strides and contiguity", function()
    local x = lumus.tensor(base_t)
    assert.same({ 20, 5, 1 }, x:stride())
    assert.equal(5, x:stride(2))
    assert.equal(1, x:stride(-1))
    assert.is_true(x:is_contiguous())
    local t = x:transpose(1, 3)
    assert.same({ 1, 5, 20 }, t:stride())
    assert.is_false(t:is_contiguous())
    assert.same({ 0, 5, 1 }, x:narrow(1, 1, 1):expand({ 7, 4, 5 }):stride())
    assert.is_true(x:narrow(1, 2, 2):is_contiguous())       -- rows of a contiguous tensor
    assert.is_false(x:narrow(3, 2, 2):is_contiguous())
    local c = t:contiguous()
    assert.is_true(c:is_contiguous())
    same(c, T.transpose(base_t, 1, 3), "contiguous")
    assert.equal(x, x:contiguous())                         -- self when contiguous
  end)

  it("chains views of views on a seeded random walk", function()
    local g = ref.rng(7)
    local function pick(n) return 1 + math.floor(g() * n) end
    for trial = 1, 40 do
      local want = random({ 4, 3, 5 }, 100 + trial)
      local got = lumus.tensor(want)
      local steps = {}
      for _ = 1, 4 do
        local s = ref.shape(want)
        local n = #s
        local kind = pick(5)
        if kind == 1 and n >= 2 then
          local a, b = pick(n), pick(n)
          got, want = got:transpose(a, b), T.transpose(want, a, b)
          steps[#steps + 1] = ("transpose(%d,%d)"):format(a, b)
        elseif kind == 2 then
          local d = pick(n)
          local start = pick(s[d])
          local len = pick(s[d] - start + 1)
          got, want = got:narrow(d, start, len), T.narrow(want, d, start, len)
          steps[#steps + 1] = ("narrow(%d,%d,%d)"):format(d, start, len)
        elseif kind == 3 and n >= 2 then
          local d = pick(n)
          local i = pick(s[d])
          got, want = got:select(d, i), T.select(want, d, i)
          steps[#steps + 1] = ("select(%d,%d)"):format(d, i)
        elseif kind == 4 and n < 5 then
          local d = pick(n + 1)
          got, want = got:unsqueeze(d), T.unsqueeze(want, d)
          steps[#steps + 1] = ("unsqueeze(%d)"):format(d)
        else
          local perm, left = {}, {}
          for i = 1, n do left[i] = i end
          for i = 1, n do perm[i] = table.remove(left, pick(#left)) end
          got, want = got:permute(perm), T.permute(want, perm)
          steps[#steps + 1] = "permute{" .. table.concat(perm, ",") .. "}"
        end
      end
      local what = table.concat(steps, ":")
      same(got, want, what)
      same(got:contiguous(), want, what .. ":contiguous()")
      local flat = ref.flatten(want)
      same(got:reshape({ #flat }), flat, what .. ":reshape")
      same(got + 0, want, what .. " + 0")
    end
  end)

  it("view needs compatible strides and names why; reshape copies then", function()
    local x = lumus.tensor(base_t)
    same(x:view({ 12, 5 }), T.reshape(base_t, { 12, 5 }), "view")
    same(x:view({ -1 }), ref.flatten(base_t), "view(-1)")
    local n = x:narrow(3, 1, 4)                             -- [3, 4, 4], row stride 5
    same(n:view({ 3, 2, 2, 4 }), T.reshape(T.narrow(base_t, 3, 1, 4), { 3, 2, 2, 4 }), "split a dim")
    local e = checks.errors(n.view, "cannot view a tensor of size 3x4x4 and strides 20x5x1 as 48: the dimensions it merges are not contiguous", n, { 48 })
    assert.matches("use reshape", e)
    same(n:reshape({ 48 }), ref.flatten(T.narrow(base_t, 3, 1, 4)), "reshape copies")
    local t = x:transpose(2, 3)
    checks.errors(t.view, "#2.*cannot view", t, { 60 })
    same(t:reshape({ 3, 20 }), T.reshape(T.transpose(base_t, 2, 3), { 3, 20 }), "reshape of transpose")
    -- a view of a view of a transposed tensor: merge the dims that stay contiguous
    local p = x:permute({ 2, 3, 1 })                         -- strides 5, 1, 20
    same(p:view({ 20, 3 }), T.reshape(T.permute(base_t, { 2, 3, 1 }), { 20, 3 }), "merge contiguous dims")
  end)

  it("shares storage: writes through a view reach the base and other views", function()
    local x = lumus.zeros({ 4, 6 })
    x:narrow(2, 3, 2):fill(5)
    x:select(1, 2):fill(-1)
    local want = build({ 4, 6 }, function(i)
      if i[1] == 2 then return -1 end
      return (i[2] == 3 or i[2] == 4) and 5 or 0
    end)
    same(x, want, "fill through views")
    local t = x:transpose(1, 2)
    t:select(1, 6):copy(lumus.tensor({ 1, 2, 3, 4 }))        -- column 6 of x
    for r = 1, 4 do want[r][6] = r end
    same(x, want, "copy into a transposed view")
    same(t, T.transpose(want, 1, 2), "the other view sees it")
    -- KV-cache style: a row written in place, and a broadcast copy into a block
    local cache = lumus.zeros({ 5, 3 })
    for p = 1, 5 do cache:narrow(1, p, 1):copy(lumus.tensor({ { p, p * 10, p * 100 } })) end
    same(cache, build({ 5, 3 }, function(i) return i[1] * (10 ^ (i[2] - 1)) end), "KV cache rows")
    cache:narrow(1, 2, 3):copy(lumus.tensor({ 7, 8, 9 }))   -- broadcast over rows
    same(cache:narrow(1, 2, 3), { { 7, 8, 9 }, { 7, 8, 9 }, { 7, 8, 9 } }, "broadcast copy")
    assert.equal(cache, cache:copy(cache))                  -- returns self
  end)

  it("copy: dst:copy(src) and lumus.copy(dst, src) write into dst; lumus.copy(t) clones", function()
    local a, b = lumus.zeros({ 2, 3 }), lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.equal(a, lumus.copy(a, b))
    same(a, { { 1, 2, 3 }, { 4, 5, 6 } }, "lumus.copy(a, b)")
    local c = lumus.copy(b:transpose(1, 2))
    assert.is_true(c:is_contiguous())
    same(c, { { 1, 4 }, { 2, 5 }, { 3, 6 } }, "clone of a view")
    b:fill(0)
    same(c, { { 1, 4 }, { 2, 5 }, { 3, 6 } }, "the clone owns its storage")
    local out = lumus.zeros({ 3, 4 })
    lumus.copy(a:transpose(1, 2), { out = out:narrow(2, 2, 2) })
    same(out, { { 0, 1, 4, 0 }, { 0, 2, 5, 0 }, { 0, 3, 6, 0 } }, "copy with out= a view")
    checks.errors(a.copy, "#2.*source of shape 2 does not fit a destination of shape 2x3", lumus.zeros({ 2, 3 }), lumus.zeros({ 2 }))
    local x = lumus.zeros({ 4, 4 })
    checks.errors(x.copy, "overlaps the source", x:narrow(1, 1, 2), x:narrow(1, 2, 2))
    checks.errors(x.copy, "unknown option 'out'", x, x, { out = x })
  end)

  it("refuses to write into an expanded view", function()
    local e = lumus.zeros({ 1, 3 }):expand({ 4, 3 })
    checks.errors(e.fill, "expanded view %(dimension 1 has stride 0%)", e, 1)
    checks.errors(e.copy, "expanded view", e, lumus.zeros({ 4, 3 }))
    checks.errors(lumus.add, "#3.*out is an expanded view", lumus.zeros({ 4, 3 }), 1, { out = e })
  end)

  it("out of ops other than copy and fill must be contiguous", function()
    local x = lumus.zeros({ 4, 4 })
    checks.errors(lumus.relu, "#2.*out must be contiguous and 16%-byte aligned %(a view is written only by copy and fill",
      x, { out = x:transpose(1, 2) })
    checks.errors(lumus.matmul, "#3.*out must be contiguous", x, x, { out = x:transpose(1, 2) })
    -- contiguous but not 16-byte aligned (starts at element 1)
    local flat = lumus.zeros({ 9 })
    checks.errors(lumus.relu, "#2.*out must be contiguous and 16%-byte aligned", lumus.zeros({ 8 }), { out = flat:narrow(1, 2, 8) })
  end)

  it("lives while any view does; free() of a view drops only that handle", function()
    checks.settle()
    local before = lumus.memory().in_use
    local x = lumus.tensor(base_t)
    local v = x:transpose(1, 2):narrow(1, 2, 2)
    x:free()
    assert.is_true(x:is_freed())
    collectgarbage(); collectgarbage()
    same(v, T.narrow(T.transpose(base_t, 1, 2), 1, 2, 2), "view after the base's free")
    local w = v:select(1, 1)
    v:free()
    x = nil
    collectgarbage(); collectgarbage()
    same(w, T.select(T.narrow(T.transpose(base_t, 1, 2), 1, 2, 2), 1, 1), "view of a freed view")
    checks.errors(v.transpose, "tensor has been freed", v, 1, 2)
    w:free()
    collectgarbage(); collectgarbage()
    assert.equal(before, lumus.memory().in_use)      -- the storage went with the last view
  end)

  it("names bad dims and sizes", function()
    local x = lumus.zeros({ 2, 3 })
    checks.errors(x.transpose, "#2.*dimension 3 out of range %(the tensor has 2; dims are 1%-based, %-1 is the last%)", x, 3, 1)
    checks.errors(x.transpose, "#3.*dimension %-3 out of range", x, 1, -3)
    checks.errors(x.transpose, "#2.*dimension 0 out of range", x, 0, 1)
    checks.errors(x.permute, "#2.*expected 2 dimensions", x, { 1 })
    checks.errors(x.permute, "#2.*dimension 1 appears twice", x, { 1, 1 })
    checks.errors(x.permute, "#2.*entry 2: dimension 5 out of range", x, { 1, 5 })
    checks.errors(x.narrow, "#3.*start 4 out of range %(dimension 2 has size 3", x, 2, 4, 1)
    checks.errors(x.narrow, "#4.*length 3 out of range %(1 to 2 from start 2", x, 2, 2, 3)
    checks.errors(x.narrow, "#4.*length 0 out of range", x, 1, 1, 0)
    checks.errors(x.select, "#3.*index 3 out of range %(dimension 1 has size 2", x, 1, 3)
    checks.errors(x.select, "cannot select from a 1%-D tensor", lumus.zeros({ 3 }), 1, 1)
    checks.errors(x.expand, "#2.*size 2: cannot expand dimension 2 of size 3 to 4 %(only size%-1 dimensions expand", x, { 2, 4 })
    checks.errors(x.expand, "#2.*expected 2 to 8 sizes for a 2%-D tensor, got 1", x, { 2 })
    checks.errors(x.expand, "#2.*size 1: a new leading dimension needs a positive size", x, { -1, 2, 3 })
    checks.errors(x.unsqueeze, "#2.*dimension 4 out of range %(1 to 3 for a 2%-D tensor", x, 4)
    checks.errors(x.squeeze, "#2.*dimension 3 out of range", x, 3)
    checks.errors(x.stride, "#2.*dimension 3 out of range", x, 3)
    checks.errors(x.view, "#2.*shape 7 has 7 elements", x, { 7 })
    local eight = lumus.zeros({ 1, 1, 1, 1, 1, 1, 1, 2 })
    checks.errors(eight.unsqueeze, "already has 8 dimensions", eight, 1)
  end)
end)

describe("non-contiguous inputs to every op", function()
  local g = ref.rng(11)
  local xt = random({ 5, 7 }, 21)
  local yt = random({ 5, 7 }, 22)
  local rowt = random({ 7 }, 23)
  local x, y, row = strided(xt), strided(yt), strided(rowt)

  it("binary ops with broadcasting, numbers and contiguous operands", function()
    local xc = lumus.tensor(xt)
    for _, op in ipairs { "add", "sub", "mul", "div" } do
      local tol = { rel = 1e-6, what = op }
      checks.close(lumus[op](x, y), ref[op](xt, yt), tol)
      checks.close(lumus[op](x, row), ref[op](xt, rowt), tol)
      checks.close(lumus[op](row, x), ref[op](rowt, xt), tol)
      checks.close(lumus[op](xc, y), ref[op](xt, yt), tol)
      checks.close(lumus[op](x, 3), ref[op](xt, 3), tol)
      checks.close(lumus[op](2, x), ref[op](2, xt), tol)
      checks.close(x[op](x, y, { out = lumus.empty({ 5, 7 }) }), ref[op](xt, yt), tol)
    end
    checks.close(lumus.scale(x, 0.5), ref.scale(xt, 0.5), { rel = 1e-7 })
    -- an expanded operand
    local col = lumus.tensor(random({ 5, 1 }, 24))
    local colt = col:to_table()
    checks.close(x + col:expand({ 5, 7 }), ref.add(xt, T.expand(colt, { 5, 7 })), { rel = 1e-6 })
    -- contiguous but unaligned (starts at element 3)
    local flat = lumus.tensor(ref.flatten(xt))
    local u = flat:narrow(1, 3, 30)
    local ut = T.narrow(ref.flatten(xt), 1, 3, 30)
    checks.close(u * 2, ref.mul(ut, 2), { what = "unaligned" })
    checks.close(u:view({ 5, 6 }) + u:view({ 5, 6 }), ref.add(T.reshape(ut, { 5, 6 }), T.reshape(ut, { 5, 6 })), { what = "unaligned 2-D" })
    assert.equal(0, lumus.tune.validation_messages())
  end)

  it("unary ops", function()
    for _, name in ipairs { "neg", "relu", "abs" } do
      checks.close(lumus[name](x), ref[name](xt), { what = name })
    end
    checks.close(lumus.erf(x), ref.map(xt, ref.erf), { abs = 2e-7, what = "erf" })
    checks.close(x:gelu(), ref.gelu(xt, "none"), { mixed = 2e-6, what = "gelu" })
    checks.close(x:gelu({ approximate = "tanh" }), ref.gelu(xt, "tanh"), { mixed = 2e-6, what = "gelu tanh" })
    checks.close(-x, ref.neg(xt), { what = "unm" })
  end)

  it("softmax, sum, mean", function()
    checks.close(x:softmax(), ref.softmax(xt), { mixed = 1e-6, what = "softmax" })
    checks.close(x:sum({ dim = -1 }), ref.sum(xt, { dim = -1 }), { mixed = 1e-6, what = "sum" })
    checks.close(x:mean({ dim = -1, keepdim = true }), ref.nest(ref.mean(xt, { dim = -1 }), { 5, 1 }), { mixed = 1e-6, what = "mean" })
    checks.close(row:sum(), ref.sum(rowt), { mixed = 1e-6, what = "sum of 1-D" })
  end)

  it("layer_norm_forward", function()
    local w, b = strided(random({ 7 }, 31)), strided(random({ 7 }, 32))
    local y, m, r = lumus.layer_norm_forward(x, w, b, 1e-5)
    local wy, wm, wr = ref.layer_norm_forward(xt, w:to_table(), b:to_table(), 1e-5)
    checks.close(y, wy, { mixed = 1e-5, what = "y" })
    checks.close(m, wm, { mixed = 1e-6, what = "mean" })
    checks.close(r, wr, { rel = 1e-5, what = "invstd" })
  end)

  it("matmul and linear", function()
    local bt = random({ 7, 4 }, 41)
    local b = strided(bt)
    checks.close(lumus.matmul(x, b), ref.matmul(xt, bt), { mixed = 1e-5, what = "matmul" })
    checks.close(lumus.matmul(x, lumus.tensor(bt)), ref.matmul(xt, bt), { mixed = 1e-5, what = "matmul a view" })
    -- batched, with a permuted a
    local at3 = random({ 2, 3, 7 }, 42)
    local a3 = lumus.tensor(T.permute(at3, { 2, 1, 3 })):permute({ 2, 1, 3 })
    local bt3 = random({ 2, 7, 4 }, 43)
    checks.close(lumus.matmul(a3, lumus.tensor(bt3)), ref.matmul(at3, bt3), { mixed = 1e-5, what = "batched" })
    local wt = random({ 4, 7 }, 44)
    local biast = random({ 4 }, 45)
    local wv, bv = strided(wt), strided(biast)
    checks.close(lumus.linear(x, wv, bv), ref.linear(xt, wt, biast), { mixed = 1e-5, what = "linear" })
    -- a batched b given as a transposed view (read in place, transpose_b flipped)
    local b3v = lumus.tensor(T.permute(bt3, { 1, 3, 2 })):transpose(2, 3)
    checks.close(lumus.matmul(lumus.tensor(at3), b3v), ref.matmul(at3, bt3), { mixed = 1e-5, what = "batched b view" })
    checks.errors(lumus.matmul, "#2.*b's first dimension must be K = 7 %(the last dimension of a, shape 5x7%), got shape 4x7%)$",
      x, lumus.tensor(random({ 7, 4 }, 46)):transpose(1, 2))
    -- transpose_b of a transposed weight reads the same values
    checks.close(lumus.matmul(x, lumus.tensor(bt):transpose(1, 2), { transpose_b = true }),
      ref.matmul(xt, bt), { mixed = 1e-5, what = "transpose_b of a view" })
  end)

  it("copy, fill, to_table, to_bytes, tostring", function()
    same(lumus.copy(x), xt, "copy")
    local z = lumus.zeros({ 5, 7 })
    lumus.copy(x, { out = z })
    same(z, xt, "copy out=")
    local base = lumus.tensor(yt)
    base:transpose(1, 2):narrow(1, 2, 3):fill(2)
    local want = build({ 5, 7 }, function(i) return (i[2] >= 2 and i[2] <= 4) and 2 or yt[i[1]][i[2]] end)
    same(base, want, "fill of a view")
    same(x:to_table(), xt, "to_table")
    local bytes = x:to_bytes()
    local flat = ref.flatten(xt)
    assert.equal(#flat * 4, #bytes)
    for i = 1, #flat do assert.equal(flat[i], (compat.unpack_bytes("f32", bytes, 4 * i - 3, 1)[1])) end
    local part = x:to_bytes(9, 3)
    for i = 1, 3 do assert.equal(flat[8 + i], (compat.unpack_bytes("f32", part, 4 * i - 3, 1)[1])) end
    local s = tostring(lumus.tensor({ { 1, 2 }, { 3, 4 } }):transpose(1, 2))
    assert.matches("^%[1%]%s+1%.0000%s+3%.0000\n%[2%]%s+2%.0000%s+4%.0000\n", s)
    local big = lumus.tensor(random({ 9, 10 }, 51)):transpose(1, 2)
    assert.equal(tostring(big:contiguous()), tostring(big))
  end)

  it("a larger transpose takes several workgroups and 2-D grids", function()
    local t = random({ 67, 131 }, 61)
    local v = lumus.tensor(t):transpose(1, 2)
    same(v:contiguous(), T.transpose(t, 1, 2), "67x131 transposed")
    local cap = lumus.tune.grid()
    lumus.tune.grid({ max_x = 3 })
    local ok, err = pcall(function() same(v:contiguous(), T.transpose(t, 1, 2), "on a 2-D grid") end)
    lumus.tune.grid({ max_x = 0 })
    assert(ok, err)
    assert.is_true(cap > 0)
  end)

  it("tiled transposes: batched, narrowed, into a strided destination, against the generic form", function()
    local t3 = random({ 3, 33, 45 }, 62)
    same(lumus.tensor(t3):transpose(2, 3):contiguous(), T.transpose(t3, 2, 3), "batched 3x45x33")
    same(lumus.tensor(t3):permute({ 3, 1, 2 }):contiguous(), T.permute(t3, { 3, 1, 2 }), "permute {3,1,2}")
    local t2 = random({ 40, 37 }, 63)
    local x = lumus.tensor(t2)
    local v = x:narrow(1, 3, 35):narrow(2, 2, 33):transpose(1, 2)    -- [33, 35], src stride 37
    local want = T.transpose(T.narrow(T.narrow(t2, 1, 3, 35), 2, 2, 33), 1, 2)
    same(v:contiguous(), want, "narrowed transpose")
    local wide = lumus.full({ 33, 50 }, -1)
    wide:narrow(2, 4, 35):copy(v)                       -- dst rows of stride 50
    local wwant = build({ 33, 50 }, function(i)
      return (i[2] >= 4 and i[2] <= 38) and want[i[1]][i[2] - 3] or -1
    end)
    same(wide, wwant, "into a narrowed destination")
    -- the generic form: dst not contiguous along its last dimension
    local back = lumus.zeros({ 35, 33 })
    back:transpose(1, 2):copy(v)
    same(back, T.transpose(want, 1, 2), "into a transposed destination")
  end)
end)
