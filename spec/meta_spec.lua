-- The Lua Language Server definitions (meta/*.lua) name exactly the public functions,
-- methods and fields of the real modules: lumus, its Tensor methods, capture's Graph,
-- lumus.tune, lumus.autograd, lumus.reference, lumus.nn and its classes, lumus.optim
-- with its optimizers and schedulers, lumus.models.gpt2 (spec/support/meta_names.lua
-- says how each side is read). A name added to a module without a definition fails
-- here, naming the meta file it belongs in; `lua5.4 tools/gen_meta.lua` prints stubs.
local shell = dofile("spec/support/shell.lua")
local meta_names = dofile("spec/support/meta_names.lua")

local function listing(list, verb)
  local lines = {}
  for _, m in ipairs(list) do
    lines[#lines + 1] = ("  %s: %s.%s %s"):format(m.file, m.class, m.name, verb)
  end
  return table.concat(lines, "\n")
end

describe("meta/ (Lua Language Server definitions)", function()
  local missing, extra, real, meta = meta_names.compare(shell.ROOT)

  it("defines every public name of the modules", function()
    assert(#missing == 0, #missing .. " public names have no definition in meta/ (add them there; "
      .. "`lua5.4 tools/gen_meta.lua` prints stubs):\n" .. listing(missing, "is in the module, not in the meta file"))
  end)

  it("defines nothing the modules lack", function()
    assert(#extra == 0, #extra .. " definitions in meta/ name nothing in the modules (remove or rename them):\n"
      .. listing(extra, "is in the meta file, not in the module"))
  end)

  it("covers every class it checks, and reads a real set of names", function()
    local count = 0
    for cname, set in pairs(real) do
      assert(meta[cname], "no ---@class " .. cname .. " in " .. meta_names.file_for(cname))
      for _ in pairs(set) do count = count + 1 end
    end
    -- The modules hold hundreds of public names; a reader that found few would pass anything.
    assert(count > 300, "only " .. count .. " public names found in the modules")
    assert(real["lumus.Tensor"].matmul and real["lumus"].layer_norm_forward and real["lumus.nn.Linear"].forward)
  end)

  it("fails naming the file, the class and the name", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("---@class lumus.nn.Linear\nlocal Linear = {}\nfunction Linear:forward(x) end\n"
      .. "function Linear:not_in_lumus(x) end\n")
    f:close()
    local classes = meta_names.meta_file(path)
    os.remove(path)
    assert.are.same({ forward = 3, not_in_lumus = 4 }, classes["lumus.nn.Linear"])
    assert.are.equal("meta/lumus_nn.lua", meta_names.file_for("lumus.nn.Linear"))
    assert.are.equal("meta/lumus.lua", meta_names.file_for("lumus.Tensor"))
    assert.are.equal("meta/lumus_models_gpt2.lua", meta_names.file_for("lumus.models.gpt2.Model"))
    assert.are.equal("meta/lumus_optim.lua", meta_names.file_for("lumus.optim.LRScheduler"))
  end)

  it("parses as Lua 5.1 to 5.4", function()
    for _, lua in ipairs({ "luac5.1", "luac5.4" }) do
      local _, has = shell.run("command -v " .. lua)
      if has == 0 then
        local out, code = shell.run(("cd %s && for f in meta/*.lua; do %s -p \"$f\" || exit 1; done"):format(shell.ROOT, lua))
        assert.are.equal(0, code, lua .. ": " .. out)
      end
    end
  end)
end)
