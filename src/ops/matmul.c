/* matmul: shape checks, batch broadcasting, layouts read in place (transposed operands,
 * row strides, stride-0 batches), tile choice and dispatch of shaders/matmul.comp (also
 * used by linear.c). The kernel's tiling is described in the shader. */
#define _POSIX_C_SOURCE 200809L   /* sysconf */
#include "ops.h"
#include "kept_scratch.h"
#include "../storage.h"
#include <lauxlib.h>
#include <string.h>
#include <unistd.h>

/* Tile shapes, largest first. Each thread computes tm x tn outputs; a workgroup
 * (bm/tm) * (bn/tn) threads. LARGE keeps 64 accumulators per thread and reads 4 vec4s of
 * shared memory per 64 FMAs; the smaller tiles are for products with too few 128x128
 * blocks to keep every core of the device busy. */
typedef struct mm_tile { uint32_t bm, bn, bk, tm, tn; } mm_tile;

static const mm_tile TILES[] = {
    { 128, 128, 8, 8, 8 },   /* 256 threads */
    { 128, 64, 8, 8, 8 },    /* 128 threads */
    { 64, 64, 8, 8, 8 },     /* 64 threads */
    { 32, 32, 8, 4, 4 },     /* 64 threads; fits every Vulkan device (4.6 KB shared) */
};
#define MM_NTILES 4
/* Relative cost per output element of each tile when the device is full (LARGE = 1).
 * CPU: lavapipe at 512^3 ran 12.5, (128x64: see below) 8.8 and 3.7 GFLOP/s.
 * GPU: the H200 sweep (bench/matmul.lua) ran 128x64 at 104% (4096^3) and 105% (8192 x
 * 768 x 3072) of 128x128's rate, and linear at 106% and 111%, so it is the cheaper tile
 * once the device is full; the smaller ones are estimates (fewer FMAs per shared read,
 * fewer threads to hide latency). */
static const double TILE_COST_GPU[MM_NTILES] = { 1.0, 0.95, 1.1, 1.5 };
static const double TILE_COST_CPU[MM_NTILES] = { 1.0, 1.2, 1.4, 3.0 };
/* Cores a GPU runs workgroups on, for the choice below (an H200 has 132 SMs; Vulkan does
 * not say, so a round number of that order). */
#define MM_GPU_CORES 128
#define MM_GROUP_M 8   /* tile rows per band of the launch order (L2 reuse) */
static uint32_t tile_threads(const mm_tile *t) { return (t->bm / t->tm) * (t->bn / t->tn); }

static uint32_t tile_shared_bytes(const mm_tile *t) {
    return 2u * t->bk * ((t->bm / 4 + 1) + (t->bn / 4 + 1)) * 16u;
}

/* NULL when the tile is usable on this device, else why not. */
static const char *tile_problem(const lm_context *ctx, const mm_tile *t) {
    const VkPhysicalDeviceLimits *lim = &ctx->props.limits;
    if (t->tm == 0 || t->tn == 0 || t->tm % 4 || t->tn % 4 || t->tm > 16 || t->tn > 16)
        return "tm and tn must be 4, 8, 12 or 16";
    if (t->bk == 0 || t->bk % 4 || t->bk > 64) return "bk must be a multiple of 4 up to 64";
    if (t->bm == 0 || t->bn == 0 || t->bm % t->tm || t->bn % t->tn || t->bm > 512 || t->bn > 512)
        return "bm and bn must be multiples of tm and tn, at most 512";
    uint32_t wg = tile_threads(t);
    if (wg > lim->maxComputeWorkGroupInvocations || wg > lim->maxComputeWorkGroupSize[0])
        return "too many threads per workgroup for this device";
    if ((t->bm * t->bk / 4) % wg || (t->bn * t->bk / 4) % wg)
        return "each thread must load whole vec4s of both tiles ((bm*bk/4) and (bn*bk/4) multiples of the thread count)";
    if (tile_shared_bytes(t) > lim->maxComputeSharedMemorySize)
        return "tiles exceed the device's shared memory";
    return NULL;
}

static uint32_t device_cores(const lm_context *ctx) {
    if (ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) return MM_GPU_CORES;
    /* lavapipe runs one thread per core. Asked once: sysconf reads a file each call. */
    static _Atomic long cores;
    long n = cores;
    if (n == 0) cores = n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 && n <= 4096 ? (uint32_t)n : 1;
}

/* The tile that finishes soonest by a simple model: workgroups spread over the device's
 * cores in rounds, each costing its tile's area (padding included) times the tile's
 * relative cost. Small products thus get small tiles (more cores busy, less padding);
 * large ones the 128x128 tile (ties go to the larger tile). */
static mm_tile choose_tile(const lm_context *ctx, uint64_t m, uint64_t n, uint64_t batch) {
    if (ctx->mm_tile[0]) {
        mm_tile t = { ctx->mm_tile[0], ctx->mm_tile[1], ctx->mm_tile[2], ctx->mm_tile[3], ctx->mm_tile[4] };
        return t;   /* checked when set */
    }
    const double *cost = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? TILE_COST_CPU : TILE_COST_GPU;
    uint64_t cores = device_cores(ctx);
    int best = MM_NTILES - 1;
    double best_cost = 0;
    for (int i = MM_NTILES - 1; i >= 0; i--) {
        const mm_tile *t = &TILES[i];
        if (tile_problem(ctx, t)) continue;
        uint64_t groups = ((m + t->bm - 1) / t->bm) * ((n + t->bn - 1) / t->bn) * batch;
        double c = (double)((groups + cores - 1) / cores) * t->bm * t->bn * cost[i];
        if (i == MM_NTILES - 1 || c <= best_cost) { best = i; best_cost = c; }
    }
    return TILES[best];
}

/* float32 tiles compiled into their own shader variants (shaders/variants.def,
 * MATMUL_T*): the sizes are constants before the driver specializes anything. Used
 * wherever the chosen tile is one of them, unless tune.matmul{builtin = false}. */
static const struct { mm_tile t; lm_shader_id shader; } BUILTIN_TILES[] = {
    { { 128, 128, 8, 8, 8 }, LM_SH_MATMUL_T128X128X8 },
    { { 128, 64, 8, 8, 8 }, LM_SH_MATMUL_T128X64X8 },
    { { 64, 64, 8, 8, 8 }, LM_SH_MATMUL_T64X64X8 },
    /* K steps of 16 (half the barriers per K): forced only, for tile sweeps */
    { { 128, 64, 16, 8, 8 }, LM_SH_MATMUL_T128X64X16 },
    { { 64, 64, 16, 8, 8 }, LM_SH_MATMUL_T64X64X16 },
};

static lm_shader_id tiled_shader(const lm_context *ctx, lm_dtype dt, const mm_tile *t) {
    if (dt == LM_FLOAT16) return LM_SH_MATMUL_F16;
    if (dt == LM_BFLOAT16) return LM_SH_MATMUL_BF16;
    if (ctx->mm_builtin != 2)
        for (size_t i = 0; i < sizeof BUILTIN_TILES / sizeof BUILTIN_TILES[0]; i++)
            if (memcmp(&BUILTIN_TILES[i].t, t, sizeof *t) == 0) return BUILTIN_TILES[i].shader;
    return LM_SH_MATMUL;
}

