/* lumus.rope(x [, {base = 10000, offset = 0, interleaved = false, out =}]): rotary
 * position embedding of x [..., T, hd] (hd even), the row at index t of dim -2 at
 * position offset + t: pairs (j, j + hd/2) (rotate-half, GPT-NeoX/Llama) or, with
 * interleaved, (2j, 2j + 1) (GPT-J) turn by (offset + t) * base^(-2j/hd). One kernel
 * (shaders/rope.comp) computes the angles itself (no cos/sin tables). A view as x is read
 * through a contiguous copy; out may be x itself (in place). */
#include "rows.h"
#include <lauxlib.h>
#include <math.h>

static const char *const keys[] = { "base", "offset", "interleaved", "out", NULL };

static const lm_shader_id shaders[3] = { LM_SH_ROPE_F32, LM_SH_ROPE_F16, LM_SH_ROPE_BF16 };

#define ROPE_WG 128
#define ROPE_ROWS_PER_THREAD 8
#define ROPE_MAX_POSITION 16777216.0   /* 2^24: positions are exact float32 integers below */

int lm_op_rope(lua_State *L) {
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, keys);
    lua_settop(L, 2);
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_context *ctx = x->storage->ctx;
    lm_check_float_input(L, x, ctx);
    if (x->ndim < 2) lm_argerror(L, 1, "x must be at least 2-D ([..., T, hd]), got %d-D", x->ndim);
    int64_t d = x->shape[x->ndim - 1], t = x->shape[x->ndim - 2];
    if (d % 2 != 0) lm_argerror(L, 1, "x's last dimension (hd) must be even, got %I", (LUAI_UACINT)d);
    if (d > 0x7fffffff) lm_argerror(L, 1, "x's last dimension is too large");
    double base = lm_option_number(L, 2, "base", 10000.0);
    if (!(base > 0) || !isfinite(base)) lm_argerror(L, 2, "base must be a finite number > 0");
    lua_Integer offset = lm_option_integer(L, 2, "offset", 0);
    if (offset < 0) lm_argerror(L, 2, "offset must be >= 0, got %I", (LUAI_UACINT)offset);
    if ((double)offset + (double)t > ROPE_MAX_POSITION)
        lm_argerror(L, 2, "positions must stay below 2^24 (offset %I + T %I)", (LUAI_UACINT)offset, (LUAI_UACINT)t);
    int interleaved = lm_option_boolean(L, 2, "interleaved", 0);
    lm_tensor *y = lm_push_result(L, 2, "out", ctx, x->dtype, x->ndim, x->shape, x, 1);
    x = lm_check_tensor(L, 1);
    if (x->numel == 0) return 1;
    uint64_t rows = (uint64_t)x->numel / (uint64_t)d;
    double r = pow(base, -2.0 / (double)d);
    float r_hi = (float)r;
    struct { uint64_t x, y, rows; uint32_t half_d, t, offset, groups_x; float r_hi, r_lo; uint32_t interleaved; } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y), .rows = rows,
        .half_d = (uint32_t)(d / 2), .t = (uint32_t)t, .offset = (uint32_t)offset,
        .r_hi = r_hi, .r_lo = (float)(r - (double)r_hi), .interleaved = (uint32_t)interleaved,
    };
    uint64_t threads = (rows + ROPE_ROWS_PER_THREAD - 1) / ROPE_ROWS_PER_THREAD * (uint64_t)(d / 2);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (threads + ROPE_WG - 1) / ROPE_WG, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "rope", .any_dtype = 1, .shader = shaders[x->dtype == LM_FLOAT16 ? 1 : x->dtype == LM_BFLOAT16 ? 2 : 0],
        .spec = { ROPE_WG, ROPE_ROWS_PER_THREAD },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { x }, .writes = { y },
    });
    return 1;
}
