/* layer_norm_forward: argument checks, kernel variant choice and dispatch.
 * The kernel forms are described in shaders/layer_norm.comp. */
#include "ops.h"
#include <lauxlib.h>
#include <math.h>
#include <string.h>

/* Vectors per thread the group form aims for: on the H200, 2 was fastest for rows of up
 * to 256 vectors (D <= 1024) and 4 above (bench/layer_norm.lua sweeps, BENCHMARKS.md). */
#define LN_ITEMS_SHORT 2
#define LN_ITEMS_LONG 4
#define LN_SHORT_ROW 256
/* On a CPU device (lavapipe) a workgroup runs on one thread and each barrier costs a
 * context switch: fewer, wider threads per row won 2x there (1024x768). */
#define LN_ITEMS_CPU 16
#define LN_MAX_ITEMS 8         /* most vectors per thread kept in registers: more spilled
                                  * on the H200 (D = 65536 ran at 58% of copy with 16) */
#define LN_STREAM_ITEMS 8      /* vectors per thread the streaming form keeps */
#define LN_SUBGROUP_ITEMS 4    /* rows up to this many vectors per lane use a subgroup */
#define LN_SUBGROUP_WG 256

typedef struct ln_config {
    lm_shader_id shader;
    uint32_t wg, items, rows_per_group, vec;
    const char *variant;
} ln_config;

static uint32_t pow2_at_least(uint32_t v) { uint32_t p = 1; while (p < v) p <<= 1; return p; }

static ln_config choose(const lm_context *ctx, int64_t d) {
    ln_config c = { 0 };
    c.vec = d % 4 == 0 ? 4 : 1;
    uint32_t n = (uint32_t)(d / c.vec);
    uint32_t max_wg = ctx->props.limits.maxComputeWorkGroupInvocations;
    if (max_wg > ctx->props.limits.maxComputeWorkGroupSize[0]) max_wg = ctx->props.limits.maxComputeWorkGroupSize[0];
    if (max_wg > 1024) max_wg = 1024;
    uint32_t sg = ctx->min_subgroup ? ctx->min_subgroup : 1;
    uint32_t target = ctx->ln_items_target ? ctx->ln_items_target
                    : ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? LN_ITEMS_CPU
                    : n <= LN_SHORT_ROW ? LN_ITEMS_SHORT : LN_ITEMS_LONG;
    if (ctx->ln_force_stream) goto stream;
    uint32_t sub_items = ctx->ln_subgroup_items ? ctx->ln_subgroup_items : LN_SUBGROUP_ITEMS;
    if (ctx->full_subgroups && n <= sub_items * sg && LN_SUBGROUP_WG <= max_wg &&
        LN_SUBGROUP_WG % ctx->max_subgroup == 0) {
        c.shader = c.vec == 4 ? LM_SH_LN_SUBGROUP_VEC4 : LM_SH_LN_SUBGROUP_VEC1;
        c.wg = LN_SUBGROUP_WG;
        c.rows_per_group = LN_SUBGROUP_WG / sg;
        c.items = (n + sg - 1) / sg;
        c.variant = "subgroup";
    } else if (n <= max_wg * LN_MAX_ITEMS) {
        uint32_t wg = ctx->ln_wg_override ? ctx->ln_wg_override : pow2_at_least((n + target - 1) / target);
        uint32_t lo = sg > 32 ? sg : 32;
        if (wg < lo) wg = lo;
        if (wg > max_wg) wg = max_wg;
        if (wg * LN_MAX_ITEMS < n) wg = pow2_at_least((n + LN_MAX_ITEMS - 1) / LN_MAX_ITEMS);
        if (wg > max_wg) wg = max_wg;
        c.shader = c.vec == 4 ? LM_SH_LN_GROUP_VEC4 : LM_SH_LN_GROUP_VEC1;
        c.wg = wg;
        c.items = (n + wg - 1) / wg;
        c.rows_per_group = 1;
        c.variant = "group";
    } else {
stream:
        c.shader = c.vec == 4 ? LM_SH_LN_STREAM_VEC4 : LM_SH_LN_STREAM_VEC1;
        c.wg = ctx->ln_wg_override ? ctx->ln_wg_override : max_wg;
        c.items = ctx->ln_items_target ? ctx->ln_items_target : LN_STREAM_ITEMS;
        c.rows_per_group = 1;
        c.variant = "stream";
    }
    return c;
}

