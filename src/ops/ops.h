/* Kernels: argument checks, variant choice and dispatch, one op per file. */
#ifndef LUMUS_OPS_H
#define LUMUS_OPS_H

#include <lua.h>
#include <lauxlib.h>
#include "../tensor.h"

#define LM_LAUNCH_TENSORS 6
_Static_assert(2 * LM_LAUNCH_TENSORS <= LM_STREAM_USES, "a dispatch's reads and writes must fit the stream's use list");

/* One dispatch of an op: the shader variant and its specialization constants, the push
 * constants, the grid, and the tensors it reads and writes, from which the stream decides
 * on barriers (NULL entries, e.g. absent optional operands, are skipped). */
typedef struct lm_launch {
    const char *op;                 /* names the op in device errors */
    int any_dtype;                  /* the op checked its tensors' dtypes itself; otherwise
                                     * lm_record_dispatch refuses any that is not float32 */
    lm_shader_id shader;
    uint32_t spec[LM_MAX_SPEC];
    int full_subgroups;
    int stateful;                   /* its push constants carry state that advances with every
                                     * call (a random generator's offset): not capturable */
    const void *push;
    uint32_t push_bytes;
    uint32_t groups_x, groups_y;    /* groups_y 0 means 1 */
    lm_tensor *reads[LM_LAUNCH_TENSORS];
    lm_tensor *writes[LM_LAUNCH_TENSORS];
} lm_launch;

/* Records the dispatch into the stream (dispatch.c). */
void lm_record_dispatch(lua_State *L, lm_context *ctx, const lm_launch *d);

/* Records t[:] = v into the stream. */
void lm_record_fill(lua_State *L, lm_tensor *t, float v);
/* Records dst[:] = src[:] (same element count) into the stream. */
void lm_record_copy(lua_State *L, lm_tensor *src, lm_tensor *dst);

/* Records dst = src over dst's shape, any strides on either side (src of the same shape,
 * stride 0 where it broadcasts), and t = v over a strided t (strided.c). */
void lm_record_strided_copy(lua_State *L, lm_tensor *src, lm_tensor *dst);
void lm_record_strided_fill(lua_State *L, lm_tensor *t, float v);

/* dtypes (copy.c, fill.c, strided.c, convert.c; convert.c calls no copy.c function, so
 * copy.c may call it). Raises "<op>: this device lacks
 * 8/16-bit storage (needed for <dtype> tensors here)" without ctx->narrow_storage. */
void lm_require_narrow_storage(lua_State *L, lm_context *ctx, const char *op, lm_dtype d);
/* t = the element (t's dtype, little-endian bytes), any writable view. */
void lm_record_fill_element(lua_State *L, lm_tensor *t, const void *elem);
void lm_record_strided_fill_element(lua_State *L, lm_tensor *t, const void *elem);
/* dst = src of the same dtype and shape, any strides (the vec4 kernel when both plain). */
void lm_record_any_copy(lua_State *L, lm_tensor *src, lm_tensor *dst);
/* src as a view of dst's shape (stride 0 where it broadcasts, as copy); 0 when it does
 * not fit (strided.c). */
int lm_broadcast_view(const lm_tensor *src, const lm_tensor *dst, lm_tensor *view);
/* dst = src converted to dst's dtype, both plain with the same element count. */
void lm_record_convert(lua_State *L, lm_tensor *src, lm_tensor *dst);
/* The tensor at slot dst_idx (any writable view) = the one at src_idx (its shape, or
 * broadcasting to it) converted, through contiguous temporaries for strided sides;
 * checks both again after allocating. The caller has checked shapes and overlap. */
void lm_convert_into(lua_State *L, int dst_idx, int src_idx);
int lm_op_to(lua_State *L);            /* lumus.to(t, dtype [, {out=}]) */
/* t:float(), t:half(), t:bfloat16(), t:int(), t:bool() (methods only), NULL-terminated. */
extern const luaL_Reg lm_convert_methods[];
/* Replaces each live tensor among arguments first..last that is not plain (tensor.h:
 * contiguous and aligned, what the kernels read) by a contiguous copy: the ops that do
 * not read strides call it first (every op but copy and fill). */
void lm_contiguous_inputs(lua_State *L, int first, int last);
int lm_op_contiguous(lua_State *L);    /* t:contiguous() */

