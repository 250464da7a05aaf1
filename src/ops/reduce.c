/* Reductions over one dimension or over everything (shaders/reduce.comp):
 *   lumus.sum(x [, {dim =, keepdim =, out =}]), lumus.mean (same),
 *   lumus.var(x [, {dim =, keepdim =, correction = 1, out =}]),
 *   lumus.max(x [, {dim =, keepdim =, out =, indices =}]), lumus.min (same),
 *   lumus.argmax(x [, {dim =, keepdim =, out =}]), lumus.argmin (same).
 * Without dim: over all elements, to shape {1} (keepdim: every dimension 1). With dim:
 * x's shape without it ({1} for a 1-D x), or with it as 1 (keepdim). max/min with dim
 * return values and int32 1-based indices; argmax/argmin return the indices only (over
 * the flattened x without dim). Values keep x's dtype (float32, float16, bfloat16; the
 * kernels accumulate in float32). */
#include "rows.h"
#include "group_counters.h"
#include <string.h>

enum { OP_SUM, OP_VAR, OP_MAX, OP_MIN };
/* Kernel forms: [dtype][loads: 1 element, 4 elements, 8 elements (16-bit dtypes) of a
 * row, 4 adjacent columns]; the row loads need inner == 1 and r a multiple of the width,
 * the column load inner a multiple of 4 (rows or columns then start aligned: x is
 * plain, 16-byte aligned). */
enum { FORM_F32, FORM_F16, FORM_BF16 };
enum { LOAD_1, LOAD_4, LOAD_8, LOAD_COLS4 };

static const lm_shader_id shaders[4][3][4] = {
    { { LM_SH_REDUCE_SUM_F32, LM_SH_REDUCE_SUM_F32_VEC4, 0, LM_SH_REDUCE_SUM_F32_COLS4 },
      { LM_SH_REDUCE_SUM_F16, LM_SH_REDUCE_SUM_F16_VEC4, LM_SH_REDUCE_SUM_F16_VEC8, LM_SH_REDUCE_SUM_F16_COLS4 },
      { LM_SH_REDUCE_SUM_BF16, LM_SH_REDUCE_SUM_BF16_VEC4, LM_SH_REDUCE_SUM_BF16_VEC8, LM_SH_REDUCE_SUM_BF16_COLS4 } },
    { { LM_SH_REDUCE_VAR_F32, LM_SH_REDUCE_VAR_F32_VEC4, 0, LM_SH_REDUCE_VAR_F32_COLS4 },
      { LM_SH_REDUCE_VAR_F16, LM_SH_REDUCE_VAR_F16_VEC4, LM_SH_REDUCE_VAR_F16_VEC8, LM_SH_REDUCE_VAR_F16_COLS4 },
      { LM_SH_REDUCE_VAR_BF16, LM_SH_REDUCE_VAR_BF16_VEC4, LM_SH_REDUCE_VAR_BF16_VEC8, LM_SH_REDUCE_VAR_BF16_COLS4 } },
    { { LM_SH_REDUCE_MAX_F32, LM_SH_REDUCE_MAX_F32_VEC4, 0, LM_SH_REDUCE_MAX_F32_COLS4 },
      { LM_SH_REDUCE_MAX_F16, LM_SH_REDUCE_MAX_F16_VEC4, LM_SH_REDUCE_MAX_F16_VEC8, LM_SH_REDUCE_MAX_F16_COLS4 },
      { LM_SH_REDUCE_MAX_BF16, LM_SH_REDUCE_MAX_BF16_VEC4, LM_SH_REDUCE_MAX_BF16_VEC8, LM_SH_REDUCE_MAX_BF16_COLS4 } },
    { { LM_SH_REDUCE_MIN_F32, LM_SH_REDUCE_MIN_F32_VEC4, 0, LM_SH_REDUCE_MIN_F32_COLS4 },
      { LM_SH_REDUCE_MIN_F16, LM_SH_REDUCE_MIN_F16_VEC4, LM_SH_REDUCE_MIN_F16_VEC8, LM_SH_REDUCE_MIN_F16_COLS4 },
      { LM_SH_REDUCE_MIN_BF16, LM_SH_REDUCE_MIN_BF16_VEC4, LM_SH_REDUCE_MIN_BF16_VEC8, LM_SH_REDUCE_MIN_BF16_COLS4 } },
};

/* The same for rows (inner == 1) with a column's lanes consecutive in full subgroups,
 * meeting by shuffles (ROWS_SG in shaders/reduce.comp): [kind][dtype][LOAD_1/4/8]. */
