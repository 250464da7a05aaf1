/* layer_norm_forward: argument checks, the plan of the kernel (form, variant,
 * workgroup, items) and the dispatch. The forms are one shader each,
 * shaders/layer_norm_<form>.comp; shaders/common/layer_norm.glsl describes what they
 * share. The numbers below were chosen on the H200 and lavapipe (BENCHMARKS.md). */
#include "ops.h"
#include "split_scratch.h"
#include "../storage.h"
#include <lauxlib.h>
#include <float.h>
#include <math.h>
#include <string.h>

/* Group form: vectors per thread it aims for; fewer for short rows. */
#define LN_ITEMS_SHORT 2
#define LN_ITEMS_LONG 4
#define LN_SHORT_ROW 256
/* On a CPU device (lavapipe) a workgroup runs on one thread and each barrier costs a
 * context switch, so a forced group form takes fewer, wider threads per row there; by
 * default CPUs get the row form. */
#define LN_ITEMS_CPU 16
#define LN_MAX_ITEMS 8         /* group form: most vectors per thread kept in registers
                                * (more spill on the H200) */
#define LN_GROUP_WIDE 512u     /* GPUs, out of place: widest group form workgroup before
                                * the split form (1024-thread groups ran at 38-49% on the
                                * H200 where 160-512 ran at 70-92%) */
#define LN_STREAM_ITEMS 8      /* vectors per thread the streaming form keeps */
#define LN_SUBGROUP_ITEMS 4    /* rows up to this many vectors per lane use a subgroup */
#define LN_SUBGROUP_WG 256
/* Subgroup form: vectors per lane it aims for (2: two loads in flight per lane, and a
 * segment of 8+ lanes reads whole 128-byte lines, as the group form's short rows). */
#define LN_SEGMENT_ITEMS 2
/* The same for masked float16/bfloat16 rows (8-byte vectors): on an H100, 3 read rows of
 * 79 at 52% of the copy ceiling where 2 read 38%, and no row of 23-389 slower; 4 lost
 * 4-5 points on rows of 23 and 59. */
#define LN_SEGMENT_ITEMS_HALF 3
/* Row form (one invocation per row, for CPU devices): 8 rows per workgroup fill one
 * 256-bit SIMD group on lavapipe. Its three loops run once per vector, and llvmpipe
 * cuts an invocation's loops short past 65535 iterations in all (3 x 32768 failed,
 * 3 x 8192 passed), so longer rows take another form. A row whose statistics overflow
 * takes LN_SCALED_PASSES more passes (common/layer_norm.glsl's scaled_stats): 7 x 8192
 * stays within the budget. */
#define LN_ROW_WG 8
#define LN_ROW_MAX_VECTORS 8192u
/* Passes over its share of a row that scaled_stats adds to a thread's loops (exponent,
 * sum, correction, deviations; its y pass replaces the normal one). */
#define LN_SCALED_PASSES 4u
/* Split form: rows longer than one workgroup's registers are shared by up to
 * LN_MAX_PARTS workgroups (LN_MAX_PARTS_CPU on a CPU device, which runs workgroups a
 * few at a time), each keeping LN_SPLIT_ITEMS vectors per thread; longer rows stream.
 * Fewer rows than multiprocessors (which one workgroup per row would leave idle) are
 * split too, where not in place: into parts of at least LN_SPREAD_CHUNK vectors, enough
 * that the call has LN_SPREAD_WAVES workgroups per multiprocessor, LN_SPREAD_ITEMS
 * vectors per thread. */
#define LN_MAX_PARTS 128
#define LN_MAX_PARTS_CPU 8
#define LN_SPLIT_ITEMS 8
#define LN_SPLIT_WG 256
#define LN_SPREAD_CHUNK 1024u
#define LN_SPREAD_WAVES 2u
#define LN_SPREAD_ITEMS 4u
/* Multiprocessors of a device that does not say (only VK_NV_shader_sm_builtins does):
 * it decides only when few rows are split. */
#define LN_GUESS_SMS 64u
/* lm_context.ln_scalar: how rows of D % 4 != 0 are read (tune.layer_norm's `scalar`). */
enum { LN_SCALAR_AUTO, LN_SCALAR_FLOATS, LN_SCALAR_MASKED };
/* Most vectors per thread a forced form may hold: each is a register of a specialized
 * shader; past this a forced group or split form streams instead. */
#define LN_FORCED_MAX_ITEMS 64
#define LN_MAX_CLASSES 13      /* SM classes: their counters are scratch words 3..15 */
#define LN_MAX_FORCED_PARTS 128  /* the tuning hook's parts (a thread per part collects it) */
/* llvmpipe ends an invocation's loops after 65535 iterations in all: on CPU devices a
 * tuned-down workgroup is widened until each thread's passes over a row stay below. */
#define LN_CPU_LOOP_BUDGET 60000u
/* Polls a split part makes for its partners before reading the row itself. Partners
 * take consecutive tickets, so on a GPU they are running within microseconds; the
 * bound only keeps a device that runs too few workgroups at once (a CPU) from hanging.
 * Keep it under 65535: llvmpipe cuts longer loops short and then computes garbage. */
#define LN_SPIN_LIMIT (1u << 15)
#define LN_SPIN_MAX 50000u

/* Tile form (layer_norm_tile.comp): many short rows of D % 4 != 0 on a GPU, up to
 * LN_TILE_MAX_D (a lane per row: on the H200 it beat the subgroup form there, 58-64%
 * of the copy ceiling against 45-55%, and lost to it on longer rows), move through
 * shared memory in runs of about LN_TILE_WG x LN_TILE_ITEMS vec4s (512 x 2 beat 256 x 4
 * and 256 x 8); a forced tile form takes a row per segment of lanes, each lane about
 * LN_TILE_SEG_ELEMS elements of it (at most a subgroup's 32 lanes a row). */
#define LN_TILE_MAX_D 15u
#define LN_TILE_WG 512u
#define LN_TILE_ITEMS 2u
/* float16/bfloat16 x: runs of LN_TILE_WG x LN_TILE_ITEMS_HALF units of 8 elements (4096,
 * as float32's 512 x 2 units of 4), for rows of D % 4 != 0 from LN_TILE_HALF_MIN_D to
 * LN_TILE_HALF_MAX_D: the subgroup form read rows of 1-3 at 81-109% of the copy ceiling on
 * the H100 and rows of 5-13 at 33-60. */
#define LN_TILE_ITEMS_HALF 1u
#define LN_TILE_HALF_MIN_D 5u
#define LN_TILE_HALF_MAX_D 15u
#define LN_TILE_SEG_ELEMS 8u
#define LN_TILE_MAX_SEG 32u
/* Two-stage split form (layer_norm_split2.comp): few rows too long for a workgroup
 * (where the split form would spread them) on a GPU, out of place, but where the split
 * form takes at most LN_SPLIT_FEW_PARTS parts for under LN_SPLIT2_MIN_BYTES of x (its
 * one dispatch wins there: 39-52% of the copy ceiling against 33-42%). Slices of
 * LN_SPLIT2_WG x LN_SPLIT2_ITEMS vectors, more where the call would have fewer than
 * LN_SPLIT2_WAVES workgroups per multiprocessor; at most LN_SPLIT2_MAX_ITEMS vectors per
 * thread. */
#define LN_SPLIT2_WG 256u
#define LN_SPLIT2_ITEMS 4u     /* 4 (twice the slices) ran at 45-120% on the H200 where 8
                                * ran at 27-55% */
#define LN_SPLIT2_WAVES 4u
#define LN_SPLIT_FEW_PARTS 9u
#define LN_SPLIT2_MIN_BYTES (8ull << 20)
#define LN_SPLIT2_MAX_ITEMS 16u
/* The automatic split form for rows past the group form's registers (rows >= SMs) gives
 * way to the two-stage split where it would take more than LN_SPLIT_MAX_AUTO_PARTS parts
 * a row: each part waits on all its partners' records, and on the H100 (sessions 20-21, %
 * of copy, split -> two-stage) 608 rows of 397919 floats (49 parts) ran at 37.1 against
 * 60.0 and 169 rows of 601015 (74) at 26.3 against 58.0, while 300 rows of 262144 (32
 * parts) ran at 77.8 against 66.9 and 4096 of 65536 (8) at 89.6 against 67.6; between,
 * 1080 rows of 196917 (25) 59.0 / 59.8, 200 of 150001 (19) 55.1 / 56.7. Pipelined in one
 * dispatch (with 64-bit atomics), the two-stage split takes over past
 * LN_SPLIT_MAX_PIPE_PARTS parts (H100, session 22, % of copy, split -> pipelined:
 * 4096 rows of 65536 (8 parts) 91.0 / 84.6 stay split; past 8: 170 of 110591 (14) 53.8
 * / 58.0, 300 of 262144 (32) 78.0 / 78.5, 1080 of 196917 (25) 58.7 / 60.2, but 2050 of
 * 110459 (14) 63.4 / 60.9 and 1552 of 140539 (18) 61.2 / 60.2). */
#define LN_SPLIT_MAX_AUTO_PARTS 32u
#define LN_SPLIT_MAX_PIPE_PARTS 8u
/* The two-stage split pipelined in one dispatch (STAGE 0 of layer_norm_split2.comp):
 * a slice is normalized `lag` tickets after its record, lag = parts + LN_PIPE_WAVES
 * workgroups per multiprocessor but at most LN_PIPE_LAG_BYTES of slices apart, so that
 * the second read of a slice still finds it in L2. On an H100 (session 22, % of copy,
 * float32 slices of 16 KiB) a lag of 200 ran 4096 rows of 65536 at 85.2, one of 1500 at
 * 67.0 and the first rule (parts + 528) at 68.5, as did two dispatches (68.0). */
#define LN_PIPE_WAVES 4u
#define LN_PIPE_LAG_BYTES (3ull << 20)
#define LN_MAX_LAG (1u << 20)   /* the tuning hook's bound: a lag is a count of workgroups */
#define LN_PIPE_SHARED_PER_PART 20u   /* shared bytes per slice: a vec3 (16-byte stride), a flag */
/* Forms of this file beyond lm_context's enum lm_ln_form (tune.layer_norm's `form`
 * names them after it). */
