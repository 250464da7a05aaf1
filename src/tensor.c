/* lumus.Tensor: constructors, shape, transfers and lifetime (see tensor.h). */
#include "tensor.h"
#include "storage.h"
#include <lauxlib.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Largest dimension size and element count accepted: keeps every byte count and the
 * kernels' 32-bit per-row indices far from overflow. */
#define LM_MAX_SIZE ((int64_t)1 << 40)

/* lumus.Tensor's metatable holds this key (a light userdata) with the value true, and
 * no other metatable does: testing a value for a tensor is then one lookup in its
 * metatable, where luaL_testudata looks the metatable up in the registry by name (a
 * string) first. Every tensor argument of every op is tested, some twice. */
static const char TENSOR_MARK = 0;

lm_tensor *lm_test_tensor(lua_State *L, int idx) {
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx)) return NULL;
    int is = lua_rawgetp(L, -1, &TENSOR_MARK) == LUA_TBOOLEAN;
    lua_pop(L, 2);
    return is ? p : NULL;
}

static lm_tensor *to_tensor(lua_State *L, int idx) {
    return lm_test_tensor(L, idx);
}

const char *lm_dtype_name(lm_dtype d) {
    static const char *const names[LM_NDTYPES] = { "float32", "float16", "bfloat16", "int32", "bool" };
    return names[d];
}

int lm_dtype_from_name(const char *name) {
    for (int d = 0; d < LM_NDTYPES; d++)
        if (strcmp(name, lm_dtype_name((lm_dtype)d)) == 0) return d;
    return -1;
}

lm_tensor *lm_check_tensor(lua_State *L, int idx) {
    lm_tensor *t = to_tensor(L, idx);
    if (!t) lm_typeerror(L, idx, "tensor");
    if (!t->storage) lm_argerror(L, idx, "tensor has been freed");
    if (!t->storage->ctx) lm_argerror(L, idx, "the tensor's device context has been closed");
    return t;
}

lm_tensor *lm_opt_tensor(lua_State *L, int idx) {
    return lua_isnoneornil(L, idx) ? NULL : lm_check_tensor(L, idx);
}

lm_tensor *lm_option_tensor(lua_State *L, int arg, const char *key) {
    lm_push_option(L, arg, key);
    lm_tensor *t = NULL;
    if (!lua_isnil(L, -1)) {
        t = to_tensor(L, -1);
        if (!t) lm_argerror(L, arg, "%s must be a tensor, got %s", key, luaL_typename(L, -1));
        if (!t->storage) lm_argerror(L, arg, "%s: tensor has been freed", key);
        if (!t->storage->ctx) lm_argerror(L, arg, "%s: the tensor's device context has been closed", key);
    }
    lua_pop(L, 1);   /* the tensor stays referenced by the caller's table */
    return t;
}

/* "float32, float16, bfloat16, int32, bool", for messages. */
static const char *dtype_list(void) { return "float32, float16, bfloat16, int32 or bool"; }

static lm_dtype dtype_of_value(lua_State *L, int idx, int arg, const char *what) {
    if (lua_type(L, idx) != LUA_TSTRING)
        lm_argerror(L, arg, "%s must be a string (%s), got %s", what, dtype_list(), luaL_typename(L, idx));
    int d = lm_dtype_from_name(lua_tostring(L, idx));
    if (d < 0) lm_argerror(L, arg, "%s '%s' is not supported (%s)", what, lua_tostring(L, idx), dtype_list());
    return (lm_dtype)d;
}

lm_dtype lm_check_dtype(lua_State *L, int arg) {
    return dtype_of_value(L, arg, arg, "dtype");
}

lm_dtype lm_check_factory_dtype(lua_State *L, int arg) {
    static const char *const known[] = { "dtype", NULL };
    if (!lm_check_options(L, arg, known)) return LM_FLOAT32;
    lm_push_option(L, arg, "dtype");
    lm_dtype d = lua_isnil(L, -1) ? LM_FLOAT32 : dtype_of_value(L, -1, arg, "dtype");
    lua_pop(L, 1);
    return d;
}

void lm_check_factory_options(lua_State *L, int arg) {
    static const char *const known[] = { "dtype", NULL };
    if (!lm_check_options(L, arg, known)) return;
    lm_push_option(L, arg, "dtype");
    if (lua_isnil(L, -1) || (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "float32") == 0)) {
        lua_pop(L, 1);
        return;
    }
    if (lua_type(L, -1) != LUA_TSTRING) lm_argerror(L, arg, "dtype must be a string, got %s", luaL_typename(L, -1));
    lm_argerror(L, arg, "dtype '%s' is not supported (only 'float32')", lua_tostring(L, -1));
}

/* ---- element conversions on the host ---- */

static uint32_t float_bits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static float bits_float(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

/* v >> sh rounded to nearest even (1 <= sh <= 31). */
static uint32_t shift_round(uint32_t v, unsigned sh) {
    uint32_t q = v >> sh, rem = v & ((1u << sh) - 1u), half = 1u << (sh - 1u);
    return q + (rem > half || (rem == half && (q & 1u)));
}

uint16_t lm_float_to_half(float f) {
    uint32_t u = float_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));   /* NaN */
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00u);                          /* >= 2^16 */
    if (a >= 0x38800000u) return (uint16_t)(sign | shift_round(a - 0x38000000u, 13));
    if (a <= 0x33000000u) return (uint16_t)sign;                                      /* <= 2^-25 */
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    return (uint16_t)(sign | shift_round(m, 126u - e));
}

float lm_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31u) return bits_float(sign | 0x7f800000u | (m << 13));
    if (e != 0u) return bits_float(sign | ((e + 112u) << 23) | (m << 13));
    float v = ldexpf((float)m, -24);   /* a subnormal (or zero): exact */
    return sign ? -v : v;
}