int lm_op_fill(lua_State *L);          /* lumus.fill(t, v) */
int lm_op_zeros(lua_State *L);         /* lumus.zeros(shape [, {dtype=}]) */
int lm_op_ones(lua_State *L);          /* lumus.ones(shape [, {dtype=}]) */
int lm_op_full(lua_State *L);          /* lumus.full(shape, v [, {dtype=}]) */
int lm_op_copy(lua_State *L);          /* lumus.copy(src [, {out=}]), lumus.copy(dst, src) */
int lm_op_layer_norm_forward(lua_State *L);
int lm_op_layer_norm_config(lua_State *L);   /* tune.layer_norm */
int lm_op_layer_norm_backward(lua_State *L);
int lm_op_layer_norm_backward_config(lua_State *L);   /* tune.layer_norm_backward */
int lm_op_version(lua_State *L);      /* t:_version(): writes recorded into t's storage */
int lm_op_matmul(lua_State *L);        /* lumus.matmul(a, b [, {out=, transpose_a=, transpose_b=}]) */
int lm_op_linear(lua_State *L);        /* lumus.linear(x, weight [, bias] [, {out=}]) */
int lm_op_matmul_config(lua_State *L); /* tune.matmul */

/* Records out = a b (+ bias) for `batch` products of an m x k and a k x n matrix (a read
 * as k x m when trans_a, b as n x k when trans_b); rows of a and b as stored are lda and
 * ldb floats apart (0: packed). Batch z = zo * batch_inner + zi (batch_inner 0 means 1)
 * starts a at zo * stride_a + zi * stride_a2 floats (b likewise) and out at
 * z * stride_out; a stride 0 repeats an operand over batches. */
typedef struct lm_matmul_args {
    lm_tensor *a, *b, *bias, *out;
    uint32_t m, n, k, batch;
    uint64_t stride_a, stride_b, stride_out;
    int trans_b, trans_a;
    uint32_t batch_inner, lda, ldb;
    uint64_t stride_a2, stride_b2;
    int bias_scalar;                /* small-M path only: bias is one element added to every column */
    uint32_t act;                   /* small-M and small-model paths only: LM_ACT_* applied on store */
} lm_matmul_args;
void lm_record_matmul(lua_State *L, const lm_matmul_args *args, const char *op);
/* The small-M path (gemv.c): NULL when it can run the product, else why not; records it
 * (split: K slices to force, 0 = chosen from the shape). Elements of g's dtype. */
#define LM_GEMV_MAX_M 16      /* rows per block (each block reads b once) */
#define LM_GEMV_MAX_ROWS 64   /* rows the path takes at all (blocks of LM_GEMV_MAX_M) */
/* a and b (arguments arg_a, arg_b) must be float32, float16 or bfloat16, the same one; the
 * 16-bit ones need narrow storage. */
void lm_check_matmul_dtypes(lua_State *L, const lm_tensor *a, int arg_a, const char *name_a,
                            const lm_tensor *b, int arg_b, const char *name_b);
const char *lm_gemv_problem(const lm_context *ctx, const lm_matmul_args *g);
void lm_record_gemv(lua_State *L, const lm_matmul_args *g, const char *op, uint32_t split);

/* Activations fused into linear's store (shaders/common/activation.glsl's codes). */
enum { LM_ACT_NONE, LM_ACT_RELU, LM_ACT_GELU, LM_ACT_GELU_TANH, LM_ACT_SILU, LM_ACT_TANH, LM_ACT_SIGMOID };
/* The small-model path of linear (linear_small.c, shaders/linear_small.comp): y =
 * act(x W^T + b) for a product g (trans_b, one batch); with ln (non-NULL), x normalized
 * over K first (LayerNorm with weight/bias ln->w, ln->b, either NULL, and ln->eps). */
typedef struct lm_ln_args { lm_tensor *w, *b; float eps; } lm_ln_args;
const char *lm_linear_small_problem(const lm_context *ctx, const lm_matmul_args *g);
int lm_linear_small_wanted(const lm_context *ctx, const lm_matmul_args *g);
void lm_record_linear_small(lua_State *L, const lm_matmul_args *g, const lm_ln_args *ln, const char *op);
/* opts.activation at argument argn: LM_ACT_NONE when absent, else the code; raises
 * naming the known activations. */
uint32_t lm_check_activation(lua_State *L, int argn);
/* Records linear's product g (trans_b) with the activation act on the kernel linear
 * chooses: the small-model kernel, the small-M path, or matmul's followed by the
 * elementwise activation in place (linear_small.c). */
void lm_record_linear(lua_State *L, const lm_matmul_args *g, uint32_t act, const char *op);
int lm_op_layer_norm_linear(lua_State *L);   /* lumus.layer_norm_linear (linear_small.c) */
int lm_op_linear_config(lua_State *L);       /* tune.linear (linear_small.c) */

