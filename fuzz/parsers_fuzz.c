/* libFuzzer harness for the parsers of outside data: lumus.from_bytes with a shape,
 * lumus.tensor over nested tables, and shape parsing (zeros/full/empty, reshape,
 * to_bytes ranges). The real module functions run in one lua_State, called through
 * lua_pcall with Lua values decoded from the input bytes.
 *
 * Input: byte 0 picks the target (below); the rest is a sequence of values, each an
 * opcode byte and its payload:
 *   0 nil            1 integer (8 bytes LE)    2 small integer (1 signed byte)
 *   3 double (8 LE)  4 special number (1 byte: NaN, inf, -0.0, 2^31, 2^40, ...)
 *   5 string (2-byte LE length, then bytes)   6 boolean (1 byte)
 *   7 array (1-byte count, then that many values; nil values leave holes)
 *   8 sparse table (1-byte count of key byte + value pairs)
 *   9 array with a metatable whose __index and __len raise (lumus must not call them)
 *  10 an earlier table again (1-byte index): shared rows and cycles
 * Missing bytes read as zero, so every input is valid.
 *
 * Checks beyond "no crash, no sanitizer report": an error is a string naming the
 * function; from_bytes returns the bytes it was given; a tensor made from nested tables
 * converts back to the same bytes; device memory in use returns to its starting value.
 */
#include "lua_compat.h"
#include <lualib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int luaopen_lumus_core(lua_State *L);

#define FUZZ_MARK "fuzz: a metamethod was called"
#define MAX_DEPTH 12
#define MAX_TABLES 64

typedef struct reader { const uint8_t *p; size_t n; int tables; } reader;

static lua_State *L;
static lua_Integer baseline;

static uint8_t next_byte(reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static uint64_t next_u64(reader *r) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)next_byte(r) << (8 * i);
    return v;
}

static int raise_mark(lua_State *S) { return luaL_error(S, FUZZ_MARK); }

/* Tables built so far for this input, kept in a registry list (opcode 10 refers back). */
static void remember_table(reader *r) {
    if (r->tables >= MAX_TABLES) return;
    lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.tables");
    lua_pushvalue(L, -2);
    lua_rawseti(L, -2, ++r->tables);
    lua_pop(L, 1);
}

static void push_value(reader *r, int depth) {
    luaL_checkstack(L, 8, "fuzz");
    uint8_t op = next_byte(r);
    if (depth > MAX_DEPTH) op = 2;
    switch (op % 11) {
    case 0: lua_pushnil(L); break;
    case 1: lua_pushinteger(L, (lua_Integer)next_u64(r)); break;
    case 2: lua_pushinteger(L, (int8_t)next_byte(r)); break;
    case 3: {
        uint64_t bits = next_u64(r);
        double d;
        memcpy(&d, &bits, sizeof d);
        lua_pushnumber(L, d);
        break;
    }
    case 4: {
        static const double special[] = { NAN, INFINITY, -INFINITY, -0.0, 0.5, 1.5, 2147483648.0,
                                          1099511627776.0, 9223372036854775808.0, 1e300, 3.0, 1e-45 };
        lua_pushnumber(L, special[next_byte(r) % (sizeof special / sizeof special[0])]);
        break;
    }
    case 5: {
        size_t len = next_byte(r);
        len |= (size_t)next_byte(r) << 8;
        if (len > r->n) len = r->n;
        lua_pushlstring(L, (const char *)r->p, len);
        r->p += len;
        r->n -= len;
        break;
    }
    case 6: lua_pushboolean(L, next_byte(r) & 1); break;
    case 7: case 9: {
        int count = next_byte(r) % 17;
        lua_createtable(L, count, 0);
        remember_table(r);
        for (int i = 1; i <= count; i++) {
            push_value(r, depth + 1);
            lua_rawseti(L, -2, i);
        }
        if (op % 11 == 9) {
            lua_createtable(L, 0, 2);
            lua_pushcfunction(L, raise_mark);
            lua_setfield(L, -2, "__index");
            lua_pushcfunction(L, raise_mark);
            lua_setfield(L, -2, "__len");
            lua_setmetatable(L, -2);
        }
        break;
    }
    case 8: {
        int count = next_byte(r) % 9;
        lua_createtable(L, 0, count);
        remember_table(r);
        for (int i = 0; i < count; i++) {
            lua_pushinteger(L, next_byte(r) % 20);
            push_value(r, depth + 1);
            lua_rawset(L, -3);
        }
        break;
    }
    default: {   /* 10: an earlier table */
        int k = next_byte(r);
        lua_getfield(L, LUA_REGISTRYINDEX, "fuzz.tables");
        if (r->tables == 0) { lua_pop(L, 1); lua_pushnil(L); break; }
        lua_rawgeti(L, -1, 1 + k % r->tables);
        lua_remove(L, -2);
        break;
    }
    }
}

/* Pushes module.name (the core table is at index 1, its Tensor methods at index 2). */
static void push_fn(int table, const char *name) { lua_getfield(L, table, name); }