/* The shader's thread order (bit 2 of its TRANS constant): 4 x 8 patches of thread
 * positions per 32 threads where the tile's thread grid allows it (see the shader), unless
 * tune.matmul{order = "row"}. */
static int tiled_order(const lm_context *ctx, const mm_tile *t) {
    int fits = (t->bn / t->tn) % 8 == 0 && (t->bm / t->tm) % 4 == 0;
    return fits && ctx->mm_order != 1;
}

/* Aligned to 4 elements of `bytes` each (or absent). */
static int aligned4(const lm_tensor *t, uint32_t bytes) { return t == NULL || lm_tensor_address(t) % (4u * bytes) == 0; }

/* Which kernel a product runs (ctx->mm_path forces one where it applies). */
enum { MM_PATH_AUTO, MM_PATH_GEMV, MM_PATH_TILED, MM_PATH_COOP };

/* Whether the small-M path should take a product it can run: always up to
 * LM_GEMV_MAX_M rows; up to LM_GEMV_MAX_ROWS when the tiled kernel would run fewer than
 * two tiles per core (a frame's 64 x 256 x 256: a few tiles, each a long chain of
 * barriers; 64 x 768 x 3072 ran at 0.4x PyTorch on 192 small tiles). Forcing a
 * tile (tune.matmul) means the tiled kernel unless the path is forced too. */
static int gemv_wanted(const lm_context *ctx, const lm_matmul_args *g) {
    if (ctx->mm_path == MM_PATH_GEMV) return 1;
    if (ctx->mm_path != MM_PATH_AUTO || ctx->mm_tile[0]) return 0;
    if (g->m <= LM_GEMV_MAX_M) return 1;
    mm_tile t = choose_tile(ctx, g->m, g->n, g->batch);
    uint64_t groups = (uint64_t)((g->m + t.bm - 1) / t.bm) * ((g->n + t.bn - 1) / t.bn) * g->batch;
    return groups < 2 * (uint64_t)device_cores(ctx);
}

/* The tensor-core kernel's block forms (shaders/matmul_coop.comp, shaders/variants.def):
 * sg_m x sg_n subgroups of fm x fn 16 x 16 accumulators, K steps of bk, one or two shared
 * stages. Its shared array holds every stage's tiles of A and B, rows padded by a chunk. */
typedef struct coop_form {
    lm_shader_id shader, shader_khr;   /* through VK_NV_ / VK_KHR_cooperative_matrix */
    uint32_t sg_m, sg_n, fm, fn, bk, stages;
} coop_form;

#define COOP_FORM(id) LM_SH_##id, LM_SH_##id##_KHR
static const coop_form COOP_FORMS[] = {
    { COOP_FORM(MATMUL_COOP), 2, 2, 4, 4, 32, 1 },          /* 128 x 128 */
    { COOP_FORM(MATMUL_COOP_DB), 2, 2, 4, 4, 32, 2 },       /* 128 x 128, two stages */
    { COOP_FORM(MATMUL_COOP_TALL), 4, 2, 4, 4, 32, 1 },     /* 256 x 128 */
    { COOP_FORM(MATMUL_COOP_TALL_DB), 4, 2, 4, 4, 16, 2 },  /* 256 x 128, two stages of K 16 */
    { COOP_FORM(MATMUL_COOP_WIDE), 2, 4, 4, 4, 32, 1 },     /* 128 x 256 */
    { COOP_FORM(MATMUL_COOP_8SG), 4, 2, 2, 4, 32, 1 },      /* 128 x 128, 8 subgroups */
    { COOP_FORM(MATMUL_COOP_8SG_K64), 4, 2, 2, 4, 64, 1 },  /* 128 x 128, 8 subgroups, K 64 */
    { COOP_FORM(MATMUL_COOP_H4), 2, 2, 4, 4, 32, 1 },       /* form 1, tiles as float16 quads */
    { COOP_FORM(MATMUL_COOP_8SG_H4), 4, 2, 2, 4, 32, 1 },   /* form 6, tiles as float16 quads */
};
#define COOP_NFORMS ((uint32_t)(sizeof COOP_FORMS / sizeof COOP_FORMS[0]))

static uint32_t coop_bm(const coop_form *f) { return 16 * f->sg_m * f->fm; }
static uint32_t coop_bn(const coop_form *f) { return 16 * f->sg_n * f->fn; }

static uint32_t coop_shared_bytes(const coop_form *f, int trans_b) {
    uint32_t kc = f->bk / 8, a = coop_bm(f) * (kc + 1);
    uint32_t b = trans_b ? coop_bn(f) * (kc + 1) : f->bk * (coop_bn(f) / 8 + 1);
    uint32_t tiles = f->stages * (a + b), c = f->sg_m * f->sg_n * 64;
    return 16 * (tiles > c ? tiles : c);
}

/* NULL when form f fits this device, else why not. */
static const char *coop_form_problem(const lm_context *ctx, const coop_form *f, int trans_b) {
    const VkPhysicalDeviceLimits *lim = &ctx->props.limits;
    uint32_t wg = f->sg_m * f->sg_n * ctx->subgroup_size;
    if (wg > lim->maxComputeWorkGroupInvocations || wg > lim->maxComputeWorkGroupSize[0])
        return "workgroup too large";
    if (coop_shared_bytes(f, trans_b) > lim->maxComputeSharedMemorySize) return "tiles exceed shared memory";
    return NULL;
}

/* The block form for an M x N product: the forced one, else for large products (at least
 * two 128 x 256 blocks per core of the device) the 128 x 256 block (fewest bytes read per
 * product) through NV, the 128 x 128 block of 4 subgroups through KHR, else 128 x 128
 * blocks of 8 subgroups with K steps of 64 (more blocks to spread, fewer registers per
 * thread). On the H200 (bench/matmul_coop.lua, BENCHMARKS.md) these were the fastest forms
 * on large and on mid-sized products for each extension. */
static const coop_form *choose_coop_form(const lm_context *ctx, const lm_matmul_args *g) {
    if (ctx->mm_coop_form) return &COOP_FORMS[ctx->mm_coop_form - 1];
    const coop_form *big = &COOP_FORMS[4], *mid = &COOP_FORMS[6];
    if (ctx->coop_khr) big = &COOP_FORMS[0];
    const coop_form *wide = &COOP_FORMS[4];
    uint64_t blocks = (uint64_t)((g->m + coop_bm(wide) - 1) / coop_bm(wide)) * ((g->n + coop_bn(wide) - 1) / coop_bn(wide));
    if (blocks >= 2 * (uint64_t)device_cores(ctx) && coop_form_problem(ctx, big, g->trans_b) == NULL) return big;
    if (coop_form_problem(ctx, mid, g->trans_b) == NULL) return mid;
    return &COOP_FORMS[0];
}