static lm_tensor *check_param(lua_State *L, int idx, const char *name, int64_t d) {
    lm_tensor *t = lm_opt_tensor(L, idx);
    if (t && !(t->ndim == 1 && t->shape[0] == d)) {
        char got[256];
        lm_shape_string(t->shape, t->ndim, got, sizeof got);
        lua_pushfstring(L, "%s must have shape [%I] (the last dimension of x), got %s", name, (LUAI_UACINT)d, got);
        luaL_argerror(L, idx, lua_tostring(L, -1));
    }
    return t;
}

static float check_eps(lua_State *L, int idx) {
    if (lua_isnoneornil(L, idx)) return 1e-5f;
    if (lua_type(L, idx) != LUA_TNUMBER) {
        lua_pushfstring(L, "eps must be a number, got %s", luaL_typename(L, idx));
        luaL_argerror(L, idx, lua_tostring(L, -1));
    }
    lua_Number e = lua_tonumber(L, idx);
    if (!(e > 0) || !isfinite(e)) {
        lua_pushfstring(L, "eps must be a positive finite number, got %f", e);
        luaL_argerror(L, idx, lua_tostring(L, -1));
    }
    if ((float)e == 0.0f) luaL_argerror(L, idx, "eps is too small to be represented as float32");
    return (float)e;
}

/* Raises when a and b share bytes (exact aliasing is allowed when `same_ok`). */
static void no_overlap(lua_State *L, int argn, const lm_tensor *a, const char *an,
                       const lm_tensor *b, const char *bn, int same_ok) {
    if (!a || !b || !lm_tensors_overlap(a, b)) return;
    if (same_ok && a->offset == b->offset && a->numel == b->numel) return;
    lua_pushfstring(L, "%s overlaps %s (they alias the same device memory)", an, bn);
    luaL_argerror(L, argn, lua_tostring(L, -1));
}

int lm_op_layer_norm_forward(lua_State *L) {
    lm_tensor *x = lm_check_tensor(L, 1);
    int64_t d = x->shape[x->ndim - 1];
    int64_t rows = x->numel / d;
    if (d > 0x7fffffff) luaL_argerror(L, 1, "last dimension too large (at most 2^31-1)");
    if (rows > 0xffffffffLL) luaL_argerror(L, 1, "too many rows (at most 2^32-1)");
    lm_tensor *w = check_param(L, 2, "weight", d);
    lm_tensor *b = check_param(L, 3, "bias", d);
    float eps = check_eps(L, 4);
    int64_t stat_shape[LM_MAX_DIMS];
    int stat_ndim = x->ndim > 1 ? x->ndim - 1 : 1;
    if (x->ndim > 1) memcpy(stat_shape, x->shape, sizeof(int64_t) * (size_t)stat_ndim);
    else stat_shape[0] = 1;

    int has_opts = !lua_isnoneornil(L, 5);
    if (has_opts && !lua_istable(L, 5)) {
        lua_pushfstring(L, "options table expected ({out=, mean=, invstd=}), got %s", luaL_typename(L, 5));
        luaL_argerror(L, 5, lua_tostring(L, -1));
    }
    lua_settop(L, 5);
    /* Results y, mean, invstd at stack slots 6, 7, 8: the opts tensors or fresh ones. */
    static const char *const fields[3] = { "out", "mean", "invstd" };
    for (int i = 0; i < 3; i++) lm_push_field(L, 5, fields[i]);
    lm_tensor *y = lm_check_out(L, 6, 5, "out", x->ndim, x->shape);
    lm_tensor *mean = lm_check_out(L, 7, 5, "mean", stat_ndim, stat_shape);
    lm_tensor *invstd = lm_check_out(L, 8, 5, "invstd", stat_ndim, stat_shape);
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
    if (!y) { lm_push_tensor(L, ctx, x->ndim, x->shape); lua_replace(L, 6); }
    if (!mean) { lm_push_tensor(L, ctx, stat_ndim, stat_shape); lua_replace(L, 7); }
    if (!invstd) { lm_push_tensor(L, ctx, stat_ndim, stat_shape); lua_replace(L, 8); }
    /* The allocations may have run finalizers that freed any of them (see ops.h). */
    x = lm_check_tensor(L, 1);
    w = lm_opt_tensor(L, 2);
    b = lm_opt_tensor(L, 3);
    y = lm_check_out(L, 6, 5, "out", x->ndim, x->shape);
    mean = lm_check_out(L, 7, 5, "mean", stat_ndim, stat_shape);
    invstd = lm_check_out(L, 8, 5, "invstd", stat_ndim, stat_shape);
    if ((w && w->storage->ctx != ctx) || (b && b->storage->ctx != ctx) || x->storage->ctx != ctx)
        luaL_error(L, "layer_norm_forward: tensors belong to different devices");

    ln_config c = choose(ctx, d);
    struct {
        uint64_t x, y, weight, bias, mean, invstd;
        uint32_t rows, n, d;
        float eps;
        uint32_t groups_x, pad;
    } pc = {
        .x = lm_tensor_address(x), .y = lm_tensor_address(y),
        .weight = w ? lm_tensor_address(w) : 0, .bias = b ? lm_tensor_address(b) : 0,
        .mean = lm_tensor_address(mean), .invstd = lm_tensor_address(invstd),
        .rows = (uint32_t)rows, .n = (uint32_t)(d / c.vec), .d = (uint32_t)d, .eps = eps,
    };
    uint64_t groups = ((uint64_t)rows + c.rows_per_group - 1) / c.rows_per_group;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    const uint32_t spec[LM_MAX_SPEC] = { c.wg, c.items, c.rows_per_group };
    VkPipeline p = lm_pipeline(L, ctx, c.shader, spec, c.rows_per_group > 1);

    VkCommandBuffer cb = lm_stream_cmd(L, ctx, "layer_norm_forward");
    lm_stream_read(ctx, x->storage);
    if (w) lm_stream_read(ctx, w->storage);
    if (b) lm_stream_read(ctx, b->storage);
    lm_stream_write(ctx, y->storage);
    lm_stream_write(ctx, mean->storage);
    lm_stream_write(ctx, invstd->storage);
    lm_stream_hazards(ctx, cb);
    lm_dispatch(cb, ctx, p, &pc, sizeof pc, pc.groups_x, gy);
    lm_stream_op_done(L, ctx);
    return 3;
}

