/* lumus.scaled_dot_product_attention(q, k, v [, {causal =, mask =, scale =, out =}]):
 * softmax(q k^T * scale + mask) v over q [B, H, Tq, hd], k and v [B, H, Tk, hd] (k and v
 * may have size 1 in B or H, broadcast), in one fused kernel (shaders/attention.comp)
 * with float32 accumulation, the result [B, H, Tq, hd] in q's dtype. The causal mask is
 * aligned bottom-right (query i sees keys j <= i + Tk - Tq: a KV cache). A row whose
 * keys are all masked gives 0. Views whose last dimension has stride 1 (heads split by
 * view + transpose, narrow, expand) are read in place through their strides; others go
 * through a contiguous copy. When the row tiles cannot fill the device (decoding: few
 * query rows, long Tk), the key tiles are split over workgroups and a second pass
 * (attention_combine.comp) merges them. */
#include "rows.h"
#include <lauxlib.h>
#include <math.h>
#include <string.h>

static const char *const keys[] = { "causal", "mask", "scale", "out", NULL };

static const lm_shader_id main_shaders[3] = { LM_SH_ATTENTION_F32, LM_SH_ATTENTION_F16, LM_SH_ATTENTION_BF16 };
static const lm_shader_id flash_shaders[3] = { LM_SH_ATTENTION_FLASH_F32, LM_SH_ATTENTION_FLASH_F16,
                                               LM_SH_ATTENTION_FLASH_BF16 };
static const lm_shader_id flash_fixed_shaders[3] = { LM_SH_ATTENTION_FLASH_FIXED_F32, LM_SH_ATTENTION_FLASH_FIXED_F16,
                                                     LM_SH_ATTENTION_FLASH_FIXED_BF16 };
/* The tile compiled into the fixed variants: { workgroup, lanes, rows, keys }, and their
 * number of output vec4s per row and lane (hd 57..64 with 8 lanes). */
static const uint32_t flash_fixed_tile[4] = { 128, 8, 4, 4 };
#define FLASH_FIXED_DN4 2
static const lm_shader_id combine_shaders[3] = { LM_SH_ATTENTION_COMBINE_F32, LM_SH_ATTENTION_COMBINE_F16,
                                                 LM_SH_ATTENTION_COMBINE_BF16 };

#define ATTN_MAX_HD 256
#define ATTN_WG 128
#define ATTN_MAX_LANES 16      /* lanes per row group (a power of two within a subgroup) */
#define ATTN_COMBINE_WG 256
#define ATTN_GROUPS_CPU 8      /* workgroups a CPU device (lavapipe) runs at once */
#define ATTN_GROUPS_PER_SM 2   /* workgroups per multiprocessor before key tiles are split */
#define ATTN_GROUPS_GPU 256    /* the same for a GPU that does not say its SM count */
#define ATTN_MAX_SPLITS 128
/* llvmpipe ends an invocation's loops after about 65535 iterations in all (see
 * layer_norm.c): on a CPU device a workgroup takes at most this many key tiles (~50
 * iterations each), more splitting the keys. */
#define ATTN_CPU_MAX_TILES 256u
#define ATTN_CPU_MAX_SPLITS 4096u

typedef struct attn_plan {
    uint32_t wg, tc, rm, cn, bq, bk;
    uint32_t splits, tiles_per_split;
    uint32_t shared_bytes;
    uint32_t p_apart;       /* P in its own shared region (attention.comp's P_APART) */
    int fixed;              /* the flash kernel's tile is the compiled-in one (flash_fixed_shaders) */
    int full_subgroups;
} attn_plan;

/* tune.attention's forced register tile (0: automatic) and kernel (0 automatic, 1 the
 * row-tile kernel attention.comp, 2 the flash kernel where it fits), per thread as the
 * states are. */
static _Thread_local uint32_t forced_rm, forced_cn, forced_kernel;
/* tune.attention's forced flash tile { workgroup, lanes, rows per lane, keys per lane }
 * (all 0: automatic). */
static _Thread_local uint32_t forced_flash[4];
/* tune.attention's forced register prefetch of the next K/V tile in the flash and
 * tensor-core kernels (0 automatic: on, 1 on, 2 off). */
static _Thread_local uint32_t forced_prefetch;
/* tensor-core kernel's scores: 0 automatic, 1 in registers, 2 through shared memory */
static _Thread_local uint32_t forced_scores;
/* the register form's rows of accumulator components (attention_coop_regs.comp's
 * FIXED_ROWS): 0 automatic (read from the index tables: on the H200 the constant order was
 * 1-8% slower), 1 NVIDIA's order as constants where the device has it (tune.attention's
 * coop_fixed_rows = true), 3 NVIDIA's order required, NaN where the device lacks it
 * (coop_fixed_rows = "required": a probe for benches) */
static _Thread_local uint32_t forced_fixed_rows;
/* the register form's scale: 0 automatic (a multiply on every score first; folding it
 * into exp2's fma measured no faster), 1 folded outside edge tiles (FOLD_SCALE,
 * tune.attention's coop_fold_scale = true) */
static _Thread_local uint32_t forced_fold_scale;

static _Thread_local VkPhysicalDevice shuffle_phys;
static _Thread_local int shuffle_ok;

