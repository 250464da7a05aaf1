-- The training examples run briefly (few steps, small sizes) and learn: the printed
-- loss falls and the classifier's accuracy passes a bar. They print their numbers; this
-- reads them.
local LUA = dofile("spec/support/shell.lua").LUA   -- the interpreter running the specs
local ROOT = io.popen("pwd"):read("*l")

-- Runs examples/<name> with the arguments; returns its output and exit code. (io.popen
-- with this process's module paths, as spec/support/shell.lua's run_lua.)
local function run_example(name, args)
  local p = io.popen(("cd %q && LUA_PATH=%q LUA_CPATH=%q timeout 300 " .. LUA .. " examples/%s %s 2>&1; echo rc=$?")
    :format(ROOT, package.path, package.cpath, name, args))
  local out = p:read("*a")
  p:close()
  return out, tonumber(out:match("rc=(%d+)%s*$"))
end

describe("examples/train_mlp.lua", function()
  it("separates three spirals in a few dozen steps", function()
    local out, rc = run_example("train_mlp.lua", "--points 50 --steps 60 --every 10 --min-acc 0.9")
    assert.are.equal(0, rc, out)
    local losses = {}
    for l in out:gmatch("step%s+%d+%s+loss (%S+)") do losses[#losses + 1] = tonumber(l) end
    assert.are.equal(7, #losses, out)   -- steps 1, 10, 20, ..., 60
    assert.is_true(losses[#losses] < 0.5 * losses[1], out)
    local acc = tonumber(out:match("final accuracy (%S+)"))
    assert.is_true(acc >= 0.9, out)
  end)

  it("refuses unknown options", function()
    local out, rc = run_example("train_mlp.lua", "--bogus 1")
    assert.are.equal(2, rc)
    assert.matches("usage: lua5.4 examples/train_mlp.lua", out)
  end)
end)

describe("examples/char_lm.lua", function()
  it("lowers its loss below uniform guessing, samples text and saves its weights", function()
    local path = os.tmpname()
    local out, rc = run_example("char_lm.lua", "--steps 40 --batch 32 --every 10 --sample 40 --save " .. path)
    assert.are.equal(0, rc, out)
    local first, last, uniform = out:match("loss (%S+) %-> (%S+) %(uniform guessing: (%S+)%)")
    first, last, uniform = tonumber(first), tonumber(last), tonumber(uniform)
    assert.is_true(last < first - 0.5 and last < uniform - 0.5, out)
    local sample = out:match("sample:\n(.-)\nsaved the weights")
    assert.is_true(sample ~= nil and #sample == 8 + 40, out)   -- the 8-character prompt and 40 sampled
    local f = assert(io.open(path, "rb"))
    local bytes = f:read("*a")
    f:close()
    os.remove(path)
    assert.is_true(#bytes > 4 * (95 * 16), "the saved weights are too small: " .. #bytes)
  end)
end)
