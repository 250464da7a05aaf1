/* copy: dst = src with 16-byte loads and stores, any dtype; also the bandwidth ceiling of
 * bench/. Between dtypes a copy converts (convert.c), as PyTorch's copy_. */
#include "ops.h"
#include <lauxlib.h>

#define COPY_WG 256
#define COPY_UNROLL 4

void lm_record_copy(lua_State *L, lm_tensor *src, lm_tensor *dst) {
    lm_context *ctx = src->storage->ctx;
    if (src->dtype != dst->dtype)
        luaL_error(L, "copy: dtypes %s and %s differ (internal: lm_record_copy does not convert)",
                   lm_dtype_name(src->dtype), lm_dtype_name(dst->dtype));
    uint64_t bytes = (uint64_t)lm_tensor_bytes(src);
    int narrow = bytes % 4u != 0;   /* a tail of single bytes: 8-bit loads and stores */
    if (narrow) lm_require_narrow_storage(L, ctx, "copy", src->dtype);
    struct { uint64_t src, dst, n; uint32_t groups_x; uint32_t pad; } pc = {
        .src = lm_tensor_address(src), .dst = lm_tensor_address(dst), .n = bytes,
    };
    uint64_t per_group = (uint64_t)COPY_WG * COPY_UNROLL * 16u;
    uint64_t groups = (bytes + per_group - 1) / per_group;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "copy", .any_dtype = 1, .shader = narrow ? LM_SH_COPY_NARROW : LM_SH_COPY,
        .spec = { COPY_WG, COPY_UNROLL, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { src }, .writes = { dst },
    });
}

void lm_record_any_copy(lua_State *L, lm_tensor *src, lm_tensor *dst) {
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
 * written, converting when the dtypes differ; returns dst. */
static int copy_into(lua_State *L) {
    lm_tensor *dst = lm_check_tensor(L, 1);
    lm_tensor *src = lm_check_tensor(L, 2);
    lm_check_options(L, 3, lm_no_options);
    lm_check_writable(L, 1, dst, "the destination");
    if (src->storage->ctx != dst->storage->ctx) luaL_error(L, "%s: tensors belong to different devices", lm_fname(L));
    /* src as a stack view of dst's shape: stride 0 where it broadcasts. */
    lm_tensor view;
    if (!lm_broadcast_view(src, dst, &view)) {
        char a[256], b[256];
        lm_shape_string(src->shape, src->ndim, a, sizeof a);
        lm_shape_string(dst->shape, dst->ndim, b, sizeof b);
        lm_argerror(L, 2, "source of shape %s does not fit a destination of shape %s (the shapes must be "
                    "equal, or the source broadcast to the destination)", a, b);
    }
    lua_settop(L, 2);
    if (src->dtype != dst->dtype) {
        check_no_partial_overlap(L, 2, &view, dst, "the destination");
        if (lm_tensors_overlap(&view, dst))
            lm_argerror(L, 2, "the destination is the source's memory in another dtype (convert into a new tensor)");
        lm_convert_into(L, 1, 2);
        lua_settop(L, 1);
        return 1;
    }
    lua_settop(L, 1);
    if (lm_tensors_same_memory(&view, dst)) return 1;
    check_no_partial_overlap(L, 2, &view, dst, "the destination");
    lm_record_any_copy(L, &view, dst);
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
    if (dst && dst->dtype != src->dtype) {
        if (lm_tensors_overlap(src, dst)) lm_argerror(L, 2, "out is the source's memory in another dtype");
        lm_convert_into(L, 3, 1);
        lua_settop(L, 3);
        return 1;
    }
    if (!dst) {
        lm_push_tensor_dtype(L, lm_context_get(L), src->dtype, src->ndim, src->shape);
        lua_replace(L, 3);
    }
    /* The allocations may have run finalizers that freed either tensor (see ops.h). */
    src = lm_check_tensor(L, 1);
    dst = lm_check_out_view(L, 3, 2, "out", src->ndim, src->shape);
    if (!lm_tensors_same_memory(src, dst)) lm_record_any_copy(L, src, dst);
    return 1;
}
