---@meta lumus.tune
-- Lua Language Server definitions for lumus.tune (see meta/lumus.lua): hooks and
-- counters for specs and benchmarks, outside the stable API. Each shows the current
-- choice when called without options and forces it with an options table (details in
-- docs/tuning.md and the kernels' docs).

---@class lumus.tune
local tune = {}

---LayerNorm forward's kernel form for rows of D (docs/layer_norm.md).
---@param d integer
---@param opts? table {form =, wg =, items_target =, parts =, ...}
---@param rows? integer
---@param dtype? string "float32" (default), "float16" or "bfloat16": that dtype's plan
---@return table
function tune.layer_norm(d, opts, rows, dtype) end

---LayerNorm backward's kernel form (docs/layer_norm_backward.md).
---@param d integer
---@param rows? integer
---@param opts? table {form = "auto"|"fused"|"columns"|"rows", wg =, ...}
---@return table
function tune.layer_norm_backward(d, rows, opts) end

---matmul's path and tiles for M x N x K (docs/matmul.md).
---@param m integer
---@param n integer
---@param k integer
---@param opts? table {path =, split =, bm =, bn =, bk =, tm =, tn =, rotate =}
---@return table
function tune.matmul(m, n, k, opts) end

---The attention kernel's choice (docs/attention.md).
---@param bh integer batch * heads
---@param tq integer
---@param tk integer
---@param hd integer
---@param opts? table {rows_per_lane =, keys_per_lane =, kernel =, flash_tile =, prefetch =, coop_strips =}
---@return table
function tune.attention(bh, tq, tk, hd, opts) end

---The row kernels' workgroup choice for rows of d; opts {wg =, items =, scalar =} (scalar: rows
---whose d is not a multiple of 4 read an element at a time instead of as masked vectors).
---@param d integer
---@param opts? table
---@return table
function tune.rows(d, opts) end

---Softmax over a non-last dim: "auto" (default; the held form where r fits), "stream"
---(never held), "held" (same as auto); long_rows: "auto" (the row kernel's split form for
---few long rows on a GPU), "split" (wherever a row splits), "row" (never), "cols" (rows of
--->= 65536 by the column kernel); short_rows (of the
---last dim): "auto" (the tile form for short rows on a GPU), "tile", "row"; tile_items: the tile
---form's 16-byte units per thread, 0..8 (0: automatic). Returns the settings.
---@param opts? {form?: "auto"|"stream"|"held", long_rows?: "auto"|"row"|"cols"|"split", short_rows?: "auto"|"tile"|"row", tile_items?: integer}
---@return table
function tune.softmax_cols(opts) end

---Reductions over rows (sum, mean, var, max, min and their indices over the last dim): rows
---"auto" (the default: shuffles within full subgroups for sum, mean, max and min where the
---device allows it, a shared-memory tree for var), "lanes" (the tree for all) or "subgroup"
---(shuffles for all, where allowed) or "tile" (short rows staged in shared memory wherever they
---fit; auto takes it for short rows on a GPU); {} restores "auto". Returns {rows =, subgroup = allowed here}.
---@param opts? {rows?: "auto"|"lanes"|"subgroup"|"tile"}
---@return {rows: string, subgroup: boolean}
function tune.reduce(opts) end

---The elementwise kernels' grid (workgroups per dispatch).
---@param opts? table
---@return table
function tune.grid(opts) end

---Elementwise options: {hw_half =, fused_fma =} (docs/tuning.md).
---@param opts? {hw_half?: boolean, fused_fma?: boolean}
---@return table
function tune.elementwise(opts) end

---Transposing copies' form: "tile64" (default), "tile32", "general".
---@param opts? {form?: "tile64"|"tile32"|"general"}
---@return table
function tune.transpose(opts) end

---The stream's options: {submit_idle = k, prefault = b}; {} resets.
---@param opts? {submit_idle?: integer, prefault?: boolean}
---@return table
function tune.stream(opts) end

---Cumulative counters {submits =, gc_runs =, blocks_made =, ...}.
---@return table
function tune.stream_stats() end

---Host seconds recording, submitting and waiting: {on = true} zeroes and starts, {} stops,
---no argument reads {on, record, records, submit, ...}.
---@param opts? {on?: boolean}
---@return table
function tune.host_profile(opts) end

---The pipeline cache's state {path, state = "new"|"loaded"|"ignored"|"off", reason, ...}.
---@return table
function tune.pipeline_cache() end

---The validation layer's messages so far (LUMUS_VALIDATION=1).
---@return string[]
function tune.validation_messages() end

---linear's path for M x N x K: {path, kernel, bm, bn, workgroups, layer_norm_fused}.
---@param m integer
---@param n integer
---@param k integer
---@param opts? {path?: "auto"|"small"|"matmul"}
---@return table
function tune.linear(m, n, k, opts) end

return tune
