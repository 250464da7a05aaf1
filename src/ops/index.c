/* Indexing by int32 ids: index_select, embedding and gather (shaders/index_rows.comp,
 * shaders/index_elems.comp), and the element kernel's strided copy that cat and stack
 * use. The kernels move bytes only, so every dtype works; ids are 1-based, and an id
 * outside its dimension gives zeros (never a read outside the tensor). */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

#define INDEX_WG 256
#define INDEX_ELEMS 4
#define U32_MAX 0xffffffffULL
#define NO_DIM 15   /* shaders/index_elems.comp: a copy, no ids */

/* The tensor layer's element limit (tensor.c): results past it are refused before their
 * element count can overflow. */
#define MAX_ELEMENTS ((int64_t)1 << 40)

void lm_check_result_size(lua_State *L, int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] > MAX_ELEMENTS || n > MAX_ELEMENTS / shape[k])
            luaL_error(L, "%s: the result would have more than 2^40 elements", lm_fname(L));
        n *= shape[k];
    }
}

int lm_index_dim(lua_State *L, int arg, int ndim) {
    lua_Integer d = lm_check_integer(L, arg);
    lua_Integer r = d < 0 ? d + ndim + 1 : d;
    if (r < 1 || r > ndim)
        lm_argerror(L, arg, "dimension %I out of range (the tensor has %d; dims are 1-based, -1 is the last)",
                    (LUAI_UACINT)d, ndim);
    return (int)r - 1;
}

/* Raises unless the device can load and store elements (or words) of `unit` bytes. */
static void check_unit(lua_State *L, const char *op, const lm_context *ctx, unsigned unit) {
    if (unit < 4 && !ctx->narrow_storage)
        luaL_error(L, "%s: this device lacks 8/16-bit storage (lumus.device().narrow_storage), needed to move "
                   "elements of %d byte%s", op, (int)unit, unit == 1 ? "" : "s");
}

static void check_u32(lua_State *L, const char *op, int64_t v) {
    if ((uint64_t)v > U32_MAX)
        luaL_error(L, "%s: a dimension, stride or row count of 2^32 or more is not supported", op);
}

void lm_record_index_elems(lua_State *L, const char *op, const lm_index_elems *g) {
    lm_context *ctx = g->out->storage->ctx;
    unsigned unit = lm_dtype_size(g->out->dtype);
    check_unit(L, op, ctx, unit);
    struct {
        uint64_t x, ids, dst;
        uint32_t shape[LM_MAX_DIMS], xs[LM_MAX_DIMS], is[LM_MAX_DIMS];
        uint32_t ndim_dim, size;
    } pc = {
        .x = lm_tensor_address(g->x), .ids = g->ids ? lm_tensor_address(g->ids) : 0,
        .dst = lm_tensor_address(g->out),
        .ndim_dim = (uint32_t)g->ndim | (uint32_t)(g->dim < 0 ? NO_DIM : g->dim) << 4,
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "index push constants");
    uint64_t n = 1;
    for (int k = 0; k < g->ndim; k++) {
        check_u32(L, op, g->shape[k]); check_u32(L, op, g->xs[k]); check_u32(L, op, g->is[k]);
        pc.shape[k] = (uint32_t)g->shape[k];
        pc.xs[k] = (uint32_t)g->xs[k];
        pc.is[k] = (uint32_t)g->is[k];
        n *= (uint64_t)g->shape[k];
    }
    check_u32(L, op, g->size);
    pc.size = (uint32_t)g->size;
    static const lm_shader_id shaders[5] = { 0, LM_SH_INDEX_ELEMS_1, LM_SH_INDEX_ELEMS_2, 0, LM_SH_INDEX_ELEMS_4 };
    uint64_t per_group = (uint64_t)INDEX_WG * INDEX_ELEMS;
    uint32_t gy, gx = lm_grid(L, ctx, (n + per_group - 1) / per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = shaders[unit], .spec = { INDEX_WG, INDEX_ELEMS },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = gx, .groups_y = gy,
        .reads = { g->x, g->ids }, .writes = { g->out },
    });
}

/* The row form: x contiguous, viewed as [outer, size, row_bytes]; out [outer, n_ids,
 * row_bytes]; ids n_ids int32 ids_stride apart. */