uint16_t lm_float_to_bfloat16(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float lm_bfloat16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

/* Lua numbers beyond float32's range become +-inf (IEEE conversion, as PyTorch's). */
static float to_float32(lua_Number v) {
    if (v != v) return (float)v;
    if (v > FLT_MAX || v < -FLT_MAX) {
        /* Values within half an ulp of FLT_MAX still round to it. */
        double limit = (double)FLT_MAX + ldexp(1.0, 103);
        if (v < limit && v > -limit) return v > 0 ? FLT_MAX : -FLT_MAX;
        return v > 0 ? INFINITY : -INFINITY;
    }
    return (float)v;
}

const char *lm_dtype_store(lua_State *L, int idx, lm_dtype d, void *dst) {
    int type = lua_type(L, idx);
    if (type != LUA_TNUMBER && type != LUA_TBOOLEAN) {
        lua_pushfstring(L, "is %s, number%s expected", luaL_typename(L, idx), d == LM_BOOL ? " or boolean" : "");
        return lua_tostring(L, -1);   /* left on the stack for the caller's message */
    }
    if (d == LM_BOOL) {
        uint8_t b = type == LUA_TBOOLEAN ? (uint8_t)lua_toboolean(L, idx) : (uint8_t)(lua_tonumber(L, idx) != 0);
        memcpy(dst, &b, 1);
        return NULL;
    }
    if (d == LM_INT32) {
        lua_Integer i;
        if (type == LUA_TBOOLEAN) i = lua_toboolean(L, idx);
        else if (lua_isinteger(L, idx)) i = lua_tointeger(L, idx);
        else {
            lua_Number v = lua_tonumber(L, idx);
            if (v != v || v == HUGE_VAL || v == -HUGE_VAL) return "is NaN or inf (int32 holds integers)";
            if (floor(v) != v) return "is a fraction (int32 holds integers; convert a float tensor with :int() to truncate)";
            if (v < -2147483648.0 || v > 2147483647.0) return "is out of the int32 range";
            i = (lua_Integer)v;
        }
        if (i < INT32_MIN || i > INT32_MAX) return "is out of the int32 range";
        int32_t v32 = (int32_t)i;
        memcpy(dst, &v32, 4);
        return NULL;
    }
    float f = type == LUA_TBOOLEAN ? (float)lua_toboolean(L, idx) : to_float32(lua_tonumber(L, idx));
    if (d == LM_FLOAT32) { memcpy(dst, &f, 4); return NULL; }
    uint16_t h = d == LM_FLOAT16 ? lm_float_to_half(f) : lm_float_to_bfloat16(f);
    memcpy(dst, &h, 2);
    return NULL;
}

void lm_dtype_push(lua_State *L, lm_dtype d, const void *src) {
    switch (d) {
    case LM_FLOAT32: { float f; memcpy(&f, src, 4); lua_pushnumber(L, f); break; }
    case LM_FLOAT16: { uint16_t h; memcpy(&h, src, 2); lua_pushnumber(L, lm_half_to_float(h)); break; }
    case LM_BFLOAT16: { uint16_t h; memcpy(&h, src, 2); lua_pushnumber(L, lm_bfloat16_to_float(h)); break; }
    case LM_INT32: { int32_t i; memcpy(&i, src, 4); lua_pushinteger(L, i); break; }
    default: lua_pushboolean(L, *(const uint8_t *)src != 0); break;
    }
}

/* lumus.promote_types(a, b): PyTorch's result dtype for these: bool < int32 < the
 * floats; float16 and bfloat16 together give float32. */
static int l_promote_types(lua_State *L) {
    static const int rank[LM_NDTYPES] = { 3, 2, 2, 1, 0 };
    lm_dtype a = lm_check_dtype(L, 1), b = lm_check_dtype(L, 2);
    lm_dtype r = rank[a] > rank[b] ? a : rank[b] > rank[a] ? b : a == b ? a : LM_FLOAT32;
    lua_pushstring(L, lm_dtype_name(r));
    return 1;
}

/* Byte range of a tensor in its VkBuffer: storages of host buffers may alias, so
 * overlap is judged by buffer and range, not by storage. */
static VkDeviceSize buffer_start(const lm_tensor *t) {
    return t->storage->buffer_offset + (VkDeviceSize)t->offset * lm_dtype_size(t->dtype);
}

int lm_tensor_is_contiguous(const lm_tensor *t) {
    int64_t stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != stride) return 0;
        stride *= t->shape[i];
    }
    return 1;
}

int lm_tensor_is_plain(const lm_tensor *t) {
    return lm_tensor_is_contiguous(t) && lm_tensor_address(t) % 16u == 0;
}

int64_t lm_tensor_span(const lm_tensor *t) {
    int64_t last = 0;
    for (int i = 0; i < t->ndim; i++) last += (t->shape[i] - 1) * t->strides[i];
    return last + 1;
}

int lm_tensors_overlap(const lm_tensor *a, const lm_tensor *b) {
    if (a->storage->buffer != b->storage->buffer) return 0;
    VkDeviceSize a0 = buffer_start(a), a1 = a0 + (VkDeviceSize)lm_tensor_span(a) * lm_dtype_size(a->dtype);
    VkDeviceSize b0 = buffer_start(b), b1 = b0 + (VkDeviceSize)lm_tensor_span(b) * lm_dtype_size(b->dtype);
    return a0 < b1 && b0 < a1;
}

int lm_tensors_same_memory(const lm_tensor *a, const lm_tensor *b) {
    if (a->storage->buffer != b->storage->buffer || buffer_start(a) != buffer_start(b) || a->numel != b->numel
        || a->dtype != b->dtype)
        return 0;
    if (lm_tensor_is_contiguous(a) && lm_tensor_is_contiguous(b)) return 1;
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i] || (a->shape[i] != 1 && a->strides[i] != b->strides[i])) return 0;
    return 1;
}

static void set_contiguous(lm_tensor *t) {
    int64_t stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) { t->strides[i] = stride; stride *= t->shape[i]; }
}

/* A fresh userdata with no storage (safe to collect if what follows raises). Its one
 * user value anchors the storage userdata (storage.h). */
