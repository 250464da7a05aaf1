/* lumus.arange([start,] stop [, step] [, {dtype=}]): start, start + step, ... up to but
 * not including stop, ceil((stop - start) / step) elements (PyTorch's count rule).
 *
 * Integer start, stop and step (Lua integers) give int32 by default (PyTorch gives
 * int64, which lumus lacks); any float argument gives float32. int32 values are exact
 * integer arithmetic on the device; float32 value i is start + i step in double
 * precision rounded once to float32, computed on the host and uploaded (so it matches
 * the reference bit for bit; a device has no double precision to rely on). */
#include "ops.h"
#include "random.h"
#include "../storage.h"
#include <float.h>
#include <math.h>

#define ARANGE_WG 256

/* Largest magnitude accepted for integer arguments: differences stay within int64. */
#define INT_ARG_MAX ((lua_Integer)1 << 61)

static void record_int32(lua_State *L, lm_tensor *t, int64_t start, int64_t step) {
    lm_context *ctx = t->storage->ctx;
    struct { uint64_t dst, n; int64_t start, step; uint32_t groups_x; } pc = {
        .dst = lm_tensor_address(t), .n = (uint64_t)t->numel, .start = start, .step = step,
    };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, ((uint64_t)t->numel + ARANGE_WG - 1) / ARANGE_WG, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "arange", .any_dtype = 1, .shader = LM_SH_ARANGE_INT32, .spec = { ARANGE_WG, 0, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .writes = { t },
    });
}

/* The dtype option at argument arg: float32 or int32; absent gives dflt. */
static lm_dtype dtype_option(lua_State *L, int arg, lm_dtype dflt) {
    static const char *const known[] = { "dtype", NULL };
    static const char *const names[] = { "float32", "int32", NULL };
    lm_check_options(L, arg, known);
    lm_push_option(L, arg, "dtype");
    int absent = lua_isnil(L, -1);
    lua_pop(L, 1);
    if (absent) return dflt;
    return lm_option_choice(L, arg, "dtype", names, 0) == 0 ? LM_FLOAT32 : LM_INT32;
}

static int64_t too_many(lua_State *L, double n) {
    return lm_argerror(L, 1, "%f elements are too many for one tensor", (LUAI_UACNUMBER)n);
}

int lm_op_arange(lua_State *L) {
    int nargs = 0;
    while (nargs < 3 && lua_type(L, nargs + 1) == LUA_TNUMBER) nargs++;
    if (nargs == 0) lm_argerror(L, 1, "number expected (stop), got %s", luaL_typename(L, 1));
    int opts = nargs + 1;
    if (!lua_isnoneornil(L, opts) && !lua_istable(L, opts))
        lm_argerror(L, opts, "number or options table expected, got %s", luaL_typename(L, opts));
    if (lua_gettop(L) > opts) lm_argerror(L, opts + 1, "no more arguments expected");
    int integers = 1;
    for (int i = 1; i <= nargs; i++) integers &= lua_isinteger(L, i);
    lm_dtype dtype = dtype_option(L, opts, integers ? LM_INT32 : LM_FLOAT32);
    int a_start = nargs >= 2 ? 1 : 0, a_stop = nargs >= 2 ? 2 : 1, a_step = nargs == 3 ? 3 : 0;

    int64_t n;
    lm_context *ctx;
    if (dtype == LM_INT32) {
        if (!integers)
            lm_argerror(L, 1, "dtype int32 needs integer start, stop and step (Lua integers)");
        lua_Integer start = a_start ? lua_tointeger(L, a_start) : 0, stop = lua_tointeger(L, a_stop);
        lua_Integer step = a_step ? lua_tointeger(L, a_step) : 1;
        for (int i = 1; i <= nargs; i++)
            if (lua_tointeger(L, i) > INT_ARG_MAX || lua_tointeger(L, i) < -INT_ARG_MAX)
                lm_argerror(L, i, "must be within +-2^61");
        if (step == 0) lm_argerror(L, a_step, "step must be nonzero");
        if ((stop - start > 0 && step < 0) || (stop - start < 0 && step > 0))
            lm_argerror(L, a_step ? a_step : a_stop, "upper bound and lower bound inconsistent with step sign");
        lua_Integer sgn = step > 0 ? 1 : -1;
        n = (int64_t)((stop - start + step - sgn) / step);
        if (n == 0) lm_argerror(L, a_stop, "the range is empty (a lumus tensor has at least one element)");
        int64_t last = (int64_t)start + (n - 1) * (int64_t)step;   /* |n step| <= |stop - start| + |step| */
        if (start < INT32_MIN || start > INT32_MAX || last < INT32_MIN || last > INT32_MAX)
            lm_argerror(L, a_stop, "values from %I to %I do not fit int32", (LUAI_UACINT)start, (LUAI_UACINT)last);
        ctx = lm_context_get(L);
        lm_tensor *t = lm_push_tensor_dtype(L, ctx, LM_INT32, 1, &n);
        record_int32(L, t, start, step);
        return 1;
    }
    double start = a_start ? lua_tonumber(L, a_start) : 0.0, stop = lua_tonumber(L, a_stop);
    double step = a_step ? lua_tonumber(L, a_step) : 1.0;
    for (int i = 1; i <= nargs; i++)
        if (!isfinite(lua_tonumber(L, i))) lm_argerror(L, i, "must be finite, got %f", (LUAI_UACNUMBER)lua_tonumber(L, i));
    if (step == 0) lm_argerror(L, a_step, "step must be nonzero");
    double count = ceil((stop - start) / step);
    if (count < 0 || (stop - start > 0 && step < 0) || (stop - start < 0 && step > 0))
        lm_argerror(L, a_step ? a_step : a_stop, "upper bound and lower bound inconsistent with step sign");
    if (!(count >= 1)) lm_argerror(L, a_stop, "the range is empty (a lumus tensor has at least one element)");
    ctx = lm_context_get(L);
    if (count > (double)(ctx->max_allocation / 4u) || count > 9007199254740992.0) too_many(L, count);
    n = (int64_t)count;
    double last = start + (double)(n - 1) * step;
    if (fabs(start) > FLT_MAX || fabs(last) > FLT_MAX)
        lm_argerror(L, a_stop, "values from %f to %f overflow float32", (LUAI_UACNUMBER)start, (LUAI_UACNUMBER)last);
    float *values = lua_newuserdatauv(L, (size_t)n * sizeof(float), 0);
    for (int64_t i = 0; i < n; i++) values[i] = (float)(start + (double)i * step);
    lm_tensor *t = lm_push_tensor(L, ctx, 1, &n);
    lm_storage_write(L, t->storage, (VkDeviceSize)t->offset * 4u, values, (VkDeviceSize)n * sizeof(float));
    return 1;
}