enum { LN_FORM_TILE = LM_LN_ROW + 1, LN_FORM_SPLIT2 };

/* Tuning beyond lm_context's ln_* fields, set by tune.layer_norm and kept per lua_State
 * in the registry (LN_TUNE_KEY): how masked rows are read (LN_LOADS_*), a form of this
 * file forced (LN_FORM_*, 0: none), and whether the automatic plan may take the tile
 * form, the two-stage split, or the split form for rows past LN_GROUP_WIDE threads'
 * registers (`no_tile`, `no_split2`, `no_long_split`: the plan as before them). */
enum { LN_LOADS_CLAMPED, LN_LOADS_GUARDED };
enum { LN_LEAN_AUTO, LN_LEAN_ON, LN_LEAN_OFF };
typedef struct ln_tune {
    int loads;
    int form;
    int no_tile;
    int no_split2;
    int no_long_split;
    int lean_masks;     /* clamped masked rows: LEAN (common/layer_norm.glsl), an LN_LEAN_* */
    /* Subgroup form: segments of fewer lanes than a subgroup reduce through shared memory
     * instead of by a butterfly of shuffles (SHUFFLES in common/layer_norm.glsl), which
     * an H100 ran 0.3-6.9 points of copy faster on rows of 21-79 (session 21). */
    int segment_partials;
    int split2_dispatches;   /* two-stage split: two dispatches even where one can pipeline it */
    uint32_t lag;            /* pipelined two-stage split: tickets from record to normalizing (0: auto) */
    int shifted_params;      /* weight and bias as float32 copies made per call (param_copies) */
    uint32_t split2_items;   /* two-stage split: vectors per thread of a slice (0: LN_SPLIT2_ITEMS) */
    /* Rows of D % 4 == 0 read as masked rows too (each of skew 0): a diagnostic that times
     * the masking's instructions apart from the rows' alignment. */
    int masked_aligned;
} ln_tune;
static const char LN_TUNE_KEY[] = "lumus.layer_norm.tune";

static ln_tune get_tune(lua_State *L) {
    ln_tune t = { 0 };
    lua_getfield(L, LUA_REGISTRYINDEX, LN_TUNE_KEY);
    const ln_tune *u = lua_touserdata(L, -1);
    if (u) t = *u;
    lua_pop(L, 1);
    return t;
}

static void set_tune(lua_State *L, const ln_tune *t) {
    ln_tune *u = lua_newuserdatauv(L, sizeof *u, 0);
    *u = *t;
    lua_setfield(L, LUA_REGISTRYINDEX, LN_TUNE_KEY);
}

/* What the device and the row length allow, shared by the planners. */
typedef struct ln_shape {
    uint32_t vec;       /* 4: rows read as vec4; else 1 (floats) */
    int masked;         /* vec4 over D not a multiple of 4: the aligned vec4s covering a
                         * row, lanes outside it masked (common/layer_norm.glsl) */
    int clamped;        /* masked rows read by clamped loads (ANY_D=2), else guarded */
    uint32_t n;         /* vectors per row: D / vec, or with `masked` the most vec4s
                         * that cover a row, ceil((D + 3) / 4) */
    uint32_t d;         /* elements per row */
    uint32_t rows;      /* rows of the call (UINT32_MAX: many) */
    uint32_t sms;       /* multiprocessors: the device's count, else LN_GUESS_SMS */
    uint32_t max_wg;    /* largest workgroup: the device's limits, at most 1024 */
    uint32_t sg;        /* smallest subgroup size (1 where unknown) */
    int cpu;            /* a CPU device (lavapipe) */
    uint32_t segment_items;   /* subgroup form's vectors per lane (0: LN_SEGMENT_ITEMS) */
    int narrow_width;   /* group form: long rows take more vectors per thread (up to
                         * LN_MAX_ITEMS) rather than workgroups wider than LN_GROUP_WIDE,
                         * and short rows LN_ITEMS_LONG (unmasked float16/bfloat16) */
} ln_shape;

/* The kernel for one call. spec[0..2] of the pipeline are wg, items, and rows_per_group
 * or parts (whichever the form uses). */
typedef struct ln_plan {
    int form;                   /* lm_ln_form, never LM_LN_AUTO */
    lm_shader_id shader;
    uint32_t vec;
    int masked;                 /* see ln_shape */
    int clamped;                /* see ln_shape */
    uint32_t n;                 /* vectors per row, as ln_shape */
    uint32_t wg;                /* threads per workgroup: a power of two, or (a GPU's
                                 * group form) a multiple of the largest subgroup */
    uint32_t items;             /* vectors per thread held in registers */
    uint32_t rows_per_group;    /* group, subgroup, stream, row forms: rows per workgroup */
    uint32_t parts;             /* split form: workgroups per row, none of them empty */
    uint32_t classes;           /* split form: SM classes (1: tickets) */
    uint32_t seg;               /* tile form: lanes per row */
    int tagged_records;         /* split form: 64-bit tagged record words */
    uint32_t lag;               /* two-stage split: pipelined in one dispatch with this lag
                                 * (tickets, >= parts), or 0: two dispatches */
    int full_subgroups;         /* the pipeline needs whole subgroups (subgroup form) */
    const char *variant;        /* the form's name, for the tuning hook */
} ln_plan;

static uint32_t pow2_at_least(uint32_t v) { uint32_t p = 1; while (p < v) p <<= 1; return p; }
static uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

/* `masked_ok`: rows whose D is not a multiple of 4 may be read as masked vec4s (every
 * form but the row form). They are on a GPU, where memory hides the masking's extra
 * instructions; a CPU device (lavapipe) pays for each, so there they are read as floats;
 * the tuning hook's `scalar` decides either way (and `masked_aligned` reads rows of D % 4 == 0
 * so too). */
static ln_shape shape_of(const lm_context *ctx, const ln_tune *t, int64_t d, uint32_t rows, int masked_ok) {
    ln_shape s;
    int cpu = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    s.d = (uint32_t)d;
    s.rows = rows;
    s.sms = ctx->sm_count ? ctx->sm_count : LN_GUESS_SMS;
    s.masked = d % 4 != 0 ? masked_ok && (ctx->ln_scalar == LN_SCALAR_AUTO ? !cpu : ctx->ln_scalar == LN_SCALAR_MASKED)
                          : masked_ok && t->masked_aligned;
    s.clamped = s.masked && t->loads == LN_LOADS_CLAMPED;
    s.vec = d % 4 == 0 || s.masked ? 4 : 1;
    s.n = s.masked ? (uint32_t)((d + 6) / 4) : (uint32_t)(d / s.vec);
    s.max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (s.max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) s.max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    if (s.max_wg > 1024) s.max_wg = 1024;
    s.sg = ctx->min_subgroup ? ctx->min_subgroup : 1;
    s.cpu = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    s.narrow_width = 0;
    s.segment_items = 0;
    return s;
}

/* The smallest power-of-two multiple of wg (up to max_wg) whose threads each loop at
 * most LN_CPU_LOOP_BUDGET times for `passes` passes over n vectors plus `items`. */
static uint32_t cpu_loop_wg(const ln_shape *s, uint32_t wg, uint32_t passes, uint32_t items) {
    if (!s->cpu) return wg;
    while (wg < s->max_wg && (uint64_t)(passes + LN_SCALED_PASSES) * ceil_div(s->n, wg) + 3ull * items > LN_CPU_LOOP_BUDGET) wg *= 2;
    return wg > s->max_wg ? s->max_wg : wg;
}

/* The clamped-load build (ANY_D=2) of a guarded masked one (ANY_D=1). */
static lm_shader_id clamped_build(lm_shader_id guarded) {
    switch (guarded) {
    case LM_SH_LN_GROUP_ANY: return LM_SH_LN_GROUP_CLAMP;
    case LM_SH_LN_SUBGROUP_ANY: return LM_SH_LN_SUBGROUP_CLAMP;
    case LM_SH_LN_STREAM_ANY: return LM_SH_LN_STREAM_CLAMP;
    case LM_SH_LN_SPLIT_ANY: return LM_SH_LN_SPLIT_CLAMP;
    case LM_SH_LN_SPLIT64_ANY: return LM_SH_LN_SPLIT64_CLAMP;
    case LM_SH_LN_SPLIT64SM_ANY: return LM_SH_LN_SPLIT64SM_CLAMP;
    default: return guarded;
    }
}

static lm_shader_id by_vec(const ln_shape *s, lm_shader_id vec4, lm_shader_id masked, lm_shader_id vec1) {
    if (s->masked) return s->clamped ? clamped_build(masked) : masked;
    return s->vec == 4 ? vec4 : vec1;
}

/* (Its shader declares subgroup shuffles, for segment_shuffles: only where the device has them.) */
static int subgroup_fits(const lm_context *ctx, const ln_shape *s) {
    uint32_t per_lane = ctx->ln_subgroup_items ? ctx->ln_subgroup_items : LN_SUBGROUP_ITEMS;
    return ctx->full_subgroups && ctx->subgroup_shuffle && s->n <= per_lane * s->sg &&
           LN_SUBGROUP_WG <= s->max_wg && LN_SUBGROUP_WG % ctx->max_subgroup == 0;
}

/* The most parts per row the split form takes unless the tuning hook forces more. */
static uint32_t max_parts(const ln_shape *s) { return s->cpu ? LN_MAX_PARTS_CPU : LN_MAX_PARTS; }

/* Workgroups per row that spread `rows` rows over the multiprocessors (1: no need). */
static uint32_t spread_parts(const ln_shape *s) {
    if (s->cpu || s->rows >= s->sms || s->n < 2 * LN_SPREAD_CHUNK) return 1;
    uint32_t want = ceil_div(LN_SPREAD_WAVES * s->sms, s->rows);
    uint32_t most = s->n / LN_SPREAD_CHUNK;
    if (want > most) want = most;
    return want < max_parts(s) ? want : max_parts(s);
}

/* The form for rows of this shape: the tuning hook's, where it can run, else the
 * device's. `in_place` (y is x) rules out the split form, whose fallback rereads x.
 * `row_shape` is the row form's (never masked). */
