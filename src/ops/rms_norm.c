/* lumus.rms_norm(x [, weight] [, {eps = 1e-6, out =}]): RMSNorm over the last dimension,
 * y = x / sqrt(mean(x^2) + eps) * weight, float32 math for float32, float16 and bfloat16
 * x (weight of x's dtype, or nil for none). One kernel (shaders/rms_norm.comp): a
 * workgroup or subgroup per row as softmax's row form (rows.h), vec4 loads where the
 * row length is a multiple of 4. out may be x itself (in place). */
#include "rows.h"
#include <lauxlib.h>
#include <math.h>

static const char *const keys[] = { "eps", "out", NULL };

/* [dtype: float32, float16, bfloat16][vec4] */
static const lm_shader_id shaders[3][2] = {
    { LM_SH_RMS_NORM_F32_VEC1, LM_SH_RMS_NORM_F32_VEC4 },
    { LM_SH_RMS_NORM_F16_VEC1, LM_SH_RMS_NORM_F16_VEC4 },
    { LM_SH_RMS_NORM_BF16_VEC1, LM_SH_RMS_NORM_BF16_VEC4 },
};

#define RMS_NORM_DEFAULT_EPS 1e-6

int lm_op_rms_norm(lua_State *L) {
    lm_check_tensor(L, 1);
    /* rms_norm(x, {opts}) leaves weight out */
    if (lua_istable(L, 2) && !luaL_testudata(L, 2, LM_TENSOR_MT)) { lua_settop(L, 2); lua_pushnil(L); lua_insert(L, 2); }
    lm_opt_tensor(L, 2);
    lm_check_options(L, 3, keys);
    lua_settop(L, 3);
    lm_contiguous_inputs(L, 1, 2);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_context *ctx = x->storage->ctx;
    lm_check_float_input(L, x, ctx);
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1) lm_argerror(L, 1, "x must have a last dimension");
    int64_t d = x->shape[x->ndim - 1];
    if (d > 0x7fffffff) lm_argerror(L, 1, "the last dimension is too large (at most 2^31-1 elements)");
    lm_tensor *w = lm_opt_tensor(L, 2);
    if (w) {
        if (w->storage->ctx != ctx) lm_argerror(L, 2, "weight belongs to a different device");
        if (w->ndim != 1 || w->shape[0] != d)
            lm_argerror(L, 2, "weight must be 1-D of x's last dimension (%I), got %d-D", (LUAI_UACINT)d, w->ndim);
        if (w->dtype != x->dtype)
            lm_argerror(L, 2, "weight must have x's dtype (%s), got %s", lm_dtype_name(x->dtype), lm_dtype_name(w->dtype));
    }
    double eps = lm_option_number(L, 3, "eps", RMS_NORM_DEFAULT_EPS);
    if (!(eps >= 0) || !isfinite(eps)) lm_argerror(L, 3, "eps must be a finite number >= 0");
    lm_tensor *y = lm_push_result(L, 3, "out", ctx, x->dtype, x->ndim, x->shape, x, 1);
    x = lm_check_tensor(L, 1);
    w = lm_opt_tensor(L, 2);
    if (w && lm_tensors_overlap(y, w)) lm_argerror(L, 3, "out overlaps weight (an input of this op)");
    uint64_t rows = x->numel / (uint64_t)d;
    if (rows == 0) return 1;
    lm_row_plan c = lm_plan_softmax(ctx, d, 0);
    struct { uint64_t x, y, w, rows; uint32_t n, d, groups_x; float eps; } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y), .w = w ? lm_tensor_address(w) : 0,
        .rows = rows, .n = c.n, .d = (uint32_t)d, .eps = (float)eps,
    };
    int form = x->dtype == LM_FLOAT16 ? 1 : x->dtype == LM_BFLOAT16 ? 2 : 0;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (rows + c.rows_per_group - 1) / c.rows_per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "rms_norm", .any_dtype = 1, .shader = shaders[form][c.vec == 4], .spec = { c.wg, c.items, c.rows_per_group },
        .full_subgroups = c.rows_per_group > 1,
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x, w }, .writes = { y },
    });
    return 1;
}
