/* lumus.softmax(x [, {dim = -1, out =}]) and lumus.log_softmax (same): over any
 * dimension. Over the last dimension (of size > 1) the row kernel (shaders/softmax.comp,
 * a workgroup or subgroup per row, any float dtype); over any other the column kernel
 * (shaders/softmax_cols.comp, coalesced along the dimensions inside the softmax one; a
 * short dimension held in registers, x read once; a long dimension over few columns split
 * over workgroups in two dispatches), which also takes few long rows of the last
 * dimension. out may be x itself (in place). */
#include "rows.h"
#include <string.h>

static const char *const keys[] = { "dim", "out", NULL };

/* [log][dtype][vec4: 4 adjacent columns per thread] */
static const lm_shader_id cols_shaders[2][3][2] = {
    { { LM_SH_SOFTMAX_COLS_F32, LM_SH_SOFTMAX_COLS_F32_VEC4 }, { LM_SH_SOFTMAX_COLS_F16, LM_SH_SOFTMAX_COLS_F16_VEC4 },
      { LM_SH_SOFTMAX_COLS_BF16, LM_SH_SOFTMAX_COLS_BF16_VEC4 } },
    { { LM_SH_LOG_SOFTMAX_COLS_F32, LM_SH_LOG_SOFTMAX_COLS_F32_VEC4 }, { LM_SH_LOG_SOFTMAX_COLS_F16, LM_SH_LOG_SOFTMAX_COLS_F16_VEC4 },
      { LM_SH_LOG_SOFTMAX_COLS_BF16, LM_SH_LOG_SOFTMAX_COLS_BF16_VEC4 } },
};

/* [log][dtype: float32, float16, bfloat16][element, vec4, masked vec4 (any d)] */
static const lm_shader_id row_shaders[2][3][3] = {
    { { LM_SH_SOFTMAX_VEC1, LM_SH_SOFTMAX_VEC4, LM_SH_SOFTMAX_ANY_D },
      { LM_SH_SOFTMAX_F16_VEC1, LM_SH_SOFTMAX_F16_VEC4, LM_SH_SOFTMAX_F16_ANY_D },
      { LM_SH_SOFTMAX_BF16_VEC1, LM_SH_SOFTMAX_BF16_VEC4, LM_SH_SOFTMAX_BF16_ANY_D } },
    { { LM_SH_LOG_SOFTMAX_VEC1, LM_SH_LOG_SOFTMAX_VEC4, LM_SH_LOG_SOFTMAX_ANY_D },
      { LM_SH_LOG_SOFTMAX_F16_VEC1, LM_SH_LOG_SOFTMAX_F16_VEC4, LM_SH_LOG_SOFTMAX_F16_ANY_D },
      { LM_SH_LOG_SOFTMAX_BF16_VEC1, LM_SH_LOG_SOFTMAX_BF16_VEC4, LM_SH_LOG_SOFTMAX_BF16_ANY_D } },
};

/* Rows of d = v.r contiguous elements (inner == 1: the dimension is the last one that is
 * not of size 1). */
/* shaders/softmax.comp's push constants */
typedef struct row_push {
    uint64_t x, y, rows;
    uint32_t n, d, groups_x, chunk;
    uint64_t st;
    uint32_t splits, flags;
} row_push;
#define STATS_OUT 1u
#define STATS_IN 2u

static lm_shader_id row_shader(int log, const lm_tensor *x, const lm_row_plan *c) {
    int form = x->dtype == LM_FLOAT16 ? 1 : x->dtype == LM_BFLOAT16 ? 2 : 0;
    return row_shaders[log][form][c->any_d ? 2 : c->vec == 4];
}

static void record_row_form(lua_State *L, const char *name, int log, lm_tensor *x, lm_dim_view v, lm_tensor *y) {
    int64_t d = v.r, rows = v.outer;
    lm_row_plan c = lm_plan_softmax(x->storage->ctx, d, 1);
    row_push pc = { .x = lm_tensor_address(x), .y = lm_tensor_address(y), .rows = (uint64_t)rows,
                    .n = c.n, .d = (uint32_t)d, .splits = 1 };
    lm_record_rows(L, name, row_shader(log, x, &c), &c, rows, &pc, sizeof pc, &pc.groups_x, x, y);
}

