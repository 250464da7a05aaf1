/* The small-M path of matmul and linear (shaders/gemv.comp): products of at most
 * LM_GEMV_MAX_ROWS rows, in blocks of up to LM_GEMV_MAX_M rows each reading B once. Chooses the form (by B's layout), the
 * columns per subgroup and the K split from the shape and the device. */
#define _POSIX_C_SOURCE 200809L   /* sysconf */
#include "ops.h"
#include <lauxlib.h>
#include <unistd.h>

#define GEMV_WG 256           /* threads per workgroup (fewer where the device allows fewer) */
#define GEMV_GPU_CORES 128    /* SMs assumed when the device does not say (an H200 has 132) */
#define GEMV_THREADS_PER_CORE 1024   /* threads per core to aim for: enough loads in flight */
#define GEMV_THREADS_PER_CPU 256     /* lavapipe: one workgroup per worker thread is plenty */
#define GEMV_MIN_ROW_BYTES 64        /* COLS form: bytes of a row of b one K slice reads at least */
#define GEMV_MAX_REDUCE 256          /* COLS form: K slices times rows, the serial adds at the end */

static uint32_t gemv_wg(const lm_context *ctx) {
    uint32_t wg = GEMV_WG;
    if (wg > ctx->props.limits.maxComputeWorkGroupInvocations) wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (wg > ctx->props.limits.maxComputeWorkGroupSize[0]) wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    uint32_t p = 1;
    while (p * 2 <= wg) p *= 2;
    return p;
}

static uint64_t threads_wanted(const lm_context *ctx) {
    if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return (uint64_t)(n >= 1 && n <= 4096 ? n : 1) * GEMV_THREADS_PER_CPU;
    }
    return (uint64_t)(ctx->sm_count ? ctx->sm_count : GEMV_GPU_CORES) * GEMV_THREADS_PER_CORE;
}

const char *lm_gemv_problem(const lm_context *ctx, const lm_matmul_args *g) {
    if (g->m < 1 || g->m > LM_GEMV_MAX_ROWS) return "M is not in 1..64";
    if (g->n < 1) return "N is 0";
    if (g->batch != 1) return "batched";
    if (g->trans_a) return "a is read transposed";
    if (g->trans_b) {
        uint32_t sg = ctx->subgroup_size, wg = gemv_wg(ctx);
        if (ctx->min_subgroup != ctx->max_subgroup || !ctx->full_subgroups || sg == 0 || wg % sg || wg / sg < 1)
            return "the device's subgroups vary in size";
    }
    return NULL;
}

static int aligned(const lm_tensor *t, uint32_t bytes) { return t == NULL || lm_tensor_address(t) % bytes == 0; }

