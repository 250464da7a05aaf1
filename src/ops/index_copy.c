/* lumus.index_copy(t, dim, ids, src [, {out=}]) (shaders/index_copy.comp): t with src's
 * slice j (along dim) written over slice ids[j], torch.index_copy. Elements are moved as
 * they are, so every dtype works; ids int32, 1-D and 1-based. With out = t only the
 * indexed slices are written (a KV cache written at a position held on the device);
 * otherwise t is copied into the result first. */
#include "ops.h"
#include <lauxlib.h>

#define INDEX_COPY_WG 256
#define U32_MAX 0xffffffffULL

int lm_op_index_copy(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int dim = lm_index_dim(L, 2, t->ndim);
    lm_tensor *ids = lm_check_tensor(L, 3);
    lm_tensor *src = lm_check_tensor(L, 4);
    lm_check_options(L, 5, lm_out_option);
    if (ids->dtype != LM_INT32)
        lm_argerror(L, 3, "ids must be an int32 tensor (1-based positions), got %s", lm_dtype_name(ids->dtype));
    if (ids->ndim != 1) {
        char is[256];
        lm_shape_string(ids->shape, ids->ndim, is, sizeof is);
        lm_argerror(L, 3, "ids must be 1-D, got shape %s", is);
    }
    if (src->dtype != t->dtype)
        lm_argerror(L, 4, "src must be %s (t's dtype), got %s", lm_dtype_name(t->dtype), lm_dtype_name(src->dtype));
    int64_t m = ids->shape[0];
    int fits = src->ndim == t->ndim;
    for (int k = 0; fits && k < t->ndim; k++) fits = src->shape[k] == (k == dim ? m : t->shape[k]);
    if (!fits) {
        char ts[256], ss[256];
        lm_shape_string(t->shape, t->ndim, ts, sizeof ts);
        lm_shape_string(src->shape, src->ndim, ss, sizeof ss);
        lm_argerror(L, 4, "src must have t's shape (%s) except %I in dimension %d (the number of ids), got shape %s",
                    ts, (LUAI_UACINT)m, dim + 1, ss);
    }
    lm_context *ctx = t->storage->ctx;
    if (ids->storage->ctx != ctx || src->storage->ctx != ctx)
        luaL_error(L, "index_copy: tensors belong to different devices");
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < dim; k++) outer *= t->shape[k];
    for (int k = dim + 1; k < t->ndim; k++) inner *= t->shape[k];
    int64_t size = t->shape[dim];
    if ((uint64_t)outer > U32_MAX || (uint64_t)inner > U32_MAX || (uint64_t)size > U32_MAX || (uint64_t)m > U32_MAX)
        luaL_error(L, "index_copy: a dimension or product of dimensions of 2^32 or more is not supported");
    unsigned elem = lm_dtype_size(t->dtype);
    if (elem < 4) lm_require_narrow_storage(L, ctx, "index_copy", t->dtype);
    lua_settop(L, 5);
    lm_contiguous_inputs(L, 3, 4);
    /* The result (slot 6): out, which may be t itself (in place) but no other input, or
     * a new tensor of t's dtype. */
    lm_push_option(L, 5, "out");
    lm_tensor *out = lm_check_out(L, 6, 5, "out", t->ndim, t->shape);
    if (!out) {
        lua_pop(L, 1);
        lm_push_tensor_dtype(L, ctx, t->dtype, t->ndim, t->shape);
    }
    /* The allocation may have run finalizers that freed any of them (see ops.h). */
    t = lm_check_tensor(L, 1);
    ids = lm_check_tensor(L, 3);
    src = lm_check_tensor(L, 4);
    lm_tensor *res = lm_check_tensor(L, 6);
    if (out) {
        if (res->dtype != t->dtype)
            lm_argerror(L, 5, "out must be %s (t's dtype), got %s", lm_dtype_name(t->dtype), lm_dtype_name(res->dtype));
        if (res->storage->ctx != ctx) lm_argerror(L, 5, "out belongs to a different device");
        if (lm_tensors_overlap(res, ids)) lm_argerror(L, 5, "out overlaps ids (an input of this op)");
        if (lm_tensors_overlap(res, src)) lm_argerror(L, 5, "out overlaps src (an input of this op)");
        if (lm_tensors_overlap(res, t) && !lm_tensors_same_memory(res, t))
            lm_argerror(L, 5, "out overlaps t without being the same elements");
    }
    if (!lm_tensors_same_memory(res, t) && t->numel > 0) lm_record_strided_copy(L, t, res);
    uint64_t n = (uint64_t)src->numel;
    if (n == 0) { lua_settop(L, 6); return 1; }
    struct {
        uint64_t ids, src, dst;
        uint32_t outer, size, inner, m, groups_x;
    } pc = {
        .ids = lm_tensor_address(ids), .src = lm_tensor_address(src), .dst = lm_tensor_address(res),
        .outer = (uint32_t)outer, .size = (uint32_t)size, .inner = (uint32_t)inner, .m = (uint32_t)m,
    };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (n + INDEX_COPY_WG - 1) / INDEX_COPY_WG, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "index_copy", .any_dtype = 1,
        .shader = elem == 4 ? LM_SH_INDEX_COPY_4 : elem == 2 ? LM_SH_INDEX_COPY_2 : LM_SH_INDEX_COPY_1,
        .spec = { INDEX_COPY_WG }, .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { ids, src }, .writes = { res },
    });
    lua_settop(L, 6);
    return 1;
}
