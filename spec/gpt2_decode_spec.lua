-- The GPT-2 decoder (model:new_decoder in lua/lumus/models/gpt2.lua): a single-token
-- step with the token, the position and the cache length on the device, captured once
-- (lumus.capture) and replayed per token. On a tiny GPT-2-shaped model with random
-- weights: replays give the eager step's bits, the ids of the float64 reference's greedy
-- decode, logits close to model:forward with a KV cache; replays allocate nothing.
local lumus = require "lumus"
local gpt2 = require "lumus.models.gpt2"
local transformer = require "lumus.nn_transformer"
local gref = dofile("spec/support/gpt2_ref.lua")
local checks = dofile("spec/support/check.lua")
local unpack = table.unpack or unpack

local CFG = { n_layer = 2, n_head = 4, n_embd = 32, vocab_size = 50, n_positions = 64, layer_norm_epsilon = 1e-5 }
local PROMPT = { 7, 1, 50, 23, 23, 4, 16 }   -- 1-based ids
local OTHER = { 3, 44, 9, 9, 12, 30, 2 }     -- a second row of the same length
local W = gref.gpt2_weights(CFG, 17, 0.3)

local function model_of(dtype)
  local t = {}
  for name, v in pairs(W) do t[name] = lumus.tensor(v) end
  return gpt2.from_tensors(t, CFG, { dtype = dtype })
end

local function ids_tensor(rows) return lumus.tensor(rows, { dtype = "int32" }) end

