/* Shape and option checks and workgroup choice shared by the row kernels (see rows.h). */
#include "rows.h"
#include <lauxlib.h>

void lm_check_float_input(lua_State *L, const lm_tensor *x, const lm_context *ctx) {
    if (x->dtype != LM_FLOAT32 && x->dtype != LM_FLOAT16 && x->dtype != LM_BFLOAT16)
        lm_argerror(L, 1, "x must be float32, float16 or bfloat16, got %s", lm_dtype_name(x->dtype));
    if (x->dtype != LM_FLOAT32 && !ctx->narrow_storage)
        luaL_error(L, "%s: this device lacks 8/16-bit storage", lm_fname(L));
}

lm_tensor *lm_push_result(lua_State *L, int argn, const char *key, lm_context *ctx, lm_dtype dtype,
                          int ndim, const int64_t *shape, const lm_tensor *x, int in_place) {
    lm_push_option(L, argn, key);
    lm_tensor *out = lm_check_out(L, -1, argn, key, ndim, shape);
    if (!out) {
        lua_pop(L, 1);
        return lm_push_tensor_dtype(L, ctx, dtype, ndim, shape);
    }
    if (out->dtype != dtype)
        lm_argerror(L, argn, "%s must be %s, got %s", key, lm_dtype_name(dtype), lm_dtype_name(out->dtype));
    if (out->storage->ctx != ctx) lm_argerror(L, argn, "%s belongs to a different device", key);
    if (x->storage && lm_tensors_overlap(out, x) && !(in_place && lm_tensors_same_memory(x, out)))
        lm_argerror(L, argn, in_place ? "%s overlaps x without being the same elements" : "%s overlaps x (an input of this op)", key);
    return out;
}

static uint32_t pow2_at_least(uint64_t v) { uint32_t p = 1; while (p < v) p <<= 1; return p; }

int lm_dim_option(lua_State *L, int arg, const lm_tensor *x, int absent) {
    lm_push_option(L, arg, "dim");
    int given = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (!given) return absent;
    lua_Integer dim = lm_option_integer(L, arg, "dim", -1);
    if (dim == 0 || dim > x->ndim || dim < -x->ndim)
        lm_argerror(L, arg, "dim %I is out of range for a %d-D tensor (dims are 1-based; -1 is the last)",
                    (LUAI_UACINT)dim, x->ndim);
    return (int)(dim < 0 ? dim + x->ndim : dim - 1);
}

lm_dim_view lm_dim_view_of(lua_State *L, const lm_tensor *x, int dim) {
    int64_t outer = 1, r = x->numel, inner = 1;
    if (dim >= 0) {
        r = x->shape[dim];
        for (int i = 0; i < dim; i++) outer *= x->shape[i];
        for (int i = dim + 1; i < x->ndim; i++) inner *= x->shape[i];
    }
    if (r > 0x7fffffff) lm_argerror(L, 1, "the reduced dimension is too large (at most 2^31-1 elements)");
    if (outer > 0xffffffffLL || inner > 0xffffffffLL)
        lm_argerror(L, 1, "the dimensions outside the reduced one are too large (at most 2^32-1 elements)");
    return (lm_dim_view){ (uint32_t)outer, (uint32_t)r, (uint32_t)inner };
}

/* Workgroups per SM (or per CPU worker) the column kernels aim for. */
#define COL_GROUPS_PER_SM 8
#define COL_GROUPS_GPU 1024
#define COL_GROUPS_CPU 8
#define COL_WG 256

uint64_t lm_groups_wanted(const lm_context *ctx) {
    if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) return COL_GROUPS_CPU;
    return ctx->sm_count ? (uint64_t)ctx->sm_count * COL_GROUPS_PER_SM : COL_GROUPS_GPU;
}


/* Loaded units (elements or vec4s) per lane to aim for over a short last dimension
 * (GPU, CPU device), before rows share a workgroup. */
#define COL_UNITS_PER_LANE 8
#define COL_UNITS_PER_LANE_CPU 64