static lm_tensor *push_handle(lua_State *L) {
    lm_tensor *t = lua_newuserdatauv(L, sizeof *t, 1);
    memset(t, 0, sizeof *t);
    luaL_setmetatable(L, LM_TENSOR_MT);
    return t;
}

lm_tensor *lm_push_tensor_handle(lua_State *L, int ndim, const int64_t *shape) {
    lm_tensor *t = push_handle(L);
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) { t->shape[i] = shape[i]; t->numel *= shape[i]; }
    set_contiguous(t);
    return t;
}

lm_tensor *lm_push_tensor_dtype(lua_State *L, lm_context *ctx, lm_dtype dtype, int ndim, const int64_t *shape) {
    lm_tensor *t = push_handle(L);
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = 1;
    for (int i = 0; i < ndim; i++) { t->shape[i] = shape[i]; t->numel *= shape[i]; }
    set_contiguous(t);
    t->storage = lm_storage_new(L, ctx, lm_tensor_bytes(t), NULL);
    lua_setiuservalue(L, -2, 1);
    return t;
}

lm_tensor *lm_push_tensor(lua_State *L, lm_context *ctx, int ndim, const int64_t *shape) {
    return lm_push_tensor_dtype(L, ctx, LM_FLOAT32, ndim, shape);
}

int64_t lm_check_shape(lua_State *L, int idx, int64_t *shape, int *ndim, int allow_infer) {
    if (lua_type(L, idx) == LUA_TNUMBER) {
        int isint = 0;
        lua_Integer n = lua_tointegerx(L, idx, &isint);
        if (!isint) lm_argerror(L, idx, "size must be an integer, got a fraction or NaN");
        if (n <= 0 || n > LM_MAX_SIZE) lm_argerror(L, idx, "size must be a positive integer");
        shape[0] = n; *ndim = 1;
        return n;
    }
    if (!lua_istable(L, idx)) {
        lm_argerror(L, idx, "shape expected (a table of positive integers), got %s", luaL_typename(L, idx));
    }
    lua_Unsigned n = lua_rawlen(L, idx);
    if (n < 1 || n > LM_MAX_DIMS) {
        lm_argerror(L, idx, "shape must have 1 to %d sizes, got %d", LM_MAX_DIMS, (int)(n > 99 ? 99 : n));
    }
    int64_t numel = 1;
    int infer = -1;
    for (int i = 0; i < (int)n; i++) {
        lua_rawgeti(L, idx, i + 1);
        int isint = 0;
        lua_Integer v = lua_tointegerx(L, -1, &isint);
        if (!isint || lua_type(L, -1) != LUA_TNUMBER) {
            lm_argerror(L, idx, "size %d must be an integer, got %s", i + 1,
                            lua_type(L, -1) == LUA_TNUMBER ? "a fraction or NaN" : luaL_typename(L, -1));
        }
        lua_pop(L, 1);
        if (v == -1 && allow_infer && infer < 0) { infer = i; shape[i] = -1; continue; }
        if (v <= 0) lm_argerror(L, idx, "size %d must be positive, got %I", i + 1, (LUAI_UACINT)v);
        if (v > LM_MAX_SIZE || numel > LM_MAX_SIZE / v) {
            lm_argerror(L, idx, "shape has too many elements (byte count overflows; at most 2^40 elements)");
        }
        shape[i] = v;
        numel *= v;
    }
    *ndim = (int)n;
    if (infer >= 0) shape[infer] = -numel;   /* resolved by the caller */
    return numel;
}

static lm_tensor *new_from_shape(lua_State *L, int idx) {
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    lm_check_shape(L, idx, shape, &ndim, 0);
    lm_dtype d = lm_check_factory_dtype(L, idx + 1);
    lm_context *ctx = lm_context_get(L);
    return lm_push_tensor_dtype(L, ctx, d, ndim, shape);
}

static int l_empty(lua_State *L) { new_from_shape(L, 1); return 1; }

/* Bool tensors hold 0 or 1 in each byte: returns the 0-based position of the first other
 * byte, or -1. */
static int64_t bad_bool_byte(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] > 1) return (int64_t)i;
    return -1;
}

static void check_bool_bytes(lua_State *L, int arg, const char *s, size_t len) {
    int64_t bad = bad_bool_byte(s, len);
    if (bad >= 0)
        lm_argerror(L, arg, "byte %I is %d: bool elements are the bytes 0 and 1", (LUAI_UACINT)(bad + 1),
                    (int)(unsigned char)s[bad]);
}

static int l_from_bytes(lua_State *L) {
    size_t len;
    const char *s = lm_check_lstring(L, 1, &len);
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    int64_t numel = lm_check_shape(L, 2, shape, &ndim, 0);
    lm_dtype d = lm_check_factory_dtype(L, 3);
    unsigned es = lm_dtype_size(d);
    if ((uint64_t)len != (uint64_t)numel * es) {
        char sh[128];
        lm_shape_string(shape, ndim, sh, sizeof sh);
        lm_argerror(L, 1, "expected %I bytes (%d per %s) for shape %s, got %I",
                    (LUAI_UACINT)(numel * es), (int)es, lm_dtype_name(d), sh, (LUAI_UACINT)len);
    }
    if (d == LM_BOOL) check_bool_bytes(L, 1, s, len);
    lm_context *ctx = lm_context_get(L);
    lm_tensor *t = lm_push_tensor_dtype(L, ctx, d, ndim, shape);
    lm_storage_write(L, t->storage, 0, s, len);
    return 1;
}

/* ---- nested tables ---- */

