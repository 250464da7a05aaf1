/* fill: t[:] = v, on the device, in any dtype; and the factories that fill (zeros, ones,
 * full). */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

#define FILL_WG 256

/* The 32-bit word that repeats the element (shaders/fill.comp): one 4-byte element, two
 * 2-byte ones, four bools. */
static uint32_t fill_pattern(lm_dtype d, const unsigned char *elem) {
    if (lm_dtype_size(d) == 4) { uint32_t w; memcpy(&w, elem, 4); return w; }
    if (lm_dtype_size(d) == 2) { uint16_t h; memcpy(&h, elem, 2); return (uint32_t)h * 0x10001u; }
    return (uint32_t)elem[0] * 0x01010101u;
}

/* t[:] = the element, t plain. */
static void record_plain_fill(lua_State *L, lm_tensor *t, const unsigned char *elem) {
    lm_context *ctx = t->storage->ctx;
    uint64_t bytes = (uint64_t)lm_tensor_bytes(t);
    int narrow = bytes % 4u != 0;   /* a tail of single bytes: 8-bit stores */
    if (narrow) lm_require_narrow_storage(L, ctx, "fill", t->dtype);
    struct { uint64_t dst, n; uint32_t pattern, groups_x; } pc = {
        .dst = lm_tensor_address(t), .n = bytes, .pattern = fill_pattern(t->dtype, elem),
    };
    uint64_t groups = (bytes + 16u * FILL_WG - 1) / (16u * FILL_WG);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "fill", .any_dtype = 1, .shader = narrow ? LM_SH_FILL_NARROW : LM_SH_FILL, .spec = { FILL_WG, 0, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .writes = { t },
    });
}

void lm_record_fill_element(lua_State *L, lm_tensor *t, const void *elem) {
    if (lm_tensor_is_plain(t)) record_plain_fill(L, t, elem);
    else lm_record_strided_fill_element(L, t, elem);   /* only the view's elements */
}

/* v as an element of dtype d: rounded (float16, bfloat16), truncated (int32: the
 * callers pass integers), nonzero (bool). */
static void float_element(lm_dtype d, float v, unsigned char *elem) {
    switch (d) {
    case LM_FLOAT32: memcpy(elem, &v, 4); break;
    case LM_FLOAT16: { uint16_t h = lm_float_to_half(v); memcpy(elem, &h, 2); break; }
    case LM_BFLOAT16: { uint16_t h = lm_float_to_bfloat16(v); memcpy(elem, &h, 2); break; }
    case LM_INT32: { int32_t i = v != v ? 0 : v >= 2147483647.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
                     memcpy(elem, &i, 4); break; }
    default: elem[0] = v != 0.0f; break;
    }
}

void lm_record_fill(lua_State *L, lm_tensor *t, float v) {
    unsigned char elem[4];
    float_element(t->dtype, v, elem);
    record_plain_fill(L, t, elem);
}

/* The value at argument arg (a number, a numeric string or a boolean) as an element of
 * dtype d; raises naming the value when the dtype cannot hold it (lm_dtype_store). */
static void check_value(lua_State *L, int arg, lm_dtype d, unsigned char *elem) {
    if (lua_type(L, arg) == LUA_TBOOLEAN) lua_pushvalue(L, arg);
    else if (lua_type(L, arg) == LUA_TNUMBER) lua_pushvalue(L, arg);
    else {
        lm_check_number(L, arg);                      /* raises for a non-numeric value */
        lua_stringtonumber(L, lua_tostring(L, arg));  /* a numeric string */
    }
    int at = lua_gettop(L);
    const char *bad = lm_dtype_store(L, at, d, elem);
    if (bad) {
        const char *shown = luaL_tolstring(L, at, NULL);
        lm_argerror(L, arg, "value %s %s (the tensor is %s)", shown, bad, lm_dtype_name(d));
    }
    lua_pop(L, 1);
}

int lm_op_fill(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    unsigned char elem[4];
    check_value(L, 2, t->dtype, elem);
    t = lm_check_tensor(L, 1);   /* still live: nothing above may free it, but cheap */
    lm_check_writable(L, 1, t, "the tensor");
    lm_record_fill_element(L, t, elem);
    lua_settop(L, 1);
    return 1;
}

/* A new tensor of the shape at argument 1 (factory options at `opts`), filled with the
 * value at argument `value` (0: with v). */
static int fill_new(lua_State *L, int opts, int value, float v) {
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    lm_check_shape(L, 1, shape, &ndim, 0);
    lm_dtype d = lm_check_factory_dtype(L, opts);
    unsigned char elem[4];
    if (value) check_value(L, value, d, elem);
    else float_element(d, v, elem);
    lm_tensor *t = lm_push_tensor_dtype(L, lm_context_get(L), d, ndim, shape);
    record_plain_fill(L, t, elem);
    return 1;
}

int lm_op_zeros(lua_State *L) { return fill_new(L, 2, 0, 0.0f); }
int lm_op_ones(lua_State *L) { return fill_new(L, 2, 0, 1.0f); }
int lm_op_full(lua_State *L) {
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    lm_check_shape(L, 1, shape, &ndim, 0);   /* a missing shape is named before the value */
    if (lua_type(L, 2) != LUA_TBOOLEAN) lm_check_number(L, 2);
    return fill_new(L, 3, 2, 0.0f);
}
