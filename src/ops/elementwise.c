/* Recording of the elementwise kernel: variant (vec4 or float), mode, grid. */
#include "elementwise.h"
#include <lauxlib.h>

#define EW_WG 256
#define EW_UNROLL 4            /* vectors per thread per grid step: UNROLL in the shader */
#define EW_MAX_GROUPS 65535u   /* maxComputeWorkGroupCount[0] is at least this everywhere */

enum { MODE_SAME, MODE_BCAST, MODE_SCALAR };   /* MODE_* in the shader */

void lm_record_elementwise(lua_State *L, const char *name, lm_ew_op op, lm_tensor *a,
                           lm_tensor *b, float scalar, lm_tensor *out) {
    lm_context *ctx = a->storage->ctx;
    uint32_t mode = !b ? MODE_SCALAR : b->numel == a->numel ? MODE_SAME : MODE_BCAST;
    /* A broadcast row that is not a whole number of vec4s would misalign a's rows. */
    int vec = mode == MODE_BCAST && b->numel % 4 ? 1 : 4;
    uint64_t nv = (uint64_t)a->numel / (uint64_t)vec;
    uint64_t per_group = (uint64_t)EW_WG * EW_UNROLL;
    uint64_t groups = (nv + per_group - 1) / per_group;
    uint64_t cap = ctx->ew_max_groups ? ctx->ew_max_groups : EW_MAX_GROUPS;
    if (groups > cap) groups = cap;
    if (groups == 0) groups = 1;
    uint64_t period = mode == MODE_BCAST ? (uint64_t)b->numel / (uint64_t)vec : 1;
    struct {
        uint64_t a, b, dst, n, period, wg_mod, step_mod;
        float scalar;
        uint32_t pad;
    } pc = {
        .a = lm_tensor_address(a),
        .b = b ? lm_tensor_address(b) : lm_tensor_address(a),   /* never read without b */
        .dst = lm_tensor_address(out), .n = (uint64_t)a->numel, .period = period,
        .wg_mod = EW_WG % period, .step_mod = (groups * per_group) % period, .scalar = scalar,
    };
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = name, .shader = vec == 4 ? LM_SH_EW_VEC4 : LM_SH_EW_VEC1,
        .spec = { EW_WG, (uint32_t)op, mode },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = (uint32_t)groups,
        .reads = { a, b }, .writes = { out },
    });
}

/* core._elementwise_config([{max_groups = n}]) -> the grid cap in use. A small cap makes
 * every thread loop over the grid, which specs use to test that path on small tensors;
 * 0 or nil restores the default. */
int lm_op_elementwise_config(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    if (lm_check_opts(L, 1)) {
        lua_getfield(L, 1, "max_groups");
        lua_Integer g = luaL_optinteger(L, -1, 0);
        luaL_argcheck(L, g >= 0 && g <= (lua_Integer)EW_MAX_GROUPS, 1, "max_groups must be in 0..65535");
        ctx->ew_max_groups = (uint32_t)g;
        lua_pop(L, 1);
    }
    lua_pushinteger(L, ctx->ew_max_groups ? ctx->ew_max_groups : EW_MAX_GROUPS);
    return 1;
}