static const lm_shader_id rows_sg[4][3][3] = {
    { { LM_SH_REDUCE_SUM_F32_SG, LM_SH_REDUCE_SUM_F32_VEC4_SG, 0 },
      { LM_SH_REDUCE_SUM_F16_SG, LM_SH_REDUCE_SUM_F16_VEC4_SG, LM_SH_REDUCE_SUM_F16_VEC8_SG },
      { LM_SH_REDUCE_SUM_BF16_SG, LM_SH_REDUCE_SUM_BF16_VEC4_SG, LM_SH_REDUCE_SUM_BF16_VEC8_SG } },
    { { LM_SH_REDUCE_VAR_F32_SG, LM_SH_REDUCE_VAR_F32_VEC4_SG, 0 },
      { LM_SH_REDUCE_VAR_F16_SG, LM_SH_REDUCE_VAR_F16_VEC4_SG, LM_SH_REDUCE_VAR_F16_VEC8_SG },
      { LM_SH_REDUCE_VAR_BF16_SG, LM_SH_REDUCE_VAR_BF16_VEC4_SG, LM_SH_REDUCE_VAR_BF16_VEC8_SG } },
    { { LM_SH_REDUCE_MAX_F32_SG, LM_SH_REDUCE_MAX_F32_VEC4_SG, 0 },
      { LM_SH_REDUCE_MAX_F16_SG, LM_SH_REDUCE_MAX_F16_VEC4_SG, LM_SH_REDUCE_MAX_F16_VEC8_SG },
      { LM_SH_REDUCE_MAX_BF16_SG, LM_SH_REDUCE_MAX_BF16_VEC4_SG, LM_SH_REDUCE_MAX_BF16_VEC8_SG } },
    { { LM_SH_REDUCE_MIN_F32_SG, LM_SH_REDUCE_MIN_F32_VEC4_SG, 0 },
      { LM_SH_REDUCE_MIN_F16_SG, LM_SH_REDUCE_MIN_F16_VEC4_SG, LM_SH_REDUCE_MIN_F16_VEC8_SG },
      { LM_SH_REDUCE_MIN_BF16_SG, LM_SH_REDUCE_MIN_BF16_VEC4_SG, LM_SH_REDUCE_MIN_BF16_VEC8_SG } },
};

/* Whether the device allows the rows_sg forms with workgroups of wg: shuffles, and full
 * subgroups of one size that tile the workgroup. */
static int rows_sg_allowed(const lm_context *ctx, uint32_t wg) {
    return ctx->subgroup_shuffle && ctx->full_subgroups && ctx->min_subgroup == ctx->max_subgroup &&
           ctx->max_subgroup > 0 && wg % ctx->max_subgroup == 0;
}

/* The tile form over short rows (TILE in shaders/reduce.comp): [kind][dtype]. */
static const lm_shader_id rows_tile[4][3] = {
    { LM_SH_REDUCE_SUM_F32_TILE, LM_SH_REDUCE_SUM_F16_TILE, LM_SH_REDUCE_SUM_BF16_TILE },
    { LM_SH_REDUCE_VAR_F32_TILE, LM_SH_REDUCE_VAR_F16_TILE, LM_SH_REDUCE_VAR_BF16_TILE },
    { LM_SH_REDUCE_MAX_F32_TILE, LM_SH_REDUCE_MAX_F16_TILE, LM_SH_REDUCE_MAX_BF16_TILE },
    { LM_SH_REDUCE_MIN_F32_TILE, LM_SH_REDUCE_MIN_F16_TILE, LM_SH_REDUCE_MIN_BF16_TILE },
};

/* Tile form: runs of whole rows of about TILE_ELEMS elements staged in shared memory by
 * TILE_WG threads, a row per LANES lanes taking at most TILE_PER_LANE elements each
 * (LANES at most a subgroup). The automatic choice takes it on a GPU for rows of at most
 * TILE_AUTO_MAX_D elements: on the H100 (bench/short_rows.lua, 64M elements) it took
 * max over rows of 1 from 66 to 75% of copy (float16 46 -> 58, sum 28 -> 31) but lost to
 * the subgroup form on every longer row (float32 sum over rows of 2 78 -> 60, of 13
 * 98 -> 59). */
