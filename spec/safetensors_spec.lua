-- lumus.load_safetensors / lumus.save_safetensors (src/safetensors.c, src/ops/safetensors_io.c):
-- bitwise round trips in every dtype, files assembled byte by byte here in the format's
-- layout, the options, every kind of bad file by its message, and device memory back
-- to where it was after each error.
local lumus = require "lumus"
local compat = require "lumus.compat"

local DIR = os.tmpname()
os.remove(DIR)
assert(os.execute("mkdir -p " .. DIR))
local function tmp(name) return DIR .. "/" .. name end

local function settle() collectgarbage(); collectgarbage(); lumus.synchronize() end
local function in_use() settle(); return lumus.memory().in_use end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function write_file(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

local function exists(path) return read_file(path) ~= nil end

-- A safetensors file: the header text (padded to 8 bytes unless raw) and the data.
local function st_file(header, data, raw)
  if not raw then header = header .. string.rep(" ", (8 - #header % 8) % 8) end
  return compat.pack_bytes("i64", { #header }) .. header .. (data or "")
end

local function random_bytes(n, seed)
  math.randomseed(seed)
  local t = {}
  for i = 1, n do t[i] = string.char(math.random(0, 255)) end
  return table.concat(t)
end

local function bool_bytes(n, seed)
  math.randomseed(seed)
  local t = {}
  for i = 1, n do t[i] = string.char(math.random(0, 1)) end
  return table.concat(t)
end

-- Raises with a message naming load_safetensors and the path, matching pattern
-- (plain text); device memory in use is the same afterwards.
local function assert_bad_file(bytes, pattern, opts)
  local path = tmp("bad.safetensors")
  write_file(path, bytes)
  local before = in_use()
  local ok, err = pcall(lumus.load_safetensors, path, opts)
  assert.is_false(ok, "loaded a bad file expected to raise " .. pattern)
  assert.is_string(err)
  assert.is_truthy(err:find("lumus.load_safetensors: " .. path .. ": ", 1, true), err)
  assert.is_truthy(err:find(pattern, 1, true), ("expected %q in %q"):format(pattern, err))
  assert.are.equal(before, in_use())
end

describe("save_safetensors / load_safetensors round trips", function()
  it("keep every dtype bitwise (random bit patterns, NaN payloads, several shapes)", function()
    local path = tmp("all.safetensors")
    local tensors, bytes = {}, {}
    local cases = {
      { "f32", "float32", 4, { 3, 5 } }, { "f32_1d", "float32", 4, { 7 } },
      { "f16", "float16", 2, { 2, 3, 4 } }, { "bf16", "bfloat16", 2, { 9 } },
      { "i32", "int32", 4, { 4, 1, 2 } },
    }
    for i, c in ipairs(cases) do
      local n = 1
      for _, s in ipairs(c[4]) do n = n * s end
      bytes[c[1]] = random_bytes(n * c[3], i)
      tensors[c[1]] = lumus.from_bytes(bytes[c[1]], c[4], { dtype = c[2] })
    end
    bytes.flags = bool_bytes(11, 99)
    tensors.flags = lumus.from_bytes(bytes.flags, { 11 }, { dtype = "bool" })
    lumus.save_safetensors(path, tensors)
    local back, meta = lumus.load_safetensors(path)
    assert.are.same({}, meta)
    local names = {}
    for k, t in pairs(back) do
      names[#names + 1] = k
      assert.are.equal(tensors[k]:dtype(), t:dtype(), k)
      assert.are.same(tensors[k]:shape(), t:shape(), k)
      assert.is_true(t:to_bytes() == bytes[k], k .. " differs after the round trip")
    end
    table.sort(names)
    assert.are.same({ "bf16", "f16", "f32", "f32_1d", "flags", "i32" }, names)
  end)

  it("streams tensors larger than one chunk (16 MiB) both ways", function()
    local path = tmp("big.safetensors")
    local n = 5 * 1024 * 1024 + 3     -- 20 MiB + 12 bytes of float32
    local t = lumus.arange(n):float()
    lumus.save_safetensors(path, { big = t, small = lumus.tensor({ 1, 2 }) })
    local calls = {}
    local back = lumus.load_safetensors(path, { progress = function(done, total) calls[#calls + 1] = { done, total } end })
    assert.is_true(back.big:to_bytes() == t:to_bytes())
    assert.are.same({ 1, 2 }, back.small:to_table())
    -- big in two chunks, small in one: each call after a chunk, the last at the total
    assert.are.equal(3, #calls)
    local total = n * 4 + 8
    for i, c in ipairs(calls) do
      assert.are.equal(total, c[2])
      if i > 1 then assert.is_true(c[1] > calls[i - 1][1]) end
    end
    assert.are.equal(total, calls[3][1])
    back.big:free(); t:free()
  end)

  it("saves a strided view as its elements in order", function()
    local path = tmp("view.safetensors")
    local x = lumus.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    lumus.save_safetensors(path, { xt = x:transpose(1, 2) })
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, lumus.load_safetensors(path).xt:to_table())
  end)

  it("keeps metadata (strings to strings) and returns it as the second value", function()
    local path = tmp("meta.safetensors")
    lumus.save_safetensors(path, { w = lumus.ones(2) }, { format = "pt", note = "héllo \"quoted\"" })
    local t, meta = lumus.load_safetensors(path)
    assert.are.same({ format = "pt", note = "héllo \"quoted\"" }, meta)
    assert.are.same({ 1, 1 }, t.w:to_table())
  end)

  it("writes a deterministic file: sorted keys, space padding to 8 bytes, larger elements first", function()
    local path = tmp("layout.safetensors")
    lumus.save_safetensors(path, {
      b = lumus.from_bytes("\1\0\1", { 3 }, { dtype = "bool" }),
      a = lumus.tensor({ 1.5, -2 }),
      h = lumus.tensor({ 1 }):half(),
    })
    local header = '{"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},'
      .. '"b":{"data_offsets":[10,13],"dtype":"BOOL","shape":[3]},'
      .. '"h":{"data_offsets":[8,10],"dtype":"F16","shape":[1]}}'
    local data = compat.pack_bytes("f32", { 1.5, -2 }) .. "\0\60" .. "\1\0\1"
    assert.are.equal(st_file(header, data), read_file(path))
    assert.are.equal(0, (#read_file(path) - #data) % 8)
    assert.is_false(exists(path .. ".tmp"))
  end)

  it("saves an empty table as a file with no tensors, which loads as an empty table", function()
    local path = tmp("empty.safetensors")
    lumus.save_safetensors(path, {})
    assert.are.equal(st_file("{}", ""), read_file(path))
    local t, meta = lumus.load_safetensors(path)
    assert.are.same({}, t)
    assert.are.same({}, meta)
  end)
end)

describe("load_safetensors on files assembled here in the format's layout", function()
  -- As PyTorch's writer lays them out: header JSON, then the tensors' bytes back to back.
  local header = '{"__metadata__":{"format":"pt"},'
    .. '"emb":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},'
    .. '"ids":{"dtype":"I64","shape":[3],"data_offsets":[16,40]},'
    .. '"half":{"dtype":"F16","shape":[2],"data_offsets":[40,44]},'
    .. '"bf":{"dtype":"BF16","shape":[1],"data_offsets":[44,46]},'
    .. '"mask":{"dtype":"BOOL","shape":[2],"data_offsets":[46,48]},'
    .. '"bytes":{"dtype":"U8","shape":[2],"data_offsets":[48,50]},'
    .. '"step":{"dtype":"I32","shape":[],"data_offsets":[50,54]}}'
  local data = compat.pack_bytes("f32", { 1, 2, 3, 4.5 }) .. compat.pack_bytes("i64", { 0, -7, 2147483647 })
    .. "\0\60\0\192" .. "\128\63" .. "\1\0" .. "\0\1" .. compat.pack_bytes("i32", { 42 })
  local path = tmp("hand.safetensors")

  it("loads each dtype with its values, a 0-D tensor as shape {1}, and the metadata", function()
    write_file(path, st_file(header, data))
    local t, meta = lumus.load_safetensors(path)
    assert.are.same({ format = "pt" }, meta)
    assert.are.same({ { 1, 2 }, { 3, 4.5 } }, t.emb:to_table())
    assert.are.equal("int32", t.ids:dtype())
    assert.are.same({ 0, -7, 2147483647 }, t.ids:to_table())
    assert.are.equal("float16", t.half:dtype())
    assert.are.same({ 1, -2 }, t.half:to_table())
    assert.are.equal("bfloat16", t.bf:dtype())
    assert.are.same({ 1 }, t.bf:to_table())
    assert.are.same({ true, false }, t.mask:to_table())
    assert.are.equal("bool", t.bytes:dtype())
    assert.are.same({ false, true }, t.bytes:to_table())
    assert.are.same({ 1 }, t.step:shape())
    assert.are.same({ 42 }, t.step:to_table())
  end)

  it("accepts a header without padding and one with trailing spaces", function()
    write_file(path, st_file(header, data, true))
    assert.are.same({ 0, -7, 2147483647 }, lumus.load_safetensors(path).ids:to_table())
    write_file(path, st_file(header .. "        ", data, true))
    assert.are.same({ 0, -7, 2147483647 }, lumus.load_safetensors(path).ids:to_table())
  end)

  it("loads only the tensors named by names=, reading no others", function()
    write_file(path, st_file(header, data))
    local seen = {}
    local t = lumus.load_safetensors(path, { names = { "half", "step" },
      progress = function(done, total) seen[#seen + 1] = done .. "/" .. total end })
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ "half", "step" }, keys)
    assert.are.same({ "4/8", "8/8" }, seen)
  end)

  it("converts floating tensors with dtype= (on the device, as t:to()), leaving the others", function()
    write_file(path, st_file(header, data))
    local t = lumus.load_safetensors(path, { dtype = "float32" })
    assert.are.equal("float32", t.half:dtype())
    assert.are.same({ 1, -2 }, t.half:to_table())
    assert.are.equal("float32", t.bf:dtype())
    assert.are.equal("int32", t.ids:dtype())
    assert.are.equal("bool", t.mask:dtype())
    local h = lumus.load_safetensors(path, { dtype = "float16", names = { "emb" } })
    assert.are.equal("float16", h.emb:dtype())
    assert.is_true(h.emb:to_bytes() == lumus.tensor({ { 1, 2 }, { 3, 4.5 } }):half():to_bytes())
  end)

  it("raises naming the tensor for I64 outside int32 and U8/BOOL bytes other than 0 and 1", function()
    local h = '{"x":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}'
    assert_bad_file(st_file(h, compat.pack_bytes("i64", { 1, 2147483648 })),
      "tensor 'x': element 2 is 2147483648, outside int32's range")
    assert_bad_file(st_file(h, compat.pack_bytes("i64", { -2147483649, 0 })), "element 1 is -2147483649, outside int32's range")
    h = '{"u":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}}'
    assert_bad_file(st_file(h, "\0\1\7"), "tensor 'u': element 3 is 7, but U8 loads as bool")
    h = '{"b":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}}'
    assert_bad_file(st_file(h, "\2"), "tensor 'b': element 1 is 2, but BOOL loads as bool")
  end)
end)

describe("load_safetensors on bad files", function()
  local good_h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}'
  local good_d = compat.pack_bytes("f32", { 1, 2, 3 })

  it("loads the good file the bad ones are made from", function()
    local path = tmp("good.safetensors")
    write_file(path, st_file(good_h, good_d))
    assert.are.same({ 1, 2 }, lumus.load_safetensors(path).a:to_table())
  end)

  it("raises for a file too short, a header length past the file or the 100 MB cap", function()
    assert_bad_file("", "the file has 0 bytes, fewer than the 8")
    assert_bad_file("\1\2\3", "the file has 3 bytes")
    assert_bad_file(compat.pack_bytes("i64", { 500 }) .. "{}", "header length 500 exceeds the 2 bytes after it")
    assert_bad_file(compat.pack_bytes("i64", { 100000001 }) .. "{}", "header length 100000001 exceeds the limit of 100000000 bytes")
    assert_bad_file(compat.pack_bytes("i64", { -1 }) .. "{}", "exceeds the limit")
    assert_bad_file(st_file(good_h, good_d):sub(1, 40), "exceeds the")
  end)

  it("raises for invalid JSON, a header that is not an object, duplicate names", function()
    assert_bad_file(st_file('{"a": ', ""), "invalid JSON header")
    assert_bad_file(st_file('[1, 2]', ""), "the header is not a JSON object")
    assert_bad_file(st_file('"a"', ""), "the header is not a JSON object")
    assert_bad_file(st_file('', ""), "the header is not a JSON object")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
      .. '"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', good_d:sub(1, 8)), "duplicate object key")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x', good_d:sub(1, 4)), "invalid JSON header")
    assert_bad_file(st_file('{"a":"\\u0000"}', ""), "invalid JSON header")
  end)

  it("raises for offsets that overlap, leave a gap, pass the data or leave bytes over", function()
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
      good_d:sub(1, 8)), "tensor 'b' (data_offsets [4, 8]) overlaps tensor 'a'")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}',
      good_d), "bytes 4 to 8 of the data section belong to no tensor (before 'b')")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', good_d:sub(1, 8)),
      "bytes 0 to 4 of the data section belong to no tensor")
    assert_bad_file(st_file(good_h, good_d:sub(1, 10)), "tensor 'b' ends at byte 12 of the data section, which has 10 bytes (truncated file?)")
    assert_bad_file(st_file(good_h, good_d .. "xyz"), "the data section has 15 bytes but its tensors end at byte 12")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}', good_d:sub(1, 8)), "end before they begin")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}}', good_d), "tensor 'a' has 12 bytes of data for 8 (F32, 2 elements)")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}', ""), "data_offsets is not an array of two integers")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}}', ""), "data_offsets are not non-negative integers")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,99999999999999999999]}}', ""), "invalid JSON header")
  end)

  it("raises for shapes with negative, fractional or overflowing entries, and for missing keys", function()
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', good_d:sub(1, 8)),
      "tensor 'a': shape entry 1 is not a non-negative integer")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2, 1.0],"data_offsets":[0,8]}}', good_d:sub(1, 8)),
      "tensor 'a': shape entry 2 is not a non-negative integer")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}}', good_d:sub(1, 8)), "shape entry 1")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}', good_d:sub(1, 8)),
      "tensor 'a': shape overflows the element count")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}', good_d:sub(1, 8)), "shape is not an array")
    assert_bad_file(st_file('{"a":{"shape":[2],"data_offsets":[0,8]}}', good_d:sub(1, 8)), "tensor 'a' lacks \"dtype\"")
    assert_bad_file(st_file('{"a":{"dtype":"F32","data_offsets":[0,8]}}', good_d:sub(1, 8)), "tensor 'a' lacks \"shape\"")
    assert_bad_file(st_file('{"a":{"dtype":"F32","shape":[2]}}', good_d:sub(1, 8)), "tensor 'a' lacks \"data_offsets\"")
    assert_bad_file(st_file('{"a":[1]}', ""), "tensor 'a' is not a JSON object")
  end)

  it("raises for unknown dtypes, and for dtypes, ranks and empty tensors lumus cannot load", function()
    assert_bad_file(st_file('{"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}}', good_d:sub(1, 8)), "tensor 'a' has unknown dtype 'F99'")
    assert_bad_file(st_file('{"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}}', good_d:sub(1, 8)), "dtype is not a string")
    local f64 = '{"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}'
    assert_bad_file(st_file(f64, compat.pack_bytes("f64", { 1 }) .. compat.pack_bytes("f32", { 2 })), "tensor 'd' has dtype F64, which lumus does not load")
    -- names= skips it
    local path = tmp("f64.safetensors")
    write_file(path, st_file(f64, compat.pack_bytes("f64", { 1 }) .. compat.pack_bytes("f32", { 2 })))
    assert.are.same({ 2 }, lumus.load_safetensors(path, { names = { "a" } }).a:to_table())
    assert_bad_file(st_file('{"z":{"dtype":"F32","shape":[2,0],"data_offsets":[0,0]}}', ""), "tensor 'z' has no elements")
    assert_bad_file(st_file('{"r":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}}', "\0"),
      "tensor 'r' has 9 dimensions; lumus tensors have at most 8")
  end)

  it("raises for metadata that is not a map of strings", function()
    assert_bad_file(st_file('{"__metadata__":{"a":1}}', ""), "__metadata__ value of 'a' is not a string")
    assert_bad_file(st_file('{"__metadata__":[]}', ""), "__metadata__ is not a JSON object")
  end)

  it("raises for a missing file, a directory, and an unknown name in names=", function()
    local before = in_use()
    local ok, err = pcall(lumus.load_safetensors, tmp("missing.safetensors"))
    assert.is_false(ok)
    assert.matches("missing.safetensors: cannot open: No such file", err, 1, true)
    ok, err = pcall(lumus.load_safetensors, DIR)
    assert.is_false(ok)
    assert.is_truthy(err:find(DIR .. ": not a regular file", 1, true), err)
    -- a FIFO is refused at once, not waited on
    if compat.execute("mkfifo " .. tmp("fifo") .. " 2>/dev/null") then
      ok, err = pcall(lumus.load_safetensors, tmp("fifo"))
      assert.is_false(ok)
      assert.is_truthy(err:find("fifo: not a regular file", 1, true), err)
    end
    assert_bad_file(st_file(good_h, good_d), "no tensor named 'c'", { names = { "a", "c" } })
    assert.are.equal(before, in_use())
  end)

  it("frees the tensors already loaded when a later one fails or progress raises", function()
    local path = tmp("late.safetensors")
    local h = '{"a":{"dtype":"F32","shape":[1024],"data_offsets":[0,4096]},"b":{"dtype":"I64","shape":[1],"data_offsets":[4096,4104]}}'
    write_file(path, st_file(h, string.rep("\0", 4096) .. compat.pack_bytes("i64", { 2 ^ 40 })))
    local before = in_use()
    lumus.reset_peak()
    local ok, err = pcall(lumus.load_safetensors, path)
    assert.is_false(ok)
    assert.matches("outside int32", err)
    assert.is_true(lumus.memory().peak >= before + 4096, "tensor a was made before b failed")
    assert.are.equal(before, lumus.memory().in_use)   -- freed at once, no collection needed
    write_file(path, st_file(good_h, good_d))
    ok, err = pcall(lumus.load_safetensors, path, { progress = function() error("stop here") end })
    assert.is_false(ok)
    assert.matches("stop here", err)
    assert.are.equal(before, in_use())
  end)