static void record_rows(lua_State *L, const char *op, lm_tensor *x, lm_tensor *ids, lm_tensor *out,
                        int64_t outer, int64_t size, int64_t n_ids, int64_t ids_stride, uint64_t row_bytes) {
    lm_context *ctx = out->storage->ctx;
    unsigned unit = 16;
    while (unit > 1 && (row_bytes % unit || lm_tensor_address(x) % unit || lm_tensor_address(out) % unit)) unit /= 2;
    check_unit(L, op, ctx, unit);
    uint64_t words = row_bytes / unit, rows = (uint64_t)outer * (uint64_t)n_ids;
    check_u32(L, op, (int64_t)words); check_u32(L, op, (int64_t)rows); check_u32(L, op, size);
    check_u32(L, op, n_ids); check_u32(L, op, ids_stride);
    static const lm_shader_id shaders[17] = {
        [1] = LM_SH_INDEX_ROWS_1, [2] = LM_SH_INDEX_ROWS_2, [4] = LM_SH_INDEX_ROWS_4,
        [8] = LM_SH_INDEX_ROWS_8, [16] = LM_SH_INDEX_ROWS_16,
    };
    /* Threads per row: the power of two that covers the row in ELEMS words per thread,
     * at most the workgroup. */
    uint32_t tpr_log2 = 0;
    while ((1u << tpr_log2) < INDEX_WG && ((uint64_t)1 << tpr_log2) * INDEX_ELEMS < words) tpr_log2++;
    uint64_t rows_per_group = INDEX_WG >> tpr_log2;
    struct {
        uint64_t x, ids, dst;
        uint32_t rows, n_ids, size, words, ids_stride, tpr_log2, groups_x;
    } pc = {
        .x = lm_tensor_address(x), .ids = lm_tensor_address(ids), .dst = lm_tensor_address(out),
        .rows = (uint32_t)rows, .n_ids = (uint32_t)n_ids, .size = (uint32_t)size, .words = (uint32_t)words,
        .ids_stride = (uint32_t)ids_stride, .tpr_log2 = tpr_log2,
    };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (rows + rows_per_group - 1) / rows_per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = shaders[unit], .spec = { INDEX_WG, INDEX_ELEMS },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x, ids }, .writes = { out },
    });
}

static void check_ids(lua_State *L, int arg, const lm_tensor *ids) {
    if (ids->dtype != LM_INT32)
        lm_argerror(L, arg, "ids must be an int32 tensor (1-based positions), got %s", lm_dtype_name(ids->dtype));
}

static void same_device(lua_State *L, const lm_tensor *a, const lm_tensor *b) {
    if (a->storage->ctx != b->storage->ctx) luaL_error(L, "%s: tensors belong to different devices", lm_fname(L));
}

lm_tensor *lm_push_out_dtype(lua_State *L, int argn, lm_context *ctx, lm_dtype dtype, int ndim,
                             const int64_t *shape, const lm_operands *in) {
    lm_push_option(L, argn, "out");
    int given = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (!given) return lm_push_tensor_dtype(L, ctx, dtype, ndim, shape);
    lm_tensor *out = lm_push_out(L, argn, ctx, ndim, shape, in, 0);
    if (out->dtype != dtype)
        lm_argerror(L, argn, "out must be %s (the result's dtype), got %s", lm_dtype_name(dtype), lm_dtype_name(out->dtype));
    return out;
}

/* lumus.index_select(x, dim, ids [, {out=}]): x's slices ids[1], ids[2], ... along dim. */
int lm_op_index_select(lua_State *L) {
    lm_tensor *x = lm_check_tensor(L, 1);
    int dim = lm_index_dim(L, 2, x->ndim);
    lm_tensor *ids = lm_check_tensor(L, 3);
    lm_check_options(L, 4, lm_out_option);
    check_ids(L, 3, ids);
    if (ids->ndim != 1) {
        char s[256];
        lm_shape_string(ids->shape, ids->ndim, s, sizeof s);
        lm_argerror(L, 3, "ids must be 1-D, got shape %s", s);
    }
    same_device(L, x, ids);
    int64_t shape[LM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = ids->numel;
    lm_check_result_size(L, x->ndim, shape);
    lua_settop(L, 4);
    lm_operands in = { { x, ids }, { "x", "ids" } };
    lm_tensor *out = lm_push_out_dtype(L, 4, x->storage->ctx, x->dtype, x->ndim, shape, &in);
    x = lm_check_tensor(L, 1);
    ids = lm_check_tensor(L, 3);
    const char *op = "index_select";
    if (lm_tensor_is_contiguous(x)) {
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < dim; k++) outer *= x->shape[k];
        for (int k = dim + 1; k < x->ndim; k++) inner *= x->shape[k];
        record_rows(L, op, x, ids, out, outer, x->shape[dim], ids->numel, ids->strides[0],
                    (uint64_t)inner * lm_dtype_size(x->dtype));
    } else {
        lm_index_elems g = { .x = x, .ids = ids, .out = out, .ndim = x->ndim, .dim = dim, .size = x->shape[dim] };
        for (int k = 0; k < x->ndim; k++) {
            g.shape[k] = shape[k];
            g.xs[k] = x->strides[k];
            g.is[k] = k == dim ? ids->strides[0] : 0;
        }
        lm_record_index_elems(L, op, &g);
    }
    return 1;
}