/* Walks t[1][1]... to learn the shape; the full structure is checked while filling. */
static int infer_nested_shape(lua_State *L, int idx, int64_t *shape) {
    int ndim = 0;
    lua_pushvalue(L, idx);
    for (;;) {
        if (lua_type(L, -1) != LUA_TTABLE) break;
        if (ndim == LM_MAX_DIMS) lm_argerror(L, 1, "nested table has more than 8 levels");
        lua_Unsigned n = lua_rawlen(L, -1);
        if (n == 0) lm_argerror(L, 1, ndim ? "nested table has an empty row" : "table is empty");
        if (n > (lua_Unsigned)LM_MAX_SIZE) lm_argerror(L, 1, "table is too long");
        shape[ndim++] = (int64_t)n;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
    return ndim;
}

typedef struct fill_state {
    unsigned char *out; lm_dtype dtype; int64_t at; const int64_t *shape; int ndim; int64_t path[LM_MAX_DIMS];
} fill_state;

static void element_error(lua_State *L, fill_state *f, int depth, const char *what) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "element ");
    for (int i = 0; i <= depth; i++) {
        lua_pushfstring(L, "[%I]", (LUAI_UACINT)(f->path[i] + 1));
        luaL_addvalue(&b);
    }
    luaL_addstring(&b, " ");
    luaL_addstring(&b, what);
    luaL_pushresult(&b);
    lm_argerror(L, 1, "%s", lua_tostring(L, -1));
}

/* The table at the top of the stack is level `depth`. */
static void fill_nested(lua_State *L, fill_state *f, int depth) {
    int64_t n = f->shape[depth];
    if ((int64_t)lua_rawlen(L, -1) != n) {
        char msg[96];
        snprintf(msg, sizeof msg, "has %lld entries where %lld were expected (ragged nested table)",
                 (long long)lua_rawlen(L, -1), (long long)n);
        element_error(L, f, depth - 1 < 0 ? 0 : depth - 1, msg);
    }
    if (depth == f->ndim - 1) {
        unsigned es = lm_dtype_size(f->dtype);
        unsigned char *out = f->out + f->at * es;
        for (int64_t i = 0; i < n; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            const char *bad = lm_dtype_store(L, -1, f->dtype, out + i * es);
            if (bad) {
                f->path[depth] = i;
                element_error(L, f, depth, bad);
            }
            lua_pop(L, 1);
        }
        f->at += n;
        return;
    }
    luaL_checkstack(L, 4, "nested table too deep");
    for (int64_t i = 0; i < n; i++) {
        f->path[depth] = i;
        if (lua_rawgeti(L, -1, (lua_Integer)i + 1) != LUA_TTABLE) {
            lua_pushfstring(L, "is %s, a table expected (ragged nested table)", luaL_typename(L, -1));
            element_error(L, f, depth, lua_tostring(L, -1));
        }
        fill_nested(L, f, depth + 1);
        lua_pop(L, 1);
    }
}

static int l_tensor(lua_State *L) {
    lm_check_type(L, 1, LUA_TTABLE);
    lm_dtype d = lm_check_factory_dtype(L, 2);
    int64_t shape[LM_MAX_DIMS];
    int ndim = infer_nested_shape(L, 1, shape);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (numel > LM_MAX_SIZE / shape[i]) lm_argerror(L, 1, "nested table has too many elements");
        numel *= shape[i];
    }
    lm_context *ctx = lm_context_get(L);
    lm_tensor *t = lm_push_tensor_dtype(L, ctx, d, ndim, shape);
    size_t bytes = (size_t)lm_tensor_bytes(t);
    unsigned char *direct = lm_storage_direct(t->storage);
    unsigned char *host = direct;
    if (!host) host = lua_newuserdatauv(L, bytes, 0);   /* GC'd if we raise */
    fill_state f = { .out = host, .dtype = d, .at = 0, .shape = shape, .ndim = ndim };
    if (direct) lm_stream_wait(L, ctx, t->storage->last_serial);
    lua_pushvalue(L, 1);
    fill_nested(L, &f, 0);
    lua_pop(L, 1);
    if (!direct) {
        lm_storage_write(L, t->storage, 0, host, (VkDeviceSize)bytes);
        lua_pop(L, 1);
    }
    return 1;
}

/* ---- methods ---- */

static int m_shape(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lua_createtable(L, t->ndim, 0);
    for (int i = 0; i < t->ndim; i++) { lua_pushinteger(L, t->shape[i]); lua_rawseti(L, -2, i + 1); }
    return 1;
}

static int m_size(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    if (lua_isnoneornil(L, 2)) return m_shape(L);
    lua_Integer i = lm_check_integer(L, 2);
    if (i < 0) i += t->ndim + 1;
    if (i < 1 || i > t->ndim) {
        lm_argerror(L, 2, "dimension out of range (tensor has %d)", t->ndim);
    }
    lua_pushinteger(L, t->shape[i - 1]);
    return 1;
}

static int m_dim(lua_State *L) { lua_pushinteger(L, lm_check_tensor(L, 1)->ndim); return 1; }
static int m_numel(lua_State *L) { lua_pushinteger(L, lm_check_tensor(L, 1)->numel); return 1; }
static int m_dtype(lua_State *L) { lua_pushstring(L, lm_dtype_name(lm_check_tensor(L, 1)->dtype)); return 1; }

/* Optional 1-based element range [first, first+count). */
static void check_range(lua_State *L, lm_tensor *t, int idx, int64_t *first, int64_t *count) {
    lua_Integer f = lm_opt_integer(L, idx, 1);
    if (f < 1 || f > t->numel) lm_argerror(L, idx, "first element out of range");
    lua_Integer c = lm_opt_integer(L, idx + 1, t->numel - (f - 1));
    if (c < 0 || c > t->numel - (f - 1)) lm_argerror(L, idx + 1, "count out of range");
    *first = f - 1;
    *count = c;
}

/* The storage element of t's element number k (row-major order over its shape). */
static int64_t element_index(const lm_tensor *t, int64_t k) {
    int64_t at = t->offset;
    for (int i = t->ndim - 1; i >= 0 && k; i--) {
        at += (k % t->shape[i]) * t->strides[i];
        k /= t->shape[i];
    }
    return at;
}

/* Reads elements [first, first + count) of t in row-major order into out: at once when
 * contiguous, else the storage range they lie in (into `span`, of the bytes
 * gather_bytes gave, a buffer the caller allocated before its last liveness check)
 * gathered by strides. */
