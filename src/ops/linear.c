/* linear: y = act(x W^T + b) with a torch-style weight [out_features, in_features], as one
 * dispatch reading W transposed, adding b and applying the activation in its store: the
 * small-model kernel (linear_small.c) where it is chosen, else matmul's kernels (the
 * small-M path fuses the activation; the tiled ones are followed by the elementwise
 * activation in place). */
#include "ops.h"
#include "elementwise.h"
#include <lauxlib.h>
#include <string.h>

/* The elementwise op of each activation (LM_ACT_* order). */
static const lm_ew_op ACT_EW[] = { 0, LM_EW_RELU, LM_EW_GELU_ERF, LM_EW_GELU_TANH, LM_EW_SILU, LM_EW_TANH, LM_EW_SIGMOID };

void lm_record_linear(lua_State *L, const lm_matmul_args *args, uint32_t act, const char *op) {
    lm_context *ctx = args->a->storage->ctx;
    lm_matmul_args g = *args;
    if (lm_linear_small_problem(ctx, &g) == NULL && lm_linear_small_wanted(ctx, &g)) {
        g.act = act;
        lm_record_linear_small(L, &g, NULL, op);
    } else if (act && ctx->linear_path != 1 && ctx->mm_path == 0 && !ctx->mm_tile[0] && g.m >= 1 &&
               g.m <= LM_GEMV_MAX_M && lm_gemv_problem(ctx, &g) == NULL) {
        g.act = act;   /* what lm_record_matmul runs for these rows, with the activation */
        lm_record_gemv(L, &g, op, ctx->mm_split);
    } else {
        g.act = 0;
        lm_record_matmul(L, &g, op);
        if (act)
            lm_record_ew(L, &(lm_ew_call){
                .name = op, .op = ACT_EW[act], .reversed = ACT_EW[act], .dtype = g.out->dtype,
                .t = { g.out }, .out = g.out,
            });
    }
}

/* lumus.linear(x, weight [, bias] [, {out=, activation=}]) */
int lm_op_linear(lua_State *L) {
    lm_contiguous_inputs(L, 1, 3);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_tensor *w = lm_check_tensor(L, 2);
    lm_tensor *bias = lm_opt_tensor(L, 3);
    static const char *const known[] = { "out", "activation", NULL };
    lm_check_options(L, 4, known);
    uint32_t act = lm_check_activation(L, 4);
    lm_check_matmul_dtypes(L, x, 1, "x", w, 2, "weight");
    if (bias && bias->dtype != x->dtype)
        lm_argerror(L, 3, "dtypes %s (x) and %s (bias) differ (convert with :to())", lm_dtype_name(x->dtype),
                    lm_dtype_name(bias->dtype));
    int64_t in = x->shape[x->ndim - 1];
    if (w->ndim != 2 || w->shape[1] != in) {
        char xs[256], ws[256];
        lm_shape_string(x->shape, x->ndim, xs, sizeof xs);
        lm_shape_string(w->shape, w->ndim, ws, sizeof ws);
        lm_argerror(L, 2, "weight must have shape [out_features, %I] (in_features = %I, the last dimension of x, shape %s), got %s",
                    (LUAI_UACINT)in, (LUAI_UACINT)in, xs, ws);
    }
    int64_t out_f = w->shape[0];
    if (bias && !(bias->ndim == 1 && bias->shape[0] == out_f)) {
        char bs[256];
        lm_shape_string(bias->shape, bias->ndim, bs, sizeof bs);
        lm_argerror(L, 3, "bias must have shape [%I] (out_features, the first dimension of weight), got %s",
                    (LUAI_UACINT)out_f, bs);
    }
    int64_t rows = x->numel / in;
    if (rows > 0x7fffffffLL || in > 0x7fffffffLL || out_f > 0x7fffffffLL)
        lm_argerror(L, 1, "too large (rows, in_features and out_features at most 2^31-1)");
    int64_t shape[LM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = out_f;
    lm_context *ctx = x->storage->ctx;
    if (w->storage->ctx != ctx || (bias && bias->storage->ctx != ctx))
        luaL_error(L, "linear: tensors belong to different devices");
    lua_settop(L, 4);
    lm_operands in_ops = { { x, w, bias }, { "x", "weight", "bias" } };
    lm_tensor *out = x->dtype == LM_FLOAT32 ? lm_push_out(L, 4, ctx, x->ndim, shape, &in_ops, 0)
                                            : lm_push_out_dtype(L, 4, ctx, x->dtype, x->ndim, shape, &in_ops);
    x = lm_check_tensor(L, 1);   /* a finalizer may have freed an input meanwhile */
    w = lm_check_tensor(L, 2);
    bias = lm_opt_tensor(L, 3);
    lm_matmul_args g = {
        .a = x, .b = w, .bias = bias, .out = out,
        .m = (uint32_t)rows, .n = (uint32_t)out_f, .k = (uint32_t)in, .batch = 1, .trans_b = 1,
    };
    lm_record_linear(L, &g, act, "linear");
    return 1;
}
