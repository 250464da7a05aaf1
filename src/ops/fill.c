/* fill: t[:] = v, on the device; and the factories that fill (zeros, ones, full). */
#include "ops.h"
#include <lauxlib.h>

#define FILL_WG 256

void lm_record_fill(lua_State *L, lm_tensor *t, float v) {
    lm_context *ctx = t->storage->ctx;
    struct { uint64_t dst, n; float value; uint32_t groups_x; } pc = {
        .dst = lm_tensor_address(t), .n = (uint64_t)t->numel, .value = v,
    };
    uint64_t groups = ((uint64_t)t->numel + 4u * FILL_WG - 1) / (4u * FILL_WG);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "fill", .shader = LM_SH_FILL, .spec = { FILL_WG, 0, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .writes = { t },
    });
}

int lm_op_fill(lua_State *L) {
    lm_check_tensor(L, 1);
    lua_Number v = lm_check_number(L, 2);
    lm_tensor *t = lm_check_tensor(L, 1);   /* still live: nothing above may free it, but cheap */
    lm_check_writable(L, 1, t, "the tensor");
    if (lm_tensor_is_plain(t)) lm_record_fill(L, t, (float)v);
    else lm_record_strided_fill(L, t, (float)v);   /* only the view's elements */
    lua_settop(L, 1);
    return 1;
}

/* A new tensor of the shape at argument 1 (factory options at `opts`), filled with v. */
static int fill_new(lua_State *L, int opts, float v) {
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    lm_check_shape(L, 1, shape, &ndim, 0);
    lm_check_factory_options(L, opts);
    lm_tensor *t = lm_push_tensor(L, lm_context_get(L), ndim, shape);
    lm_record_fill(L, t, v);
    return 1;
}

int lm_op_zeros(lua_State *L) { return fill_new(L, 2, 0.0f); }
int lm_op_ones(lua_State *L) { return fill_new(L, 2, 1.0f); }
int lm_op_full(lua_State *L) {
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    lm_check_shape(L, 1, shape, &ndim, 0);   /* a missing shape is named before the value */
    lua_Number v = lm_check_number(L, 2);
    return fill_new(L, 3, (float)v);
}
