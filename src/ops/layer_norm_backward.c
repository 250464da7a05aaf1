/* layer_norm_backward: argument checks, the plan (fused or long-row form, workgroup,
 * rows per partial row) and the dispatches of shaders/layer_norm_backward.comp, which
 * describes the stages. dweight and dbias come from a two-stage column sum in a fixed
 * order (no float atomics), so repeated calls give identical bits. */
#include "ops.h"
#include "split_scratch.h"
#include "group_counters.h"
#include "../storage.h"
#include <lauxlib.h>
#include <string.h>

#define LNB_MAX_ITEMS 4        /* fused form: most vectors per thread of a row (registers
                                * hold x and dy of K rows plus the column partials) */
#define LNB_FLOAT_ITEMS 16     /* fused form, rows of D % 4 != 0 (read as floats): most
                                * floats per thread, the registers of 4 vec4 */
#define LNB_FORCED_MAX_ITEMS 16
#define LNB_ITEMS_CPU 8
#define LNB_ROWS_MIN 32        /* rows per partial row where there are rows enough: the
                                * partial rows' traffic is ~4/(3 rows_per_group) of the
                                * op's */
#define LNB_ROWS_FLOOR 8       /* ... and at least this many while filling the device */
#define LNB_DEFAULT_SMS 128    /* multiprocessors assumed where the device does not say */
#define LNB_FILL_THREADS 1024  /* fused form on a GPU: threads per multiprocessor the row
                                * blocks aim for, so narrow rows' small workgroups still
                                * keep enough loads in flight (their partial rows are
                                * small: 2 D floats per block) */
#define LNB_CPU_SMS 8
#define LNB_ROWS_MAX_CPU 1024  /* llvmpipe cuts an invocation's loops short past 65535
                                * iterations: bound a thread's rows on CPU devices */
#define LNB_APPLY_WG 256
#define LNB_STAT_SLICE 2048u   /* columns form: fewest vectors per STATS slice */
#define LNB_STAT_WG 256u
#define LNB_REDUCE_COLS 32     /* the reduce stage's columns per workgroup (its COLS) */
#define LNB_REDUCE_LOADS 8     /* the reduce stage: partial rows a thread loads before
                                * adding them (in order), one memory latency for all */
#define LNB_REDUCE_TALL 256    /* partial rows from which a GPU's reduce stage takes
                                * 1024 threads (32 slices of rows) instead of 256: it
                                * has only D / 32 workgroups */
#define LNB_ROWS_WG 256        /* rows form: threads per workgroup */
#define LNB_ROWS_TARGET 16     /* rows form: floats per lane of a row aimed at (segments
                                * narrow until a lane holds about this many) */
#define LNB_ROWS_MAX 32        /* ... and at most (x and dy of a row, the column partials
                                * and weight live in registers: ~5 per float) */
#define LNB_ROWS_AUTO_MAX 24   /* ... chosen automatically up to this many: ~5 registers per
                                * float keeps a lane within 128, two 256-thread workgroups per
                                * 64K-register multiprocessor (H100, % of copy, rows form against
                                * fused at 8 vec4 per lane: 32768x1024 63.4 / 80.1, 4096x1024
                                * 32.6 / 38.9; at 6: 8192x768 67.7 / 61.1, 65536x768 93.0 / 88.8) */
#define LNB_ROWS_LOADS 16      /* rows form: floats per lane of x (and of dy) in flight,
                                * K rows x items */
#define LNB_SPLIT_WG 512       /* split form: threads per part, so that one workgroup per
                                * multiprocessor always fits (all parts must be resident) */
#define LNB_SPLIT_ITEMS 4      /* ... vec4s per thread aimed at (x, dy, the next row's, the
                                * column partials and weight stay in registers); on an H100
                                * 4 against 2 gained up to 16 points of copy over 9 shapes
                                * (4096x65536 61.8 -> 71.4, 300x262144 46.1 -> 60.9) and lost
                                * at most 0.7 (8192x20000) */
#define LNB_SPLIT_FLOATS 8     /* ... floats for rows of D % 4 != 0 (registers: 128 at 8;
                                * 4 lost half their speed) */
#define LNB_SPLIT_MAX_PARTS 128 /* a thread polls for each part's record */
#define LNB_SPLIT_ROWS_CPU 32  /* split form on CPU devices: most rows per slot (llvmpipe's
                                * loop budget covers its polls) */
#define LNB_QUAD_ITEMS 2       /* the quad form on a GPU: rows of D % 4 != 0 whose quad row
                                * takes this many vec4s per thread of the largest workgroup
                                * (H100, % of copy against the fused form reading floats:
                                * 20000x2047 63.0 / 56.9, 12345x1537 48.9 / 46.2; at one vec4
                                * 94713x803 44.7 / 47.0; at 4 it spilled, 15 / 57) */
#define LNB_SPIN_LIMIT (1u << 15)  /* polls for a partner's record before computing it */
#define LNB_CPU_LOOP_BUDGET 20000u

