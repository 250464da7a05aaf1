---@meta lumus.reference
-- Lua Language Server definitions for lumus.reference (see meta/lumus.lua): the float64
-- ground truth of every op, in plain Lua on nested tables of numbers (ref.add(a, b) is
-- what lumus.add computes, element by element).

---A number, or nested tables of numbers (a tensor's to_table()).
---@alias lumus.reference.Nested number|table

---A SplitMix64 generator: g() and g.uniform() in [0, 1), g.normal() standard normal.
---@class lumus.reference.Rng
---@overload fun(): number
---@field uniform fun(): number
---@field normal fun(): number

---@class lumus.reference
local reference = {}

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.abs(t) end

---@param t lumus.reference.Nested
---@param opts table?
---@return lumus.reference.Nested
function reference.cumsum(t, opts) end

---@param t lumus.reference.Nested
---@param pads integer[]
---@param value number?
---@return lumus.reference.Nested
function reference.pad(t, pads, value) end

---@param t lumus.reference.Nested
---@param reps integer[]
---@return lumus.reference.Nested
function reference.tile(t, reps) end

---@param a number[]
---@param b number[]
---@return lumus.reference.Nested
function reference.outer(a, b) end

---@param t lumus.reference.Nested
---@param slope number?
---@return lumus.reference.Nested
function reference.leaky_relu(t, slope) end

---@param t lumus.reference.Nested
---@param alpha number?
---@return lumus.reference.Nested
function reference.elu(t, alpha) end

---@param t lumus.reference.Nested
---@param beta number?
---@param threshold number?
---@return lumus.reference.Nested
function reference.softplus(t, beta, threshold) end

---@param t lumus.reference.Nested
---@param lo number?
---@param hi number?
---@return lumus.reference.Nested
function reference.hardtanh(t, lo, hi) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.relu6(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.hardsigmoid(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.hardswish(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.mish(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.logsigmoid(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.isnan(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.isinf(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.isfinite(t) end

---@param t lumus.reference.Nested
---@param nan number?
---@param posinf number?
---@param neginf number?
---@return lumus.reference.Nested
function reference.nan_to_num(t, nan, posinf, neginf) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.logaddexp(a, b) end

---@param ids integer[]
---@param c integer
---@return lumus.reference.Nested
function reference.one_hot(ids, c) end

---@param t lumus.reference.Nested
---@param opts? {dim?: integer, keepdim?: boolean}
---@return lumus.reference.Nested
function reference.logsumexp(t, opts) end

---@param t lumus.reference.Nested
---@param opts? {p?: number, dim?: integer, eps?: number}
---@return lumus.reference.Nested
function reference.normalize(t, opts) end

---@param a lumus.reference.Nested
---@param b lumus.reference.Nested
---@param opts? {dim?: integer, eps?: number}
---@return lumus.reference.Nested
function reference.cosine_similarity(a, b, opts) end

---@param input lumus.reference.Nested
---@param target lumus.reference.Nested
---@param opts? {reduction?: string, weight?: lumus.reference.Nested}
---@return lumus.reference.Nested
function reference.binary_cross_entropy(input, target, opts) end

---@param input lumus.reference.Nested
---@param target lumus.reference.Nested
---@param opts? {reduction?: string, log_target?: boolean}
---@return lumus.reference.Nested
function reference.kl_div(input, target, opts) end

---@param input lumus.reference.Nested
---@param target number[]|lumus.reference.Nested
---@param opts table?
---@return lumus.reference.Nested
function reference.l1_loss(input, target, opts) end

---@param input lumus.reference.Nested
---@param target number[]|lumus.reference.Nested
---@param opts table?
---@return lumus.reference.Nested
function reference.smooth_l1_loss(input, target, opts) end

---@param input lumus.reference.Nested
---@param target number[]|lumus.reference.Nested
---@param opts table?
---@return lumus.reference.Nested
function reference.huber_loss(input, target, opts) end

---@param log_probs lumus.reference.Nested
---@param target number[]|lumus.reference.Nested
---@param opts table?
---@return lumus.reference.Nested
function reference.nll_loss(log_probs, target, opts) end

---@param t lumus.reference.Nested
---@param dims integer|integer[]
---@return lumus.reference.Nested
function reference.flip(t, dims) end

---@param t lumus.reference.Nested
---@param shifts integer|integer[]
---@param dims integer|integer[]
---@return lumus.reference.Nested
function reference.roll(t, shifts, dims) end

---@param t lumus.reference.Nested
---@param opts table?
---@return lumus.reference.Nested
function reference.sort(t, opts) end

---@param n integer
---@param m integer?
---@return lumus.reference.Nested
function reference.eye(n, m) end

---@param start number
---@param stop number
---@param steps integer
---@return lumus.reference.Nested
function reference.linspace(start, stop, steps) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.log1p(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.exp2(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.log2(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.log10(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.tan(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.atan(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.asin(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.acos(t) end

---@param y lumus.reference.Nested|number
---@param x lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.atan2(y, x) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.sinh(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.cosh(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.asinh(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.acosh(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.atanh(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.sin(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.cos(t) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.std(t, opts) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.norm(t, opts) end

---@param a lumus.reference.Nested
---@param b lumus.reference.Nested|number
---@param w lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.lerp(a, b, w) end

---@param t lumus.reference.Nested
---@param mask lumus.reference.Nested
---@param v number
---@return lumus.reference.Nested
function reference.masked_fill(t, mask, v) end

---@param t lumus.reference.Nested
---@param k? number
---@return lumus.reference.Nested
function reference.tril(t, k) end

---@param t lumus.reference.Nested
---@param k? number
---@return lumus.reference.Nested
function reference.triu(t, k) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.any(t, opts) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.all(t, opts) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.square(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.reciprocal(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.floor(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.ceil(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.round(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.trunc(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.sign(t) end

---@param param number[]
---@param grad number[]
---@param state table
---@param opts? table
---@return number[]
function reference.adam_step(param, grad, state, opts) end

---@param param number[]
---@param grad number[]
---@param state table
---@param opts? table
---@return number[]
function reference.adamw_step(param, grad, state, opts) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.add(a, b) end

---@param start number
---@param stop? number
---@param step? number
---@param dtype? lumus.dtype
---@return lumus.reference.Nested
function reference.arange(start, stop, step, dtype) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.argmax(t, opts) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.argmin(t, opts) end

---@param input lumus.reference.Nested
---@param target lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.binary_cross_entropy_with_logits(input, target, opts) end

---@param list lumus.reference.Nested[]
---@param dim? integer
---@return lumus.reference.Nested
function reference.cat(list, dim) end

---@param t lumus.reference.Nested
---@param n integer
---@param dim? integer
---@return lumus.reference.Nested[]
function reference.chunk(t, n, dim) end

---@param t lumus.reference.Nested
---@param lo? number
---@param hi? number
---@return lumus.reference.Nested
function reference.clamp(t, lo, hi) end

---@param got lumus.reference.Nested
---@param want lumus.reference.Nested
---@return {max_abs: number, max_rel: number, rel_l2: number, worst: integer}
function reference.compare(got, want) end

---@param logits lumus.reference.Nested
---@param target lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.cross_entropy(logits, target, opts) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.div(a, b) end

---@param list lumus.reference.Nested[]
---@param dtype lumus.dtype
---@return string
function reference.dtype_bytes(list, dtype) end

---@param ids lumus.reference.Nested
---@param weight lumus.reference.Nested
---@return lumus.reference.Nested
function reference.embedding(ids, weight) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.eq(a, b) end

---@param x lumus.reference.Nested
---@return number
function reference.erf(x) end

---@param x lumus.reference.Nested
---@return number
function reference.erfc(x) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.exp(t) end

---@param t lumus.reference.Nested|number
---@return lumus.reference.Nested|number
function reference.expm1(t) end

---@param v lumus.reference.Nested
---@return number
function reference.f32(v) end

---@param t lumus.reference.Nested
---@return number[]
function reference.flatten(t) end

---@param x lumus.reference.Nested
---@param dim integer
---@param ids lumus.reference.Nested
---@return lumus.reference.Nested
function reference.gather(x, dim, ids) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.ge(a, b) end

---@param t lumus.reference.Nested
---@param approximate? "none"|"tanh"
---@return lumus.reference.Nested
function reference.gelu(t, approximate) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.gt(a, b) end

---@param t lumus.reference.Nested
---@param dim integer
---@param ids lumus.reference.Nested
---@param src lumus.reference.Nested
---@return lumus.reference.Nested
function reference.index_add(t, dim, ids, src) end

---@param x lumus.reference.Nested
---@param dim integer
---@param ids lumus.reference.Nested
---@return lumus.reference.Nested
function reference.index_select(x, dim, ids) end

---@param dy lumus.reference.Nested
---@param x lumus.reference.Nested
---@param mean lumus.reference.Nested
---@param invstd lumus.reference.Nested
---@param weight? lumus.reference.Nested
---@return lumus.reference.Nested
---@return lumus.reference.Nested?
---@return lumus.reference.Nested?
function reference.layer_norm_backward(dy, x, mean, invstd, weight) end

---@param x lumus.reference.Nested
---@param weight? lumus.reference.Nested
---@param bias? lumus.reference.Nested
---@param eps? number
---@return lumus.reference.Nested
---@return lumus.reference.Nested
---@return lumus.reference.Nested
function reference.layer_norm_forward(x, weight, bias, eps) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.le(a, b) end

---@param x lumus.reference.Nested
---@param weight lumus.reference.Nested
---@param bias? lumus.reference.Nested
---@return lumus.reference.Nested
function reference.linear(x, weight, bias) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.log(t) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.log_softmax(t, opts) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.lt(a, b) end

---@param t lumus.reference.Nested
---@param f function
---@return lumus.reference.Nested
function reference.map(t, f) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@param opts? table
---@return lumus.reference.Nested
function reference.matmul(a, b, opts) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
---@return lumus.reference.Nested?
function reference.max(t, opts) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.maximum(a, b) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.mean(t, opts) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
---@return lumus.reference.Nested?
function reference.min(t, opts) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.minimum(a, b) end

---@param input lumus.reference.Nested
---@param target lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.mse_loss(input, target, opts) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.mul(a, b) end

---@param probs lumus.reference.Nested
---@param n integer
---@param replacement? boolean
---@param state table
---@return lumus.reference.Nested
function reference.multinomial(probs, n, replacement, state) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.ne(a, b) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.neg(t) end

---@param flat number[]
---@param shape integer[]
---@return lumus.reference.Nested
function reference.nest(flat, shape) end

---@param shape integer[]
---@param state table
---@param mean? lumus.reference.Nested
---@param std? number
---@return lumus.reference.Nested
function reference.normal(shape, state, mean, std) end

---@param c integer[]
---@param k lumus.reference.Nested
---@return integer[]
function reference.philox4x32_10(c, k) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.pow(a, b) end

---@param shape integer[]
---@param state table
---@param first? integer
---@param dtype? lumus.dtype
---@return lumus.reference.Nested
function reference.rand(shape, state, first, dtype) end

---@param shape integer[]
---@param state table
---@param first? integer
---@param dtype? lumus.dtype
---@return lumus.reference.Nested
function reference.randn(shape, state, first, dtype) end

---@param shape integer[]
---@param state table
---@return lumus.reference.Nested
function reference.randn_float64(shape, state) end

---@param shape integer[]
---@param f function
---@return lumus.reference.Nested
function reference.random_table(shape, f) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.relu(t) end

---@param x lumus.reference.Nested
---@param weight? lumus.reference.Nested
---@param eps? number
---@return lumus.reference.Nested
function reference.rms_norm(x, weight, eps) end

---@param seed? integer
---@return lumus.reference.Rng
function reference.rng(seed) end

---@param x lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.rope(x, opts) end

---@param x lumus.reference.Nested
---@return number
function reference.round_bfloat16(x) end

---@param x lumus.reference.Nested
---@return number
function reference.round_float16(x) end

---@param x lumus.reference.Nested
---@return number
function reference.round_float32(x) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.rsqrt(t) end

---@param logits lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.sample_distribution(logits, opts) end

---@param t lumus.reference.Nested
---@param s number
---@return lumus.reference.Nested
function reference.scale(t, s) end

---@param q lumus.reference.Nested
---@param k lumus.reference.Nested
---@param v lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.scaled_dot_product_attention(q, k, v, opts) end

---@param t lumus.reference.Nested
---@param dim integer
---@param ids lumus.reference.Nested
---@param src lumus.reference.Nested
---@return lumus.reference.Nested
function reference.scatter_add(t, dim, ids, src) end

---@param param number[]
---@param grad number[]
---@param state? table
---@param opts? table
---@return number[]
function reference.sgd_step(param, grad, state, opts) end

---@param t lumus.reference.Nested
---@return integer[]
function reference.shape(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.sigmoid(t) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.silu(t) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.softmax(t, opts) end

---@param t lumus.reference.Nested
---@param size integer|integer[]
---@param dim? integer
---@return lumus.reference.Nested[]
function reference.split(t, size, dim) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.sqrt(t) end

---@param list lumus.reference.Nested[]
---@param dim? integer
---@return lumus.reference.Nested
function reference.stack(list, dim) end

---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.sub(a, b) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.sum(t, opts) end

---@param t lumus.reference.Nested
---@return lumus.reference.Nested
function reference.tanh(t) end

---@param v lumus.reference.Nested
---@param dtype? lumus.dtype
---@return number|boolean
function reference.to_dtype(v, dtype) end

---@param t lumus.reference.Nested
---@param k lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
---@return lumus.reference.Nested
function reference.topk(t, k, opts) end

---@param x lumus.reference.Nested
---@return number
function reference.trunc_int32(x) end

---@param shape integer[]
---@param state table
---@param a? lumus.reference.Nested|number
---@param b? lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.uniform(shape, state, a, b) end

---@param t lumus.reference.Nested
---@param opts? table
---@return lumus.reference.Nested
function reference.var(t, opts) end

---@param mask lumus.reference.Nested
---@param a lumus.reference.Nested|number
---@param b lumus.reference.Nested|number
---@return lumus.reference.Nested
function reference.where(mask, a, b) end

---g times gelu's derivative at x, in float64.
---@param g lumus.reference.Nested
---@param x lumus.reference.Nested
---@param approximate? "none"|"tanh"
---@return lumus.reference.Nested
function reference.gelu_backward(g, x, approximate) end

---torch.index_copy in float64.
---@param t lumus.reference.Nested
---@param dim integer
---@param ids integer[]
---@param src lumus.reference.Nested
---@return lumus.reference.Nested
function reference.index_copy(t, dim, ids, src) end

---act(LayerNorm(x) W^T + b) in float64.
---@return lumus.reference.Nested
function reference.layer_norm_linear(...) end

---act(x W^T + b) in float64 (lumus.linear with {activation =}).
---@return lumus.reference.Nested
function reference.linear_act(...) end

return reference
