---@meta lumus.reference
-- Lua Language Server definitions for lumus.reference (see meta/lumus.lua).

---@class lumus.reference
local reference = {}

---@param t any
---@return any
function reference.abs(t) end

---@param param any
---@param grad any
---@param state any
---@param opts any
---@return any
function reference.adam_step(param, grad, state, opts) end

---@param param any
---@param grad any
---@param state any
---@param opts any
---@return any
function reference.adamw_step(param, grad, state, opts) end

---@param a any
---@param b any
---@return any
function reference.add(a, b) end

---@param start any
---@param stop any
---@param step any
---@param dtype any
---@return any
function reference.arange(start, stop, step, dtype) end

---@param t any
---@param opts any
---@return any
function reference.argmax(t, opts) end

---@param t any
---@param opts any
---@return any
function reference.argmin(t, opts) end

---@param input any
---@param target any
---@param opts any
---@return any
function reference.binary_cross_entropy_with_logits(input, target, opts) end

---@param list any
---@param dim any
---@return any
function reference.cat(list, dim) end

---@param t any
---@param n any
---@param dim any
---@return any
function reference.chunk(t, n, dim) end

---@param t any
---@param lo any
---@param hi any
---@return any
function reference.clamp(t, lo, hi) end

---@param got any
---@param want any
---@return any
function reference.compare(got, want) end

---@param logits any
---@param target any
---@param opts any
---@return any
function reference.cross_entropy(logits, target, opts) end

---@param a any
---@param b any
---@return any
function reference.div(a, b) end

---@param list any
---@param dtype any
---@return any
function reference.dtype_bytes(list, dtype) end

---@param ids any
---@param weight any
---@return any
function reference.embedding(ids, weight) end

---@param a any
---@param b any
---@return any
function reference.eq(a, b) end

---@param x any
---@return any
function reference.erf(x) end

---@param x any
---@return any
function reference.erfc(x) end

---@param t any
---@return any
function reference.exp(t) end

---@param x any
---@return any
function reference.expm1(x) end

---@param v any
---@return any
function reference.f32(v) end

---@param t any
---@return any
function reference.flatten(t) end

---@param x any
---@param dim any
---@param ids any
---@return any
function reference.gather(x, dim, ids) end

---@param a any
---@param b any
---@return any
function reference.ge(a, b) end

---@param t any
---@param approximate any
---@return any
function reference.gelu(t, approximate) end

---@param a any
---@param b any
---@return any
function reference.gt(a, b) end

---@param t any
---@param dim any
---@param ids any
---@param src any
---@return any
function reference.index_add(t, dim, ids, src) end

---@param x any
---@param dim any
---@param ids any
---@return any
function reference.index_select(x, dim, ids) end

---@param dy any
---@param x any
---@param mean any
---@param invstd any
---@param weight any
---@return any
function reference.layer_norm_backward(dy, x, mean, invstd, weight) end

---@param x any
---@param weight any
---@param bias any
---@param eps any
---@return any
function reference.layer_norm_forward(x, weight, bias, eps) end

---@param a any
---@param b any
---@return any
function reference.le(a, b) end

---@param x any
---@param weight any
---@param bias any
---@return any
function reference.linear(x, weight, bias) end

---@param t any
---@return any
function reference.log(t) end

---@param t any
---@param opts any
---@return any
function reference.log_softmax(t, opts) end

---@param a any
---@param b any
---@return any
function reference.lt(a, b) end

---@param t any
---@param f any
---@return any
function reference.map(t, f) end

---@param a any
---@param b any
---@param opts any
---@return any
function reference.matmul(a, b, opts) end

---@param t any
---@param opts any
---@return any
function reference.max(t, opts) end

---@param a any
---@param b any
---@return any
function reference.maximum(a, b) end

---@param t any
---@param opts any
---@return any
function reference.mean(t, opts) end

---@param t any
---@param opts any
---@return any
function reference.min(t, opts) end

---@param a any
---@param b any
---@return any
function reference.minimum(a, b) end

---@param input any
---@param target any
---@param opts any
---@return any
function reference.mse_loss(input, target, opts) end

---@param a any
---@param b any
---@return any
function reference.mul(a, b) end

---@param probs any
---@param n any
---@param replacement any
---@param state any
---@return any
function reference.multinomial(probs, n, replacement, state) end

---@param a any
---@param b any
---@return any
function reference.ne(a, b) end

---@param t any
---@return any
function reference.neg(t) end

---@param flat any
---@param shape any
---@return any
function reference.nest(flat, shape) end

---@param shape any
---@param state any
---@param mean any
---@param std any
---@return any
function reference.normal(shape, state, mean, std) end

---@param c any
---@param k any
---@return any
function reference.philox4x32_10(c, k) end

---@param a any
---@param b any
---@return any
function reference.pow(a, b) end

---@param shape any
---@param state any
---@param first any
---@param dtype any
---@return any
function reference.rand(shape, state, first, dtype) end

---@param shape any
---@param state any
---@param first any
---@param dtype any
---@return any
function reference.randn(shape, state, first, dtype) end

---@param shape any
---@param state any
---@return any
function reference.randn_float64(shape, state) end

---@param shape any
---@param f any
---@return any
function reference.random_table(shape, f) end

---@param t any
---@return any
function reference.relu(t) end

---@param x any
---@param weight any
---@param eps any
---@return any
function reference.rms_norm(x, weight, eps) end

---@param seed any
---@return any
function reference.rng(seed) end

---@param x any
---@param opts any
---@return any
function reference.rope(x, opts) end

---@param x any
---@return any
function reference.round_bfloat16(x) end

---@param x any
---@return any
function reference.round_float16(x) end

---@param x any
---@return any
function reference.round_float32(x) end

---@param t any
---@return any
function reference.rsqrt(t) end

---@param logits any
---@param opts any
---@return any
function reference.sample_distribution(logits, opts) end

---@param t any
---@param s any
---@return any
function reference.scale(t, s) end

---@param q any
---@param k any
---@param v any
---@param opts any
---@return any
function reference.scaled_dot_product_attention(q, k, v, opts) end

---@param t any
---@param dim any
---@param ids any
---@param src any
---@return any
function reference.scatter_add(t, dim, ids, src) end

---@param param any
---@param grad any
---@param state any
---@param opts any
---@return any
function reference.sgd_step(param, grad, state, opts) end

---@param t any
---@return any
function reference.shape(t) end

---@param t any
---@return any
function reference.sigmoid(t) end

---@param t any
---@return any
function reference.silu(t) end

---@param t any
---@param opts any
---@return any
function reference.softmax(t, opts) end

---@param t any
---@param size any
---@param dim any
---@return any
function reference.split(t, size, dim) end

---@param t any
---@return any
function reference.sqrt(t) end

---@param list any
---@param dim any
---@return any
function reference.stack(list, dim) end

---@param a any
---@param b any
---@return any
function reference.sub(a, b) end

---@param t any
---@param opts any
---@return any
function reference.sum(t, opts) end

---@param t any
---@return any
function reference.tanh(t) end

---@param v any
---@param dtype any
---@return any
function reference.to_dtype(v, dtype) end

---@param t any
---@param k any
---@param opts any
---@return any
function reference.topk(t, k, opts) end

---@param x any
---@return any
function reference.trunc_int32(x) end

---@param shape any
---@param state any
---@param a any
---@param b any
---@return any
function reference.uniform(shape, state, a, b) end

---@param t any
---@param opts any
---@return any
function reference.var(t, opts) end

---@param mask any
---@param a any
---@param b any
---@return any
function reference.where(mask, a, b) end

return reference