/* Overrides from tune.layer_norm_backward, kept per lua_State in the registry. */
typedef struct lnb_tune {
    int form;                  /* 0 automatic, 1 fused, 2 columns, 3 rows, 4 split, 5 quad */
    uint32_t wg, items, k, groups;
    int prefetch;              /* fused: 1 loads the next rows early (0, -1: not);
                                * split: -1 does not (0, 1: does) */
    int fill;                  /* fused: blocks also aim for LNB_FILL_THREADS (off by
                                * default: on the H200 it lost 6-30% on most shapes) */
    uint32_t float_items;      /* fused: most floats per thread (0: LNB_FLOAT_ITEMS) */
    uint32_t stat_parts;       /* columns: STATS slices per row (0: automatic) */
    uint32_t reduce_loads;     /* reduce stage: loads in flight per thread (0: LNB_REDUCE_LOADS) */
    int reduce;                /* 0 automatic, 1 folded into the main dispatch, 2 a dispatch */
} lnb_tune;
static const char TUNE_KEY[] = "lumus.layer_norm_backward.tune";

typedef struct lnb_plan {
    int columns;               /* long rows: STATS then APPLY */
    int split;                 /* long rows: SPLIT, parts of a row exchanging sums */
    int quad;                  /* D % 4 != 0: FUSED over quad rows (QUAD); n = D vec4s,
                                * groups and rows_per_group count quads */
    uint32_t parts, chunk;     /* split: workgroups per row, vectors per part */
    int rows;                  /* short rows: ROWS (a subgroup segment per row) */
    uint32_t seg;              /* rows: lanes per row */
    uint32_t vec, n;
    uint32_t wg, items, k;     /* fused: threads per row, vectors each, rows at once;
                                * rows: threads, vectors per lane, rows per segment at
                                * once; columns: APPLY's threads and rows at once */
    uint32_t prefetch;         /* fused: 1 loads the next K rows before this K's sums;
                                * split: 1 the next row's slice before the exchange */
    uint32_t stats_wg;         /* columns: STATS's threads per slice */
    uint32_t stat_parts;       /* columns: STATS's slices (workgroups) per row */
    uint32_t col_blocks;       /* columns: APPLY workgroups across a row */
    uint32_t rows_per_group, groups;
    uint32_t reduce_wg, reduce_loads;
    uint32_t fold_team;        /* fused, rows, quad: workgroups per team of the reduce folded
                                * into the main dispatch (0: the REDUCE dispatch) */
} lnb_plan;

static uint32_t pow2_at_least(uint64_t v) { uint32_t p = 1; while (p < v) p <<= 1; return p; }
static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static lnb_tune get_tune(lua_State *L) {
    lnb_tune t = { 0 };
    lua_getfield(L, LUA_REGISTRYINDEX, TUNE_KEY);
    const lnb_tune *u = lua_touserdata(L, -1);
    if (u) t = *u;
    lua_pop(L, 1);
    return t;
}

/* Rows per partial row and their count: enough workgroups to fill the device (twice
 * its multiprocessors, or as many as LNB_ROWS_FLOOR rows each allow), at least
 * LNB_ROWS_MIN rows each where that already fills it, at most four per
 * multiprocessor. `per_group` is how many workgroups one block of rows employs. */
static void split_rows(const lm_context *ctx, const lnb_tune *t, uint64_t rows, uint32_t per_group, lnb_plan *c) {
    int cpu = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    uint64_t sms = cpu ? LNB_CPU_SMS : ctx->sm_count ? ctx->sm_count : LNB_DEFAULT_SMS;
    uint64_t want = ceil_div(2 * sms, per_group), most = ceil_div(4 * sms, per_group);
    if (!cpu && !c->columns && t->fill) {
        /* Fused: also LNB_FILL_THREADS threads per multiprocessor (up to twice that). */
        uint64_t fill = ceil_div(sms * LNB_FILL_THREADS, c->wg);
        if (want < fill) want = fill;
        if (most < 2 * fill) most = 2 * fill;
    }
    uint64_t g = ceil_div(rows, LNB_ROWS_MIN);
    if (g < want) { g = ceil_div(rows, LNB_ROWS_FLOOR); if (g > want) g = want; }
    if (g > most) g = most;
    if (cpu && g < ceil_div(rows, LNB_ROWS_MAX_CPU)) g = ceil_div(rows, LNB_ROWS_MAX_CPU);
    if (t->groups) g = t->groups;
    if (g > rows) g = rows;
    if (g < 1) g = 1;
    uint64_t r = ceil_div(rows, g);
    c->rows_per_group = (uint32_t)r;
    c->groups = (uint32_t)ceil_div(rows, r);   /* no empty block */
}

/* Rows form: a row per segment of `seg` lanes, seg the power of two (at most the smallest
 * subgroup) that gives a lane about LNB_ROWS_TARGET floats; it needs whole subgroups
 * (the segments are cut from them) and a row of at most LNB_ROWS_MAX floats per lane of
 * a subgroup. Returns 0 where it does not fit. */
