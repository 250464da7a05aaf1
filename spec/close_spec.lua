-- lua_close frees the whole device context whatever finalizers do while the state
-- closes (tests/close_loop.c, built by `make examples`), and tensors that outlive their
-- context raise instead of crashing.
local shell = dofile("spec/support/shell.lua")
local ROOT, run = shell.ROOT, shell.run

-- 300 rounds take about 30 s on lavapipe; `build/tests/close_loop 1000` (or
-- LUMUS_CLOSE_ROUNDS=1000) is the longer run, about 100 s.
local ROUNDS = tonumber(os.getenv("LUMUS_CLOSE_ROUNDS")) or 300

describe("opening and closing lua_States (tests/close_loop.c)", function()
  it("leaves no context, and VmRSS and threads flat, with finalizers that use lumus while closing", function()
    local bin = ROOT .. "/" .. shell.BUILD .. "/tests/close_loop"
    local f = io.open(bin, "rb")
    assert(f, bin .. " is missing: run `make examples` first")
    f:close()
    local out, code = run(("%s %d"):format(bin, ROUNDS))
    assert.are.equal(0, code, out)
    if _VERSION == "Lua 5.1" and not rawget(_G, "jit") then   -- 5.1's os.exit takes no `close`
      assert.matches("SKIP: os.exit%(true, true%): this Lua's os.exit does not close the state", out)
    else
      assert.matches("PASS: os.exit%(true, true%) with hostile finalizers leaves no context", out)
    end
    assert.matches("PASS: " .. ROUNDS .. " rounds of lua_close with hostile finalizers", out)
    assert.matches("close_loop: all passed", out)
  end)
end)

describe("a script closing its state", function()
  local run_lua = shell.run_lua   -- a fresh interpreter; the chunks end, and it closes the state

  it("gets a closed-context error from tensors made by a finalizer during lua_close", function()
    local out, rc = run_lua([[
      local lumus = require "lumus"
      local compat = require "lumus.compat"
      -- The finalizers' objects stay reachable (globals), so only lua_close runs them,
      -- in reverse order of registration.
      after_teardown = compat.on_collect(function()   -- runs after the context's teardown
        for _, f in ipairs {
          function() local r = made:to_table() return r end,   -- called, not tail-called: LuaJIT keeps no call site for those
          function() local r = lumus.add(made, made) return r end,
          function() local r = made:reshape({ 4, 4 }) return r end,
          function() local r = lumus.zeros({ 2 }) return r end,
          function() local r = lumus.memory() return r end,
        } do
          local ok, e = pcall(f)
          print(ok, e)
        end
        made:free()
        print("freed", made:is_freed())
      end)
      local keep = lumus.zeros({ 4 })
      before_teardown = compat.on_collect(function()   -- runs before it
        made = lumus.full({ 16 }, 2)
        lumus.synchronize()
        print("made", made:to_table()[1])
      end)
      collectgarbage()   -- runs neither
    ]])
    assert.are.equal(0, rc, out)
    assert.matches("made\t2", out)
    assert.matches("false\t[^\n]*calling 'to_table' on bad self %(the tensor's device context has been closed%)", out)
    assert.matches("false\t[^\n]*bad argument #1 to '[%w.]*add' %(the tensor's device context has been closed%)", out)
    assert.matches("false\t[^\n]*calling 'reshape' on bad self %(the tensor's device context has been closed%)", out)
    assert.matches("freed\ttrue", out)
    local _, n = out:gsub("false\t[^\n]*: lumus: the device context has been closed\n", "")
    assert.are.equal(2, n, out)   -- zeros and memory: no new context is made
  end)

  it("refuses to make the first context inside a finalizer", function()
    -- only 5.4 tells a C function that a finalizer is running (README, "Lua versions")
    if _VERSION ~= "Lua 5.4" or rawget(_G, "jit") then pending("Lua 5.4 only") return end
    local out, rc = run_lua([[
      local lumus = require "lumus"
      require("lumus.compat").on_collect(function() print(pcall(lumus.zeros, { 4 })) end)
      collectgarbage()
      print(pcall(function() return lumus.zeros({ 2 }):to_table()[1] end))
    ]])
    assert.are.equal(0, rc, out)
    assert.matches("false\t[^\n]*lumus: the device context cannot be created inside a finalizer %(__gc%)", out)
    assert.matches("true\t0", out)
  end)
end)