/* Split form (few long rows): each row as chunks of vectors, a SPLIT_WG-thread workgroup
 * per chunk, SPLIT_GROUPS_PER_SM workgroups per multiprocessor over all rows, no chunk
 * shorter than SPLIT_MIN_CHUNK vectors (forced: at least two chunks of any length, so
 * short rows and many rows split too),
 * at most a workgroup's threads of chunks per row (the second dispatch combines a row's
 * pairs a thread each). Two dispatches: the chunks' (max, sum) pairs, then the outputs
 * (x read twice: worth it only while too few rows would leave multiprocessors idle). */
#define SPLIT_WG 256u
#define SPLIT_GROUPS_PER_SM 4u
#define SPLIT_MIN_CHUNK 2048u

typedef struct split_plan { lm_row_plan c; uint32_t chunk, splits; } split_plan;

static int plan_split(const lm_context *ctx, lm_dim_view v, int forced, split_plan *out) {
    split_plan sp;
    sp.c = lm_plan_softmax(ctx, v.r, 1);
    uint32_t n = sp.c.n;
    uint32_t wg = SPLIT_WG, max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    while (wg > max_wg) wg /= 2;
    uint64_t sms = ctx->sm_count ? ctx->sm_count : lm_groups_wanted(ctx) / 8;
    uint64_t want = (sms ? sms : 1) * SPLIT_GROUPS_PER_SM;
    uint64_t splits = (want + v.outer - 1) / v.outer;
    if (forced && splits < 2) splits = 2;
    uint64_t most = forced ? n : n / SPLIT_MIN_CHUNK;
    if (most > wg) most = wg;
    if (splits > most) splits = most;
    if (splits < 2) return 0;
    sp.chunk = (uint32_t)((n + splits - 1) / splits);
    sp.splits = (uint32_t)((n + sp.chunk - 1) / sp.chunk);   /* still >= 2: splits <= n */
    sp.c.wg = wg;
    sp.c.items = 1;
    sp.c.rows_per_group = 1;
    *out = sp;
    return 1;
}

static void record_split_form(lua_State *L, const char *name, int log, lm_tensor *x, lm_dim_view v, lm_tensor *y,
                              const split_plan *sp) {
    lm_context *ctx = x->storage->ctx;
    int64_t n = (int64_t)v.outer * sp->splits * 2;
    lm_tensor *states = lm_push_tensor(L, ctx, 1, &n);   /* float32 (max, sum) pairs */
    row_push pc = { .x = lm_tensor_address(x), .y = lm_tensor_address(y), .rows = v.outer, .n = sp->c.n,
                    .d = v.r, .chunk = sp->chunk, .st = lm_tensor_address(states), .splits = sp->splits };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (uint64_t)v.outer * sp->splits, &gy);
    lm_shader_id shader = row_shader(log, x, &sp->c);
    pc.flags = STATS_OUT;
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = name, .any_dtype = 1, .shader = shader, .spec = { sp->c.wg, 1, 1, 4 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x }, .writes = { states },
    });
    pc.flags = STATS_IN;
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = name, .any_dtype = 1, .shader = shader, .spec = { sp->c.wg, 1, 1, 4 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x, states }, .writes = { y },
    });
    lua_pop(L, 1);   /* the pairs: collected once the stream is done with them */
}

/* [log][dtype] */
static const lm_shader_id tile_shaders[2][3] = {
    { LM_SH_SOFTMAX_TILE_F32, LM_SH_SOFTMAX_TILE_F16, LM_SH_SOFTMAX_TILE_BF16 },
    { LM_SH_LOG_SOFTMAX_TILE_F32, LM_SH_LOG_SOFTMAX_TILE_F16, LM_SH_LOG_SOFTMAX_TILE_BF16 },
};