end)

describe("load_safetensors / save_safetensors arguments", function()
  it("raise for bad paths and options", function()
    assert.has_error(function() lumus.load_safetensors(nil) end)
    assert.matches("path must be a non%-empty string", select(2, pcall(lumus.load_safetensors, "")))
    assert.matches("path must be a non%-empty string", select(2, pcall(lumus.load_safetensors, "a\0b")))
    assert.matches("unknown option 'dtypes'", select(2, pcall(lumus.load_safetensors, "x", { dtypes = "float32" })))
    assert.matches("dtype must be \"float32\", \"float16\" or \"bfloat16\".*got int32",
      select(2, pcall(lumus.load_safetensors, "x", { dtype = "int32" })))
    assert.matches("names must be a list of tensor names, got string", select(2, pcall(lumus.load_safetensors, "x", { names = "a" })))
    assert.matches("progress must be a function, got number", select(2, pcall(lumus.load_safetensors, "x", { progress = 1 })))
    local path = tmp("args.safetensors")
    lumus.save_safetensors(path, { a = lumus.ones(1) })
    assert.matches("names%[2%] must be a string, got number", select(2, pcall(lumus.load_safetensors, path, { names = { "a", 2 } })))
  end)

  it("save raises for non-tensor values, freed tensors, bad names and metadata, leaving no file", function()
    local path = tmp("save_bad.safetensors")
    local freed = lumus.ones(2)
    freed:free()
    local cases = {
      { { a = 1 }, nil, "tensors['a'] is a number, not a tensor" },
      { { a = freed }, nil, "tensor 'a' has been freed" },
      { { [1] = lumus.ones(1) }, nil, "tensor names must be strings, got number" },
      { { __metadata__ = lumus.ones(1) }, nil, "'__metadata__' cannot name a tensor" },
      { { ["a\0b"] = lumus.ones(1) }, nil, "tensor names must not contain NUL bytes" },
      { { ["\255"] = lumus.ones(1) }, nil, "tensor name '\255' is not valid UTF-8" },
      { { a = lumus.ones(1) }, { format = 1 }, "metadata values must be strings, got number" },
      { { a = lumus.ones(1) }, { [2] = "x" }, "metadata keys must be strings" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(lumus.save_safetensors, path, c[1], c[2])
      assert.is_false(ok, c[3])
      assert.is_truthy(err:find(c[3], 1, true), ("expected %q in %q"):format(c[3], err))
      assert.is_truthy(err:find("lumus.save_safetensors: ", 1, true) or err:find("save_safetensors", 1, true), err)
      assert.is_false(exists(path))
      assert.is_false(exists(path .. ".tmp"))
    end
    assert.matches("cannot create", select(2, pcall(lumus.save_safetensors, DIR .. "/no/such/dir/x", { a = lumus.ones(1) })))
    assert.matches("table expected", select(2, pcall(lumus.save_safetensors, path, lumus.ones(1))))
  end)

  it("save over an existing file replaces it whole, or leaves it when the save fails", function()
    local path = tmp("replace.safetensors")
    lumus.save_safetensors(path, { a = lumus.ones(3) })
    local first = read_file(path)
    assert.has_error(function() lumus.save_safetensors(path, { a = lumus.ones(1) }, { bad = true }) end)
    assert.are.equal(first, read_file(path))
    lumus.save_safetensors(path, { a = lumus.zeros(2) })
    assert.are.same({ 0, 0 }, lumus.load_safetensors(path).a:to_table())
    assert.is_false(exists(path .. ".tmp"))
  end)
end)

describe("load_safetensors on mutated files (seeded)", function()
  it("either loads or raises a clean error naming it, with memory flat", function()
    local seed = tonumber(os.getenv("LUMUS_FUZZ_SEED") or "") or 1234
    math.randomseed(seed)
    local base = lumus.load_safetensors   -- keep the function, not a method lookup
    local header = '{"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},'
      .. '"i":{"dtype":"I64","shape":[2],"data_offsets":[16,32]},"m":{"dtype":"BOOL","shape":[3],"data_offsets":[32,35]},'
      .. '"h":{"dtype":"F16","shape":[],"data_offsets":[35,37]}}'
    local data = compat.pack_bytes("f32", { 1, 2, 3, 4 }) .. compat.pack_bytes("i64", { 5, -6 }) .. "\1\0\1" .. "\0\60"
    local good = st_file(header, data)
    local path = tmp("mutant.safetensors")
    local before = in_use()
    local loaded, raised = 0, 0
    local digits = "0123456789-.eE[]{},\":"
    for iter = 1, 300 do
      local b = { good:byte(1, -1) }
      local kind = math.random(1, 9)
      local edits = math.random(1, 4)
      for _ = 1, edits do
        if #b < 8 then break end
        local at = math.random(1, #b)
        if kind == 1 then b[at] = math.random(0, 255)                                    -- any byte
        elseif kind == 2 then b[at] = digits:byte(math.random(1, #digits))              -- JSON-ish byte
        elseif kind == 3 then for k = at, #b do b[k] = nil end                           -- truncate
        elseif kind == 4 then b[math.random(1, 8)] = math.random(0, 255)                 -- header length
        elseif kind == 5 then table.insert(b, at, digits:byte(math.random(1, #digits)))  -- insert
        elseif kind <= 8 then                                                           -- a data byte
          b[#good - #data + math.random(1, #data)] = math.random(0, 255)
        else                                                                            -- a digit
          local d = {}
          for k = 9, #good - #data do if b[k] and b[k] >= 48 and b[k] <= 57 then d[#d + 1] = k end end
          b[d[math.random(1, #d)]] = math.random(48, 57)
        end
      end
      local bytes = string.char(compat.unpack(b))
      write_file(path, bytes)
      local ok, err = pcall(base, path)
      if ok then
        loaded = loaded + 1
        for _, t in pairs(err) do t:free() end
      else
        raised = raised + 1
        assert.is_string(err, "iteration " .. iter)
        assert.is_truthy(err:find("lumus.load_safetensors: " .. path .. ": ", 1, true), "iteration " .. iter .. ": " .. err)
      end
    end
    assert.is_true(raised > 100, "raised " .. raised)
    assert.is_true(loaded > 25, "loaded " .. loaded)
    assert.are.equal(300, loaded + raised)
    assert.are.equal(before, in_use())
  end)
end)
