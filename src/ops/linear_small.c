/* linear's path for small models (shaders/linear_small.comp): products that the tiled
 * matmul kernel's blocks would leave most of the device idle (a frame's 128 x 512 x 512),
 * fused bias and activation; lumus.layer_norm_linear (LayerNorm over K in the same
 * kernel); tune.linear. Chooses the block from the shape and the device's cores. */
#define _POSIX_C_SOURCE 200809L   /* sysconf */
#include "ops.h"
#include "elementwise.h"
#include <lauxlib.h>
#include <string.h>
#include <unistd.h>

#define LS_WG 64                 /* threads per workgroup (the shader's 8 x 8 grid) */
#define LS_GPU_CORES 128         /* SMs assumed when the device does not say (an H200 has 132) */
#define LS_WAVES 2               /* workgroups per core wanted at once (latency hiding) */
#define LS_MATMUL_BLOCK 64       /* the tiled kernel's mid-size block: fewer than LS_GPU_WAVES per core, take the product */
#define LS_GPU_WAVES 2
/* Past this K the tiled kernel's deeper pipeline wins (H200: 200 x 2048 x 2048 ran 85 us
 * tiled, 96 small; 512 x 1024 x 1024 51 small, 65 tiled). */
#define LS_MAX_K 1024
/* layer_norm_linear normalizes in the kernel up to this K and N: each of a row block's
 * N / BN workgroups recomputes the rows' statistics over K (H200: 128 x 512 x 512 ran 16.7
 * us fused against 20.4 as three dispatches; 256 x 768 x 768 38 against 34). */
#define LS_LN_MAX_K 512
#define LS_LN_MAX_N 1024
#define LS_STAGE_FLOATS 4096     /* (BM + BN) x BK: the floats a step stages (64 registers a thread) */
#define LS_MAX_BK 256

/* Blocks (BM x BN) of y per workgroup, largest first. */
static const uint32_t BLOCKS[][2] = { { 32, 32 }, { 16, 32 }, { 16, 16 }, { 8, 16 }, { 8, 8 } };
#define LS_NBLOCKS (sizeof BLOCKS / sizeof BLOCKS[0])

static uint64_t device_cores(const lm_context *ctx) {
    if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
        static _Atomic long cpus;   /* asked once: sysconf reads a file each call */
        long n = cpus;
        if (n == 0) cpus = n = sysconf(_SC_NPROCESSORS_ONLN);
        return n >= 1 && n <= 4096 ? (uint64_t)n : 1;
    }
    return ctx->sm_count ? ctx->sm_count : LS_GPU_CORES;
}

static uint64_t blocks_of(uint64_t m, uint64_t n, size_t i) {
    return ((m + BLOCKS[i][0] - 1) / BLOCKS[i][0]) * ((n + BLOCKS[i][1] - 1) / BLOCKS[i][1]);
}

/* The largest block whose workgroups give every core LS_WAVES of them; else the
 * smallest (every workgroup then runs at once, each as short as it can be). */
static size_t choose_block(const lm_context *ctx, uint64_t m, uint64_t n) {
    uint64_t want = device_cores(ctx) * LS_WAVES;
    for (size_t i = 0; i < LS_NBLOCKS; i++)
        if (blocks_of(m, n, i) >= want) return i;
    return LS_NBLOCKS - 1;
}

const char *lm_linear_small_problem(const lm_context *ctx, const lm_matmul_args *g) {
    if (g->m < 1 || g->n < 1 || g->k < 1) return "an empty product";
    if (g->batch != 1 || g->trans_a || !g->trans_b) return "not a linear's product";
    if (ctx->props.limits.maxComputeWorkGroupInvocations < LS_WG || ctx->props.limits.maxComputeWorkGroupSize[0] < LS_WG)
        return "workgroup too large";
    return NULL;
}

/* Automatic: M past the small-M path's single block (LM_GEMV_MAX_M) and too few of the
 * tiled kernel's mid-size blocks to give every core one. tune.matmul forcing a path or
 * a tile leaves linear to matmul's kernels. */
int lm_linear_small_wanted(const lm_context *ctx, const lm_matmul_args *g) {
    if (ctx->linear_path) return ctx->linear_path == 1;
    if (ctx->mm_path != 0 || ctx->mm_tile[0]) return 0;
    if (g->m <= LM_GEMV_MAX_M || g->k > LS_MAX_K) return 0;
    uint64_t blocks = (((uint64_t)g->m + LS_MATMUL_BLOCK - 1) / LS_MATMUL_BLOCK) *
                      (((uint64_t)g->n + LS_MATMUL_BLOCK - 1) / LS_MATMUL_BLOCK);
    uint64_t waves = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 1 : LS_GPU_WAVES;
    return blocks < device_cores(ctx) * waves;
}