/* Elementwise (binary.c, unary.c) and row ops (softmax.c, sum.c); README "Ops". */
int lm_op_add(lua_State *L); int lm_op_sub(lua_State *L); int lm_op_mul(lua_State *L);
int lm_op_div(lua_State *L); int lm_op_scale(lua_State *L);
int lm_op_pow(lua_State *L); int lm_op_maximum(lua_State *L); int lm_op_minimum(lua_State *L);
int lm_op_atan2(lua_State *L);
int lm_op_eq(lua_State *L); int lm_op_ne(lua_State *L); int lm_op_lt(lua_State *L);   /* compare.c */
int lm_op_le(lua_State *L); int lm_op_gt(lua_State *L); int lm_op_ge(lua_State *L);
int lm_op_where(lua_State *L);         /* lumus.where(mask, a, b [, opts]) */
/* The unary elementwise ops (unary.c's table), NULL-terminated. */
extern const luaL_Reg lm_unary_ops[];
int lm_op_softmax(lua_State *L); int lm_op_sum(lua_State *L); int lm_op_mean(lua_State *L);
/* Reductions over any dimension (reduce.c), log_softmax (softmax.c), topk (topk.c). */
int lm_op_log_softmax(lua_State *L); int lm_op_var(lua_State *L);
int lm_op_max(lua_State *L); int lm_op_min(lua_State *L);
int lm_op_argmax(lua_State *L); int lm_op_argmin(lua_State *L); int lm_op_topk(lua_State *L);
int lm_op_row_config(lua_State *L);
int lm_op_softmax_cols_config(lua_State *L);   /* tune.softmax_cols */
/* ctx->softmax_cols_form */
enum { LM_SOFTMAX_COLS_AUTO, LM_SOFTMAX_COLS_STREAM, LM_SOFTMAX_COLS_HELD };
/* ctx->softmax_long_rows */
enum { LM_SOFTMAX_LONG_ROWS_AUTO, LM_SOFTMAX_LONG_ROWS_ROW, LM_SOFTMAX_LONG_ROWS_COLS, LM_SOFTMAX_LONG_ROWS_SPLIT };
/* ctx->softmax_short_rows */
enum { LM_SOFTMAX_SHORT_ROWS_AUTO, LM_SOFTMAX_SHORT_ROWS_TILE, LM_SOFTMAX_SHORT_ROWS_ROW };
int lm_op_grid_config(lua_State *L);     /* tune.grid */   /* tune.rows */
int lm_op_transpose_config(lua_State *L);   /* tune.transpose (strided.c) */
int lm_op_reduce_config(lua_State *L);   /* tune.reduce (reduce.c) */
int lm_op_elementwise_config(lua_State *L); /* tune.elementwise (elementwise.c) */

/* The options of ops whose only option is out: {"out", NULL}; of ops with none: {NULL}. */
extern const char *const lm_out_option[];
extern const char *const lm_no_options[];

/* Hostile scripts: any allocation can run Lua code (a finalizer), which may free a tensor
 * an op has already checked or drop the last reference to an opts.out tensor. So an op
 * keeps every tensor it uses on the stack (lm_push_option pushes opts[key], read raw,
 * or nil), allocates its results, and only then checks all of them again (lm_check_tensor,
 * lm_check_out on the same slots) before recording; nothing between that last check and
 * lm_stream_op_done may allocate from Lua. */
/* The out tensor at stack slot idx (nil: NULL): live, plain (tensor.h: the kernels write
 * it through its address) and of the given shape (any shape when `shape` is NULL);
 * messages name it as `field` of argument `argn`. */
lm_tensor *lm_check_out(lua_State *L, int idx, int argn, const char *field, int ndim, const int64_t *shape);
/* Raises (naming `what` of argument argn) when t is an expanded view, whose elements
 * share memory and cannot be written. */
void lm_check_writable(lua_State *L, int argn, const lm_tensor *t, const char *what);
/* As lm_check_out, but any view that can be written (copy writes by strides). */
lm_tensor *lm_check_out_view(lua_State *L, int idx, int argn, const char *field, int ndim, const int64_t *shape);

/* An op's input tensors with the names its messages use (NULL entries skipped). */
typedef struct lm_operands {
    const lm_tensor *t[LM_LAUNCH_TENSORS];
    const char *name[LM_LAUNCH_TENSORS];
} lm_operands;