static void read_elements(lua_State *L, const lm_tensor *t, int64_t first, int64_t count, unsigned char *out,
                          unsigned char *span, int64_t lo) {
    size_t es = lm_dtype_size(t->dtype);
    if (lm_tensor_is_contiguous(t)) {
        lm_storage_read(L, t->storage, (VkDeviceSize)(t->offset + first) * es, out, (VkDeviceSize)count * es);
        return;
    }
    int64_t hi = lo;
    for (int64_t k = first; k < first + count; k++) {
        int64_t at = element_index(t, k);
        if (at > hi) hi = at;
    }
    lm_storage_read(L, t->storage, (VkDeviceSize)lo * es, span, (VkDeviceSize)(hi - lo + 1) * es);
    for (int64_t k = 0; k < count; k++)
        memcpy(out + (size_t)k * es, span + (size_t)(element_index(t, first + k) - lo) * es, es);
}

/* The lowest storage element of t's elements [first, first + count), and the bytes a
 * gather buffer needs for them (0 for a contiguous tensor). */
static int64_t gather_bytes(const lm_tensor *t, int64_t first, int64_t count, int64_t *lo) {
    *lo = element_index(t, first);
    if (lm_tensor_is_contiguous(t)) return 0;
    int64_t hi = *lo;
    for (int64_t k = first; k < first + count; k++) {
        int64_t at = element_index(t, k);
        if (at < *lo) *lo = at;
        if (at > hi) hi = at;
    }
    return (hi - *lo + 1) * (int64_t)lm_dtype_size(t->dtype);
}

static int m_to_bytes(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int64_t first, count;
    check_range(L, t, 2, &first, &count);
    size_t es = lm_dtype_size(t->dtype);
    int64_t lo, span_len = count ? gather_bytes(t, first, count, &lo) : 0;
    size_t n = (size_t)count * es;
    if (lm_tensor_is_contiguous(t) &&
        lm_storage_push_bytes(L, t->storage, (VkDeviceSize)(t->offset + first) * es, n)) return 1;
    unsigned char *span = span_len ? lua_newuserdatauv(L, (size_t)span_len, 0) : NULL;
    unsigned char *p = lua_newuserdatauv(L, n ? n : 1, 0);
    t = lm_check_tensor(L, 1);   /* the allocations may have run a finalizer that freed it */
    lm_host_prefault(t->storage->ctx, p, n);
    if (n) read_elements(L, t, first, count, p, span, lo);
    lm_push_host_string(L, t->storage->ctx, (const char *)p, n);
    return 1;
}

/* t:write_bytes(s [, first]): host bytes (the dtype's little-endian layout) into t's
 * elements first.. (1-based) in place, with no new device allocation. t must be
 * contiguous: a strided view raises (write into a contiguous tensor, then copy). */
static int m_write_bytes(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    size_t len;
    const char *s = lm_check_lstring(L, 2, &len);
    lua_Integer first = lm_opt_integer(L, 3, 1);
    size_t es = lm_dtype_size(t->dtype);
    if (!lm_tensor_is_contiguous(t))
        lm_argerror(L, 1, "tensor must be contiguous (a strided view: write into a contiguous tensor, then "
                    "view:copy(it))");
    if (first < 1 || first > t->numel)
        lm_argerror(L, 3, "first element %I out of range (1 to %I; 1-based)", (LUAI_UACINT)first, (LUAI_UACINT)t->numel);
    if (len % es != 0)
        lm_argerror(L, 2, "%I bytes is not a whole number of %s elements (%d bytes each)", (LUAI_UACINT)len,
                    lm_dtype_name(t->dtype), (int)es);
    int64_t count = (int64_t)(len / es);
    if (count > t->numel - (first - 1))
        lm_argerror(L, 2, "%I elements from element %I do not fit a tensor of %I", (LUAI_UACINT)count,
                    (LUAI_UACINT)first, (LUAI_UACINT)t->numel);
    if (t->dtype == LM_BOOL) check_bool_bytes(L, 2, s, len);
    /* a write into the storage: autograd's write counter (lm_op_version) counts it */
    if (len) t->storage->version++;
    /* (s stays on the stack, referenced, until the bytes are copied) */
    if (len) lm_storage_write(L, t->storage, (VkDeviceSize)(t->offset + first - 1) * es, s, len);
    lua_settop(L, 1);
    return 1;
}

