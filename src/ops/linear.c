/* linear: y = x W^T + b with a torch-style weight [out_features, in_features], as one
 * dispatch of the matmul kernel reading W transposed and adding b in its epilogue. */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

int lm_op_linear(lua_State *L) {
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_tensor *w = lm_check_tensor(L, 2);
    lm_tensor *bias = lm_opt_tensor(L, 3);
    int has_opts = !lua_isnoneornil(L, 4);
    if (has_opts && !lua_istable(L, 4)) {
        lua_pushfstring(L, "options table expected ({out=}), got %s", luaL_typename(L, 4));
        luaL_argerror(L, 4, lua_tostring(L, -1));
    }
    int64_t in = x->shape[x->ndim - 1];
    char xs[256], ws[256];
    lm_shape_string(x->shape, x->ndim, xs, sizeof xs);
    lm_shape_string(w->shape, w->ndim, ws, sizeof ws);
    if (w->ndim != 2 || w->shape[1] != in) {
        lua_pushfstring(L, "weight must have shape [out_features, %I] (in_features = %I, the last dimension of x, shape %s), got %s",
                        (LUAI_UACINT)in, (LUAI_UACINT)in, xs, ws);
        luaL_argerror(L, 2, lua_tostring(L, -1));
    }
    int64_t out_f = w->shape[0];
    if (bias && !(bias->ndim == 1 && bias->shape[0] == out_f)) {
        char bs[256];
        lm_shape_string(bias->shape, bias->ndim, bs, sizeof bs);
        lua_pushfstring(L, "bias must have shape [%I] (out_features, the first dimension of weight), got %s",
                        (LUAI_UACINT)out_f, bs);
        luaL_argerror(L, 3, lua_tostring(L, -1));
    }
    int64_t rows = x->numel / in;
    if (rows > 0x7fffffffLL || in > 0x7fffffffLL || out_f > 0x7fffffffLL)
        luaL_argerror(L, 1, "too large (rows, in_features and out_features at most 2^31-1)");
    int64_t shape[LM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = out_f;
    lm_context *ctx = x->storage->ctx;
    if (w->storage->ctx != ctx || (bias && bias->storage->ctx != ctx))
        luaL_error(L, "linear: tensors belong to different devices");
    /* Reading opts.out may run a finalizer: lm_matmul_result checks everything again. */
    lm_tensor *out = has_opts ? lm_opt_out(L, 4, "out", x->ndim, shape) : NULL;
    lua_settop(L, 4);
    out = lm_matmul_result(L, 4, out, ctx, x->ndim, shape, x, "x", w, "weight", bias);
    lm_matmul_args g = {
        .a = x, .b = w, .bias = bias, .out = out,
        .m = (uint32_t)rows, .n = (uint32_t)out_f, .k = (uint32_t)in, .batch = 1, .trans_b = 1,
    };
    lm_record_matmul(L, &g, "linear");
    return 1;
}