/* NULL when the float16 product can run on tensor cores, else why not. */
static const char *coop_problem(const lm_context *ctx, const lm_matmul_args *g) {
    if (!ctx->coop_matrix) return "the device has no cooperative matrices";
    const char *why = coop_form_problem(ctx, choose_coop_form(ctx, g), g->trans_b);
    if (why) return why;
    if (g->batch != 1 || g->trans_a) return "batched or a transposed";
    uint32_t lda = g->lda ? g->lda : g->k;
    uint32_t ldb = g->ldb ? g->ldb : (g->trans_b ? g->k : g->n);
    if (g->k % 8 || lda % 8 || ldb % 8 || (!g->trans_b && g->n % 8)) return "rows not in whole 16-byte chunks";
    if (lm_tensor_address(g->a) % 16 || lm_tensor_address(g->b) % 16) return "operands not 16-byte aligned";
    return NULL;
}

/* Products of at least this many FLOPs (2 M N K per batch; ~25 microseconds on an H200)
 * are long enough that the stream submits them at once when the device is idle, so the
 * device runs them while the host records the ops that follow. */
#define MM_LONG_FLOPS (1u << 30)

static void note_long_product(lm_context *ctx, const lm_matmul_args *g) {
    if (2.0 * g->m * g->n * g->k * (g->batch ? g->batch : 1) >= (double)MM_LONG_FLOPS) lm_stream_note_long(ctx);
}

static void record_coop(lua_State *L, const lm_matmul_args *g, const char *op) {
    lm_context *ctx = g->a->storage->ctx;
    const coop_form *f = choose_coop_form(ctx, g);
    uint32_t bm = coop_bm(f), bn = coop_bn(f);
    struct {
        uint64_t a, b, bias, c;
        uint32_t m, n, k, lda, ldb, tiles_m, tiles_n, groups_x;
    } pc = {
        .a = lm_tensor_address(g->a), .b = lm_tensor_address(g->b),
        .bias = g->bias ? lm_tensor_address(g->bias) : 0, .c = lm_tensor_address(g->out),
        .m = g->m, .n = g->n, .k = g->k,
        .lda = g->lda ? g->lda : g->k, .ldb = g->ldb ? g->ldb : (g->trans_b ? g->k : g->n),
        .tiles_m = (g->m + bm - 1) / bm, .tiles_n = (g->n + bn - 1) / bn,
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "matmul_coop push constants");
    uint64_t groups = (uint64_t)pc.tiles_m * pc.tiles_n;
    if (groups > 0xffffffffULL) luaL_error(L, "%s: product too large (%I workgroups)", op, (LUAI_UACINT)groups);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    note_long_product(ctx, g);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = ctx->coop_khr ? f->shader_khr : f->shader,
        .spec = { f->sg_m * f->sg_n * ctx->subgroup_size, g->trans_b ? 1u : 0u },
        .full_subgroups = 1,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { g->a, g->b, g->bias }, .writes = { g->out },
    });
}

/* Split over K: a product with too few tiles to fill the device (a weight gradient
 * x^T dy: M, N the layer's sizes, K the tokens; a small output with a long K) runs as a
 * batch of `splits` products over K slices into a temporary, then one pass sums the
 * slices in a fixed order (and adds the bias): more workgroups for the cost of writing and
 * reading the partial products once. GPU only, float32, one batch. The slices are a
 * multiple of 4 of K, the last one taking the rest (a product of its own where it is
 * longer); each keeps at least MM_SPLIT_MIN_K of K, or MM_SPLIT_MIN_K_SMALL where the
 * output has at most MM_SPLIT_SMALL_OUT elements (its partial products cost little).
 * tune.matmul{split = s} forces s (halved until each slice has 4 of K) on any device. */
#define MM_SPLIT_MIN_K 512
#define MM_SPLIT_MIN_K_SMALL 128
#define MM_SPLIT_SMALL_OUT (1u << 18)
#define MM_SPLIT_MAX 16
/* Workgroups wanted per core before splitting stops: 8 splits a 3072 x 768 x 8192 weight
 * gradient in 8 on the wide tile (0.89 ms against 1.18 unsplit on the H200). The partial
 * products live in a scratch the context keeps (split_parts), so a training step does not
 * take a fresh 38 MB block from the driver for them (which cost more host time than the
 * split saved). */
#define MM_SPLIT_WAVES 8

static void record_tiled(lua_State *L, const lm_matmul_args *g, const char *op, mm_tile t);
static void record_tiled_or_split(lua_State *L, const lm_matmul_args *g, const char *op, lm_dtype dt);
static int b_copy_wanted(const lm_context *ctx, const lm_matmul_args *g, lm_dtype dt);
static int tiled_vec4(const lm_matmul_args *g, uint32_t es, uint32_t lda, uint32_t ldb);
static int wide_tile_wanted(const lm_context *ctx, const lm_matmul_args *g, lm_dtype dt, int vec4);
static void record_with_b_copied(lua_State *L, const lm_matmul_args *g, const char *op);

/* The tile that replaces the chosen one for large aligned float32 products on a GPU whose
 * b is not read transposed (matmul and a^T b, not linear's weight): 128 x 128 in K steps
 * of 16, threads in row order, where the product has at least two such tiles per core.
 * Without bounds tests it is the faster form there (H200, 4096^3: 3.09 ms against 3.87
 * for 128 x 64 x 8; 8192 x 3072 x 768: 0.92 against 1.02); with b transposed it is slower
 * (4.24 against 3.33), and 4 x 8 thread patches slow its a^T b (5.46 against 2.99). */
static const mm_tile WIDE_TILE = { 128, 128, 16, 8, 8 };

/* The tile a split of g into s K slices runs (the wide one where the slices, a batch of s
 * products, take it; vec4 assumed from the sizes). */
static mm_tile split_tile(const lm_context *ctx, const lm_matmul_args *g, lm_dtype dt, uint32_t s) {
    lm_matmul_args slices = *g;
    slices.batch = s;
    slices.k = g->k / s;
    if (wide_tile_wanted(ctx, &slices, dt, g->k % 4 == 0 && g->n % 4 == 0)) return WIDE_TILE;
    return choose_tile(ctx, g->m, g->n, s);
}

static uint32_t split_k(const lm_context *ctx, const lm_matmul_args *g, lm_dtype dt) {
    if (g->batch != 1 || dt != LM_FLOAT32 || ctx->mm_path == MM_PATH_GEMV) return 1;
    uint32_t s = 1;
    if (ctx->mm_split) {
        s = ctx->mm_split;
        while (s > 1 && g->k < 4 * s) s /= 2;
        return s;
    }
    if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || ctx->mm_tile[0]) return 1;
    uint64_t want = (uint64_t)MM_SPLIT_WAVES * device_cores(ctx);
    uint32_t min_k = (uint64_t)g->m * g->n <= MM_SPLIT_SMALL_OUT ? MM_SPLIT_MIN_K_SMALL : MM_SPLIT_MIN_K;
    for (;;) {
        uint32_t next = 2 * s;
        mm_tile t = split_tile(ctx, g, dt, s);
        uint64_t groups = (uint64_t)((g->m + t.bm - 1) / t.bm) * ((g->n + t.bn - 1) / t.bn) * s;
        if (groups >= want || next > MM_SPLIT_MAX || g->k / next < min_k) break;
        s = next;
    }
    return s;
}

/* After an allocation (which may run finalizers): raises if an operand was freed. */
static void check_operands_live(lua_State *L, const lm_matmul_args *g, const char *op) {
    if (!g->a->storage || !g->b->storage || !g->out->storage || (g->bias && !g->bias->storage))
        luaL_error(L, "%s: tensor has been freed", op);
}