#define TILE_WG 512u
#define TILE_ELEMS 4096u
#define TILE_ELEMS_LANE_ROWS 2048u   /* a lane per row: as softmax's tile form (softmax.c) */
#define TILE_PER_LANE 16u
#define TILE_AUTO_MAX_D 1u

/* Units per lane of max and min over rows, as a multiple of the usual (lm_plan_cols). */
#define MAX_LANE_SCALE 4
/* What each thread should at least read before r is split: rows of r in loaded units
 * (columns, and rows read as aligned vectors), or bytes (rows read by elements or as
 * masked units: 16 float16 or 8 float32 elements, 2 16-byte units). Few long rows in
 * masked units split that finely beat element reads on an H100 (session 21, float16 sums
 * over 17-642 rows of 73437-1018859: 52-61 -> 64-71% of copy), where 16 units a thread
 * had lost to them; aligned vectors split that finely lost 2-3 points (max over 2 rows of
 * 1048576 and 868392). */
#define MIN_ROWS_PER_THREAD 16
#define MIN_ROW_BYTES_PER_THREAD 32
/* On a GPU, rows longer than this split into chunks of at most it however many rows
 * there are: in a grid just past a round of resident workgroups, a workgroup over a whole
 * long row leaves the last few running alone for a row's time. On an H100 (session 21, %
 * of copy, whole rows or the old split -> these chunks) float32 sum over 1080 rows of
 * 196917 77 -> 91, over 608 of 397919 83 -> 96, max 68 -> 87 and 61 -> 91, float16 +4 to
 * +7 there; losses: float32 max over 1000 rows of 100000 95 -> 92, and over 169 rows of
 * 601015 85 -> 70 in 7 chunks, a grid just past one round, which the plan now avoids (6
 * chunks, as before). */
#define MAX_CHUNK_BYTES (384u << 10)
/* States per lane of the second dispatch of a split reduction, at most. */
#define SECOND_STATES_PER_LANE 8
#define STATE_IN 1u
#define STATE_OUT 2u
#define STATE_LAST 4u
#define STATE_WORDS 3

typedef struct reduce_push {
    uint64_t x, y, idx, states, counters;
    uint32_t outer, r, inner, chunk, splits, flags;
    float divisor;
    uint32_t col_groups, groups_x;
    uint32_t row_elems;
} reduce_push;

/* sum, max and min over rows read as masked 16-byte units (MASKED in shaders/reduce.comp):
 * [kind][dtype][sg] (var keeps element loads: no masked form). */
static const lm_shader_id rows_masked[4][3][2] = {
    { { LM_SH_REDUCE_SUM_F32_MASKED, LM_SH_REDUCE_SUM_F32_MASKED_SG },
      { LM_SH_REDUCE_SUM_F16_MASKED, LM_SH_REDUCE_SUM_F16_MASKED_SG },
      { LM_SH_REDUCE_SUM_BF16_MASKED, LM_SH_REDUCE_SUM_BF16_MASKED_SG } },
    { { 0, 0 }, { 0, 0 }, { 0, 0 } },
    { { LM_SH_REDUCE_MAX_F32_MASKED, LM_SH_REDUCE_MAX_F32_MASKED_SG },
      { LM_SH_REDUCE_MAX_F16_MASKED, LM_SH_REDUCE_MAX_F16_MASKED_SG },
      { LM_SH_REDUCE_MAX_BF16_MASKED, LM_SH_REDUCE_MAX_BF16_MASKED_SG } },
    { { LM_SH_REDUCE_MIN_F32_MASKED, LM_SH_REDUCE_MIN_F32_MASKED_SG },
      { LM_SH_REDUCE_MIN_F16_MASKED, LM_SH_REDUCE_MIN_F16_MASKED_SG },
      { LM_SH_REDUCE_MIN_BF16_MASKED, LM_SH_REDUCE_MIN_BF16_MASKED_SG } },
};