/* Pushes the result of an op: opts.out (options at argument `argn`, already checked
 * with lm_check_options) when given, checked for shape, device and for sharing memory
 * with the inputs, else a new tensor of this shape; then checks that the inputs are
 * still live. With `in_place`, out may be an input exactly (the same bytes of the same
 * buffer); any other overlap is refused. */
lm_tensor *lm_push_out(lua_State *L, int argn, lm_context *ctx, int ndim, const int64_t *shape,
                       const lm_operands *in, int in_place);

/* Indexing (index.c, cat.c, split.c; README "Indexing"): any dtype, int32 1-based ids. */
int lm_op_index_select(lua_State *L);  /* lumus.index_select(x, dim, ids [, {out=}]) */
int lm_op_embedding(lua_State *L);     /* lumus.embedding(ids, weight [, {out=}]) */
int lm_op_gather(lua_State *L);        /* lumus.gather(x, dim, ids [, {out=}]) */
int lm_op_cat(lua_State *L);           /* lumus.cat(list [, dim] [, {out=}]) */
int lm_op_stack(lua_State *L);         /* lumus.stack(list [, dim] [, {out=}]) */
int lm_op_split(lua_State *L);         /* t:split(size or sizes [, dim]) -> views */
int lm_op_chunk(lua_State *L);         /* t:chunk(n [, dim]) -> views */
/* Raises "<fname>: the result would have more than 2^40 elements" for such a shape. */
void lm_check_result_size(lua_State *L, int ndim, const int64_t *shape);
/* The 1-based dimension at argument arg of an ndim-D tensor (negative from the end), 0-based. */
int lm_index_dim(lua_State *L, int arg, int ndim);
/* One dispatch of shaders/index_elems.comp over `shape`: with dim >= 0, out (contiguous)
 * = x gathered along dim by ids (strides xs, is); with dim < 0 (no ids), out = x where is
 * holds out's strides (a strided copy of any dtype). Strides in elements. */
typedef struct lm_index_elems {
    lm_tensor *x, *ids, *out;
    int ndim, dim;
    int64_t size;                       /* x's size along dim */
    int64_t shape[LM_MAX_DIMS], xs[LM_MAX_DIMS], is[LM_MAX_DIMS];
} lm_index_elems;
void lm_record_index_elems(lua_State *L, const char *op, const lm_index_elems *g);
/* lm_push_out for a result of the given dtype (a given out must have it). */
lm_tensor *lm_push_out_dtype(lua_State *L, int argn, lm_context *ctx, lm_dtype dtype, int ndim,
                             const int64_t *shape, const lm_operands *in);

/* safetensors files (safetensors_io.c): lumus.load_safetensors, lumus.save_safetensors,
 * and the names of their protected bodies for messages (call once at registration). */
int lm_load_safetensors(lua_State *L);
int lm_save_safetensors(lua_State *L);
void lm_safetensors_register_names(lua_State *L);
/* Optimizer steps (optim.c): update param and the state tensors given in opts, in place. */
int lm_op_sgd_step_(lua_State *L);    /* lumus.sgd_step_(param, grad [, opts]) */
int lm_op_adam_step_(lua_State *L);   /* lumus.adam_step_(param, grad, opts) */
/* Deterministic scatter-adds (index_add.c) and cross entropy's fused kernels (loss.c). */
int lm_op_index_add(lua_State *L);     /* lumus.index_add(t, dim, ids, src [, {out=}]) */
int lm_op_index_copy(lua_State *L);    /* lumus.index_copy(t, dim, ids, src [, {out=}]) */
int lm_op_scatter_add(lua_State *L);   /* lumus.scatter_add(t, dim, ids, src [, {out=}]) */
int lm_op_cross_entropy_forward(lua_State *L);    /* -> loss, logsumexp, weight per row */
int lm_op_cross_entropy_backward(lua_State *L);   /* -> dlogits */

/* Transformer ops (rms_norm.c, rope.c, attention.c; README "Ops"). */
int lm_op_rms_norm(lua_State *L);      /* lumus.rms_norm(x [, weight] [, {eps=, out=}]) */
int lm_op_rope(lua_State *L);          /* lumus.rope(x [, {base=, offset=, interleaved=, out=}]) */
int lm_op_scaled_dot_product_attention(lua_State *L);   /* (q, k, v [, {causal=, mask=, scale=, out=}]) */
int lm_op_attention_config(lua_State *L);                /* tune.attention */

/* Host packing and the reference generators' integer steps (host_pack.c): core._host. */
extern const luaL_Reg lm_host_pack_functions[];

#endif