static int choose_form(const lm_context *ctx, const ln_tune *t, const ln_shape *s, const ln_shape *row_shape, int in_place) {
    int form = ctx->ln_form;
    if (form == LM_LN_AUTO && ctx->ln_parts && !in_place) form = LM_LN_SPLIT;   /* parts forced */
    if (form == LM_LN_AUTO && s->cpu && row_shape->n <= LN_ROW_MAX_VECTORS) form = LM_LN_ROW;
    if (form == LM_LN_ROW && row_shape->n > LN_ROW_MAX_VECTORS) form = LM_LN_AUTO;
    if (form == LM_LN_SPLIT && in_place) form = LM_LN_STREAM;
    if (form == LM_LN_STREAM || form == LM_LN_SPLIT || form == LM_LN_ROW || form == LM_LN_GROUP) return form;
    /* Automatic, or a forced subgroup form, which only runs where it fits. */
    if (subgroup_fits(ctx, s)) return LM_LN_SUBGROUP;
    if (!in_place && spread_parts(s) > 1) return LM_LN_SPLIT;
    /* A GPU's rows past LN_GROUP_WIDE x LN_MAX_ITEMS vectors (where a group form would
     * take wider workgroups, one per multiprocessor with their barriers) go to the
     * split form's smaller ones, out of place. */
    if (!in_place && !s->cpu && !t->no_long_split && s->n > LN_GROUP_WIDE * LN_MAX_ITEMS &&
        s->n <= s->max_wg * LN_SPLIT_ITEMS * LN_MAX_PARTS) return LM_LN_SPLIT;
    if (s->n <= s->max_wg * LN_MAX_ITEMS) return LM_LN_GROUP;
    if (!in_place && !s->cpu && s->n <= s->max_wg * LN_SPLIT_ITEMS * LN_MAX_PARTS) return LM_LN_SPLIT;
    return LM_LN_STREAM;
}

/* Tile form: rows_per_group whole rows per run of at most wg x items vec4s (the
 * shared memory the device has bounds items); 0 rows_per_group where a row does not fit. */
static ln_plan plan_tile(const lm_context *ctx, const ln_shape *s, lm_dtype dt) {
    /* 16-byte units of 4 float32 or 8 float16/bfloat16 elements; a float32 tile in shared memory */
    uint32_t unit = dt == LM_FLOAT32 ? 4u : 8u;
    ln_plan c = { .form = LN_FORM_TILE, .vec = 4, .n = s->n, .variant = "tile",
                  .shader = dt == LM_FLOAT16 ? LM_SH_LN_TILE_F16 : dt == LM_BFLOAT16 ? LM_SH_LN_TILE_BF16 : LM_SH_LN_TILE };
    uint32_t wg = ctx->ln_wg_override ? ctx->ln_wg_override : LN_TILE_WG;
    if (wg > s->max_wg) wg = s->max_wg;
    uint32_t items = ctx->ln_items_target ? ctx->ln_items_target : dt == LM_FLOAT32 ? LN_TILE_ITEMS : LN_TILE_ITEMS_HALF;
    uint64_t limit = ctx->props.limits.maxComputeSharedMemorySize;
    while (items > 1 && 4ull * unit * wg * items + 8ull * wg + 16 > limit) items--;
    c.wg = wg;
    c.items = items;
    c.rows_per_group = (unit * wg * items - (unit - 1)) / s->d;
    uint32_t seg = 1, most = wg < LN_TILE_MAX_SEG ? wg : LN_TILE_MAX_SEG;
    while (seg * 2 <= most && seg * 2 * LN_TILE_SEG_ELEMS <= s->d) seg *= 2;
    c.seg = seg;
    return c;
}

/* The lag of a pipelined two-stage split for `rows` rows of plan c (elements of
 * `elem_bytes`), or 0 where it takes two dispatches: asked for, no 64-bit atomics for
 * its tagged records, a capture (whose replays cannot advance the scratch's epoch), or
 * tickets past 32 bits. */
static uint32_t split2_lag(const lm_context *ctx, const ln_tune *t, const ln_plan *c, uint64_t rows,
                           uint32_t elem_bytes) {
    if (t->split2_dispatches || !ctx->int64_atomics || ctx->stream.recording) return 0;
    uint64_t lag = t->lag;
    if (!lag) {
        uint64_t slice_bytes = (uint64_t)c->wg * c->items * c->vec * elem_bytes;
        uint64_t fit = LN_PIPE_LAG_BYTES / slice_bytes;
        lag = (uint64_t)(ctx->sm_count ? ctx->sm_count : LN_GUESS_SMS) * LN_PIPE_WAVES;
        if (lag > fit) lag = fit;
        lag += c->parts;
    }
    if (lag < c->parts) lag = c->parts;   /* every record a slice waits for has an earlier ticket */
    if (rows * c->parts + lag > 0xffffffffu) return 0;
    /* A workgroup gathers its row's records in shared memory (a vec3 and a flag per
     * slice, beside the workgroup sums): rows of more slices than that holds take the
     * two dispatches, whose second reads the records from memory. */
    if ((uint64_t)c->parts * LN_PIPE_SHARED_PER_PART + 8ull * c->wg + 64u > ctx->props.limits.maxComputeSharedMemorySize)
        return 0;
    return (uint32_t)lag;
}

/* Two-stage split form: `parts` slices per row of at most wg x items vectors. */
static ln_plan plan_split2(const lm_context *ctx, const ln_tune *t, const ln_shape *s) {
    ln_plan c = { .form = LN_FORM_SPLIT2, .vec = s->vec, .masked = s->masked, .clamped = s->masked, .n = s->n,
                  .variant = "split2" };
    uint32_t wg = ctx->ln_wg_override ? ctx->ln_wg_override : LN_SPLIT2_WG;
    if (wg > s->max_wg) wg = s->max_wg;
    uint32_t items = ctx->ln_items_target ? ctx->ln_items_target : t->split2_items ? t->split2_items : LN_SPLIT2_ITEMS;
    uint64_t parts = ctx->ln_parts ? ctx->ln_parts : ceil_div(s->n, wg * items);
    uint64_t fill = ceil_div(LN_SPLIT2_WAVES * s->sms, s->rows);
    if (!ctx->ln_parts && parts < fill) parts = fill;
    uint64_t fewest = ceil_div(s->n, wg * LN_SPLIT2_MAX_ITEMS);
    if (parts < fewest) parts = fewest;
    if (parts > s->n) parts = s->n;
    uint32_t chunk = (uint32_t)ceil_div(s->n, (uint32_t)parts);
    c.parts = ceil_div(s->n, chunk);   /* no empty slice */
    c.wg = cpu_loop_wg(s, wg, 4, 0);
    c.items = ceil_div(chunk, c.wg);
    c.shader = s->masked ? LM_SH_LN_SPLIT2_STATS_CLAMP : s->vec == 4 ? LM_SH_LN_SPLIT2_STATS_VEC4 : LM_SH_LN_SPLIT2_STATS_VEC1;
    return c;
}

/* Another build of stage 1's shader (`stats`): SPLIT2_APPLY (stage 2) or SPLIT2_PIPELINED
 * (both stages in one dispatch). */
enum { SPLIT2_APPLY = 1, SPLIT2_PIPELINED = 2 };
static lm_shader_id split2_build(lm_shader_id stats, int which) {
    static const lm_shader_id builds[][3] = {
        { LM_SH_LN_SPLIT2_STATS_VEC4, LM_SH_LN_SPLIT2_APPLY_VEC4, LM_SH_LN_SPLIT2_PIPE_VEC4 },
        { LM_SH_LN_SPLIT2_STATS_CLAMP, LM_SH_LN_SPLIT2_APPLY_CLAMP, LM_SH_LN_SPLIT2_PIPE_CLAMP },
        { LM_SH_LN_SPLIT2_STATS_VEC1, LM_SH_LN_SPLIT2_APPLY_VEC1, LM_SH_LN_SPLIT2_PIPE_VEC1 },
        { LM_SH_LN_SPLIT2_STATS_F16_VEC4, LM_SH_LN_SPLIT2_APPLY_F16_VEC4, LM_SH_LN_SPLIT2_PIPE_F16_VEC4 },
        { LM_SH_LN_SPLIT2_STATS_F16_CLAMP, LM_SH_LN_SPLIT2_APPLY_F16_CLAMP, LM_SH_LN_SPLIT2_PIPE_F16_CLAMP },
        { LM_SH_LN_SPLIT2_STATS_F16_VEC1, LM_SH_LN_SPLIT2_APPLY_F16_VEC1, LM_SH_LN_SPLIT2_PIPE_F16_VEC1 },
        { LM_SH_LN_SPLIT2_STATS_BF16_VEC4, LM_SH_LN_SPLIT2_APPLY_BF16_VEC4, LM_SH_LN_SPLIT2_PIPE_BF16_VEC4 },
        { LM_SH_LN_SPLIT2_STATS_BF16_CLAMP, LM_SH_LN_SPLIT2_APPLY_BF16_CLAMP, LM_SH_LN_SPLIT2_PIPE_BF16_CLAMP },
        { LM_SH_LN_SPLIT2_STATS_BF16_VEC1, LM_SH_LN_SPLIT2_APPLY_BF16_VEC1, LM_SH_LN_SPLIT2_PIPE_BF16_VEC1 },
    };
    size_t i = 0;
    while (i + 1 < sizeof builds / sizeof builds[0] && builds[i][0] != stats) i++;
    return builds[i][which];
}

/* Whether the automatic plan takes the two-stage split: where the split form would
 * spread few rows over the multiprocessors. */
static int split2_fits(const ln_tune *t, const ln_shape *s, int in_place) {
    return !t->no_split2 && !s->cpu && !in_place && spread_parts(s) > 1;
}

/* Whether the automatic plan takes the tile form: short masked rows on a GPU. */
static int tile_fits(const ln_tune *t, const ln_shape *s) {
    return !t->no_tile && !s->cpu && s->masked && s->d % 4 != 0 && s->d <= LN_TILE_MAX_D;
}

