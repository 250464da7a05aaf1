/* matmul: shape checks, tile choice and dispatch of shaders/matmul.comp (also used by
 * linear.c). The kernel's tiling is described in the shader. */
#define _POSIX_C_SOURCE 200809L   /* sysconf */
#include "ops.h"
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

static int aligned16(const lm_tensor *t) { return t == NULL || lm_tensor_address(t) % 16 == 0; }

void lm_record_matmul(lua_State *L, const lm_matmul_args *g, const char *op) {
    lm_context *ctx = g->a->storage->ctx;
    mm_tile t = choose_tile(ctx, g->m, g->n, g->batch);
    int vec4 = g->k % 4 == 0 && g->n % 4 == 0 && aligned16(g->a) && aligned16(g->b) &&
               aligned16(g->bias) && aligned16(g->out) &&
               g->stride_a % 4 == 0 && g->stride_b % 4 == 0 && g->stride_out % 4 == 0;
    struct {
        uint64_t a, b, bias, c;
        uint64_t stride_a, stride_b, stride_c;
        uint32_t m, n, k, tiles_m, tiles_n, groups_x, batch, group_m, k_rotate;
    } pc = {
        .a = lm_tensor_address(g->a), .b = lm_tensor_address(g->b),
        .bias = g->bias ? lm_tensor_address(g->bias) : 0, .c = lm_tensor_address(g->out),
        .stride_a = g->stride_a, .stride_b = g->stride_b, .stride_c = g->stride_out,
        .m = g->m, .n = g->n, .k = g->k,
        .tiles_m = (g->m + t.bm - 1) / t.bm, .tiles_n = (g->n + t.bn - 1) / t.bn,
        .batch = g->batch, .group_m = MM_GROUP_M,
        /* K-order rotation (see the shader) spreads L2 requests on GPUs; CPU caches do
         * not care. */
        .k_rotate = ctx->mm_rotate == 1 ||
                    (ctx->mm_rotate == 0 && ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU),
    };
    uint64_t groups = (uint64_t)pc.tiles_m * pc.tiles_n * g->batch;
    if (groups > 0xffffffffULL) luaL_error(L, "%s: product too large (%I workgroups)", op, (LUAI_UACINT)groups);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .shader = LM_SH_MATMUL,
        .spec = { tile_threads(&t), t.bm, t.bn, t.bk, t.tm, t.tn, g->trans_b ? 1u : 0u, vec4 ? 1u : 0u },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { g->a, g->b, g->bias }, .writes = { g->out },
    });
}

/* ---- lumus.matmul(a, b [, opts]) ---- */

static void shape_of(const lm_tensor *t, char *buf, size_t len) { lm_shape_string(t->shape, t->ndim, buf, len); }

static void check_size(lua_State *L, int argn, int64_t v, const char *what) {
    if (v > 0x7fffffffLL) lm_argerror(L, argn, "%s too large (%I; at most 2^31-1)", what, (LUAI_UACINT)v);
}