/* Tile form (shaders/softmax_tile.comp): runs of whole rows through shared memory in
 * 16-byte units over TILE_WG threads, TILE_ELEMS elements (TILE_ELEMS_LANE_ROWS where a
 * lane takes a row) whatever the dtype, a row per segment of lanes holding at most
 * TILE_HOLD elements each. On the H100 (bench/short_rows.lua, 64M elements, % of copy):
 * float32 rows of 1-8 took 88-95 with runs of 2048 elements against 67-72 with 4096 and
 * 49-56 with 8192 or more, rows of 11-16 72-73 against 64-65; rows of 23 and longer, whose
 * segments are wider, 61-62 with 4096 against 50 with 2048; float16 runs of 4096 elements
 * (one unit per thread) 44-57 against 33-43 with 8192. The automatic choice takes the
 * tile form on a GPU for rows of at most TILE_AUTO_MAX_D: the row kernel gave float32
 * rows of 1 2.2%, of 13 26, of 32 53 (float16 1.1, 14, 28), and won from 48 on (float32
 * 74 against 62, float16 at 64 54 against 46). */
#define TILE_WG 512u
#define TILE_ELEMS 4096u
#define TILE_ELEMS_LANE_ROWS 2048u
#define TILE_HOLD 16u
#define TILE_AUTO_MAX_D 32

typedef struct tile_plan { uint32_t wg, items, seg, hold, rows_per_group; } tile_plan;

/* The tile form's plan for rows of d, or 0 where the device or d does not allow it: a
 * segment wider than one lane needs whole subgroups of one size that tile the workgroup,
 * and every form needs shuffles (the shader declares them). */
static int plan_tile(const lm_context *ctx, lm_dtype dtype, int64_t d, tile_plan *out) {
    tile_plan c;
    uint32_t unit = dtype == LM_FLOAT32 ? 4u : 8u;
    uint32_t max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    c.wg = TILE_WG;
    while (c.wg > max_wg) c.wg /= 2;
    c.seg = 1;
    while ((uint64_t)c.seg * TILE_HOLD < (uint64_t)d) c.seg *= 2;
    if (c.seg == 1 && !ctx->softmax_tile_items) {   /* one unit per thread, TILE_ELEMS_LANE_ROWS per run */
        while (c.wg > 32 && c.wg * unit > TILE_ELEMS_LANE_ROWS) c.wg /= 2;
        c.items = 1;
    } else {
        c.items = ctx->softmax_tile_items ? ctx->softmax_tile_items : TILE_ELEMS / (c.wg * unit);
    }
    if (c.items < 1) c.items = 1;
    while (c.items > 1 && (uint64_t)c.wg * c.items * unit * 33 / 32 * 4 > ctx->props.limits.maxComputeSharedMemorySize)
        c.items--;
    if ((uint64_t)c.wg * c.items * unit * 33 / 32 * 4 > ctx->props.limits.maxComputeSharedMemorySize) return 0;
    c.hold = 1;
    while ((uint64_t)c.seg * c.hold < (uint64_t)d) c.hold *= 2;
    uint64_t elems = (uint64_t)c.wg * c.items * unit;
    if (!ctx->subgroup_shuffle || elems < (uint64_t)d + unit - 1) return 0;
    if (c.seg > 1 && !(ctx->full_subgroups && ctx->min_subgroup == ctx->max_subgroup && ctx->min_subgroup >= c.seg &&
                       c.wg % ctx->max_subgroup == 0))
        return 0;
    c.rows_per_group = (uint32_t)((elems - (unit - 1)) / (uint64_t)d);
    *out = c;
    return 1;
}

/* Whether softmax over rows of d (the last dimension) takes the tile form. */
static int tile_wanted(const lm_context *ctx, int64_t d) {
    if (ctx->softmax_short_rows == LM_SOFTMAX_SHORT_ROWS_ROW) return 0;
    if (ctx->softmax_short_rows == LM_SOFTMAX_SHORT_ROWS_TILE) return 1;
    return ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU && d <= TILE_AUTO_MAX_D;
}

static void record_tile_form(lua_State *L, const char *name, int log, lm_tensor *x, lm_dim_view v, lm_tensor *y,
                             const tile_plan *c) {
    lm_context *ctx = x->storage->ctx;
    struct { uint64_t x, y; uint32_t rows, d, rows_per_group, groups_x; } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y), .rows = v.outer, .d = v.r,
        .rows_per_group = c->rows_per_group,
    };
    int form = x->dtype == LM_FLOAT16 ? 1 : x->dtype == LM_BFLOAT16 ? 2 : 0;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, ((uint64_t)v.outer + c->rows_per_group - 1) / c->rows_per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = name, .any_dtype = 1, .shader = tile_shaders[log][form], .spec = { c->wg, c->items, c->seg, c->hold },
        .full_subgroups = c->seg > 1,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x }, .writes = { y },
    });
}