/* Does the device have subgroupShuffleXor in compute shaders? (cached per device) */
static int has_shuffle(const lm_context *ctx) {
    if (shuffle_phys != ctx->phys) {
        VkPhysicalDeviceSubgroupProperties sp = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES };
        VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sp };
        vkGetPhysicalDeviceProperties2(ctx->phys, &p2);
        shuffle_ok = (sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) && (sp.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
        shuffle_phys = ctx->phys;
    }
    return shuffle_ok;
}

/* Shared memory of attention.comp's layout, in bytes (see the shader). */
static uint32_t shared_bytes(uint32_t wg, uint32_t tc, uint32_t rm, uint32_t cn, uint32_t d, int apart) {
    uint32_t bq = wg / tc * rm, bk = tc * cn, d4 = (d + 3) / 4, qs = d4 + 1, ps = (bk + 3) / 4 + 1;
    if (apart) return 16u * (bq * qs + bk * qs + bk * d4 + bq * ps);
    uint32_t kp = bk * qs > bq * ps ? bk * qs : bq * ps;
    return 16u * (bq * qs + kp + bk * d4);
}

/* The tiles for head dimension d and Tq query rows: the largest register tiles whose
 * shared memory fits the device, in the widest workgroup that allows them (fewer query
 * rows per lane where there are few queries, as in decoding); returns 0 if none fits. */
static int plan_tiles(const lm_context *ctx, uint32_t d, uint64_t tq, attn_plan *c) {
    uint32_t max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    uint32_t smem = ctx->props.limits.maxComputeSharedMemorySize;
    c->full_subgroups = ctx->full_subgroups && ctx->max_subgroup >= 1;
    c->tc = 1;
    if (c->full_subgroups) {
        c->tc = ctx->min_subgroup < ATTN_MAX_LANES ? ctx->min_subgroup : ATTN_MAX_LANES;
        if (c->tc == 0 || (c->tc & (c->tc - 1)) != 0) c->tc = 1;
    }
    uint32_t min_wg = c->full_subgroups ? ctx->max_subgroup : 1;
    if (min_wg < c->tc) min_wg = c->tc;
    static const uint32_t tiles[][2] = { { 4, 4 }, { 4, 2 }, { 2, 4 }, { 2, 2 }, { 2, 1 }, { 1, 2 }, { 1, 1 } };
    static const uint32_t decode_tiles[][2] = { { 1, 4 }, { 1, 2 }, { 1, 1 } };
    for (uint32_t wg = ATTN_WG > min_wg ? ATTN_WG : min_wg; wg >= min_wg && wg >= 1; wg /= 2) {
        if (wg > max_wg) continue;
        int decode = tq <= wg / c->tc;
        size_t n = decode ? sizeof decode_tiles / sizeof decode_tiles[0] : sizeof tiles / sizeof tiles[0];
        for (size_t i = 0; i < n + 1; i++) {
            /* first the forced tile, if any (where it does not fit, the automatic ones) */
            if (i == 0 && !(forced_rm && forced_cn)) continue;
            uint32_t rm = i == 0 ? forced_rm : decode ? decode_tiles[i - 1][0] : tiles[i - 1][0];
            uint32_t cn = i == 0 ? forced_cn : decode ? decode_tiles[i - 1][1] : tiles[i - 1][1];
            uint32_t bytes = shared_bytes(wg, c->tc, rm, cn, d, 1);
            c->p_apart = bytes <= smem;
            if (!c->p_apart) bytes = shared_bytes(wg, c->tc, rm, cn, d, 0);
            if (bytes > smem) continue;
            c->wg = wg; c->rm = rm; c->cn = cn;
            c->bq = wg / c->tc * rm; c->bk = c->tc * cn;
            c->shared_bytes = bytes;
            return 1;
        }
        if (wg == 1) break;
    }
    return 0;
}

/* Splits of the key tiles over workgroups when the row tiles alone would leave the
 * device idle (decoding); each split takes at least one tile. */
static void plan_splits(const lm_context *ctx, uint64_t row_groups, uint64_t tk, attn_plan *c) {
    uint64_t want = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? ATTN_GROUPS_CPU
                  : ctx->sm_count ? (uint64_t)ctx->sm_count * ATTN_GROUPS_PER_SM : ATTN_GROUPS_GPU;
    uint64_t ktiles = (tk + c->bk - 1) / c->bk;
    uint64_t splits = 1;
    if (row_groups < want && ktiles >= 2) {
        splits = (want + row_groups - 1) / row_groups;
        if (splits > ktiles) splits = ktiles;
        if (splits > ATTN_MAX_SPLITS) splits = ATTN_MAX_SPLITS;
    }
    if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && ktiles > (uint64_t)ATTN_CPU_MAX_TILES * splits)
        splits = (ktiles + ATTN_CPU_MAX_TILES - 1) / ATTN_CPU_MAX_TILES;
    uint64_t tps = ktiles ? (ktiles + splits - 1) / splits : 1;
    if (tps == 0) tps = 1;
    splits = ktiles ? (ktiles + tps - 1) / tps : 1;
    c->splits = (uint32_t)splits;
    c->tiles_per_split = (uint32_t)tps;
}