static void push_nested(lua_State *L, const lm_tensor *t, const unsigned char *data, int depth, int64_t *at) {
    size_t es = lm_dtype_size(t->dtype);
    int64_t n = t->shape[depth];
    lua_createtable(L, (int)(n > 0x7fffffff ? 0x7fffffff : n), 0);
    if (depth == t->ndim - 1) {
        for (int64_t i = 0; i < n; i++) {
            lm_dtype_push(L, t->dtype, data + (size_t)(*at + i) * es);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        *at += n;
        return;
    }
    luaL_checkstack(L, 4, "tensor too deep");
    for (int64_t i = 0; i < n; i++) {
        push_nested(L, t, data, depth + 1, at);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int m_to_table(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    /* Copy out first: building the tables runs the GC, whose finalizers may free the
     * tensor and hand its memory to another one. */
    int64_t lo, span_len = gather_bytes(t, 0, t->numel, &lo);
    unsigned char *span = span_len ? lua_newuserdatauv(L, (size_t)span_len, 0) : NULL;
    unsigned char *data = lua_newuserdatauv(L, (size_t)lm_tensor_bytes(t), 0);
    t = lm_check_tensor(L, 1);
    lm_host_prefault(t->storage->ctx, data, (size_t)lm_tensor_bytes(t));
    read_elements(L, t, 0, t->numel, data, span, lo);
    int64_t at = 0;
    push_nested(L, t, data, 0, &at);
    return 1;
}

/* t:item(): the value of a one-element tensor (as to_table's elements). */
static int m_item(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    if (t->numel != 1)
        lm_argerror(L, 1, "tensor has %I elements (item needs exactly one)", (LUAI_UACINT)t->numel);
    unsigned char data[4];
    read_elements(L, t, 0, 1, data, NULL, 0);   /* one element is contiguous */
    lm_dtype_push(L, t->dtype, data);
    return 1;
}

/* ---- views: new handles on the same storage ---- */

/* Pushes a handle on the storage of the tensor at stack slot `base` (copying its shape,
 * strides and offset, which the caller then changes). The base is checked again after
 * the allocation, which may run a finalizer that frees it. */
static lm_tensor *push_view(lua_State *L, int base) {
    lm_tensor *v = push_handle(L);
    lm_tensor *t = lm_check_tensor(L, base);
    *v = *t;
    lm_storage_ref(v->storage);
    lua_getiuservalue(L, base, 1);
    lua_setiuservalue(L, -2, 1);
    return v;
}

static void set_numel(lm_tensor *t) {
    t->numel = 1;
    for (int i = 0; i < t->ndim; i++) t->numel *= t->shape[i];
}

/* A 1-based dimension at argument arg of a tensor of ndim dimensions (negative counts
 * from the end, -1 the last), as a 0-based index. */
static int check_dim(lua_State *L, int arg, int ndim) {
    lua_Integer d = lm_check_integer(L, arg);
    if (d < 0) d += ndim + 1;
    if (d < 1 || d > ndim)
        lm_argerror(L, arg, "dimension %I out of range (the tensor has %d; dims are 1-based, -1 is the last)",
                    (LUAI_UACINT)lua_tointeger(L, arg), ndim);
    return (int)d - 1;
}

static int m_stride(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    if (lua_isnoneornil(L, 2)) {
        lua_createtable(L, t->ndim, 0);
        for (int i = 0; i < t->ndim; i++) { lua_pushinteger(L, t->strides[i]); lua_rawseti(L, -2, i + 1); }
        return 1;
    }
    lua_pushinteger(L, t->strides[check_dim(L, 2, t->ndim)]);
    return 1;
}

static int m_is_contiguous(lua_State *L) {
    lua_pushboolean(L, lm_tensor_is_contiguous(lm_check_tensor(L, 1)));
    return 1;
}

static int m_transpose(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int a = check_dim(L, 2, t->ndim), b = check_dim(L, 3, t->ndim);
    lua_settop(L, 3);
    lm_tensor *v = push_view(L, 1);
    int64_t sh = v->shape[a], st = v->strides[a];
    v->shape[a] = v->shape[b]; v->strides[a] = v->strides[b];
    v->shape[b] = sh; v->strides[b] = st;
    return 1;
}

static int m_permute(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    if (!lua_istable(L, 2)) lm_argerror(L, 2, "table of dimensions expected, got %s", luaL_typename(L, 2));
    if ((int64_t)lua_rawlen(L, 2) != t->ndim)
        lm_argerror(L, 2, "expected %d dimensions (one per dimension of the tensor), got %I",
                    t->ndim, (LUAI_UACINT)lua_rawlen(L, 2));
    int order[LM_MAX_DIMS], seen[LM_MAX_DIMS] = { 0 };
    for (int i = 0; i < t->ndim; i++) {
        lua_rawgeti(L, 2, i + 1);
        int isint = 0;
        lua_Integer d = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint) lm_argerror(L, 2, "entry %d must be an integer dimension", i + 1);
        lua_Integer r = d < 0 ? d + t->ndim + 1 : d;
        if (r < 1 || r > t->ndim)
            lm_argerror(L, 2, "entry %d: dimension %I out of range (the tensor has %d)", i + 1, (LUAI_UACINT)d, t->ndim);
        if (seen[r - 1]) lm_argerror(L, 2, "dimension %I appears twice (a permutation names each once)", (LUAI_UACINT)r);
        seen[r - 1] = 1;
        order[i] = (int)r - 1;
    }
    lua_settop(L, 2);
    lm_tensor *v = push_view(L, 1);
    lm_tensor *src = lm_check_tensor(L, 1);
    for (int i = 0; i < v->ndim; i++) { v->shape[i] = src->shape[order[i]]; v->strides[i] = src->strides[order[i]]; }
    return 1;
}

static int m_narrow(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int d = check_dim(L, 2, t->ndim);
    lua_Integer start = lm_check_integer(L, 3), len = lm_check_integer(L, 4);
    int64_t size = t->shape[d];
    if (start < 1 || start > size)
        lm_argerror(L, 3, "start %I out of range (dimension %d has size %I; start is 1-based)",
                    (LUAI_UACINT)start, d + 1, (LUAI_UACINT)size);
    if (len < 1 || len > size - start + 1)
        lm_argerror(L, 4, "length %I out of range (1 to %I from start %I in dimension %d of size %I)",
                    (LUAI_UACINT)len, (LUAI_UACINT)(size - start + 1), (LUAI_UACINT)start, d + 1, (LUAI_UACINT)size);
    lua_settop(L, 4);
    lm_tensor *v = push_view(L, 1);
    v->offset += (start - 1) * v->strides[d];
    v->shape[d] = len;
    set_numel(v);
    return 1;
}

static int m_select(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int d = check_dim(L, 2, t->ndim);
    lua_Integer i = lm_check_integer(L, 3);
    if (i < 0) i += t->shape[d] + 1;
    if (i < 1 || i > t->shape[d])
        lm_argerror(L, 3, "index %I out of range (dimension %d has size %I; indices are 1-based)",
                    (LUAI_UACINT)lua_tointeger(L, 3), d + 1, (LUAI_UACINT)t->shape[d]);
    if (t->ndim == 1)
        lm_argerror(L, 1, "cannot select from a 1-D tensor (0-D tensors are not supported; use narrow(1, i, 1))");
    lua_settop(L, 3);
    lm_tensor *v = push_view(L, 1);
    v->offset += (i - 1) * v->strides[d];
    for (int k = d; k < v->ndim - 1; k++) { v->shape[k] = v->shape[k + 1]; v->strides[k] = v->strides[k + 1]; }
    v->ndim--;
    set_numel(v);
    return 1;
}

static int m_unsqueeze(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lua_Integer d = lm_check_integer(L, 2);
    if (d < 0) d += t->ndim + 2;
    if (d < 1 || d > t->ndim + 1)
        lm_argerror(L, 2, "dimension %I out of range (1 to %d for a %d-D tensor; -1 appends)",
                    (LUAI_UACINT)lua_tointeger(L, 2), t->ndim + 1, t->ndim);
    if (t->ndim == LM_MAX_DIMS) lm_argerror(L, 1, "tensor already has %d dimensions (the most supported)", LM_MAX_DIMS);
    lua_settop(L, 2);
    lm_tensor *v = push_view(L, 1);
    int at = (int)d - 1;
    for (int k = v->ndim; k > at; k--) { v->shape[k] = v->shape[k - 1]; v->strides[k] = v->strides[k - 1]; }
    v->shape[at] = 1;
    v->strides[at] = at < v->ndim ? v->shape[at + 1] * v->strides[at + 1] : 1;
    v->ndim++;
    return 1;
}

static int m_squeeze(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int only = lua_isnoneornil(L, 2) ? -1 : check_dim(L, 2, t->ndim);
    lua_settop(L, 2);
    lm_tensor *v = push_view(L, 1);
    int n = 0;
    for (int k = 0; k < v->ndim; k++) {
        int drop = v->shape[k] == 1 && (only < 0 || only == k);
        if (!drop) { v->shape[n] = v->shape[k]; v->strides[n] = v->strides[k]; n++; }
    }
    if (n == 0) { v->shape[0] = 1; v->strides[0] = 1; n = 1; }   /* no 0-D tensors */
    v->ndim = n;
    return 1;
}

static int m_expand(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    if (!lua_istable(L, 2)) lm_argerror(L, 2, "table of sizes expected, got %s", luaL_typename(L, 2));
    lua_Unsigned n = lua_rawlen(L, 2);
    if ((int64_t)n < t->ndim || n > LM_MAX_DIMS)
        lm_argerror(L, 2, "expected %d to %d sizes for a %d-D tensor, got %I", t->ndim, LM_MAX_DIMS, t->ndim, (LUAI_UACINT)n);
    int lead = (int)n - t->ndim;
    int64_t shape[LM_MAX_DIMS], strides[LM_MAX_DIMS];
    for (int i = 0; i < (int)n; i++) {
        lua_rawgeti(L, 2, i + 1);
        int isint = 0;
        lua_Integer s = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint) lm_argerror(L, 2, "size %d must be an integer", i + 1);
        int src = i - lead;
        if (src < 0) {
            if (s < 1 || s > LM_MAX_SIZE) lm_argerror(L, 2, "size %d: a new leading dimension needs a positive size, got %I", i + 1, (LUAI_UACINT)s);
            shape[i] = s; strides[i] = 0;
            continue;
        }
        int64_t have = t->shape[src];
        if (s == -1 || s == have) { shape[i] = have; strides[i] = t->strides[src]; continue; }
        if (have != 1 || s < 1 || s > LM_MAX_SIZE)
            lm_argerror(L, 2, "size %d: cannot expand dimension %d of size %I to %I (only size-1 dimensions expand; -1 keeps a size)",
                        i + 1, src + 1, (LUAI_UACINT)have, (LUAI_UACINT)s);
        shape[i] = s; strides[i] = 0;
    }
    int64_t numel = 1;
    for (int i = 0; i < (int)n; i++) {
        if (numel > LM_MAX_SIZE / shape[i]) lm_argerror(L, 2, "too many elements (at most 2^40)");
        numel *= shape[i];
    }
    lua_settop(L, 2);
    lm_tensor *v = push_view(L, 1);
    v->ndim = (int)n;
    memcpy(v->shape, shape, sizeof(int64_t) * n);
    memcpy(v->strides, strides, sizeof(int64_t) * n);
    v->numel = numel;
    return 1;
}

/* Reads the shape at argument 2 for view/reshape of t, resolving one -1. */
static int read_new_shape(lua_State *L, const lm_tensor *t, int64_t *shape) {
    int ndim;
    int64_t known = lm_check_shape(L, 2, shape, &ndim, 1);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            if (known == 0 || t->numel % known != 0) lm_argerror(L, 2, "cannot infer the size marked -1");
            shape[i] = t->numel / known;
            known = t->numel;
        }
    }
    if (known != t->numel) {
        char a[128], b[128];
        lm_shape_string(shape, ndim, a, sizeof a);
        lm_shape_string(t->shape, t->ndim, b, sizeof b);
        lm_argerror(L, 2, "shape %s has %I elements, the tensor (%s) has %I", a, (LUAI_UACINT)known, b, (LUAI_UACINT)t->numel);
    }
    return ndim;
}

