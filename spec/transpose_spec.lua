-- Strided copies that transpose (t:transpose(...):contiguous(), permute, copies into a
-- contiguous out): the tile64 form (shaders/transpose.comp), the tile32 form and the
-- general strided form must give the same bytes, for 4-, 2- and 1-byte elements, at
-- sizes that leave partial tiles, with batches of any strides, and where the
-- source's unit-stride dimension is not the second-to-last. Each result is also checked
-- element by element against the host's own permutation of the source's bytes.
local lumus = require("lumus")
local compat = require "lumus.compat"

local forms = { "tile64", "tile32", "general" }

-- The element bytes of a contiguous tensor of `shape`, permuted by `perm` (1-based, as
-- t:permute), computed on the host from the source's bytes.
local function host_permute(bytes, shape, perm, es)
  local n = #shape
  local out_shape, in_strides = {}, {}
  local stride = 1
  for i = n, 1, -1 do in_strides[i] = stride; stride = stride * shape[i] end
  for i = 1, n do out_shape[i] = shape[perm[i]] end
  local parts, idx = {}, {}
  for i = 1, n do idx[i] = 0 end
  local total = stride
  for k = 1, total do
    local off = 0
    for i = 1, n do off = off + idx[i] * in_strides[perm[i]] end
    parts[k] = bytes:sub(off * es + 1, off * es + es)
    for i = n, 1, -1 do
      idx[i] = idx[i] + 1
      if idx[i] < out_shape[i] then break end
      idx[i] = 0
    end
  end
  return table.concat(parts)
end

-- Distinct element bytes (a float16 element is any 16-bit pattern: copies move bits),
-- bool elements 0 and 1 in an irregular pattern, so a misplaced element shows.
local function source(shape, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local parts = {}
  for k = 1, n do
    if dtype == "float32" then parts[k] = compat.pack_bytes("f32", { k })
    elseif dtype == "float16" then parts[k] = compat.pack_bytes("u16", { (k * 40503) % 65536 })
    else parts[k] = string.char((k * k + math.floor(k / 7)) % 3 == 0 and 1 or 0) end
  end
  return lumus.from_bytes(table.concat(parts), shape, { dtype = dtype })
end

local cases = {
  -- shape, permutation, what it exercises
  { { 257, 131 }, { 2, 1 }, "a matrix with partial tiles on both sides" },
  { { 64, 128 }, { 2, 1 }, "whole tiles only" },
  { { 3, 70, 65 }, { 1, 3, 2 }, "a batch of matrices" },
  { { 5, 130, 67 }, { 1, 3, 2 }, "batched [B, R, C] -> [B, C, R]" },
  { { 65, 3, 70 }, { 3, 2, 1 }, "unit stride in the outer dimension, a batch between" },
  { { 2, 3, 66, 65 }, { 4, 2, 1, 3 }, "rank 4, two batch dimensions out of order" },
  { { 2, 2, 2, 2, 33, 35 }, { 2, 1, 4, 3, 6, 5 }, "four batch dimensions" },
  { { 2, 2, 2, 2, 2, 33, 35 }, { 2, 1, 4, 3, 5, 7, 6 }, "more batches than the tile form takes" },
  { { 1, 300 }, { 2, 1 }, "a single row (no transpose after merging)" },
  { { 4, 6, 8, 16 }, { 1, 3, 2, 4 }, "a head split: inner runs contiguous (16-byte units)" },
  { { 3, 5, 32 }, { 2, 1, 3 }, "rows permuted, runs of 32 (16-byte units)" },
  { { 3, 5, 6 }, { 2, 1, 3 }, "rows permuted, runs of 6 (not whole 16-byte units for 4 bytes)" },
}

for _, dtype in ipairs({ "float32", "float16", "bool" }) do
  local es = dtype == "float32" and 4 or dtype == "float16" and 2 or 1
  describe(("strided copies that transpose (%s)"):format(dtype), function()
    local saved
    before_each(function() saved = lumus.tune.transpose() end)
    after_each(function() lumus.tune.transpose({ form = saved }) end)

    for _, c in ipairs(cases) do
      local shape, perm, what = c[1], c[2], c[3]
      it(("permutes %s: every form gives the host's bytes"):format(what), function()
        local x = source(shape, dtype)
        local want = host_permute(x:to_bytes(), shape, perm, es)
        for _, form in ipairs(forms) do
          assert.are.equal(form, lumus.tune.transpose({ form = form }))
          local y = x:permute(perm):contiguous()
          assert.is_true(y:is_contiguous())
          local got = y:to_bytes()
          assert.are.equal(#want, #got)
          assert.is_true(got == want, form .. ": bytes differ")
        end
      end)
    end

    it("copies narrowed rows at aligned and unaligned offsets (16-byte units or not)", function()
      local x = source({ 10, 64 }, dtype)
      local bytes = x:to_bytes()
      for _, start in ipairs({ 1, 2, 5, 17 }) do
        local v = x:narrow(2, start, 32)
        local want = {}
        for r = 0, 9 do
          local at = (r * 64 + start - 1) * es
          want[#want + 1] = bytes:sub(at + 1, at + 32 * es)
        end
        assert.is_true(v:contiguous():to_bytes() == table.concat(want), "start " .. start)
      end
    end)

    it("reads a transposed narrow view (offset source) and writes into an out view", function()
      local x = source({ 100, 90 }, dtype)
      local v = x:narrow(1, 3, 70):narrow(2, 5, 66)          -- offset, strided rows
      local want = host_permute(v:contiguous():to_bytes(), { 70, 66 }, { 2, 1 }, es)
      for _, form in ipairs(forms) do
        lumus.tune.transpose({ form = form })
        local big = lumus.zeros({ 66, 80 }, { dtype = dtype })
        local out = big:narrow(2, 7, 70)                       -- dst rows strided too
        out:copy(v:transpose(1, 2))
        assert.is_true(out:contiguous():to_bytes() == want, form .. ": bytes differ")
      end
    end)
  end)
end

describe("lumus.tune.transpose", function()
  it("defaults to tile64, and {} restores it", function()
    lumus.tune.transpose({ form = "general" })
    assert.are.equal("general", lumus.tune.transpose())
    assert.are.equal("tile64", lumus.tune.transpose({}))
  end)

  it("rejects unknown forms and keys, reading options raw", function()
    local trap = setmetatable({}, { __index = function(_, k) error("metamethod ran for " .. tostring(k)) end })
    assert.are.equal("tile64", lumus.tune.transpose(trap))
    local ok, err = pcall(lumus.tune.transpose, { form = "tile16" })
    assert.is_false(ok)
    assert.matches("bad argument #1 to '[%w.]*transpose' %(form must be .*tile64.*tile32.*general.*got \"tile16\"%)", err)
    assert.are.equal("tile64", lumus.tune.transpose())
    assert.has_error(function() lumus.tune.transpose({ from = "tile64" }) end)
  end)
end)
