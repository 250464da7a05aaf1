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

/* dst = src for tensors of the same shape (src may have stride-0 dimensions): the vec4
 * kernel when both are plain, else the strided one. */
static void record_any_copy(lua_State *L, lm_tensor *src, lm_tensor *dst) {
    if (lm_tensor_is_plain(src) && lm_tensor_is_plain(dst)) lm_record_copy(L, src, dst);
    else lm_record_strided_copy(L, src, dst);
}

static void check_no_partial_overlap(lua_State *L, int argn, const lm_tensor *src, const lm_tensor *dst, const char *what) {
    if (lm_tensors_overlap(src, dst) && !lm_tensors_same_memory(src, dst))
        lm_argerror(L, argn, "%s overlaps the source tensor without being the same elements "
                    "(copy from a clone: lumus.copy(src))", what);
}

/* dst:copy(src) and lumus.copy(dst, src): src (its shape, or one that broadcasts to it
 * as in add: size-1 or missing leading dimensions) into dst, any view that can be
 * written; returns dst. */
static int copy_into(lua_State *L) {
    lm_tensor *dst = lm_check_tensor(L, 1);
    lm_tensor *src = lm_check_tensor(L, 2);
    lm_check_options(L, 3, lm_no_options);
    lm_check_writable(L, 1, dst, "the destination");
    if (src->storage->ctx != dst->storage->ctx) luaL_error(L, "%s: tensors belong to different devices", lm_fname(L));
    /* src as a stack view of dst's shape: stride 0 where it broadcasts. */
    lm_tensor view = *src;
    int lead = dst->ndim - src->ndim, fits = lead >= 0;
    for (int i = 0; fits && i < dst->ndim; i++) {
        int k = i - lead;
        int64_t size = k < 0 ? 1 : src->shape[k];
        if (size != dst->shape[i] && size != 1) fits = 0;
        view.shape[i] = dst->shape[i];
        view.strides[i] = k < 0 || size != dst->shape[i] ? 0 : src->strides[k];
    }
    if (!fits) {
        char a[256], b[256];
        lm_shape_string(src->shape, src->ndim, a, sizeof a);
        lm_shape_string(dst->shape, dst->ndim, b, sizeof b);
        lm_argerror(L, 2, "source of shape %s does not fit a destination of shape %s (the shapes must be "
                    "equal, or the source broadcast to the destination)", a, b);
    }
    view.ndim = dst->ndim;
    view.numel = dst->numel;
    lua_settop(L, 1);
    if (lm_tensors_same_memory(&view, dst)) return 1;
    check_no_partial_overlap(L, 2, &view, dst, "the destination");
    record_any_copy(L, &view, dst);
    return 1;
}

int lm_op_copy(lua_State *L) {
    lm_check_tensor(L, 1);
    if (luaL_testudata(L, 2, LM_TENSOR_MT)) return copy_into(L);
    lm_check_options(L, 2, lm_out_option);
    lua_settop(L, 2);
    lm_push_option(L, 2, "out");                       /* slot 3: the result */
    lm_tensor *src = lm_check_tensor(L, 1);
    lm_tensor *dst = lm_check_out_view(L, 3, 2, "out", src->ndim, src->shape);
    if (dst && dst->storage->ctx != src->storage->ctx) lm_argerror(L, 2, "out belongs to a different device");
    if (dst) check_no_partial_overlap(L, 2, src, dst, "out");
    if (!dst) {
        lm_push_tensor(L, lm_context_get(L), src->ndim, src->shape);
        lua_replace(L, 3);
    }
    /* The allocations may have run finalizers that freed either tensor (see ops.h). */
    src = lm_check_tensor(L, 1);
    dst = lm_check_out_view(L, 3, 2, "out", src->ndim, src->shape);
    if (!lm_tensors_same_memory(src, dst)) record_any_copy(L, src, dst);
    return 1;
}