/* Strides that read t's elements in row-major order under a new shape of the same count,
 * without moving them: possible when each group of t's dimensions that new dimensions
 * split or merge is contiguous within itself. Returns 0 when it is not. */
static int view_strides(const lm_tensor *t, const int64_t *shape, int ndim, int64_t *strides) {
    int vd = ndim - 1;
    int64_t base = t->strides[t->ndim - 1], t_count = 1, v_count = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        t_count *= t->shape[td];
        /* A chunk ends at dimension 0 or where the next outer one is not contiguous with it. */
        if (td == 0 || (t->shape[td - 1] != 1 && t->strides[td - 1] != t_count * base)) {
            while (vd >= 0 && (v_count < t_count || shape[vd] == 1)) {
                strides[vd] = v_count * base;
                v_count *= shape[vd];
                vd--;
            }
            if (v_count != t_count) return 0;
            if (td > 0) { base = t->strides[td - 1]; t_count = 1; v_count = 1; }
        }
    }
    return vd == -1;
}

static void push_reshaped(lua_State *L, int base, const int64_t *shape, int ndim, const int64_t *strides) {
    lm_tensor *v = push_view(L, base);
    v->ndim = ndim;
    memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(v->strides, strides, sizeof(int64_t) * (size_t)ndim);
}