/* Rows of r each thread should at least take before r is split over workgroups. */
#define COL_MIN_ROWS_PER_THREAD 16
#define STATE_IN 1u
#define STATE_OUT 2u

/* Units (rows of a column) each thread holds in registers in the held form: as
 * shaders/softmax_cols.comp's HOLD. */
#define SOFTMAX_COLS_HOLD 16
/* The automatic choice takes the held form for float32 with r up to this; 16-bit inputs
 * and longer r stream: on the H200 the held form was slower than streaming for those
 * (bench/softmax_cols_forms.lua). "held" forces it wherever r fits. */
#define SOFTMAX_HELD_AUTO_MAX_R 1024

/* The held form's plan (x read once): lanes enough for r at SOFTMAX_COLS_HOLD units each,
 * the other threads of the workgroup columns, at least one 32-byte sector of adjacent
 * units per row step (fewer columns than that: not held), no more columns than keep the
 * grid as large as the device wants. Returns 0 when r does not fit. */
static int plan_held(const lm_context *ctx, lm_dim_view v, unsigned unit_bytes, uint32_t wg, lm_col_plan *out) {
    uint64_t need = ((uint64_t)v.r + SOFTMAX_COLS_HOLD - 1) / SOFTMAX_COLS_HOLD;
    uint32_t lanes = 1;
    while (lanes < need && lanes <= wg) lanes <<= 1;
    uint32_t min_cols = LM_COL_MIN_BYTES_SOFTMAX / unit_bytes;
    if (min_cols < 1) min_cols = 1;
    if (lanes > wg || (uint64_t)lanes * min_cols > wg) return 0;
    uint64_t columns = (uint64_t)v.outer * v.inner, want = lm_groups_wanted(ctx);
    if (columns < min_cols) return 0;
    lm_col_plan c = { .wg = wg, .cols = wg / lanes };
    while (c.cols > min_cols && (columns + c.cols - 1) / c.cols < want) c.cols /= 2;
    c.groups = (columns + c.cols - 1) / c.cols;
    c.col_groups = (uint32_t)c.groups;
    *out = c;
    return 1;
}

/* Columns (inner > 1): one dispatch, or, when the column blocks alone cannot fill the
 * device (few columns, long r), two: per-chunk (max, sum) pairs, then each chunk's
 * outputs from all of its column's pairs. A short enough r takes the held form (one
 * dispatch, x read once) instead. */