/* Whether a reduction over rows of v reads masked 16-byte units: sum, max and min over rows
 * (inner == 1) whose length is not a multiple of 4 (the plain 4-element vector loads take
 * those), x 16-byte aligned; by default on GPUs only, where memory hides the masking's
 * extra instructions. Sums (each unit's loads before its masks) for rows of at least
 * MASKED_MIN_D_SUM elements, or any row (8+) of x at least MASKED_MIN_BYTES_SUM. On an H100
 * (session 27), masked forced on against off over the odd rows of 9-486 elements of seeds
 * 2412, 2413, 2614 and 2715, % of the copy ceiling: from 10 MiB float16 +3 to +49
 * (1171895 rows of 67 36 -> 85, 2346407 of 18 40 -> 65), float32 -3 to +32 (27730 of 258
 * 61 -> 94, 81298 of 77 66 -> 92; rows of 29, 31 and 123, and 26642 of 99 at 10 MiB, lose
 * up to 3); below 10 MiB both lose up to 9 (float16 11060 of 127 37 -> 28, float32 42 ->
 * 37; float16 2892 of 451 36 -> 27). Fresh seeds 2716-2718 (19 shapes) bore the rule out:
 * from 10 MiB masked won every shape (float32 +3.5 to +33, float16 +1 to +51), below it
 * lost up to 10 points but for three float16 shapes of 6-8 MiB (+1.4 to +1.9). Few long
 * rows gain at any size since their split counts bytes (MIN_ROW_BYTES_PER_THREAD; session
 * 21: float16 17-642 rows of 73437-1018859 52-61 -> 64-71, float32 +0.4 to +4.4).
 * max and min (values and indices), where each unit's loads come before its masks, for x of
 * at least MASKED_MIN_BYTES_EXTREME and rows of at least MASKED_MIN_D_EXTREME; float32 also
 * needs MASKED_MIN_ROWS_PER_SM rows per multiprocessor. Element reads -> masked on an H200
 * (session 26, seeded sweeps 2413 and 2614, % of copy): float16 and bfloat16 gain on every
 * shape of 22 MiB or more, few rows as well (76 rows of 960251 44 -> 67, 206 of 215963 43 ->
 * 57) as short ones (1171895 of 67 16 -> 43-45, 2244416 of 29 31 -> 38); float32 at 4+ rows
 * per multiprocessor +2 to +30 (82465 of 2741 71 -> 99, 3308810 of 81 38 -> 64), but few
 * long rows lose (19 of 894095 and 27 of 582693 68 -> 60, 67 of 494121 77 -> 73), its
 * element reads of 4 bytes a lane near copy there; below 13 MiB every dtype loses 0.8-12
 * points (rows of 45-127 the most). Rows shorter than 29 were not measured above 32 MiB. */
#define MASKED_MIN_D_SUM 512u
#define MASKED_MIN_BYTES_SUM (10ull << 20)
#define MASKED_MIN_D_EXTREME 29u
#define MASKED_MIN_BYTES_EXTREME (32ull << 20)
#define MASKED_MIN_ROWS_PER_SM 4u
static int rows_masked_chosen(const lm_context *ctx, int kind, int form, const lm_tensor *x, lm_dim_view v) {
    if (kind == OP_VAR || v.inner != 1 || v.r % 4 == 0 || v.r < 8 || lm_tensor_address(x) % 16) return 0;
    if (ctx->reduce_masked != LM_REDUCE_MASKED_AUTO) return ctx->reduce_masked == LM_REDUCE_MASKED_ON;
    if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) return 0;
    uint64_t bytes = (uint64_t)v.outer * v.r * lm_dtype_size(x->dtype);
    if (kind == OP_SUM) return v.r >= MASKED_MIN_D_SUM || bytes >= MASKED_MIN_BYTES_SUM;
    if (v.r < MASKED_MIN_D_EXTREME || bytes < MASKED_MIN_BYTES_EXTREME) return 0;
    uint32_t sms = ctx->sm_count ? ctx->sm_count : 1;
    return form != FORM_F32 || (uint64_t)v.outer >= (uint64_t)sms * MASKED_MIN_ROWS_PER_SM;
}

/* The result's shape: x's without dim (or with it as 1 when keepdim); {1} or all ones
 * over everything (dim < 0). */
static int result_shape(const lm_tensor *x, int dim, int keepdim, int64_t *shape) {
    if (dim < 0) {
        int n = keepdim ? x->ndim : 1;
        for (int i = 0; i < n; i++) shape[i] = 1;
        return n;
    }
    int n = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i != dim) shape[n++] = x->shape[i];
        else if (keepdim) shape[n++] = 1;
    }
    if (n == 0) { shape[0] = 1; n = 1; }
    return n;
}

/* Records the tile form over rows of v (inner == 1) where the device and the row length
 * allow it; returns 0 (nothing recorded) otherwise. */