/* Workgroups that fill the device before the row-tile kernel splits key tiles. */
static uint64_t groups_wanted(const lm_context *ctx) {
    return ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? ATTN_GROUPS_CPU
         : ctx->sm_count ? (uint64_t)ctx->sm_count * ATTN_GROUPS_PER_SM : ATTN_GROUPS_GPU;
}

/* Shared memory of attention_flash.comp's layout, in bytes (see the shader): V's rows
 * are dv4 = DN4 * TC vec4s. */
static uint32_t flash_shared_bytes(uint32_t br, uint32_t bc, uint32_t d, uint32_t dv4, int apart) {
    uint32_t dp = (d + 3) / 4 * 4, kt = dp * bc / 4, p = bc * br / 4;
    return 16u * (dp * br / 4 + (apart ? kt + p : (kt > p ? kt : p)) + bc * dv4);
}

/* The flash kernel's tiles for head dimension d and bh * tq query rows: row groups of TC
 * lanes within a subgroup, RM x CN register tiles (multiples of 4), among the candidates
 * whose Q^T, K^T, V and P^T fit shared memory (P^T over K^T where apart does not fit) and
 * whose output registers stay within 64 floats a lane: the first whose query blocks fill
 * the device (want workgroups), else the one with the most blocks (smaller blocks for
 * short prompts). Returns 0 where none fits (large hd, no full subgroups): the row-tile
 * kernel takes those. */
static int plan_flash(const lm_context *ctx, uint32_t d, uint64_t bh, uint64_t tq, uint64_t want, attn_plan *c) {
    if (!(ctx->full_subgroups && ctx->max_subgroup >= 1)) return 0;
    uint32_t max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    uint32_t smem = ctx->props.limits.maxComputeSharedMemorySize;
    uint32_t d4 = (d + 3) / 4;
    /* { workgroup, lanes per row group, rows per lane, keys per lane } */
    static const uint32_t cand[][4] = {
        { 128, 8, 4, 4 }, { 128, 16, 8, 4 }, { 128, 4, 4, 4 }, { 64, 8, 4, 4 }, { 64, 4, 4, 4 }, { 32, 8, 4, 4 }, { 32, 4, 4, 4 },
    };
    size_t n = sizeof cand / sizeof cand[0];
    int found = 0;
    uint64_t best_blocks = 0;
    for (size_t i = 0; i < n + 1; i++) {
        /* first the forced tile, if any (where it does not fit, the automatic ones) */
        if (i == 0 && !forced_flash[0]) continue;
        const uint32_t *f = i == 0 ? forced_flash : cand[i - 1];
        uint32_t wg = f[0], tc = f[1], rm = f[2], cn = f[3];
        if (tc == 0 || wg % tc != 0 || rm % 4 != 0 || cn % 4 != 0 || (wg / tc * rm) % 4 != 0) continue;
        if (wg > max_wg || tc > ctx->min_subgroup || wg < ctx->max_subgroup) continue;
        uint32_t dn4 = (d4 + tc - 1) / tc;
        if (rm * dn4 * 4 > 64) continue;
        uint32_t br = wg / tc * rm, bc = tc * cn;
        uint32_t bytes = flash_shared_bytes(br, bc, d, dn4 * tc, 1);
        int apart = bytes <= smem;
        if (!apart) bytes = flash_shared_bytes(br, bc, d, dn4 * tc, 0);
        if (bytes > smem) continue;
        uint64_t blocks = (tq + br - 1) / br * bh;
        if (found && blocks <= best_blocks) continue;
        c->wg = wg; c->tc = tc; c->rm = rm; c->cn = cn; c->bq = br; c->bk = bc;
        c->p_apart = (uint32_t)apart; c->shared_bytes = bytes; c->full_subgroups = 1;
        c->splits = 1; c->tiles_per_split = 1;
        /* a forced tile runs the specialized kernel, so that the two can be compared */
        c->fixed = i > 0 && memcmp(f, flash_fixed_tile, sizeof flash_fixed_tile) == 0 && dn4 == FLASH_FIXED_DN4;
        found = 1;
        best_blocks = blocks;
        if (i == 0 || blocks >= want) break;
    }
    return found;
}

/* The tensor-core kernel (attention_coop.comp): 4 subgroups of 32, 64 query rows. */
#define COOP_WG 128
#define COOP_ROWS 64
#define COOP_MIN_TQ 32   /* fewer query rows: the SIMT kernels (most of a 64-row block idle) */

/* tune.attention's forced strips per subgroup of the tensor-core kernel (0 automatic: 1). */
static _Thread_local uint32_t forced_strips;

/* 16-row strips per subgroup of the tensor-core kernel: its workgroup takes
 * COOP_ROWS * strips query rows per K/V tile load. */
static uint32_t coop_strips(void) { return forced_strips ? forced_strips : 1u; }

/* Shared memory of attention_coop.comp for bc keys per tile, in bytes (see the shader):
 * Q of the whole block staged through the K/V region, S/O and P for one pass of 64 rows. */
/* The scores in registers (shaders/attention_coop_regs.comp; one strip per subgroup) unless
 * tune.attention's coop_scores asks for shared memory or two strips. */