static void record_cols_form(lua_State *L, const char *name, int log, lm_tensor *x, lm_dim_view v, lm_tensor *y) {
    lm_context *ctx = x->storage->ctx;
    /* 4 adjacent columns per thread (x and y are plain: 16-byte aligned) */
    int vec4 = v.inner % 4 == 0;
    unsigned unit_bytes = lm_dtype_size(x->dtype) * (vec4 ? 4u : 1u);
    if (vec4) v.inner /= 4;
    lm_col_plan c = lm_plan_cols(ctx, v, unit_bytes, v.r, LM_COL_MIN_BYTES_REDUCE, 1);
    uint32_t lanes = c.wg / c.cols;
    uint64_t want = lm_groups_wanted(ctx);
    uint64_t splits = 1;
    lm_col_plan held;
    int held_wanted = ctx->softmax_cols_form == LM_SOFTMAX_COLS_HELD ||
                      (ctx->softmax_cols_form == LM_SOFTMAX_COLS_AUTO && x->dtype == LM_FLOAT32 &&
                       v.r <= SOFTMAX_HELD_AUTO_MAX_R);
    uint32_t is_held = held_wanted && plan_held(ctx, v, unit_bytes, c.wg, &held);
    if (is_held) c = held;
    else if (c.groups < want) {
        uint64_t most = (uint64_t)v.r / ((uint64_t)lanes * COL_MIN_ROWS_PER_THREAD);
        splits = (want + c.groups - 1) / c.groups;
        if (splits > most) splits = most ? most : 1;
    }
    uint32_t chunk = v.r;
    if (splits > 1) {
        chunk = (uint32_t)(((uint64_t)v.r + splits - 1) / splits);
        splits = ((uint64_t)v.r + chunk - 1) / chunk;
    }
    if (splits == 1 && !is_held) {   /* cannot split: narrow the column blocks as far as one sector instead */
        c = lm_plan_cols(ctx, v, unit_bytes, v.r, LM_COL_MIN_BYTES_SOFTMAX, 1);
    }
    struct { uint64_t x, y, st; uint32_t outer, r, inner, chunk, splits, flags, col_groups, groups_x; } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y),
        .outer = v.outer, .r = v.r, .inner = v.inner, .chunk = chunk, .splits = (uint32_t)splits,
        .col_groups = c.col_groups,
    };
    int form = x->dtype == LM_FLOAT16 ? 1 : x->dtype == LM_BFLOAT16 ? 2 : 0;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, c.groups * splits, &gy);
    lm_tensor *states = NULL;
    if (splits > 1) {
        int64_t n = (int64_t)v.outer * (int64_t)splits * v.inner * 2 * (vec4 ? 4 : 1);
        states = lm_push_tensor(L, ctx, 1, &n);   /* float32 (max, sum) pairs (of vec4s) */
        pc.st = lm_tensor_address(states);
        pc.flags = STATE_OUT;
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = name, .any_dtype = 1, .shader = cols_shaders[log][form][vec4], .spec = { c.wg, c.cols, is_held },
            .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { x }, .writes = { states },
        });
        pc.flags = STATE_IN;
    }
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = name, .any_dtype = 1, .shader = cols_shaders[log][form][vec4], .spec = { c.wg, c.cols, is_held },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x, states }, .writes = { y },
    });
    if (states) lua_pop(L, 1);   /* the pairs: collected once the stream is done with them */
}

/* Rows of at least this many elements, at most a quarter as many as the device has
 * multiprocessors, go to the column kernel's split form under long_rows = "cols" (forced);
 * "auto" and "split" take the row kernel's split form instead (plan_split). */
#define LONG_ROW_MIN 65536

static int long_rows_as_columns(const lm_context *ctx, lm_dim_view v) {
    return ctx->softmax_long_rows == LM_SOFTMAX_LONG_ROWS_COLS && v.r >= LONG_ROW_MIN;
}

/* The automatic choice of the split form: rows of at least SPLIT_AUTO_MIN_D elements, at
 * most half as many as multiprocessors (the row kernel leaves the rest idle), x of at
 * least SPLIT_AUTO_MIN_ELEMS elements (the second dispatch's fixed cost amortized). On
 * the H100 (bench/softmax_rows_forms.lua): 37 rows of 635335 took 41% of copy by rows
 * and 57 split (float16 33 and 52); 37-130 rows of 32925-229109 (x of 1.2M-30M elements)
 * lost 0-17 points split (39x32925 50 -> 36, 103x50127 73 -> 58). */
#define SPLIT_AUTO_MIN_D 65536
#define SPLIT_AUTO_MIN_ELEMS (1u << 24)

static int split_wanted(const lm_context *ctx, lm_dim_view v, split_plan *sp) {
    if (ctx->softmax_long_rows == LM_SOFTMAX_LONG_ROWS_SPLIT) return plan_split(ctx, v, 1, sp);
    if (ctx->softmax_long_rows != LM_SOFTMAX_LONG_ROWS_AUTO || ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
        return 0;
    uint64_t sms = ctx->sm_count ? ctx->sm_count : lm_groups_wanted(ctx) / 8;
    return v.r >= SPLIT_AUTO_MIN_D && (uint64_t)v.outer * 2 <= sms &&
           (uint64_t)v.outer * v.r >= SPLIT_AUTO_MIN_ELEMS && plan_split(ctx, v, 0, sp);
}

static int softmax(lua_State *L, const char *name, int log) {
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, keys);
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_context *ctx = x->storage->ctx;
    lm_check_float_input(L, x, ctx);
    int dim = lm_dim_option(L, 2, x, x->ndim - 1);
    lm_dim_view v = lm_dim_view_of(L, x, dim);
    lua_settop(L, 2);
    lm_tensor *y = lm_push_result(L, 2, "out", ctx, x->dtype, x->ndim, x->shape, x, 1);
    x = lm_check_tensor(L, 1);
    tile_plan tp;
    split_plan sp;
    if (v.inner == 1 && tile_wanted(ctx, v.r) && plan_tile(ctx, x->dtype, v.r, &tp))
        record_tile_form(L, name, log, x, v, y, &tp);
    else if (v.inner == 1 && split_wanted(ctx, v, &sp)) record_split_form(L, name, log, x, v, y, &sp);
    else if (v.inner == 1 && !long_rows_as_columns(ctx, v)) record_row_form(L, name, log, x, v, y);
    else record_cols_form(L, name, log, x, v, y);
    return 1;
}