/* The same for float16/bfloat16 x (their other forms read such rows an element per lane). */
static int half_tile_fits(const ln_tune *t, const ln_shape *s) {
    return !t->no_tile && !s->cpu && s->d % 4 != 0 && s->d >= LN_TILE_HALF_MIN_D && s->d <= LN_TILE_HALF_MAX_D;
}

/* Row form: one invocation per row, wg rows per workgroup. */
static ln_plan plan_row(const lm_context *ctx, const ln_shape *s) {
    ln_plan c = { .form = LM_LN_ROW, .vec = s->vec, .masked = s->masked, .clamped = s->clamped, .n = s->n, .variant = "row", .items = 1 };
    c.shader = s->vec == 4 ? LM_SH_LN_ROW_VEC4 : LM_SH_LN_ROW_VEC1;   /* never masked */
    c.wg = ctx->ln_wg_override ? ctx->ln_wg_override : LN_ROW_WG;
    c.rows_per_group = c.wg;
    return c;
}

/* Subgroup form: a row per segment of `seg` lanes of a subgroup, seg the power of two
 * (at most the smallest subgroup) that gives each lane about `target` vectors, so short
 * rows share a subgroup instead of idling its lanes; workgroup / seg rows per workgroup. */
static ln_plan plan_subgroup(const lm_context *ctx, const ln_shape *s) {
    ln_plan c = { .form = LM_LN_SUBGROUP, .vec = s->vec, .masked = s->masked, .clamped = s->clamped, .n = s->n, .variant = "subgroup", .full_subgroups = 1 };
    c.shader = by_vec(s, LM_SH_LN_SUBGROUP_VEC4, LM_SH_LN_SUBGROUP_ANY, LM_SH_LN_SUBGROUP_VEC1);
    uint32_t target = ctx->ln_items_target ? ctx->ln_items_target : s->segment_items ? s->segment_items : LN_SEGMENT_ITEMS;
    uint32_t seg = pow2_at_least(ceil_div(s->n, target));
    if (seg > s->sg) seg = s->sg;
    c.wg = LN_SUBGROUP_WG;
    c.rows_per_group = LN_SUBGROUP_WG / seg;
    c.items = ceil_div(s->n, seg);
    return c;
}

/* Streaming form: one workgroup per row, `items` vectors per thread in registers. */
static ln_plan plan_stream(const lm_context *ctx, const ln_shape *s) {
    ln_plan c = { .form = LM_LN_STREAM, .vec = s->vec, .masked = s->masked, .clamped = s->clamped, .n = s->n, .variant = "stream", .rows_per_group = 1 };
    c.shader = by_vec(s, LM_SH_LN_STREAM_VEC4, LM_SH_LN_STREAM_ANY, LM_SH_LN_STREAM_VEC1);
    c.items = ctx->ln_items_target ? ctx->ln_items_target : LN_STREAM_ITEMS;
    c.wg = cpu_loop_wg(s, ctx->ln_wg_override ? ctx->ln_wg_override : s->max_wg, 3, c.items);
    return c;
}

/* Group form: one workgroup per row holding all of it in registers; `target` vectors
 * per thread where the workgroup allows, at least a subgroup (and 32) threads. A forced
 * group form whose row needs more than LN_FORCED_MAX_ITEMS per thread streams. */
/* A workgroup of at least `threads`: the next multiple of `unit`, or with unit 0 the
 * next power of two. */
static uint32_t group_width(uint32_t threads, uint32_t unit) {
    return unit ? ceil_div(threads, unit) * unit : pow2_at_least(threads);
}

static ln_plan plan_group(const lm_context *ctx, const ln_shape *s) {
    ln_plan c = { .form = LM_LN_GROUP, .vec = s->vec, .masked = s->masked, .clamped = s->clamped, .n = s->n, .variant = "group", .rows_per_group = 1 };
    c.shader = by_vec(s, LM_SH_LN_GROUP_VEC4, LM_SH_LN_GROUP_ANY, LM_SH_LN_GROUP_VEC1);
    uint32_t target = ctx->ln_items_target ? ctx->ln_items_target
                    : s->cpu ? LN_ITEMS_CPU : s->n <= LN_SHORT_ROW && !s->narrow_width ? LN_ITEMS_SHORT : LN_ITEMS_LONG;
    if (!ctx->ln_items_target && s->narrow_width && s->n > target * LN_GROUP_WIDE) {
        target = ceil_div(s->n, LN_GROUP_WIDE);
        if (target > LN_MAX_ITEMS) target = LN_MAX_ITEMS;
    }
    /* A GPU takes any whole number of its largest subgroups, so a row of n vectors idles
     * fewer than a subgroup's lanes in each of its `items` loads (a power of two idled
     * up to half of them, e.g. 1280 vectors on 512 x 3); a CPU, powers of two. */
    uint32_t unit = s->cpu || !ctx->max_subgroup ? 0 : ctx->max_subgroup;
    uint32_t wg = ctx->ln_wg_override ? ctx->ln_wg_override : group_width(ceil_div(s->n, target), unit);
    uint32_t lo = s->sg > 32 ? s->sg : 32;
    if (wg < lo) wg = lo;
    if (wg > s->max_wg) wg = s->max_wg;
    if (wg * LN_MAX_ITEMS < s->n) wg = group_width(ceil_div(s->n, LN_MAX_ITEMS), unit);
    if (wg > s->max_wg) wg = s->max_wg;
    c.wg = wg;
    c.items = ceil_div(s->n, wg);
    if (c.items > LN_FORCED_MAX_ITEMS) return plan_stream(ctx, s);
    return c;
}

/* SM classes for `parts` parts per row (see layer_norm_split.comp): automatically, the
 * most (up to LN_MAX_CLASSES) that divide both the parts and the multiprocessors, so
 * each class has the same number of both; only where the device has SM ids. A forced
 * count (tuning) is cut to the most that divide the parts, and runs on stand-in ids
 * where there are no SM ids (for specs). */
static uint32_t split_classes(const lm_context *ctx, uint32_t parts) {
    uint32_t want = ctx->ln_classes;
    if (want == 1 || (!want && !ctx->sm_count)) return 1;
    uint32_t k = want && want < LN_MAX_CLASSES ? want : LN_MAX_CLASSES;
    while (k > 1 && (parts % k || (!want && ctx->sm_count % k))) k--;
    return k;
}

/* Split form: `parts` workgroups per row, each holding a slice in registers. Small
 * workgroups overlap one part's wait for its partners with other parts' loads, so
 * rows that max_parts small workgroups hold take those (a large workgroup also leaves
 * each thread fewer registers for its slice); longer ones take the
 * largest. A split that would hold more than LN_FORCED_MAX_ITEMS per thread streams.
 * `affine`: the call has weight or bias, the only case where SM classes pay. */
static ln_plan plan_split(const lm_context *ctx, const ln_shape *s, int affine) {
    ln_plan c = { .form = LM_LN_SPLIT, .vec = s->vec, .masked = s->masked, .clamped = s->clamped, .n = s->n, .variant = "split" };
    uint32_t items = ctx->ln_items_target ? ctx->ln_items_target : LN_SPLIT_ITEMS;
    uint32_t small_wg = LN_SPLIT_WG <= s->max_wg ? LN_SPLIT_WG : s->max_wg;
    uint32_t spread = ctx->ln_parts || ctx->ln_wg_override || ctx->ln_items_target ? 1 : spread_parts(s);
    uint32_t parts;
    if (spread > 1) {
        /* Few rows: at least `spread` parts, and as many as small workgroups need to
         * hold the row where max_parts of them can (else large ones); each thread about
         * LN_SPREAD_ITEMS vectors. */
        uint32_t hold = ceil_div(s->n, small_wg * LN_SPLIT_ITEMS);
        if (hold > max_parts(s)) hold = ceil_div(s->n, s->max_wg * LN_SPLIT_ITEMS);
        parts = spread > hold ? spread : hold;
        uint32_t wg = pow2_at_least(ceil_div(ceil_div(s->n, parts), LN_SPREAD_ITEMS));
        c.wg = wg < small_wg ? small_wg : wg > s->max_wg ? s->max_wg : wg;
    } else {
        c.wg = ctx->ln_wg_override ? ctx->ln_wg_override
             : s->n <= small_wg * items * max_parts(s) ? small_wg : s->max_wg;
        parts = ctx->ln_parts ? ctx->ln_parts : ceil_div(s->n, c.wg * items);
    }
    /* Parts spin-wait for their partners: never more than max_parts unless forced (a
     * small tuned wg made thousands, which lavapipe ran one after another). */
    if (!ctx->ln_parts && parts > max_parts(s)) parts = max_parts(s);
    if (parts > s->n) parts = s->n;
    if (parts > s->max_wg) parts = s->max_wg;
    /* No empty part (its statistics would be 0/0): as many parts as slices of
     * ceil(n / parts) vectors it takes to cover the row. */
    uint32_t chunk = ceil_div(s->n, parts);
    c.parts = ceil_div(s->n, chunk);
    /* Thread i of a part collects part i's record, so a workgroup needs a thread per
     * part; it stays a power of two, a whole number of subgroups (a workgroup of 9..63
     * threads gave wrong rows on lavapipe). parts <= 128, the threads Vulkan
     * guarantees. */
    if (c.wg < c.parts) c.wg = pow2_at_least(c.parts);
    /* On a CPU device llvmpipe's loop budget covers the fallback's two passes over the row
     * (half of it) and the polls for partners (the other half: the spin limit). */
    c.wg = cpu_loop_wg(s, c.wg, 4, 0);
    c.items = ceil_div(chunk, c.wg);
    if (c.items > LN_FORCED_MAX_ITEMS) return plan_stream(ctx, s);
    c.tagged_records = ctx->int64_atomics && !ctx->ln_fenced_records;
    /* Classes keep weight and bias slices in a multiprocessor's L1; without weight and
     * bias they only cost. On SM ids they need the tagged shader (the only one built
     * with them); the stand-in ids of the others run only where a count is forced. */
    int want = ctx->ln_classes > 1 || (!ctx->ln_classes && c.tagged_records && affine);
    c.classes = want ? split_classes(ctx, c.parts) : 1;
    if (c.tagged_records && c.classes > 1 && ctx->sm_count)
        c.shader = by_vec(s, LM_SH_LN_SPLIT64SM_VEC4, LM_SH_LN_SPLIT64SM_ANY, LM_SH_LN_SPLIT64SM_VEC1);
    else if (c.tagged_records)
        c.shader = by_vec(s, LM_SH_LN_SPLIT64_VEC4, LM_SH_LN_SPLIT64_ANY, LM_SH_LN_SPLIT64_VEC1);
    else
        c.shader = by_vec(s, LM_SH_LN_SPLIT_VEC4, LM_SH_LN_SPLIT_ANY, LM_SH_LN_SPLIT_VEC1);
    return c;
}

