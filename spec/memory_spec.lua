-- Device memory blocks: they start small and grow with use, go back to the driver on
-- lumus.empty_cache() and when the memory limit would be passed, and big workloads
-- still take few vkAllocateMemory calls (src/memory.c).
local lumus = require "lumus"
local compat = require "lumus.compat"

local MiB = 2 ^ 20

local function settle()
  collectgarbage(); collectgarbage(); lumus.synchronize()
end

local function stats()
  local s = lumus.tune.stream_stats()
  return s.blocks_made
end

-- A fresh lua5.4 (a state with no blocks yet): its output and exit code.
local run_lua = dofile("spec/support/shell.lua").run_lua

describe("device memory blocks", function()
  it("reserve at most a few MiB for one small tensor in a fresh state", function()
    local out, rc = run_lua([[
      local lumus = require "lumus"
      local t = lumus.tensor({ 1, 2, 3, 4 })   -- 16 bytes
      local m = lumus.memory()
      print("reserved", m.reserved, "blocks", m.blocks, "in_use", m.in_use, "value", t:to_table()[4])
    ]])
    assert.are.equal(0, rc, out)
    local reserved, blocks, in_use, value = out:match("reserved\t(%d+)\tblocks\t(%d+)\tin_use\t(%d+)\tvalue\t(%S+)")
    assert(reserved, out)
    assert.is_true(tonumber(reserved) <= 4 * MiB, "reserved " .. reserved)
    assert.are.equal(1, tonumber(blocks))
    assert.is_true(tonumber(in_use) >= 16 and tonumber(in_use) <= 4096, "in_use " .. in_use)
    assert.are.equal(4, tonumber(value))
  end)

  it("grow geometrically: 1 GiB of 8 MiB tensors takes few blocks, all used", function()
    settle()
    lumus.empty_cache()
    local before, m0 = stats(), lumus.memory()
    local ts = {}
    for i = 1, 128 do ts[i] = lumus.empty({ 2 * MiB }) end   -- 8 MiB each
    local m = lumus.memory()
    local made = stats() - before
    -- doubling from 16 MiB to the 256 MiB cap: about log2(16) + 1024/256 blocks, not 128
    assert.is_true(made >= 3 and made <= 12, made .. " blocks made")
    assert.is_true(m.reserved - m0.reserved >= 1024 * MiB)
    assert.is_true(m.reserved - m0.reserved <= 1024 * MiB + 512 * MiB, "reserved " .. m.reserved - m0.reserved)
    for i = 1, #ts do ts[i]:free() end
    settle()
    assert.are.equal(m0.in_use, lumus.memory().in_use)
  end)

  it("serve small requests from small blocks, apart from large ones", function()
    settle()
    lumus.empty_cache()
    local m0 = lumus.memory()
    local big = lumus.empty({ 4 * MiB })    -- 16 MiB: a large block
    local smalls = {}
    for i = 1, 64 do smalls[i] = lumus.empty({ 256 }) end
    local m = lumus.memory()
    -- one large block and one 2 MiB small block (not a second large one)
    assert.is_true(m.blocks - m0.blocks <= 2, (m.blocks - m0.blocks) .. " blocks")
    assert.is_true(m.reserved - m0.reserved <= 16 * MiB + 2 * MiB, "reserved " .. (m.reserved - m0.reserved))
    big:free()
    for i = 1, #smalls do smalls[i]:free() end
    settle()
  end)

  it("go back to the driver on lumus.empty_cache(), except those holding live tensors", function()
    settle()
    local keep = lumus.full({ 1000 }, 7)
    local ts = {}
    for i = 1, 40 do ts[i] = lumus.empty({ 4 * MiB }) end   -- 640 MiB
    for i = 1, #ts do ts[i]:free() end
    settle()
    local m = lumus.memory()
    assert.is_true(m.reserved >= m.in_use + 512 * MiB, "the freed blocks are kept for reuse")
    local released = lumus.empty_cache()
    local after = lumus.memory()
    assert.is_true(compat.is_integer_type(released))
    assert.are.equal(m.reserved - after.reserved, released)
    assert.is_true(after.reserved < m.in_use + 64 * MiB, "reserved " .. after.reserved .. ", in use " .. m.in_use)
    assert.is_true(after.blocks >= 1)
    assert.are.equal(m.in_use, after.in_use)
    assert.are.equal(7, keep:to_table()[1000])              -- live data untouched
    assert.are.equal(0, lumus.empty_cache())                -- nothing left to give back
    keep:free()
  end)

  it("go back to the driver when a new block would pass the memory limit", function()
    settle()
    local ts = {}
    for i = 1, 24 do ts[i] = lumus.empty({ 4 * MiB }) end   -- 384 MiB, then freed: cached
    for i = 1, #ts do ts[i]:free() end
    settle()
    lumus.reset_peak()
    local m = lumus.memory()
    assert.is_true(m.reserved >= m.in_use + 256 * MiB)
    lumus.set_memory_limit(m.in_use + 64 * MiB)
    local ok, e = pcall(function()
      local small = {}
      for i = 1, 100 do small[i] = lumus.empty({ 64 * 1024 }) end   -- 256 KiB each: small blocks
      local x = lumus.empty({ 8 * MiB })                                -- 32 MiB
      local r = lumus.memory().reserved
      x:free()
      for i = 1, #small do small[i]:free() end
      return r
    end)
    lumus.set_memory_limit(nil)
    assert(ok, e)
    assert.is_true(e <= m.in_use + 64 * MiB + 32 * MiB, ("reserved %d with a limit of %d"):format(e, m.in_use + 64 * MiB))
  end)

  it("keep reusing their blocks for a loop that frees and reallocates", function()
    settle()
    local x = lumus.full({ 1024, 1024 }, 1)
    local function step()
      local a = lumus.add(x, x)
      local y = lumus.gelu(a); a:free()
      local s = lumus.sum(y); y:free(); s:free()
      lumus.synchronize()   -- (else how much waits on batches in flight depends on timing)
    end
    for _ = 1, 3 do step() end
    settle()
    local before = stats()
    for _ = 1, 100 do step() end
    settle()
    assert.are.equal(before, stats(), "no vkAllocateMemory in the loop")
    x:free()
  end)

  it("keep the blocks a loop's fragmentation needs beyond its peak in use", function()
    -- Large tensors of mixed sizes and lifetimes: the pool needs more reserved than the
    -- peak in use plus one block (a bound that freed and retook a block every iteration).
    settle()
    lumus.empty_cache()
    lumus.reset_peak()
    local F = MiB / 4   -- floats per MiB
    local function step()
      local a = lumus.empty({ 32 * F })
      local b = lumus.empty({ 64 * F }); b:free()
      local c, d, e = lumus.empty({ 96 * F }), lumus.empty({ 96 * F }), lumus.empty({ 96 * F })
      d:free(); c:free(); a:free(); e:free()
    end
    step(); step()
    local before = stats()
    for _ = 1, 4 do step() end
    assert.are.equal(before, stats(), "no vkAllocateMemory in the loop")
    local m = lumus.memory()
    assert.is_true(m.reserved <= m.peak + m.peak / 2 + 2 * MiB, ("reserved %d, peak %d"):format(m.reserved, m.peak))
    settle()
    lumus.empty_cache()
  end)

  it("count the context's scratch as internal, which empty_cache releases", function()
    local config = lumus.tune.layer_norm
    if not config then pending("no layer_norm tuning hook") return end
    settle()
    config(4096, { parts = 2 })
    local y = lumus.layer_norm_forward(lumus.full({ 4, 4096 }, 1))
    config(4096, {})
    lumus.synchronize()
    local m = lumus.memory()
    assert.is_true(m.internal > 0 and m.internal <= m.in_use)
    lumus.empty_cache()
    assert.are.equal(0, lumus.memory().internal)
    assert.are.equal(0, y:to_table()[4][4096])
    -- made again on the next call, zeroed: still right
    config(4096, { parts = 2 })
    local x = lumus.tensor({ { 1, 2, 3, 4 } }):reshape({ 1, 4 })
    local z = lumus.layer_norm_forward(lumus.full({ 3, 4096 }, 2))
    config(4096, {})
    assert.are.equal(0, z:to_table()[3][1])
    assert.is_true(lumus.memory().internal > 0)
    x:free()
  end)

  it("stay within the device's memory budget where it reports one", function()
    local m = lumus.memory()
    assert.is_true(compat.is_integer_type(m.budget))
    if m.budget == 0 then pending("the device has no VK_EXT_memory_budget") return end
    assert.is_true(m.reserved <= m.budget)
  end)
end)
