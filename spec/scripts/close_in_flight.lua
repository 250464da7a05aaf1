-- Queues a lot of device work, then leaves in the way given by arg[1] while that work is
-- still in flight: "close" (os.exit(true, true): lua_close runs), "end" (the chunk ends;
-- the interpreter closes the state), "error" (an uncaught error), "exit" (os.exit without closing).
-- Prints "queued" and whether work was pending; lumus must wait for its work, free
-- everything at lua_close and never hang or crash. Used by spec/interrupt_spec.lua and
-- by `make valgrind`.
local lumus = require "lumus"
local mode = arg and arg[1] or "close"
local x = lumus.full({ 256, 1024 }, 1.5)
local w, b = lumus.ones({ 1024 }), lumus.zeros({ 1024 })
local ys = {}
for i = 1, 400 do
  ys[i % 16 + 1] = lumus.layer_norm_forward(x, w, b)
  if i % 50 == 0 then lumus.copy(x, { out = lumus.empty({ 256, 1024 }) }) end
end
local garbage = lumus.zeros({ 64, 1024 })   -- dropped with work pending
garbage = nil
print("queued", lumus.pending())
io.stdout:flush()
-- (Lua 5.1's os.exit takes only a number and never closes the state: there the pcall
-- fails and the chunk ends, after which lua.c closes the state all the same.)
if mode == "close" then pcall(os.exit, true, true)
elseif mode == "error" then error("interrupted on purpose")
elseif mode == "exit" then os.exit(0, false) end
