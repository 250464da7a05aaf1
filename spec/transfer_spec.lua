-- from_bytes / to_bytes round trips at the sizes where the transfer path changes: the
-- staging piece (8 MiB, pipelined), the largest download built straight from one staging
-- chunk (64 MiB) and just past it, odd sizes and partial ranges. The whole file runs
-- again in a child with LUMUS_TEST_STAGING=1, so both the mapped path (lavapipe) and the
-- staging path that discrete GPUs take are checked.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local lumus = require("lumus")
local compat = require "lumus.compat"

local MiB = 1048576
local PIECE = math.floor(8 * MiB / 4)       -- floats in one staging piece
local WHOLE = math.floor(64 * MiB / 4)      -- floats in the largest one-chunk download
local staged = os.getenv("LUMUS_TEST_STAGING") == "1"

-- n floats of bytes that differ from piece to piece (a 1021-byte period never lines up
-- with a piece boundary), so a piece copied to the wrong place fails the comparison.
local function payload(n, salt)
  local t = {}
  for i = 1, 1021 do t[i] = string.char((i * 37 + salt * 11) % 251) end
  local block = table.concat(t)
  return string.rep(block, math.floor(n * 4 / #block) + 1):sub(1, n * 4)
end

describe("to_bytes and from_bytes" .. (staged and " (staging)" or ""), function()
  it("is the path under test", function()
    assert.are.equal(not staged, lumus.device().host_visible)
  end)

  for _, n in ipairs({ 1, 3, 1023, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 5, WHOLE, WHOLE + 3 }) do
    it(("round-trips %d floats exactly"):format(n), function()
      local s = payload(n, n % 7)
      local t = lumus.from_bytes(s, { n })
      local back = t:to_bytes()
      assert.are.equal(#s, #back)
      assert.is_true(s == back, "bytes differ")
      t:free()
    end)
  end

  it("returns partial ranges across piece boundaries", function()
    local n = 2 * PIECE + 77
    local s = payload(n, 3)
    local t = lumus.from_bytes(s, { n })
    for _, r in ipairs({ { 1, 1 }, { PIECE, 2 }, { PIECE - 5, PIECE + 11 }, { 2 * PIECE + 1, 77 },
                         { 7, n - 6 }, { n, 1 }, { 1, n } }) do
      local first, count = r[1], r[2]
      local got = t:to_bytes(first, count)
      assert.are.equal(count * 4, #got)
      assert.is_true(got == s:sub(4 * (first - 1) + 1, 4 * (first - 1 + count)),
                     ("bytes differ for first=%d count=%d"):format(first, count))
    end
    assert.are.equal("", t:to_bytes(5, 0))
    t:free()
  end)

  it("round-trips a view's elements of a larger tensor", function()
    local s = payload(PIECE + 9, 5)
    local t = lumus.from_bytes(s, { PIECE + 9 })
    local v = t:reshape({ 1, PIECE + 9 })
    assert.is_true(v:to_bytes(3, PIECE) == s:sub(9, 8 + 4 * PIECE))
    t:free()
  end)

  it("waits for device work queued on the tensor before reading it", function()
    local n = PIECE + 13
    local t = lumus.full({ n }, 1.5)
    local u = t:add(t)                           -- recorded, not yet run
    local got = u:to_bytes()
    assert.are.equal(n * 4, #got)
    local three = compat.pack_bytes("f32", { 3.0 })
    assert.are.equal(three, got:sub(1, 4))
    assert.are.equal(three, got:sub(-4))
    assert.is_true(got == string.rep(three, n))
    t:free(); u:free()
  end)

  it("uploads apply in order with earlier device work on the same tensor", function()
    local n = 3 * PIECE + 1
    local t = lumus.full({ n }, 2)
    local doubled = t:add(t)                     -- reads t before the upload replaces it
    local s = payload(n, 1)
    local t2 = lumus.from_bytes(s, { n })
    assert.is_true(t2:to_bytes() == s)
    assert.are.equal(string.rep(compat.pack_bytes("f32", { 4.0 }), n), doubled:to_bytes())
    t:free(); t2:free(); doubled:free()
  end)

  it("keeps a bounded amount of staging memory, which empty_cache gives back", function()
    local s = payload(WHOLE, 2)
    for _ = 1, 3 do
      local t = lumus.from_bytes(s, { WHOLE })
      assert.are.equal(#s, #t:to_bytes())
      t:free()
    end
    lumus.synchronize()
    local m = lumus.memory()
    if staged then
      assert.is_true(m.staging > 0, "staging is kept for the next transfer")
      assert.is_true(m.staging <= 256 * MiB, "staging holds " .. m.staging)
    end
    lumus.empty_cache()
    assert.are.equal(0, lumus.memory().staging)
  end)

  it("raises naming the function for bad ranges and sizes", function()
    local t = lumus.from_bytes(payload(10, 0), { 10 })
    assert.has_error(function() t:to_bytes(0) end, "bad argument #1 to 'to_bytes' (first element out of range)")
    assert.has_error(function() t:to_bytes(3, 9) end, "bad argument #2 to 'to_bytes' (count out of range)")
    assert.has_error(function() lumus.from_bytes(payload(10, 0), { 11 }) end,
      "bad argument #1 to 'from_bytes' (expected 44 bytes (4 per float32) for shape 11, got 40)")
    t:free()
  end)

  if not staged then
    it("passes again through staging (LUMUS_TEST_STAGING=1)", function()
      local cpath = package.cpath:match("^([^;]+)")
      local p = io.popen(("LUMUS_TEST_STAGING=1 busted --lua=" .. LUA .. " --cpath=%q -o TAP spec/transfer_spec.lua 2>&1; echo rc=$?")
        :format(cpath))
      local out = p:read("*a")
      p:close()
      assert.is_nil(out:find("\nnot ok ", 1, true), out)
      assert.matches("rc=0%s*$", out)
      local ok = select(2, out:gsub("\nok ", ""))
      assert.is_true(ok >= 14, "only " .. ok .. " passed:\n" .. out)
    end)
  end
end)