lm_col_plan lm_plan_cols(const lm_context *ctx, lm_dim_view v, unsigned elem_bytes, uint32_t units,
                          unsigned min_bytes, unsigned per_lane_scale) {
    lm_col_plan c;
    uint32_t wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (wg > ctx->props.limits.maxComputeWorkGroupSize[0]) wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    c.wg = wg < COL_WG ? pow2_at_least(wg + 1) / 2 : COL_WG;
    uint64_t columns = (uint64_t)v.outer * v.inner;
    uint64_t want = lm_groups_wanted(ctx);
    if (v.inner == 1) {
        /* Rows: lanes enough for the row, the rest of the workgroup takes more rows. */
        uint64_t per_lane = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? COL_UNITS_PER_LANE_CPU : COL_UNITS_PER_LANE;
        uint32_t lanes = pow2_at_least(((uint64_t)units + per_lane - 1) / per_lane);
        /* A scaled lane takes more units only where the row is long enough to keep a whole
         * subgroup of lanes: on short rows fewer lanes only lengthen each lane's serial part. */
        uint32_t sg = ctx->subgroup_size ? ctx->subgroup_size : 32;
        if (per_lane_scale > 1 && lanes >= sg) {
            uint64_t scaled = per_lane * per_lane_scale;
            lanes = pow2_at_least(((uint64_t)units + scaled - 1) / scaled);
            if (lanes < sg) lanes = sg;
        }
        if (lanes > c.wg) lanes = c.wg;
        c.cols = c.wg / lanes;
        /* Not so many rows per workgroup that the grid is smaller than wanted. */
        while (c.cols > 1 && (columns + c.cols - 1) / c.cols < want) c.cols /= 2;
    } else {
        c.cols = v.inner >= c.wg ? c.wg : pow2_at_least(v.inner);
        uint32_t min_cols = min_bytes / elem_bytes;
        if (min_cols < 1) min_cols = 1;
        while (c.cols > min_cols && (columns + c.cols - 1) / c.cols < want) c.cols /= 2;
    }
    c.groups = (columns + c.cols - 1) / c.cols;
    c.col_groups = (uint32_t)c.groups;
    return c;
}

/* The subgroup form: a 256-thread workgroup of whole subgroups, rows of up to 4 vectors
 * per lane (as layer_norm's subgroup form). */
#define ROW_SUBGROUP_WG 256
#define ROW_SUBGROUP_ITEMS 4

/* Vectors per thread to aim for, and the most held in registers before the rest of a row
 * streams: as layer_norm found on the H200 (4, at most 8 without spilling) and on
 * lavapipe (wider threads: each workgroup runs on one CPU thread, barriers are costly). */
#define SOFTMAX_ITEMS 4
#define SOFTMAX_ITEMS_CPU 16
#define SOFTMAX_MAX_ITEMS 8
/* Workgroups wider than this only where the row would not fit their registers at the
 * most items per thread. */
#define ROW_WIDE_WG 512


/* Threads per row aiming at `target` vectors each, at most `max_items` held; rows of at
 * most 4 vectors per lane of the smallest subgroup take a subgroup each. */
static lm_row_plan plan_rows(const lm_context *ctx, int64_t d, uint32_t target, uint32_t max_items, int any_d_ok) {
    lm_row_plan c;
    c.any_d = 0;
    c.vec = d % 4 == 0 ? 4 : 1;
    c.n = (uint32_t)(d / c.vec);
    uint32_t max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    if (max_wg > 1024) max_wg = 1024;
    uint32_t sg = ctx->min_subgroup ? ctx->min_subgroup : 1;
    int subgroups_ok = !ctx->row_wg && ctx->full_subgroups && ROW_SUBGROUP_WG <= max_wg &&
                       ROW_SUBGROUP_WG % ctx->max_subgroup == 0;
    /* A row whose d is not a multiple of 4 is read as the masked vectors that cover it (a
     * row of skew 3 spans (d + 6) / 4), except where it is short enough for a subgroup
     * read element-wise: on the H100, masked vectors took softmax over rows of 37-127
     * (a subgroup's, element-wise) from 60-86% of copy to 45-81, and rows of 226 from
     * 92 (element-wise, a workgroup each) to 100 (masked, a subgroup each). */
    if (d % 4 != 0 && any_d_ok && !ctx->row_scalar && !(subgroups_ok && c.n <= ROW_SUBGROUP_ITEMS * sg)) {
        c.any_d = 1;
        c.vec = 4;
        c.n = (uint32_t)((d + 6) / 4);
    }
    if (subgroups_ok && c.n <= ROW_SUBGROUP_ITEMS * sg) {
        c.wg = ROW_SUBGROUP_WG;
        c.rows_per_group = ROW_SUBGROUP_WG / sg;
        c.items = (c.n + sg - 1) / sg;
        return c;
    }
    c.rows_per_group = 1;
    /* At least 32 threads and one whole subgroup, so that no subgroup is partial. */
    uint32_t lo = ctx->max_subgroup > 32 ? ctx->max_subgroup : 32;
    uint32_t wg = pow2_at_least(((uint64_t)c.n + target - 1) / target);
    if (wg < lo) wg = lo;
    if (wg > max_wg) wg = max_wg;
    /* Fewer, fuller threads where the row still fits their registers: on the H100,
     * softmax over rows of 2109 and 2537 vectors at 512 x 5 reached 98-99% of copy
     * against 78-85 at 1024 x 3 (float16 89-95 against 74-79). */
    while (wg > ROW_WIDE_WG && wg > lo && (uint64_t)(wg / 2) * max_items >= c.n) wg /= 2;
    if (ctx->row_wg) wg = ctx->row_wg;
    c.wg = wg;
    uint32_t items = (c.n + wg - 1) / wg;
    c.items = items > max_items ? max_items : items;
    if (ctx->row_items) c.items = ctx->row_items;
    return c;
}