/* lumus.embedding(ids, weight [, {out=}]): rows of weight [V, D] -> ids.shape .. [D]. */
int lm_op_embedding(lua_State *L) {
    lm_tensor *ids = lm_check_tensor(L, 1);
    lm_tensor *w = lm_check_tensor(L, 2);
    lm_check_options(L, 3, lm_out_option);
    check_ids(L, 1, ids);
    if (w->ndim != 2) {
        char s[256];
        lm_shape_string(w->shape, w->ndim, s, sizeof s);
        lm_argerror(L, 2, "weight must be a matrix [num_embeddings, embedding_dim], got shape %s", s);
    }
    if (ids->ndim == LM_MAX_DIMS)
        lm_argerror(L, 1, "ids may have at most %d dimensions (the result has one more)", LM_MAX_DIMS - 1);
    same_device(L, ids, w);
    int64_t shape[LM_MAX_DIMS];
    int ndim = ids->ndim + 1;
    memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    shape[ndim - 1] = w->shape[1];
    lm_check_result_size(L, ndim, shape);
    lua_settop(L, 3);
    lm_operands in = { { ids, w }, { "ids", "weight" } };
    lm_tensor *out = lm_push_out_dtype(L, 3, w->storage->ctx, w->dtype, ndim, shape, &in);
    ids = lm_check_tensor(L, 1);
    w = lm_check_tensor(L, 2);
    if (lm_tensor_is_contiguous(w) && lm_tensor_is_contiguous(ids)) {
        record_rows(L, "embedding", w, ids, out, 1, w->shape[0], ids->numel, 1,
                    (uint64_t)w->shape[1] * lm_dtype_size(w->dtype));
    } else {
        /* Dimension 0 selects (weight's rows); the ids' dimensions step only the ids. */
        lm_index_elems g = { .x = w, .ids = ids, .out = out, .ndim = ndim, .dim = 0, .size = w->shape[0] };
        for (int k = 0; k < ndim; k++) {
            g.shape[k] = shape[k];
            g.xs[k] = 0;
            g.is[k] = k < ids->ndim ? ids->strides[k] : 0;
        }
        g.xs[0] = w->strides[0];
        g.xs[ndim - 1] = w->strides[1];
        lm_record_index_elems(L, "embedding", &g);
    }
    return 1;
}

/* lumus.gather(x, dim, ids [, {out=}]): out[..., i, ...] = x[..., ids[..., i, ...], ...]
 * along dim (torch.gather): ids has x's dimension count, sizes at most x's off dim. */
int lm_op_gather(lua_State *L) {
    lm_tensor *x = lm_check_tensor(L, 1);
    int dim = lm_index_dim(L, 2, x->ndim);
    lm_tensor *ids = lm_check_tensor(L, 3);
    lm_check_options(L, 4, lm_out_option);
    check_ids(L, 3, ids);
    int fits = ids->ndim == x->ndim;
    for (int k = 0; fits && k < x->ndim; k++) fits = k == dim || ids->shape[k] <= x->shape[k];
    if (!fits) {
        char xs[256], is[256];
        lm_shape_string(x->shape, x->ndim, xs, sizeof xs);
        lm_shape_string(ids->shape, ids->ndim, is, sizeof is);
        lm_argerror(L, 3, "ids must have as many dimensions as x (shape %s), each at most x's size except "
                    "dimension %d, got shape %s", xs, dim + 1, is);
    }
    same_device(L, x, ids);
    lua_settop(L, 4);
    lm_operands in = { { x, ids }, { "x", "ids" } };
    lm_tensor *out = lm_push_out_dtype(L, 4, x->storage->ctx, x->dtype, ids->ndim, ids->shape, &in);
    x = lm_check_tensor(L, 1);
    ids = lm_check_tensor(L, 3);
    lm_index_elems g = { .x = x, .ids = ids, .out = out, .ndim = x->ndim, .dim = dim, .size = x->shape[dim] };
    for (int k = 0; k < x->ndim; k++) {
        g.shape[k] = ids->shape[k];
        g.xs[k] = x->strides[k];
        g.is[k] = ids->strides[k];
    }
    lm_record_index_elems(L, "gather", &g);
    return 1;
}