static void check_error(const char *fname) {
    if (lua_type(L, -1) != LUA_TSTRING) {
        fprintf(stderr, "%s raised a %s, not a string\n", fname, luaL_typename(L, -1));
        abort();
    }
    const char *e = lua_tostring(L, -1);
    if (strstr(e, FUZZ_MARK)) { fprintf(stderr, "%s called a metamethod: %s\n", fname, e); abort(); }
    if (!strstr(e, fname) || strstr(e, "to '?'")) {
        fprintf(stderr, "%s: message does not name it: %s\n", fname, e);
        abort();
    }
}

/* Calls the function under the nargs values on top; returns 1 when it succeeded (its
 * one result on top), else checks the error and returns 0. */
static int call(const char *fname, int nargs) {
    if (lua_pcall(L, nargs, 1, 0) == LUA_OK) return 1;
    check_error(fname);
    return 0;
}

/* The bytes of the tensor on top (leaves the string above it). */
static void push_bytes_of_top(void) {
    lua_getfield(L, 2, "to_bytes");
    lua_pushvalue(L, -2);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) { fprintf(stderr, "to_bytes failed: %s\n", lua_tostring(L, -1)); abort(); }
}

static void run_one(reader *r) {
    int target = next_byte(r) % 6;
    switch (target) {
    case 0: {   /* from_bytes(string, shape): must give the same bytes back */
        push_fn(1, "from_bytes");
        push_value(r, 0);
        push_value(r, 0);
        lua_pushvalue(L, -2);
        lua_insert(L, -4);             /* keep the input value below the call */
        if (call("from_bytes", 2)) {
            if (lua_type(L, -2) == LUA_TNUMBER) lua_tolstring(L, -2, NULL);   /* as Lua coerced it */
            push_bytes_of_top();
            if (!lua_rawequal(L, -1, -3)) { fprintf(stderr, "from_bytes did not round-trip\n"); abort(); }
        }
        break;
    }
    case 1: {   /* tensor(nested): to_table and back gives the same bytes */
        push_fn(1, "tensor");
        push_value(r, 0);
        if (call("tensor", 1)) {
            push_bytes_of_top();
            push_fn(1, "tensor");
            lua_getfield(L, 2, "to_table");
            lua_pushvalue(L, -4);
            if (lua_pcall(L, 1, 1, 0) != LUA_OK) abort();
            if (lua_pcall(L, 1, 1, 0) != LUA_OK) { fprintf(stderr, "tensor(to_table()) failed\n"); abort(); }
            push_bytes_of_top();
            if (!lua_rawequal(L, -1, -3)) { fprintf(stderr, "tensor/to_table did not round-trip\n"); abort(); }
        }
        break;
    }
    case 2: case 3: {   /* zeros/empty(shape), full(shape, v) */
        static const char *const makers[] = { "zeros", "empty", "full", "ones" };
        const char *name = makers[next_byte(r) % 4];
        push_fn(1, name);
        push_value(r, 0);
        push_value(r, 0);
        call(name, 2);
        break;
    }
    case 4: {   /* reshape(t, shape) of a small tensor */
        push_fn(1, "zeros");
        lua_pushinteger(L, 1 + next_byte(r) % 64);
        if (!call("zeros", 1)) abort();
        push_fn(2, "reshape");
        lua_insert(L, -2);
        push_value(r, 0);
        call("reshape", 2);
        break;
    }
    default: {  /* to_bytes(t, first, count) */
        push_fn(1, "ones");
        lua_pushinteger(L, 1 + next_byte(r) % 64);
        if (!call("ones", 1)) abort();
        push_fn(2, "to_bytes");
        lua_insert(L, -2);
        push_value(r, 0);
        push_value(r, 0);
        call("to_bytes", 3);
        break;
    }
    }
}

static lua_Integer memory_in_use(void) {
    lua_getfield(L, 1, "synchronize");
    lua_call(L, 0, 0);
    lua_getfield(L, 1, "memory");
    lua_call(L, 0, 1);
    lua_getfield(L, -1, "in_use");
    lua_Integer v = lua_tointeger(L, -1);
    lua_pop(L, 2);
    return v;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    L = luaL_newstate();
    luaL_openlibs(L);
    luaL_requiref(L, "lumus.core", luaopen_lumus_core, 0);     /* index 1 */
    lua_getfield(L, 1, "Tensor");
    lua_getfield(L, -1, "methods");                             /* index 2 */
    lua_remove(L, -2);
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "lumus.Tensor");   /* so messages say lumus.Tensor.reshape */
    lua_pop(L, 1);
    /* No input may allocate much: 16 MiB above what the context holds. */
    baseline = memory_in_use();
    lua_getfield(L, 1, "set_memory_limit");
    lua_pushinteger(L, baseline + (16 << 20));
    lua_call(L, 1, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = { data, size, 0 };
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.tables");
    run_one(&r);
    lua_settop(L, 2);
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.tables");
    lua_gc(L, LUA_GCCOLLECT, 0);
    lua_Integer now = memory_in_use();
    if (now != baseline) {
        fprintf(stderr, "device memory in use %lld after the input, %lld before\n", (long long)now, (long long)baseline);
        abort();
    }
    return 0;
}
