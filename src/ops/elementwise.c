/* Recording of the elementwise kernel: variant (vec4 or float), mode, grid. */
#include "elementwise.h"
#include <lauxlib.h>

#define EW_WG 256
#define EW_UNROLL 4            /* vectors per thread: UNROLL in the shader */

void lm_record_elementwise(lua_State *L, const char *name, lm_ew_op op, lm_tensor *a,
                           lm_tensor *b, float scalar, lm_tensor *out) {
    lm_context *ctx = a->storage->ctx;
    uint32_t mode = !b ? LM_EW_SCALAR : b->numel == a->numel ? LM_EW_SAME : LM_EW_BCAST;
    /* A broadcast row that is not a whole number of vec4s would misalign a's rows. */
    int vec = mode == LM_EW_BCAST && b->numel % 4 ? 1 : 4;
    uint64_t nv = (uint64_t)a->numel / (uint64_t)vec;
    uint64_t per_group = (uint64_t)EW_WG * EW_UNROLL;
    uint64_t period = mode == LM_EW_BCAST ? (uint64_t)b->numel / (uint64_t)vec : 1;
    struct {
        uint64_t a, b, dst, n, period, wg_mod;
        float scalar;
        uint32_t groups_x;
    } pc = {
        .a = lm_tensor_address(a),
        .b = b ? lm_tensor_address(b) : lm_tensor_address(a),   /* never read without b */
        .dst = lm_tensor_address(out), .n = (uint64_t)a->numel, .period = period,
        .wg_mod = EW_WG % period, .scalar = scalar,
    };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (nv + per_group - 1) / per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = name, .shader = vec == 4 ? LM_SH_EW_VEC4 : LM_SH_EW_VEC1,
        .spec = { EW_WG, (uint32_t)op, mode },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { a, b }, .writes = { out },
    });
}
