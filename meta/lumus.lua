---@meta lumus
-- Lua Language Server definitions for lumus (https://luals.github.io): point
-- "workspace.library" at this directory (README: Editor support). Checked against the
-- real modules by spec/meta_spec.lua; tools/gen_meta.lua prints stubs for new names.

---@alias lumus.dtype "float32"|"float16"|"bfloat16"|"int32"|"bool"
---A shape: a list of sizes, or one size for a 1-D tensor.
---@alias lumus.Shape integer[]|integer
---@alias lumus.Scalar number|boolean

---@class lumus.OutOpts
---@field out? lumus.Tensor a preallocated tensor of the result's shape to write into

---@class lumus.DtypeOpts
---@field dtype? lumus.dtype element type (default "float32")

---@class lumus.DimOpts
---@field dim? integer 1-based dimension (negative: from the end; default the last)
---@field out? lumus.Tensor

---@class lumus.ReduceOpts
---@field dim? integer 1-based dimension (negative: from the end); none: every element
---@field keepdim? boolean keep the reduced dimension as size 1
---@field correction? integer var only: divide by n - correction (default 1)
---@field out? lumus.Tensor
---@field indices? lumus.Tensor max/min with dim: int32 tensor for the indices

---@class lumus.LossOpts
---@field reduction? "mean"|"sum"|"none"
---@field ignore_index? integer cross_entropy: targets to skip (default -100)
---@field pos_weight? lumus.Tensor binary_cross_entropy_with_logits: weight of positives [C]

---@class lumus.RngState
---@field seed integer
---@field offset integer

---@class lumus.DeviceInfo
---@field index integer the index LUMUS_DEVICE takes
---@field name string
---@field kind "discrete"|"integrated"|"virtual"|"cpu"|"other"
---@field vendor_id integer
---@field device_id integer
---@field driver string
---@field driver_info string
---@field driver_version integer
---@field api_version string
---@field usable boolean
---@field subgroup_size integer
---@field min_subgroup_size integer
---@field max_subgroup_size integer
---@field max_workgroup_size integer
---@field max_workgroup_count integer[]
---@field max_allocation_size integer
---@field max_storage_buffer_range integer
---@field device_local_bytes integer
---@field timestamp_bits integer
---@field timestamp_period_ns number
---@field selected? boolean devices() only: the device this state uses
---@field attached? boolean device() only: a host's device (lumus_attach_vulkan)
---@field narrow_storage? boolean device() only: 8/16-bit storage buffer access
---@field cooperative_matrix? boolean device() only: float16 matmul on tensor cores
---@field int64_atomics? boolean device() only
---@field host_visible? boolean device() only
---@field validation? boolean device() only: the validation layer is on
---@field sm_count? integer device() only

---@class lumus.MemoryInfo
---@field in_use integer device bytes lumus holds (tensors and its own)
---@field internal integer the part lumus keeps for itself across calls
---@field peak integer
---@field reserved integer bytes held from the driver
---@field device_total integer
---@field limit integer
---@field budget integer VK_EXT_memory_budget's (0: not reported)
---@field blocks integer
---@field allocations integer
---@field staging integer
---@field deferred_frees integer

---A tensor in device memory: 1 to 8 dimensions, one dtype. Every op whose first
---argument is a tensor is a method too (t:add(b)); + - * / and unary - are the ops.
---@class lumus.Tensor
---@operator add(lumus.Tensor|number): lumus.Tensor
---@operator sub(lumus.Tensor|number): lumus.Tensor
---@operator mul(lumus.Tensor|number): lumus.Tensor
---@operator div(lumus.Tensor|number): lumus.Tensor
---@operator unm: lumus.Tensor
local Tensor = {}

---@class lumus.Graph
local Graph = {}

---Releases the recording (also <close> and __gc).
function Graph:free() end

---Whether free() was called.
---@return boolean
function Graph:is_freed() end

---Submits the recorded ops again; returns the captured function's results.
---@return any ...
function Graph:replay() end

---Counts of the recording.
---@return {ops: integer, storages: integer, inputs: integer}
function Graph:stats() end

---@class lumus
local lumus = {}

---abs(t).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.abs(t, opts) end

---One fused Adam/AdamW update in place (the kernel under optim.Adam).
---@param param lumus.Tensor
---@param grad lumus.Tensor
---@param opts table
---@return lumus.Tensor
function lumus.adam_step_(param, grad, opts) end

---a + b (broadcasting).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.add(a, b, opts) end

---start, start + step, ... below stop (one number n: 0 .. n - 1); int32 when every argument is an integer, else float32.
---@param start number
---@param stop? number
---@param step? number
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.arange(start, stop, step, opts) end

---int32 1-based indices of the max.
---@param x lumus.Tensor
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function lumus.argmax(x, opts) end

---int32 1-based indices of the min.
---@param x lumus.Tensor
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function lumus.argmin(x, opts) end

---Stable BCE of logits (pos_weight [C]).
---@param input lumus.Tensor
---@param target lumus.Tensor
---@param opts? lumus.LossOpts
---@return lumus.Tensor
function lumus.binary_cross_entropy_with_logits(input, target, opts) end

---Records fn's ops without running them; returns the graph and fn's results.
---@param fn fun(...): any
---@return lumus.Graph
---@return any ...
function lumus.capture(fn) end

---Tensors joined along dim (default 1).
---@param list lumus.Tensor[]
---@param dim? integer
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.cat(list, dim, opts) end

---At most n views along dim, as torch.chunk.
---@param t lumus.Tensor
---@param n integer
---@param dim? integer
---@return lumus.Tensor[]
function lumus.chunk(t, n, dim) end

---t clamped to [min, max] (nil: no bound).
---@param t lumus.Tensor
---@param min? number
---@param max? number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.clamp(t, min, max, opts) end

---Monotonic host seconds.
---@return number
function lumus.clock() end

---t, or a contiguous copy of a view.
---@param t lumus.Tensor
---@return lumus.Tensor
function lumus.contiguous(t) end

---src copied into dst (any view; src may broadcast, dtypes convert); returns dst.
---With one tensor: a new copy of it (or into opts.out).
---@overload fun(t: lumus.Tensor, opts?: lumus.OutOpts): lumus.Tensor
---@param dst lumus.Tensor
---@param src lumus.Tensor
---@return lumus.Tensor
function lumus.copy(dst, src) end

---Log-softmax + NLL of logits [N, C] and int32 1-based targets [N].
---@param logits lumus.Tensor
---@param target lumus.Tensor
---@param opts? lumus.LossOpts
---@return lumus.Tensor
function lumus.cross_entropy(logits, target, opts) end

---dlogits [N, C].
---@param dloss lumus.Tensor
---@param logits lumus.Tensor
---@param target lumus.Tensor
---@param logsumexp lumus.Tensor
---@param opts? {ignore_index?: integer}
---@return lumus.Tensor
function lumus.cross_entropy_backward(dloss, logits, target, logsumexp, opts) end

---Per-row loss [N], logsumexp [N] and weight [N].
---@param logits lumus.Tensor
---@param target lumus.Tensor
---@param opts? {ignore_index?: integer}
---@return lumus.Tensor
---@return lumus.Tensor
---@return lumus.Tensor
function lumus.cross_entropy_forward(logits, target, opts) end

---The same elements outside the autograd graph.
---@param t lumus.Tensor
---@return lumus.Tensor
function lumus.detach(t) end

---The device of this lua_State (opened on first use).
---@return lumus.DeviceInfo
function lumus.device() end

---Every Vulkan device, with index and selected.
---@return lumus.DeviceInfo[]
function lumus.devices() end

---a / b (broadcasting).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.div(a, b, opts) end

---Rows of weight [V, D] for int32 1-based ids: [...] -> [..., D].
---@param ids lumus.Tensor
---@param weight lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.embedding(ids, weight, opts) end

---An uninitialized tensor.
---@param shape lumus.Shape
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.empty(shape, opts) end

---Gives unused device blocks back to the driver; returns their bytes.
---@return integer
function lumus.empty_cache() end

---a == b, a bool tensor.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.eq(a, b, opts) end

---erf(t).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.erf(t, opts) end

---e^t.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.exp(t, opts) end

---Fills t in place; returns t.
---@param t lumus.Tensor
---@param value lumus.Scalar
---@return lumus.Tensor
function lumus.fill(t, value) end

---A tensor from the dtype's little-endian bytes.
---@param bytes string
---@param shape lumus.Shape
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.from_bytes(bytes, shape, opts) end

---A tensor filled with value.
---@param shape lumus.Shape
---@param value lumus.Scalar
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.full(shape, value, opts) end

---torch.gather with int32 1-based ids.
---@param x lumus.Tensor
---@param dim integer
---@param ids lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.gather(x, dim, ids, opts) end

---a >= b, a bool tensor.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.ge(a, b, opts) end

---GELU (erf form by default).
---@param t lumus.Tensor
---@param opts? {approximate?: "none"|"tanh", out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.gelu(t, opts) end

---GELU, erf form.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.gelu_erf(t, opts) end

---GELU, tanh form.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.gelu_tanh(t, opts) end

---The random stream's state {seed =, offset =}.
---@return lumus.RngState
function lumus.get_rng_state() end

---Device seconds of the work fn records.
---@param fn fun()
---@return number
function lumus.gpu_time(fn) end

---a > b, a bool tensor.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.gt(a, b, opts) end

---t plus src's slice j added into slice ids[j].
---@param t lumus.Tensor
---@param dim integer
---@param ids lumus.Tensor
---@param src lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.index_add(t, dim, ids, src, opts) end

---x's slices ids[1], ids[2], ... along dim (int32 1-based ids).
---@param x lumus.Tensor
---@param dim integer
---@param ids lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.index_select(x, dim, ids, opts) end

---Whether autograd records now.
---@return boolean
function lumus.is_grad_enabled() end

---LayerNorm backward: dx, and dweight, dbias when weight is given.
---@param dy lumus.Tensor
---@param x lumus.Tensor
---@param mean lumus.Tensor
---@param invstd lumus.Tensor
---@param weight? lumus.Tensor
---@param opts? {out?: lumus.Tensor, dweight?: lumus.Tensor, dbias?: lumus.Tensor}
---@return lumus.Tensor
---@return lumus.Tensor?
---@return lumus.Tensor?
function lumus.layer_norm_backward(dy, x, mean, invstd, weight, opts) end

---LayerNorm over the last dimension: y, mean, invstd.
---@param x lumus.Tensor
---@param weight? lumus.Tensor
---@param bias? lumus.Tensor
---@param eps? number
---@param opts? {out?: lumus.Tensor, mean?: lumus.Tensor, invstd?: lumus.Tensor}
---@return lumus.Tensor
---@return lumus.Tensor
---@return lumus.Tensor
function lumus.layer_norm_forward(x, weight, bias, eps, opts) end

---a <= b, a bool tensor.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.le(a, b, opts) end

---x W^T + b (weight [out, in]).
---@param x lumus.Tensor
---@param weight lumus.Tensor
---@param bias? lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.linear(x, weight, bias, opts) end

---Loads a safetensors file: tensors by name, and its metadata.
---@param path string
---@param opts? {dtype?: lumus.dtype, names?: string[], progress?: fun(done: integer, total: integer)}
---@return table<string, lumus.Tensor>
---@return table<string, string>
function lumus.load_safetensors(path, opts) end

---Natural log.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.log(t, opts) end

---Log-softmax over dim (default the last).
---@param x lumus.Tensor
---@param opts? lumus.DimOpts
---@return lumus.Tensor
function lumus.log_softmax(x, opts) end

---a < b, a bool tensor.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.lt(a, b, opts) end

---Restarts the random stream with this seed.
---@param seed integer
function lumus.manual_seed(seed) end

---Matrix product as torch.matmul (batches broadcast).
---@param a lumus.Tensor
---@param b lumus.Tensor
---@param opts? {transpose_a?: boolean, transpose_b?: boolean, out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.matmul(a, b, opts) end

---Max; with dim also the int32 1-based indices.
---@param x lumus.Tensor
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
---@return lumus.Tensor?
function lumus.max(x, opts) end

---Elementwise max (NaN if either is NaN).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.maximum(a, b, opts) end

---Mean over dim, or over every element.
---@param x lumus.Tensor
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function lumus.mean(x, opts) end

---Device memory counters.
---@return lumus.MemoryInfo
function lumus.memory() end

---Min; with dim also the int32 1-based indices.
---@param x lumus.Tensor
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
---@return lumus.Tensor?
function lumus.min(x, opts) end

---Elementwise min (NaN if either is NaN).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.minimum(a, b, opts) end

---(input - target)^2, reduced.
---@param input lumus.Tensor
---@param target lumus.Tensor
---@param opts? lumus.LossOpts
---@return lumus.Tensor
function lumus.mse_loss(input, target, opts) end

---a * b (broadcasting).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.mul(a, b, opts) end

---int32 1-based categories drawn from rows of weights.
---@param probs lumus.Tensor
---@param n integer
---@param opts? {replacement?: boolean, out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.multinomial(probs, n, opts) end

---a ~= b, a bool tensor.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.ne(a, b, opts) end

----t.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.neg(t, opts) end

---Runs fn with autograd recording off; returns its results.
---@param fn fun(...): any
---@return any ...
function lumus.no_grad(fn) end

---Fills t in place with normal(mean, std); returns t.
---@param t lumus.Tensor
---@param mean? number
---@param std? number
---@return lumus.Tensor
function lumus.normal_(t, mean, std) end

---A tensor of ones.
---@param shape lumus.Shape
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.ones(shape, opts) end

---True while recorded or submitted work is unfinished.
---@return boolean
function lumus.pending() end

---a ^ b (broadcasting).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.pow(a, b, opts) end

---PyTorch's result dtype for two dtypes.
---@param a lumus.dtype
---@param b lumus.dtype
---@return lumus.dtype
function lumus.promote_types(a, b) end

---Uniform [0, 1) from the Philox stream.
---@param shape lumus.Shape
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.rand(shape, opts) end

---Standard normal from the Philox stream.
---@param shape lumus.Shape
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.randn(shape, opts) end

---max(t, 0); NaN stays NaN.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.relu(t, opts) end

---Resets memory().peak.
function lumus.reset_peak() end

---x / sqrt(mean(x^2) + eps) * weight over the last dimension.
---@param x lumus.Tensor
---@param weight? lumus.Tensor
---@param opts? {eps?: number, out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.rms_norm(x, weight, opts) end

---Rotary position embedding of [..., T, hd].
---@param x lumus.Tensor
---@param opts? {base?: number, offset?: integer, interleaved?: boolean, out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.rope(x, opts) end

---1 / sqrt(t).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.rsqrt(t, opts) end

---int32 [N] 1-based ids drawn on the device.
---@param logits lumus.Tensor
---@param opts? {greedy?: boolean, temperature?: number, top_k?: integer, top_p?: number}
---@return lumus.Tensor
function lumus.sample(logits, opts) end

---Writes the pipeline cache file now: its size, or nil and a reason.
---@return integer?
---@return string?
function lumus.save_pipeline_cache() end

---Writes tensors (and string metadata) to path, atomically.
---@param path string
---@param tensors table<string, lumus.Tensor>
---@param metadata? table<string, string>
function lumus.save_safetensors(path, tensors, metadata) end

---t * s.
---@param t lumus.Tensor
---@param s number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.scale(t, s, opts) end

---Fused attention softmax(q k^T scale + mask) v.
---@param q lumus.Tensor
---@param k lumus.Tensor
---@param v lumus.Tensor
---@param opts? {causal?: boolean, mask?: lumus.Tensor, scale?: number, out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.scaled_dot_product_attention(q, k, v, opts) end

---torch.scatter_add with int32 1-based ids.
---@param t lumus.Tensor
---@param dim integer
---@param ids lumus.Tensor
---@param src lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.scatter_add(t, dim, ids, src, opts) end

---Caps device bytes in use (nil: the device's heap).
---@param bytes? integer
function lumus.set_memory_limit(bytes) end

---Restores a state from get_rng_state.
---@param state lumus.RngState
function lumus.set_rng_state(state) end

---One fused SGD update in place (the kernel under optim.SGD).
---@param param lumus.Tensor
---@param grad lumus.Tensor
---@param opts? table
---@return lumus.Tensor
function lumus.sgd_step_(param, grad, opts) end

---1 / (1 + e^-t).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.sigmoid(t, opts) end

---t * sigmoid(t).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.silu(t, opts) end

---Running sums along dim.
---@param x lumus.Tensor
---@param opts? {dim?: integer}
---@return lumus.Tensor
function lumus.cumsum(x, opts) end

---t repeated reps[i] times along dim i.
---@param t lumus.Tensor
---@param reps integer[]
---@return lumus.Tensor
function lumus.tile(t, reps) end

---a[i] b[j] of two 1-D tensors.
---@param a lumus.Tensor
---@param b lumus.Tensor
---@return lumus.Tensor
function lumus.outer(a, b) end

---x, or x * negative_slope below 0.
---@param x lumus.Tensor
---@param opts? {negative_slope?: number}
---@return lumus.Tensor
function lumus.leaky_relu(x, opts) end

---x above 0, else alpha (e^x - 1).
---@param x lumus.Tensor
---@param opts? {alpha?: number}
---@return lumus.Tensor
function lumus.elu(x, opts) end

---log(1 + e^(beta x)) / beta (x past threshold).
---@param x lumus.Tensor
---@param opts? {beta?: number, threshold?: number}
---@return lumus.Tensor
function lumus.softplus(x, opts) end

---x clamped to [min_val, max_val] (-1, 1).
---@param x lumus.Tensor
---@param opts? {min_val?: number, max_val?: number}
---@return lumus.Tensor
function lumus.hardtanh(x, opts) end

---min(max(x, 0), 6).
---@param x lumus.Tensor
---@return lumus.Tensor
function lumus.relu6(x) end

---relu6(x + 3) / 6.
---@param x lumus.Tensor
---@return lumus.Tensor
function lumus.hardsigmoid(x) end

---x relu6(x + 3) / 6.
---@param x lumus.Tensor
---@return lumus.Tensor
function lumus.hardswish(x) end

---x tanh(softplus(x)).
---@param x lumus.Tensor
---@return lumus.Tensor
function lumus.mish(x) end

---log(sigmoid(x)) = -softplus(-x), no overflow.
---@param x lumus.Tensor
---@return lumus.Tensor
function lumus.logsigmoid(x) end

---true where NaN.
---@param t lumus.Tensor
---@return lumus.Tensor
function lumus.isnan(t) end

---true where +-inf.
---@param t lumus.Tensor
---@return lumus.Tensor
function lumus.isinf(t) end

---true where neither NaN nor +-inf.
---@param t lumus.Tensor
---@return lumus.Tensor
function lumus.isfinite(t) end

---NaN, +inf, -inf replaced (0 and the dtype's finite extremes by default).
---@param t lumus.Tensor
---@param opts? {nan?: number, posinf?: number, neginf?: number}
---@return lumus.Tensor
function lumus.nan_to_num(t, opts) end

---log(sum(exp(x))) over dim (everything without), shifted by the max.
---@param x lumus.Tensor
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function lumus.logsumexp(x, opts) end

---The max values over dim (everything without).
---@param x lumus.Tensor
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function lumus.amax(x, opts) end

---The min values over dim (everything without).
---@param x lumus.Tensor
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function lumus.amin(x, opts) end

---x / max(||x||_p, eps) along dim (-1).
---@param x lumus.Tensor
---@param opts? {p?: number, dim?: integer, eps?: number}
---@return lumus.Tensor
function lumus.normalize(x, opts) end

---int32 rows of num_classes zeros with a 1 at each 1-based id (ids outside 1..C raise).
---@param ids lumus.Tensor
---@param num_classes integer
---@return lumus.Tensor
function lumus.one_hot(ids, num_classes) end

---Cosine similarity along dim (-1), each norm at least eps (1e-8).
---@param a lumus.Tensor
---@param b lumus.Tensor
---@param opts? {dim?: integer, eps?: number}
---@return lumus.Tensor
function lumus.cosine_similarity(a, b, opts) end

---log(e^a + e^b).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@return lumus.Tensor
function lumus.logaddexp(a, b) end

---beta input + alpha (m1 m2).
---@param input lumus.Tensor
---@param m1 lumus.Tensor
---@param m2 lumus.Tensor
---@param opts? {beta?: number, alpha?: number}
---@return lumus.Tensor
function lumus.addmm(input, m1, m2, opts) end

----(t log p + (1 - t) log(1 - p)) on probabilities, each log at least -100, reduced.
---@param input lumus.Tensor
---@param target lumus.Tensor
---@param opts? {reduction?: string, weight?: lumus.Tensor}
---@return lumus.Tensor
function lumus.binary_cross_entropy(input, target, opts) end

---target (log target - input) with input log-probabilities, reduced ("batchmean" too).
---@param input lumus.Tensor
---@param target lumus.Tensor
---@param opts? {reduction?: string, log_target?: boolean}
---@return lumus.Tensor
function lumus.kl_div(input, target, opts) end

---Constant padding of the last dims: pads = {left, right, ...} from the last dim backwards.
---@param x lumus.Tensor
---@param pads integer[]
---@param opts? {value?: number}
---@return lumus.Tensor
function lumus.pad(x, pads, opts) end

---|input - target|, reduced.
---@param input lumus.Tensor
---@param target lumus.Tensor
---@param opts? table
---@return lumus.Tensor
function lumus.l1_loss(input, target, opts) end

---Smooth L1 (opts.beta, 1), reduced.
---@param input lumus.Tensor
---@param target lumus.Tensor
---@param opts? table
---@return lumus.Tensor
function lumus.smooth_l1_loss(input, target, opts) end

---Huber (opts.delta, 1), reduced.
---@param input lumus.Tensor
---@param target lumus.Tensor
---@param opts? table
---@return lumus.Tensor
function lumus.huber_loss(input, target, opts) end

----log_probs[i, target[i]], reduced.
---@param log_probs lumus.Tensor
---@param target lumus.Tensor
---@param opts? table
---@return lumus.Tensor
function lumus.nll_loss(log_probs, target, opts) end

---Ones on the diagonal of an n x m matrix.
---@param n integer
---@param m? integer
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.eye(n, m, opts) end

---steps values from start to stop.
---@param start number
---@param stop number
---@param steps integer
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.linspace(start, stop, steps, opts) end

---A copy with the order along dims reversed.
---@param t lumus.Tensor
---@param dims integer|integer[]
---@return lumus.Tensor
function lumus.flip(t, dims) end

---A copy shifted cyclically along dims (flattened without).
---@param t lumus.Tensor
---@param shifts integer|integer[]
---@param dims? integer|integer[]
---@return lumus.Tensor
function lumus.roll(t, shifts, dims) end

---Values and int32 1-based indices along dim.
---@param x lumus.Tensor
---@param opts? {dim?: integer, descending?: boolean}
---@return lumus.Tensor
---@return lumus.Tensor
function lumus.sort(x, opts) end

---The int32 1-based indices that sort along dim.
---@param x lumus.Tensor
---@param opts? {dim?: integer, descending?: boolean}
---@return lumus.Tensor
function lumus.argsort(x, opts) end

---Zeroes each element with probability p, scales the rest by 1/(1-p).
---@param x lumus.Tensor
---@param opts? {p?: number, training?: boolean}
---@return lumus.Tensor
function lumus.dropout(x, opts) end

---e^t - 1, exact near 0.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.expm1(t, opts) end

---log(1 + t), exact near 0.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.log1p(t, opts) end

---2^t, exact at integers.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.exp2(t, opts) end

---log base 2 of t, exact at powers of 2.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.log2(t, opts) end

---log base 10 of t.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.log10(t, opts) end

---tan(t), within 4 ulp.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.tan(t, opts) end

---atan(t), within 3 ulp.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.atan(t, opts) end

---asin(t), within 4 ulp; NaN outside [-1, 1].
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.asin(t, opts) end

---acos(t), within 4 ulp; NaN outside [-1, 1].
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.acos(t, opts) end

---atan2(a, b): the angle of the point (b, a), within 3 ulp; tensors or numbers, broadcast.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.atan2(a, b, opts) end

---sinh(t), within 3 ulp (finite up to the float32 end).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.sinh(t, opts) end

---cosh(t), within 3 ulp.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.cosh(t, opts) end

---asinh(t), within 3 ulp.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.asinh(t, opts) end

---acosh(t), within 3 ulp; NaN below 1.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.acosh(t, opts) end

---atanh(t), within 3 ulp; +-inf at +-1, NaN beyond.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.atanh(t, opts) end

---sin(t), within 2 ulp.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.sin(t, opts) end

---cos(t), within 2 ulp.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.cos(t, opts) end

---A new tensor with t's values (lumus.copy).
---@param t lumus.Tensor
---@return lumus.Tensor
function lumus.clone(t) end

---The transpose of a 2-D tensor (a view); a 1-D tensor itself.
---@param t lumus.Tensor
---@return lumus.Tensor
function lumus.t(t) end

---Dimensions start_dim..end_dim merged (a view when the strides allow).
---@param t lumus.Tensor
---@param start_dim? integer
---@param end_dim? integer
---@return lumus.Tensor
function lumus.flatten(t, start_dim, end_dim) end

---value where mask (bool, broadcast to t), else t.
---@param t lumus.Tensor
---@param mask lumus.Tensor
---@param value number
---@return lumus.Tensor
function lumus.masked_fill(t, mask, value) end

---sqrt(var(x)).
---@param x lumus.Tensor
---@param opts? {dim?: integer, keepdim?: boolean, correction?: number, out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.std(x, opts) end

---The p-norm: p = 2 (default), 1 or math.huge.
---@param x lumus.Tensor
---@param opts? {p?: number, dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function lumus.norm(x, opts) end

---a + w (b - a).
---@param a lumus.Tensor
---@param b lumus.Tensor|number
---@param w lumus.Tensor|number
---@return lumus.Tensor
function lumus.lerp(a, b, w) end

---The lower triangle of the last two dims from diagonal k (zeros elsewhere).
---@param t lumus.Tensor
---@param k? integer
---@return lumus.Tensor
function lumus.tril(t, k) end

---The upper triangle of the last two dims from diagonal k (zeros elsewhere).
---@param t lumus.Tensor
---@param k? integer
---@return lumus.Tensor
function lumus.triu(t, k) end

---bool: some element nonzero (over dim, or every element).
---@param t lumus.Tensor
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function lumus.any(t, opts) end

---bool: every element nonzero (over dim, or every element).
---@param t lumus.Tensor
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function lumus.all(t, opts) end

---[B, M, K] x [B, K, N] -> [B, M, N].
---@param a lumus.Tensor
---@param b lumus.Tensor
---@return lumus.Tensor
function lumus.bmm(a, b) end

---Zeros of t's shape (t's dtype unless given).
---@param t lumus.Tensor
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.zeros_like(t, opts) end

---Ones of t's shape (t's dtype unless given).
---@param t lumus.Tensor
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.ones_like(t, opts) end

---Uninitialized, t's shape (t's dtype unless given).
---@param t lumus.Tensor
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.empty_like(t, opts) end

---uniform [0, 1) of t's shape.
---@param t lumus.Tensor
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.rand_like(t, opts) end

---Standard normal of t's shape.
---@param t lumus.Tensor
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.randn_like(t, opts) end

---value in t's shape (t's dtype unless given).
---@param t lumus.Tensor
---@param value number
---@param opts? {dtype?: string}
---@return lumus.Tensor
function lumus.full_like(t, value, opts) end

---t * t.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.square(t, opts) end

---1 / t (1 / -0 = -inf).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.reciprocal(t, opts) end

---floor(t), exact.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.floor(t, opts) end

---ceil(t), exact.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.ceil(t, opts) end

---t to the nearest integer, halves to even.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.round(t, opts) end

---t rounded toward zero, exact.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.trunc(t, opts) end

----1, 0 or 1 (sign(NaN) = 0).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.sign(t, opts) end

---Softmax over dim (default the last).
---@param x lumus.Tensor
---@param opts? lumus.DimOpts
---@return lumus.Tensor
function lumus.softmax(x, opts) end

---Views of size elements along dim (the last smaller), or of the sizes listed.
---@param t lumus.Tensor
---@param size integer|integer[]
---@param dim? integer
---@return lumus.Tensor[]
function lumus.split(t, size, dim) end

---Square root.
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.sqrt(t, opts) end

---Equal shapes stacked along a new dim (default 1).
---@param list lumus.Tensor[]
---@param dim? integer
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.stack(list, dim, opts) end

---a - b (broadcasting).
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.sub(a, b, opts) end

---Sum over dim, or over every element.
---@param x lumus.Tensor
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function lumus.sum(x, opts) end

---Waits for every op recorded so far.
function lumus.synchronize() end

---tanh(t).
---@param t lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.tanh(t, opts) end

---A tensor from a nested table of numbers (shape inferred).
---@param data table
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.tensor(data, opts) end

---Converted on the device (t itself when it has that dtype).
---@param t lumus.Tensor
---@param dtype lumus.dtype
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.to(t, dtype, opts) end

---The k largest (or smallest) values and their int32 1-based indices.
---@param x lumus.Tensor
---@param k integer
---@param opts? {dim?: integer, largest?: boolean, sorted?: boolean, out?: lumus.Tensor, indices?: lumus.Tensor}
---@return lumus.Tensor
---@return lumus.Tensor
function lumus.topk(x, k, opts) end

---Fills t in place with uniform [from, to); returns t.
---@param t lumus.Tensor
---@param from? number
---@param to? number
---@return lumus.Tensor
function lumus.uniform_(t, from, to) end

---Variance (correction = 1 by default).
---@param x lumus.Tensor
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function lumus.var(x, opts) end

---Builds the pipelines listed in the pipeline cache file: count built, seconds.
---@param opts? {ops?: string[]}
---@return integer
---@return number
function lumus.warm_up(opts) end

---a where mask (bool), else b.
---@param mask lumus.Tensor
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.where(mask, a, b, opts) end

---A tensor of zeros.
---@param shape lumus.Shape
---@param opts? lumus.DtypeOpts
---@return lumus.Tensor
function lumus.zeros(shape, opts) end

---@type {methods: lumus.Tensor}
lumus.Tensor = { methods = Tensor }

---@type lumus.autograd
lumus.autograd = require("lumus.autograd")

---@type lumus.nn
lumus.nn = require("lumus.nn")

---@type lumus.optim
lumus.optim = require("lumus.optim")

---@type lumus.reference
lumus.reference = require("lumus.reference")

---@type lumus.tune
lumus.tune = require("lumus.tune")

---@type string
lumus.version = "0.2.0"

---abs(t).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:abs(opts) end

---a + b (broadcasting).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:add(b, opts) end

---int32 1-based indices of the max.
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function Tensor:argmax(opts) end

---int32 1-based indices of the min.
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function Tensor:argmin(opts) end

---Backpropagates from this tensor into the leaves' grad().
---@param grad? lumus.Tensor
---@param opts? {retain_graph?: boolean}
function Tensor:backward(grad, opts) end

---t:to("bfloat16").
---@return lumus.Tensor
function Tensor:bfloat16() end

---t:to("bool").
---@return lumus.Tensor
function Tensor:bool() end

---At most n views along dim, as torch.chunk.
---@param n integer
---@param dim? integer
---@return lumus.Tensor[]
function Tensor:chunk(n, dim) end

---t clamped to [min, max] (nil: no bound).
---@param min? number
---@param max? number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:clamp(min, max, opts) end

---t, or a contiguous copy of a view.
---@return lumus.Tensor
function Tensor:contiguous() end

---src copied into this tensor (any view; src may broadcast, dtypes convert); returns it.
---Without src: a new copy (or into opts.out).
---@overload fun(self: lumus.Tensor, opts?: lumus.OutOpts): lumus.Tensor
---@param src lumus.Tensor
---@return lumus.Tensor
function Tensor:copy(src) end

---dlogits [N, C].
---@param logits lumus.Tensor
---@param target lumus.Tensor
---@param logsumexp lumus.Tensor
---@param opts? {ignore_index?: integer}
---@return lumus.Tensor
function Tensor:cross_entropy_backward(logits, target, logsumexp, opts) end

---Per-row loss [N], logsumexp [N] and weight [N].
---@param target lumus.Tensor
---@param opts? {ignore_index?: integer}
---@return lumus.Tensor
---@return lumus.Tensor
---@return lumus.Tensor
function Tensor:cross_entropy_forward(target, opts) end

---"[lumus.Tensor float32 of size 2x3]".
---@return string
function Tensor:describe() end

---The same elements outside the autograd graph.
---@return lumus.Tensor
function Tensor:detach() end

---The number of dimensions.
---@return integer
function Tensor:dim() end

---a / b (broadcasting).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:div(b, opts) end

---The dtype's name.
---@return lumus.dtype
function Tensor:dtype() end

---Rows of weight [V, D] for int32 1-based ids: [...] -> [..., D].
---@param weight lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:embedding(weight, opts) end

---a == b, a bool tensor.
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:eq(b, opts) end

---erf(t).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:erf(opts) end

---e^t.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:exp(opts) end

---A read-only view broadcasting size-1 dimensions (-1 keeps a size).
---@param shape integer[]
---@return lumus.Tensor
function Tensor:expand(shape) end

---Fills t in place; returns t.
---@param value lumus.Scalar
---@return lumus.Tensor
function Tensor:fill(value) end

---t:to("float32").
---@return lumus.Tensor
function Tensor:float() end

---Releases the tensor's storage handle now (twice is fine).
function Tensor:free() end

---torch.gather with int32 1-based ids.
---@param dim integer
---@param ids lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:gather(dim, ids, opts) end

---a >= b, a bool tensor.
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:ge(b, opts) end

---GELU (erf form by default).
---@param opts? {approximate?: "none"|"tanh", out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:gelu(opts) end

---GELU, erf form.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:gelu_erf(opts) end

---GELU, tanh form.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:gelu_tanh(opts) end

---The accumulated gradient, or nil.
---@return lumus.Tensor?
function Tensor:grad() end

---a > b, a bool tensor.
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:gt(b, opts) end

---t:to("float16").
---@return lumus.Tensor
function Tensor:half() end

---t plus src's slice j added into slice ids[j].
---@param dim integer
---@param ids lumus.Tensor
---@param src lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:index_add(dim, ids, src, opts) end

---x's slices ids[1], ids[2], ... along dim (int32 1-based ids).
---@param dim integer
---@param ids lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:index_select(dim, ids, opts) end

---t:to("int32").
---@return lumus.Tensor
function Tensor:int() end

---Whether the elements are dense in row-major order.
---@return boolean
function Tensor:is_contiguous() end

---Whether free() was called.
---@return boolean
function Tensor:is_freed() end

---The one element's value.
---@return number|boolean
function Tensor:item() end

---LayerNorm backward: dx, and dweight, dbias when weight is given.
---@param x lumus.Tensor
---@param mean lumus.Tensor
---@param invstd lumus.Tensor
---@param weight? lumus.Tensor
---@param opts? {out?: lumus.Tensor, dweight?: lumus.Tensor, dbias?: lumus.Tensor}
---@return lumus.Tensor
---@return lumus.Tensor?
---@return lumus.Tensor?
function Tensor:layer_norm_backward(x, mean, invstd, weight, opts) end

---LayerNorm over the last dimension: y, mean, invstd.
---@param weight? lumus.Tensor
---@param bias? lumus.Tensor
---@param eps? number
---@param opts? {out?: lumus.Tensor, mean?: lumus.Tensor, invstd?: lumus.Tensor}
---@return lumus.Tensor
---@return lumus.Tensor
---@return lumus.Tensor
function Tensor:layer_norm_forward(weight, bias, eps, opts) end

---a <= b, a bool tensor.
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:le(b, opts) end

---x W^T + b (weight [out, in]).
---@param weight lumus.Tensor
---@param bias? lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:linear(weight, bias, opts) end

---Natural log.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:log(opts) end

---Log-softmax over dim (default the last).
---@param opts? lumus.DimOpts
---@return lumus.Tensor
function Tensor:log_softmax(opts) end

---a < b, a bool tensor.
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:lt(b, opts) end

---Matrix product as torch.matmul (batches broadcast).
---@param b lumus.Tensor
---@param opts? {transpose_a?: boolean, transpose_b?: boolean, out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:matmul(b, opts) end

---Max; with dim also the int32 1-based indices.
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
---@return lumus.Tensor?
function Tensor:max(opts) end

---Elementwise max (NaN if either is NaN).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:maximum(b, opts) end

---Mean over dim, or over every element.
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function Tensor:mean(opts) end

---Min; with dim also the int32 1-based indices.
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
---@return lumus.Tensor?
function Tensor:min(opts) end

---Elementwise min (NaN if either is NaN).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:minimum(b, opts) end

---a * b (broadcasting).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:mul(b, opts) end

---int32 1-based categories drawn from rows of weights.
---@param n integer
---@param opts? {replacement?: boolean, out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:multinomial(n, opts) end

---A view of length elements from start (1-based) along dim.
---@param dim integer
---@param start integer
---@param length integer
---@return lumus.Tensor
function Tensor:narrow(dim, start, length) end

---a ~= b, a bool tensor.
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:ne(b, opts) end

----t.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:neg(opts) end

---Fills t in place with normal(mean, std); returns t.
---@param mean? number
---@param std? number
---@return lumus.Tensor
function Tensor:normal_(mean, std) end

---The number of elements.
---@return integer
function Tensor:numel() end

---A view with the dimensions reordered.
---@param dims integer[]
---@return lumus.Tensor
function Tensor:permute(dims) end

---a ^ b (broadcasting).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:pow(b, opts) end

---max(t, 0); NaN stays NaN.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:relu(opts) end

---With flag: marks a float32 leaf and returns it; without: whether it requires grad.
---@overload fun(self: lumus.Tensor): boolean
---@param flag boolean
---@return lumus.Tensor
function Tensor:requires_grad(flag) end

---A view when the strides allow, else a copy ({-1, n} infers a size).
---@param shape integer[]
---@return lumus.Tensor
function Tensor:reshape(shape) end

---x / sqrt(mean(x^2) + eps) * weight over the last dimension.
---@param weight? lumus.Tensor
---@param opts? {eps?: number, out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:rms_norm(weight, opts) end

---Rotary position embedding of [..., T, hd].
---@param opts? {base?: number, offset?: integer, interleaved?: boolean, out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:rope(opts) end

---1 / sqrt(t).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:rsqrt(opts) end

---int32 [N] 1-based ids drawn on the device.
---@param opts? {greedy?: boolean, temperature?: number, top_k?: integer, top_p?: number}
---@return lumus.Tensor
function Tensor:sample(opts) end

---t * s.
---@param s number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:scale(s, opts) end

---Fused attention softmax(q k^T scale + mask) v.
---@param k lumus.Tensor
---@param v lumus.Tensor
---@param opts? {causal?: boolean, mask?: lumus.Tensor, scale?: number, out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:scaled_dot_product_attention(k, v, opts) end

---torch.scatter_add with int32 1-based ids.
---@param dim integer
---@param ids lumus.Tensor
---@param src lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:scatter_add(dim, ids, src, opts) end

---A view of index (1-based) along dim, which it drops.
---@param dim integer
---@param index integer
---@return lumus.Tensor
function Tensor:select(dim, index) end

---The sizes of every dimension.
---@return integer[]
function Tensor:shape() end

---1 / (1 + e^-t).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:sigmoid(opts) end

---t * sigmoid(t).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:silu(opts) end

---Running sums along dim.
---@param opts? {dim?: integer}
---@return lumus.Tensor
function Tensor:cumsum(opts) end

---t repeated reps[i] times along dim i.
---@param reps integer[]
---@return lumus.Tensor
function Tensor:tile(reps) end

---a[i] b[j] of two 1-D tensors.
---@param b lumus.Tensor
---@return lumus.Tensor
function Tensor:outer(b) end

---x, or x * negative_slope below 0.
---@param opts? {negative_slope?: number}
---@return lumus.Tensor
function Tensor:leaky_relu(opts) end

---x above 0, else alpha (e^x - 1).
---@param opts? {alpha?: number}
---@return lumus.Tensor
function Tensor:elu(opts) end

---log(1 + e^(beta x)) / beta (x past threshold).
---@param opts? {beta?: number, threshold?: number}
---@return lumus.Tensor
function Tensor:softplus(opts) end

---x clamped to [min_val, max_val] (-1, 1).
---@param opts? {min_val?: number, max_val?: number}
---@return lumus.Tensor
function Tensor:hardtanh(opts) end

---min(max(x, 0), 6).
---@return lumus.Tensor
function Tensor:relu6() end

---relu6(x + 3) / 6.
---@return lumus.Tensor
function Tensor:hardsigmoid() end

---x relu6(x + 3) / 6.
---@return lumus.Tensor
function Tensor:hardswish() end

---x tanh(softplus(x)).
---@return lumus.Tensor
function Tensor:mish() end

---log(sigmoid(x)) = -softplus(-x), no overflow.
---@return lumus.Tensor
function Tensor:logsigmoid() end

---true where NaN.
---@return lumus.Tensor
function Tensor:isnan() end

---true where +-inf.
---@return lumus.Tensor
function Tensor:isinf() end

---true where neither NaN nor +-inf.
---@return lumus.Tensor
function Tensor:isfinite() end

---NaN, +inf, -inf replaced (0 and the dtype's finite extremes by default).
---@param opts? {nan?: number, posinf?: number, neginf?: number}
---@return lumus.Tensor
function Tensor:nan_to_num(opts) end

---log(sum(exp(x))) over dim (everything without), shifted by the max.
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function Tensor:logsumexp(opts) end

---The max values over dim (everything without).
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function Tensor:amax(opts) end

---The min values over dim (everything without).
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function Tensor:amin(opts) end

---x / max(||x||_p, eps) along dim (-1).
---@param opts? {p?: number, dim?: integer, eps?: number}
---@return lumus.Tensor
function Tensor:normalize(opts) end

---int32 rows of num_classes zeros with a 1 at each 1-based id.
---@param num_classes integer
---@return lumus.Tensor
function Tensor:one_hot(num_classes) end

---Cosine similarity with b along dim (-1).
---@param b lumus.Tensor
---@param opts? {dim?: integer, eps?: number}
---@return lumus.Tensor
function Tensor:cosine_similarity(b, opts) end

---log(e^self + e^b).
---@param b lumus.Tensor|number
---@return lumus.Tensor
function Tensor:logaddexp(b) end

---beta self + alpha (m1 m2).
---@param m1 lumus.Tensor
---@param m2 lumus.Tensor
---@param opts? {beta?: number, alpha?: number}
---@return lumus.Tensor
function Tensor:addmm(m1, m2, opts) end

---A copy with the order along dims reversed.
---@param dims integer|integer[]
---@return lumus.Tensor
function Tensor:flip(dims) end

---A copy shifted cyclically along dims (flattened without).
---@param shifts integer|integer[]
---@param dims? integer|integer[]
---@return lumus.Tensor
function Tensor:roll(shifts, dims) end

---Values and int32 1-based indices along dim.
---@param opts? {dim?: integer, descending?: boolean}
---@return lumus.Tensor
---@return lumus.Tensor
function Tensor:sort(opts) end

---The int32 1-based indices that sort along dim.
---@param opts? {dim?: integer, descending?: boolean}
---@return lumus.Tensor
function Tensor:argsort(opts) end

---Zeroes each element with probability p, scales the rest by 1/(1-p).
---@param opts? {p?: number, training?: boolean}
---@return lumus.Tensor
function Tensor:dropout(opts) end

---e^t - 1, exact near 0.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:expm1(opts) end

---log(1 + t), exact near 0.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:log1p(opts) end

---2^t, exact at integers.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:exp2(opts) end

---log base 2 of t, exact at powers of 2.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:log2(opts) end

---log base 10 of t.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:log10(opts) end

---tan(t), within 4 ulp.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:tan(opts) end

---atan(t), within 3 ulp.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:atan(opts) end

---asin(t), within 4 ulp; NaN outside [-1, 1].
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:asin(opts) end

---acos(t), within 4 ulp; NaN outside [-1, 1].
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:acos(opts) end

---atan2(self, b): the angle of the point (b, self).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:atan2(b, opts) end

---sinh(t), within 3 ulp (finite up to the float32 end).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:sinh(opts) end

---cosh(t), within 3 ulp.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:cosh(opts) end

---asinh(t), within 3 ulp.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:asinh(opts) end

---acosh(t), within 3 ulp; NaN below 1.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:acosh(opts) end

---atanh(t), within 3 ulp; +-inf at +-1, NaN beyond.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:atanh(opts) end

---sin(t), within 2 ulp.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:sin(opts) end

---cos(t), within 2 ulp.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:cos(opts) end

---A new tensor with t's values (lumus.copy).
---@return lumus.Tensor
function Tensor:clone() end

---The transpose of a 2-D tensor (a view); a 1-D tensor itself.
---@return lumus.Tensor
function Tensor:t() end

---Dimensions start_dim..end_dim merged (a view when the strides allow).
---@param start_dim? integer
---@param end_dim? integer
---@return lumus.Tensor
function Tensor:flatten(start_dim, end_dim) end

---value where mask (bool, broadcast to t), else t.
---@param mask lumus.Tensor
---@param value number
---@return lumus.Tensor
function Tensor:masked_fill(mask, value) end

---sqrt(var(x)).
---@param opts? {dim?: integer, keepdim?: boolean, correction?: number, out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:std(opts) end

---The p-norm: p = 2 (default), 1 or math.huge.
---@param opts? {p?: number, dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function Tensor:norm(opts) end

---a + w (b - a).
---@param b lumus.Tensor|number
---@param w lumus.Tensor|number
---@return lumus.Tensor
function Tensor:lerp(b, w) end

---The lower triangle of the last two dims from diagonal k (zeros elsewhere).
---@param k? integer
---@return lumus.Tensor
function Tensor:tril(k) end

---The upper triangle of the last two dims from diagonal k (zeros elsewhere).
---@param k? integer
---@return lumus.Tensor
function Tensor:triu(k) end

---bool: some element nonzero (over dim, or every element).
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function Tensor:any(opts) end

---bool: every element nonzero (over dim, or every element).
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.Tensor
function Tensor:all(opts) end

---[B, M, K] x [B, K, N] -> [B, M, N].
---@param b lumus.Tensor
---@return lumus.Tensor
function Tensor:bmm(b) end

---t * t.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:square(opts) end

---1 / t (1 / -0 = -inf).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:reciprocal(opts) end

---floor(t), exact.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:floor(opts) end

---ceil(t), exact.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:ceil(opts) end

---t to the nearest integer, halves to even.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:round(opts) end

---t rounded toward zero, exact.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:trunc(opts) end

----1, 0 or 1 (sign(NaN) = 0).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:sign(opts) end

---The size of dimension dim (negative: from the end); without dim, the shape.
---@overload fun(self: lumus.Tensor): integer[]
---@param dim integer
---@return integer
function Tensor:size(dim) end

---Softmax over dim (default the last).
---@param opts? lumus.DimOpts
---@return lumus.Tensor
function Tensor:softmax(opts) end

---Views of size elements along dim (the last smaller), or of the sizes listed.
---@param size integer|integer[]
---@param dim? integer
---@return lumus.Tensor[]
function Tensor:split(size, dim) end

---Square root.
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:sqrt(opts) end

---A view without size-1 dimensions (or only dim).
---@param dim? integer
---@return lumus.Tensor
function Tensor:squeeze(dim) end

---The stride of dimension dim in elements; without dim, every stride.
---@overload fun(self: lumus.Tensor): integer[]
---@param dim integer
---@return integer
function Tensor:stride(dim) end

---a - b (broadcasting).
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:sub(b, opts) end

---Sum over dim, or over every element.
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function Tensor:sum(opts) end

---tanh(t).
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:tanh(opts) end

---Converted on the device (t itself when it has that dtype).
---@param dtype lumus.dtype
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:to(dtype, opts) end

---The elements' bytes in the dtype's layout.
---@param first? integer
---@param count? integer
---@return string
function Tensor:to_bytes(first, count) end

---The elements as nested Lua tables.
---@return table
function Tensor:to_table() end

---The k largest (or smallest) values and their int32 1-based indices.
---@param k integer
---@param opts? {dim?: integer, largest?: boolean, sorted?: boolean, out?: lumus.Tensor, indices?: lumus.Tensor}
---@return lumus.Tensor
---@return lumus.Tensor
function Tensor:topk(k, opts) end

---A view with two dimensions swapped.
---@param dim1 integer
---@param dim2 integer
---@return lumus.Tensor
function Tensor:transpose(dim1, dim2) end

---Fills t in place with uniform [from, to); returns t.
---@param from? number
---@param to? number
---@return lumus.Tensor
function Tensor:uniform_(from, to) end

---A view with a size-1 dimension added at dim.
---@param dim integer
---@return lumus.Tensor
function Tensor:unsqueeze(dim) end

---Variance (correction = 1 by default).
---@param opts? lumus.ReduceOpts
---@return lumus.Tensor
function Tensor:var(opts) end

---A view of another shape; raises when the strides do not allow it.
---@param shape integer[]
---@return lumus.Tensor
function Tensor:view(shape) end

---a where mask (bool), else b.
---@param a lumus.Tensor|number
---@param b lumus.Tensor|number
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:where(a, b, opts) end

---Host bytes into elements first.. of a contiguous tensor, in place; returns it.
---@param bytes string
---@param first? integer
---@return lumus.Tensor
function Tensor:write_bytes(bytes, first) end

---Drops the gradient.
function Tensor:zero_grad() end

---grad times gelu's derivative at x (the backward of lumus.gelu), in one kernel.
---@param grad lumus.Tensor
---@param x lumus.Tensor
---@param opts? {approximate?: "none"|"tanh", out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.gelu_backward(grad, x, opts) end

---torch.index_copy: t with src's slice j along dim written over slice ids[j] (int32 1-based ids).
---@param t lumus.Tensor
---@param dim integer
---@param ids lumus.Tensor
---@param src lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function lumus.index_copy(t, dim, ids, src, opts) end

---act(LayerNorm(x) W^T + b): LayerNorm over the last dim fused into the linear (one dispatch where it fits).
---@param x lumus.Tensor
---@param ln_weight lumus.Tensor
---@param ln_bias lumus.Tensor
---@param weight lumus.Tensor
---@param bias? lumus.Tensor
---@param opts? {eps?: number, activation?: "none"|"relu"|"gelu"|"gelu_tanh"|"silu"|"tanh"|"sigmoid", out?: lumus.Tensor}
---@return lumus.Tensor
function lumus.layer_norm_linear(x, ln_weight, ln_bias, weight, bias, opts) end

---grad times gelu's derivative at x (lumus.gelu_backward).
---@param x lumus.Tensor
---@param opts? {approximate?: "none"|"tanh", out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:gelu_backward(x, opts) end

---torch.index_copy (lumus.index_copy).
---@param dim integer
---@param ids lumus.Tensor
---@param src lumus.Tensor
---@param opts? lumus.OutOpts
---@return lumus.Tensor
function Tensor:index_copy(dim, ids, src, opts) end

---act(LayerNorm(self) W^T + b) (lumus.layer_norm_linear).
---@param ln_weight lumus.Tensor
---@param ln_bias lumus.Tensor
---@param weight lumus.Tensor
---@param bias? lumus.Tensor
---@param opts? {eps?: number, activation?: string, out?: lumus.Tensor}
---@return lumus.Tensor
function Tensor:layer_norm_linear(ln_weight, ln_bias, weight, bias, opts) end

return lumus
