-- Lists the tensors of a safetensors file (name, dtype, shape, bytes) and its metadata,
-- loading it onto the device with a progress bar on the terminal.
--
-- Run from the repository root:
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/?.so;;" lua5.4 examples/safetensors_info.lua model.safetensors
-- With no file given it writes a small demo file first (to the system's temporary directory)
-- and lists that. Add a dtype (float32, float16, bfloat16) to convert the floating tensors.
local lumus = require "lumus"

local path, dtype = arg and arg[1], arg and arg[2]
if not path then
  path = os.tmpname()
  lumus.manual_seed(1)
  lumus.save_safetensors(path, {
    ["wte.weight"] = lumus.randn({ 512, 64 }),
    ["ln_f.weight"] = lumus.ones(64):half(),
    ["ln_f.bias"] = lumus.zeros(64):bfloat16(),
    ["attn.bias"] = lumus.ones({ 1, 1, 8, 8 }):bool(),
    ["step"] = lumus.tensor({ 1000 }):int(),
  }, { format = "pt", note = "lumus demo" })
  print("(no file given: wrote a demo file " .. path .. ")")
end

-- The bar: 40 characters wide, redrawn in place with a carriage return.
local WIDTH = 40
local function bar(done, total)
  local frac = total > 0 and done / total or 1
  local filled = math.floor(WIDTH * frac + 0.5)
  io.write(("\r[%s%s] %3d%% %8.1f MiB"):format(("#"):rep(filled), ("."):rep(WIDTH - filled),
    math.floor(100 * frac + 0.5), done / 1048576))
  if done >= total then io.write("\n") end
  io.flush()
end

local t0 = lumus.clock()
local tensors, meta = lumus.load_safetensors(path, { dtype = dtype, progress = bar })
lumus.synchronize()
local seconds = lumus.clock() - t0

local names = {}
for name in pairs(tensors) do names[#names + 1] = name end
table.sort(names)
local total = 0
print(("%-40s %-9s %-20s %12s"):format("tensor", "dtype", "shape", "bytes"))
for _, name in ipairs(names) do
  local t = tensors[name]
  local bytes = #t:to_bytes(1, 1) * t:numel()
  total = total + bytes
  print(("%-40s %-9s %-20s %12d"):format(name, t:dtype(), table.concat(t:shape(), "x"), bytes))
end
print(("%d tensors, %.1f MiB on the device, loaded in %.3f s"):format(#names, total / 1048576, seconds))
local keys = {}
for k in pairs(meta) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do print(("metadata %s = %s"):format(k, meta[k])) end
if not (arg and arg[1]) then os.remove(path) end