/* The partial products of a split over K: [splits, m, n] floats in the context's kept
 * scratch (grown to a power of two; the stream orders each call's writes after the last
 * call's reads), or, while a graph is being captured (which cannot hold scratch), a fresh
 * tensor pushed on the stack. Returns whether it pushed one. */
static int split_parts(lua_State *L, lm_context *ctx, const int64_t shape[3], lm_tensor *view) {
    if (ctx->stream.recording) {
        *view = *lm_push_tensor(L, ctx, 3, shape);
        return 1;
    }
    VkDeviceSize bytes = (VkDeviceSize)shape[0] * (VkDeviceSize)shape[1] * (VkDeviceSize)shape[2] * 4u;
    int made;
    lm_storage *st = lm_kept_scratch(L, ctx, LM_SCRATCH_MATMUL_SPLIT, bytes, 4096, &made);
    *view = (lm_tensor){ .storage = st, .dtype = LM_FLOAT32, .ndim = 3,
                         .shape = { shape[0], shape[1], shape[2] },
                         .strides = { shape[1] * shape[2], shape[2], 1 },
                         .numel = shape[0] * shape[1] * shape[2] };
    return 0;
}

static void record_split_k(lua_State *L, const lm_matmul_args *g, const char *op, uint32_t splits) {
    lm_context *ctx = g->a->storage->ctx;
    int64_t shape[3] = { splits, g->m, g->n };
    /* (The allocation may run finalizers; the operands are the caller's, anchored.) */
    lm_tensor parts_view;
    int pushed = split_parts(L, ctx, shape, &parts_view);
    lm_tensor *parts = &parts_view;
    check_operands_live(L, g, op);
    /* Slices of ks (a multiple of 4), the last one k_last = the rest (>= ks). */
    uint32_t ks = (g->k / splits) & ~3u;
    uint32_t k_last = g->k - (splits - 1) * ks;
    uint32_t lda = g->lda ? g->lda : (g->trans_a ? g->m : g->k);
    uint32_t ldb = g->ldb ? g->ldb : (g->trans_b ? g->k : g->n);
    lm_matmul_args slices = *g;
    slices.bias = NULL;
    slices.out = parts;
    slices.k = ks;
    slices.batch = k_last == ks ? splits : splits - 1;
    slices.batch_inner = 1;
    slices.lda = lda;
    slices.ldb = ldb;
    /* Slice z starts K column z * ks of a (row z * ks when a is read transposed), row
     * z * ks of b (column when transposed). */
    slices.stride_a = g->trans_a ? (uint64_t)ks * lda : ks;
    slices.stride_b = g->trans_b ? ks : (uint64_t)ks * ldb;
    slices.stride_a2 = slices.stride_b2 = 0;
    slices.stride_out = (uint64_t)g->m * g->n;
    record_tiled(L, &slices, op, choose_tile(ctx, g->m, g->n, splits));
    if (k_last != ks) {
        /* The last slice, longer: one product from K offset (splits - 1) * ks. */
        uint64_t k0 = (uint64_t)(splits - 1) * ks;
        lm_tensor a_tail = *g->a, b_tail = *g->b, out_tail = *parts;
        a_tail.offset += (int64_t)(g->trans_a ? k0 * lda : k0);
        b_tail.offset += (int64_t)(g->trans_b ? k0 : k0 * ldb);
        out_tail.offset += (int64_t)(splits - 1) * g->m * g->n;
        lm_matmul_args tail = slices;
        tail.a = &a_tail;
        tail.b = &b_tail;
        tail.out = &out_tail;
        tail.k = k_last;
        tail.batch = 1;
        tail.stride_a = tail.stride_b = tail.stride_out = 0;
        record_tiled(L, &tail, op, choose_tile(ctx, g->m, g->n, 1));
    }
    struct {
        uint64_t parts, bias, c, count;
        uint32_t n, splits, groups_x;
    } pc = {
        .parts = lm_tensor_address(parts), .bias = g->bias ? lm_tensor_address(g->bias) : 0,
        .c = lm_tensor_address(g->out), .count = (uint64_t)g->m * g->n, .n = g->n, .splits = splits,
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "matmul_split_sum push constants");
    int vec4 = g->n % 4 == 0 && aligned4(g->bias, 4) && aligned4(g->out, 4);
    uint32_t wg = 256, gy;
    uint64_t threads = vec4 ? pc.count / 4 : pc.count;
    pc.groups_x = lm_grid(L, ctx, (threads + wg - 1) / wg, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .shader = LM_SH_MATMUL_SPLIT_SUM, .spec = { wg, vec4 ? 1u : 0u },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { parts, g->bias }, .writes = { g->out },
    });
    if (pushed) {
        /* The partial products go back once the recorded work is done (a deferred free). */
        lm_tensor_release(lm_check_tensor(L, -1));
        lua_pop(L, 1);
    }
}

void lm_record_matmul(lua_State *L, const lm_matmul_args *g, const char *op) {
    lm_context *ctx = g->a->storage->ctx;
    int gemv_allowed = ctx->mm_path == MM_PATH_GEMV || (ctx->mm_path == MM_PATH_AUTO && !ctx->mm_tile[0]);
    if (lm_gemv_problem(ctx, g) == NULL && gemv_wanted(ctx, g)) {
        lm_record_gemv(L, g, op, ctx->mm_split);
        return;
    }
    /* One column (N = 1, b's K elements consecutive): c [M, 1] is c^T [1, M] = b^T a^T,
     * the small-M path's product of one row with a read as a weight [M, K] (a bias is
     * its one element added to every column). */
    if (gemv_allowed && g->n == 1 && g->batch == 1 && !g->trans_a && (g->trans_b || g->ldb <= 1)) {
        lm_matmul_args t = {
            .a = g->b, .b = g->a, .bias = g->bias, .bias_scalar = 1, .out = g->out, .m = 1, .n = g->m,
            .k = g->k, .batch = 1, .trans_b = 1, .lda = g->k, .ldb = g->lda ? g->lda : g->k,
        };
        if (lm_gemv_problem(ctx, &t) == NULL) {
            lm_record_gemv(L, &t, op, ctx->mm_split);
            return;
        }
    }
    lm_dtype dt = g->a->dtype;
    if (dt == LM_FLOAT16 && (ctx->mm_path == MM_PATH_AUTO || ctx->mm_path == MM_PATH_COOP) && !ctx->mm_tile[0] &&
        coop_problem(ctx, g) == NULL) {
        record_coop(L, g, op);
        return;
    }
    if (g->trans_b && b_copy_wanted(ctx, g, dt)) {
        record_with_b_copied(L, g, op);
        return;
    }
    record_tiled_or_split(L, g, op, dt);
}

static void record_tiled_or_split(lua_State *L, const lm_matmul_args *g, const char *op, lm_dtype dt) {
    lm_context *ctx = g->a->storage->ctx;
    uint32_t splits = split_k(ctx, g, dt);
    if (splits > 1) {
        record_split_k(L, g, op, splits);
        return;
    }
    record_tiled(L, g, op, choose_tile(ctx, g->m, g->n, g->batch));
}