static int plan_rows(const lm_context *ctx, const lnb_tune *t, uint32_t max_wg, lnb_plan *c) {
    uint32_t sg = ctx->min_subgroup;
    uint32_t wg = t->wg ? t->wg : LNB_ROWS_WG;
    if (!ctx->full_subgroups || sg < 1 || !ctx->max_subgroup || wg % ctx->max_subgroup || wg > max_wg) return 0;
    if (ceil_div(c->n, sg) * c->vec > LNB_ROWS_MAX) return 0;
    /* Rows read as floats (D % 4 != 0) issue a lane's loads one float at a time: past
     * LNB_ROWS_TARGET of them they wait on latency (H200, D = 803: 21% of copy against
     * the fused form's 35%), so the automatic choice leaves those rows to the fused form. */
    if (t->form != 3 && c->vec == 1 && ceil_div(c->n, sg) > LNB_ROWS_TARGET) return 0;
    if (t->form != 3 && ceil_div(c->n, sg) * c->vec > LNB_ROWS_AUTO_MAX) return 0;
    uint32_t target = t->items ? t->items : LNB_ROWS_TARGET / c->vec;
    uint32_t seg = pow2_at_least(ceil_div(c->n, target));
    if (seg > sg) seg = sg;
    c->rows = 1;
    c->seg = seg;
    c->wg = wg;
    c->items = (uint32_t)ceil_div(c->n, seg);
    uint32_t per_row = c->items * c->vec;
    c->k = t->k ? t->k : 4 * per_row <= LNB_ROWS_LOADS ? 4 : 2 * per_row <= LNB_ROWS_LOADS ? 2 : 1;
    return 1;
}

/* Split form (rows too long for the fused form, on a GPU with 64-bit atomics and
 * multiprocessor count, out of place, not while a capture records: its records carry the
 * call's epoch, which a replay cannot advance): `parts` workgroups of LNB_SPLIT_WG
 * threads per row and `slots` rows at once, slots x parts at most one workgroup per
 * multiprocessor, so that all are resident; few rows take more, smaller parts to fill
 * the device. Returns 0 where it does not fit (rows needing more parts than that). */
static int plan_split(const lm_context *ctx, const lnb_tune *t, uint64_t rows, uint32_t max_wg, int split_ok, lnb_plan *c) {
    int cpu = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    int forced = t->form == 4;
    if (!split_ok || !ctx->int64_atomics || ctx->stream.recording) return 0;
    if (!forced && (cpu || !ctx->sm_count)) return 0;
    uint64_t sms = ctx->sm_count ? ctx->sm_count : cpu ? LNB_CPU_SMS : LNB_DEFAULT_SMS;
    uint32_t wg = t->wg ? t->wg : LNB_SPLIT_WG;
    if (wg > max_wg) wg = max_wg;
    uint32_t target = t->items ? t->items : c->vec == 4 ? LNB_SPLIT_ITEMS : LNB_SPLIT_FLOATS;
    uint64_t parts = ceil_div(c->n, (uint64_t)wg * target);
    uint64_t few = sms / (rows ? rows : 1);   /* parts that few rows may take */
    if (few > parts) { parts = few; if (parts > ceil_div(c->n, wg)) parts = ceil_div(c->n, wg); }
    if (parts < 1) parts = 1;
    uint64_t chunk = ceil_div(c->n, parts);
    parts = ceil_div(c->n, chunk);   /* no empty part */
    uint64_t items = ceil_div(chunk, wg);
    if (parts > LNB_SPLIT_MAX_PARTS || parts > wg || items > LNB_FORCED_MAX_ITEMS || (!forced && parts > sms)) return 0;
    uint64_t slots = sms / parts;
    if (cpu && slots < ceil_div(rows, LNB_SPLIT_ROWS_CPU)) slots = ceil_div(rows, LNB_SPLIT_ROWS_CPU);
    if (slots > rows) slots = rows;
    if (slots < 1) slots = 1;
    c->columns = 0;
    c->split = 1;
    c->wg = wg;
    c->items = (uint32_t)items;
    c->parts = (uint32_t)parts;
    c->chunk = (uint32_t)chunk;
    c->k = 1;
    c->prefetch = t->prefetch >= 0;
    c->groups = (uint32_t)slots;
    c->rows_per_group = (uint32_t)ceil_div(rows, slots);
    return 1;
}