static int coop_regs(void) { return forced_scores != 2 && coop_strips() == 1; }
/* Query rows per workgroup of the register form (16 per subgroup): 64, or 128 when
 * tune.attention's coop_rows asks for it; the shared-memory form always takes 64 a strip. */
static _Thread_local uint32_t forced_coop_rows;
static uint32_t coop_rows(void) { return coop_regs() && forced_coop_rows ? forced_coop_rows : COOP_ROWS; }
static uint32_t coop_wg(void) { return coop_rows() / 16 * 32; }

static uint32_t coop_shared_bytes(uint32_t bc, uint32_t d) {
    uint32_t sk = d / 8 + 1, sp = bc / 8 + 1, ss = bc + 4, so = d + 4, br = COOP_ROWS * coop_strips();
    if (coop_regs()) {   /* one array of chunks: K and V (Q first), O's rows, the index tables */
        uint32_t rows = coop_rows(), sgs = coop_wg() / 32;
        uint32_t kvr = 2 * bc * sk > rows * sk ? 2 * bc * sk : rows * sk;
        uint32_t oc = rows * so / 4 > sgs * 128 ? rows * so / 4 : sgs * 128;
        return 16u * (kvr > oc ? kvr : oc);
    }
    uint32_t kv = 2 * bc * sk > br * sk ? 2 * bc * sk : br * sk;
    return 16u * kv + 16u * COOP_ROWS * sp + 4u * COOP_ROWS * (ss > so ? ss : so);
}

/* Keys per tile of the tensor-core kernel for head dimension d and tq query rows, or 0
 * where it does not apply (no cooperative matrices, subgroups other than 32, d not a
 * multiple of 16, too few rows unless forced, shared memory). The op checks alignment. */
static uint32_t plan_coop(const lm_context *ctx, uint32_t d, uint64_t tq) {
    /* The register form through KHR (with conversions) or NV; the shared form through NV. */
    int usable = coop_regs() ? ctx->coop_khr_conversions || ctx->coop_nv : ctx->coop_nv;
    if (!usable || ctx->min_subgroup != 32 || ctx->max_subgroup != 32 || d % 16 != 0) return 0;
    if (coop_wg() > ctx->props.limits.maxComputeWorkGroupInvocations || coop_wg() > ctx->props.limits.maxComputeWorkGroupSize[0])
        return 0;
    if (forced_kernel == 1 || forced_kernel == 2 || (forced_kernel != 3 && tq < COOP_MIN_TQ)) return 0;
    for (uint32_t bc = 64; bc >= 32; bc /= 2)
        if (coop_shared_bytes(bc, d) <= ctx->props.limits.maxComputeSharedMemorySize) return bc;
    return 0;
}

/* The whole plan: the flash kernel where its row blocks fill the device (prefill) and it
 * fits, else the row-tile kernel with key splits (decoding). Returns 0 (no kernel), 1
 * (row-tile kernel) or 2 (flash kernel). */
static int plan_attention(const lm_context *ctx, uint64_t bh, uint64_t tq, uint64_t tk, uint32_t d, attn_plan *c) {
    if (forced_kernel != 1 && plan_flash(ctx, d, bh, tq, groups_wanted(ctx), c)) {
        uint64_t blocks = (tq + c->bq - 1) / c->bq * bh;
        /* llvmpipe's loop budget (ATTN_CPU_MAX_TILES): a tile costs about dp + bc + 8 */
        uint64_t budget = (tk + c->bk - 1) / c->bk * ((d + 3) / 4 * 4 + c->bk + 8);
        int cpu_ok = ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU || budget < 50000;
        if (cpu_ok && (forced_kernel == 2 || blocks >= groups_wanted(ctx))) return 2;
    }
    if (!plan_tiles(ctx, d, tq, c)) return 0;
    plan_splits(ctx, (tq + c->bq - 1) / c->bq * bh, tk, c);
    return 1;
}

static const char *const tensor_names[] = { "q", "k", "v" };

/* The stride of dimension i as a push-constant word (0 for a dimension of size 1). */
static uint32_t stride_word(lua_State *L, int arg, const char *what, const lm_tensor *t, int i) {
    int64_t s = t->shape[i] == 1 ? 0 : t->strides[i];
    if (s > 0xffffffffLL) lm_argerror(L, arg, "%s is too large (strides past 2^32 elements)", what);
    return (uint32_t)s;
}