/* Whether layer_norm_linear runs as one dispatch of the small-model kernel. */
static int ln_fused(const lm_context *ctx, const lm_matmul_args *g) {
    if (lm_linear_small_problem(ctx, g)) return 0;
    if (ctx->linear_path) return ctx->linear_path == 1;
    return g->k <= LS_LN_MAX_K && g->n <= LS_LN_MAX_N && lm_linear_small_wanted(ctx, g);
}

void lm_record_linear_small(lua_State *L, const lm_matmul_args *g, const lm_ln_args *ln, const char *op) {
    lm_context *ctx = g->a->storage->ctx;
    lm_dtype dt = g->a->dtype;
    size_t bi = choose_block(ctx, g->m, g->n);
    uint32_t bm = BLOCKS[bi][0], bn = BLOCKS[bi][1];
    struct {
        uint64_t a, b, bias, c, ln_w, ln_b;
        uint32_t m, n, k, lda, ldb, tiles_n, groups_x, groups;
        float eps;
    } pc = {
        .a = lm_tensor_address(g->a), .b = lm_tensor_address(g->b),
        .bias = g->bias ? lm_tensor_address(g->bias) : 0, .c = lm_tensor_address(g->out),
        .ln_w = ln && ln->w ? lm_tensor_address(ln->w) : 0, .ln_b = ln && ln->b ? lm_tensor_address(ln->b) : 0,
        .m = g->m, .n = g->n, .k = g->k, .lda = g->lda ? g->lda : g->k, .ldb = g->ldb ? g->ldb : g->k,
        .tiles_n = (g->n + bn - 1) / bn, .eps = ln ? ln->eps : 0.0f,
    };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "linear_small push constants");
    uint32_t es = (uint32_t)lm_dtype_size(dt);
    int vec4 = g->k % 4 == 0 && pc.lda % 4 == 0 && pc.ldb % 4 == 0 && pc.a % (4u * es) == 0 && pc.b % (4u * es) == 0 &&
               pc.ln_w % (4u * es) == 0 && pc.ln_b % (4u * es) == 0;
    /* K per step: the largest power of two from 32 up to K (rounded up) that the staging
     * registers and the device's shared memory hold; at most 4 (vec4) or 1 load per
     * thread along a row of a step (the shader's indexing). */
    uint32_t bk = vec4 ? LS_MAX_BK : LS_WG;
    while (bk > 32 && (bk >= 2 * ((g->k + 31) / 32 * 32) || (bm + bn) * bk > LS_STAGE_FLOATS ||
                       (uint64_t)(bm + bn + 2) * bk * 4 + 4 * (2 * LS_WG + 2 * bm) > ctx->props.limits.maxComputeSharedMemorySize))
        bk /= 2;
    uint64_t groups = (uint64_t)((g->m + bm - 1) / bm) * pc.tiles_n;
    if (groups > 0xffffffffULL) luaL_error(L, "%s: product too large (%I workgroups)", op, (LUAI_UACINT)groups);
    pc.groups = (uint32_t)groups;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, pc.groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1,
        .shader = dt == LM_FLOAT16 ? LM_SH_LINEAR_SMALL_F16 : dt == LM_BFLOAT16 ? LM_SH_LINEAR_SMALL_BF16 : LM_SH_LINEAR_SMALL,
        .spec = { LS_WG, bm, bn, g->act, ln ? 1u : 0u, vec4 ? 1u : 0u, bk },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { g->a, g->b, g->bias, ln ? ln->w : NULL, ln ? ln->b : NULL }, .writes = { g->out },
    });
}

/* The elementwise op of each activation (LM_ACT_* order). */
static const lm_ew_op ACT_EW[] = { 0, LM_EW_RELU, LM_EW_GELU_ERF, LM_EW_GELU_TANH, LM_EW_SILU, LM_EW_TANH, LM_EW_SIGMOID };

void lm_record_linear(lua_State *L, const lm_matmul_args *args, uint32_t act, const char *op) {
    lm_context *ctx = args->a->storage->ctx;
    lm_matmul_args g = *args;
    if (lm_linear_small_problem(ctx, &g) == NULL && lm_linear_small_wanted(ctx, &g)) {
        g.act = act;
        lm_record_linear_small(L, &g, NULL, op);
    } else if (act && ctx->linear_path != 1 && ctx->mm_path == 0 && !ctx->mm_tile[0] && g.m >= 1 &&
               g.m <= LM_GEMV_MAX_M && lm_gemv_problem(ctx, &g) == NULL) {
        g.act = act;   /* what lm_record_matmul runs for these rows, with the activation */
        lm_record_gemv(L, &g, op, ctx->mm_split);
    } else {
        g.act = 0;
        lm_record_matmul(L, &g, op);
        if (act)
            lm_record_ew(L, &(lm_ew_call){
                .name = op, .op = ACT_EW[act], .reversed = ACT_EW[act], .dtype = g.out->dtype,
                .t = { g.out }, .out = g.out,
            });
    }
}

