-- lumus.index_copy(t, dim, ids, src [, {out=}]) against lumus.reference.index_copy: every
-- dtype (elements moved as they are: exact), every dimension, repeated and out-of-range
-- ids, views, in place (out = t), inside lumus.capture with ids on the device, errors.
local lumus = require "lumus"
local ref = require "lumus.reference"

-- A small deterministic generator (Lua 5.1-safe: no bit operators).
local function rng(seed)
  local s = seed
  return function(n)
    s = (s * 1103515245 + 12345) % 2147483648
    return math.floor(s / 65536) % n
  end
end

local function values(shape, r, dtype)
  local n = 1
  for _, v in ipairs(shape) do n = n * v end
  local flat = {}
  for i = 1, n do
    if dtype == "bool" then flat[i] = r(2) == 1 else flat[i] = r(201) - 100 end
  end
  return flat
end

local function nested(flat, shape) return ref.nest(flat, shape) end

local function as_numbers(v)
  if type(v) == "table" then
    local o = {}
    for i, x in ipairs(v) do o[i] = as_numbers(x) end
    return o
  end
  if type(v) == "boolean" then return v and 1 or 0 end
  return v
end

describe("lumus.index_copy", function()
  it("matches the reference in every dtype and dimension, with repeated and out-of-range ids", function()
    local r = rng(7)
    for _, dtype in ipairs({ "float32", "float16", "bfloat16", "int32", "bool" }) do
      for case = 1, 6 do
        local nd = 1 + r(3)
        local shape = {}
        for k = 1, nd do shape[k] = 1 + r(5) end
        local dim = 1 + r(nd)
        local m = 1 + r(4)
        local ids = {}
        for j = 1, m do ids[j] = r(shape[dim] + 2) end   -- 0 and size + 1 are outside
        local sshape = {}
        for k = 1, nd do sshape[k] = k == dim and m or shape[k] end
        local tf, sf = values(shape, r, dtype), values(sshape, r, dtype)
        local t = lumus.tensor(nested(tf, shape), { dtype = dtype })
        local src = lumus.tensor(nested(sf, sshape), { dtype = dtype })
        local idt = lumus.tensor(ids, { dtype = "int32" })
        local want = ref.index_copy(as_numbers(nested(tf, shape)), dim, ids, as_numbers(nested(sf, sshape)))
        local what = ("%s case %d: shape %s dim %d ids %s"):format(dtype, case, table.concat(shape, "x"), dim,
          table.concat(ids, ","))
        local got = lumus.index_copy(t, dim, idt, src)
        assert.equal(dtype, got:dtype())
        assert.same(want, as_numbers(got:to_table()), what)
        assert.same(as_numbers(nested(tf, shape)), as_numbers(t:to_table()), what .. ": t unchanged")
        -- in place: out = t
        lumus.index_copy(t, dim, idt, src, { out = t })
        assert.same(want, as_numbers(t:to_table()), what .. " in place")
        -- a negative dim counts from the end
        assert.same(want, as_numbers(lumus.index_copy(lumus.tensor(nested(tf, shape), { dtype = dtype }), dim - nd - 1,
          idt, src):to_table()), what .. " negative dim")
      end
    end
  end)

  it("reads strided views of src and t", function()
    local base = lumus.arange(0, 24, { dtype = "float32" }):view({ 4, 6 })
    local t = base:transpose(1, 2)                        -- [6, 4], strided
    local src = lumus.arange(100, 108, { dtype = "float32" }):view({ 4, 2 }):transpose(1, 2)   -- [2, 4]
    local ids = lumus.tensor({ 5, 2 }, { dtype = "int32" })
    local want = ref.index_copy(t:to_table(), 1, { 5, 2 }, src:to_table())
    assert.same(want, lumus.index_copy(t, 1, ids, src):to_table())
    -- rows of a cache written as the method form does
    assert.same(want, t:index_copy(1, ids, src):to_table())
  end)

  it("writes at ids held on the device inside lumus.capture", function()
    local cache = lumus.zeros({ 2, 5, 3 })
    local pos = lumus.tensor({ 1 }, { dtype = "int32" })
    local row = lumus.zeros({ 2, 1, 3 })
    local nxt = lumus.arange(2, 8, { dtype = "int32" })
    local g = lumus.capture(function()
      lumus.index_copy(cache, 2, pos, row, { out = cache })
      local p2 = lumus.index_select(nxt, 1, pos)
      pos:copy(p2)
    end)
    for k = 1, 4 do
      row:fill(k)
      g:replay()
    end
    local got = cache:to_table()
    for b = 1, 2 do
      for k = 1, 5 do
        for c = 1, 3 do assert.equal(k <= 4 and k or 0, got[b][k][c]) end
      end
    end
    assert.equal(5, pos:item())
    g:free()
  end)

  it("raises on bad arguments", function()
    local t = lumus.zeros({ 3, 4 })
    local ids = lumus.tensor({ 1 }, { dtype = "int32" })
    assert.error_matches(function() lumus.index_copy(t, 1, lumus.tensor({ 1.0 }), lumus.zeros({ 1, 4 })) end,
      "bad argument #3 to 'index_copy' %(ids must be an int32 tensor %(1%-based positions%), got float32%)")
    assert.error_matches(function() lumus.index_copy(t, 1, lumus.zeros({ 1, 1 }, { dtype = "int32" }), lumus.zeros({ 1, 4 })) end,
      "ids must be 1%-D, got shape 1x1")
    assert.error_matches(function() lumus.index_copy(t, 1, ids, lumus.zeros({ 2, 4 })) end,
      "src must have t's shape %(3x4%) except 1 in dimension 1 %(the number of ids%), got shape 2x4")
    assert.error_matches(function() lumus.index_copy(t, 1, ids, lumus.zeros({ 1, 4 }, { dtype = "float16" })) end,
      "src must be float32 %(t's dtype%), got float16")
    assert.error_matches(function() lumus.index_copy(t, 3, ids, lumus.zeros({ 1, 4 })) end, "dim")
    assert.error_matches(function() lumus.index_copy(t, 1, ids, lumus.zeros({ 1, 4 }), { out = lumus.zeros({ 3, 4 }, { dtype = "int32" }) }) end,
      "out must be float32 %(t's dtype%), got int32")
    local src = lumus.zeros({ 1, 4 })
    assert.error_matches(function() lumus.index_copy(t, 1, ids, src, { out = src }) end, "out")
    assert.error_matches(function() lumus.index_copy(t, 1, ids, src, { out = t:narrow(1, 1, 3), bogus = 1 }) end,
      "unknown option")
  end)
end)