/* Specialization constant 4 (LEAN): 1 where the plan reads clamped masked rows and lean
 * masks are on, else 0 (so other plans share the default pipelines). By default they are
 * on for float32 and bfloat16, and for float16 in the two-stage split form only: on an
 * H100 (BENCHMARKS.md, session 20), % of copy default -> lean over 11 masked shapes,
 * bfloat16 +0.6 to +6.5 on every one (rows of 907 46 -> 52, of 10142 37 -> 44), float32
 * -1.0 to +11.2 (rows of 15313 55 -> 66, of 8433 73 -> 79), float16 -3.3 to +4.4 (rows of
 * 907 57 -> 54, of 4813 54 -> 58). float16 again (session 27, seeds 2715 and 2716, 38
 * masked shapes): the two-stage split +1.2 to +3.2 on 18 of its 20 (1475 rows of 60443
 * 50.4 -> 53.6), the others within 0.9; subgroup forms -0.2 to -5.2, group forms -15 to
 * +10 (860 rows of 24741 44.7 -> 29.8, 2787 of 13613 45.4 -> 55.4). */
static uint32_t lean_spec(const ln_tune *t, const ln_plan *c, lm_dtype dt) {
    if (!c->masked || !c->clamped || t->lean_masks == LN_LEAN_OFF) return 0;
    return t->lean_masks == LN_LEAN_ON || dt != LM_FLOAT16 || c->form == LN_FORM_SPLIT2;
}

/* The tuning hook's shifted_params: weight and bias read as float32 copies made for the
 * call (shaders/layer_norm_params.comp; SHIFTED in common/layer_norm.glsl), 4 copies for
 * masked rows (one per skew), 1 for 16-bit parameters of unmasked rows; 0 where a plan
 * reads them otherwise (float32 unmasked rows, rows of floats, the tile and row forms)
 * or the copies would pass LN_SHIFTED_MAX_BYTES each. */
#define LN_SHIFTED_MAX_BYTES (64ull << 20)
#define LN_PARAMS_WG 256u
static uint32_t shifted_copies(const ln_tune *t, const ln_plan *c, lm_dtype dt) {
    if (!t->shifted_params || c->vec != 4 || c->form == LN_FORM_TILE || c->form == LM_LN_ROW) return 0;
    uint32_t copies = c->masked ? 4 : dt != LM_FLOAT32 ? 1 : 0;
    return (uint64_t)copies * c->n * 16u <= LN_SHIFTED_MAX_BYTES ? copies : 0;
}

/* float16/bfloat16 x: the DT build of a float32 plan's shader (clamped masked builds only:
 * the guarded ones are float32's), by form and reading width. */
static lm_shader_id half_build(lm_shader_id f32, lm_dtype dt) {
    static const lm_shader_id builds[][3] = {
        { LM_SH_LN_SUBGROUP_VEC4, LM_SH_LN_SUBGROUP_F16_VEC4, LM_SH_LN_SUBGROUP_BF16_VEC4 },
        { LM_SH_LN_SUBGROUP_VEC1, LM_SH_LN_SUBGROUP_F16_VEC1, LM_SH_LN_SUBGROUP_BF16_VEC1 },
        { LM_SH_LN_SUBGROUP_CLAMP, LM_SH_LN_SUBGROUP_F16_CLAMP, LM_SH_LN_SUBGROUP_BF16_CLAMP },
        { LM_SH_LN_GROUP_VEC4, LM_SH_LN_GROUP_F16_VEC4, LM_SH_LN_GROUP_BF16_VEC4 },
        { LM_SH_LN_GROUP_VEC1, LM_SH_LN_GROUP_F16_VEC1, LM_SH_LN_GROUP_BF16_VEC1 },
        { LM_SH_LN_GROUP_CLAMP, LM_SH_LN_GROUP_F16_CLAMP, LM_SH_LN_GROUP_BF16_CLAMP },
        { LM_SH_LN_STREAM_VEC4, LM_SH_LN_STREAM_F16_VEC4, LM_SH_LN_STREAM_BF16_VEC4 },
        { LM_SH_LN_STREAM_VEC1, LM_SH_LN_STREAM_F16_VEC1, LM_SH_LN_STREAM_BF16_VEC1 },
        { LM_SH_LN_STREAM_CLAMP, LM_SH_LN_STREAM_F16_CLAMP, LM_SH_LN_STREAM_BF16_CLAMP },
        { LM_SH_LN_SPLIT2_STATS_VEC4, LM_SH_LN_SPLIT2_STATS_F16_VEC4, LM_SH_LN_SPLIT2_STATS_BF16_VEC4 },
        { LM_SH_LN_SPLIT2_STATS_VEC1, LM_SH_LN_SPLIT2_STATS_F16_VEC1, LM_SH_LN_SPLIT2_STATS_BF16_VEC1 },
        { LM_SH_LN_SPLIT2_STATS_CLAMP, LM_SH_LN_SPLIT2_STATS_F16_CLAMP, LM_SH_LN_SPLIT2_STATS_BF16_CLAMP },
        { LM_SH_LN_SPLIT2_APPLY_VEC4, LM_SH_LN_SPLIT2_APPLY_F16_VEC4, LM_SH_LN_SPLIT2_APPLY_BF16_VEC4 },
        { LM_SH_LN_SPLIT2_APPLY_VEC1, LM_SH_LN_SPLIT2_APPLY_F16_VEC1, LM_SH_LN_SPLIT2_APPLY_BF16_VEC1 },
        { LM_SH_LN_SPLIT2_APPLY_CLAMP, LM_SH_LN_SPLIT2_APPLY_F16_CLAMP, LM_SH_LN_SPLIT2_APPLY_BF16_CLAMP },
    };
    int col = dt == LM_FLOAT16 ? 1 : dt == LM_BFLOAT16 ? 2 : 0;
    for (size_t i = 0; col && i < sizeof builds / sizeof builds[0]; i++)
        if (builds[i][0] == f32) return builds[i][col];
    return f32;
}

/* float16/bfloat16 x: the subgroup, group, stream, two-stage split or tile form (the
 * one-dispatch split and row forms have no DT builds), chosen as for float32 among them,
 * but rows past the group form's registers take the two-stage split where float32 takes
 * the one-dispatch split (on an H100 it read 1378 rows of 62748 at 62% of the copy
 * ceiling, the stream form 52%). D % 4 != 0 from 5 on reads masked 4-element vectors
 * (8 bytes, clamped loads); rows of 1-3 an element per lane, which read them at 81-109%
 * of the copy ceiling on the H100. */
static ln_plan plan_half(const lm_context *ctx, const ln_tune *t, int64_t d, uint32_t rows, lm_dtype dt, int in_place) {
    ln_shape m = shape_of(ctx, t, d, rows, 1);
    int automatic = ctx->ln_form == LM_LN_AUTO && !ctx->ln_parts;
    if (t->form == LN_FORM_TILE || (automatic && half_tile_fits(t, &m))) {
        ln_plan c = plan_tile(ctx, &m, dt);
        if (c.rows_per_group > 0) return c;
    }
    ln_shape s = shape_of(ctx, t, d, rows, d > 4);
    s.clamped = s.masked;
    /* Unmasked rows past LN_GROUP_WIDE x 4 vectors: on an H100, float16 rows of 11884 and
     * 16384 ran at 81% and 84% of the copy ceiling on workgroups of 768 and 1024 x 4
     * vectors, 93% and 90% on 384 and 512 x 8 (rows of 2048-8192 on 128-512 x 4 ran 4-10
     * points faster than at 8 vectors; masked rows of 6867 fell from 59% to 28% at 8). */
    s.narrow_width = (!s.masked || d % 4 == 0) && s.vec == 4;   /* masked_aligned keeps the aligned plan */
    /* ... and short ones take 4 vectors per thread as long ones do, not 2: 2 of 8 bytes
     * kept too few loads in flight (H100, session 22, % of copy, float16, 2 -> 4: rows of
     * 768 68.5 -> 70.1 and 93.6 -> 97.3 (8192 and 65536 rows), 872 88.1 -> 93.2, 1024 86.3
     * -> 87.5). Masked rows did not gain (615 57.1 -> 53.3, 805 55.1 -> 56.2). */
    if (s.masked && d % 4 != 0) s.segment_items = LN_SEGMENT_ITEMS_HALF;
    ln_plan c;
    int form = ctx->ln_form;
    if (form == LM_LN_SPLIT || (form == LM_LN_AUTO && ctx->ln_parts)) form = in_place ? LM_LN_STREAM : LN_FORM_SPLIT2;
    if (t->form == LN_FORM_SPLIT2 && !in_place) form = LN_FORM_SPLIT2;
    if (form == LM_LN_AUTO && split2_fits(t, &s, in_place)) form = LN_FORM_SPLIT2;
    if (form == LM_LN_SUBGROUP && !subgroup_fits(ctx, &s)) form = LM_LN_AUTO;
    if (form == LM_LN_AUTO || form == LM_LN_ROW)
        form = subgroup_fits(ctx, &s) ? LM_LN_SUBGROUP : s.n <= s.max_wg * LN_MAX_ITEMS ? LM_LN_GROUP
             : !in_place && !s.cpu && !t->no_split2 ? LN_FORM_SPLIT2 : LM_LN_STREAM;
    switch (form) {
    case LN_FORM_SPLIT2: c = plan_split2(ctx, t, &s); break;
    case LM_LN_SUBGROUP: c = plan_subgroup(ctx, &s); break;
    case LM_LN_GROUP: c = plan_group(ctx, &s); break;
    default: c = plan_stream(ctx, &s); break;
    }
    c.shader = half_build(c.shader, dt);
    return c;
}