/* g with b [N, K] (read transposed) replaced by b_t, its [K, N] copy. */
static lm_matmul_args with_b_copy(const lm_matmul_args *g, lm_tensor *b_t) {
    lm_matmul_args h = *g;
    h.b = b_t;
    h.trans_b = 0;
    h.ldb = 0;
    h.stride_b = h.stride_b2 = 0;
    return h;
}

/* Whether a product with b read transposed (linear's weight) runs faster as a transposing
 * copy of b and the wide tile: one product whose copy would take the wide tile. b read
 * transposed costs the tiled kernel scalar shared stores and a load of 32 bytes per row
 * per K step; on the H200 linear 4096^3 took 3.47 ms where the same product with b
 * [K, N] took 3.08, and the copy of a 4096^2 weight ~0.04. */
static int b_copy_wanted(const lm_context *ctx, const lm_matmul_args *g, lm_dtype dt) {
    if (g->batch != 1 || dt != LM_FLOAT32 || ctx->mm_copy_b == 2) return 0;
    if (ctx->mm_copy_b == 1) return 1;
    lm_matmul_args h = with_b_copy(g, NULL);   /* (the copy is fresh: aligned) */
    uint32_t lda = g->lda ? g->lda : (g->trans_a ? g->m : g->k);
    return wide_tile_wanted(ctx, &h, dt, tiled_vec4(&h, 4u, lda, g->n));
}

static void record_with_b_copied(lua_State *L, const lm_matmul_args *g, const char *op) {
    lm_context *ctx = g->a->storage->ctx;
    uint32_t ldb = g->ldb ? g->ldb : g->k;
    int64_t shape[2] = { g->k, g->n };
    /* (The allocation may run finalizers; the operands are the caller's, anchored.) */
    lm_tensor *b_t = lm_push_tensor(L, ctx, 2, shape);
    check_operands_live(L, g, op);
    lm_tensor b_view = *g->b;   /* b [N, K] (rows ldb apart) seen as [K, N] */
    b_view.ndim = 2;
    b_view.shape[0] = g->k;
    b_view.shape[1] = g->n;
    b_view.strides[0] = 1;
    b_view.strides[1] = ldb;
    b_view.numel = (int64_t)g->k * g->n;
    lm_record_strided_copy(L, &b_view, b_t);
    lm_matmul_args h = with_b_copy(g, b_t);
    record_tiled_or_split(L, &h, op, LM_FLOAT32);
    /* The copy goes back once the recorded work is done (a deferred free). */
    lm_tensor_release(b_t);
    lua_pop(L, 1);
}

/* Whether the tiled kernel reads and writes vec4s: K, N (M when a is read transposed),
 * the row and batch strides multiples of 4 elements, every operand 16-byte aligned. */
static int tiled_vec4(const lm_matmul_args *g, uint32_t es, uint32_t lda, uint32_t ldb) {
    return g->k % 4 == 0 && g->n % 4 == 0 && (!g->trans_a || g->m % 4 == 0) && lda % 4 == 0 && ldb % 4 == 0 &&
           aligned4(g->a, es) && aligned4(g->b, es) && aligned4(g->bias, es) && aligned4(g->out, es) &&
           g->stride_a % 4 == 0 && g->stride_b % 4 == 0 && g->stride_out % 4 == 0 &&
           g->stride_a2 % 4 == 0 && g->stride_b2 % 4 == 0;
}

/* Whether the tiled kernel may drop its bounds tests (bit 3 of its TRANS constant): vector
 * loads, and the tile dividing M, N and K (a product's K slice when split). */
static int tiled_aligned(const lm_matmul_args *g, const mm_tile *t, int vec4) {
    return vec4 && g->m % t->bm == 0 && g->n % t->bn == 0 && g->k % t->bk == 0;
}

/* Whether g takes WIDE_TILE in place of the cost model's tile (see WIDE_TILE). */
static int wide_tile_wanted(const lm_context *ctx, const lm_matmul_args *g, lm_dtype dt, int vec4) {
    if (ctx->mm_tile[0] || dt != LM_FLOAT32 || g->trans_b || !vec4 ||
        ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || tile_problem(ctx, &WIDE_TILE))
        return 0;
    if (g->m % WIDE_TILE.bm != 0 || g->n % WIDE_TILE.bn != 0 || g->k % WIDE_TILE.bk != 0) return 0;
    uint64_t tiles = (uint64_t)(g->m / WIDE_TILE.bm) * (g->n / WIDE_TILE.bn) * g->batch;
    return tiles >= 2 * (uint64_t)device_cores(ctx);
}

/* The register-blocked kernel (shaders/matmul.comp) with tile t. */
static void record_tiled(lua_State *L, const lm_matmul_args *g, const char *op, mm_tile t) {
    lm_context *ctx = g->a->storage->ctx;
    lm_dtype dt = g->a->dtype;
    uint32_t es = (uint32_t)lm_dtype_size(dt);
    uint32_t lda = g->lda ? g->lda : (g->trans_a ? g->m : g->k);
    uint32_t ldb = g->ldb ? g->ldb : (g->trans_b ? g->k : g->n);
    int vec4 = tiled_vec4(g, es, lda, ldb);
    int wide = wide_tile_wanted(ctx, g, dt, vec4);
    if (wide) t = WIDE_TILE;
    struct {
        uint64_t a, b, bias, c;
        uint64_t stride_a, stride_b, stride_c, stride_a2, stride_b2;
        uint32_t m, n, k, tiles_m, tiles_n, groups_x, batch, group_m, k_rotate, batch_inner, lda, ldb;
    } pc = {
        .a = lm_tensor_address(g->a), .b = lm_tensor_address(g->b),
        .bias = g->bias ? lm_tensor_address(g->bias) : 0, .c = lm_tensor_address(g->out),
        .stride_a = g->stride_a, .stride_b = g->stride_b, .stride_c = g->stride_out,
        .stride_a2 = g->stride_a2, .stride_b2 = g->stride_b2,
        .m = g->m, .n = g->n, .k = g->k,
        .tiles_m = (g->m + t.bm - 1) / t.bm, .tiles_n = (g->n + t.bn - 1) / t.bn,
        .batch = g->batch, .group_m = MM_GROUP_M,
        /* K-order rotation (see the shader) spreads L2 requests on GPUs; CPU caches do
         * not care. */
        .k_rotate = ctx->mm_rotate == 1 ||
                    (ctx->mm_rotate == 0 && ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU),
        .batch_inner = g->batch_inner ? g->batch_inner : 1, .lda = lda, .ldb = ldb,
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "matmul push constants");
    uint64_t groups = (uint64_t)pc.tiles_m * pc.tiles_n * g->batch;
    if (groups > 0xffffffffULL) luaL_error(L, "%s: product too large (%I workgroups)", op, (LUAI_UACINT)groups);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    note_long_product(ctx, g);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1,
        .shader = tiled_shader(ctx, dt, &t),
        .spec = { tile_threads(&t), t.bm, t.bn, t.bk, t.tm, t.tn,
                  (g->trans_b ? 1u : 0u) | (g->trans_a ? 2u : 0u) | (tiled_order(ctx, &t) && !wide ? 4u : 0u) |
                  (tiled_aligned(g, &t, vec4) ? 8u : 0u),
                  vec4 ? 1u : 0u },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { g->a, g->b, g->bias }, .writes = { g->out },
    });
}

