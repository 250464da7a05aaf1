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
    const uint32_t spec[LM_MAX_SPEC] = { FILL_WG, 0, 0 };
    VkPipeline p = lm_pipeline(L, ctx, LM_SH_FILL, spec, 0);
    VkCommandBuffer cb = lm_stream_cmd(L, ctx, "fill");
    lm_stream_write(ctx, t->storage);
    lm_stream_hazards(ctx, cb);
    lm_dispatch(cb, ctx, p, &pc, sizeof pc, pc.groups_x, gy);
    lm_stream_op_done(L, ctx);
}

int lm_op_fill(lua_State *L) {
    lm_check_tensor(L, 1);
    lua_Number v = luaL_checknumber(L, 2);
    lm_tensor *t = lm_check_tensor(L, 1);   /* still live: nothing above may free it, but cheap */
    lm_record_fill(L, t, (float)v);
    lua_settop(L, 1);
    return 1;
}
