/* Conversions between dtypes (shaders/convert.comp): t:to(dtype [, {out=}]), t:float(),
 * t:half(), t:bfloat16(), t:int(), t:bool(), and dst:copy(src) across dtypes. The rules
 * (rounding, truncation, NaN) are the shader's and docs/semantics.md's. */
#include "ops.h"
#include <lauxlib.h>

#define CONVERT_WG 256
#define CONVERT_UNROLL 4

void lm_record_convert(lua_State *L, lm_tensor *src, lm_tensor *dst) {
    lm_context *ctx = dst->storage->ctx;
    /* The last numel % 4 elements move one by one: 8/16-bit storage for narrow dtypes. */
    int narrow = src->numel % 4 != 0 && (lm_dtype_size(src->dtype) < 4 || lm_dtype_size(dst->dtype) < 4);
    const char *op = lm_fname(L);   /* to, half, copy, ...: the caller's name */
    if (narrow) lm_require_narrow_storage(L, ctx, op, lm_dtype_size(src->dtype) < 4 ? src->dtype : dst->dtype);
    struct { uint64_t src, dst, n; uint32_t groups_x, pad; } pc = {
        .src = lm_tensor_address(src), .dst = lm_tensor_address(dst), .n = (uint64_t)src->numel,
    };
    uint64_t per_group = (uint64_t)CONVERT_WG * CONVERT_UNROLL * 4u;
    uint64_t groups = ((uint64_t)src->numel + per_group - 1) / per_group;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = narrow ? LM_SH_CONVERT_NARROW : LM_SH_CONVERT,
        .spec = { CONVERT_WG, CONVERT_UNROLL, (uint32_t)src->dtype, (uint32_t)dst->dtype },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { src }, .writes = { dst },
    });
}

void lm_convert_into(lua_State *L, int dst_idx, int src_idx) {
    int top = lua_gettop(L);
    lm_tensor *dst = lm_check_tensor(L, dst_idx), *src = lm_check_tensor(L, src_idx);
    lm_tensor view;
    if (!lm_broadcast_view(src, dst, &view)) luaL_error(L, "%s: shapes do not fit (internal)", lm_fname(L));
    lm_context *ctx = dst->storage->ctx;
    lm_dtype src_dtype = src->dtype, dst_dtype = dst->dtype;
    int ndim = dst->ndim;
    int64_t shape[LM_MAX_DIMS];
    for (int i = 0; i < ndim; i++) shape[i] = dst->shape[i];
    /* A strided side goes through a contiguous temporary (the shader reads and writes
     * plain tensors). */
    int src_tmp = 0, dst_tmp = 0;
    if (!lm_tensor_is_plain(&view)) {
        lm_push_tensor_dtype(L, ctx, src_dtype, ndim, shape);
        src_tmp = lua_gettop(L);
    }
    if (!lm_tensor_is_plain(dst)) {
        lm_push_tensor_dtype(L, ctx, dst_dtype, ndim, shape);
        dst_tmp = lua_gettop(L);
    }
    /* The allocations may have run finalizers that freed either tensor (see ops.h). */
    dst = lm_check_tensor(L, dst_idx);
    src = lm_check_tensor(L, src_idx);
    lm_broadcast_view(src, dst, &view);
    lm_tensor *from = &view, *to = dst;
    if (src_tmp) {
        from = lua_touserdata(L, src_tmp);
        lm_record_strided_copy(L, &view, from);
    }
    if (dst_tmp) to = lua_touserdata(L, dst_tmp);
    if (from->dtype == to->dtype) lm_record_strided_copy(L, from, to);   /* (only to() with out) */
    else lm_record_convert(L, from, to);
    if (dst_tmp) lm_record_strided_copy(L, to, dst);
    lua_settop(L, top);   /* the temporaries' memory is freed after the work that uses it */
}

/* t:to(dtype [, {out=}]) with the dtype known and the options at argument `opts`. */
static int convert_to(lua_State *L, lm_dtype d, int opts) {
    lm_check_options(L, opts, lm_out_option);
    lua_settop(L, opts);
    lm_push_option(L, opts, "out");
    int out_idx = lua_gettop(L);
    lm_tensor *t = lm_check_tensor(L, 1);
    lm_tensor *out = lm_check_out_view(L, out_idx, opts, "out", t->ndim, t->shape);
    if (!out) {
        if (d == t->dtype) { lua_settop(L, 1); return 1; }   /* t itself, as PyTorch */
        lm_push_tensor_dtype(L, t->storage->ctx, d, t->ndim, t->shape);
        lua_replace(L, out_idx);
    } else {
        if (out->dtype != d)
            lm_argerror(L, opts, "out must be %s (the dtype converted to), got %s", lm_dtype_name(d),
                        lm_dtype_name(out->dtype));
        if (out->storage->ctx != t->storage->ctx) lm_argerror(L, opts, "out belongs to a different device");
        if (lm_tensors_overlap(t, out) && !(d == t->dtype && lm_tensors_same_memory(t, out)))
            lm_argerror(L, opts, "out overlaps the tensor converted");
        if (lm_tensors_same_memory(t, out)) { lua_settop(L, out_idx); return 1; }
    }
    lm_convert_into(L, out_idx, 1);
    lua_settop(L, out_idx);
    return 1;
}

int lm_op_to(lua_State *L) {
    lm_check_tensor(L, 1);
    lm_dtype d = lm_check_dtype(L, 2);
    return convert_to(L, d, 3);
}

static int to_float(lua_State *L) { lm_check_tensor(L, 1); return convert_to(L, LM_FLOAT32, 2); }
static int to_half(lua_State *L) { lm_check_tensor(L, 1); return convert_to(L, LM_FLOAT16, 2); }
static int to_bfloat16(lua_State *L) { lm_check_tensor(L, 1); return convert_to(L, LM_BFLOAT16, 2); }
static int to_int(lua_State *L) { lm_check_tensor(L, 1); return convert_to(L, LM_INT32, 2); }
static int to_bool(lua_State *L) { lm_check_tensor(L, 1); return convert_to(L, LM_BOOL, 2); }

const luaL_Reg lm_convert_methods[] = {
    {"float", to_float}, {"half", to_half}, {"bfloat16", to_bfloat16}, {"int", to_int}, {"bool", to_bool},
    {NULL, NULL}
};