static int record_tile(lua_State *L, const char *op, int kind, int form, lm_tensor *x, lm_dim_view v,
                       float divisor, lm_tensor *y, lm_tensor *idx) {
    lm_context *ctx = x->storage->ctx;
    uint32_t unit = form == FORM_F32 ? 4u : 8u;
    uint32_t wg = TILE_WG, max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    while (wg > max_wg) wg /= 2;
    uint32_t lanes = 1;
    while ((uint64_t)lanes * TILE_PER_LANE < v.r) lanes *= 2;
    uint32_t items = (lanes == 1 ? TILE_ELEMS_LANE_ROWS : TILE_ELEMS) / (wg * unit);
    if (items < 1) items = 1;
    uint64_t elems = (uint64_t)wg * items * unit;
    /* the tile (skewed by a word per 32) and the subgroup form's state arrays */
    if (elems * 33 / 32 * 4 + (uint64_t)wg * 12 > ctx->props.limits.maxComputeSharedMemorySize) return 0;
    if (!rows_sg_allowed(ctx, wg) || v.inner != 1 || elems < (uint64_t)v.r + unit - 1) return 0;
    if (lanes > ctx->min_subgroup) return 0;
    uint32_t rows_per_group = (uint32_t)((elems - (unit - 1)) / v.r);
    uint64_t groups = ((uint64_t)v.outer + rows_per_group - 1) / rows_per_group;
    reduce_push pc = {
        .x = lm_tensor_address(x), .y = y ? lm_tensor_address(y) : 0, .idx = idx ? lm_tensor_address(idx) : 0,
        .outer = v.outer, .r = v.r, .inner = 1, .chunk = rows_per_group, .splits = 1, .divisor = divisor,
        .col_groups = (uint32_t)groups,
    };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = rows_tile[kind][form], .spec = { wg, wg / lanes, items },
        .full_subgroups = 1,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x }, .writes = { y, idx },
    });
    return 1;
}

/* Records the reduction of x (read as v) into values y and/or indices idx (NULL: not
 * written): one dispatch, also when r is split into chunks because the grid would be
 * small (the last workgroup of each column group reduces the chunks' states), or, with
 * tune.reduce{two_dispatches = true}, a second dispatch for that. */