/* The plan for `rows` rows of D. `in_place`: y is x. `affine`: the call has weight or
 * bias. */
static ln_plan plan(const lm_context *ctx, const ln_tune *t, int64_t d, uint32_t rows, int in_place, int affine) {
    ln_shape s = shape_of(ctx, t, d, rows, 1);
    ln_shape row_shape = shape_of(ctx, t, d, rows, 0);
    if (t->form == LN_FORM_TILE || (ctx->ln_form == LM_LN_AUTO && !ctx->ln_parts && tile_fits(t, &s))) {
        ln_plan c = plan_tile(ctx, &s, LM_FLOAT32);
        if (c.rows_per_group > 0) return c;
    }
    if (!in_place && (t->form == LN_FORM_SPLIT2 || (ctx->ln_form == LM_LN_AUTO && !ctx->ln_parts && split2_fits(t, &s, in_place)))) {
        if (t->form != LN_FORM_SPLIT2) {
            ln_plan one = plan_split(ctx, &s, affine);
            if (one.form == LM_LN_SPLIT && one.parts <= LN_SPLIT_FEW_PARTS &&
                (uint64_t)rows * (uint64_t)d * 4u < LN_SPLIT2_MIN_BYTES) return one;
        }
        return plan_split2(ctx, t, &s);
    }
    switch (choose_form(ctx, t, &s, &row_shape, in_place)) {
    case LM_LN_ROW: return plan_row(ctx, &row_shape);
    case LM_LN_SUBGROUP: return plan_subgroup(ctx, &s);
    case LM_LN_GROUP: return plan_group(ctx, &s);
    case LM_LN_SPLIT: {
        ln_plan c = plan_split(ctx, &s, affine);
        uint32_t most = ctx->int64_atomics && !t->split2_dispatches ? LN_SPLIT_MAX_PIPE_PARTS : LN_SPLIT_MAX_AUTO_PARTS;
        if (c.form == LM_LN_SPLIT && c.parts > most && ctx->ln_form == LM_LN_AUTO && !ctx->ln_parts &&
            !t->no_split2 && !s.cpu)
            return plan_split2(ctx, t, &s);
        return c;
    }
    default: return plan_stream(ctx, &s);
    }
}

static lm_tensor *check_param(lua_State *L, int idx, const char *name, int64_t d) {
    lm_tensor *t = lm_opt_tensor(L, idx);
    if (t && !(t->ndim == 1 && t->shape[0] == d)) {
        char got[256];
        lm_shape_string(t->shape, t->ndim, got, sizeof got);
        lm_argerror(L, idx, "%s must have shape [%I] (the last dimension of x), got %s", name, (LUAI_UACINT)d, got);
    }
    return t;
}

/* eps: nil (1e-5) or a number that float32 holds: finite, >= 0 and at most FLT_MAX
 * (a larger one would become inf and every output NaN); a positive eps that float32
 * rounds to 0 is refused too, as it would no longer guard the division. */
static float check_eps(lua_State *L, int idx) {
    if (lua_isnoneornil(L, idx)) return 1e-5f;
    if (lua_type(L, idx) != LUA_TNUMBER) lm_argerror(L, idx, "eps must be a number, got %s", luaL_typename(L, idx));
    lua_Number e = lua_tonumber(L, idx);
    if (isnan(e) || e < 0 || e > FLT_MAX)
        lm_argerror(L, idx, "eps must be a finite number >= 0 that float32 holds (at most %f), got %f",
                    (lua_Number)FLT_MAX, e);
    if (e > 0 && (float)e == 0.0f) lm_argerror(L, idx, "eps is too small to be represented as float32 (rounds to 0), got %f", e);
    return (float)e;
}

/* Raises when a and b share bytes (exact aliasing is allowed when `same_ok`). */
static void no_overlap(lua_State *L, int argn, const lm_tensor *a, const char *an,
                       const lm_tensor *b, const char *bn, int same_ok) {
    if (!a || !b || !lm_tensors_overlap(a, b)) return;
    if (same_ok && lm_tensors_same_memory(a, b)) return;
    lm_argerror(L, argn, "%s overlaps %s (they alias the same device memory)", an, bn);
}

/* Pushes a fresh split scratch for `groups` workgroups: a ticket counter and a fallback
 * count, then one 64-byte record per workgroup, all zero (a fill is recorded here,
 * before the kernel). Only for the tuning hook's return_scratch, which hands the
 * caller this call's counts; other calls use the context's scratch (split_scratch.c).
 * A tensor on the Lua stack, so an error before the dispatch leaves it to the
 * collector rather than leaking it. */
static lm_tensor *split_scratch(lua_State *L, lm_context *ctx, uint64_t groups) {
    int64_t words = (int64_t)(16u * (groups + 1u));
    lm_tensor *t = lm_push_tensor(L, ctx, 1, &words);
    lm_record_fill(L, t, 0.0f);
    return t;
}

/* shifted_params: weight's and bias's float32 copies for this call, `copies` arrays of
 * 4n floats each (see shifted_copies), pushed on the stack and recorded before the
 * kernel, which reads them at *weight and *bias. NULL (nothing pushed) without weight and
 * bias. The allocation may run finalizers: the caller checks its tensors again. */
static lm_tensor *param_copies(lua_State *L, lm_context *ctx, uint32_t copies, uint32_t n, uint32_t d, lm_dtype dt,
                               uint64_t *weight, uint64_t *bias) {
    int64_t floats = (int64_t)copies * 4 * n;
    int64_t words = ((lm_opt_tensor(L, 2) ? 1 : 0) + (lm_opt_tensor(L, 3) ? 1 : 0)) * floats;
    if (!words) return NULL;
    lm_tensor *t = lm_push_tensor(L, ctx, 1, &words);
    lm_tensor *w = lm_opt_tensor(L, 2), *b = lm_opt_tensor(L, 3);
    struct {
        uint64_t weight, bias, weight_out, bias_out;
        uint32_t d, n, copies, groups_x;
    } pp = {
        .weight = w ? lm_tensor_address(w) : 0, .bias = b ? lm_tensor_address(b) : 0,
        .weight_out = w ? lm_tensor_address(t) : 0,
        .bias_out = b ? lm_tensor_address(t) + (w ? 4u * (uint64_t)floats : 0) : 0,
        .d = d, .n = n, .copies = copies,
    };
    uint32_t gy;
    pp.groups_x = lm_grid(L, ctx, ((uint64_t)floats + LN_PARAMS_WG - 1) / LN_PARAMS_WG, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "layer_norm_forward",
        .shader = dt == LM_FLOAT16 ? LM_SH_LN_PARAMS_F16 : dt == LM_BFLOAT16 ? LM_SH_LN_PARAMS_BF16 : LM_SH_LN_PARAMS,
        .spec = { LN_PARAMS_WG }, .any_dtype = dt != LM_FLOAT32,
        .push = &pp, .push_bytes = sizeof pp, .groups_x = pp.groups_x, .groups_y = gy,
        .reads = { w, b }, .writes = { t },
    });
    *weight = pp.weight_out;
    *bias = pp.bias_out;
    return t;
}

/* The copies' slot 9 given back once the recorded work is done (a deferred free), so
 * the results are the stack's top again. */
static void drop_param_copies(lua_State *L, lm_tensor *copies) {
    if (!copies) return;
    lm_tensor_release(copies);
    lua_remove(L, 9);
}

/* layer_norm_forward's tensors again from their stack slots (x 1, weight 2, bias 3, out
 * 6, mean 7, invstd 8) after an allocation, which may have run finalizers that freed
 * any of them (see ops.h). */
static void recheck(lua_State *L, lm_tensor **x, lm_tensor **w, lm_tensor **b, lm_tensor **y, lm_tensor **mean,
                    lm_tensor **invstd, int stat_ndim, const int64_t *stat_shape) {
    *x = lm_check_tensor(L, 1);
    *w = lm_opt_tensor(L, 2);
    *b = lm_opt_tensor(L, 3);
    *y = lm_check_out(L, 6, 5, "out", (*x)->ndim, (*x)->shape);
    *mean = lm_check_out(L, 7, 5, "mean", stat_ndim, stat_shape);
    *invstd = lm_check_out(L, 8, 5, "invstd", stat_ndim, stat_shape);
}