int lm_op_scaled_dot_product_attention(lua_State *L) {
    for (int i = 1; i <= 3; i++) lm_check_tensor(L, i);
    lm_check_options(L, 4, keys);
    lua_settop(L, 4);
    lm_push_option(L, 4, "mask");                                   /* slot 5: the mask, or nil */
    if (!lua_isnil(L, 5)) lm_option_tensor(L, 4, "mask");
    /* A bool mask is read by aligned 32-bit words, which stay inside lumus's own
     * allocations (256-byte aligned blocks) but not necessarily inside a host's buffer. */
    lm_tensor *m0 = lm_opt_tensor(L, 5);
    if (m0 && m0->dtype == LM_BOOL && m0->storage->external && ((m0->storage->address | m0->storage->bytes) & 3u)) {
        lua_pushcfunction(L, lm_op_copy);
        lua_pushvalue(L, 5);
        lua_call(L, 1, 1);
        lua_replace(L, 5);
    }
    /* Views whose rows are not contiguous go through a copy. */
    for (int i = 1; i <= 3; i++) {
        lm_tensor *t = lm_check_tensor(L, i);
        if (t->ndim == 4 && t->shape[3] > 1 && t->strides[3] != 1) {
            lua_pushcfunction(L, lm_op_contiguous);
            lua_pushvalue(L, i);
            lua_call(L, 1, 1);
            lua_replace(L, i);
        }
    }
    lm_tensor *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = lm_check_tensor(L, i + 1);
        if (t[i]->ndim != 4)
            lm_argerror(L, i + 1, "%s must be 4-D [B, H, T, hd], got %d-D", tensor_names[i], t[i]->ndim);
    }
    lm_context *ctx = t[0]->storage->ctx;
    lm_tensor *q = t[0], *k = t[1], *v = t[2];
    if (q->dtype != LM_FLOAT32 && q->dtype != LM_FLOAT16 && q->dtype != LM_BFLOAT16)
        lm_argerror(L, 1, "q must be float32, float16 or bfloat16, got %s", lm_dtype_name(q->dtype));
    if (q->dtype != LM_FLOAT32 && !ctx->narrow_storage)
        luaL_error(L, "%s: this device lacks 8/16-bit storage", lm_fname(L));
    for (int i = 1; i < 3; i++) {
        if (t[i]->storage->ctx != ctx) lm_argerror(L, i + 1, "%s belongs to a different device", tensor_names[i]);
        if (t[i]->dtype != q->dtype)
            lm_argerror(L, i + 1, "%s must have q's dtype (%s), got %s", tensor_names[i], lm_dtype_name(q->dtype),
                        lm_dtype_name(t[i]->dtype));
    }
    int64_t B = q->shape[0], H = q->shape[1], Tq = q->shape[2], hd = q->shape[3], Tk = k->shape[2];
    if (hd < 1 || hd > ATTN_MAX_HD)
        lm_argerror(L, 1, "q's head dimension must be in 1..%d, got %I", ATTN_MAX_HD, (LUAI_UACINT)hd);
    char qs[64], ks[64];
    for (int i = 1; i < 3; i++) {
        const lm_tensor *u = t[i];
        int ok = u->shape[3] == hd && u->shape[2] == Tk && (u->shape[0] == B || u->shape[0] == 1) &&
                 (u->shape[1] == H || u->shape[1] == 1);
        if (!ok) {
            lm_shape_string(q->shape, 4, qs, sizeof qs);
            lm_shape_string(u->shape, 4, ks, sizeof ks);
            lm_argerror(L, i + 1, "%s has shape %s; with q %s it must be [B or 1, H or 1, Tk, %I]%s", tensor_names[i], ks, qs,
                        (LUAI_UACINT)hd, i == 2 ? " with k's Tk" : "");
        }
    }
    int causal = lm_option_boolean(L, 4, "causal", 0);
    double scale = lm_option_number(L, 4, "scale", 1.0 / sqrt((double)hd));
    if (!isfinite(scale)) lm_argerror(L, 4, "scale must be a finite number");
    uint32_t mstride[4] = { 0, 0, 0, 0 };
    uint32_t mask_kind = 0;
    lm_tensor *mask = lm_opt_tensor(L, 5);
    if (mask) {
        int64_t full[4] = { B, H, Tq, Tk };
        if (mask->storage->ctx != ctx) lm_argerror(L, 4, "mask belongs to a different device");
        if (mask->dtype == LM_BOOL) mask_kind = 2;
        else if (mask->dtype == q->dtype) mask_kind = 4;
        else lm_argerror(L, 4, "mask must be bool or q's dtype (%s), got %s", lm_dtype_name(q->dtype), lm_dtype_name(mask->dtype));
        int fits = mask->ndim <= 4;
        for (int i = 0; fits && i < mask->ndim; i++) {
            int64_t s = mask->shape[mask->ndim - 1 - i], want = full[3 - i];
            if (s != want && s != 1) fits = 0;
        }
        if (!fits) {
            char ms[64], fs[64];
            lm_shape_string(mask->shape, mask->ndim, ms, sizeof ms);
            lm_shape_string(full, 4, fs, sizeof fs);
            lm_argerror(L, 4, "mask has shape %s, which does not broadcast to [B, H, Tq, Tk] = %s", ms, fs);
        }
        for (int i = 0; i < mask->ndim; i++)
            mstride[4 - mask->ndim + i] = stride_word(L, 4, "mask", mask, i);
    }
    if ((double)B * (double)H * (double)Tq >= 4294967296.0)
        lm_argerror(L, 1, "q has too many rows (B * H * Tq must stay below 2^32)");
    if (Tk > 0x7fffffff || Tq > 0x7fffffff) lm_argerror(L, 1, "sequences are too long (at most 2^31-1)");
    if (!has_shuffle(ctx)) luaL_error(L, "%s: this device lacks subgroup shuffle operations", lm_fname(L));
    attn_plan c = { 0 };
    int kernel = plan_attention(ctx, (uint64_t)(B * H), (uint64_t)Tq, (uint64_t)Tk, (uint32_t)hd, &c);
    if (!kernel)
        lm_argerror(L, 1, "head dimension %I needs more shared memory than this device has", (LUAI_UACINT)hd);
    uint64_t qtiles = ((uint64_t)Tq + c.bq - 1) / c.bq;
    if (c.splits > ATTN_CPU_MAX_SPLITS)
        lm_argerror(L, 2, "k is too long for this CPU device (%I keys)", (LUAI_UACINT)Tk);

    int64_t oshape[4] = { B, H, Tq, hd };
    lm_operands in = { .t = { q, k, v, mask }, .name = { "q", "k", "v", "mask" } };
    lm_push_out_dtype(L, 4, ctx, q->dtype, 4, oshape, &in);         /* slot 6: the result */
    uint64_t rows = (uint64_t)(B * H * Tq);
    lm_tensor *part = NULL;
    if (c.splits > 1 && rows > 0) {
        int64_t n = (int64_t)((uint64_t)c.splits * rows * (uint64_t)(hd + 2));
        part = lm_push_tensor(L, ctx, 1, &n);                        /* slot 7: partial results */
    }
    /* Allocations may have run finalizers: check everything again. */
    q = lm_check_tensor(L, 1); k = lm_check_tensor(L, 2); v = lm_check_tensor(L, 3);
    mask = lm_opt_tensor(L, 5);
    lm_tensor *out = lm_check_tensor(L, 6);
    if (rows == 0 || hd == 0) { lua_settop(L, 6); return 1; }

    struct {
        uint64_t q, k, v, dst, mask;
        uint32_t qsb, qsh, qst, ksb, ksh, kst, vsb, vsh, vst;
        uint32_t msb, msh, mst, msk;
        uint32_t H, BH, Tq, Tk;
        uint32_t splits, tiles_per_split, groups_x, flags;
        float scale;
    } pc = {
        .q = lm_tensor_address(q), .k = lm_tensor_address(k), .v = lm_tensor_address(v),
        .dst = part ? lm_tensor_address(part) : lm_tensor_address(out),
        .mask = mask ? lm_tensor_address(mask) : 0,
        .msb = mstride[0], .msh = mstride[1], .mst = mstride[2], .msk = mstride[3],
        .H = (uint32_t)H, .BH = (uint32_t)(B * H), .Tq = (uint32_t)Tq, .Tk = (uint32_t)Tk,
        .splits = c.splits, .tiles_per_split = c.tiles_per_split,
        .flags = (causal ? 1u : 0u) | mask_kind, .scale = (float)scale,
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "attention push constants");
    uint32_t *sw[3][3] = { { &pc.qsb, &pc.qsh, &pc.qst }, { &pc.ksb, &pc.ksh, &pc.kst }, { &pc.vsb, &pc.vsh, &pc.vst } };
    lm_tensor *qkv[3] = { q, k, v };
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) *sw[i][j] = stride_word(L, i + 1, tensor_names[i], qkv[i], j);
    /* vec4 loads of q, k, v: every row starts 4-element aligned */
    int vec4 = hd % 4 == 0;
    for (int i = 0; i < 3 && vec4; i++) {
        if (lm_tensor_address(qkv[i]) % (4u * lm_dtype_size(q->dtype)) != 0) vec4 = 0;
        for (int j = 0; j < 3; j++) if (*sw[i][j] % 4 != 0) vec4 = 0;
    }
    if (vec4) pc.flags |= 8u;
    int form = q->dtype == LM_FLOAT16 ? 1 : q->dtype == LM_BFLOAT16 ? 2 : 0;
    /* float16 on tensor cores: every row, head and batch start a whole 16-byte chunk */
    uint32_t coop_bc = q->dtype == LM_FLOAT16 && !part ? plan_coop(ctx, (uint32_t)hd, (uint64_t)Tq) : 0;
    for (int i = 0; i < 3 && coop_bc; i++) {
        if (lm_tensor_address(qkv[i]) % 16 != 0) coop_bc = 0;
        for (int j = 0; j < 3; j++) if (*sw[i][j] % 8 != 0) coop_bc = 0;
    }
    if (coop_bc) {
        uint64_t br = coop_regs() ? coop_rows() : (uint64_t)COOP_ROWS * coop_strips();
        uint64_t blocks = ((uint64_t)Tq + br - 1) / br * (uint64_t)(B * H);
        uint32_t cgy;
        pc.groups_x = lm_grid(L, ctx, blocks, &cgy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "scaled_dot_product_attention", .any_dtype = 1,
            .shader = !coop_regs() ? LM_SH_ATTENTION_COOP
                    : ctx->coop_khr_conversions ? LM_SH_ATTENTION_COOP_REGS_KHR : LM_SH_ATTENTION_COOP_REGS,
            .spec = { coop_wg(), coop_bc, (uint32_t)hd, forced_prefetch != 2, coop_strips(),
                      forced_fixed_rows == 1 ? 1u : forced_fixed_rows == 3 ? 2u : 0u,
                      forced_fold_scale == 1 },
            .full_subgroups = 1,
            .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = cgy,
            .reads = { q, k, v, mask }, .writes = { out },
        });
        lua_settop(L, 6);
        return 1;
    }
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, qtiles * (uint64_t)(B * H) * c.splits, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "scaled_dot_product_attention", .any_dtype = 1, .shader = kernel == 2 ? (c.fixed ? flash_fixed_shaders[form] : flash_shaders[form]) : main_shaders[form],
        .spec = { c.wg, c.tc, c.rm, c.cn, (uint32_t)hd, c.p_apart, kernel == 2 && forced_prefetch != 2 },
        .full_subgroups = c.full_subgroups,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { q, k, v, mask }, .writes = { part ? part : out },
    });
    if (part) {
        struct { uint64_t part, out, rows; uint32_t d, splits, groups_x, pad; } cc = {
            .part = lm_tensor_address(part), .out = lm_tensor_address(out), .rows = rows,
            .d = (uint32_t)hd, .splits = c.splits,
        };
        cc.groups_x = lm_grid(L, ctx, (rows * (uint64_t)hd + ATTN_COMBINE_WG - 1) / ATTN_COMBINE_WG, &gy);
        lm_record_dispatch(L, ctx, &(lm_launch){
            .op = "scaled_dot_product_attention", .any_dtype = 1, .shader = combine_shaders[form],
            .spec = { ATTN_COMBINE_WG },
            .push = &cc, .push_bytes = sizeof cc, .groups_x = cc.groups_x, .groups_y = gy,
            .reads = { part }, .writes = { out },
        });
    }
    lua_settop(L, 6);   /* the partials are collected once the stream is done with them */
    return 1;
}