static lnb_plan plan(const lm_context *ctx, const lnb_tune *t, int64_t d, int64_t rows, int split_ok, int quad_ok) {
    lnb_plan c = { 0 };
    c.vec = d % 4 == 0 ? 4 : 1;
    c.n = (uint32_t)(d / c.vec);
    uint32_t max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    if (max_wg > 1024) max_wg = 1024;
    /* A whole number of subgroups and at least 32 threads (llvmpipe computed wrong rows
     * with workgroups of 9..63 threads that were not powers of two). */
    uint32_t lo = ctx->max_subgroup > 32 ? ctx->max_subgroup : 32;
    int cpu = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    c.reduce_wg = max_wg >= 256 ? 256 : 128;
    c.reduce_loads = t->reduce_loads ? t->reduce_loads : LNB_REDUCE_LOADS;
    uint32_t most_items = t->float_items && c.vec == 1 ? t->float_items
                        : c.vec == 4 || cpu ? LNB_MAX_ITEMS : LNB_FLOAT_ITEMS;
    int form = t->form;
    int long_rows = c.n > (uint64_t)max_wg * most_items;
    /* Rows of D % 4 != 0 whose quad row (D vec4s) fits the fused form's registers take
     * the quad form: forced, or automatic on a GPU where it takes LNB_QUAD_ITEMS vec4s per
     * thread; a forced quad form where it does not fit plans as automatic without it. */
    int quad_fits = quad_ok && c.vec == 1 && d >= 4 && (uint64_t)d <= (uint64_t)max_wg * LNB_MAX_ITEMS;
    if (quad_fits && (form == 5 || (form == 0 && !cpu && ceil_div((uint64_t)d, max_wg) == LNB_QUAD_ITEMS))) {
        c.quad = 1;
        c.vec = 4;
        c.n = (uint32_t)d;
        form = 1;   /* the fused form's plan, over quad rows */
    } else if (form == 5) {
        form = 0;
    }
    /* The split form where it fits, automatically for rows of vec4s the fused form would
     * hold at LNB_MAX_ITEMS per thread or not at all (H100, % of copy, split against
     * fused: 8192x16384 73.8 / 56.6, at 3 per thread 8192x12288 81.7 / 89.0; against the
     * columns form 4096x65536 71.4 / 45.0, 300x262144 60.9 / 40.0), and for rows of floats
     * too long for the fused form where they are fewer than the multiprocessors (3x513081
     * 20.9 / 12.1; 1000x100003 52.4 / 51.1 and 200x150001 45.5 / 48.5 stay columns). A
     * forced split form where it does not fit plans as automatic without it. */
    int split_auto = c.vec == 4 ? c.n > (uint64_t)max_wg * (LNB_MAX_ITEMS - 1)
                                : long_rows && (uint64_t)rows < ctx->sm_count;
    if (form == 4 || (form == 0 && split_auto)) {
        if (plan_split(ctx, t, (uint64_t)rows, max_wg, split_ok, &c)) {
            if (!cpu && c.groups >= LNB_REDUCE_TALL && max_wg >= 1024) c.reduce_wg = 1024;
            return c;
        }
        form = 0;
    }
    c.columns = form == 2 || (form == 0 && long_rows);
    /* Short rows take the rows form where it fits (forced, or automatic on a GPU): a
     * row's sums need no barrier and a workgroup holds many rows at once. A CPU device
     * runs a workgroup on one thread, where its idle segments and per-subgroup barriers
     * cost more than the fused form's (llvmpipe: 5x slower at 64 x 96). */
    if (!c.columns && (form == 3 || (form == 0 && !cpu))) plan_rows(ctx, t, max_wg, &c);
    if (!c.columns && !c.rows) {
        /* On a CPU device a workgroup runs on one thread and each barrier costs a context
         * switch: fewer, wider threads per row there. */
        uint32_t target = t->items ? t->items : cpu ? LNB_ITEMS_CPU : 1;
        /* GPUs: a whole number of subgroups, as few idle threads as that allows (D = 768
         * takes 192); CPU devices: a power of two (llvmpipe computed wrong rows with
         * workgroups of 9..63 threads that were not). */
        uint64_t threads = ceil_div(c.n, target);
        uint32_t wg = t->wg ? t->wg : cpu ? pow2_at_least(threads)
                    : (uint32_t)(threads > max_wg ? max_wg : ceil_div(threads, lo) * lo);
        if (wg < lo) wg = lo;
        if (wg > max_wg) wg = max_wg;
        c.wg = wg;
        c.items = (uint32_t)ceil_div(c.n, wg);
        if (c.items > LNB_FORCED_MAX_ITEMS && c.quad) {
            /* A forced workgroup too small for a quad row: planned as automatic without it. */
            lnb_tune u = *t;
            u.form = 0;
            return plan(ctx, &u, d, rows, split_ok, 0);
        }
        if (c.items > LNB_FORCED_MAX_ITEMS) c.columns = 1;
        c.k = t->k ? t->k : c.items == 1 ? 4 : c.items == 2 ? 2 : 1;
        c.prefetch = t->prefetch > 0;
    }
    if (c.columns) {
        c.wg = t->wg ? t->wg : LNB_APPLY_WG;
        if (c.wg > max_wg) c.wg = max_wg;
        c.items = 1;
        c.k = t->k ? t->k : 4;
        c.col_blocks = (uint32_t)ceil_div(c.n, c.wg);
        uint32_t s = pow2_at_least(c.n);
        c.stats_wg = s < lo ? lo : s > max_wg ? max_wg : s;
        /* Fewer rows than twice the multiprocessors: rows cut into slices of at least
         * LNB_STAT_SLICE vectors for STATS, LNB_STAT_WG threads each, enough for two
         * workgroups per multiprocessor. */
        uint64_t sms = cpu ? LNB_CPU_SMS : ctx->sm_count ? ctx->sm_count : LNB_DEFAULT_SMS;
        uint64_t sp = t->stat_parts ? t->stat_parts : cpu || rows < 1 ? 1 : ceil_div(2 * sms, (uint64_t)rows);
        uint64_t most = ceil_div(c.n, LNB_STAT_SLICE);
        if (!t->stat_parts && sp > most) sp = most;
        if (sp > c.n) sp = c.n;
        if (sp < 1) sp = 1;
        c.stat_parts = (uint32_t)sp;
        if (sp > 1 && !t->stat_parts) c.stats_wg = LNB_STAT_WG < max_wg ? LNB_STAT_WG : max_wg;
    }
    split_rows(ctx, t, c.quad ? ceil_div((uint64_t)rows, 4) : (uint64_t)rows, c.columns ? c.col_blocks : 1, &c);
    if (!cpu && c.groups >= LNB_REDUCE_TALL && max_wg >= 1024) c.reduce_wg = 1024;
    /* The fused, rows and quad forms can fold the reduce stage into their dispatch
     * (forced only until a GPU has timed it): teams of about sqrt(groups) workgroups, so
     * that the last of a team and then the last team each add about sqrt(groups) rows. */
    if (!c.columns && t->reduce == 1) {
        uint32_t team = 1;
        while ((uint64_t)team * team < c.groups) team++;
        c.fold_team = team;
    }
    return c;
}