/* tune.softmax_cols([{form = "auto" | "stream" | "held", long_rows = "auto" | "row" |
 * "cols"}]) -> the settings: form "stream" keeps softmax over a non-last dimension off the
 * held form (so specs cover the streaming and split forms on shapes where held would be
 * chosen); "held" and "auto" both take the held form wherever r fits it. long_rows (of the
 * last dimension): the row kernel's split form for few long rows on a GPU ("auto", see
 * split_wanted), for every row it can split ("split"), never ("row"), or rows of at least
 * LONG_ROW_MIN elements by the column kernel ("cols").
 * short_rows: rows of the last dimension by the tile form wherever it fits ("tile"),
 * never ("row"), or on a GPU for rows of at most TILE_AUTO_MAX_D ("auto"); tile_items: the
 * tile form's 16-byte units per thread (0: automatic), fewer where shared memory is short. */
int lm_op_softmax_cols_config(lua_State *L) {
    static const char *const known[] = { "form", "long_rows", "short_rows", "tile_items", NULL };
    static const char *const long_forms[] = { "auto", "row", "cols", "split", NULL };
    static const char *const short_forms[] = { "auto", "tile", "row", NULL };
    static const char *const forms[] = { "auto", "stream", "held" };
    lm_context *ctx = lm_context_get(L);
    if (lm_check_options(L, 1, known)) {
        lm_push_option(L, 1, "form");
        if (!lua_isnil(L, -1)) {
            const char *f = lua_tostring(L, -1);
            int found = -1;
            for (int i = 0; i < 3; i++)
                if (f && lua_type(L, -1) == LUA_TSTRING && strcmp(f, forms[i]) == 0) found = i;
            if (found < 0) lm_argerror(L, 1, "form must be \"auto\", \"stream\" or \"held\"");
            ctx->softmax_cols_form = found;
        }
        lua_pop(L, 1);
        int long_rows = lm_option_choice(L, 1, "long_rows", long_forms, ctx->softmax_long_rows);
        int short_rows = lm_option_choice(L, 1, "short_rows", short_forms, ctx->softmax_short_rows);
        lua_Integer items = lm_option_integer(L, 1, "tile_items", ctx->softmax_tile_items);
        if (items < 0 || items > 8) lm_argerror(L, 1, "tile_items must be in 0..8 (0: automatic), got %I", (LUAI_UACINT)items);
        ctx->softmax_long_rows = long_rows;
        ctx->softmax_short_rows = short_rows;
        ctx->softmax_tile_items = (uint32_t)items;
    }
    lua_createtable(L, 0, 4);
    lua_pushstring(L, forms[ctx->softmax_cols_form]);
    lua_setfield(L, -2, "form");
    lua_pushstring(L, long_forms[ctx->softmax_long_rows]);
    lua_setfield(L, -2, "long_rows");
    lua_pushstring(L, short_forms[ctx->softmax_short_rows]);
    lua_setfield(L, -2, "short_rows");
    lua_pushinteger(L, ctx->softmax_tile_items);
    lua_setfield(L, -2, "tile_items");
    return 1;
}

int lm_op_softmax(lua_State *L) { return softmax(L, "softmax", 0); }
int lm_op_log_softmax(lua_State *L) { return softmax(L, "log_softmax", 1); }