void lm_record_gemv(lua_State *L, const lm_matmul_args *g, const char *op, uint32_t split) {
    lm_context *ctx = g->a->storage->ctx;
    lm_dtype dt = g->a->dtype;
    uint32_t es = (uint32_t)lm_dtype_size(dt);
    uint32_t lda = g->lda ? g->lda : g->k;
    uint32_t ldb = g->ldb ? g->ldb : (g->trans_b ? g->k : g->n);
    uint32_t wg = gemv_wg(ctx);
    uint64_t want = threads_wanted(ctx);
    int vec4 = lda % 4 == 0 && ldb % 4 == 0 && aligned(g->a, 4 * es) && aligned(g->b, 4 * es);
    uint32_t mr = g->m <= LM_GEMV_MAX_M ? g->m : LM_GEMV_MAX_M;
    uint32_t row_blocks = (g->m + mr - 1) / mr;
    uint32_t ks = 1, cpt = mr <= 8 ? 4 : 2, subs = 1, groups;
    uint32_t vecw = 0;   /* the shader's VECW: 0 single elements, 1 vec4s, 2 (float16 rows) 8 elements */
    if (g->trans_b) {
        vec4 = vec4 && g->k % 4 == 0;
        /* float16 rows in 16-byte loads (as float32's vec4): half the load instructions */
        vecw = vec4 ? 1u : 0u;
        if (vec4 && dt == LM_FLOAT16 && g->k % 8 == 0 && lda % 8 == 0 && ldb % 8 == 0 && aligned(g->a, 16) &&
            aligned(g->b, 16))
            vecw = 2;
        uint32_t sg = ctx->subgroup_size;
        subs = wg / sg;
        /* Fewer columns per subgroup when even the largest K split leaves the device
         * short of threads (more subgroups, each re-reading a's rows from cache). */
        while (cpt > 1 && (uint64_t)(g->n + cpt - 1) / cpt * row_blocks * subs * sg < want) cpt /= 2;
        uint64_t col_groups = (g->n + cpt - 1) / cpt;
        uint64_t k_units = vecw == 2 ? g->k / 8 : vec4 ? g->k / 4 : g->k;
        if (split) ks = split;
        else
            while (ks * 2 <= subs && col_groups * row_blocks * ks * sg < want && (uint64_t)ks * 2 * sg <= k_units) ks *= 2;
        if (ks > subs) ks = subs;
        uint32_t per_wg = subs / ks;
        groups = (uint32_t)((col_groups + per_wg - 1) / per_wg);
    } else {
        vec4 = vec4 && g->n % 4 == 0 && aligned(g->out, 4 * es);
        vecw = vec4 ? 1u : 0u;
        /* Threads of one K slice read a row's columns side by side: at least 64 bytes of
         * a row per slice (GEMV_MIN_ROW_BYTES) keeps every memory sector whole. */
        uint64_t col_threads = (g->n + 3) / 4;
        uint32_t min_ct = GEMV_MIN_ROW_BYTES / (vec4 ? 4 * es : es);
        if (min_ct < 1) min_ct = 1;
        uint32_t max_ks = wg / min_ct > 0 ? wg / min_ct : 1;
        /* Rows narrower than that (small N): split K further anyway, or a long K runs on
         * a handful of threads. */
        if (g->n < 4 * min_ct) max_ks = wg;
        /* The first slice adds the others' sums for each of its mr rows: keep that short. */
        while (max_ks > 1 && max_ks * mr > GEMV_MAX_REDUCE) max_ks /= 2;
        if (split) ks = split;
        else
            while (ks * 2 <= max_ks && col_threads * row_blocks * ks < want && ks * 2 <= g->k) ks *= 2;
        if (ks > wg) ks = wg;
        uint32_t ct = wg / ks;
        groups = (uint32_t)((g->n + 4ull * ct - 1) / (4ull * ct));
    }
    struct {
        uint64_t a, b, bias, c;
        uint32_t m, n, k, lda, ldb, groups_x, groups, row_blocks, bias_step;
    } pc = {
        .a = lm_tensor_address(g->a), .b = lm_tensor_address(g->b),
        .bias = g->bias ? lm_tensor_address(g->bias) : 0, .c = lm_tensor_address(g->out),
        .m = g->m, .n = g->n, .k = g->k, .lda = lda, .ldb = ldb, .row_blocks = row_blocks,
        .bias_step = g->bias_scalar ? 0 : 1,
    };
    uint64_t all = (uint64_t)groups * row_blocks;
    if (all > 0xffffffffULL) luaL_error(L, "%s: product too large (%I workgroups)", op, (LUAI_UACINT)all);
    pc.groups = (uint32_t)all;
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "gemv push constants");
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, pc.groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1,
        .shader = dt == LM_FLOAT16 ? LM_SH_GEMV_F16 : dt == LM_BFLOAT16 ? LM_SH_GEMV_BF16 : LM_SH_GEMV,
        .spec = { wg, mr, cpt, ks, g->trans_b ? 1u : 0u, vecw, subs, g->act },
        .full_subgroups = g->trans_b,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { g->a, g->b, g->bias }, .writes = { g->out },
    });
}