/* mean or invstd at idx: the statistics' shape, [..] of x without its last dimension
 * ([1] for a 1-D x), as layer_norm_forward returns them. */
static lm_tensor *check_stat(lua_State *L, int idx, const char *name, int ndim, const int64_t *shape) {
    lm_tensor *t = lm_check_tensor(L, idx);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char want[256], got[256];
        lm_shape_string(shape, ndim, want, sizeof want);
        lm_shape_string(t->shape, t->ndim, got, sizeof got);
        lm_argerror(L, idx, "%s must have shape %s (x's without its last dimension), got %s", name, want, got);
    }
    return t;
}

/* Raises when a and b share bytes (exact aliasing allowed when `same_ok`). */
static void no_overlap(lua_State *L, int argn, const lm_tensor *a, const char *an,
                       const lm_tensor *b, const char *bn, int same_ok) {
    if (!a || !b || !lm_tensors_overlap(a, b)) return;
    if (same_ok && lm_tensors_same_memory(a, b)) return;
    lm_argerror(L, argn, "%s overlaps %s (they alias the same device memory)", an, bn);
}

/* Push constants, as shaders/layer_norm_backward.comp declares them. */
typedef struct lnb_push {
    uint64_t x, dy, dx, weight, mean, invstd, partial, stats, dweight, dbias;
    uint32_t rows, n, d, rows_per_group, groups, groups_x, col_blocks, stat_parts;
    uint32_t chunk, epoch, spin_limit, fold;
} lnb_push;
_Static_assert(sizeof(lnb_push) <= LM_PUSH_BYTES, "layer_norm_backward's push constants outgrew the layout");

/* Stack slots: 1 dy, 2 x, 3 mean, 4 invstd, 5 weight, 6 opts; results 7 dx, 8 dweight,
 * 9 dbias; 10 the scratch. */