/* ---- lumus.matmul(a, b [, opts]) ---- */

static void shape_of(const lm_tensor *t, char *buf, size_t len) { lm_shape_string(t->shape, t->ndim, buf, len); }

static void check_size(lua_State *L, int argn, int64_t v, const char *what) {
    if (v > 0x7fffffffLL) lm_argerror(L, argn, "%s too large (%I; at most 2^31-1)", what, (LUAI_UACINT)v);
}

/* An operand as the kernel reads it: a rows x cols matrix (a: M x K; b: K x N) per batch,
 * stored row-major (`kmajor` 0 for a, 1 for b) or the other way round (flipped), rows
 * `ld` floats apart; batch dimensions with their strides. */
typedef struct mm_operand {
    int64_t rows, cols, ld;
    int flipped;
    int nbatch;
    int64_t bshape[LM_MAX_DIMS], bstride[LM_MAX_DIMS];
} mm_operand;

/* Describes t (transposed in its last two dimensions when `trans`) as a logical
 * rows x cols matrix with batches; a 1-D t is a row (as_row) or a column. Returns 0 when
 * its last two strides are neither row- nor column-major (then read through a copy). */
static int describe(const lm_tensor *t, int trans, int as_row, mm_operand *o) {
    int64_t sr, sc;
    if (t->ndim == 1) {
        if (as_row) { o->rows = 1; o->cols = t->shape[0]; sr = t->shape[0]; sc = t->strides[0]; }
        else { o->rows = t->shape[0]; o->cols = 1; sr = t->strides[0]; sc = 1; }
        o->nbatch = 0;
    } else {
        int r = t->ndim - 2, c = t->ndim - 1;
        if (trans) { int x = r; r = c; c = x; }
        o->rows = t->shape[r]; o->cols = t->shape[c];
        sr = t->strides[r]; sc = t->strides[c];
        o->nbatch = t->ndim - 2;
        for (int i = 0; i < o->nbatch; i++) { o->bshape[i] = t->shape[i]; o->bstride[i] = t->strides[i]; }
    }
    /* Row-major (as the kernel's unflipped form reads it) when columns step by 1. */
    if (sc == 1 || o->cols == 1) { o->flipped = 0; o->ld = o->rows == 1 ? o->cols : sr; }
    else if (sr == 1 || o->rows == 1) { o->flipped = 1; o->ld = o->cols == 1 ? o->rows : sc; }
    else return 0;
    return o->ld > 0 && o->ld <= 0x7fffffffLL;   /* (rows of stride 0: through a copy) */
}

/* Can the kernel read this operand (as described) with vec4 loads, given K and N that
 * allow them? (A read k-major also needs M a multiple of 4: need_rows4.) */
static int operand_vec4(const lm_tensor *t, const mm_operand *o, int need_rows4) {
    if (lm_tensor_address(t) % (4 * lm_dtype_size(t->dtype)) || o->ld % 4 || (o->flipped && need_rows4 && o->rows % 4)) return 0;
    for (int i = 0; i < o->nbatch; i++)
        if (o->bshape[i] > 1 && o->bstride[i] % 4) return 0;
    return 1;
}

/* Products this large read an operand whose layout rules out vec4 loads through a packed
 * copy instead (the copy costs one pass over the operand, the scalar loads much more). */
#define MM_COPY_FOR_VEC4 ((int64_t)1 << 21)   /* multiply-adds per product */

void lm_check_matmul_dtypes(lua_State *L, const lm_tensor *a, int arg_a, const char *name_a,
                            const lm_tensor *b, int arg_b, const char *name_b) {
    if (a->dtype != LM_FLOAT32 && a->dtype != LM_FLOAT16 && a->dtype != LM_BFLOAT16)
        lm_argerror(L, arg_a, "%s must be float32, float16 or bfloat16, got %s", name_a, lm_dtype_name(a->dtype));
    if (b->dtype != a->dtype)
        lm_argerror(L, arg_b, "dtypes %s (%s) and %s (%s) differ (convert with :to())", lm_dtype_name(a->dtype),
                    name_a, lm_dtype_name(b->dtype), name_b);
    if (a->dtype != LM_FLOAT32) lm_require_narrow_storage(L, a->storage->ctx, lm_fname(L), a->dtype);
}

