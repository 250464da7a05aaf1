-- The layers point down: no two source files call each other (directly or through
-- others), and the core (src/*.c below tensor.c) neither calls nor includes src/ops/.
-- Calls are read from the build's objects with nm (built by `make`).
local compat = require "lumus.compat"
local shell = dofile("spec/support/shell.lua")
local ROOT, run = shell.ROOT, shell.run

local CORE = { context = true, memory = true, storage = true, stream = true, pipelines = true,
               shaders = true, queues = true, vkcheck = true, luautil = true, timing = true }

local function objects()
  local out = run(("ls %s/%s/obj/*.o %s/%s/obj/ops/*.o"):format(ROOT, shell.BUILD, ROOT, shell.BUILD))
  local list = {}
  for path in out:gmatch("%S+%.o") do list[#list + 1] = path end
  return list
end

-- file -> set of files whose functions it calls
local function call_graph()
  local defined, used = {}, {}
  for _, path in ipairs(objects()) do
    local name = path:match("/obj/(.-)%.o$")
    used[name] = {}
    for line in run("nm " .. path):gmatch("[^\n]+") do
      local kind, sym = line:match("^%x+ (%a) (%S+)$")
      if kind and kind:match("[TDRB]") then defined[sym] = name end
      local u = line:match("^%s+U (%S+)$")
      if u then used[name][u] = true end
    end
  end
  local g = {}
  for name, syms in pairs(used) do
    g[name] = {}
    for sym in pairs(syms) do
      local d = defined[sym]
      if d and d ~= name then g[name][d] = true end
    end
  end
  return g
end

describe("the source layout", function()
  local has_nm = compat.execute("command -v nm >/dev/null 2>&1")
  it("has no call cycle between files and no core file calling an op file", function()
    if not has_nm then pending("nm is not installed (Debian package binutils)") return end
    local g = call_graph()
    assert.is_true(next(g) ~= nil, "no objects under " .. shell.BUILD .. "/obj: run make first")
    local function reaches(from, to)
      local seen, stack = {}, { from }
      while #stack > 0 do
        local x = table.remove(stack)
        for y in pairs(g[x] or {}) do
          if y == to then return true end
          if not seen[y] then seen[y] = true; stack[#stack + 1] = y end
        end
      end
      return false
    end
    local problems = {}
    for a, callees in pairs(g) do
      for b in pairs(callees) do
        if reaches(b, a) then problems[#problems + 1] = a .. " <-> " .. b end
        if CORE[a] and b:match("^ops/") then problems[#problems + 1] = a .. " (core) calls " .. b end
      end
    end
    table.sort(problems)
    assert.are.same({}, problems)
  end)

  it("has no core file including a header of src/ops/", function()
    local out = run(("grep -l '#include \"ops/\\|#include \"\\.\\./ops/' %s/src/*.c %s/src/*.h || true"):format(ROOT, ROOT))
    local bad = {}
    for path in out:gmatch("%S+") do
      local name = path:match("src/(.-)%.[ch]$")
      if CORE[name] then bad[#bad + 1] = path end
    end
    assert.are.same({}, bad)
  end)
end)
