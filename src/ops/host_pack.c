/* lumus.core._host: the host-side integer and float steps that Lua 5.3+ writes with
 * string.pack and 64-bit integer operators, in C so that lua/lumus/compat.lua gives the
 * same bits under Lua 5.1, LuaJIT, 5.3 and 5.4 (numbers are doubles on the first two).
 *
 *   pack(kind, list, n)          -> the little-endian bytes of list[1..n]
 *   unpack(kind, bytes [, pos [, n]]) -> a list of n values (all that fit by default)
 *   f32(x)                       -> x rounded to float32 (to nearest even), as a double
 *   float_bits(x) / bits_float(u) -> float32 bits of f32(x) / the float32 with bits u
 *   philox(c0, c1, c2, c3, k0, k1) -> the 4 words of one Philox4x32-10 block
 *   philox_block(seed, offset, block) -> that block of lumus's generator (docs/random.md)
 *   splitmix64(seed, i)          -> the i-th uniform in [0, 1) of SplitMix64 from seed
 *
 * kind: "f32", "f64", "i64", "i32", "u32", "u16" or "u8". Packing checks each value:
 * integer kinds take integral numbers in their range only (no silent truncation). i64
 * values beyond 2^53 are exact only where Lua has 64-bit integers (5.3+). */
#include "ops.h"
#include "../luautil.h"
#include <float.h>
#include <math.h>
#include <string.h>

enum kind { K_F32, K_F64, K_I64, K_I32, K_U32, K_U16, K_U8 };
static const char *const kind_names[] = { "f32", "f64", "i64", "i32", "u32", "u16", "u8", NULL };
static const size_t kind_size[] = { 4, 8, 8, 4, 4, 2, 1 };

static enum kind check_kind(lua_State *L, int arg) {
    const char *s = lm_check_lstring(L, arg, NULL);
    for (int i = 0; kind_names[i]; i++)
        if (strcmp(s, kind_names[i]) == 0) return (enum kind)i;
    return (enum kind)lm_argerror(L, arg, "unknown kind '%s' (f32, f64, i64, i32, u32, u16 or u8)", s);
}

/* x rounded to float32; values at or beyond the rounding midpoint above FLT_MAX give
 * +-inf (a plain cast of an out-of-range double is undefined in C). */
static float to_float(double x) {
    if (isfinite(x) && fabs(x) > FLT_MAX) {
        const double midpoint = ldexp(1.0, 128) - ldexp(1.0, 103);
        if (fabs(x) >= midpoint) return x < 0 ? -HUGE_VALF : HUGE_VALF;
        return x < 0 ? -FLT_MAX : FLT_MAX;
    }
    return (float)x;
}

static uint32_t float_bits(double x) {
    float f = to_float(x);
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static void put_le(unsigned char *p, uint64_t v, size_t size) {
    for (size_t i = 0; i < size; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, size_t size) {
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Element i (on top of the stack) as an integer of kind k, or an error naming it. */
static uint64_t integer_element(lua_State *L, enum kind k, lua_Integer i) {
    static const double lo[] = { [K_I64] = -9223372036854775808.0, [K_I32] = -2147483648.0,
                                 [K_U32] = 0, [K_U16] = 0, [K_U8] = 0 };
    static const double hi[] = { [K_I64] = 9223372036854775807.0, [K_I32] = 2147483647.0,
                                 [K_U32] = 4294967295.0, [K_U16] = 65535, [K_U8] = 255 };
#if LUA_VERSION_NUM >= 503
    if (k == K_I64 && lua_isinteger(L, -1)) return (uint64_t)lua_tointeger(L, -1);
#endif
    double v = lua_tonumber(L, -1);
    if (k == K_I64 && v == floor(v) && v >= lo[k] && v < -lo[k]) return (uint64_t)(int64_t)v;
    if (!(v == floor(v) && v >= lo[k] && v <= hi[k]))
        lm_argerror(L, 2, "element %d (%s) does not fit %s", (int)i, lua_tostring(L, -1), kind_names[k]);
    return k == K_I32 ? (uint64_t)(uint32_t)(int32_t)v : (uint64_t)v;
}

static int l_pack(lua_State *L) {
    enum kind k = check_kind(L, 1);
    lm_check_type(L, 2, LUA_TTABLE);
    lua_Integer n = lm_check_integer(L, 3);
    if (n < 0) lm_argerror(L, 3, "count must be at least 0");
    size_t size = kind_size[k];
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= n; i++) {
        unsigned char bytes[8];
        lua_rawgeti(L, 2, i);
        if (lua_type(L, -1) != LUA_TNUMBER)
            lm_argerror(L, 2, "element %d is a %s, not a number", (int)i, luaL_typename(L, -1));
        uint64_t v;
        if (k == K_F32) v = float_bits(lua_tonumber(L, -1));
        else if (k == K_F64) { double d = lua_tonumber(L, -1); memcpy(&v, &d, sizeof v); }
        else v = integer_element(L, k, i);
        lua_pop(L, 1);
        put_le(bytes, v, size);
        luaL_addlstring(&b, (const char *)bytes, size);
    }
    luaL_pushresult(&b);
    return 1;
}

static int l_unpack(lua_State *L) {
    enum kind k = check_kind(L, 1);
    size_t len, size = kind_size[k];
    const unsigned char *s = (const unsigned char *)lm_check_lstring(L, 2, &len);
    lua_Integer pos = lm_opt_integer(L, 3, 1);
    if (pos < 1 || (size_t)(pos - 1) > len) lm_argerror(L, 3, "position %d is outside the %d bytes", (int)pos, (int)len);
    size_t avail = (len - (size_t)(pos - 1)) / size;
    lua_Integer n = lm_opt_integer(L, 4, (lua_Integer)avail);
    if (n < 0 || (size_t)n > avail) lm_argerror(L, 4, "%d values do not fit in the bytes from position %d", (int)n, (int)pos);
    lua_createtable(L, (int)n, 0);
    s += pos - 1;
    for (lua_Integer i = 0; i < n; i++, s += size) {
        uint64_t v = get_le(s, size);
        switch (k) {
        case K_F32: { uint32_t u = (uint32_t)v; float f; memcpy(&f, &u, sizeof f); lua_pushnumber(L, f); break; }
        case K_F64: { double d; memcpy(&d, &v, sizeof d); lua_pushnumber(L, d); break; }
        case K_I64: lua_pushinteger(L, (lua_Integer)(int64_t)v); break;   /* 5.1: rounded beyond 2^53 */
        case K_I32: lua_pushinteger(L, (lua_Integer)(int32_t)(uint32_t)v); break;
        default: lua_pushinteger(L, (lua_Integer)v); break;
        }
        lua_rawseti(L, -2, (int)(i + 1));
    }
    return 1;
}

static int l_f32(lua_State *L) {
    lua_pushnumber(L, (double)to_float(lm_check_number(L, 1)));
    return 1;
}

static int l_float_bits(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)float_bits(lm_check_number(L, 1)));
    return 1;
}

