-- Interrupted scripts: an error in the middle of a chain of ops leaves the earlier
-- results and the module intact; a state closed (or a process ending) with work in
-- flight waits for that work and does not hang or crash.
local shell = dofile("spec/support/shell.lua")
local LUA = shell.LUA   -- the interpreter running the specs
local lumus = require "lumus"
local ref = require "lumus.reference"
local checks = dofile("spec/support/check.lua")

describe("an error in the middle of a chain of ops", function()
  it("leaves the results before it intact and the module usable", function()
    collectgarbage("collect"); lumus.synchronize()
    local start = lumus.memory().in_use
    local xt = ref.random_table({ 4, 32 }, ref.rng(3))
    local x = lumus.tensor(xt)
    local w = lumus.full({ 32 }, 2)
    local y1 = lumus.layer_norm_forward(x, w)                -- op 1
    local y2 = lumus.copy(y1)                                -- op 2
    -- op 3: a bias of the wrong shape, while ops 1 and 2 may still be in flight
    local ok, e = pcall(lumus.layer_norm_forward, y2, w, lumus.ones({ 31 }))
    assert.is_false(ok)
    assert.matches("bad argument #3 to '[%w.]*layer_norm_forward' %(bias must have shape %[32%]", e)
    -- and an error raised by the script itself between ops
    local ok2 = pcall(function() lumus.fill(y2, 0); error("script error") end)
    assert.is_false(ok2)
    local y4 = lumus.layer_norm_forward(y1, nil, nil, 1e-5, { out = lumus.empty({ 4, 32 }) })
    local wt = {}
    for i = 1, 32 do wt[i] = 2 end
    local want1 = ref.layer_norm_forward(xt, wt)
    checks.close(y1, want1, { abs = 1e-5 })
    local zeros = {}
    for i = 1, 4 do zeros[i] = {} for j = 1, 32 do zeros[i][j] = 0 end end
    assert.are.same(zeros, y2:to_table())                    -- the fill before the error ran
    checks.close(y4, ref.layer_norm_forward(want1), { abs = 1e-5 })
    for _, t in ipairs { x, w, y1, y2, y4 } do t:free() end
    collectgarbage("collect"); lumus.synchronize()
    assert.are.equal(start, lumus.memory().in_use)
  end)

  it("leaves the stream usable after an error inside gpu_time's function", function()
    local x = lumus.ones({ 8, 64 })
    local y
    local ok, e = pcall(lumus.gpu_time, function()
      y = lumus.layer_norm_forward(x)
      lumus.layer_norm_forward(x, lumus.ones({ 3 }))
    end)
    assert.is_false(ok)
    assert.matches("weight must have shape %[64%]", e)
    assert.are.same({ 8, 64 }, y:shape())
    assert.is_true(lumus.gpu_time(function() lumus.layer_norm_forward(x) end) >= 0)
    assert.are.equal(0, y:to_table()[8][64])
  end)
end)

describe("leaving with work in flight", function()
  local script = "spec/scripts/close_in_flight.lua"
  local function run(mode)
    local cmd = ("LUA_PATH=%q LUA_CPATH=%q timeout 300 " .. LUA .. " %s %s 2>&1; echo rc=$?")
      :format(package.path, package.cpath, script, mode)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    return out, tonumber(out:match("rc=(%d+)%s*$"))
  end

  for _, case in ipairs {
    { "close", 0, "os.exit(true, true) closes the state: lua_close waits and frees" },
    { "end", 0, "the script ends: lua5.4 closes the state" },
    { "error", 1, "an uncaught error: the state is closed after the message" },
    { "exit", 0, "os.exit without closing: the process ends without a crash" },
  } do
    it(case[3], function()
      local out, rc = run(case[1])
      assert.matches("queued\ttrue", out)                 -- work really was in flight
      assert.are.equal(case[2], rc, out)                   -- no hang (124), no crash (>128)
      if case[1] == "error" then assert.matches("interrupted on purpose", out) end
      assert.is_nil(out:find("LeakSanitizer", 1, true), out)   -- under make sanitize
    end)
  end
end)

describe("os.exit after require 'lumus'", function()
  -- A stand-in os.exit set before lumus loads records what the wrapper hands it.
  it("waits for the state's work in flight, then calls the os.exit it wrapped with its arguments", function()
    local out, rc = shell.run_lua([[
      os.exit = function(...)
        local code, close = ...
        print("exit", select("#", ...), code, close, require("lumus").pending())
      end
      local lumus = require "lumus"
      local wrapped = os.exit
      package.loaded.lumus, package.loaded["lumus.core"] = nil, nil
      require "lumus"
      print("wrapped once", os.exit == wrapped)
      local x = lumus.full({ 256, 1024 }, 1.5)
      for _ = 1, 200 do x = lumus.layer_norm_forward(x) end
      print("queued", lumus.pending())
      os.exit(3, false)
      print("after", x:to_table()[1][1] == x:to_table()[1][1])
    ]])
    assert.are.equal(0, rc, out)
    assert.matches("wrapped once\ttrue", out)
    assert.matches("queued\ttrue", out)
    assert.matches("exit\t2\t3\tfalse\tfalse\n", out)   -- two arguments passed on; nothing pending
    assert.matches("after\ttrue", out)
  end)

  it("makes no device context in a state that never made one", function()
    local out, rc = shell.run_lua([[
      os.exit = function(code) print("exit", code) end
      local lumus = require "lumus"
      os.exit(5)
      print("context", debug.getregistry()["lumus.context"])   -- src/context.c's LM_CONTEXT_KEY
    ]])
    assert.are.equal(0, rc, out)
    assert.matches("exit\t5", out)
    assert.matches("context\tnil", out)
  end)
end)