int lm_op_matmul(lua_State *L) {
    static const char *const known[] = { "out", "transpose_a", "transpose_b", NULL };
    lm_tensor *a = lm_check_tensor(L, 1);
    lm_tensor *b = lm_check_tensor(L, 2);
    lm_check_options(L, 3, known);
    int ta = lm_option_boolean(L, 3, "transpose_a", 0);
    int tb = lm_option_boolean(L, 3, "transpose_b", 0);
    /* Messages describe a and b as the caller passed them. */
    char as[256], bs[256];
    shape_of(a, as, sizeof as);
    shape_of(b, bs, sizeof bs);
    if (ta && a->ndim < 2) lm_argerror(L, 1, "transpose_a needs a of 2 or more dimensions, got shape %s", as);
    if (tb && b->ndim < 2) lm_argerror(L, 2, "transpose_b needs b of 2 or more dimensions, got shape %s", bs);
    lm_check_matmul_dtypes(L, a, 1, "a", b, 2, "b");
    lua_settop(L, 3);
    mm_operand oa, ob;
    /* A layout the kernel cannot read in place (not row- or column-major in the last two
     * dimensions) is read through a contiguous copy; expanded batch dimensions are not
     * copied. */
    if (!describe(a, ta, 1, &oa)) { lm_contiguous_inputs(L, 1, 1); a = lm_check_tensor(L, 1); describe(a, ta, 1, &oa); }
    if (!describe(b, tb, 0, &ob)) { lm_contiguous_inputs(L, 2, 2); b = lm_check_tensor(L, 2); describe(b, tb, 0, &ob); }
    if (oa.cols % 4 == 0 && ob.cols % 4 == 0 && ob.rows == oa.cols &&
        oa.rows * oa.cols >= MM_COPY_FOR_VEC4 / ob.cols) {
        /* (a packed copy is read k-major again under transpose_a: it helps when M is a
         * multiple of 4) */
        if (!operand_vec4(a, &oa, 1) && !lm_tensor_is_plain(a) && !(ta && oa.rows % 4)) {
            lm_contiguous_inputs(L, 1, 1); a = lm_check_tensor(L, 1); describe(a, ta, 1, &oa);
        }
        if (!operand_vec4(b, &ob, 0) && !lm_tensor_is_plain(b)) {
            lm_contiguous_inputs(L, 2, 2); b = lm_check_tensor(L, 2); describe(b, tb, 0, &ob);
        }
    }
    a = lm_check_tensor(L, 1);
    int64_t m = oa.rows, k = oa.cols, n = ob.cols;
    if (ob.rows != k) {
        const char *adim = ta ? (a->ndim > 2 ? "second-to-last" : "first") : "last";
        if (b->ndim == 1)
            lm_argerror(L, 2, "b's length must be K = %I (the %s dimension of a, shape %s%s), got shape %s",
                        (LUAI_UACINT)k, adim, as, ta ? ", transpose_a" : "", bs);
        lm_argerror(L, 2, "b's %s dimension must be K = %I (the %s dimension of a, shape %s%s), got shape %s%s",
                    tb ? "last" : (b->ndim > 2 ? "second-to-last" : "first"), (LUAI_UACINT)k, adim, as,
                    ta ? ", transpose_a" : "", bs, tb ? " (transpose_b)" : "");
    }
    /* Batch dimensions broadcast as in torch.matmul (aligned at the right). */
    int nb = oa.nbatch > ob.nbatch ? oa.nbatch : ob.nbatch;
    int64_t bshape[LM_MAX_DIMS], sa[LM_MAX_DIMS], sb[LM_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - oa.nbatch), ib = i - (nb - ob.nbatch);
        int64_t za = ia < 0 ? 1 : oa.bshape[ia], zb = ib < 0 ? 1 : ob.bshape[ib];
        if (za != zb && za != 1 && zb != 1)
            lm_argerror(L, 2, "batch dimensions of b (shape %s) and a (shape %s) do not broadcast: %I against %I "
                        "in batch dimension %d", bs, as, (LUAI_UACINT)zb, (LUAI_UACINT)za, i + 1);
        bshape[i] = za > zb ? za : zb;
        sa[i] = za == 1 ? 0 : oa.bstride[ia];
        sb[i] = zb == 1 ? 0 : ob.bstride[ib];
    }
    int64_t shape[LM_MAX_DIMS], batch = 1;
    int ndim = 0;
    for (int i = 0; i < nb; i++) { shape[ndim++] = bshape[i]; batch *= bshape[i]; }
    if (a->ndim > 1) shape[ndim++] = m;
    if (b->ndim > 1) shape[ndim++] = n;
    if (ndim == 0) shape[ndim++] = 1;   /* a dot product: [1] (lumus has no 0-D tensors) */
    check_size(L, 1, k, "K");
    check_size(L, 2, n, "N");
    lm_check_result_size(L, ndim, shape);
    lm_context *ctx = a->storage->ctx;
    if (b->storage->ctx != ctx) luaL_error(L, "matmul: tensors belong to different devices");
    lm_tensor *out;
    {
        lm_operands in = { { a, b }, { "a", "b" } };
        out = a->dtype == LM_FLOAT32 ? lm_push_out(L, 3, ctx, ndim, shape, &in, 0)
                                     : lm_push_out_dtype(L, 3, ctx, a->dtype, ndim, shape, &in);
    }
    a = lm_check_tensor(L, 1);   /* a finalizer may have freed either meanwhile */
    b = lm_check_tensor(L, 2);

    /* Merge batch dimensions: size-1 ones go; neighbours merge when both operands step
     * over them as one (out, contiguous, always does). */
    int64_t size[LM_MAX_DIMS], xa[LM_MAX_DIMS], xb[LM_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < nb; i++) {
        if (bshape[i] == 1) continue;
        if (nd > 0 && xa[nd - 1] == sa[i] * bshape[i] && xb[nd - 1] == sb[i] * bshape[i]) {
            size[nd - 1] *= bshape[i]; xa[nd - 1] = sa[i]; xb[nd - 1] = sb[i];
            continue;
        }
        size[nd] = bshape[i]; xa[nd] = sa[i]; xb[nd] = sb[i];
        nd++;
    }
    /* b the same for every batch and a's batches stacked rows: one product of all rows. */
    if (nd == 1 && xb[0] == 0 && !oa.flipped && (xa[0] == m * oa.ld || (m == 1 && xa[0] > 0 && xa[0] <= 0x7fffffffLL))) {
        if (m == 1) oa.ld = xa[0];
        m *= size[0];
        nd = 0;
        batch = 1;
    }
    check_size(L, 1, m, "row count of a");
    int outer_dims = nd > 2 ? nd - 2 : 0;
    int64_t inner = 1;
    for (int i = outer_dims; i < nd; i++) inner *= size[i];
    check_size(L, 2, inner, "batch count");
    lm_matmul_args g = {
        .m = (uint32_t)m, .n = (uint32_t)n, .k = (uint32_t)k, .batch = (uint32_t)inner,
        .stride_out = inner > 1 ? (uint64_t)(m * n) : 0,
        .trans_a = oa.flipped, .trans_b = ob.flipped,
        .lda = (uint32_t)oa.ld, .ldb = (uint32_t)ob.ld,
    };
    if (nd - outer_dims == 2) {
        g.batch_inner = (uint32_t)size[nd - 1];
        g.stride_a = (uint64_t)xa[nd - 2]; g.stride_b = (uint64_t)xb[nd - 2];
        g.stride_a2 = (uint64_t)xa[nd - 1]; g.stride_b2 = (uint64_t)xb[nd - 1];
    } else if (nd - outer_dims == 1) {
        g.stride_a = (uint64_t)xa[nd - 1]; g.stride_b = (uint64_t)xb[nd - 1];
    }
    /* Batch dimensions beyond two: one dispatch per index of the outer ones, with the
     * operands' (stack) handles moved to that index. */
    int64_t outer = batch / inner, idx[LM_MAX_DIMS] = { 0 };
    if (outer == 1) {   /* the tensors themselves (a capture finds them on the stack) */
        g.a = a; g.b = b; g.out = out;
        lm_record_matmul(L, &g, "matmul");
        return 1;
    }
    for (int64_t z = 0; z < outer; z++) {
        lm_tensor va = *a, vb = *b, vo = *out;
        for (int i = 0; i < outer_dims; i++) { va.offset += idx[i] * xa[i]; vb.offset += idx[i] * xb[i]; }
        vo.offset += z * inner * m * n;
        g.a = &va; g.b = &vb; g.out = &vo;
        lm_record_matmul(L, &g, "matmul");
        for (int i = outer_dims - 1; i >= 0; i--) { if (++idx[i] < size[i]) break; idx[i] = 0; }
    }
    return 1;
}

/* tune.matmul(M, N, K [, tune]) -> the tile chosen for an M x K by K x N product;
 * `tune` ({bm=, bn=, bk=, tm=, tn=}, all five) fixes the tile for later calls, {} restores
 * the automatic choice (for bench/ sweeps); rotate = true/false forces the K-order
 * rotation, order = "row"/"warp" the thread order ("warp" where the tile allows it),
 * builtin = false keeps the float32 tiles off their compiled-in variants; absent
 * restores the automatic choice. */
