/* Deterministic scatter-adds along one dimension (shaders/index_add.comp):
 * lumus.index_add(t, dim, ids, src) adds src's slice j into t's slice ids[j] (the
 * backward of index_select and embedding), lumus.scatter_add(t, dim, ids, src) adds
 * src's element c into t at c with c[dim] = ids[c] (torch.scatter_add; the backward of
 * gather). float32; ids int32 and 1-based; an id outside 1..size adds nothing. Each
 * output element sums its contributions in a fixed order, so the bits repeat from run
 * to run (no float atomics). */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

#define INDEX_ADD_WG 256
#define TILE 16             /* rows per workgroup of the tiled form (TILE=16 in variants.def) */
#define TILE_MIN_INNER 32   /* its narrowest workgroup: rows shorter than this take the plain form */
#define U32_MAX 0xffffffffULL

static void check_float(lua_State *L, int arg, const lm_tensor *t, const char *what) {
    if (t->dtype != LM_FLOAT32)
        lm_argerror(L, arg, "%s must be float32, got %s", what, lm_dtype_name(t->dtype));
}

/* Raises unless src has t's shape except `m` along dim (any size along dim when m_is is
 * NULL; the caller passes src's own size then). */
static void check_src_shape(lua_State *L, const lm_tensor *t, const lm_tensor *src, int dim, int64_t m,
                            const char *m_is) {
    int fits = src->ndim == t->ndim;
    for (int k = 0; fits && k < t->ndim; k++) fits = src->shape[k] == (k == dim ? m : t->shape[k]);
    if (!fits) {
        char ts[256], ss[256];
        lm_shape_string(t->shape, t->ndim, ts, sizeof ts);
        lm_shape_string(src->shape, src->ndim, ss, sizeof ss);
        if (m_is)
            lm_argerror(L, 4, "src must have t's shape (%s) except %I in dimension %d (%s), got shape %s",
                        ts, (LUAI_UACINT)m, dim + 1, m_is, ss);
        lm_argerror(L, 4, "src must have t's shape (%s) except in dimension %d, got shape %s", ts, dim + 1, ss);
    }
}

/* Both ops: t at 1, dim at 2, ids at 3, src at 4, options at 5; `per_element` selects
 * scatter_add's ids (src's shape) over index_add's (1-D, one per slice). */
static int scatter_op(lua_State *L, const char *op, int per_element) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int dim = lm_index_dim(L, 2, t->ndim);
    lm_tensor *ids = lm_check_tensor(L, 3);
    lm_tensor *src = lm_check_tensor(L, 4);
    lm_check_options(L, 5, lm_out_option);
    check_float(L, 1, t, "t");
    if (ids->dtype != LM_INT32)
        lm_argerror(L, 3, "ids must be an int32 tensor (1-based positions), got %s", lm_dtype_name(ids->dtype));
    check_float(L, 4, src, "src");
    if (per_element) {
        int64_t m = src->ndim == t->ndim ? src->shape[dim] : 0;
        check_src_shape(L, t, src, dim, m, NULL);
        int same = ids->ndim == src->ndim;
        for (int k = 0; same && k < src->ndim; k++) same = ids->shape[k] == src->shape[k];
        if (!same) {
            char is[256], ss[256];
            lm_shape_string(ids->shape, ids->ndim, is, sizeof is);
            lm_shape_string(src->shape, src->ndim, ss, sizeof ss);
            lm_argerror(L, 3, "ids must have src's shape (%s), got %s", ss, is);
        }
    } else {
        if (ids->ndim != 1) {
            char is[256];
            lm_shape_string(ids->shape, ids->ndim, is, sizeof is);
            lm_argerror(L, 3, "ids must be 1-D, got shape %s", is);
        }
        check_src_shape(L, t, src, dim, ids->shape[0], "the number of ids");
    }
    lm_context *ctx = t->storage->ctx;
    if (ids->storage->ctx != ctx || src->storage->ctx != ctx)
        luaL_error(L, "%s: tensors belong to different devices", op);
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < dim; k++) outer *= t->shape[k];
    for (int k = dim + 1; k < t->ndim; k++) inner *= t->shape[k];
    int64_t size = t->shape[dim], m = src->shape[dim];
    if ((uint64_t)outer > U32_MAX || (uint64_t)inner > U32_MAX || (uint64_t)size > U32_MAX
        || (uint64_t)m > U32_MAX)
        luaL_error(L, "%s: a dimension or product of dimensions of 2^32 or more is not supported", op);
    lua_settop(L, 5);
    lm_contiguous_inputs(L, 1, 1);
    lm_contiguous_inputs(L, 3, 4);
    t = lm_check_tensor(L, 1);
    lm_operands in = { { t, lm_check_tensor(L, 3), lm_check_tensor(L, 4) }, { "t", "ids", "src" } };
    lm_tensor *out = lm_push_out(L, 5, ctx, t->ndim, t->shape, &in, 1);
    t = lm_check_tensor(L, 1);
    ids = lm_check_tensor(L, 3);
    src = lm_check_tensor(L, 4);
    struct {
        uint64_t t, ids, src, dst;
        uint32_t outer, size, inner, m, groups_x;
    } pc = {
        .t = lm_tensor_address(t), .ids = lm_tensor_address(ids), .src = lm_tensor_address(src),
        .dst = lm_tensor_address(out),
        .outer = (uint32_t)outer, .size = (uint32_t)size, .inner = (uint32_t)inner, .m = (uint32_t)m,
    };
    uint64_t n = (uint64_t)t->numel;
    if (n == 0) return 1;
    /* index_add over rows of at least TILE_MIN_INNER elements: the tiled form (a
     * workgroup per TILE rows and up to INDEX_ADD_WG columns, as narrow as the rows);
     * otherwise a thread per element. Both sum in j order: the same bits. */
    uint32_t wg = INDEX_ADD_WG, gy;
    uint64_t groups;
    lm_shader_id shader;
    if (!per_element && inner >= TILE_MIN_INNER) {
        while (wg > TILE_MIN_INNER && (uint64_t)wg / 2 >= (uint64_t)inner) wg /= 2;
        groups = (uint64_t)outer * (uint64_t)((size + TILE - 1) / TILE) * (uint64_t)((inner + wg - 1) / wg);
        shader = LM_SH_INDEX_ADD_TILE;
    } else {
        groups = (n + INDEX_ADD_WG - 1) / INDEX_ADD_WG;
        shader = per_element ? LM_SH_SCATTER_ADD : LM_SH_INDEX_ADD;
    }
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = shader,
        .spec = { wg }, .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { t, ids, src }, .writes = { out },
    });
    return 1;
}

/* lumus.index_add(t, dim, ids, src [, {out=}]): t with src's slice j (along dim) added
 * into slice ids[j]; ids 1-D int32, src t's shape with #ids along dim. */
int lm_op_index_add(lua_State *L) { return scatter_op(L, "index_add", 0); }

/* lumus.scatter_add(t, dim, ids, src [, {out=}]): t with src[c] added at c with c[dim]
 * replaced by ids[c]; ids and src of one shape, t's except along dim. */
int lm_op_scatter_add(lua_State *L) { return scatter_op(L, "scatter_add", 1); }
