-- The API's rules (decisions shared by every op), each checked where a past version broke
-- it: deterministic function names in messages, strict options tables read raw, tuning
-- hooks in lumus.tune only, matmul's and the row ops' options, factories' dtype.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"

local function error_of(f, ...)
  local ok, e = pcall(f, ...)
  assert(not ok, "no error")
  return tostring(e)
end

-- |got - want| <= tol * max(1, |want|) elementwise over nested tables.
local function close(got, want, tol, what)
  local g, w = ref.flatten(got), ref.flatten(want)
  assert.are.equal(#w, #g, what)
  for i = 1, #w do
    local bound = tol * math.max(1, math.abs(w[i]))
    assert(math.abs(g[i] - w[i]) <= bound, ("%s: element %d is %.9g, want %.9g"):format(what, i, g[i], w[i]))
  end
end

local SCRIPT_ENV = ("LUA_PATH=%q LUA_CPATH=%q"):format(package.path, package.cpath)

describe("function names in messages", function()
  local x = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })

  -- Through pcall Lua has no call-site name: the registered one is used.
  local cases = {
    { "lumus.zeros", lumus.zeros, { 0 } },
    { "lumus.relu", lumus.relu, 3 },
    { "lumus.softmax", lumus.softmax, "x" },
    { "lumus.add", lumus.add, "1", 2 },
    { "lumus.matmul", lumus.matmul, 1 },
    { "lumus.sum", lumus.sum, {} },
    { "lumus.relu", x.relu, 3 },                   -- a method that is also a function
    { "lumus.Tensor.reshape", x.reshape, 3 },      -- a method only
    { "lumus.tune.matmul", lumus.tune.matmul, 0, 1, 1 },
    { "lumus.tune.rows", lumus.tune.rows, "d" },
  }

  it("name a function called through pcall by its lumus name, never lumus.core's", function()
    for _, c in ipairs(cases) do
      local e = error_of(c[2], compat.unpack(c, 3))
      assert(e:find("to '" .. c[1] .. "'", 1, true), ("%s: %s"):format(c[1], e))
      assert.is_nil(e:find("lumus.core", 1, true), e)
    end
  end)

  it("keep the call site's name when Lua knows it", function()
    assert.matches("bad argument #1 to 'relu' %(tensor expected, got number%)", error_of(function() lumus.relu(3) end))
    local impostor = setmetatable({}, { __index = { reshape = x.reshape } })
    assert.matches("calling 'reshape' on bad self %(tensor expected, got table%)",
      error_of(function() impostor:reshape({ 6 }) end))
    assert.matches("bad argument #1 to 'reshape' %(shape 7 has 7 elements", error_of(function() x:reshape({ 7 }) end))
  end)

  it("are the same in every run, whatever order the module tables hash in", function()
    -- the order of package.loaded changes between processes (string hashes are seeded)
    local script = [[
      local lumus = require "lumus"
      local compat = require "lumus.compat"
      local x = lumus.tensor({ 1, 2 })
      local out = {}
      for _, c in ipairs { { lumus.relu, 3 }, { lumus.softmax, "x" }, { lumus.add, "1", 2 }, { x.relu, 3 },
                           { lumus.gelu, 1 }, { lumus.mean, 1 }, { lumus.linear, 1 } } do
        local _, e = pcall(compat.unpack(c))
        out[#out + 1] = tostring(e):match("to '([^']*)'")
      end
      print(table.concat(out, " "))
    ]]
    local seen = {}
    for _ = 1, 6 do
      local p = io.popen(("%s " .. LUA .. " -e %q 2>&1"):format(SCRIPT_ENV, script))
      local line = p:read("*a")
      p:close()
      seen[line] = true
      assert.are.equal("lumus.relu lumus.softmax lumus.add lumus.relu lumus.gelu lumus.mean lumus.linear\n", line)
    end
  end)
end)

