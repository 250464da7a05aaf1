-- Asynchronous execution: ops record and return; reads and synchronize wait.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

describe("asynchronous execution", function()
  it("gives the same result for a chain of dependent ops as one op at a time", function()
    local rng = ref.rng(5)
    local xt = ref.random_table({ 8, 96 }, rng.normal)
    local chained = lumus.tensor(xt)
    for _ = 1, 50 do chained = lumus.layer_norm_forward(chained, nil, lumus.full({ 96 }, 0.25)) end
    local stepped = lumus.tensor(xt)
    for _ = 1, 50 do
      stepped = lumus.layer_norm_forward(stepped, nil, lumus.full({ 96 }, 0.25))
      lumus.synchronize()
    end
    assert.are.same(stepped:to_table(), chained:to_table())
    -- and both match the reference applied 50 times
    local want = xt
    local bias = {}
    for i = 1, 96 do bias[i] = 0.25 end
    for _ = 1, 50 do want = ref.layer_norm_forward(want, nil, bias) end
    checks.close(chained, want, { abs = 1e-4 })
  end)

  it("keeps write-after-read through out= tensors correct", function()
    -- a is read by op 1 (into b), then overwritten by op 2 (from c): op 1 must see old a
    local a = lumus.tensor({ { 1, 2, 3, 4 } })
    local b = lumus.empty({ 1, 4 })
    local c = lumus.tensor({ { 10, 10, 10, 30 } })
    lumus.layer_norm_forward(a, nil, nil, 1e-5, { out = b })
    lumus.copy(c, { out = a })
    local want = ref.layer_norm_forward({ { 1, 2, 3, 4 } })
    checks.close(b, want, { abs = 1e-5 })
    assert.are.same({ { 10, 10, 10, 30 } }, a:to_table())
  end)

  it("does not hand memory still in use by the device to a new tensor", function()
    local x = lumus.full({ 64, 1024 }, 2)
    local results = {}
    for i = 1, 20 do
      local tmp = lumus.full({ 64, 1024 }, i)
      results[i] = lumus.layer_norm_forward(tmp, nil, lumus.full({ 1024 }, i))
      tmp:free()   -- freed while the op that reads it may still be pending
      local fresh = lumus.full({ 64, 1024 }, -1)   -- may reuse tmp's chunk only after the op ran
      lumus.copy(x, { out = fresh })
    end
    for i = 1, 20 do
      local v = results[i]:to_bytes(1, 1)
      assert.are.equal(i, compat.unpack_bytes("f32", v, 1, 1)[1])   -- constant rows: y = bias = i
    end
  end)

  it("copies Lua data before returning", function()
    local t = { { 1, 2 }, { 3, 4 } }
    local x = lumus.tensor(t)
    t[1][1] = 100
    local s = compat.pack_bytes("f32", { 5, 6 })
    local y = lumus.from_bytes(s, { 2 })
    assert.are.same({ { 1, 2 }, { 3, 4 } }, x:to_table())
    assert.are.same({ 5, 6 }, y:to_table())
  end)

  it("reports pending work and clears it on synchronize", function()
    local x = lumus.ones({ 256, 256 })
    lumus.synchronize()
    assert.is_false(lumus.pending())
    for _ = 1, 3 do lumus.layer_norm_forward(x, nil, nil, 1e-5, { out = x }) end
    assert.is_true(lumus.pending())
    lumus.synchronize()
    assert.is_false(lumus.pending())
  end)

  it("returns from a large layer_norm_forward long before the work finishes", function()
    local x = lumus.full({ 2048, 4096 }, 1.5)
    local y, m, r = lumus.empty({ 2048, 4096 }), lumus.empty({ 2048 }), lumus.empty({ 2048 })
    local opts = { out = y, mean = m, invstd = r }
    lumus.layer_norm_forward(x, nil, nil, 1e-5, opts)   -- builds the pipeline
    lumus.synchronize()
    local t0 = lumus.clock()
    lumus.layer_norm_forward(x, nil, nil, 1e-5, opts)
    local call = lumus.clock() - t0
    lumus.synchronize()
    local total = lumus.clock() - t0
    assert.is_true(call < total / 10, ("call %.6f s, call + synchronize %.6f s"):format(call, total))
  end)

  it("measures device time with gpu_time and passes results through", function()
    local x = lumus.ones({ 512, 512 })
    local secs, y = lumus.gpu_time(function() return lumus.layer_norm_forward(x) end)
    assert.is_true(secs > 0 and secs < 10)
    assert.are.same({ 512, 512 }, y:shape())
    assert.has_error(function() lumus.gpu_time(function() lumus.gpu_time(function() end) end) end)
    local ok, e = pcall(lumus.gpu_time, function() error("boom") end)
    assert.is_false(ok)
    assert.matches("boom", e)
    assert.is_true(lumus.gpu_time(function() end) >= 0)   -- usable after an error
  end)

  it("leaves earlier results intact when a later op in a chain fails", function()
    local x = lumus.tensor({ { 1, 2, 3 } })
    local y1 = lumus.layer_norm_forward(x)
    local y2 = lumus.layer_norm_forward(y1)
    assert.has_error(function() lumus.layer_norm_forward(y2, lumus.ones({ 4 })) end)
    local want = ref.layer_norm_forward((ref.layer_norm_forward({ { 1, 2, 3 } })))
    checks.close(y2, want, { abs = 1e-5 })
    assert.are.same({ 1, 3 }, lumus.layer_norm_forward(y2):shape())
  end)
end)
