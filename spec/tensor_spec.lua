-- lumus.Tensor: constructors, methods, errors, lifetime and memory accounting, as
-- API.contract.md describes them. Errors are checked by message: the function's name
-- and the argument (number or name) always, the wording where the contract fixes it.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

local err_of = checks.error_of
local function expect(pattern, f, ...) checks.errors(f, pattern, ...) end

describe("device", function()
  it("describes the device in use and lists all devices", function()
    local d = lumus.device()
    assert.is_string(d.name)
    assert.is_truthy(({ discrete = 1, integrated = 1, virtual = 1, cpu = 1, other = 1 })[d.kind])
    assert.is_true(d.subgroup_size >= 1)
    assert.is_true(d.device_local_bytes > 0)
    assert.matches("^%d+%.%d+%.%d+$", d.api_version)
    local all = lumus.devices()
    assert.is_true(#all >= 1)
    local selected = 0
    for _, x in ipairs(all) do if x.selected then selected = selected + 1; assert.are.equal(d.name, x.name) end end
    assert.are.equal(1, selected)
  end)
  it("has the fields the contract lists, of the right types", function()
    local d = lumus.device()
    for _, k in ipairs { "index", "vendor_id", "device_id", "subgroup_size", "min_subgroup_size",
                         "max_subgroup_size", "device_local_bytes", "max_storage_buffer_range",
                         "max_allocation_size", "max_workgroup_size" } do
      assert(compat.is_integer_type(d[k]), k .. " is not an integer: " .. tostring(d[k]))
    end
    for _, k in ipairs { "name", "driver", "api_version" } do assert.is_string(d[k], k) end
    assert.is_not_nil(d.driver_version)
    assert.is_boolean(d.host_visible)
    assert.is_true(d.min_subgroup_size <= d.subgroup_size and d.subgroup_size <= d.max_subgroup_size)
    assert.is_true(d.max_workgroup_size >= 1)
    local c = d.max_workgroup_count
    assert.is_table(c)
    assert.is_true((c.x or c[1]) >= 1 and (c.y or c[2]) >= 1 and (c.z or c[3]) >= 1)
    for _, x in ipairs(lumus.devices()) do
      assert.is_string(x.name)
      assert.is_truthy(({ discrete = 1, integrated = 1, virtual = 1, cpu = 1, other = 1 })[x.kind])
    end
  end)
end)

describe("tensor constructors", function()
  it("infers shapes from nested tables of 1 to 8 levels", function()
    assert.are.same({ 3 }, lumus.tensor({ 1, 2, 3 }):shape())
    assert.are.same({ 2, 3 }, lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }):shape())
    local t = { 7 }
    for _ = 1, 7 do t = { t, t } end
    local x = lumus.tensor(t)
    assert.are.same({ 2, 2, 2, 2, 2, 2, 2, 1 }, x:shape())
    assert.are.equal(8, x:dim())
    assert.are.same(t, x:to_table())
  end)
  it("round-trips values through to_table exactly for float32 values", function()
    local t = { { 1.5, -2.25, 3e-3 }, { 1e20, compat.negative_zero, 65504 } }
    local got = lumus.tensor(t):to_table()
    for i = 1, 2 do for j = 1, 3 do
      assert.are.equal(compat.unpack_bytes("f32", compat.pack_bytes("f32", { t[i][j] }), 1, 1)[1], got[i][j])
    end end
  end)
  it("keeps NaN, infinities and signed zero, and stores integers as floats", function()
    local got = lumus.tensor({ 0 / 0, math.huge, -math.huge, compat.negative_zero, 3 }):to_table()
    assert.is_true(got[1] ~= got[1])
    assert.are.equal(math.huge, got[2])
    assert.are.equal(-math.huge, got[3])
    assert.are.equal(-math.huge, 1 / got[4])
    assert.are.equal(3, got[5])
    if compat.integers then assert.is_false(compat.is_integer_type(got[5])) end
  end)
  it("accepts an integer n for the shape {n}", function()
    for _, make in ipairs { lumus.zeros, lumus.ones, lumus.empty } do
      assert.are.same({ 5 }, make(5):shape())
    end
    assert.are.same({ 2 }, lumus.full(2, 1):shape())
    assert.are.same({ 2 }, lumus.from_bytes(compat.pack_bytes("f32", { 1, 2 }), 2):shape())
  end)
  it("round-trips random bytes exactly through from_bytes and to_bytes", function()
    local g = ref.rng(11)
    local vals = {}
    for i = 1, 999 do vals[i] = g.normal() * 10 ^ math.floor(g() * 20 - 10) end
    local s = compat.pack_bytes("f32", vals)
    local x = lumus.from_bytes(s, { 9, 111 })
    assert.are.equal(s, x:to_bytes())
    local t = x:to_table()
    assert.are.equal(ref.f32(vals[112]), t[2][1])
    assert.are.equal(s, lumus.tensor(t):to_bytes())
  end)
  it("makes zeros, ones, full and empty of a shape", function()
    assert.are.same({ { 0, 0 }, { 0, 0 } }, lumus.zeros({ 2, 2 }):to_table())
    assert.are.same({ 1, 1, 1 }, lumus.ones(3):to_table())
    assert.are.same({ { 0.5 }, { 0.5 } }, lumus.full({ 2, 1 }, 0.5):to_table())
    assert.are.same({ 4, 5 }, lumus.empty({ 4, 5 }):shape())
    local n = lumus.full({ 3 }, 0 / 0):to_table()
    assert.is_true(n[1] ~= n[1])
  end)
  it("reads little-endian float32 bytes as compat.pack_bytes (string.pack) writes them", function()
    local s = compat.pack_bytes("f32", { 1, 2, 3, 4, 5, 6.5 })
    local x = lumus.from_bytes(s, { 2, 3 })
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6.5 } }, x:to_table())
    assert.are.equal(s, x:to_bytes())
    assert.are.equal(compat.pack_bytes("f32", { 3, 4 }), x:to_bytes(3, 2))
  end)
  it("copies and fills on the device", function()
    local x = lumus.tensor({ 1, 2, 3, 4, 5 })
    local y = lumus.copy(x)
    assert.are.same({ 1, 2, 3, 4, 5 }, y:to_table())
    lumus.fill(y, 9)
    assert.are.same({ 9, 9, 9, 9, 9 }, y:to_table())
    lumus.copy(x, { out = y })
    assert.are.same({ 1, 2, 3, 4, 5 }, y:to_table())
  end)
