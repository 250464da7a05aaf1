/* linear: y = act(x W^T + b) with a torch-style weight [out_features, in_features], as one
 * dispatch reading W transposed, adding b and applying the activation in its store
 * (lm_record_linear, linear_small.c, chooses the kernel). */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

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