-- Prefill rows, feed their greedy next ids, run `steps` steps; returns the per-step
-- logits bytes, the ids read back per step (tok after each step) and the decoder.
local function run(model, rows, steps, opts)
  local d = model:new_decoder(#rows, 32, opts)
  local logits = d:prefill(ids_tensor(rows))
  local row = logits:select(2, 1)
  if row:dtype() ~= "float32" then row = row:to("float32") end
  d:feed(lumus.sample(row, { greedy = true }))
  local bytes, toks = {}, {}
  for k = 1, steps do
    bytes[k] = d:step():to_bytes()
    toks[k] = d.tok:to_table()
  end
  return bytes, toks, d
end

-- Device memory once the garbage is gone (allocations, bytes in use).
local usage = checks.settle

describe("gpt2 decoder", function()
  local model
  setup(function() model = model_of("float32") end)

  it("replays give the eager step's bits (logits and ids), batch of two rows", function()
    local eb, et, ed = run(model, { PROMPT, OTHER }, 6, { greedy = true, capture = false })
    local cb, ct, cd = run(model, { PROMPT, OTHER }, 6, { greedy = true })
    assert.is_nil(ed.graph)
    assert.is_not_nil(cd.graph, tostring(cd.capture_error))
    for k = 1, 6 do
      assert.is_true(eb[k] == cb[k], "logits of step " .. k .. " differ")
      assert.same(et[k], ct[k])
    end
    -- the ids recorded on the device at their positions are the ones read per step
    local rows = cd:ids(#PROMPT + 2, #PROMPT + 6)
    for r = 1, 2 do
      for k = 1, 5 do assert.equal(ct[k][r], rows[r][k]) end
    end
    ed:free(); cd:free()
  end)

  it("gives the float64 reference's greedy ids and model:forward's logits with a cache", function()
    local n = 10
    local want = gref.gpt2_greedy(W, CFG, PROMPT, n)
    local d = model:new_decoder(1, 32, { greedy = true })
    local cache = model:new_cache(1, 32)
    local first = d:prefill(ids_tensor({ PROMPT }))
    local eager = model:forward(ids_tensor({ PROMPT }), cache)
    checks.close(first:view({ CFG.vocab_size }), eager:select(2, #PROMPT):contiguous():view({ CFG.vocab_size }):to_table(),
      { mixed = 1e-5, what = "prefill logits" })
    local id = lumus.sample(first:select(2, 1), { greedy = true })
    assert.equal(want[1], id:to_table()[1])
    d:feed(id)
    for k = 2, n do
      local logits = d:step()
      local step = model:forward(ids_tensor({ { want[k - 1] } }), cache)
      -- the same float32 ops; attention over the whole cache under a mask instead of
      -- the cache's filled part: sums in other groupings, 1e-5
      checks.close(logits:view({ CFG.vocab_size }), step:view({ CFG.vocab_size }):to_table(),
        { mixed = 1e-5, what = "step " .. k })
      assert.equal(want[k], d.tok:to_table()[1], "id " .. k)
    end
    assert.equal(#PROMPT + n - 1, d.length)
    d:free(); cache:free()
  end)

  it("samples with a seed: captured steps draw what eager steps draw", function()
    local function sampled(capture)
      lumus.manual_seed(11)
      local d = model:new_decoder(1, 32, { capture = capture })
      local logits = d:prefill(ids_tensor({ PROMPT }))
      local got = {}
      local nxt = lumus.sample(logits:select(2, 1), { temperature = 0.9, top_k = 8 })
      for k = 1, 6 do
        d:feed(nxt)
        got[k] = nxt:to_table()[1]
        nxt = lumus.sample(d:step():select(2, 1), { temperature = 0.9, top_k = 8 })
      end
      assert.equal(capture == false, d.graph == nil)
      d:free()
      return got
    end
    local a, b = sampled(false), sampled(true)
    assert.same(a, b)
    for _, id in ipairs(a) do assert.is_true(id >= 1 and id <= CFG.vocab_size) end
  end)

  it("generate keeps its decoder and its graph for the next call of the same kind", function()
    local want = gref.gpt2_greedy(W, CFG, PROMPT, 5)
    assert.same(want, model:generate(PROMPT, 5, { greedy = true }))
    local d = model.decoder
    assert.is_not_nil(d.graph)
    assert.same(want, model:generate(PROMPT, 5, { greedy = true }))
    assert.equal(d, model.decoder)
    assert.same({ want[1] }, model:generate(PROMPT, 1, { greedy = true }))
  end)

  it("replays allocate nothing", function()
    local d = model:new_decoder(1, 64, { greedy = true })
    d:prefill(ids_tensor({ PROMPT })):free()
    d:feed(ids_tensor({ 5 }))
    d:step()
    local allocs, bytes = usage()
    for _ = 1, 40 do d:step() end
    local allocs2, bytes2 = usage()
    assert.equal(allocs, allocs2)
    assert.equal(bytes, bytes2)
    d:free()
  end)

  it("with the composite attention (no fused kernel) gives the same ids", function()
    local want = gref.gpt2_greedy(W, CFG, PROMPT, 6)
    transformer.force_composite = true
    local ok, err = pcall(function()
      local _, toks, d = run(model, { PROMPT }, 5, { greedy = true })
      assert.is_not_nil(d.graph, tostring(d.capture_error))
      for k = 1, 5 do assert.equal(want[k + 1], toks[k][1]) end
      d:free()
    end)
    transformer.force_composite = false
    assert(ok, err)
  end)

  it("writes the cache by index_copy (long caches) with the bits of the where path", function()
    local where_b, where_t, d1 = run(model, { PROMPT, OTHER }, 5, { greedy = true })
    local saved = transformer.kv_index_copy_min_len
    transformer.kv_index_copy_min_len = 1
    local ok, err = pcall(function()
      local ic_b, ic_t, d2 = run(model, { PROMPT, OTHER }, 5, { greedy = true })
      assert.is_not_nil(d2.graph, tostring(d2.capture_error))
      for k = 1, 5 do
        assert.is_true(where_b[k] == ic_b[k], "logits of step " .. k .. " differ")
        assert.same(where_t[k], ic_t[k])
      end
      d2:free()
    end)
    transformer.kv_index_copy_min_len = saved
    d1:free()
    assert(ok, err)
  end)

  it("writes a one-row cache by index_copy with the bits of the where path", function()
    local ic_b, ic_t, d1 = run(model, { PROMPT }, 5, { greedy = true })
    assert.is_true(d1.cache.layers[1]:writes_by_index())
    transformer.kv_write = "where"
    local ok, err = pcall(function()
      local w_b, w_t, d2 = run(model, { PROMPT }, 5, { greedy = true })
      assert.is_false(d2.cache.layers[1]:writes_by_index())
      assert.is_not_nil(d2.graph, tostring(d2.capture_error))
      for k = 1, 5 do
        assert.is_true(w_b[k] == ic_b[k], "logits of step " .. k .. " differ")
        assert.same(w_t[k], ic_t[k])
      end
      d2:free()
    end)
    transformer.kv_write = nil
    d1:free()
    assert(ok, err)
  end)

  it("adds the residuals inside the linears (one row) as the block's adds do, and follows trained weights", function()
    -- logits (tables) and fed ids of 8 steps
    local function steps(opts)
      local d = model:new_decoder(1, 32, opts)
      local logits = d:prefill(ids_tensor({ PROMPT }))
      d:feed(lumus.sample(logits:select(2, 1), { greedy = true }))
      local out, toks = {}, {}
      for k = 1, 8 do
        out[k] = d:step():view({ CFG.vocab_size }):to_table()
        toks[k] = d.tok:to_table()[1]
      end
      return out, toks, d
    end
    local fl, ft, fd = steps({ greedy = true })
    local pl, pt, pd = steps({ greedy = true, fuse_residual = false })
    assert.is_not_nil(fd.fused)
    assert.is_nil(pd.fused)
    assert.equal(pd.graph:stats().ops - 2 * CFG.n_layer, fd.graph:stats().ops)
    assert.same(pt, ft)
    -- the same terms summed in another order: float32 rounding apart
    for k = 1, 8 do checks.close(lumus.tensor(fl[k]), pl[k], { mixed = 1e-5, what = "step " .. k }) end
    fd:free(); pd:free()
    -- a model whose weights change after the decoder is made: the combined weights follow
    local m2 = model_of("float32")
    local d2 = m2:new_decoder(1, 32, { greedy = true })
    assert.is_not_nil(d2.fused)
    local w = m2.blocks[1].attn.out_proj_weight
    w:copy(lumus.mul(w, -2))
    m2.blocks[2].proj_weight:fill(0.01)
    local function steps(opts)
      local d = d2
      if opts then d = m2:new_decoder(1, 32, opts) end
      local logits = d:prefill(ids_tensor({ PROMPT }))
      d:feed(lumus.sample(logits:select(2, 1), { greedy = true }))
      local out = {}
      for k = 1, 4 do out[k] = d:step():to_table()[1][1] end
      if opts then d:free() end
      return out
    end
    local got, want = steps(), steps({ greedy = true, fuse_residual = false })
    for k = 1, 4 do checks.close(lumus.tensor(got[k]), want[k], { mixed = 1e-5, what = "trained step " .. k }) end
    d2:free(); m2:free()
  end)

  it("float16 weights: captured steps give the eager float16 steps' bits", function()
    local m16 = model_of("float16")
    local eb, et, ed = run(m16, { PROMPT }, 4, { greedy = true, capture = false })
    local cb, ct, cd = run(m16, { PROMPT }, 4, { greedy = true })
    assert.is_not_nil(cd.graph, tostring(cd.capture_error))
    for k = 1, 4 do
      assert.is_true(eb[k] == cb[k], "logits of step " .. k .. " differ")
      assert.same(et[k], ct[k])
    end
    ed:free(); cd:free(); m16:free()
  end)

  it("raises on bad arguments", function()
    assert.error_matches(function() model:new_decoder(0, 8) end, "gpt2:new_decoder: batch must be a positive integer, got 0")
    assert.error_matches(function() model:new_decoder(1, 65) end, "max_len must be an integer in 1..64")
    assert.error_matches(function() model:new_decoder(1, 8, { greedy = true, graph = 1 }) end,
      "gpt2:new_decoder: unknown option 'graph' %(known: capture, fuse_residual, greedy%)")
    local d = model:new_decoder(1, 8, { greedy = true })
    assert.error_matches(function() d:prefill(ids_tensor({ { 1, 2, 3, 4, 5, 6, 7, 8, 9 } })) end,
      "9 positions exceed max_len 8")
    d:prefill(ids_tensor({ { unpack(PROMPT) } })):free()
    d:feed(ids_tensor({ 2 }))
    d:step()
    assert.error_matches(function() d:step() end, "gpt2 decoder:step: the cache's max_len 8 is full")
    d:free()
    assert.error_matches(function() model:forward(ids_tensor({ { 1 } }), nil, { logits = "first" }) end,
      "gpt2:forward: option logits must be \"all\" or \"last\", got first")
    local cache = lumus.nn.KVCache(1, 4, 8, 8)
    local at = { write = lumus.zeros({ 8 }, { dtype = "bool" }) }
    assert.error_matches(function() cache:write_at(lumus.zeros({ 2, 1, 4, 2, 8 }), at) end,
      "nn.KVCache:write_at: kv must be %[2, 1, 4, 1, 8%], got shape 2x1x4x2x8")
    -- one row: written by index_copy at at.pos; several rows of a short cache: by where
    assert.is_true(cache:writes_by_index())
    assert.error_matches(function() cache:write_at(lumus.zeros({ 2, 1, 4, 1, 8 }), at) end,
      "nn.KVCache:write_at: at.pos must be an int32 tensor of 1 element")
    assert.error_matches(function() cache:write_at(lumus.zeros({ 2, 1, 4, 1, 8 }), { pos = lumus.ones({ 1 }) }) end,
      "at.pos must be an int32 tensor of 1 element")
    local cache2 = lumus.nn.KVCache(2, 4, 8, 8)
    assert.is_false(cache2:writes_by_index())
    assert.error_matches(function() cache2:write_at(lumus.zeros({ 2, 2, 4, 1, 8 }), { write = lumus.zeros({ 8 }) }) end,
      "at.write must be a bool tensor of 8 elements")
    assert.error_matches(function() cache2:write_at(lumus.zeros({ 2, 2, 4, 1, 8 }), nil) end,
      "nn.KVCache:write_at: at must be a table, got nil")
    cache2:free()
    local mha = lumus.nn.MultiheadAttention(32, 4)
    assert.error_matches(function() mha:forward(lumus.zeros({ 1, 2, 32 }), mha:new_cache(1, 8), at) end,
      "a device position %(third argument%) needs a cache and one new position per row, got T = 2")
    cache:free()
  end)

  it("forward{logits = \"last\"} gives the last row of the full logits", function()
    local ids = ids_tensor({ PROMPT, OTHER })
    local full = model:forward(ids)
    local last = model:forward(ids, nil, { logits = "last" })
    assert.same({ 2, 1, CFG.vocab_size }, last:shape())
    checks.close(last, full:narrow(2, #PROMPT, 1):contiguous():to_table(), { mixed = 1e-5, what = "last logits" })
  end)
end)