lm_row_plan lm_plan_softmax(const lm_context *ctx, int64_t d, int any_d_ok) {
    int cpu = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    return plan_rows(ctx, d, cpu ? SOFTMAX_ITEMS_CPU : SOFTMAX_ITEMS, cpu ? SOFTMAX_ITEMS_CPU : SOFTMAX_MAX_ITEMS,
                     any_d_ok);
}

/* The streamed step (specialization constant 3 of shaders/softmax.comp): 1 where the
 * plan holds every vector of a row in registers, else 4. */
static uint32_t row_stream(const lm_context *ctx, const lm_row_plan *c) {
    uint32_t width = c->rows_per_group > 1 ? (ctx->min_subgroup ? ctx->min_subgroup : 1) : c->wg;
    return (uint64_t)width * c->items >= c->n ? 1u : 4u;
}

void lm_record_rows(lua_State *L, const char *op, lm_shader_id shader, const lm_row_plan *c,
                    int64_t rows, void *push, uint32_t push_bytes, uint32_t *groups_x,
                    lm_tensor *x, lm_tensor *y) {
    lm_context *ctx = x->storage->ctx;
    uint32_t gy;
    *groups_x = lm_grid(L, ctx, ((uint64_t)rows + c->rows_per_group - 1) / c->rows_per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = shader, .spec = { c->wg, c->items, c->rows_per_group, row_stream(ctx, c) },
        .full_subgroups = c->rows_per_group > 1,
        .push = push, .push_bytes = push_bytes, .groups_x = *groups_x, .groups_y = gy,
        .reads = { x }, .writes = { y },
    });
}

/* tune.rows(d [, {wg =, items =, scalar =}]) -> {workgroup =, items =, vec =, masked =,
 * rows_per_group =} for softmax rows of d; the overrides (0 or absent: automatic; a wg also
 * turns the subgroup form off; scalar = true reads rows whose d is not a multiple of 4 an
 * element at a time instead of as masked vectors) hold for later softmax and sum calls, so
 * specs can run the workgroup, streaming and element-wise paths on short rows. */
int lm_op_row_config(lua_State *L) {
    static const char *const known[] = { "wg", "items", "scalar", NULL };
    lua_Integer d = lm_check_integer(L, 1);
    if (d < 1 || d > 0x7fffffff) lm_argerror(L, 1, "d must be in 1..2^31-1");
    lm_context *ctx = lm_context_get(L);
    if (lm_check_options(L, 2, known)) {
        lua_Integer wg = lm_option_integer(L, 2, "wg", 0);
        if (!(wg == 0 || (wg >= 1 && wg <= 1024 && (wg & (wg - 1)) == 0))) lm_argerror(L, 2, "wg must be a power of two up to 1024");
        lua_Integer items = lm_option_integer(L, 2, "items", 0);
        if (items < 0 || items > 64) lm_argerror(L, 2, "items must be in 0..64");
        ctx->row_scalar = lm_option_boolean(L, 2, "scalar", 0);
        ctx->row_wg = (uint32_t)wg;
        ctx->row_items = (uint32_t)items;
    }
    lm_row_plan c = lm_plan_softmax(ctx, d, 1);
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, c.wg); lua_setfield(L, -2, "workgroup");
    lua_pushinteger(L, c.items); lua_setfield(L, -2, "items");
    lua_pushinteger(L, c.vec); lua_setfield(L, -2, "vec");
    lua_pushboolean(L, c.any_d); lua_setfield(L, -2, "masked");
    lua_pushinteger(L, c.rows_per_group); lua_setfield(L, -2, "rows_per_group");
    return 1;
}