static int m_view(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int64_t shape[LM_MAX_DIMS], strides[LM_MAX_DIMS];
    int ndim = read_new_shape(L, t, shape);
    if (!view_strides(t, shape, ndim, strides)) {
        char a[128], b[128], c[128];
        lm_shape_string(shape, ndim, a, sizeof a);
        lm_shape_string(t->shape, t->ndim, b, sizeof b);
        lm_shape_string(t->strides, t->ndim, c, sizeof c);
        lm_argerror(L, 2, "cannot view a tensor of size %s and strides %s as %s: the dimensions it merges "
                    "are not contiguous with each other (use reshape, which copies then)", b, c, a);
    }
    lua_settop(L, 2);
    push_reshaped(L, 1, shape, ndim, strides);
    return 1;
}

/* reshape: a view when the strides allow it, else a view of t:contiguous() (a copy, by
 * the op layer's method, looked up at run time: the tensor layer is below the ops). */
static int m_reshape(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int64_t shape[LM_MAX_DIMS], strides[LM_MAX_DIMS];
    int ndim = read_new_shape(L, t, shape);
    lua_settop(L, 2);
    if (!view_strides(t, shape, ndim, strides)) {
        luaL_getmetatable(L, LM_TENSOR_MT);
        lua_getfield(L, -1, "methods");
        lua_getfield(L, -1, "contiguous");
        lua_pushvalue(L, 1);
        lua_call(L, 1, 1);
        lua_replace(L, 1);
        lua_settop(L, 2);
        t = lm_check_tensor(L, 1);
        if (!view_strides(t, shape, ndim, strides)) luaL_error(L, "reshape: contiguous() returned a strided tensor");
    }
    push_reshaped(L, 1, shape, ndim, strides);
    return 1;
}

/* __gc: the collector found the tensor. */
static int m_collect(lua_State *L) {
    lm_tensor *t = to_tensor(L, 1);
    /* Not a tensor: a table given the tensors' metatable, which the collector finalizes
     * with it. Nothing to release, and an error here would surface in whatever code the
     * collection interrupted (5.1-5.3) or as a warning (5.4). */
    if (!t) return 0;
    if (t->storage) {
        lm_storage *s = t->storage;
        t->storage = NULL;
        lm_storage_unref(s);
    }
    return 0;
}

void lm_tensor_release(lm_tensor *t) {
    lm_storage *s = t->storage;
    if (!s) return;
    t->storage = NULL;
    lm_storage_release(s);
}

/* t:free() and __close: the script released it. */
static int m_free(lua_State *L) {
    lm_tensor *t = to_tensor(L, 1);
    if (!t) lm_typeerror(L, 1, "tensor");
    lm_tensor_release(t);
    return 0;
}

static int m_is_freed(lua_State *L) {
    lm_tensor *t = to_tensor(L, 1);
    if (!t) lm_typeerror(L, 1, "tensor");
    lua_pushboolean(L, t->storage == NULL);
    return 1;
}

/* A brief description; init.lua replaces __tostring with one that prints values. */
static int m_describe(lua_State *L) {
    lm_tensor *t = to_tensor(L, 1);
    if (!t) lm_typeerror(L, 1, "tensor");
    if (!t->storage) { lua_pushfstring(L, "[lumus.Tensor %s, freed]", lm_dtype_name(t->dtype)); return 1; }
    char sh[256];
    lm_shape_string(t->shape, t->ndim, sh, sizeof sh);
    lua_pushfstring(L, "[lumus.Tensor %s of size %s]", lm_dtype_name(t->dtype), sh);
    return 1;
}

static const luaL_Reg tensor_methods[] = {
    {"shape", m_shape}, {"size", m_size}, {"dim", m_dim}, {"numel", m_numel}, {"dtype", m_dtype},
    {"to_table", m_to_table}, {"to_bytes", m_to_bytes}, {"reshape", m_reshape}, {"view", m_view},
    {"transpose", m_transpose}, {"permute", m_permute}, {"narrow", m_narrow}, {"select", m_select},
    {"expand", m_expand}, {"unsqueeze", m_unsqueeze}, {"squeeze", m_squeeze},
    {"stride", m_stride}, {"is_contiguous", m_is_contiguous}, {"free", m_free},
    {"is_freed", m_is_freed}, {"describe", m_describe},
    {"item", m_item}, {"write_bytes", m_write_bytes},
    {NULL, NULL}
};

static const luaL_Reg tensor_functions[] = {
    {"tensor", l_tensor}, {"empty", l_empty},
    {"from_bytes", l_from_bytes}, {"promote_types", l_promote_types},
    {NULL, NULL}
};

void lm_tensor_register(lua_State *L) {
    luaL_newmetatable(L, LM_TENSOR_MT);
    lua_pushboolean(L, 1);
    lua_rawsetp(L, -2, &TENSOR_MARK);
    luaL_newlib(L, tensor_methods);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "__index");
    lua_setfield(L, -2, "methods");   /* metatable.methods, for init.lua to extend */
    lua_pushcfunction(L, m_collect);
    lua_setfield(L, -2, "__gc");
    /* __close is methods.free itself: on 5.1 and LuaJIT each lua_pushcfunction makes a new
     * function value, and a second one would not be equal to t.free. */
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, "free");
    lua_setfield(L, -3, "__close");
    lua_pop(L, 1);
    lua_pushcfunction(L, m_describe);
    lua_setfield(L, -2, "__tostring");
    lua_setfield(L, -2, "Tensor");    /* module.Tensor = the metatable */
    luaL_setfuncs(L, tensor_functions, 0);
    lm_register_names(L, tensor_functions, "lumus");
    lm_register_names(L, tensor_methods, "lumus.Tensor");
}
