/* lumus.softmax(x [, {out =}]): softmax over the last dimension (shaders/softmax.comp). */
#include "rows.h"
#include <lauxlib.h>

/* Vectors per thread to aim for, and the most held in registers before the rest of a row
 * streams: as layer_norm found on the H200 (4, at most 8 without spilling) and on
 * lavapipe (wider threads: each workgroup runs on one CPU thread, barriers are costly). */
#define SOFTMAX_ITEMS 4
#define SOFTMAX_ITEMS_CPU 16
#define SOFTMAX_MAX_ITEMS 8

lm_row_plan lm_plan_softmax(const lm_context *ctx, int64_t d) {
    int cpu = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    return lm_plan_rows(ctx, d, cpu ? SOFTMAX_ITEMS_CPU : SOFTMAX_ITEMS,
                        cpu ? SOFTMAX_ITEMS_CPU : SOFTMAX_MAX_ITEMS);
}

int lm_op_softmax(lua_State *L) {
    lm_tensor *x = lm_check_tensor(L, 1);
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
