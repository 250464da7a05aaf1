/* lumus.sum(x [, {dim =, keepdim =, out =}]) and lumus.mean: over the last dimension, to
 * x's shape without it ({1} for a 1-D x), or with it as 1 (keepdim); compensated,
 * tree-shaped summation (shaders/sum.comp). */
#include "rows.h"
#include <string.h>

static int reduce(lua_State *L, const char *name, int mean) {
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *x = lm_check_tensor(L, 1);
    int keepdim = lm_rows_options(L, 2, x, 1);
    int64_t d, rows;
    lm_rows_of(L, x, &d, &rows);
    lm_context *ctx = x->storage->ctx;
    int64_t shape[LM_MAX_DIMS];
    int ndim = x->ndim;
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)ndim);
    if (keepdim || ndim == 1) shape[ndim - 1] = 1;
    else ndim--;
    lm_operands in = { { x }, { "x" } };
    lm_tensor *y = lm_push_out(L, 2, ctx, ndim, shape, &in, 0);
    lm_row_plan c = lm_plan_sum(ctx, d);
    struct { uint64_t x, y, rows; uint32_t n, d; float divisor; uint32_t groups_x; } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y), .rows = (uint64_t)rows,
        .n = c.n, .d = (uint32_t)d, .divisor = mean ? (float)d : 1.0f,
    };
    lm_record_rows(L, name, c.vec == 4 ? LM_SH_SUM_VEC4 : LM_SH_SUM_VEC1, &c, rows,
                   &pc, sizeof pc, &pc.groups_x, x, y);
    return 1;
}

int lm_op_sum(lua_State *L) { return reduce(L, "sum", 0); }
int lm_op_mean(lua_State *L) { return reduce(L, "mean", 1); }
