/* fill: t[:] = v, on the device. */
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
    lua_Number v = luaL_checknumber(L, 2);
    lm_tensor *t = lm_check_tensor(L, 1);   /* still live: nothing above may free it, but cheap */
    lm_record_fill(L, t, (float)v);
    lua_settop(L, 1);
    return 1;
}