static void record_reduce(lua_State *L, const char *op, int kind, lm_tensor *x, lm_dim_view v,
                          float divisor, lm_tensor *y, lm_tensor *idx) {
    lm_context *ctx = x->storage->ctx;
    /* Over a dimension of 1, sum, mean, max and min are x itself and the indices all 1: a
     * copy (x plain, y of its dtype and element count) at copy speed, where the tile form
     * ran at 60-65% of it on an H100 (session 21). (A copy of a byte tail needs 8-bit
     * storage, which the reduction kernels do not: whole 4-byte words only without it.) */
    if (v.r == 1 && kind != OP_VAR && (lm_tensor_bytes(x) % 4u == 0 || ctx->narrow_storage)) {
        if (y) lm_record_copy(L, x, y);
        if (idx) lm_record_fill(L, idx, 1.0f);
        return;
    }
    int form = x->dtype == LM_FLOAT16 ? FORM_F16 : x->dtype == LM_BFLOAT16 ? FORM_BF16 : FORM_F32;
    int tile = ctx->reduce_rows_form == LM_REDUCE_ROWS_TILE ||
               (ctx->reduce_rows_form == LM_REDUCE_ROWS_AUTO && ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU &&
                v.r <= TILE_AUTO_MAX_D);
    if (v.inner == 1 && tile && record_tile(L, op, kind, form, x, v, divisor, y, idx)) return;
    int masked = rows_masked_chosen(ctx, kind, form, x, v);
    int load = LOAD_1;
    if (masked) load = form == FORM_F32 ? LOAD_4 : LOAD_8;
    else if (v.inner == 1 && form != FORM_F32 && v.r % 8 == 0) load = LOAD_8;
    else if (v.inner == 1 && v.r % 4 == 0) load = LOAD_4;
    else if (v.inner % 4 == 0) load = LOAD_COLS4;
    uint32_t width = load == LOAD_8 ? 8u : load == LOAD_4 ? 4u : 1u;   /* elements per loaded unit */
    /* masked: the most units a row spans, at the worst skew */
    uint32_t units = masked ? (uint32_t)(((uint64_t)v.r + 2u * width - 2u) / width) : v.r / width;
    lm_dim_view vu = v;   /* v in loaded units */
    if (load == LOAD_COLS4) vu.inner /= 4;
    /* max, min over rows: a lane takes MAX_LANE_SCALE times the usual units, as each merge of
     * their states (slots, then the lanes' tree: comparisons under the NaN and index rules)
     * costs several times sum's add, and over short-lane rows those fixed costs, not the
     * loads, set the time. */
    unsigned scale = (kind == OP_MAX || kind == OP_MIN) && v.inner == 1 ? MAX_LANE_SCALE : 1;
    lm_col_plan c = lm_plan_cols(ctx, vu, lm_dtype_size(x->dtype) * (load == LOAD_COLS4 ? 4u : 1u), units,
                                 LM_COL_MIN_BYTES_REDUCE, scale);
    uint32_t lanes = c.wg / c.cols;
    uint64_t want = ctx->reduce_groups_per_sm && ctx->sm_count ? (uint64_t)ctx->sm_count * ctx->reduce_groups_per_sm
                                                                : lm_groups_wanted(ctx);
    uint64_t splits = 1;
    if (c.groups < want) {
        uint64_t most = v.inner == 1 && (masked || load == LOAD_1)
            ? (uint64_t)units * width * lm_dtype_size(x->dtype) / ((uint64_t)lanes * MIN_ROW_BYTES_PER_THREAD)
            : (uint64_t)units / ((uint64_t)lanes * MIN_ROWS_PER_THREAD);
        splits = (want + c.groups - 1) / c.groups;
        /* Rounded down instead where that still gives 7/8 of the groups wanted: a grid just
         * past one round of resident workgroups (9 splits of 128 groups for 1056) leaves the
         * few groups over to run with most of the device idle. */
        uint64_t down = want / c.groups;
        if (down >= 1 && down * c.groups * 8 >= want * 7) splits = down;
        if (splits > most) splits = most ? most : 1;
    }
    if (v.inner == 1 && ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) {
        uint64_t row_bytes = (uint64_t)v.r * lm_dtype_size(x->dtype);
        uint64_t pieces = (row_bytes + MAX_CHUNK_BYTES - 1) / MAX_CHUNK_BYTES;
        if (pieces > splits) {
            splits = pieces;
            /* ... but not into a grid just past one round (as above) */
            uint64_t total = c.groups * splits;
            if (total > want && total * 8 < want * 9 && want / c.groups >= 1) splits = want / c.groups;
        }
    }
    uint32_t chunk = (uint32_t)(((uint64_t)units + splits - 1) / splits);
    splits = ((uint64_t)units + chunk - 1) / chunk;

    reduce_push pc = {
        .x = lm_tensor_address(x), .outer = v.outer, .r = units, .inner = vu.inner,
        .chunk = chunk, .splits = (uint32_t)splits, .divisor = divisor, .col_groups = c.col_groups,
        .row_elems = v.r,
        .y = y ? lm_tensor_address(y) : 0, .idx = idx ? lm_tensor_address(idx) : 0,
    };
    lm_tensor *states = NULL, counters = { 0 };
    int one_dispatch = !ctx->reduce_two_dispatches;
    int pushed = 0;   /* tensors pushed on the stack: collected once the stream is done with them */
    if (splits > 1) {
        int64_t n = (int64_t)v.outer * (int64_t)splits * v.inner * STATE_WORDS;
        states = lm_push_tensor(L, ctx, 1, &n);   /* float32 words holding the states' bits */
        pushed++;
        pc.states = lm_tensor_address(states);
        pc.flags = STATE_OUT;
        if (one_dispatch) {
            pushed += lm_group_counters(L, ctx, c.groups, &counters);
            pc.counters = lm_tensor_address(&counters);
            pc.flags |= STATE_LAST;
        }
    }
    int second = states && !one_dispatch;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, c.groups * splits, &gy);
    /* The subgroup form by default for sum, mean, max and min (on the H100: float32 max over
     * rows of 4096 86 -> 94% of copy, rows of 64 83 -> 89%, float16 74 -> 79%); var keeps the
     * lanes' tree, 1 point faster there. tune.reduce forces either. */
    int rows_form = ctx->reduce_rows_form == LM_REDUCE_ROWS_TILE ? LM_REDUCE_ROWS_AUTO : ctx->reduce_rows_form;
    int want_sg = rows_form == LM_REDUCE_ROWS_AUTO ? kind != OP_VAR : rows_form == LM_REDUCE_ROWS_SUBGROUP;
    int sg = want_sg && v.inner == 1 && load != LOAD_COLS4 && rows_sg_allowed(ctx, c.wg);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1,
        .shader = masked ? rows_masked[kind][form][sg] : sg ? rows_sg[kind][form][load] : shaders[kind][form][load],
        .spec = { c.wg, c.cols }, .full_subgroups = sg,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x }, .writes = { states, second ? NULL : y, second ? NULL : idx, counters.storage ? &counters : NULL },
    });
    if (!second) { lua_pop(L, pushed); return; }
    /* The states are laid out per element column (also after LOAD_COLS4). */
    if (load == LOAD_COLS4) c = lm_plan_cols(ctx, v, lm_dtype_size(x->dtype), v.r, LM_COL_MIN_BYTES_REDUCE, 1);
    /* Its lanes take a column's states one load after another, each waited on: at most
     * SECOND_STATES_PER_LANE per lane (few columns split many ways, as 64 columns of 1M
     * rows over 1000+ splits, left a lane hundreds of loads in a row). */
    while (c.cols > 1 && (uint64_t)(c.wg / c.cols) * SECOND_STATES_PER_LANE < splits) c.cols /= 2;
    c.groups = ((uint64_t)v.outer * v.inner + c.cols - 1) / c.cols;
    c.col_groups = (uint32_t)c.groups;
    reduce_push p2 = {
        .states = lm_tensor_address(states), .y = y ? lm_tensor_address(y) : 0, .idx = idx ? lm_tensor_address(idx) : 0,
        .outer = v.outer, .r = (uint32_t)splits, .inner = v.inner, .chunk = (uint32_t)splits, .splits = 1,
        .flags = STATE_IN, .divisor = divisor, .col_groups = c.col_groups,
    };
    p2.groups_x = lm_grid(L, ctx, c.groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = shaders[kind][form][0], .spec = { c.wg, c.cols },
        .push = &p2, .push_bytes = sizeof p2, .groups_x = p2.groups_x, .groups_y = gy,
        .reads = { states }, .writes = { y, idx },
    });
    lua_pop(L, 1);   /* the states: collected once the stream is done with them */
}

