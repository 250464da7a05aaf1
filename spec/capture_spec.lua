-- lumus.capture(fn) and g:replay(): the ops fn issues are recorded once and submitted
-- again by each replay. Results are compared bit for bit (to_bytes) with eager runs of
-- the same function; misuse is checked by message; memory by lumus.memory() counts.
local lumus = require "lumus"
local checks = dofile("spec/support/check.lua")
local compat = require "lumus.compat"
local nn = lumus.nn

local function frame_model(d, blocks)
  nn.manual_seed(21)
  local mods = {}
  for _ = 1, blocks do
    mods[#mods + 1] = nn.LayerNorm(d)
    mods[#mods + 1] = nn.Linear(d, d)
    mods[#mods + 1] = nn.GELU({ approximate = "tanh" })
  end
  mods[#mods + 1] = nn.Linear(d, 1)
  -- Unfused, so that the op counts below are the modules' (spec/linear_fused_spec.lua
  -- captures fused ones).
  return nn.Sequential(compat.unpack(mods)):fusion(false)
end

local function input(rows, d, k)
  local t = {}
  for r = 1, rows do
    local row = {}
    for c = 1, d do row[c] = math.sin(0.37 * r + 0.11 * c + k) * (1 + r % 3) end
    t[r] = row
  end
  return lumus.tensor(t)
end

-- Device memory once the garbage is gone (allocations, bytes in use).
local usage = checks.settle

describe("lumus.capture", function()
  it("replays bit-identical results to eager runs of the same function", function()
    local model = frame_model(64, 3)
    local x = input(16, 64, 0)
    local f = function() return model:forward(x) end
    local eager = f():to_bytes()
    local g, y = lumus.capture(f)
    assert.equal(10, g:stats().ops)
    -- The capture records only: a poisoned output shows that the replay recomputes it.
    lumus.fill(y, 0 / 0)
    local y2 = g:replay()
    assert.is_true(rawequal(y, y2))   -- the same output tensor every time
    assert.equal(eager, y:to_bytes())
    for _ = 1, 5 do g:replay() end
    assert.equal(eager, y:to_bytes())
    g:free()
  end)

  it("replays layer_norm_backward's folded reduce (its counters held by the graph) as eager runs give it", function()
    lumus.tune.layer_norm_backward(4, nil, { form = "fused", groups = 23, reduce = "fold" })
    local x, dy = input(200, 48, 1), input(200, 48, 2)
    local w = lumus.tensor((function() local t = {} for c = 1, 48 do t[c] = 1 + 0.01 * c end return t end)())
    local _, m, r = lumus.layer_norm_forward(x, w)
    local f = function() return lumus.layer_norm_backward(dy, x, m, r, w) end
    local dx, dw, db = f()
    local eager = dx:to_bytes() .. dw:to_bytes() .. db:to_bytes()
    local g, gx, gw, gb = lumus.capture(f)
    for _ = 1, 4 do
      lumus.fill(gw, 0 / 0)
      g:replay()
      assert.equal(eager, gx:to_bytes() .. gw:to_bytes() .. gb:to_bytes())
    end
    -- eager calls between replays share the context's counters with the graph's own
    local _, dw2 = f()
    assert.equal(dw:to_bytes(), dw2:to_bytes())
    g:free()
    lumus.tune.layer_norm_backward(4, nil, {})
  end)

  it("sees inputs changed between replays: copy, fill and an eager op writing them", function()
    local model = frame_model(32, 2)
    local x = lumus.zeros({ 8, 32 })
    local f = function() return model:forward(x) end
    local a, b = input(8, 32, 1), input(8, 32, 2)
    local expect = {}
    x:copy(a); expect.a = f():to_bytes()
    x:copy(b); expect.b = f():to_bytes()
    lumus.fill(x, 0.25); expect.fill = f():to_bytes()
    lumus.add(a, b, { out = x }); expect.sum = f():to_bytes()
    local g, y = lumus.capture(f)
    x:copy(a); g:replay(); assert.equal(expect.a, y:to_bytes())
    x:copy(b); g:replay(); assert.equal(expect.b, y:to_bytes())
    lumus.fill(x, 0.25); g:replay(); assert.equal(expect.fill, y:to_bytes())
    lumus.add(a, b, { out = x }); g:replay(); assert.equal(expect.sum, y:to_bytes())
    -- Eager work after a replay reads what the replay wrote.
    x:copy(a)
    g:replay()
    local z = lumus.scale(y, 2)
    local ya = compat.unpack_bytes("f32", expect.a, 1, 8)
    local zt = z:to_table()
    for i = 1, 8 do assert.equal(2 * ya[i], zt[i][1]) end
    g:free()
  end)

  it("holds the memory of tensors made inside the function, whose handles may go", function()
    local w = input(16, 16, 3)
    local x = input(4, 16, 4)
    local function f()
      local h = lumus.linear(x, w)            -- fresh intermediates, dropped after the call
      local t = h:transpose(1, 2):contiguous()
      local z = lumus.zeros({ 16, 4 })
      return lumus.add(lumus.gelu(t), z)
    end
    local eager = f():to_bytes()
    local g, y = lumus.capture(f)
    collectgarbage(); collectgarbage()
    lumus.fill(y, 7)
    g:replay()
    assert.equal(eager, y:to_bytes())
    assert.equal(2, g:stats().inputs)         -- x and w; the rest are the graph's own
    g:free()
  end)

  it("runs overlapping replays of one graph in order", function()
    local c = lumus.zeros({ 64 })
    local g = lumus.capture(function() lumus.add(c, 1, { out = c }) end)
    for _ = 1, 300 do g:replay() end        -- no wait between them
    local t = c:to_table()
    for i = 1, 64 do assert.equal(300, t[i]) end
    g:free()
  end)

  it("counts a replay's device time in lumus.gpu_time, as the same ops run eagerly", function()
    local model = frame_model(128, 4)
    local x = input(64, 128, 0)
    model:forward(x):to_bytes()
    local g = lumus.capture(function() return model:forward(x) end)
    g:replay()
    -- The least of a few samples: lavapipe's threads share the machine.
    local function least(fn)
      local m = math.huge
      for _ = 1, 5 do m = math.min(m, lumus.gpu_time(fn)) end
      return m
    end
    local eager = least(function() model:forward(x) end)
    local replay = least(function() g:replay() end)
    local eager_after = least(function() model:forward(x) end)
    assert.is_true(replay > 0.4 * eager and replay < 2.5 * eager,
      ("gpu_time of a replay %g s, of the eager forward %g s"):format(replay, eager))
    -- the pair held open for the replay is closed: later timings count only their own work
    assert.is_true(eager_after < 2.5 * eager and least(function() end) < 0.5 * eager,
      ("eager forward %g s after timing replays (%g s before)"):format(eager_after, eager))
    g:free()
  end)

  it("keeps memory flat over many replays and gives it back when freed", function()
    local model = frame_model(16, 1)
    local x = input(4, 16, 5)
    local f = function() return model:forward(x) end
    local expect = f():to_bytes()
    local allocs0, bytes0 = usage()
    local g, y = lumus.capture(function() local h = lumus.scale(x, 1); return model:forward(h) end)
    local n = tonumber(os.getenv("LUMUS_CAPTURE_REPLAYS")) or 20000
    for _ = 1, 100 do g:replay() end
    local allocs1, bytes1 = usage()
    local lua1 = collectgarbage("count")
    for i = 1, n do
      g:replay()
      if i % 5000 == 0 then lumus.synchronize() end
    end
    local allocs2, bytes2 = usage()
    assert.equal(allocs1, allocs2)
    assert.equal(bytes1, bytes2)
    assert.is_true(collectgarbage("count") < lua1 + 64)   -- KiB: replays allocate nothing
    assert.equal(expect, y:to_bytes())
    assert.equal(allocs0 + 1, allocs1)                        -- the graph's own h
    g:free()
    local allocs3, bytes3 = usage()
    assert.equal(allocs0, allocs3)
    assert.equal(bytes0, bytes3)
  end)

  -- `<close>` is Lua 5.4 syntax: compiled from a string there only, so the file parses on 5.1.
  local frees_with_close = compat.close_variables and assert(compat.load([[
    local lumus, usage, assert = ...
    return function()
      local allocs0 = usage()
      do
        local g <close> = lumus.capture(function() return lumus.zeros({ 256 }) end)
        g:replay()
        assert.equal(allocs0 + 1, (usage()))
      end
      assert.equal(allocs0, (usage()))
    end]], "=capture_spec <close>"))(lumus, usage, assert)
  it("frees with <close> and the collector", function()
    local allocs0 = usage()
    if frees_with_close then frees_with_close() end
    local g = lumus.capture(function() return lumus.zeros({ 256 }) end)
    assert.equal(allocs0 + 1, (usage()))
    g = nil   -- luacheck: ignore
    collectgarbage(); collectgarbage()
    assert.equal(allocs0, (usage()))
  end)
end)

describe("lumus.capture misuse", function()
  local x
  before_each(function() x = lumus.ones({ 4, 4 }) end)

  local function capture_error(fn)
    local ok, err = pcall(lumus.capture, fn)
    assert.is_false(ok)
    return tostring(err)
  end

  it("refuses host reads, writes and waits inside the function", function()
    local cases = {
      to_table = function() lumus.scale(x, 2):to_table() end,
      to_bytes = function() x:to_bytes() end,
      tostring = function() return tostring(x) end,
      synchronize = function() lumus.scale(x, 2); lumus.synchronize() end,
      tensor = function() return lumus.tensor({ 1, 2, 3 }) end,
      gpu_time = function() lumus.gpu_time(function() end) end,
    }
    for name, fn in pairs(cases) do
      local err = capture_error(fn)
      assert.matches("lumus.capture: [%w_.']+ cannot be captured", err, 1, false, name)
      assert.matches("around g:replay%(%)", err)
    end
    -- Nothing of a failed capture stays: the next one and eager work are fine.
    local g, y = lumus.capture(function() return lumus.scale(x, 3) end)
    g:replay()
    assert.same({ 3, 3, 3, 3 }, y:to_table()[1])
    g:free()
  end)

  it("propagates errors of the function and releases what it held", function()
    local allocs0 = usage()
    local ok, err = pcall(lumus.capture, function()
      lumus.zeros({ 1000 })
      error("boom in the frame")
    end)
    assert.is_false(ok)
    assert.matches("boom in the frame", tostring(err))
    assert.equal(allocs0, (usage()))
  end)

  it("refuses nesting, and replays inside a capture", function()
    local err = capture_error(function() lumus.capture(function() end) end)
    assert.matches("lumus.capture: a capture is already recording %(captures cannot be nested%)", err)
    local g = lumus.capture(function() return lumus.scale(x, 2) end)
    err = capture_error(function() g:replay() end)
    assert.matches("cannot replay a graph inside lumus.capture", err)
    g:free()
  end)

  it("refuses a replay once an input of the graph has been freed", function()
    local w = lumus.ones({ 4, 4 })
    local g, y = lumus.capture(function() return lumus.add(x, w) end)
    g:replay()
    w:free()
    local ok, err = pcall(g.replay, g)
    assert.is_false(ok)
    assert.matches("a tensor used by the graph has been freed", tostring(err))
    assert.is_false(y:is_freed())
    g:free()
    -- Freed inside the function itself.
    local v = lumus.ones({ 4, 4 })
    g = lumus.capture(function() local r = lumus.add(x, v); v:free(); return r end)
    ok, err = pcall(g.replay, g)
    assert.is_false(ok)
    assert.matches("a tensor used by the graph has been freed", tostring(err))
    g:free()
  end)

  it("refuses a replay after the modules it captured changed shape (their old outputs freed)", function()
    local model = frame_model(8, 1)
    local a = input(4, 8, 6)
    model:forward(a)                       -- the modules' outputs exist before the capture
    local g, y = lumus.capture(function() return model:forward(a) end)
    g:replay()
    local expect = y:to_bytes()
    model:forward(input(3, 8, 7))          -- 3 rows: every module replaces its outputs
    local ok, err = pcall(g.replay, g)
    assert.is_false(ok)
    assert.matches("a tensor used by the graph has been freed", tostring(err))
    assert.is_true(y:is_freed())
    g:free()
    -- Captured with outputs made inside the capture, the graph keeps their memory.
    local model2 = frame_model(8, 1)
    local g2, y2 = lumus.capture(function() return model2:forward(a) end)
    g2:replay()
    assert.equal(expect, y2:to_bytes())
    g2:free()
  end)

  it("refuses random draws, whose generator state advances with every call", function()
    -- (lumus.rand and its kin come with the random-numbers branch: their launches are
    -- marked stateful, ops.h)
    if not (lumus.rand and lumus.randn) then pending("no random ops in this build") return end
    for _, f in ipairs({ function() return lumus.rand({ 4 }) end, function() return lumus.randn({ 4 }) end }) do
      local ok, err = pcall(lumus.capture, f)
      assert.is_false(ok)
      assert.matches("lumus.capture: [%w_.']*rand[n]? cannot be captured %(it draws on state", tostring(err))
    end
  end)

  it("refuses a freed graph, bad arguments and the split LayerNorm form", function()
    local g = lumus.capture(function() return lumus.scale(x, 2) end)
    g:free()
    g:free()   -- idempotent
    assert.is_true(g:is_freed())
    local ok, err = pcall(g.replay, g)
    assert.is_false(ok)
    assert.matches("graph has been freed", tostring(err))
    assert.matches("lumus.Graph %(freed%)", tostring(g))
    ok, err = pcall(lumus.capture, 42)
    assert.is_false(ok)
    assert.matches("bad argument #1 to '[%w.]*capture' %(function expected, got number%)", tostring(err))
    ok, err = pcall(lumus.capture, function() end, {})
    assert.is_false(ok)
    assert.matches("no argument expected after the function", tostring(err))
    ok, err = pcall(lumus.capture(function() end).replay, 5)
    assert.is_false(ok)
    assert.matches("lumus.Graph expected, got number", tostring(err))

    local wide = lumus.ones({ 2, 4096 })
    local before = lumus.tune.layer_norm(4096)
    lumus.tune.layer_norm(4096, { form = "split" })
    -- not a tail call: LuaJIT keeps no call site for those (the message would say lumus.layer_norm_forward)
    ok, err = pcall(lumus.capture, function() local y = lumus.layer_norm_forward(wide, nil, nil, 1e-5) return y end)
    lumus.tune.layer_norm(4096, { form = "auto" })
    assert.is_false(ok)
    assert.matches("lumus.capture: layer_norm_forward uses scratch memory that keeps state between calls", tostring(err))
    -- the plan is restored; its epoch (the split form's call counter, which the refused
    -- capture may have advanced once an earlier spec used that form) is state, not plan
    local after = lumus.tune.layer_norm(4096)
    before.epoch, after.epoch = nil, nil
    assert.same(before, after)
  end)
end)

describe("lumus.capture in a C host (tests/capture_host.c)", function()
  local shell = dofile("spec/support/shell.lua")
  local bin = shell.ROOT .. "/" .. shell.BUILD .. "/tests/capture_host"

  local function check(out, code)
    assert.are.equal(0, code, out)
    assert.matches("PASS: capturing over host buffers runs nothing", out)
    assert.matches("PASS: 3 replays wait for the host's semaphore, signal lumus's timeline, and see new host input", out)
    assert.matches("capture_host: all passed", out)
  end

  it("replays wait for the host's timeline semaphore and signal lumus's", function()
    assert(io.open(bin, "rb"), bin .. " is missing: run `make examples` first"):close()
    check(shell.run(bin))
  end)

  it("does so with no message from the validation layer", function()
    local layers = shell.run("ls /usr/share/vulkan/explicit_layer.d/ /etc/vulkan/explicit_layer.d/ 2>/dev/null")
    if not layers:find("khronos_validation", 1, true) then pending("validation layer not installed") return end
    local out, code = shell.run("LUMUS_VALIDATION=1 " .. bin)
    check(out, code)
    assert.matches("validation layer on", out)
    assert.matches("PASS: the validation layer reported nothing", out)
  end)
end)