int lm_op_matmul(lua_State *L) {
    static const char *const known[] = { "out", "transpose_a", "transpose_b", NULL };
    /* A b that is a plain tensor with its last two dimensions swapped (w:transpose(1, 2))
     * is read in place as that tensor with transpose_b flipped: bt, a stack handle. */
    lm_tensor bt, *b0 = luaL_testudata(L, 2, LM_TENSOR_MT);
    int b_swapped = 0;
    if (b0 && b0->storage && b0->storage->ctx && b0->ndim >= 2 && !lm_tensor_is_plain(b0)) {
        bt = *b0;
        int r = bt.ndim - 2, c = bt.ndim - 1;
        int64_t sh = bt.shape[r], st = bt.strides[r];
        bt.shape[r] = bt.shape[c]; bt.strides[r] = bt.strides[c];
        bt.shape[c] = sh; bt.strides[c] = st;
        b_swapped = lm_tensor_is_plain(&bt);
    }
    lm_contiguous_inputs(L, 1, b_swapped ? 1 : 2);
    lm_tensor *a = lm_check_tensor(L, 1);
    lm_tensor *b = lm_check_tensor(L, 2);
    lm_check_options(L, 3, known);
    if (lm_option_boolean(L, 3, "transpose_a", 0)) lm_argerror(L, 3, "transpose_a is not supported yet");
    int trans = lm_option_boolean(L, 3, "transpose_b", 0);
    int user_trans = trans;   /* messages describe b as the caller passed it */
    char as[256], bs[256];
    shape_of(a, as, sizeof as);
    shape_of(b, bs, sizeof bs);
    if (b_swapped) { bt.storage = b->storage; b = &bt; trans = !trans; }
    int64_t k = a->shape[a->ndim - 1];
    if (b->ndim < 2) {
        lm_argerror(L, 2, "b must be a matrix %s (or batched [..., %s]), got shape %s",
                        trans ? "[N, K]" : "[K, N]", trans ? "N, K" : "K, N", bs);
    }
    int64_t bk = trans ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    int64_t n = trans ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];
    if (bk != k) {
        lm_argerror(L, 2, "b's %s dimension must be K = %I (the last dimension of a, shape %s), got shape %s%s",
                        user_trans ? "last" : "first", (LUAI_UACINT)k, as, bs, user_trans ? " (transpose_b)" : "");
    }
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    int64_t m, batch = 1;
    if (b->ndim == 2) {
        /* a's leading dimensions are rows: [..., K] x [K, N] -> [..., N]. */
        m = a->numel / k;
        ndim = a->ndim;
        memcpy(shape, a->shape, sizeof(int64_t) * (size_t)ndim);
        shape[ndim - 1] = n;
    } else {
        /* Batched: [B..., M, K] x [B..., K, N] -> [B..., M, N], equal batch dimensions. */
        int same = a->ndim == b->ndim;
        for (int i = 0; same && i < b->ndim - 2; i++) same = a->shape[i] == b->shape[i];
        if (!same) {
            lm_argerror(L, 2, "batched b (shape %s) needs a with the same leading dimensions and [M, K] after them, got a of shape %s", bs, as);
        }
        m = a->shape[a->ndim - 2];
        for (int i = 0; i < b->ndim - 2; i++) batch *= b->shape[i];
        ndim = a->ndim;
        memcpy(shape, a->shape, sizeof(int64_t) * (size_t)ndim);
        shape[ndim - 1] = n;
    }
    check_size(L, 1, m, "row count of a");
    check_size(L, 1, k, "K");
    check_size(L, 2, n, "N");
    check_size(L, 2, batch, "batch count");
    lm_context *ctx = a->storage->ctx;
    if (b->storage->ctx != ctx) luaL_error(L, "matmul: tensors belong to different devices");
    lua_settop(L, 3);
    lm_operands in = { { a, b }, { "a", "b" } };
    lm_tensor *out = lm_push_out(L, 3, ctx, ndim, shape, &in, 0);
    if (b_swapped) bt.storage = lm_check_tensor(L, 2)->storage;   /* a finalizer may have freed it */
    lm_matmul_args g = {
        .a = a, .b = b, .out = out,
        .m = (uint32_t)m, .n = (uint32_t)n, .k = (uint32_t)k, .batch = (uint32_t)batch,
        .stride_a = batch > 1 ? (uint64_t)(m * k) : 0, .stride_b = batch > 1 ? (uint64_t)(k * n) : 0,
        .stride_out = batch > 1 ? (uint64_t)(m * n) : 0, .trans_b = trans,
    };
    lm_record_matmul(L, &g, "matmul");
    return 1;
}

/* tune.matmul(M, N, K [, tune]) -> the tile chosen for an M x K by K x N product;
 * `tune` ({bm=, bn=, bk=, tm=, tn=}, all five) fixes the tile for later calls, {} restores
 * the automatic choice (for bench/ sweeps); rotate = true/false forces the K-order
 * rotation, absent restores the automatic choice. */
int lm_op_matmul_config(lua_State *L) {
    static const char *const known[] = { "bm", "bn", "bk", "tm", "tn", "rotate", NULL };
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
            memcpy(ctx->mm_tile, v, sizeof v);
        } else {
            memset(ctx->mm_tile, 0, sizeof ctx->mm_tile);
        }
        ctx->mm_rotate = rotate;
    }
    mm_tile t = choose_tile(ctx, (uint64_t)m, (uint64_t)n, 1);
    lua_createtable(L, 0, 10);
    lua_pushinteger(L, t.bm); lua_setfield(L, -2, "bm");
    lua_pushinteger(L, t.bn); lua_setfield(L, -2, "bn");
    lua_pushinteger(L, t.bk); lua_setfield(L, -2, "bk");
    lua_pushinteger(L, t.tm); lua_setfield(L, -2, "tm");
    lua_pushinteger(L, t.tn); lua_setfield(L, -2, "tn");
    lua_pushinteger(L, tile_threads(&t)); lua_setfield(L, -2, "workgroup");
    lua_pushinteger(L, tile_shared_bytes(&t)); lua_setfield(L, -2, "shared_bytes");
    lua_pushboolean(L, k % 4 == 0 && n % 4 == 0); lua_setfield(L, -2, "vec4");
    lua_pushboolean(L, ctx->mm_rotate == 1 ||
                    (ctx->mm_rotate == 0 && ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU));
    lua_setfield(L, -2, "rotate");
    lua_pushinteger(L, (lua_Integer)(((uint64_t)m + t.bm - 1) / t.bm * (((uint64_t)n + t.bn - 1) / t.bn)));
    lua_setfield(L, -2, "workgroups");
    return 1;
}
