-- The pipeline cache on disk and lumus.warm_up (src/pipeline_cache.c, src/pipelines.c):
-- each case runs fresh processes, as the cache is read when a context is made and
-- written when it goes.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local compat = require "lumus.compat"
local DIR = os.tmpname()
os.remove(DIR)
assert(os.execute("mkdir -p " .. DIR))

-- Runs a Lua chunk in a fresh lua5.4 with these environment settings (a value false
-- unsets the variable); returns its output and exit code. io.popen keeps the sanitizer
-- runtime preloaded under `make sanitize`, as spec/support/shell.lua's run_lua.
local function run(env, code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local vars = {}
  for k, v in pairs(env) do
    vars[#vars + 1] = v and ("%s=%q"):format(k, v) or ("-u " .. k)
  end
  table.sort(vars)
  local p = io.popen(("env %s LUA_PATH=%q LUA_CPATH=%q timeout 120 " .. LUA .. " %s 2>&1; echo rc=$?")
    :format(table.concat(vars, " "), package.path, package.cpath, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

-- Prints the cache's state as key=value lines, runs some ops, checks their values.
local WORK = [[
  local lumus = require "lumus"
  local function show(tag)
    local s = lumus.tune.pipeline_cache()
    for _, k in ipairs({ "state", "reason", "path", "loaded_bytes", "listed", "built", "hits" }) do
      print(tag .. "." .. k .. "=" .. tostring(s[k]))
    end
  end
  show("open")
  %s
  local a = lumus.tensor({ 1, 2, 3, 4 })
  assert((a + a):to_table()[4] == 8)
  assert(a:sum():item() == 10)
  assert((a * a):to_table()[3] == 9)
  show("end")
]]

local function work(extra) return WORK:format(extra or "") end

local function field(out, key)
  return out:match("\n?" .. key:gsub("%.", "%%.") .. "=([^\n]*)")
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function leftovers(dir)
  local p = io.popen("ls -a " .. dir .. " 2>/dev/null")
  local names = p:read("*a")
  p:close()
  return names:match("%.tmp") ~= nil
end

local KEY_BYTES = 116   -- shader name 48, op 32, 8 spec constants, full_subgroups

-- FNV-1a 64 of s as its 8 little-endian bytes (the file's checksum field), in 16-bit
-- limbs so that every step is exact in a double (Lua 5.1 and LuaJIT have no integers).
local function fnv1a(s)
  local h = { 0x2325, 0x8422, 0x9ce4, 0xcbf2 }   -- 0xcbf29ce484222325, low limb first
  for i = 1, #s do
    local b, lo, x, bit = s:byte(i), h[1] % 256, 0, 1
    for _ = 1, 8 do                                -- x = lo xor b
      if lo % 2 ~= b % 2 then x = x + bit end
      lo, b, bit = math.floor(lo / 2), math.floor(b / 2), bit * 2
    end
    h[1] = h[1] - h[1] % 256 + x
    -- h * 0x100000001b3 = h * 0x1b3 + h * 2^40 (mod 2^64)
    local r = { h[1] * 0x1b3, h[2] * 0x1b3, h[3] * 0x1b3 + h[1] * 256, h[4] * 0x1b3 + h[2] * 256 }
    local carry = 0
    for k = 1, 4 do
      local v = r[k] + carry
      h[k], carry = v % 65536, math.floor(v / 65536)
    end
  end
  local out = {}
  for k = 1, 4 do out[2 * k - 1], out[2 * k] = h[k] % 256, math.floor(h[k] / 256) end
  return string.char(compat.unpack(out))
end

describe("the pipeline cache on disk", function()
  local file = DIR .. "/given.bin"
  local env = { LUMUS_PIPELINE_CACHE = file }

  it("is written when a process that built pipelines ends, and loaded by the next", function()
    os.remove(file)
    local out, rc = run(env, work())
    assert.are.equal(0, rc, out)
    assert.are.equal("new", field(out, "open.state"))
    assert.are.equal(file, field(out, "open.path"))
    assert.is_true(tonumber(field(out, "end.built")) >= 3, out)
    local bytes = read_file(file)
    assert.is_truthy(bytes, "no cache file after the first process")
    assert.are.equal("LUMUSPC1", bytes:sub(1, 8))
    local count, vk = compat.unpack_bytes("u32", bytes, 17, 1)[1], compat.unpack_bytes("i64", bytes, 25, 1)[1]
    assert.is_true(count >= 3)
    assert.are.equal(#bytes, 40 + count * KEY_BYTES + vk)
    assert.are.equal(fnv1a(bytes:sub(41)), bytes:sub(33, 40))
    assert.is_false(leftovers(DIR))

    out, rc = run(env, work())
    assert.are.equal(0, rc, out)
    assert.are.equal("loaded", field(out, "open.state"))
    assert.are.equal(tostring(vk), field(out, "open.loaded_bytes"))
    assert.are.equal(tostring(count), field(out, "open.listed"))
  end)

  it("lets warm_up build the listed pipelines before the first call, which then builds none", function()
    local out, rc = run(env, work([[
      local n, s = lumus.warm_up()
      print("warm.n=" .. n)
      assert(type(s) == "number" and s >= 0)
      print("again.n=" .. (lumus.warm_up()))
      print("warm.built=" .. lumus.tune.pipeline_cache().built)
    ]]))
    assert.are.equal(0, rc, out)
    local listed = tonumber(field(out, "open.listed"))
    assert.is_true(listed >= 3, out)
    assert.are.equal(listed, tonumber(field(out, "warm.n")))
    assert.are.equal("0", field(out, "again.n"))
    -- the ops after warm_up found every pipeline built
    assert.are.equal(field(out, "warm.built"), field(out, "end.built"))
  end)

  it("warm_up with ops= builds only those ops' pipelines", function()
    local out, rc = run(env, [[
      local lumus = require "lumus"
      local listed = lumus.tune.pipeline_cache().listed
      local none = lumus.warm_up({ ops = { "no_such_op" } })
      local add = lumus.warm_up({ ops = { "add" } })
      local rest = lumus.warm_up()
      print("counts=" .. listed .. " " .. none .. " " .. add .. " " .. rest)
    ]])
    assert.are.equal(0, rc, out)
    local listed, none, add, rest = field(out, "counts"):match("(%d+) (%d+) (%d+) (%d+)")
    assert.are.equal("0", none)
    assert.is_true(tonumber(add) >= 1)
    assert.are.equal(tonumber(listed), tonumber(add) + tonumber(rest))
  end)

  it("ignores a corrupt, truncated, foreign or unreadable file, computes right, and replaces it", function()
    local good = read_file(file)
    assert.is_truthy(good)
    local count = compat.unpack_bytes("u32", good, 17, 1)[1]
    local vk_at = 41 + count * KEY_BYTES
    -- the Vulkan header's UUID changed, checksum made to match: another driver's file
    local foreign = good:sub(1, vk_at + 15) .. string.rep("\170", 16) .. good:sub(vk_at + 32)
    foreign = foreign:sub(1, 32) .. fnv1a(foreign:sub(41)) .. foreign:sub(41)
    local cases = {
      { good:sub(1, 40) .. string.char((good:byte(41) + 1) % 256) .. good:sub(42), "checksum mismatch" },
      { good:sub(1, #good - 5), "its sizes do not add up" },
      { string.rep("x", 100), "not a lumus pipeline cache" },
      { "LUMUS", "shorter than its header" },
      { foreign, "made for another device or driver" },
    }
    for _, c in ipairs(cases) do
      write_file(file, c[1])
      local out, rc = run(env, work())
      assert.are.equal(0, rc, out)
      assert.are.equal("ignored", field(out, "open.state"), out)
      assert.are.equal(c[2], field(out, "open.reason"):sub(1, #c[2]))
      assert.are.equal("0", field(out, "open.listed"))
      -- replaced by a good one at exit
      local again = run(env, "local l = require 'lumus'; print('s=' .. l.tune.pipeline_cache().state)")
      assert.are.equal("loaded", field(again, "s"), again)
    end
    os.remove(file)
    assert(os.execute("mkdir " .. file))
    local out, rc = run(env, work())
    assert.are.equal(0, rc, out)
    assert.are.equal("ignored", field(out, "open.state"))
    assert.are.equal("not a regular file", field(out, "open.reason"))
    assert.matches("lumus: pipeline cache not saved to " .. file:gsub("%p", "%%%0"), out)
    os.execute("rmdir " .. file)
    assert.is_false(leftovers(DIR))
  end)

  it("is off with LUMUS_PIPELINE_CACHE=off or 0, writing nothing", function()
    local home = DIR .. "/home_off"
    for _, v in ipairs({ "off", "0" }) do
      local out, rc = run({ LUMUS_PIPELINE_CACHE = v, XDG_CACHE_HOME = home, HOME = home }, work([[
        local n, why = lumus.save_pipeline_cache()
        print("save=" .. tostring(n) .. " " .. why)
        print("warm=" .. (lumus.warm_up()))
      ]]))
      assert.are.equal(0, rc, out)
      assert.are.equal("off", field(out, "open.state"))
      assert.are.equal("LUMUS_PIPELINE_CACHE=" .. v, field(out, "open.reason"))
      assert.are.equal("nil LUMUS_PIPELINE_CACHE=" .. v, field(out, "save"))
      assert.are.equal("0", field(out, "warm"))
      assert.is_nil(os.rename(home .. "/lumus", home .. "/lumus"))   -- no directory was made
    end
  end)

  it("defaults to $XDG_CACHE_HOME/lumus, else ~/.cache/lumus, named by device and driver", function()
    local xdg = DIR .. "/xdg"
    local out, rc = run({ LUMUS_PIPELINE_CACHE = false, XDG_CACHE_HOME = xdg }, work([[
      local d = lumus.device()
      print(("want=pipelines-%04x-%04x-%d-"):format(d.vendor_id, d.device_id, d.driver_version))
    ]]))
    assert.are.equal(0, rc, out)
    local path = field(out, "open.path")
    assert.are.equal(xdg .. "/lumus/", path:sub(1, #xdg + 7))
    local name = path:sub(#xdg + 8)
    assert.are.equal(field(out, "want"), name:sub(1, #field(out, "want")))
    assert.matches("%-%x+%.bin$", name)
    assert.are.equal(32 + 4, #name:match("%-(%x+%.bin)$"))   -- the 16-byte UUID in hex
    assert.is_truthy(read_file(path), "not written at exit")

    local home = DIR .. "/home"
    out, rc = run({ LUMUS_PIPELINE_CACHE = false, XDG_CACHE_HOME = false, HOME = home }, work())
    assert.are.equal(0, rc, out)
    assert.are.equal(home .. "/.cache/lumus/" .. name, field(out, "open.path"))
    assert.is_truthy(read_file(home .. "/.cache/lumus/" .. name))
  end)

  it("save_pipeline_cache writes now and returns the file's size", function()
    local f2 = DIR .. "/saved_now.bin"
    local out, rc = run({ LUMUS_PIPELINE_CACHE = f2 }, work([[
      print("saved=" .. lumus.save_pipeline_cache())
    ]]))
    assert.are.equal(0, rc, out)
    -- the file was saved before the ops ran (empty list) and again at exit (the ops')
    assert.is_true(tonumber(field(out, "saved")) >= 40)
    assert.is_true(#read_file(f2) > tonumber(field(out, "saved")))
  end)

  it("warm_up raises for bad options", function()
    local out, rc = run(env, [[
      local lumus = require "lumus"
      print("a=" .. select(2, pcall(lumus.warm_up, { op = {} })))
      print("b=" .. select(2, pcall(lumus.warm_up, { ops = "add" })))
      print("c=" .. select(2, pcall(lumus.warm_up, { ops = { 1 } })))
    ]])
    assert.are.equal(0, rc, out)
    assert.matches("unknown option 'op'", field(out, "a"))
    assert.matches("ops must be a list of op names, got string", field(out, "b"))
    assert.matches("ops%[1%] must be a string, got number", field(out, "c"))
  end)
end)