static const char *const sum_keys[] = { "dim", "keepdim", "out", NULL };
static const char *const var_keys[] = { "dim", "keepdim", "correction", "out", NULL };
static const char *const max_keys[] = { "dim", "keepdim", "out", "indices", NULL };

/* sum, mean, var: the values only. */
static int reduce_values(lua_State *L, const char *name, int kind, int mean) {
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, kind == OP_VAR ? var_keys : sum_keys);
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_context *ctx = x->storage->ctx;
    lm_check_float_input(L, x, ctx);
    int dim = lm_dim_option(L, 2, x, -1);
    int keepdim = lm_option_boolean(L, 2, "keepdim", 0);
    lua_Integer correction = kind == OP_VAR ? lm_option_integer(L, 2, "correction", 1) : 0;
    if (correction < 0) lm_argerror(L, 2, "correction must be >= 0, got %I", (LUAI_UACINT)correction);
    lm_dim_view v = lm_dim_view_of(L, x, dim);
    int64_t shape[LM_MAX_DIMS];
    int ndim = result_shape(x, dim, keepdim, shape);
    lua_settop(L, 2);
    lm_tensor *y = lm_push_result(L, 2, "out", ctx, x->dtype, ndim, shape, x, 0);
    x = lm_check_tensor(L, 1);
    float divisor = 1.0f;
    if (mean) divisor = (float)v.r;
    if (kind == OP_VAR) divisor = correction >= (lua_Integer)v.r ? 0.0f : (float)((lua_Integer)v.r - correction);
    record_reduce(L, name, kind, x, v, divisor, y, NULL);
    return 1;
}

/* max, min (values, and indices with dim), argmax, argmin (indices). */
static int reduce_extreme(lua_State *L, const char *name, int kind, int arg) {
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, arg ? sum_keys : max_keys);
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_context *ctx = x->storage->ctx;
    lm_check_float_input(L, x, ctx);
    int dim = lm_dim_option(L, 2, x, -1);
    int keepdim = lm_option_boolean(L, 2, "keepdim", 0);
    lm_dim_view v = lm_dim_view_of(L, x, dim);
    int64_t shape[LM_MAX_DIMS];
    int ndim = result_shape(x, dim, keepdim, shape);
    lua_settop(L, 2);
    int values = !arg, indices = arg || dim >= 0;
    if (!arg && dim < 0) {
        lm_push_option(L, 2, "indices");
        if (!lua_isnil(L, -1)) lm_argerror(L, 2, "indices is only given with dim (the max of all elements has no indices)");
        lua_pop(L, 1);
    }
    lm_tensor *y = values ? lm_push_result(L, 2, "out", ctx, x->dtype, ndim, shape, x, 0) : NULL;
    lm_tensor *idx = indices ? lm_push_result(L, 2, arg ? "out" : "indices", ctx, LM_INT32, ndim, shape, x, 0) : NULL;
    if (y && idx && lm_tensors_overlap(y, idx)) lm_argerror(L, 2, "indices overlaps out");
    x = lm_check_tensor(L, 1);
    record_reduce(L, name, kind, x, v, 1.0f, y, idx);
    return values + indices;
}

