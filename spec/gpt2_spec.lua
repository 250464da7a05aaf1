-- GPT-2 (lua/lumus/models/gpt2.lua) on a tiny GPT-2-shaped model with random weights,
-- against the float64 forward of spec/support/gpt2_ref.lua: logits, KV-cache decode
-- against full recompute, greedy generation, and lumus.sample's distributions.
local lumus = require "lumus"
local compat = require "lumus.compat"
local ref = require "lumus.reference"
local gpt2 = require "lumus.models.gpt2"
local gref = dofile("spec/support/gpt2_ref.lua")
local checks = dofile("spec/support/check.lua")

local CFG = { n_layer = 2, n_head = 4, n_embd = 32, vocab_size = 50, n_positions = 64, layer_norm_epsilon = 1e-5 }
local PROMPT = { 7, 1, 50, 23, 23, 4, 16 }   -- 1-based ids

-- Weights of scale 0.3 give logits spread over several units, so that greedy choices
-- are not float32 coin flips (the spec checks the reference's margins below).
local W = gref.gpt2_weights(CFG, 17, 0.3)

local function device_tensors(w, prefix)
  local t = {}
  for name, v in pairs(w) do t[(name:gsub("^transformer%.", prefix or "transformer."))] = lumus.tensor(v) end
  return t
end

local function last_row(logits)
  local b, t, v = logits:size(1), logits:size(2), logits:size(3)
  assert(b == 1)
  return logits:narrow(2, t, 1):contiguous():view({ v }):to_table()
end

-- Logits of float32 ops over 2 layers of width 32 against float64: within 2e-4 of
-- max(1, |ref|) (the logits are of order 1-10).
local TOL = { mixed = 2e-4 }

describe("gpt2", function()
  local model
  setup(function() model = gpt2.from_tensors(device_tensors(W), CFG) end)

  it("gives the float64 reference's logits for a prompt", function()
    local ids = lumus.tensor({ PROMPT }, { dtype = "int32" })
    local logits = model:forward(ids)
    assert.same({ 1, #PROMPT, CFG.vocab_size }, logits:shape())
    local want = gref.gpt2_forward(W, CFG, PROMPT)
    checks.close(logits:view({ #PROMPT, CFG.vocab_size }), want, { mixed = TOL.mixed, what = "logits" })
  end)

  it("accepts names without the transformer. prefix and an explicit lm_head", function()
    local t = device_tensors(W, "")
    t["lm_head.weight"] = lumus.tensor(W["transformer.wte.weight"])
    local m = gpt2.from_tensors(t, CFG)
    local logits = m:forward(lumus.tensor({ { 3, 9 } }, { dtype = "int32" }))
    checks.close(logits:view({ 2, CFG.vocab_size }), gref.gpt2_forward(W, CFG, { 3, 9 }), TOL)
  end)

  it("decodes with a KV cache as a full recompute does", function()
    local cache = model:new_cache(1, 16)
    local seq = { compat.unpack(PROMPT, 1, 4) }
    local l = model:forward(lumus.tensor({ seq }, { dtype = "int32" }), cache)
    assert.equal(4, cache.length)
    for i = 5, #PROMPT do
      local step = model:forward(lumus.tensor({ { PROMPT[i] } }, { dtype = "int32" }), cache)
      seq[#seq + 1] = PROMPT[i]
      assert.same({ 1, 1, CFG.vocab_size }, step:shape())
      local full = model:forward(lumus.tensor({ seq }, { dtype = "int32" }))
      -- The same float32 ops on the same rows, reduced in other groupings: 1e-5.
      checks.close(step:view({ CFG.vocab_size }), last_row(full), { mixed = 1e-5, what = "decode step " .. i })
      checks.close(step:view({ CFG.vocab_size }), gref.gpt2_forward(W, CFG, seq)[i], TOL)
    end
    assert.equal(#PROMPT, cache.length)
    l:free()
    -- a chunk of 2 after reset + prefill of 3: bottom-right causal mask over 5 keys
    cache:reset()
    model:forward(lumus.tensor({ { compat.unpack(PROMPT, 1, 3) } }, { dtype = "int32" }), cache)
    local chunk = model:forward(lumus.tensor({ { PROMPT[4], PROMPT[5] } }, { dtype = "int32" }), cache)
    local want = gref.gpt2_forward(W, CFG, { compat.unpack(PROMPT, 1, 5) })
    checks.close(chunk:view({ 2, CFG.vocab_size }), { want[4], want[5] }, TOL)
    cache:free()
  end)

  it("frees every intermediate of a forward itself (nothing left to the garbage collector)", function()
    local ids = lumus.tensor({ PROMPT }, { dtype = "int32" })
    local one = lumus.tensor({ { PROMPT[1] } }, { dtype = "int32" })
    local cache = model:new_cache(1, 16)
    model:forward(ids):free()   -- pipelines, scratch
    collectgarbage(); collectgarbage()
    collectgarbage("stop")
    local ok, err = pcall(function()
      local function live() lumus.synchronize(); return lumus.memory().allocations end
      local before = live()
      model:forward(ids):free()
      assert.equal(before, live(), "forward, all logits")
      model:forward(ids, nil, { logits = "last" }):free()
      assert.equal(before, live(), "forward, last logits")
      model:forward(ids, cache):free()
      model:forward(one, cache):free()
      assert.equal(before, live(), "prefill and a step with a cache")
    end)
    collectgarbage("restart")
    cache:free()
    assert(ok, err)
  end)

  it("leaves nothing to the garbage collector when it loads, converted or not, and keeps the caller's tensors", function()
    collectgarbage(); collectgarbage()
    collectgarbage("stop")
    local ok, err = pcall(function()
      local function live() lumus.synchronize(); return lumus.memory().allocations end
      for _, dtype in ipairs({ "float32", "float16" }) do
        collectgarbage(); collectgarbage()   -- the previous pass's forward's handles
        local before = live()
        local t = device_tensors(W)
        local m = gpt2.from_tensors(t, CFG, { dtype = dtype })
        local held = live()
        collectgarbage(); collectgarbage()
        assert.equal(held, live(), dtype .. ": allocations collected after the load")
        -- the caller's tensors are all alive, with their values
        for name, v in pairs(W) do checks.close(t[name], v, { mixed = 1e-6, what = dtype .. " " .. name }) end
        m:free()
        for _, v in pairs(t) do if not v:is_freed() then v:free() end end
        assert.equal(before, live(), dtype .. ": allocations after the frees")
        -- and the model computes with the weights it loaded
        t = device_tensors(W)
        m = gpt2.from_tensors(t, CFG, { dtype = dtype })
        local logits = m:forward(lumus.tensor({ PROMPT }, { dtype = "int32" }))
        checks.close(logits:to("float32"):view({ #PROMPT, CFG.vocab_size }), gref.gpt2_forward(W, CFG, PROMPT),
          { mixed = dtype == "float32" and TOL.mixed or 2e-2, what = dtype .. " logits" })
        logits:free()
        m:free()
        for _, v in pairs(t) do if not v:is_freed() then v:free() end end
      end
    end)
    collectgarbage("restart")
    assert(ok, err)
  end)

  it("generates the reference's greedy ids", function()
    local n = 8
    local want = gref.gpt2_greedy(W, CFG, PROMPT, n)
    -- the test means something only if the reference's choices are clear
    local seq = { compat.unpack(PROMPT) }
    for i = 1, n do
      local row = gref.gpt2_forward(W, CFG, seq)[#seq]
      table.sort(row, function(a, b) return a > b end)
      assert.is_true(row[1] - row[2] > 1e-3, "margin at step " .. i)
      seq[#seq + 1] = want[i]
    end
    assert.same(want, model:generate(PROMPT, n, { greedy = true }))
    assert.same(want, model:generate(lumus.tensor(PROMPT, { dtype = "int32" }), n, { top_k = 1 }))
    -- batch of two equal rows: a list of two lists
    local two = model:generate(lumus.tensor({ PROMPT, PROMPT }, { dtype = "int32" }), 3, { greedy = true })
    assert.same({ { want[1], want[2], want[3] }, { want[1], want[2], want[3] } }, two)
  end)

  it("reads back only the sampled ids: int32 [B, n - 1] and [B], once at the end", function()
    local methods = getmetatable(lumus.zeros(1)).methods
    local reads = {}
    local saved = {}
    for _, name in ipairs({ "to_table", "to_bytes", "item" }) do
      saved[name] = methods[name]
      methods[name] = function(t, ...)
        reads[#reads + 1] = { name = name, numel = t:numel(), dtype = t:dtype() }
        return saved[name](t, ...)
      end
    end
    local ok, err = pcall(model.generate, model, lumus.tensor({ PROMPT, PROMPT }, { dtype = "int32" }), 5,
      { temperature = 0.9, top_k = 8, seed = 2 })
    for name, f in pairs(saved) do methods[name] = f end
    assert(ok, err)
    assert.same({ { name = "to_table", numel = 8, dtype = "int32" }, { name = "to_table", numel = 2, dtype = "int32" } },
      reads)
  end)

  it("samples reproducibly with a seed", function()
    local a = model:generate(PROMPT, 6, { temperature = 0.8, top_k = 10, seed = 5 })
    local b = model:generate(PROMPT, 6, { temperature = 0.8, top_k = 10, seed = 5 })
    assert.same(a, b)
    for _, id in ipairs(a) do assert.is_true(id >= 1 and id <= CFG.vocab_size) end
  end)

  it("raises on bad arguments", function()
    assert.has_error(function() gpt2.from_tensors({}, CFG) end,
      "gpt2.from_tensors: missing tensor 'transformer.wte.weight' (or 'wte.weight')")
    local t = device_tensors(W)
    t["transformer.h.1.mlp.c_fc.weight"] = lumus.zeros({ 128, 32 })
    assert.has_error(function() gpt2.from_tensors(t, CFG) end,
      "gpt2.from_tensors: 'h.1.mlp.c_fc.weight' has shape 128x32, expected 32x128")
    assert.has_error(function() gpt2.from_tensors(device_tensors(W), { n_layer = 2 }) end,
      "gpt2.from_tensors: config.n_head must be a positive integer, got nil")
    assert.error_matches(function() model:forward(lumus.tensor({ { 1.0, 2.0 } })) end,
      "gpt2:forward: ids must be an int32 tensor %[B, T%] of 1%-based token ids, got float32")
    local cache = model:new_cache(1, 2)
    assert.error_matches(function() model:forward(lumus.tensor({ { 1, 2, 3 } }, { dtype = "int32" }), cache) end,
      "0 cached %+ 3 new positions exceed the cache's max_len 2")
    assert.error_matches(function() model:generate(PROMPT, 3, { top = 3 }) end, "unknown option 'top'")
    assert.error_matches(function() model:new_cache(1, 65) end, "max_len must be an integer in 1..64")
  end)
end)

describe("lumus.sample", function()
  local logits_rows = {
    { 0.5, 2.0, -1.0, 1.5, 0.0, 3.0, -2.0, 1.0 },
    { 1.0, 1.0, 0.2, -0.3, 2.2, 0.7, 0.7, -1.5 },
  }

  it("greedy and top_k = 1 are argmax", function()
    lumus.manual_seed(1)
    local x = lumus.randn({ 5, 37 })
    local want = x:argmax({ dim = 2 }):to_table()
    assert.same(want, lumus.sample(x, { greedy = true }):to_table())
    assert.same(want, lumus.sample(x, { top_k = 1 }):to_table())
    assert.same(want, lumus.sample(x, { temperature = 0 }):to_table())
    assert.same({ want[1] }, lumus.sample(x:select(1, 1), { greedy = true }):to_table())
    assert.equal("int32", lumus.sample(x, { greedy = true }):dtype())
  end)

  -- n draws from one row repeated n times, counted against the reference distribution:
  -- ids with probability 0 never appear, and Pearson's chi-square over the others stays
  -- below 40 (7 degrees of freedom at most: p < 1e-5 for a correct sampler; the seed is
  -- fixed, so the outcome is too).
  local function check_distribution(row, opts, n)
    local x = lumus.tensor({ row }):expand({ n, #row }):contiguous()
    lumus.manual_seed(1234)
    local got = lumus.sample(x, opts):to_table()
    local want = ref.sample_distribution(row, opts)
    local count = {}
    for i = 1, #row do count[i] = 0 end
    for _, id in ipairs(got) do count[id] = count[id] + 1 end
    local chi = 0
    for i = 1, #row do
      if want[i] == 0 then
        assert.equal(0, count[i], ("id %d has probability 0 but was drawn %d times"):format(i, count[i]))
      else
        chi = chi + (count[i] - n * want[i]) ^ 2 / (n * want[i])
      end
    end
    local desc = {}
    for k, v in pairs(opts) do desc[#desc + 1] = k .. "=" .. tostring(v) end
    table.sort(desc)
    assert.is_true(chi < 40, ("chi-square %.1f for {%s}"):format(chi, table.concat(desc, ", ")))
    return want
  end

  it("draws from softmax(logits / T) restricted to top_k and top_p", function()
    local n = 6000
    for _, row in ipairs(logits_rows) do
      check_distribution(row, {}, n)
      check_distribution(row, { temperature = 0.7 }, n)
      local w = check_distribution(row, { top_k = 3 }, n)
      local nonzero = 0
      for _, p in ipairs(w) do if p > 0 then nonzero = nonzero + 1 end end
      assert.equal(3, nonzero)
      check_distribution(row, { top_p = 0.8 }, n)
      check_distribution(row, { top_k = 5, top_p = 0.9, temperature = 1.5 }, n)
    end
  end)

  it("keeps at least the best candidate for a tiny top_p", function()
    local x = lumus.tensor(logits_rows)
    assert.same({ 6, 5 }, lumus.sample(x, { top_p = 1e-6 }):to_table())
  end)

  it("raises on bad arguments", function()
    local x = lumus.zeros({ 2, 5 })
    assert.has_error(function() lumus.sample(x, { top_k = 0 }) end,
      "bad argument #2 to 'sample' (option top_k must be a positive integer, got 0)")
    assert.has_error(function() lumus.sample(x, { top_p = 1.5 }) end,
      "bad argument #2 to 'sample' (option top_p must be a number in (0, 1], got 1.5)")
    assert.has_error(function() lumus.sample(x, { temperature = -1 }) end,
      "bad argument #2 to 'sample' (option temperature must be a finite number >= 0, got -1)")
    assert.has_error(function() lumus.sample(x, { topk = 3 }) end,
      "sample: unknown option 'topk' (known: greedy, temperature, top_k, top_p)")
    assert.has_error(function() lumus.sample(lumus.zeros({ 2, 2, 2 })) end,
      "bad argument #1 to 'sample' (logits must be [N, V] or [V], got shape 2x2x2)")
    assert.has_error(function() lumus.sample(x:int()) end,
      "bad argument #1 to 'sample' (logits must be float32, got int32)")
  end)
end)
