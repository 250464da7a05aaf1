/* Kernels: argument checks, variant choice and dispatch, one op per file. */
#ifndef LUMUS_OPS_H
#define LUMUS_OPS_H

#include <lua.h>
#include "../tensor.h"

/* Records t[:] = v into the stream. */
void lm_record_fill(lua_State *L, lm_tensor *t, float v);
/* Records dst[:] = src[:] (same element count) into the stream. */
void lm_record_copy(lua_State *L, lm_tensor *src, lm_tensor *dst);

int lm_op_fill(lua_State *L);          /* lumus.fill(t, v) */
int lm_op_copy(lua_State *L);          /* lumus.copy(src [, {out=}]) */
int lm_op_layer_norm_forward(lua_State *L);
int lm_op_layer_norm_config(lua_State *L);
int lm_op_matmul(lua_State *L);        /* lumus.matmul(a, b [, {out=, bias=, transpose_b=}]) */
int lm_op_linear(lua_State *L);        /* lumus.linear(x, weight [, bias [, {out=}]]) */
int lm_op_matmul_config(lua_State *L);

/* Records out = a b (+ bias) for `batch` products of an m x k and a k x n matrix (b read
 * as n x k when trans_b); the strides (floats) step a, b and out between batches. */
typedef struct lm_matmul_args {
    lm_tensor *a, *b, *bias, *out;
    uint32_t m, n, k, batch;
    uint64_t stride_a, stride_b, stride_out;
    int trans_b;
} lm_matmul_args;
void lm_record_matmul(lua_State *L, const lm_matmul_args *args, const char *op);
/* Pushes the result of a matmul-style op: `out` (checked not to overlap the inputs; opts
 * at stack index `opts`) or a new tensor of the given shape. */
lm_tensor *lm_matmul_result(lua_State *L, int opts, lm_tensor *out, lm_context *ctx, int ndim,
                            const int64_t *shape, lm_tensor *a, const char *an, lm_tensor *b,
                            const char *bn, lm_tensor *bias);

/* Reads the optional out tensor of an op: opts.out at argument `argn`, which must have
 * the given shape; returns NULL when absent. `what` names the op for messages. */
lm_tensor *lm_opt_out(lua_State *L, int argn, const char *field, int ndim, const int64_t *shape);

#endif