static uint32_t check_u32(lua_State *L, int arg) {
    lua_Integer v = lm_check_integer(L, arg);
    if (v < 0 || v > (lua_Integer)UINT32_MAX) lm_argerror(L, arg, "a 32-bit word (0..4294967295) expected");
    return (uint32_t)v;
}

static int l_bits_float(lua_State *L) {
    uint32_t u = check_u32(L, 1);
    float f;
    memcpy(&f, &u, sizeof f);
    lua_pushnumber(L, f);
    return 1;
}

/* Philox4x32-10 (Salmon et al., SC11): 10 rounds of two 32x32->64 multiplies. */
static void philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1, n3 = (uint32_t)p0;
        c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
}

static int push_words(lua_State *L, const uint32_t c[4]) {
    for (int i = 0; i < 4; i++) lua_pushinteger(L, (lua_Integer)c[i]);
    return 4;
}

static int l_philox(lua_State *L) {
    uint32_t c[4] = { check_u32(L, 1), check_u32(L, 2), check_u32(L, 3), check_u32(L, 4) };
    philox(c, check_u32(L, 5), check_u32(L, 6));
    return push_words(L, c);
}

/* Block `block` of the generator with this seed (the key) and offset: counter
 * {block lo, block hi, offset lo, offset hi} (seed and offset as 64-bit words). */
static int l_philox_block(lua_State *L) {
    uint64_t seed = (uint64_t)lm_check_integer(L, 1), offset = (uint64_t)lm_check_integer(L, 2);
    uint64_t block = (uint64_t)lm_check_integer(L, 3);
    uint32_t c[4] = { (uint32_t)block, (uint32_t)(block >> 32), (uint32_t)offset, (uint32_t)(offset >> 32) };
    philox(c, (uint32_t)seed, (uint32_t)(seed >> 32));
    return push_words(L, c);
}

/* SplitMix64 (Steele, Lea, Flood 2014): output i mixes seed + i * gamma (mod 2^64); the
 * top 53 bits make a double in [0, 1) exactly. */
static int l_splitmix64(lua_State *L) {
    uint64_t seed = (uint64_t)lm_check_integer(L, 1), i = (uint64_t)lm_check_integer(L, 2);
    uint64_t z = seed + i * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    lua_pushnumber(L, ldexp((double)(z >> 11), -53));
    return 1;
}

const luaL_Reg lm_host_pack_functions[] = {
    {"pack", l_pack}, {"unpack", l_unpack}, {"f32", l_f32},
    {"float_bits", l_float_bits}, {"bits_float", l_bits_float},
    {"philox", l_philox}, {"philox_block", l_philox_block}, {"splitmix64", l_splitmix64},
    {NULL, NULL}
};