int lm_op_layer_norm_backward(lua_State *L) {
    static const char *const known[] = { "out", "dweight", "dbias", NULL };
    lua_settop(L, 6);
    lm_contiguous_inputs(L, 1, 5);
    lm_tensor *dy = lm_check_tensor(L, 1);
    lm_tensor *x = lm_check_tensor(L, 2);
    int same = dy->ndim == x->ndim;
    for (int i = 0; same && i < x->ndim; i++) same = dy->shape[i] == x->shape[i];
    if (!same) {
        char a[256], b[256];
        lm_shape_string(dy->shape, dy->ndim, a, sizeof a);
        lm_shape_string(x->shape, x->ndim, b, sizeof b);
        lm_argerror(L, 1, "dy must have x's shape %s, got %s", b, a);
    }
    int64_t d = x->shape[x->ndim - 1];
    int64_t rows = x->numel / d;
    if (d > 0x7fffffff) lm_argerror(L, 2, "last dimension too large (at most 2^31-1)");
    if (rows > 0xffffffffLL) lm_argerror(L, 2, "too many rows (at most 2^32-1)");
    int64_t stat_shape[LM_MAX_DIMS] = { 1 };
    int stat_ndim = x->ndim > 1 ? x->ndim - 1 : 1;
    if (x->ndim > 1) memcpy(stat_shape, x->shape, sizeof(int64_t) * (size_t)stat_ndim);
    check_stat(L, 3, "mean", stat_ndim, stat_shape);
    check_stat(L, 4, "invstd", stat_ndim, stat_shape);
    lm_tensor *w = lm_opt_tensor(L, 5);
    if (w && !(w->ndim == 1 && w->shape[0] == d)) {
        char got[256];
        lm_shape_string(w->shape, w->ndim, got, sizeof got);
        lm_argerror(L, 5, "weight must have shape [%I] (the last dimension of x), got %s", (LUAI_UACINT)d, got);
    }
    int has_opts = lm_check_options(L, 6, known);
    for (int i = 0; i < 3; i++) lm_push_option(L, 6, known[i]);   /* slots 7, 8, 9 */
    lm_tensor *dx = lm_check_out(L, 7, 6, "out", x->ndim, x->shape);
    lm_tensor *dw = lm_check_out(L, 8, 6, "dweight", 1, &d);
    lm_tensor *db = lm_check_out(L, 9, 6, "dbias", 1, &d);
    if (!w && (dw || db)) lm_argerror(L, 6, "%s given without weight (weight nil: dx only)", dw ? "dweight" : "dbias");
    lm_context *ctx = lm_context_get(L);
    if (has_opts) {
        const lm_tensor *in[] = { dy, x, lm_check_tensor(L, 3), lm_check_tensor(L, 4), w };
        const char *in_names[] = { "dy", "x", "mean", "invstd", "weight" };
        for (int i = 0; i < 5; i++) {
            no_overlap(L, 6, dx, "out", in[i], in_names[i], i < 2);   /* dx may be dy or x exactly */
            no_overlap(L, 6, dw, "dweight", in[i], in_names[i], 0);
            no_overlap(L, 6, db, "dbias", in[i], in_names[i], 0);
        }
        no_overlap(L, 6, dx, "out", dw, "dweight", 0);
        no_overlap(L, 6, dx, "out", db, "dbias", 0);
        no_overlap(L, 6, dw, "dweight", db, "dbias", 0);
    }
    lnb_tune tune = get_tune(L);
    /* The split form reads a partner's x and dy where it computes a missing record,
     * which in place that partner may be overwriting with dx. */
    int in_place = dx && (lm_tensors_same_memory(dx, x) || lm_tensors_same_memory(dx, dy));
    /* The quad form reads and writes aligned vec4s across rows. */
    int quad_ok = lm_tensor_is_plain(x) && lm_tensor_is_plain(dy) && (!dx || lm_tensor_is_plain(dx));
    lnb_plan c = plan(ctx, &tune, d, rows, !in_place, quad_ok);
    if (c.columns && (uint64_t)c.groups * c.col_blocks > 0xffffffffu)
        luaL_error(L, "layer_norm_backward: too many rows and columns for one dispatch");
    if (!dx) { lm_push_tensor(L, ctx, x->ndim, x->shape); lua_replace(L, 7); }
    if (w && !dw) { lm_push_tensor(L, ctx, 1, &d); lua_replace(L, 8); }
    if (w && !db) { lm_push_tensor(L, ctx, 1, &d); lua_replace(L, 9); }
    /* Scratch: the partial rows (with weight), then the rows' sums (long rows). */
    uint64_t partial_words = w ? 2ull * c.groups * (uint64_t)d * (c.quad ? 4u : 1u) : 0;
    uint64_t scratch_words = partial_words + (c.columns ? 2ull * (uint64_t)rows * c.stat_parts : 0);
    if (scratch_words) { int64_t n = (int64_t)scratch_words; lm_push_tensor(L, ctx, 1, &n); }
    else lua_pushnil(L);                                          /* slot 10 */
    lm_split_call call;   /* split: the context's record scratch (may allocate) */
    if (c.split) lm_split_scratch_begin(L, ctx, (uint64_t)rows * c.parts, &call);
    /* The folded reduce's counters: a word per team and one for the teams (may allocate;
     * while a capture records, a fresh tensor pushed at slot 11). */
    int fold = w && c.fold_team;
    lm_tensor counters = { 0 };
    if (fold) lm_group_counters(L, ctx, ceil_div(c.groups, c.fold_team) + 1u, &counters);
    /* The allocations may have run finalizers that freed any of them (see ops.h). */
    dy = lm_check_tensor(L, 1);
    x = lm_check_tensor(L, 2);
    lm_tensor *mean = lm_check_tensor(L, 3), *invstd = lm_check_tensor(L, 4);
    w = lm_opt_tensor(L, 5);
    dx = lm_check_out(L, 7, 6, "out", x->ndim, x->shape);
    dw = lm_check_out(L, 8, 6, "dweight", 1, &d);
    db = lm_check_out(L, 9, 6, "dbias", 1, &d);
    lm_tensor *scratch = lm_opt_tensor(L, 10);
    const lm_tensor *all[] = { dy, x, mean, invstd, w, dw, db };
    for (int i = 0; i < 7; i++)
        if (all[i] && all[i]->storage->ctx != ctx) luaL_error(L, "layer_norm_backward: tensors belong to different devices");

    VkDeviceAddress sbase = scratch ? lm_tensor_address(scratch) : 0;
    lnb_push pc = {
        .x = lm_tensor_address(x), .dy = lm_tensor_address(dy), .dx = lm_tensor_address(dx),
        .weight = w ? lm_tensor_address(w) : 0, .mean = lm_tensor_address(mean), .invstd = lm_tensor_address(invstd),
        .partial = w ? sbase : 0, .stats = c.columns ? sbase + partial_words * 4u : 0,
        .dweight = dw ? lm_tensor_address(dw) : 0, .dbias = db ? lm_tensor_address(db) : 0,
        .rows = (uint32_t)rows, .n = c.n, .d = (uint32_t)d,
        .rows_per_group = c.rows_per_group, .groups = c.groups, .col_blocks = c.col_blocks,
        .stat_parts = c.columns ? c.stat_parts : 1, .fold = c.quad ? 4 : 1,
    };
    int v4 = c.vec == 4;
    uint32_t gy;
    if (c.split) {
        pc.stats = lm_tensor_address(&call.view);
        pc.epoch = call.epoch;
        pc.chunk = c.chunk;
        pc.spin_limit = LNB_SPIN_LIMIT;
        /* llvmpipe ends an invocation's loops past a budget: a slot's rows share it. */
        if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
            pc.spin_limit = LNB_CPU_LOOP_BUDGET / c.rows_per_group / c.parts + 1;
        pc.groups_x = lm_grid(L, ctx, (uint64_t)c.groups * c.parts, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_backward", .shader = v4 ? LM_SH_LN_BWD_SPLIT_VEC4 : LM_SH_LN_BWD_SPLIT_VEC1,
            .spec = { c.wg, c.items, 1, c.prefetch, 1, c.parts }, .push = &pc, .push_bytes = sizeof pc,
            .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { x, dy, mean, invstd, w }, .writes = { dx, scratch, &call.view },
        });
        lm_split_scratch_end(ctx, (uint64_t)pc.groups_x * gy, 0);
    } else if (c.rows) {
        if (fold) { pc.stats = lm_tensor_address(&counters); pc.chunk = c.fold_team; }
        pc.groups_x = lm_grid(L, ctx, c.groups, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_backward", .shader = v4 ? LM_SH_LN_BWD_ROWS_VEC4 : LM_SH_LN_BWD_ROWS_VEC1,
            .spec = { c.wg, c.items, c.k, 0, c.seg }, .push = &pc, .push_bytes = sizeof pc,
            .groups_x = pc.groups_x, .groups_y = gy, .full_subgroups = 1,
            .reads = { x, dy, mean, invstd, w }, .writes = { dx, scratch, fold ? dw : NULL, fold ? db : NULL,
                                                            fold ? &counters : NULL },
        });
    } else if (!c.columns) {
        if (fold) { pc.stats = lm_tensor_address(&counters); pc.chunk = c.fold_team; }
        pc.groups_x = lm_grid(L, ctx, c.groups, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_backward",
            .shader = c.quad ? LM_SH_LN_BWD_QUAD : v4 ? LM_SH_LN_BWD_FUSED_VEC4 : LM_SH_LN_BWD_FUSED_VEC1,
            .spec = { c.wg, c.items, c.k, c.prefetch }, .push = &pc, .push_bytes = sizeof pc,
            .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { x, dy, mean, invstd, w }, .writes = { dx, scratch, fold ? dw : NULL, fold ? db : NULL,
                                                            fold ? &counters : NULL },
        });
    } else {
        pc.groups_x = lm_grid(L, ctx, (uint64_t)rows * c.stat_parts, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_backward", .shader = v4 ? LM_SH_LN_BWD_STATS_VEC4 : LM_SH_LN_BWD_STATS_VEC1,
            .spec = { c.stats_wg, 1, 1 }, .push = &pc, .push_bytes = sizeof pc,
            .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { x, dy, mean, invstd, w }, .writes = { scratch },
        });
        pc.groups_x = lm_grid(L, ctx, (uint64_t)c.groups * c.col_blocks, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_backward", .shader = v4 ? LM_SH_LN_BWD_APPLY_VEC4 : LM_SH_LN_BWD_APPLY_VEC1,
            .spec = { c.wg, 1, c.k }, .push = &pc, .push_bytes = sizeof pc,
            .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { x, dy, mean, invstd, w, scratch }, .writes = { dx, scratch },
        });
    }
    if (w && !fold) {
        pc.col_blocks = (uint32_t)ceil_div((uint64_t)d, LNB_REDUCE_COLS);
        pc.groups_x = lm_grid(L, ctx, pc.col_blocks, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_backward", .shader = LM_SH_LN_BWD_REDUCE,
            .spec = { c.reduce_wg, c.reduce_loads, 1 }, .push = &pc, .push_bytes = sizeof pc,
            .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { scratch }, .writes = { dw, db },
        });
    }
    /* The scratch goes back once the recorded work is done (a deferred free), not at the
     * next collection. */
    if (scratch) lm_tensor_release(scratch);
    lua_settop(L, w ? 9 : 7);
    return w ? 3 : 1;
}