/* tune[name] as an integer (absent: 0), naming the field rather than a stack slot. */
static lua_Integer tune_field(lua_State *L, const char *name) {
    lua_getfield(L, 2, name);
    int isint = 1;
    lua_Integer v = lua_isnil(L, -1) ? 0 : lua_tointegerx(L, -1, &isint);
    if (!isint || (lua_type(L, -1) != LUA_TNUMBER && !lua_isnil(L, -1))) {
        lua_pushfstring(L, "%s must be an integer, got %s", name, luaL_typename(L, -1));
        luaL_argerror(L, 2, lua_tostring(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

/* core._layer_norm_config(D [, tune]) -> the variant chosen for rows of D; `tune`
 * ({items_target=, wg=}) changes the choice for later calls (for bench/ sweeps). */
int lm_op_layer_norm_config(lua_State *L) {
    lua_Integer d = luaL_checkinteger(L, 1);
    luaL_argcheck(L, d >= 1 && d <= 0x7fffffff, 1, "D must be in 1..2^31-1");
    lm_context *ctx = lm_context_get(L);
    if (lua_istable(L, 2)) {
        /* Checked before any is set; items are bounded because each becomes a register
         * array in a specialized shader (a huge one would take the compiler forever). */
        lua_Integer items = tune_field(L, "items_target");
        luaL_argcheck(L, items >= 0 && items <= 64, 2, "items_target must be in 0..64 (0: default)");
        lua_Integer wg = tune_field(L, "wg");
        luaL_argcheck(L, wg == 0 || (wg >= 1 && wg <= 1024 && (wg & (wg - 1)) == 0), 2, "wg must be a power of two up to 1024");
        lua_getfield(L, 2, "stream");
        int stream = lua_toboolean(L, -1);
        lua_pop(L, 1);
        lua_Integer sub = tune_field(L, "subgroup_items");
        luaL_argcheck(L, sub >= 0 && sub <= 64, 2, "subgroup_items must be in 0..64 (0: default)");
        ctx->ln_items_target = (uint32_t)items;
        ctx->ln_wg_override = (uint32_t)wg;
        ctx->ln_force_stream = stream;
        ctx->ln_subgroup_items = (uint32_t)sub;
    }
    ln_config c = choose(ctx, d);
    lua_createtable(L, 0, 5);
    lua_pushstring(L, c.variant); lua_setfield(L, -2, "variant");
    lua_pushinteger(L, c.wg); lua_setfield(L, -2, "workgroup");
    lua_pushinteger(L, c.items); lua_setfield(L, -2, "items");
    lua_pushinteger(L, c.vec); lua_setfield(L, -2, "vec");
    lua_pushinteger(L, c.rows_per_group); lua_setfield(L, -2, "rows_per_group");
    return 1;
}