describe("options tables", function()
  local x = lumus.tensor({ { 1, -2, 3 }, { 4, 5, -6 } })

  it("raise for an unknown key, naming it, the argument and the known keys", function()
    assert.matches("bad argument #2 to 'softmax' %(unknown option 'dimm' %(known: dim, out%)%)",
      error_of(function() lumus.softmax(x, { dimm = 2 }) end))
    assert.matches("bad argument #2 to 'relu' %(unknown option 'outt' %(known: out%)%)",
      error_of(function() lumus.relu(x, { outt = x }) end))
    assert.matches("bad argument #3 to 'add' %(unknown option 'alpha'",
      error_of(function() lumus.add(x, 1, { alpha = 2 }) end))
    assert.matches("bad argument #2 to 'copy' %(unknown option 'out_'",
      error_of(function() lumus.copy(x, { out_ = x }) end))
    assert.matches("bad argument #4 to 'linear' %(unknown option 'bias'",
      error_of(function() lumus.linear(x, lumus.ones({ 2, 3 }), nil, { bias = lumus.ones({ 2 }) }) end))
    assert.matches("bad argument #2 to 'gelu' %(unknown option 'approx'",
      error_of(function() lumus.gelu(x, { approx = "tanh" }) end))
    assert.matches("unknown option: a number key", error_of(function() lumus.neg(x, { x }) end))
    assert.matches("bad argument #4 to 'matmul' %(unknown option 'bogus'",
      error_of(function() lumus.tune.matmul(1, 1, 1, { bogus = 1 }) end))
    assert.matches("bad argument #1 to 'grid' %(unknown option 'max'",
      error_of(function() lumus.tune.grid({ max = 1 }) end))
    assert.matches("bad argument #2 to 'rows' %(unknown option 'workgroup'",
      error_of(function() lumus.tune.rows(8, { workgroup = 64 }) end))
  end)

  it("are read raw: no metamethod of the table runs, in ops and in tuning hooks", function()
    local trap = setmetatable({}, { __index = function(_, k) error("metamethod ran for " .. tostring(k)) end })
    -- gelu with an __index that would answer approximate = "tanh": the erf form, untouched
    local tanh_trap = setmetatable({}, { __index = function(_, k) if k == "approximate" then return "tanh" end end })
    close(lumus.gelu(x, tanh_trap):to_table(), lumus.gelu_erf(x):to_table(), 0, "gelu with __index")
    lumus.gelu(x, trap)
    lumus.softmax(x, trap)
    lumus.sum(x, trap)
    lumus.matmul(x, lumus.ones({ 3, 2 }), trap)
    local before = lumus.tune.rows(64)
    assert.are.same(before, lumus.tune.rows(64, trap))
    lumus.tune.matmul(8, 8, 8, trap)
    lumus.tune.grid(trap)
    lumus.tune.rows(64, {})
    lumus.tune.matmul(1, 1, 1, {})
    lumus.tune.grid({})
  end)

  it("raise for a value of the wrong type, naming the key", function()
    assert.matches("transpose_b must be a boolean, got number",
      error_of(function() lumus.matmul(x, lumus.ones({ 2, 3 }), { transpose_b = 1 }) end))
    assert.matches("dim must be an integer, got string", error_of(function() lumus.sum(x, { dim = "2" }) end))
    assert.matches("keepdim must be a boolean, got number", error_of(function() lumus.mean(x, { keepdim = 1 }) end))
    assert.matches("max_x must be an integer, got 1.5", error_of(function() lumus.tune.grid({ max_x = 1.5 }) end))
  end)
end)

describe("matmul's options", function()
  local a, b = lumus.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } }), lumus.tensor({ { 1, 0, 2 }, { 0, 1, 3 } })

  it("refuse a bias (linear takes it)", function()
    assert.matches("bad argument #3 to 'matmul' %(unknown option 'bias' %(known: out, transpose_a, transpose_b%)%)",
      error_of(function() lumus.matmul(a, b, { bias = lumus.ones({ 3 }) }) end))
  end)

  it("compute with transpose_a = false, transpose_b and out", function()
    local want = ref.matmul(a:to_table(), b:to_table())
    close(lumus.matmul(a, b, { transpose_a = false }):to_table(), want, 1e-6, "transpose_a = false")
    local out = lumus.full({ 3, 3 }, 0 / 0)
    local bt = lumus.tensor({ { 1, 0 }, { 0, 1 }, { 2, 3 } })
    assert.are.equal(out, lumus.matmul(a, bt, { out = out, transpose_b = true }))
    close(out:to_table(), want, 1e-6, "transpose_b into out")
  end)
end)