int lm_op_matmul_config(lua_State *L) {
    static const char *const known[] = { "bm", "bn", "bk", "tm", "tn", "rotate", "path", "split", "coop_form",
                                         "order", "builtin", "copy_b", NULL };
    static const char *const orders[] = { "auto", "row", "warp", NULL };
    static const char *const paths[] = { "auto", "gemv", "tiled", "coop", NULL };
    lua_Integer m = lm_check_integer(L, 1), n = lm_check_integer(L, 2), k = lm_check_integer(L, 3);
    if (m < 1) lm_argerror(L, 1, "M must be positive");
    if (n < 1) lm_argerror(L, 2, "N must be positive");
    if (k < 1) lm_argerror(L, 3, "K must be positive");
    lm_context *ctx = lm_context_get(L);
    if (lm_check_options(L, 4, known)) {
        /* Everything is checked before anything is set. */
        lm_push_option(L, 4, "rotate");
        int rotate = lua_isnil(L, -1) ? 0 : 1;
        lua_pop(L, 1);
        if (rotate) rotate = lm_option_boolean(L, 4, "rotate", 0) ? 1 : 2;
        uint32_t v[5];
        int given = 0;
        for (int i = 0; i < 5; i++) {
            lua_Integer x = lm_option_integer(L, 4, known[i], 0);
            if (x < 0 || x > 4096) lm_argerror(L, 4, "tile sizes must be small non-negative integers");
            v[i] = (uint32_t)x;
            given += x != 0;
        }
        if (given != 0 && given != 5) lm_argerror(L, 4, "give all of bm, bn, bk, tm, tn (or none)");
        if (given) {
            mm_tile t = { v[0], v[1], v[2], v[3], v[4] };
            const char *why = tile_problem(ctx, &t);
            if (why) lm_argerror(L, 4, "%s", why);
        }
        lm_push_option(L, 4, "path");
        int path = MM_PATH_AUTO;
        if (!lua_isnil(L, -1)) {
            const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            path = -1;
            for (int i = 0; paths[i]; i++)
                if (strcmp(name, paths[i]) == 0) path = i;
            if (path < 0) lm_argerror(L, 4, "path must be \"auto\", \"gemv\", \"tiled\" or \"coop\"");
        }
        lua_pop(L, 1);
        lua_Integer split = lm_option_integer(L, 4, "split", 0);
        if (split < 0 || (split & (split - 1)))
            lm_argerror(L, 4, "split must be 0 (automatic) or a power of two");
        if (split > 256) lm_argerror(L, 4, "split must be at most 256");
        lua_Integer form = lm_option_integer(L, 4, "coop_form", 0);
        if (form < 0 || form > COOP_NFORMS)
            lm_argerror(L, 4, "coop_form must be 0 (automatic) to %d", (int)COOP_NFORMS);
        lm_push_option(L, 4, "order");
        int order = 0;
        if (!lua_isnil(L, -1)) {
            const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            order = -1;
            for (int i = 0; orders[i]; i++)
                if (strcmp(name, orders[i]) == 0) order = i;
            if (order < 0) lm_argerror(L, 4, "order must be \"auto\", \"row\" or \"warp\"");
        }
        lua_pop(L, 1);
        lm_push_option(L, 4, "builtin");
        int builtin = lua_isnil(L, -1) ? 0 : 1;
        lua_pop(L, 1);
        if (builtin) builtin = lm_option_boolean(L, 4, "builtin", 0) ? 1 : 2;
        lm_push_option(L, 4, "copy_b");
        int copy_b = lua_isnil(L, -1) ? 0 : 1;
        lua_pop(L, 1);
        if (copy_b) copy_b = lm_option_boolean(L, 4, "copy_b", 0) ? 1 : 2;
        if (given) memcpy(ctx->mm_tile, v, sizeof v);
        else memset(ctx->mm_tile, 0, sizeof ctx->mm_tile);
        ctx->mm_rotate = rotate;
        ctx->mm_path = path;
        ctx->mm_split = (uint32_t)split;
        ctx->mm_coop_form = (uint32_t)form;
        ctx->mm_order = order;
        ctx->mm_builtin = builtin;
        ctx->mm_copy_b = copy_b;
    }
    mm_tile t = choose_tile(ctx, (uint64_t)m, (uint64_t)n, 1);
    lua_createtable(L, 0, 14);
    lua_pushinteger(L, t.bm); lua_setfield(L, -2, "bm");
    lua_pushinteger(L, t.bn); lua_setfield(L, -2, "bn");
    lua_pushinteger(L, t.bk); lua_setfield(L, -2, "bk");
    lua_pushinteger(L, t.tm); lua_setfield(L, -2, "tm");
    lua_pushinteger(L, t.tn); lua_setfield(L, -2, "tn");
    lua_pushinteger(L, tile_threads(&t)); lua_setfield(L, -2, "workgroup");
    /* The thread order and whether the tile is compiled in (a float32 product's). */
    lua_pushstring(L, tiled_order(ctx, &t) ? "warp" : "row"); lua_setfield(L, -2, "order");
    lua_pushboolean(L, tiled_shader(ctx, LM_FLOAT32, &t) != LM_SH_MATMUL); lua_setfield(L, -2, "builtin");
    lua_pushinteger(L, tile_shared_bytes(&t)); lua_setfield(L, -2, "shared_bytes");
    lua_pushboolean(L, k % 4 == 0 && n % 4 == 0); lua_setfield(L, -2, "vec4");
    /* Whether contiguous, 16-byte aligned operands of this shape run without bounds tests. */
    lua_pushboolean(L, k % 4 == 0 && n % 4 == 0 && m % t.bm == 0 && n % t.bn == 0 && k % t.bk == 0);
    lua_setfield(L, -2, "aligned");
    /* Whether a float32 product of this shape (contiguous, aligned operands) takes the wide
     * tile in place of the one above: b as [K, N], or b read transposed through its copy. */
    lm_matmul_args gw = { .m = (uint32_t)(m > 0x7fffffff ? 0x7fffffff : m),
                          .n = (uint32_t)(n > 0x7fffffff ? 0x7fffffff : n),
                          .k = (uint32_t)(k > 0x7fffffff ? 0x7fffffff : k), .batch = 1 };
    lua_pushboolean(L, wide_tile_wanted(ctx, &gw, LM_FLOAT32, k % 4 == 0 && n % 4 == 0));
    lua_setfield(L, -2, "wide");
    lua_pushboolean(L, ctx->mm_rotate == 1 ||
                    (ctx->mm_rotate == 0 && ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU));
    lua_setfield(L, -2, "rotate");
    lua_pushinteger(L, (lua_Integer)(((uint64_t)m + t.bm - 1) / t.bm * (((uint64_t)n + t.bn - 1) / t.bn)));
    lua_setfield(L, -2, "workgroups");
    /* The small-M path for an M x K by K x N product (or a linear's weight [N, K]). */
    lm_matmul_args g = { .m = (uint32_t)(m > LM_GEMV_MAX_ROWS ? LM_GEMV_MAX_ROWS + 1 : m),
                         .n = (uint32_t)(n > 0x7fffffff ? 0x7fffffff : n),
                         .k = (uint32_t)(k > 0x7fffffff ? 0x7fffffff : k), .batch = 1 };
    lua_pushboolean(L, lm_gemv_problem(ctx, &g) == NULL && gemv_wanted(ctx, &g));
    lua_setfield(L, -2, "gemv");
    lua_pushstring(L, paths[ctx->mm_path]);
    lua_setfield(L, -2, "path");
    /* The K split the tiled kernel would take for a float32 product of this shape. */
    lm_matmul_args gs = { .m = (uint32_t)(m > 0x7fffffff ? 0x7fffffff : m), .n = g.n, .k = g.k, .batch = 1 };
    lua_pushinteger(L, split_k(ctx, &gs, LM_FLOAT32));
    lua_setfield(L, -2, "split");
    /* The tensor-core block form a float16 product of this shape would take (1-based). */
    lua_pushinteger(L, (lua_Integer)(choose_coop_form(ctx, &gs) - COOP_FORMS) + 1);
    lua_setfield(L, -2, "coop_form");
    return 1;
}