int lm_op_layer_norm_forward(lua_State *L) {
    lm_contiguous_inputs(L, 1, 3);
    lm_tensor *x = lm_check_tensor(L, 1);
    int64_t d = x->shape[x->ndim - 1];
    int64_t rows = x->numel / d;
    if (d > 0x7fffffff) lm_argerror(L, 1, "last dimension too large (at most 2^31-1)");
    if (rows > 0xffffffffLL) lm_argerror(L, 1, "too many rows (at most 2^32-1)");
    lm_tensor *w = check_param(L, 2, "weight", d);
    lm_tensor *b = check_param(L, 3, "bias", d);
    /* float16/bfloat16 x: weight, bias and out of its dtype, mean and invstd float32. */
    lm_dtype dt = x->dtype;
    int half = dt == LM_FLOAT16 || dt == LM_BFLOAT16;
    if (half) {
        if (w && w->dtype != dt) lm_argerror(L, 2, "weight must be %s (x's dtype), got %s", lm_dtype_name(dt), lm_dtype_name(w->dtype));
        if (b && b->dtype != dt) lm_argerror(L, 3, "bias must be %s (x's dtype), got %s", lm_dtype_name(dt), lm_dtype_name(b->dtype));
    }
    float eps = check_eps(L, 4);
    int64_t stat_shape[LM_MAX_DIMS];
    int stat_ndim = x->ndim > 1 ? x->ndim - 1 : 1;
    if (x->ndim > 1) memcpy(stat_shape, x->shape, sizeof(int64_t) * (size_t)stat_ndim);
    else stat_shape[0] = 1;

    static const char *const known[] = { "out", "mean", "invstd", NULL };
    int has_opts = lm_check_options(L, 5, known);
    lua_settop(L, 5);
    /* Results y, mean, invstd at stack slots 6, 7, 8: the opts tensors or fresh ones. */
    for (int i = 0; i < 3; i++) lm_push_option(L, 5, known[i]);
    lm_tensor *y = lm_check_out(L, 6, 5, "out", x->ndim, x->shape);
    lm_tensor *mean = lm_check_out(L, 7, 5, "mean", stat_ndim, stat_shape);
    lm_tensor *invstd = lm_check_out(L, 8, 5, "invstd", stat_ndim, stat_shape);
    if (half) {
        if (y && y->dtype != dt) lm_argerror(L, 5, "out must be %s (x's dtype), got %s", lm_dtype_name(dt), lm_dtype_name(y->dtype));
        if (mean && mean->dtype != LM_FLOAT32) lm_argerror(L, 5, "mean must be float32, got %s", lm_dtype_name(mean->dtype));
        if (invstd && invstd->dtype != LM_FLOAT32) lm_argerror(L, 5, "invstd must be float32, got %s", lm_dtype_name(invstd->dtype));
    }
    if (has_opts) {
        no_overlap(L, 5, y, "out", x, "x", 1);
        no_overlap(L, 5, y, "out", w, "weight", 0);
        no_overlap(L, 5, y, "out", b, "bias", 0);
        const lm_tensor *others[] = { x, w, b, y };
        const char *names[] = { "x", "weight", "bias", "out" };
        for (int i = 0; i < 4; i++) {
            no_overlap(L, 5, mean, "mean", others[i], names[i], 0);
            no_overlap(L, 5, invstd, "invstd", others[i], names[i], 0);
        }
        no_overlap(L, 5, mean, "mean", invstd, "invstd", 0);
    }
    lm_context *ctx = lm_context_get(L);
    if (half) lm_require_narrow_storage(L, ctx, "layer_norm_forward", dt);
    if (!y) { lm_push_tensor_dtype(L, ctx, half ? dt : LM_FLOAT32, x->ndim, x->shape); lua_replace(L, 6); }
    if (!mean) { lm_push_tensor(L, ctx, stat_ndim, stat_shape); lua_replace(L, 7); }
    if (!invstd) { lm_push_tensor(L, ctx, stat_ndim, stat_shape); lua_replace(L, 8); }
    /* The allocations may have run finalizers that freed any of them (see ops.h). */
    recheck(L, &x, &w, &b, &y, &mean, &invstd, stat_ndim, stat_shape);
    if ((w && w->storage->ctx != ctx) || (b && b->storage->ctx != ctx) || x->storage->ctx != ctx)
        luaL_error(L, "layer_norm_forward: tensors belong to different devices");

    int in_place = lm_tensors_overlap(x, y);
    ln_tune tune = get_tune(L);
    ln_plan c = half ? plan_half(ctx, &tune, d, (uint32_t)rows, dt, in_place) : plan(ctx, &tune, d, (uint32_t)rows, in_place, w || b);
    struct {
        uint64_t x, y, weight, bias, mean, invstd;
        uint32_t rows, n, d;
        float eps;
        uint32_t groups_x, pad;
        uint64_t scratch;
        uint32_t chunk, spin_limit, tickets, epoch, ticket_base, classes, class_jobs, launched, lag;
    } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y),
        .weight = w ? lm_tensor_address(w) : 0, .bias = b ? lm_tensor_address(b) : 0,
        .mean = lm_tensor_address(mean), .invstd = lm_tensor_address(invstd),
        .rows = (uint32_t)rows, .n = c.n, .d = (uint32_t)d, .eps = eps,
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "layer_norm's push constants outgrew the layout");
    if (c.form == LN_FORM_SPLIT2 && (uint64_t)rows * c.parts > 0xffffffffu)
        c = half ? plan_half(ctx, &tune, d, (uint32_t)rows, dt, 1)   /* jobs are counted in 32 bits */
                 : plan(ctx, &tune, d, (uint32_t)rows, 1, w || b);
    /* The two-stage split in one dispatch takes the split form's scratch and tickets. */
    uint32_t lag = c.form == LN_FORM_SPLIT2 ? split2_lag(ctx, &tune, &c, (uint64_t)rows, lm_dtype_size(dt)) : 0;
    uint32_t copies = shifted_copies(&tune, &c, dt);
    if (c.form == LN_FORM_SPLIT2 && !lag) {
        lm_tensor *params = copies ? param_copies(L, ctx, copies, c.n, (uint32_t)d, dt, &pc.weight, &pc.bias) : NULL;
        /* Stage 1's records (4 floats per slice) in a scratch of this call (slot 9, or 10
         * after the parameters' copies). */
        int64_t words = (int64_t)(4u * (uint64_t)rows * c.parts);
        lm_tensor *records = lm_push_tensor(L, ctx, 1, &words);
        /* The allocation may have run finalizers that freed any of them (see ops.h). */
        recheck(L, &x, &w, &b, &y, &mean, &invstd, stat_ndim, stat_shape);
        pc.scratch = lm_tensor_address(records);
        pc.chunk = (pc.n + c.parts - 1) / c.parts;
        uint32_t gy;
        pc.groups_x = lm_grid(L, ctx, (uint64_t)rows * c.parts, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_forward", .shader = c.shader, .spec = { c.wg, c.items, c.parts, 0, lean_spec(&tune, &c, dt) },
            .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { x }, .writes = { records }, .any_dtype = half,
        });
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "layer_norm_forward", .shader = split2_build(c.shader, SPLIT2_APPLY),
            .spec = { c.wg, c.items, c.parts, 0, lean_spec(&tune, &c, dt), 0, params != NULL },
            .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
            .reads = { x, w, b, records, params }, .writes = { y, mean, invstd }, .any_dtype = half,
        });
        /* The records and copies go back once the recorded work is done (a deferred free). */
        lm_tensor_release(records);
        if (params) lm_tensor_release(params);
        lua_settop(L, 8);
        return 3;
    }
    int split = c.form == LM_LN_SPLIT || lag;
    if (lag) c.shader = split2_build(c.shader, SPLIT2_PIPELINED);
    uint64_t groups = split ? (uint64_t)rows * c.parts + lag
                            : ((uint64_t)rows + c.rows_per_group - 1) / c.rows_per_group;
    /* The split form's jobs are counted in 32 bits: more rows take another form. */
    if (split && groups > 0xffffffffu) {
        split = 0;
        c = plan(ctx, &tune, d, (uint32_t)rows, 1, w || b);
        groups = ((uint64_t)rows + c.rows_per_group - 1) / c.rows_per_group;
        copies = shifted_copies(&tune, &c, dt);
    }
    lm_tensor *params = NULL;
    if (copies) {
        params = param_copies(L, ctx, copies, c.n, (uint32_t)d, dt, &pc.weight, &pc.bias);
        /* The allocation may have run finalizers that freed any of them (see ops.h). */
        recheck(L, &x, &w, &b, &y, &mean, &invstd, stat_ndim, stat_shape);
    }
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    uint64_t launched = (uint64_t)pc.groups_x * gy;
    lm_tensor *scratch = NULL;   /* the tuning hook's own scratch, else the context's view */
    lm_tensor *fresh = NULL;
    lm_split_call call;
    if (split) {
        if (ctx->ln_return_scratch) {
            scratch = fresh = split_scratch(L, ctx, groups - lag);   /* stack slot 9 */
            pc.epoch = 1;
        } else {
            lm_split_scratch_begin(L, ctx, groups - lag, &call);   /* a record per slice */
            scratch = &call.view;
            pc.epoch = call.epoch;
            pc.ticket_base = call.ticket_base;
        }
        pc.scratch = lm_tensor_address(scratch);
        pc.chunk = (pc.n + c.parts - 1) / c.parts;
        pc.spin_limit = ctx->ln_spin_limit ? ctx->ln_spin_limit - 1 : LN_SPIN_LIMIT;
        /* On a CPU device the polls share LN_CPU_LOOP_BUDGET with the invocation's other
         * loops, and a thread of the pipelined split polls for ceil(parts / wg) records one
         * after another (past the budget llvmpipe ended the loop over them unfinished, so
         * the rest of the row's records were never read). */
        uint32_t waits = lag ? ceil_div(c.parts, c.wg) : 1;
        if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && pc.spin_limit > LN_CPU_LOOP_BUDGET / 2 / waits)
            pc.spin_limit = LN_CPU_LOOP_BUDGET / 2 / waits;
        pc.tickets = !ctx->ln_no_tickets || lag;   /* the pipelined split always takes tickets */
        pc.launched = (uint32_t)launched;
        pc.lag = lag;
        if (c.classes > 1 && launched <= 0xffffffffu) {   /* the shader counts them in 32 bits */
            pc.classes = c.classes;
            pc.class_jobs = (uint32_t)(groups / c.classes);
            pc.tickets = 0;
        }
    }
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "layer_norm_forward", .shader = c.shader,
        .spec = { c.wg, c.items, split ? c.parts : c.rows_per_group, c.seg, lean_spec(&tune, &c, dt),
                  c.form == LM_LN_SUBGROUP && !tune.segment_partials, params != NULL },
        .full_subgroups = c.full_subgroups, .any_dtype = half,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x, w, b, params }, .writes = { y, mean, invstd, scratch },
    });
    drop_param_copies(L, params);
    if (!split) return 3;
    /* The tuning hook asked for the scratch (its word 1 counts fallbacks). */
    if (fresh) return 4;
    lm_split_scratch_end(ctx, launched, (int)pc.tickets);
    return 3;
}

/* tune.layer_norm(D [, tune [, rows [, dtype]]]) -> the plan for `rows` rows of D of
 * dtype (default: many, float32; for a call with weight or bias, not in place):
 * {variant, workgroup, items, vec, masked, vectors, epoch} and rows_per_group (the subgroup
 * form also segment_shuffles), or for the split form parts, records and classes.
 * `tune` ({items_target=, wg=, scalar=, ...}) changes the plan of later calls (for
 * bench/ sweeps and specs); the planners keep whatever it forces valid (a whole number
 * of subgroups per workgroup, no empty part). */
