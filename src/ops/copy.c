/* copy: dst = src with vec4 loads and stores; also the bandwidth ceiling of bench/. */
#include "ops.h"
#include <lauxlib.h>

#define COPY_WG 256
#define COPY_UNROLL 4

void lm_record_copy(lua_State *L, lm_tensor *src, lm_tensor *dst) {
    lm_context *ctx = src->storage->ctx;
    struct { uint64_t src, dst, n; uint32_t groups_x; uint32_t pad; } pc = {
        .src = lm_tensor_address(src), .dst = lm_tensor_address(dst), .n = (uint64_t)src->numel,
    };
    uint64_t per_group = (uint64_t)COPY_WG * COPY_UNROLL * 4u;
    uint64_t groups = ((uint64_t)src->numel + per_group - 1) / per_group;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "copy", .shader = LM_SH_COPY, .spec = { COPY_WG, COPY_UNROLL, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { src }, .writes = { dst },
    });
}

int lm_op_copy(lua_State *L) {
    lm_tensor *src = lm_check_tensor(L, 1);
    lm_check_options(L, 2, lm_out_option);
    lua_settop(L, 2);
    lm_push_option(L, 2, "out");                       /* slot 3: the result */
    lm_tensor *dst = lm_check_out(L, 3, 2, "out", src->ndim, src->shape);
    if (dst && dst != src && lm_tensors_overlap(src, dst) && !lm_tensors_same_memory(src, dst))
        lm_argerror(L, 2, "out overlaps the source tensor");
    if (!dst) {
        lm_push_tensor(L, lm_context_get(L), src->ndim, src->shape);
        lua_replace(L, 3);
    }
    /* The allocations may have run finalizers that freed either tensor (see ops.h). */
    src = lm_check_tensor(L, 1);
    dst = lm_check_out(L, 3, 2, "out", src->ndim, src->shape);
    if (!lm_tensors_same_memory(src, dst)) lm_record_copy(L, src, dst);
    return 1;
}
