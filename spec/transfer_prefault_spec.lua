-- to_bytes of large tensors with the new string's pages pre-faulted (src/storage.c wraps
-- Lua's allocator for the one lua_pushlstring) and without: the same bytes either way, on
-- the mapped path and (LUMUS_TEST_STAGING=1 in a child) the staging path; the allocator
-- is Lua's own again afterwards; and lumus.tune.stream's prefault option is checked.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local lumus = require("lumus")

local MiB = 1048576
local staged = os.getenv("LUMUS_TEST_STAGING") == "1"

local function payload(nbytes, salt)
  local t = {}
  for i = 1, 1021 do t[i] = string.char((i * 53 + salt * 7) % 251) end
  local block = table.concat(t)
  return string.rep(block, math.floor(nbytes / #block) + 1):sub(1, nbytes)
end

describe("to_bytes with pre-faulted strings" .. (staged and " (staging)" or ""), function()
  local saved
  before_each(function() saved = lumus.tune.stream().prefault end)
  after_each(function() lumus.tune.stream({ prefault = saved }) end)

  -- Under 4 MiB no wrapping; 4 MiB exactly and an odd size above it are wrapped; 64 MiB
  -- is the largest one-chunk staging download; past it the string comes from a buffer.
  for _, nbytes in ipairs({ 4 * MiB - 4, 4 * MiB, 5 * MiB + 12, 64 * MiB }) do
    for _, on in ipairs({ true, false }) do
      it(("returns the same %d bytes with prefault %s"):format(nbytes, tostring(on)), function()
        lumus.tune.stream({ prefault = on })
        assert.are.equal(on, lumus.tune.stream().prefault)
        local s = payload(nbytes, nbytes % 5)
        local t = lumus.from_bytes(s, { math.floor(nbytes / 4) })
        local back = t:to_bytes()
        assert.are.equal(#s, #back)
        assert.is_true(s == back, "bytes differ")
        -- A partial range of a large tensor takes the same path.
        local part = t:to_bytes(2, math.floor(nbytes / 4) - 2)
        assert.is_true(part == s:sub(5, nbytes - 4), "partial range differs")
        t:free()
        -- The allocator is Lua's again: large allocations and frees still work.
        back, part = nil, nil                                   -- luacheck: ignore
        collectgarbage()
        local big = s:sub(1) .. "x"
        assert.are.equal(nbytes + 1, #big)
      end)
    end
  end

  it("keeps the setting until changed, and {} restores the default", function()
    lumus.tune.stream({ prefault = false })
    assert.is_false(lumus.tune.stream().prefault)
    lumus.tune.stream({ submit_idle = 0 })      -- an absent key takes its default
    assert.are.equal(os.getenv("LUMUS_PREFAULT") ~= "0", lumus.tune.stream().prefault)
    lumus.tune.stream({})
    assert.are.equal(os.getenv("LUMUS_PREFAULT") ~= "0", lumus.tune.stream().prefault)
  end)

  it("rejects a non-boolean prefault and unknown keys", function()
    assert.has_error(function() lumus.tune.stream({ prefault = 1 }) end)
    assert.has_error(function() lumus.tune.stream({ prefetch = true }) end)
  end)

  if not staged then
    it("passes again through staging (LUMUS_TEST_STAGING=1)", function()
      local cpath = package.cpath:match("^([^;]+)")
      local p = io.popen(("LUMUS_TEST_STAGING=1 busted --lua=" .. LUA .. " --cpath=%q -o TAP spec/transfer_prefault_spec.lua 2>&1; echo rc=$?")
        :format(cpath))
      local out = p:read("*a")
      p:close()
      assert.is_nil(out:find("\nnot ok ", 1, true), out)
      assert.matches("rc=0%s*$", out)
      local ok = select(2, ("\n" .. out):gsub("\nok ", ""))
      assert.is_true(ok >= 10, "only " .. ok .. " passed:\n" .. out)
    end)
  end
end)