describe("softmax, sum and mean take {dim =, keepdim =, out =}", function()
  local xt = ref.random_table({ 3, 5 }, ref.rng(3))
  local x = lumus.tensor(xt)

  it("accept the last dimension as 2 (1-based) or -1", function()
    for _, d in ipairs { 2, -1 } do
      close(lumus.softmax(x, { dim = d }):to_table(), ref.softmax(xt), 1e-5, "softmax dim " .. d)
      close(lumus.sum(x, { dim = d }):to_table(), ref.sum(xt, { dim = -1 }), 1e-5, "sum dim " .. d)
      close(lumus.mean(x, { dim = d }):to_table(), ref.mean(xt, { dim = -1 }), 1e-5, "mean dim " .. d)
    end
  end)

  it("raise for a dimension out of range", function()
    assert.matches("bad argument #2 to 'softmax' %(dim %-3 is out of range for a 2%-D tensor",
      error_of(function() lumus.softmax(x, { dim = -3 }) end))
    assert.matches("dim 3 is out of range for a 2%-D tensor", error_of(function() lumus.mean(x, { dim = 3 }) end))
    assert.matches("dim 0 is out of range", error_of(function() lumus.sum(x, { dim = 0 }) end))
    assert.matches("unknown option 'keepdim' %(known: dim, out%)", error_of(function() lumus.softmax(x, { keepdim = true }) end))
  end)

  it("keep a size-1 last dimension with keepdim = true", function()
    local s = lumus.sum(x, { dim = -1, keepdim = true })
    assert.are.same({ 3, 1 }, s:shape())
    local want = {}
    for i, v in ipairs(ref.sum(xt, { dim = -1 })) do want[i] = { v } end
    close(s:to_table(), want, 1e-5, "sum keepdim")
    local out = lumus.full({ 3, 1 }, 0 / 0)
    assert.are.equal(out, lumus.mean(x, { keepdim = true, dim = -1, out = out }))
    for i, v in ipairs(ref.mean(xt, { dim = -1 })) do want[i] = { v } end
    close(out:to_table(), want, 1e-5, "mean keepdim into out")
    assert.matches("out must have shape 3x1, got 3", error_of(function() lumus.sum(x, { dim = -1, keepdim = true, out = lumus.empty({ 3 }) }) end))
    assert.are.same({ 3 }, lumus.sum(x, { dim = 2, keepdim = false }):shape())
    assert.are.same({ 1 }, lumus.sum(lumus.ones({ 4 }), { keepdim = true }):shape())
  end)
end)

describe("factories take {dtype = ...}", function()
  it("accept the five dtypes and raise for any other, naming it", function()
    assert.are.same({ 0, 0 }, lumus.zeros({ 2 }, { dtype = "float32" }):to_table())
    assert.are.same({ 1 }, lumus.ones(1, { dtype = "float32" }):to_table())
    assert.are.same({ 7, 7 }, lumus.full({ 2 }, 7, { dtype = "float32" }):to_table())
    assert.are.same({ 2 }, lumus.empty({ 2 }, { dtype = "float32" }):shape())
    assert.are.same({ 1, 2 }, lumus.tensor({ 1, 2 }, { dtype = "float32" }):to_table())
    assert.are.same({ 3 }, lumus.from_bytes(compat.pack_bytes("f32", { 3 }), { 1 }, { dtype = "float32" }):to_table())
    -- called, not tail-called: LuaJIT keeps no call site for a tail call
    local cases = {
      { "zeros", function() lumus.zeros({ 2 }, { dtype = "int64" }) end, 2 },
      { "ones", function() lumus.ones({ 2 }, { dtype = "float64" }) end, 2 },
      { "full", function() lumus.full({ 2 }, 1, { dtype = "half" }) end, 3 },
      { "empty", function() lumus.empty({ 2 }, { dtype = "int8" }) end, 2 },
      { "tensor", function() lumus.tensor({ 1 }, { dtype = "int64" }) end, 2 },
      { "from_bytes", function() lumus.from_bytes("abcd", { 1 }, { dtype = "uint8" }) end, 3 },
    }
    for _, c in ipairs(cases) do
      assert.matches(("bad argument #%d to '%s' %%(dtype '[%%w]+' is not supported %%(float32, float16, bfloat16, int32 or bool%%)%%)"):format(c[3], c[1]),
        error_of(c[2]))
    end
    assert.are.equal("int32", lumus.zeros({ 2 }, { dtype = "int32" }):dtype())
    assert.matches("dtype must be a string %(float32, float16, bfloat16, int32 or bool%), got number", error_of(function() lumus.zeros({ 2 }, { dtype = 32 }) end))
    assert.matches("unknown option 'device'", error_of(function() lumus.zeros({ 2 }, { device = 1 }) end))
  end)

  it("refuse sizes given as separate arguments rather than reading only the first", function()
    assert.matches("bad argument #2 to 'zeros' %(options table expected, got number%)",
      error_of(function() lumus.zeros(2, 3) end))
  end)
end)

describe("tuning hooks", function()
  it("live in lumus.tune (= lumus.core.tune), and no key of lumus starts with _", function()
    for k in pairs(lumus) do
      assert(not tostring(k):match("^_"), "lumus." .. tostring(k) .. " is public")
    end
    local core = require "lumus.core"
    assert.are.equal(core.tune, lumus.tune)
    for _, name in ipairs { "layer_norm", "matmul", "grid", "rows", "stream_stats", "validation_messages" } do
      assert.are.equal("function", type(lumus.tune[name]), name)
    end
    assert.are.equal("number", type(lumus.tune.validation_messages()))
    assert.are.equal("number", type(lumus.tune.stream_stats().submits))
  end)
end)