static const char *const ACTIVATIONS[] = { "none", "relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", NULL };

uint32_t lm_check_activation(lua_State *L, int argn) {
    return (uint32_t)lm_option_choice(L, argn, "activation", ACTIVATIONS, LM_ACT_NONE);
}

static lm_tensor *check_vector(lua_State *L, int idx, const char *name, int64_t d, const char *what) {
    lm_tensor *t = lm_opt_tensor(L, idx);
    if (t && !(t->ndim == 1 && t->shape[0] == d)) {
        char got[256];
        lm_shape_string(t->shape, t->ndim, got, sizeof got);
        lm_argerror(L, idx, "%s must have shape [%I] (%s), got %s", name, (LUAI_UACINT)d, what, got);
    }
    return t;
}

/* lumus.layer_norm_linear(x, ln_weight, ln_bias, weight [, bias] [, {eps =, activation =,
 * out =}]): act(layer_norm(x) weight^T + bias), in one dispatch where linear would take
 * the small-model kernel (or tune.linear forces it), else as layer_norm_forward into a
 * temporary and linear. ln_weight and ln_bias [K] or nil; weight [N, K]; bias [N] or nil. */
int lm_op_layer_norm_linear(lua_State *L) {
    /* weight comes after two arguments that may be nil: name the first one missing. */
    if (lua_gettop(L) < 4)
        lm_argerror(L, lua_gettop(L) + 1, "too few arguments: layer_norm_linear(x, ln_weight, ln_bias, weight [, bias] "
                    "[, opts]) takes the weight as argument 4 (ln_weight and ln_bias may be nil)");
    lm_contiguous_inputs(L, 1, 5);
    lm_tensor *x = lm_check_tensor(L, 1);
    static const char *const known[] = { "out", "activation", "eps", NULL };
    lm_check_options(L, 6, known);
    int64_t in = x->shape[x->ndim - 1];
    lm_tensor *lw = check_vector(L, 2, "ln_weight", in, "the last dimension of x");
    lm_tensor *lb = check_vector(L, 3, "ln_bias", in, "the last dimension of x");
    lm_tensor *w = lm_check_tensor(L, 4);
    lm_check_matmul_dtypes(L, x, 1, "x", w, 4, "weight");
    if (w->ndim != 2 || w->shape[1] != in) {
        char xs[256], ws[256];
        lm_shape_string(x->shape, x->ndim, xs, sizeof xs);
        lm_shape_string(w->shape, w->ndim, ws, sizeof ws);
        lm_argerror(L, 4, "weight must have shape [out_features, %I] (in_features = %I, the last dimension of x, shape %s), got %s",
                    (LUAI_UACINT)in, (LUAI_UACINT)in, xs, ws);
    }
    int64_t out_f = w->shape[0];
    lm_tensor *bias = check_vector(L, 5, "bias", out_f, "out_features, the first dimension of weight");
    const lm_tensor *same[] = { lw, lb, bias };
    const int same_arg[] = { 2, 3, 5 };
    for (int i = 0; i < 3; i++)
        if (same[i] && same[i]->dtype != x->dtype)
            lm_argerror(L, same_arg[i], "dtypes %s (x) and %s differ (convert with :to())", lm_dtype_name(x->dtype),
                        lm_dtype_name(same[i]->dtype));
    uint32_t act = lm_check_activation(L, 6);
    lua_Number e = lm_option_number(L, 6, "eps", 1e-5);
    if (!(e >= 0 && e <= 3.4028234663852886e38) || (e > 0 && (float)e == 0.0f))
        lm_argerror(L, 6, "eps must be a finite number >= 0 that float32 holds (and does not round to 0), got %f", e);
    int64_t rows = x->numel / (in ? in : 1);
    if (in < 1) lm_argerror(L, 1, "the last dimension of x (in_features) must be at least 1");
    if (rows > 0x7fffffffLL || in > 0x7fffffffLL || out_f > 0x7fffffffLL)
        lm_argerror(L, 1, "too large (rows, in_features and out_features at most 2^31-1)");
    int64_t shape[LM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = out_f;
    lm_context *ctx = x->storage->ctx;
    const lm_tensor *all[] = { lw, lb, w, bias };
    for (int i = 0; i < 4; i++)
        if (all[i] && all[i]->storage->ctx != ctx) luaL_error(L, "layer_norm_linear: tensors belong to different devices");
    lua_settop(L, 6);
    lm_operands in_ops = { { x, lw, lb, w, bias }, { "x", "ln_weight", "ln_bias", "weight", "bias" } };
    lm_push_option(L, 6, "out");
    int allocates = lua_isnil(L, -1);
    lua_pop(L, 1);
    lm_tensor *out = lm_push_out_dtype(L, 6, ctx, x->dtype, x->ndim, shape, &in_ops);
    if (allocates) {
        /* A finalizer may have freed an input meanwhile. (A given out is checked with the
         * inputs' liveness by lm_push_out, and nothing is allocated after that.) */
        x = lm_check_tensor(L, 1);
        lw = lm_opt_tensor(L, 2);
        lb = lm_opt_tensor(L, 3);
        w = lm_check_tensor(L, 4);
        bias = lm_opt_tensor(L, 5);
    }
    if (rows == 0) return 1;
    lm_matmul_args g = {
        .a = x, .b = w, .bias = bias, .out = out, .act = act,
        .m = (uint32_t)rows, .n = (uint32_t)out_f, .k = (uint32_t)in, .batch = 1, .trans_b = 1,
    };
    if (ln_fused(ctx, &g)) {
        lm_ln_args ln = { lw, lb, (float)e };
        lm_record_linear_small(L, &g, &ln, "layer_norm_linear");
        return 1;
    }
    /* Where linear takes another kernel, LayerNorm first, into a temporary. */
    lua_pushcfunction(L, lm_op_layer_norm_forward);
    for (int i = 1; i <= 3; i++) lua_pushvalue(L, i);
    lua_pushnumber(L, e);
    lua_call(L, 4, 1);
    g.a = lm_check_tensor(L, -1);
    g.b = lm_check_tensor(L, 4);   /* the call allocated: every tensor again */
    g.bias = lm_opt_tensor(L, 5);
    g.out = lm_check_tensor(L, 7);
    lm_record_linear(L, &g, act, "layer_norm_linear");
    lua_settop(L, 7);
    return 1;
}

/* tune.linear(M, N, K [, {path = "auto" | "small" | "matmul"}]) -> {path = the setting,
 * kernel = "small" | "gemv" | "matmul" (what an M x K input and an [N, K] weight run
 * now, with an activation), bm, bn (the small kernel's block), workgroups,
 * layer_norm_fused (layer_norm_linear is one dispatch)}. */
int lm_op_linear_config(lua_State *L) {
    static const char *const known[] = { "path", NULL };
    static const char *const paths[] = { "auto", "small", "matmul", NULL };
    lua_Integer m = lm_check_integer(L, 1), n = lm_check_integer(L, 2), k = lm_check_integer(L, 3);
    if (m < 1 || m > 0x7fffffff) lm_argerror(L, 1, "M must be in 1..2^31-1");
    if (n < 1 || n > 0x7fffffff) lm_argerror(L, 2, "N must be in 1..2^31-1");
    if (k < 1 || k > 0x7fffffff) lm_argerror(L, 3, "K must be in 1..2^31-1");
    lm_context *ctx = lm_context_get(L);
    if (lm_check_options(L, 4, known)) ctx->linear_path = lm_option_choice(L, 4, "path", paths, 0);
    lm_matmul_args g = { .m = (uint32_t)m, .n = (uint32_t)n, .k = (uint32_t)k, .batch = 1, .trans_b = 1 };
    const char *kernel = "matmul";
    if (lm_linear_small_problem(ctx, &g) == NULL && lm_linear_small_wanted(ctx, &g)) kernel = "small";
    else if (ctx->linear_path != 1 && ctx->mm_path == 0 && !ctx->mm_tile[0] && m <= LM_GEMV_MAX_M &&
             lm_gemv_problem(ctx, &g) == NULL)
        kernel = "gemv";
    size_t bi = choose_block(ctx, (uint64_t)m, (uint64_t)n);
    lua_createtable(L, 0, 5);
    lua_pushstring(L, paths[ctx->linear_path]); lua_setfield(L, -2, "path");
    lua_pushstring(L, kernel); lua_setfield(L, -2, "kernel");
    lua_pushinteger(L, BLOCKS[bi][0]); lua_setfield(L, -2, "bm");
    lua_pushinteger(L, BLOCKS[bi][1]); lua_setfield(L, -2, "bn");
    lua_pushinteger(L, (lua_Integer)blocks_of((uint64_t)m, (uint64_t)n, bi)); lua_setfield(L, -2, "workgroups");
    lua_pushboolean(L, ln_fused(ctx, &g)); lua_setfield(L, -2, "layer_norm_fused");
    return 1;
}
