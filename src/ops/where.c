/* lumus.where(mask, a, b [, opts]): a where mask is true, else b. mask is a bool tensor,
 * a and b tensors of one float dtype or numbers (two numbers give float32); all three
 * broadcast together (broadcast.h). */
#include "elementwise.h"
#include <lauxlib.h>

static lm_tensor *tensor_or_number(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TNUMBER) return NULL;
    if (!luaL_testudata(L, idx, LM_TENSOR_MT)) lm_typeerror(L, idx, "tensor or number");
    return lm_check_tensor(L, idx);
}

int lm_op_where(lua_State *L) {
    lm_tensor *m = lm_check_tensor(L, 1);
    lm_tensor *a = tensor_or_number(L, 2);
    lm_tensor *b = tensor_or_number(L, 3);
    lm_check_options(L, 4, lm_out_option);
    if (m->dtype != LM_BOOL)
        lm_argerror(L, 1, "mask must be bool, got %s (make one with a comparison such as lumus.gt)",
                    lm_dtype_name(m->dtype));
    if (a) lm_ew_check_float(L, 2, a);
    if (b) lm_ew_check_float(L, 3, b);
    if (a && b) lm_ew_check_same_dtype(L, 3, a, b);
    const lm_tensor *all[3] = { m, a, b };
    int ndim;
    int64_t shape[LM_MAX_DIMS];
    int bad = lm_broadcast_shape(3, all, &ndim, shape);
    if (bad >= 0) {
        /* Name the operand that does not fit and one it does not fit with. */
        const lm_tensor *other = m;
        if (bad == 2 && lm_broadcast_shape(2, (const lm_tensor *const[]){ m, b }, &ndim, shape) < 0) other = a;
        lm_broadcast_error(L, bad + 1, other, all[bad]);
    }
    lm_context *ctx = m->storage->ctx;
    if ((a && a->storage->ctx != ctx) || (b && b->storage->ctx != ctx))
        luaL_error(L, "where: tensors belong to different devices");
    lm_dtype dtype = a ? a->dtype : b ? b->dtype : LM_FLOAT32;
    lm_operands in = { { m, a, b }, { "mask", "a", "b" } };
    lm_tensor *out = lm_ew_push_result(L, 4, ctx, dtype, ndim, shape, &in);
    lm_ew_call c = {
        .name = "where", .op = LM_EW_WHERE, .reversed = LM_EW_WHERE, .dtype = dtype,
        .t = { m, a, b }, .out = out,
    };
    if (!a) c.scalar[1] = lm_ew_float(lua_tonumber(L, 2));
    if (!b) c.scalar[2] = lm_ew_float(lua_tonumber(L, 3));
    lm_record_ew(L, &c);
    return 1;
}