/* tune.attention(bh, tq, tk, hd [, {rows_per_lane =, keys_per_lane =, kernel =, flash_tile =, prefetch =,
 * coop_strips =, coop_scores =, coop_rows =, coop_fixed_rows =, coop_fold_scale =}]) -> {kernel =, workgroup =, lanes =, rows_per_lane =, keys_per_lane =, block_q =, block_k =,
 * splits =, tiles_per_split =, shared_bytes =, p_apart =, fixed_tile =, coop =, prefetch =, coop_strips =,
 * coop_scores =, coop_rows =, coop_fixed_rows =, coop_fold_scale =}: the kernel plan on this device for
 * B * H = bh heads of tq queries over tk keys. A tune table forces the row-tile kernel's
 * register tile (both 1..8; the row-tile kernel unless kernel is given) of later calls
 * where it fits, the kernel ("rows", "flash" where it
 * fits, "coop" where it applies, "auto") and the flash kernel's tile ({workgroup, lanes, rows_per_lane,
 * keys_per_lane}, where it fits) and whether the flash and tensor-core kernels load the next
 * K/V tile into registers before the current tile's arithmetic (prefetch, default true);
 * {} returns to the automatic choice. */
int lm_op_attention_config(lua_State *L) {
    lua_Integer a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = lm_check_integer(L, i + 1);
        if (a[i] < 1 || a[i] > 0x7fffffff) lm_argerror(L, i + 1, "must be in 1..2^31-1");
    }
    if (a[3] > ATTN_MAX_HD) lm_argerror(L, 4, "hd must be at most %d", ATTN_MAX_HD);
    static const char *const known[] = { "rows_per_lane", "keys_per_lane", "kernel", "flash_tile", "prefetch", "coop_strips", "coop_scores", "coop_rows",
                                        "coop_fixed_rows", "coop_fold_scale", NULL };
    if (lm_check_options(L, 5, known)) {
        lua_Integer rm = lm_option_integer(L, 5, "rows_per_lane", 0), cn = lm_option_integer(L, 5, "keys_per_lane", 0);
        if (rm < 0 || rm > 8 || cn < 0 || cn > 8) lm_argerror(L, 5, "rows_per_lane and keys_per_lane must be in 0..8");
        if ((rm == 0) != (cn == 0)) lm_argerror(L, 5, "give both rows_per_lane and keys_per_lane (or neither)");
        static const char *const kernels[] = { "auto", "rows", "flash", "coop", NULL };
        lua_getfield(L, 5, "kernel");
        int kind = 0;
        if (!lua_isnil(L, -1)) {
            const char *kname = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            while (kernels[kind] && strcmp(kernels[kind], kname) != 0) kind++;
            if (!kernels[kind]) lm_argerror(L, 5, "kernel must be \"auto\", \"rows\", \"flash\" or \"coop\"");
        }
        lua_pop(L, 1);
        uint32_t ft[4] = { 0, 0, 0, 0 };
        lua_getfield(L, 5, "flash_tile");
        if (!lua_isnil(L, -1)) {
            static const char *const what = "flash_tile must be {workgroup, lanes, rows_per_lane, keys_per_lane}: "
                                            "powers of two, the workgroup up to 1024, the others up to 32";
            if (!lua_istable(L, -1) || lua_rawlen(L, -1) != 4) lm_argerror(L, 5, "%s", what);
            for (int i = 0; i < 4; i++) {
                lua_rawgeti(L, -1, i + 1);
                int isnum = 0;
                lua_Integer x = lua_tointegerx(L, -1, &isnum);
                if (!isnum || x < 1 || x > (i == 0 ? 1024 : 32) || (x & (x - 1)) != 0) lm_argerror(L, 5, "%s", what);
                ft[i] = (uint32_t)x;
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
        lua_getfield(L, 5, "prefetch");
        uint32_t pf = 0;
        if (!lua_isnil(L, -1)) {
            if (!lua_isboolean(L, -1)) lm_argerror(L, 5, "prefetch must be a boolean");
            pf = lua_toboolean(L, -1) ? 1u : 2u;
        }
        lua_pop(L, 1);
        forced_prefetch = pf;
        lua_Integer cs = lm_option_integer(L, 5, "coop_strips", 0);
        if (cs != 0 && cs != 1 && cs != 2) lm_argerror(L, 5, "coop_strips must be 1 or 2");
        forced_strips = (uint32_t)cs;
        lua_getfield(L, 5, "coop_scores");
        uint32_t sc = 0;
        if (!lua_isnil(L, -1)) {
            const char *sname = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            if (strcmp(sname, "registers") == 0) sc = 1;
            else if (strcmp(sname, "shared") == 0) sc = 2;
            else if (strcmp(sname, "auto") != 0) lm_argerror(L, 5, "coop_scores must be \"auto\", \"registers\" or \"shared\"");
        }
        lua_pop(L, 1);
        forced_scores = sc;
        lua_Integer cr = lm_option_integer(L, 5, "coop_rows", 0);
        if (cr != 0 && cr != 64 && cr != 128) lm_argerror(L, 5, "coop_rows must be 64 or 128");
        forced_coop_rows = (uint32_t)cr;
        lua_getfield(L, 5, "coop_fixed_rows");
        uint32_t fr = 0;
        if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "required") == 0) fr = 3;
        else if (!lua_isnil(L, -1)) {
            if (!lua_isboolean(L, -1)) lm_argerror(L, 5, "coop_fixed_rows must be a boolean or \"required\"");
            fr = lua_toboolean(L, -1) ? 1u : 2u;
        }
        lua_pop(L, 1);
        forced_fixed_rows = fr;
        lua_getfield(L, 5, "coop_fold_scale");
        uint32_t fs = 0;
        if (!lua_isnil(L, -1)) {
            if (!lua_isboolean(L, -1)) lm_argerror(L, 5, "coop_fold_scale must be a boolean");
            fs = lua_toboolean(L, -1) ? 1u : 2u;
        }
        lua_pop(L, 1);
        forced_fold_scale = fs;
        memcpy(forced_flash, ft, sizeof ft);
        forced_rm = (uint32_t)rm;
        forced_cn = (uint32_t)cn;
        /* a forced register tile is the row-tile kernel's unless a kernel is named */
        forced_kernel = kind == 0 && rm != 0 ? 1u : (uint32_t)kind;
    }
    lm_context *ctx = lm_context_get(L);
    attn_plan c = { 0 };
    int kernel = plan_attention(ctx, (uint64_t)a[0], (uint64_t)a[1], (uint64_t)a[2], (uint32_t)a[3], &c);
    if (!kernel) luaL_error(L, "%s: no tiles fit this device", lm_fname(L));
    lua_createtable(L, 0, 11);
    lua_pushstring(L, kernel == 2 ? "flash" : "rows"); lua_setfield(L, -2, "kernel");
    lua_pushinteger(L, c.wg); lua_setfield(L, -2, "workgroup");
    lua_pushinteger(L, c.tc); lua_setfield(L, -2, "lanes");
    lua_pushinteger(L, c.rm); lua_setfield(L, -2, "rows_per_lane");
    lua_pushinteger(L, c.cn); lua_setfield(L, -2, "keys_per_lane");
    lua_pushinteger(L, c.bq); lua_setfield(L, -2, "block_q");
    lua_pushinteger(L, c.bk); lua_setfield(L, -2, "block_k");
    lua_pushinteger(L, c.splits); lua_setfield(L, -2, "splits");
    lua_pushinteger(L, c.tiles_per_split); lua_setfield(L, -2, "tiles_per_split");
    lua_pushinteger(L, c.shared_bytes); lua_setfield(L, -2, "shared_bytes");
    lua_pushboolean(L, (int)c.p_apart); lua_setfield(L, -2, "p_apart");
    lua_pushboolean(L, kernel == 2 && c.fixed); lua_setfield(L, -2, "fixed_tile");
    /* float16 inputs in whole 16-byte chunks take the tensor-core kernel instead */
    uint32_t cbc = plan_coop(ctx, (uint32_t)a[3], (uint64_t)a[1]);
    lua_pushboolean(L, cbc != 0); lua_setfield(L, -2, "coop");
    lua_pushboolean(L, forced_prefetch != 2); lua_setfield(L, -2, "prefetch");
    lua_pushinteger(L, coop_strips()); lua_setfield(L, -2, "coop_strips");
    lua_pushstring(L, coop_regs() ? "registers" : "shared"); lua_setfield(L, -2, "coop_scores");
    lua_pushinteger(L, coop_rows()); lua_setfield(L, -2, "coop_rows");
    if (forced_fixed_rows == 3) lua_pushstring(L, "required");
    else lua_pushboolean(L, forced_fixed_rows == 1);
    lua_setfield(L, -2, "coop_fixed_rows");
    lua_pushboolean(L, forced_fold_scale == 1); lua_setfield(L, -2, "coop_fold_scale");
    return 1;
}