end)

describe("tensor methods", function()
  local x = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
  it("report shape, sizes, dim, numel and dtype", function()
    assert.are.same({ 2, 3 }, x:shape())
    assert.are.equal(2, x:size(1))
    assert.are.equal(3, x:size(2))
    assert.are.equal(3, x:size(-1))
    assert.are.equal(2, x:size(-2))
    assert.are.equal(2, x:dim())
    assert.are.equal(6, x:numel())
    assert.are.equal("float32", x:dtype())
    expect("bad argument #2 to 'lumus.Tensor.size' %(dimension out of range", x.size, x, 3)
    expect("dimension out of range", x.size, x, 0)
    expect("dimension out of range", x.size, x, -3)
    local ok, e = pcall(function() x:size(3) end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'size' %(dimension out of range", e)
  end)
  it("return fresh shape tables", function()
    local s = x:shape()
    s[1] = 99
    assert.are.same({ 2, 3 }, x:shape())
  end)
  it("reshape accepts -1 once and keeps the values in order", function()
    local t = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, t:reshape({ 6 }):to_table())
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, t:reshape(6):to_table())
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, t:reshape({ -1 }):to_table())
    assert.are.same({ { { 1 }, { 2 } }, { { 3 }, { 4 } }, { { 5 }, { 6 } } }, t:reshape({ 3, -1, 1 }):to_table())
    local vv = t:reshape({ 6 }):reshape({ 1, 6 })
    assert.are.same({ { 1, 2, 3, 4, 5, 6 } }, vv:to_table())
    for _, bad in ipairs { { -1, -1 }, { 4, -1 }, { 7 }, { 0, 6 }, "a" } do
      local ok, e = pcall(function() t:reshape(bad) end)
      assert.is_false(ok)
      assert.matches("bad argument #1 to 'reshape'", e)
    end
  end)
  it("freeing a view releases only that handle", function()
    local t = lumus.tensor({ 1, 2, 3, 4 })
    local v = t:reshape({ 2, 2 })
    v:free()
    assert.is_true(v:is_freed())
    assert.is_false(t:is_freed())
    assert.are.same({ 1, 2, 3, 4 }, t:to_table())
  end)
  it("reshape makes a view that shares storage and keeps it alive", function()
    local t = lumus.tensor({ 1, 2, 3, 4, 5, 6 })
    local v = t:reshape({ 3, -1 })
    assert.are.same({ 3, 2 }, v:shape())
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, v:to_table())
    lumus.fill(v, 7)
    assert.are.same({ 7, 7, 7, 7, 7, 7 }, t:to_table())
    t:free()
    assert.are.same({ { 7, 7 }, { 7, 7 }, { 7, 7 } }, v:to_table())
    expect("bad argument #2 to 'lumus.Tensor.reshape' %(shape 4 has 4 elements, the tensor %(3x2%) has 6", v.reshape, v, { 4 })
  end)
  it("prints values and the Torch-style footer", function()
    local s = tostring(x)
    assert.matches("%[lumus.Tensor float32 of size 2x3%]", s)
    assert.matches("1%.0000", s)
    assert.matches("6%.0000", s)
    local big = tostring(lumus.zeros({ 100, 100 }))
    assert.matches("%.%.%.", big)
    assert.matches("%[lumus.Tensor float32 of size 100x100%]", big)
    assert.is_true(#big < 4000)
  end)
  it("prints the values themselves, for 1-D to 3-D tensors", function()
    local s = tostring(lumus.tensor({ { 1.5, 2.25, -3.125 }, { 4, 5.5, 6.75 } }))
    for _, v in ipairs { "1%.5", "2%.25", "%-3%.125", "5%.5", "6%.75" } do assert.matches(v, s) end
    assert.matches("%[lumus.Tensor float32 of size 3%]$", tostring(lumus.tensor({ 1, 2, 3 })))
    assert.matches("%[lumus.Tensor float32 of size 2x3x4%]$", tostring(lumus.zeros({ 2, 3, 4 })))
    local long = tostring(lumus.full({ 100000 }, 2.5))
    assert.matches("%.%.%.", long)
    assert.matches("2%.5", long)
    assert.matches("%[lumus.Tensor float32 of size 100000%]$", long)
    assert.is_true(#long < 4000)
  end)
end)

describe("tensor errors", function()
  it("name the function and argument for bad shapes", function()
    expect("bad argument #1 to 'lumus%.[%w.]*zeros' %(size 2 must be positive, got %-3%)", lumus.zeros, { 2, -3 })
    expect("bad argument #1 to 'lumus%.[%w.]*zeros' %(size 1 must be positive, got 0%)", lumus.zeros, { 0 })
    expect("bad argument #1 to 'lumus%.[%w.]*ones' %(size 1 must be an integer, got a fraction or NaN%)", lumus.ones, { 1.5 })
    expect("size 1 must be an integer, got a fraction or NaN", lumus.ones, { 0 / 0 })
    expect("size 1 must be an integer, got string", lumus.empty, { "3" })
    expect("bad argument #1 to 'lumus%.[%w.]*full' %(shape must have 1 to 8 sizes", lumus.full, { 1, 1, 1, 1, 1, 1, 1, 1, 1 }, 0)
    expect("shape must have 1 to 8 sizes, got 0", lumus.zeros, {})
    expect("bad argument #1 to 'lumus%.[%w.]*empty' %(shape expected", lumus.empty, nil)
    expect("byte count overflows", lumus.zeros, { 2 ^ 40, 2 ^ 40 })
    expect("number expected", lumus.full, { 2 }, "x")
    expect("bad argument #1 to 'lumus%.[%w.]*zeros'", lumus.zeros, { 2 ^ 62 })
    expect("bad argument #1 to 'lumus%.[%w.]*zeros'", lumus.zeros, { 2 ^ 31, 2 ^ 31 })
    expect("bad argument #1 to 'lumus%.[%w.]*ones'", lumus.ones, { 3, 2 ^ 53 })
  end)
  -- The closures below call rather than tail-call: LuaJIT keeps no call site for a tail call.
  it("name the function as called, with the integer shape form too", function()
    for _, case in ipairs {
      { "zeros", function() lumus.zeros(0) end },
      { "zeros", function() lumus.zeros(-2) end },
      { "ones", function() lumus.ones(2.5) end },
      { "full", function() lumus.full({ 2, 0 }, 1) end },
      { "empty", function() lumus.empty("3") end },
    } do
      local ok, e = pcall(case[2])
      assert.is_false(ok)
      assert.matches("bad argument #1 to '" .. case[1] .. "'", e)
    end
  end)
  it("reject nesting deeper than 8 levels", function()
    local t = { 1 }
    for _ = 1, 8 do t = { t } end                      -- 9 levels
    local ok, e = pcall(function() lumus.tensor(t) end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'tensor'", e)
  end)
  it("reject ragged, empty and non-number nested tables", function()
    expect("bad argument #1 to 'lumus%.[%w.]*tensor' %(element %[2%] has 2 entries where 3 were expected %(ragged", lumus.tensor, { { 1, 2, 3 }, { 4, 5 } })
    expect("element %[1%]%[2%] is string, number expected", lumus.tensor, { { 1, "a" } })
    -- a hole under the length: # of { 1, nil, 3 } is 1 on LuaJIT (any border will do), of
    -- a full array part with a hole 4 on every version
    local holed = { 1, 2, 3, 4 }
    holed[2] = nil
    expect("element %[2%] is nil, number expected", lumus.tensor, holed)
    expect("element %[2%] is number, a table expected", lumus.tensor, { { 1 }, 2 })
    expect("table is empty", lumus.tensor, {})
    expect("empty row", lumus.tensor, { {} })
    expect("bad argument #1 to 'lumus%.[%w.]*tensor' %(table expected, got nil", lumus.tensor, nil)
    -- metatables are ignored: only the raw contents count
    local proxy = setmetatable({}, { __index = function() return 1 end, __len = function() return 3 end })
    expect("table is empty", lumus.tensor, proxy)
  end)
  it("reject byte strings of the wrong length", function()
    expect("bad argument #1 to 'lumus%.[%w.]*from_bytes' %(expected 24 bytes %(4 per float32%) for shape 2x3, got 23", lumus.from_bytes, ("x"):rep(23), { 2, 3 })
    expect("bad argument #1 to 'lumus%.[%w.]*from_bytes' %(string expected", lumus.from_bytes, nil, { 1 })
    expect("bad argument #1 to 'lumus%.[%w.]*from_bytes' %(expected 8 bytes", lumus.from_bytes, compat.pack_bytes("f32", { 1, 2, 3 }), 2)
    expect("bad argument #2 to 'lumus%.[%w.]*from_bytes'", lumus.from_bytes, compat.pack_bytes("f32", { 1 }), { 0 })
  end)
  it("reject tensors past the device's largest allocation before touching the driver", function()
    local max = lumus.device().max_allocation_size
    expect("exceeds the device's largest allocation", lumus.empty, { math.floor(max / 4) + 1024 })
  end)
end)

describe("tensor lifetime", function()
  it("free() twice is fine and every later use says the tensor has been freed", function()
    local t = lumus.ones({ 4 })
    t:free()
    t:free()
    assert.is_true(t:is_freed())
    for _, m in ipairs { "shape", "size", "dim", "numel", "dtype", "to_table", "to_bytes", "reshape" } do
      expect("bad argument #1 to 'lumus.Tensor." .. m .. "' %(tensor has been freed%)", t[m], t, { 4 })
    end
    expect("tensor has been freed", lumus.copy, t)
    expect("tensor has been freed", lumus.fill, t, 1)
    assert.matches("freed", tostring(t))
  end)
  -- `<close>` is Lua 5.4 syntax: compiled from a string there only, so the file parses on 5.1.
  if compat.close_variables then
    local close_tests = assert(compat.load([[
      local lumus, assert, err_of = ...
      local M = {}
      function M.at_exit()
        local keep
        do
          local t <close> = lumus.zeros({ 16 })
          keep = t
          assert.is_false(keep:is_freed())
        end
        assert.is_true(keep:is_freed())
      end
      function M.on_error()
        local keep
        local ok = pcall(function()
          local t <close> = lumus.ones({ 8 })
          keep = t
          error("boom")
        end)
        assert.is_false(ok)
        assert.is_true(keep:is_freed())
        local e = err_of(keep.to_table, keep)
        assert.matches("tensor has been freed", e)
      end
      return M]], "=tensor_spec <close>"))(lumus, assert, err_of)
    it("__close releases a tensor at scope exit", close_tests.at_exit)
    it("__close releases a tensor when its scope is left by an error", close_tests.on_error)
  else
    pending("__close releases a tensor at scope exit and on errors (`<close>` needs Lua 5.4)")
  end
  it("names the method when called with method syntax", function()
    local t = lumus.ones(2); t:free()
    local ok, e = pcall(function() t:shape() end)
    assert.is_false(ok)
    assert.matches("calling 'shape' on bad self %(tensor has been freed%)", e)
  end)
  it("methods reject other types", function()
    local t = lumus.ones(2)
    expect("bad argument #1 to 'lumus.Tensor.shape' %(tensor expected, got table", t.shape, {})
  end)
  it("ops and methods tell tensors from other userdata and from tables with a tensor's metatable", function()
    local t = lumus.ones({ 2, 2 })
    local g = lumus.capture(function() lumus.add(t, 1, { out = t }) end)
    local fake = setmetatable({}, getmetatable(t))
    for _, v in ipairs({ io.stdout, g, fake }) do
      expect("bad argument #1 to 'lumus.Tensor.shape' %(tensor expected", t.shape, v)
      expect("bad argument #1 to 'lumus.add' %(tensor or number expected", lumus.add, v, t)
      expect("bad argument #4 to 'lumus.layer_norm_linear' %(tensor expected", lumus.layer_norm_linear, t, nil, nil, v)
      expect("out must be a tensor", lumus.add, t, t, { out = v })
    end
    g:free()
    -- the collector finalizes the fake with the tensors' __gc, which must not raise: on
    -- 5.1-5.3 the error would surface in whatever code the collection interrupted
    assert.is_nil(getmetatable(t).__gc(fake))
    fake = nil   -- luacheck: ignore
    assert.has_no.errors(function() collectgarbage(); collectgarbage() end)
  end)
end)

describe("device memory", function()
  it("returns in_use to its starting value after many tensors are freed", function()
    collectgarbage(); collectgarbage(); lumus.synchronize()
    local start = lumus.memory().in_use
    local ts = {}
    for i = 1, 1000 do ts[i] = lumus.zeros({ i }) end
    assert.is_true(lumus.memory().in_use >= start + 1000 * 4)
    for i = 1, 1000 do ts[i]:free() end
    lumus.synchronize()
    assert.are.equal(start, lumus.memory().in_use)
  end)
  it("reports the fields the README lists", function()
    local m = lumus.memory()
    -- (API.contract.md's `tensors` is `allocations` in the README and the core)
    for _, k in ipairs { "in_use", "peak", "reserved", "device_total", "limit", "blocks", "allocations" } do
      assert(compat.is_integer_type(m[k]), ("memory().%s is %s, an integer expected"):format(k, tostring(m[k])))
    end
    assert.is_true(m.peak >= m.in_use and m.reserved >= m.in_use and m.device_total > 0)
  end)
  it("holds 100,000 live small tensors in few device allocations, without overlap", function()
    collectgarbage(); collectgarbage(); lumus.synchronize()
    local start = lumus.memory().in_use
    local ts = {}
    for i = 1, 100000 do ts[i] = lumus.from_bytes(compat.pack_bytes("f32", { i, -i, i + 0.5, 1 / i }), { 4 }) end
    local m = lumus.memory()
    assert.is_true(m.allocations >= 100000)
    assert.is_true(m.blocks < 64, "blocks: " .. m.blocks)
    assert.is_true(m.in_use >= start + 100000 * 16)
    -- distinct contents survive: no two tensors share bytes
    for i = 1, 100000, 997 do
      assert.are.same({ i, -i, i + 0.5, ref.f32(1 / i) }, ts[i]:to_table())
    end
    assert.are.same({ 100000, -100000, 100000.5, ref.f32(1e-5) }, ts[100000]:to_table())
    for i = 1, 100000 do ts[i]:free() end
    lumus.synchronize()
    assert.are.equal(start, lumus.memory().in_use)
  end)
  it("lets the GC reclaim 10,000 tensors of 1 MiB made without free()", function()
    lumus.reset_peak()
    local most = 0
    for i = 1, 10000 do
      local _ = lumus.empty({ 256 * 1024 })
      if i % 100 == 0 then most = math.max(most, lumus.memory().in_use) end
    end
    assert.is_true(most < 2 * 2 ^ 30, "in use " .. most)   -- 10 GiB were made in all
    local peak = lumus.memory().peak
    assert.is_true(peak < 1024 * 2 ^ 20, "peak " .. peak)
  end)
  it("reclaims dropped tensors with pending work when a memory limit is reached", function()
    collectgarbage(); lumus.synchronize()
    local base = lumus.memory().in_use
    lumus.set_memory_limit(base + 64 * 2 ^ 20)
    local ok, e = pcall(function()
      for _ = 1, 300 do local _ = lumus.zeros({ 256 * 1024 }) end   -- 300 MiB, each filled
    end)
    lumus.set_memory_limit(nil)
    assert(ok, e)
  end)
  it("reports out of device memory with the request and what is in use, and recovers", function()
    collectgarbage(); lumus.synchronize()
    local base = lumus.memory().in_use
    lumus.set_memory_limit(base + 8 * 2 ^ 20)
    local keep = lumus.full({ 1024 * 1024 }, 3)          -- 4 MiB
    expect("out of device memory: requested 8388608 bytes, %d+ in use", lumus.empty, { 2 * 1024 * 1024 })
    assert.are.equal(3, keep:to_table()[1024 * 1024])   -- existing data intact
    keep:free()
    local again = lumus.empty({ 1024 * 1024 })
    again:free()
    lumus.set_memory_limit(nil)
  end)
  it("allocates until the device refuses, keeps every tensor's contents, and recovers", function()
    collectgarbage(); collectgarbage(); lumus.synchronize()
    local base = lumus.memory().in_use
    lumus.set_memory_limit(base + 16 * 2 ^ 20)
    local held, e = {}, nil
    for i = 1, 1000 do
      local ok, t = pcall(lumus.full, { 256 * 1024 }, i)   -- 1 MiB each, its own value
      if not ok then e = t break end
      held[i] = t
    end
    assert.is_string(e, "the limit was never reached")
    assert.are.equal(16, #held)
    local in_use = lumus.memory().in_use
    assert.matches("^lumus%.full: out of device memory: requested 1048576 bytes, " .. in_use .. " in use$", e)
    for i, t in ipairs(held) do
      assert.are.equal(compat.pack_bytes("f32", { i }):rep(2), t:to_bytes(256 * 1024 - 1, 2))
    end
    for i = 1, #held, 2 do held[i]:free() end               -- free half: room again
    local again = lumus.full({ 256 * 1024 }, -1)
    assert.are.equal(-1, again:to_table()[1])
    for i = 2, #held, 2 do assert.are.equal(i, held[i]:to_table()[1]) end
    again:free()
    for i = 2, #held, 2 do held[i]:free() end
    lumus.set_memory_limit(nil)
    lumus.synchronize()
    assert.are.equal(base, lumus.memory().in_use)
  end)
  it("refuses requests past the device's limits before asking the driver", function()
    local d, m = lumus.device(), lumus.memory()
    local cases = {
      { { 2 ^ 20, 2 ^ 20 }, "exceeds the device's largest allocation %(" .. d.max_allocation_size .. " bytes%)" },
      { { math.floor(d.max_allocation_size / 4) + 1 }, "exceeds the device's largest allocation" },
    }
    if m.device_total < d.max_allocation_size then   -- a heap smaller than one allocation
      cases[#cases + 1] = { { math.floor(m.device_total / 4) + 64 }, "more than the device limit of " .. m.device_total }
    end
    for _, c in ipairs(cases) do
      local ok, e = pcall(lumus.empty, c[1])
      assert.is_false(ok)
      assert.matches("^lumus%.empty: ", e)
      assert.matches(c[2], e)
      local after = lumus.memory()
      assert.are.equal(m.reserved, after.reserved)          -- no block was asked for
      assert.are.equal(m.blocks, after.blocks)
    end
    assert.matches("shape has too many elements", select(2, pcall(lumus.empty, { 2 ^ 40, 2 })))
  end)
end)