int lm_op_layer_norm_config(lua_State *L) {
    static const char *const known[] = { "form", "stream", "wg", "items_target", "subgroup_items", "parts",
                                         "classes", "spin_limit", "tickets", "records", "epoch",
                                         "return_scratch", "scalar", "masked_loads", "tile", "split2", "long_split", "lean_masks", "segment_shuffles",
                                         "pipelined", "lag", "shifted_params", "split2_items", "masked_aligned", NULL };
    lua_Integer d = lm_check_integer(L, 1);
    if (d < 1 || d > 0x7fffffff) lm_argerror(L, 1, "D must be in 1..2^31-1, got %I", (LUAI_UACINT)d);
    lua_Integer rows = luaL_opt(L, lm_check_integer, 3, 0xffffffffLL);
    if (rows < 1 || rows > 0xffffffffLL) lm_argerror(L, 3, "rows must be in 1..2^32-1, got %I", (LUAI_UACINT)rows);
    lm_dtype dt = lua_isnoneornil(L, 4) ? LM_FLOAT32 : lm_check_dtype(L, 4);
    if (dt != LM_FLOAT32 && dt != LM_FLOAT16 && dt != LM_BFLOAT16)
        lm_argerror(L, 4, "dtype must be float32, float16 or bfloat16, got %s", lm_dtype_name(dt));
    lm_context *ctx = lm_context_get(L);
    ln_tune tune = get_tune(L);
    if (lm_check_options(L, 2, known)) {
        /* Checked before any is set; items are bounded because each becomes a register
         * array in a specialized shader (a huge one would take the compiler forever). */
        lua_Integer items = lm_option_integer(L, 2, "items_target", 0);
        if (items < 0 || items > 64) lm_argerror(L, 2, "items_target must be in 0..64 (0: default), got %I", (LUAI_UACINT)items);
        lua_Integer wg = lm_option_integer(L, 2, "wg", 0);
        if (wg != 0 && !(wg >= 1 && wg <= 1024 && (wg & (wg - 1)) == 0))
            lm_argerror(L, 2, "wg must be a power of two up to 1024 (0: default), got %I", (LUAI_UACINT)wg);
        static const char *const forms[] = { "auto", "group", "subgroup", "stream", "split", "row", "tile", "split2", NULL };
        int form = lm_option_choice(L, 2, "form", forms, LM_LN_AUTO);
        int own_form = form > LM_LN_ROW ? form : 0;   /* a form of this file, not lm_context's */
        if (own_form) form = LM_LN_AUTO;
        if (lm_option_boolean(L, 2, "stream", 0)) form = LM_LN_STREAM;
        lua_Integer sub = lm_option_integer(L, 2, "subgroup_items", 0);
        if (sub < 0 || sub > 64) lm_argerror(L, 2, "subgroup_items must be in 0..64 (0: default), got %I", (LUAI_UACINT)sub);
        lua_Integer parts = lm_option_integer(L, 2, "parts", 0);
        if (parts < 0 || parts > LN_MAX_FORCED_PARTS)
            lm_argerror(L, 2, "parts must be in 0..%d (0: automatic), got %I", LN_MAX_FORCED_PARTS, (LUAI_UACINT)parts);
        lua_Integer classes = lm_option_integer(L, 2, "classes", 0);
        if (classes < 0 || classes > LN_MAX_CLASSES)
            lm_argerror(L, 2, "classes must be in 0..%d (0: automatic, 1: off), got %I", LN_MAX_CLASSES, (LUAI_UACINT)classes);
        lua_Integer spin = lm_option_integer(L, 2, "spin_limit", -1);
        if (spin < -1 || spin > LN_SPIN_MAX)
            lm_argerror(L, 2, "spin_limit must be in 0..%d, got %I", (int)LN_SPIN_MAX, (LUAI_UACINT)spin);
        int no_tickets = !lm_option_boolean(L, 2, "tickets", 1);
        int return_scratch = lm_option_boolean(L, 2, "return_scratch", 0);
        int scalar = lm_option_boolean(L, 2, "scalar", -1);
        static const char *const records[] = { "tagged", "fenced", NULL };
        int fenced = lm_option_choice(L, 2, "records", records, 0) == 1;
        static const char *const loads[] = { "clamped", "guarded", NULL };
        int masked_loads = lm_option_choice(L, 2, "masked_loads", loads, LN_LOADS_CLAMPED);
        int tile_ok = lm_option_boolean(L, 2, "tile", 1);
        int split2_ok = lm_option_boolean(L, 2, "split2", 1);
        int long_split_ok = lm_option_boolean(L, 2, "long_split", 1);
        int lean_masks = lm_option_boolean(L, 2, "lean_masks", -1);
        int segment_shuffles = lm_option_boolean(L, 2, "segment_shuffles", 1);
        int pipelined = lm_option_boolean(L, 2, "pipelined", 1);
        int shifted_params = lm_option_boolean(L, 2, "shifted_params", 0);
        int masked_aligned = lm_option_boolean(L, 2, "masked_aligned", 0);
        lua_Integer split2_items = lm_option_integer(L, 2, "split2_items", 0);
        if (split2_items < 0 || split2_items > LN_SPLIT2_MAX_ITEMS)
            lm_argerror(L, 2, "split2_items must be in 0..%d (0: default), got %I", (int)LN_SPLIT2_MAX_ITEMS, (LUAI_UACINT)split2_items);
        lua_Integer lag = lm_option_integer(L, 2, "lag", 0);
        if (lag < 0 || lag > LN_MAX_LAG) lm_argerror(L, 2, "lag must be in 0..%d (0: automatic), got %I", (int)LN_MAX_LAG, (LUAI_UACINT)lag);
        /* The split scratch's epoch may only move forward: a tag from the past could
         * match a record an earlier call left. (Specs move it to the wrap.) */
        lua_Integer epoch = lm_option_integer(L, 2, "epoch", (lua_Integer)ctx->ln_epoch);
        if (epoch < (lua_Integer)ctx->ln_epoch || epoch > 0xffffffffLL)
            lm_argerror(L, 2, "epoch must be in %I..2^32-1 (the current epoch onwards), got %I",
                        (LUAI_UACINT)ctx->ln_epoch, (LUAI_UACINT)epoch);
        ctx->ln_items_target = (uint32_t)items;
        ctx->ln_wg_override = (uint32_t)wg;
        ctx->ln_form = form;
        ctx->ln_subgroup_items = (uint32_t)sub;
        ctx->ln_parts = (uint32_t)parts;
        ctx->ln_spin_limit = (uint32_t)(spin + 1);
        ctx->ln_no_tickets = no_tickets;
        ctx->ln_return_scratch = return_scratch;
        ctx->ln_scalar = scalar < 0 ? LN_SCALAR_AUTO : scalar ? LN_SCALAR_FLOATS : LN_SCALAR_MASKED;
        ctx->ln_fenced_records = fenced;
        ctx->ln_classes = (uint32_t)classes;
        ctx->ln_epoch = (uint32_t)epoch;
        tune.loads = masked_loads;
        tune.form = own_form;
        tune.no_tile = !tile_ok;
        tune.no_split2 = !split2_ok;
        tune.no_long_split = !long_split_ok;
        tune.lean_masks = lean_masks < 0 ? LN_LEAN_AUTO : lean_masks ? LN_LEAN_ON : LN_LEAN_OFF;
        tune.segment_partials = !segment_shuffles;
        tune.split2_dispatches = !pipelined;
        tune.lag = (uint32_t)lag;
        tune.shifted_params = shifted_params;
        tune.split2_items = (uint32_t)split2_items;
        tune.masked_aligned = masked_aligned;
        set_tune(L, &tune);
    }
    ln_plan c = dt == LM_FLOAT32 ? plan(ctx, &tune, d, (uint32_t)rows, 0, 1)   /* as for a call with weight or bias */
                                 : plan_half(ctx, &tune, d, (uint32_t)rows, dt, 0);
    lua_createtable(L, 0, 5);
    lua_pushstring(L, c.variant); lua_setfield(L, -2, "variant");
    lua_pushinteger(L, c.wg); lua_setfield(L, -2, "workgroup");
    lua_pushinteger(L, c.items); lua_setfield(L, -2, "items");
    lua_pushinteger(L, c.vec); lua_setfield(L, -2, "vec");
    lua_pushboolean(L, c.masked); lua_setfield(L, -2, "masked");
    if (c.masked) { lua_pushstring(L, c.clamped ? "clamped" : "guarded"); lua_setfield(L, -2, "loads"); }
    if (c.masked && c.clamped) { lua_pushboolean(L, lean_spec(&tune, &c, dt)); lua_setfield(L, -2, "lean_masks"); }
    lua_pushinteger(L, c.n); lua_setfield(L, -2, "vectors");
    lua_pushinteger(L, shifted_copies(&tune, &c, dt)); lua_setfield(L, -2, "param_copies");
    if (c.form == LN_FORM_SPLIT2) {
        lua_pushinteger(L, c.parts); lua_setfield(L, -2, "parts");
        lua_pushinteger(L, split2_lag(ctx, &tune, &c, (uint64_t)rows, lm_dtype_size(dt)));
        lua_setfield(L, -2, "lag");
    } else if (c.form == LM_LN_SPLIT) {
        lua_pushinteger(L, c.parts); lua_setfield(L, -2, "parts");
        lua_pushstring(L, c.tagged_records ? "tagged" : "fenced");
        lua_setfield(L, -2, "records");
        lua_pushinteger(L, c.classes); lua_setfield(L, -2, "classes");
    } else {
        lua_pushinteger(L, c.rows_per_group); lua_setfield(L, -2, "rows_per_group");
    }
    if (c.form == LM_LN_SUBGROUP) { lua_pushboolean(L, !tune.segment_partials); lua_setfield(L, -2, "segment_shuffles"); }
    if (c.form == LN_FORM_TILE) { lua_pushinteger(L, c.seg); lua_setfield(L, -2, "segment"); }
    lua_pushinteger(L, (lua_Integer)ctx->ln_epoch); lua_setfield(L, -2, "epoch");
    return 1;
}
