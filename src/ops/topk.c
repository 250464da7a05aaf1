/* lumus.topk(x, k [, {dim = -1, largest = true, sorted = true, out =, indices =}]) ->
 * values, indices: the k largest (or smallest) entries along dim, best first, with their
 * int32 1-based indices; ties go to the lower index, NaN counts as the largest value
 * (shaders/topk.comp: a workgroup per row, radix select then a bitonic sort of the k
 * kept). The result is always sorted (sorted = false is accepted, as any order is). */
#include "rows.h"

#define TOPK_WG 256
#define TOPK_MIN_CAP 64
#define TOPK_MAX_CAP 4096
/* Shared memory besides the keys: the histogram and the select's state. */
#define TOPK_FIXED_SHARED (256 * 4 + 16 * 4)

static const char *const keys[] = { "dim", "largest", "sorted", "out", "indices", NULL };

static uint32_t pow2_at_least(uint64_t v) { uint32_t p = 1; while (p < v) p <<= 1; return p; }

/* The largest k this device takes: 2 words per kept key in shared memory. */
static uint32_t max_k(const lm_context *ctx) {
    uint32_t cap = TOPK_MAX_CAP;
    while (cap > TOPK_MIN_CAP && (uint64_t)cap * 8 + TOPK_FIXED_SHARED > ctx->props.limits.maxComputeSharedMemorySize)
        cap /= 2;
    return cap;
}

int lm_op_topk(lua_State *L) {
    lm_check_tensor(L, 1);
    lua_Integer k = lm_check_integer(L, 2);
    lm_check_options(L, 3, keys);
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_context *ctx = x->storage->ctx;
    lm_check_float_input(L, x, ctx);
    int dim = lm_dim_option(L, 3, x, x->ndim - 1);
    int largest = lm_option_boolean(L, 3, "largest", 1);
    lm_option_boolean(L, 3, "sorted", 1);
    lm_dim_view v = lm_dim_view_of(L, x, dim);
    if (k < 1 || k > (lua_Integer)v.r)
        lm_argerror(L, 2, "k must be in 1..%d (the size of dim %d), got %I", (int)v.r, dim + 1, (LUAI_UACINT)k);
    uint32_t most = max_k(ctx);
    if (k > (lua_Integer)most) lm_argerror(L, 2, "k must be at most %d on this device, got %I", (int)most, (LUAI_UACINT)k);
    int64_t shape[LM_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[dim] = k;
    lua_settop(L, 3);
    lm_tensor *vals = lm_push_result(L, 3, "out", ctx, x->dtype, x->ndim, shape, x, 0);
    lm_tensor *idx = lm_push_result(L, 3, "indices", ctx, LM_INT32, x->ndim, shape, x, 0);
    if (lm_tensors_overlap(vals, idx)) lm_argerror(L, 3, "indices overlaps out");
    x = lm_check_tensor(L, 1);
    uint32_t cap = pow2_at_least((uint64_t)k);
    if (cap < TOPK_MIN_CAP) cap = TOPK_MIN_CAP;
    uint32_t wg = TOPK_WG;
    if (wg > ctx->props.limits.maxComputeWorkGroupInvocations) wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    struct { uint64_t x, vals, idx; uint32_t outer, d, inner, k, largest, groups_x; } pc = {
        .x = lm_tensor_address(x), .vals = lm_tensor_address(vals), .idx = lm_tensor_address(idx),
        .outer = v.outer, .d = v.r, .inner = v.inner, .k = (uint32_t)k, .largest = (uint32_t)largest,
    };
    lm_shader_id sh = x->dtype == LM_FLOAT16 ? LM_SH_TOPK_F16 : x->dtype == LM_BFLOAT16 ? LM_SH_TOPK_BF16 : LM_SH_TOPK_F32;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (uint64_t)v.outer * v.inner, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "topk", .any_dtype = 1, .shader = sh, .spec = { wg, cap },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x }, .writes = { vals, idx },
    });
    return 2;
}
