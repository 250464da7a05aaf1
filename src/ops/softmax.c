/* lumus.softmax(x [, {dim =, out =}]): softmax over the last dimension
 * (shaders/softmax.comp). */
#include "rows.h"

int lm_op_softmax(lua_State *L) {
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_rows_options(L, 2, x, 0);
    int64_t d, rows;
    lm_rows_of(L, x, &d, &rows);
    lm_context *ctx = x->storage->ctx;
    lm_operands in = { { x }, { "x" } };
    lm_tensor *y = lm_push_out(L, 2, ctx, x->ndim, x->shape, &in, 1);
    lm_row_plan c = lm_plan_softmax(ctx, d);
    struct { uint64_t x, y, rows; uint32_t n, d, groups_x, pad; } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y), .rows = (uint64_t)rows,
        .n = c.n, .d = (uint32_t)d,
    };
    lm_record_rows(L, "softmax", c.vec == 4 ? LM_SH_SOFTMAX_VEC4 : LM_SH_SOFTMAX_VEC1, &c, rows,
                   &pc, sizeof pc, &pc.groups_x, x, y);
    return 1;
}