/* tune.layer_norm_backward(D [, rows] [, {form=, wg=, items=, rows_at_once=, groups=,
 * prefetch=, fill=, float_items=, stat_parts=, reduce_loads=, reduce=}]) -> the plan for rows x D ({form, workgroup, items, rows_at_once, prefetch,
 * vec, groups, rows_per_group, reduce_loads, reduce, and stat_parts (columns), segment
 * (rows) or parts (split)}); the options
 * (0, false or "auto": automatic, off) hold for later calls; {} restores the automatic
 * plan. A forced rows form where it does not fit (see plan_rows) plans as automatic
 * without it. */
int lm_op_layer_norm_backward_config(lua_State *L) {
    static const char *const known[] = { "form", "wg", "items", "rows_at_once", "groups", "prefetch", "fill", "float_items", "stat_parts", "reduce_loads", "reduce", NULL };
    lua_Integer d = lm_check_integer(L, 1);
    if (d < 1 || d > 0x7fffffff) lm_argerror(L, 1, "D must be in 1..2^31-1, got %I", (LUAI_UACINT)d);
    lua_Integer rows = lua_isnoneornil(L, 2) ? 1024 : lm_check_integer(L, 2);
    if (rows < 1 || rows > 0xffffffffLL) lm_argerror(L, 2, "rows must be in 1..2^32-1, got %I", (LUAI_UACINT)rows);
    lm_context *ctx = lm_context_get(L);
    lnb_tune t = get_tune(L);
    if (lm_check_options(L, 3, known)) {
        static const char *const forms[] = { "auto", "fused", "columns", "rows", "split", "quad", NULL };
        int form = lm_option_choice(L, 3, "form", forms, 0);
        lua_Integer wg = lm_option_integer(L, 3, "wg", 0);
        if (wg != 0 && !(wg >= 32 && wg <= 1024 && wg % 32 == 0))
            lm_argerror(L, 3, "wg must be a multiple of 32 in 32..1024 (0: automatic), got %I", (LUAI_UACINT)wg);
        lua_Integer items = lm_option_integer(L, 3, "items", 0);
        if (items < 0 || items > LNB_FORCED_MAX_ITEMS)
            lm_argerror(L, 3, "items must be in 0..%d (0: automatic), got %I", LNB_FORCED_MAX_ITEMS, (LUAI_UACINT)items);
        lua_Integer k = lm_option_integer(L, 3, "rows_at_once", 0);
        if (k < 0 || k > 4) lm_argerror(L, 3, "rows_at_once must be in 0..4 (0: automatic), got %I", (LUAI_UACINT)k);
        lua_Integer groups = lm_option_integer(L, 3, "groups", 0);
        if (groups < 0 || groups > 0xffffffffLL) lm_argerror(L, 3, "groups must be in 0..2^32-1 (0: automatic), got %I", (LUAI_UACINT)groups);
        lm_option_boolean(L, 3, "prefetch", 0);   /* checks the type */
        lua_getfield(L, 3, "prefetch");
        int prefetch = lua_isnil(L, -1) ? 0 : lua_toboolean(L, -1) ? 1 : -1;
        lua_pop(L, 1);
        int fill = lm_option_boolean(L, 3, "fill", 0);
        lua_Integer float_items = lm_option_integer(L, 3, "float_items", 0);
        if (float_items < 0 || float_items > LNB_FORCED_MAX_ITEMS)
            lm_argerror(L, 3, "float_items must be in 0..%d (0: automatic), got %I", LNB_FORCED_MAX_ITEMS, (LUAI_UACINT)float_items);
        lua_Integer stat_parts = lm_option_integer(L, 3, "stat_parts", 0);
        if (stat_parts < 0 || stat_parts > 4096)
            lm_argerror(L, 3, "stat_parts must be in 0..4096 (0: automatic), got %I", (LUAI_UACINT)stat_parts);
        lua_Integer reduce_loads = lm_option_integer(L, 3, "reduce_loads", 0);
        if (reduce_loads < 0 || reduce_loads > LNB_FORCED_MAX_ITEMS)
            lm_argerror(L, 3, "reduce_loads must be in 0..%d (0: automatic), got %I", LNB_FORCED_MAX_ITEMS, (LUAI_UACINT)reduce_loads);
        static const char *const reduces[] = { "auto", "fold", "dispatch", NULL };
        int reduce = lm_option_choice(L, 3, "reduce", reduces, 0);
        t = (lnb_tune){ .form = form, .reduce = reduce, .wg = (uint32_t)wg, .items = (uint32_t)items, .k = (uint32_t)k,
                        .groups = (uint32_t)groups, .prefetch = prefetch, .fill = fill,
                        .float_items = (uint32_t)float_items, .stat_parts = (uint32_t)stat_parts,
                        .reduce_loads = (uint32_t)reduce_loads };
        lnb_tune *u = lua_newuserdatauv(L, sizeof *u, 0);
        *u = t;
        lua_setfield(L, LUA_REGISTRYINDEX, TUNE_KEY);
    }
    lnb_plan c = plan(ctx, &t, d, rows, 1, 1);
    lua_createtable(L, 0, 8);
    lua_pushstring(L, c.split ? "split" : c.quad ? "quad" : c.columns ? "columns" : c.rows ? "rows" : "fused"); lua_setfield(L, -2, "form");
    lua_pushinteger(L, c.wg); lua_setfield(L, -2, "workgroup");
    lua_pushinteger(L, c.items); lua_setfield(L, -2, "items");
    lua_pushinteger(L, c.k); lua_setfield(L, -2, "rows_at_once");
    lua_pushboolean(L, c.prefetch); lua_setfield(L, -2, "prefetch");
    lua_pushinteger(L, c.vec); lua_setfield(L, -2, "vec");
    lua_pushinteger(L, c.groups); lua_setfield(L, -2, "groups");
    lua_pushinteger(L, c.rows_per_group); lua_setfield(L, -2, "rows_per_group");
    if (c.columns) { lua_pushinteger(L, c.stat_parts); lua_setfield(L, -2, "stat_parts"); }
    if (c.rows) { lua_pushinteger(L, c.seg); lua_setfield(L, -2, "segment"); }
    if (c.split) { lua_pushinteger(L, c.parts); lua_setfield(L, -2, "parts"); }
    lua_pushinteger(L, c.reduce_loads); lua_setfield(L, -2, "reduce_loads");
    lua_pushstring(L, c.fold_team ? "fold" : "dispatch"); lua_setfield(L, -2, "reduce");
    return 1;
}