int lm_op_sum(lua_State *L) { return reduce_values(L, "sum", OP_SUM, 0); }
int lm_op_mean(lua_State *L) { return reduce_values(L, "mean", OP_SUM, 1); }
int lm_op_var(lua_State *L) { return reduce_values(L, "var", OP_VAR, 0); }
int lm_op_max(lua_State *L) { return reduce_extreme(L, "max", OP_MAX, 0); }
int lm_op_min(lua_State *L) { return reduce_extreme(L, "min", OP_MIN, 0); }
int lm_op_argmax(lua_State *L) { return reduce_extreme(L, "argmax", OP_MAX, 1); }
int lm_op_argmin(lua_State *L) { return reduce_extreme(L, "argmin", OP_MIN, 1); }

/* tune.reduce([{rows = "auto" | "lanes" | "subgroup" | "tile", masked = bool, two_dispatches = bool,
 *               groups_per_sm = n}])
 * -> {rows =, masked = "auto" | "on" | "off", two_dispatches = bool, groups_per_sm = n, subgroup = bool}
 * ({} restores the defaults; masked: sum, max and min over rows of any length as masked
 * units, see rows_masked_chosen; two_dispatches: a split reduction's states reduced by a
 * second dispatch instead of the last workgroup of each column group, see record_reduce;
 * groups_per_sm: the workgroups per multiprocessor below which r is split, 0 for the
 * device's default, lm_groups_wanted): reductions over rows take, on a GPU, the tile form for rows
 * of at most TILE_AUTO_MAX_D, else the subgroup form where the device allows it for sum,
 * mean, max and min and the lanes' shared-memory tree for var ("auto", the default), or
 * one form for all ("lanes"; "subgroup", where allowed, elsewhere the lanes' tree; "tile"
 * wherever it fits, elsewhere as "auto"); `subgroup` says whether this device allows the
 * subgroup form (and so the tile form). */
int lm_op_reduce_config(lua_State *L) {
    static const char *const known[] = { "rows", "masked", "two_dispatches", "groups_per_sm", NULL };
    static const char *const forms[] = { "auto", "lanes", "subgroup", "tile", NULL };
    static const char *const masked[] = { "auto", "on", "off", NULL };
    lm_context *ctx = lm_context_get(L);
    if (lm_check_options(L, 1, known)) {
        int rows = lm_option_choice(L, 1, "rows", forms, LM_REDUCE_ROWS_AUTO);
        int m = lm_option_boolean(L, 1, "masked", -1);
        ctx->reduce_rows_form = rows;
        ctx->reduce_masked = m < 0 ? LM_REDUCE_MASKED_AUTO : m ? LM_REDUCE_MASKED_ON : LM_REDUCE_MASKED_OFF;
        ctx->reduce_two_dispatches = lm_option_boolean(L, 1, "two_dispatches", 0);
        lua_Integer gps = lm_option_integer(L, 1, "groups_per_sm", 0);
        if (gps < 0 || gps > 1024) lm_argerror(L, 1, "groups_per_sm must be in 0..1024, got %I", (LUAI_UACINT)gps);
        ctx->reduce_groups_per_sm = (uint32_t)gps;
    }
    lua_createtable(L, 0, 5);
    lua_pushstring(L, forms[ctx->reduce_rows_form]);
    lua_setfield(L, -2, "rows");
    lua_pushstring(L, masked[ctx->reduce_masked]);
    lua_setfield(L, -2, "masked");
    lua_pushboolean(L, ctx->reduce_two_dispatches);
    lua_setfield(L, -2, "two_dispatches");
    lua_pushinteger(L, ctx->reduce_groups_per_sm);
    lua_setfield(L, -2, "groups_per_sm");
    lua_pushboolean(L, rows_sg_allowed(ctx, 256));
    lua_setfield(L, -2, "subgroup");
    return 1;
}
