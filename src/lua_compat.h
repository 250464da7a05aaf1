/* The Lua C API as lumus uses it (5.4's), on Lua 5.4, 5.3, 5.1 and LuaJIT 2.1: one
 * source, this header bridging the differences. Include it instead of <lua.h> and
 * <lauxlib.h>. On 5.4 it adds nothing.
 *
 * What each older version lacks, and how it is provided:
 * - 5.3: luaL_typeerror; user values are one value per userdata, so
 *   lua_newuserdatauv(L, size, n > 0) gives the userdata a table of n slots.
 * - 5.1 and LuaJIT (LUA_VERSION_NUM 501): everything 5.2 and 5.3 added that lumus calls
 *   (lua_absindex, lua_rawlen, lua_rawgetp/rawsetp, luaL_setfuncs, luaL_newlib,
 *   luaL_testudata, luaL_requiref, luaL_tolstring, lua_stringtonumber, ...), getters that
 *   return the type pushed, and user values as the userdata's environment table.
 *   Numbers are doubles only: lua_tointegerx and lua_isinteger accept a number that is
 *   integral and within lua_Integer's range (5.4's rule for a float), so an integer
 *   argument still refuses a fraction. lua_pushfstring and luaL_error take 5.3's %I
 *   (a LUAI_UACINT): 5.1's own formatter would print "%I" and misread the arguments
 *   after it.
 * Names are mapped with macros onto functions named lmc_* (static here, or in
 * luautil.c), so a library that already has a name (LuaJIT has luaL_setfuncs,
 * lua_tointegerx, ...) is never redefined.
 * `<close>` (__close) exists on 5.4 only; __gc of a userdata works on every version. */
#ifndef LUMUS_LUA_COMPAT_H
#define LUMUS_LUA_COMPAT_H

#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>

#if LUA_VERSION_NUM < 503
#if LUA_VERSION_NUM != 501
#error "lumus supports Lua 5.1 (and LuaJIT 2.1), 5.3 and 5.4"
#endif

#ifndef LUA_OK
#define LUA_OK 0
#endif
#define LUA_LOADED_TABLE "_LOADED"
/* The type lua_pushfstring's %I reads (see lmc_pushvfstring in luautil.c). */
#define LUAI_UACINT long long
typedef unsigned long long lua_Unsigned;

/* Strict conversions and the %I-aware formatter (luautil.c). */
lua_Integer lmc_tointegerx(lua_State *L, int idx, int *isint);
int lmc_isinteger(lua_State *L, int idx);
const char *lmc_pushvfstring(lua_State *L, const char *fmt, va_list ap);
const char *lmc_pushfstring(lua_State *L, const char *fmt, ...);
int lmc_error(lua_State *L, const char *fmt, ...);

static inline int lmc_absindex(lua_State *L, int idx) {
    return idx > 0 || idx <= LUA_REGISTRYINDEX ? idx : lua_gettop(L) + idx + 1;
}

/* Getters that return the type of the value they push (5.3's). */
static inline int lmc_getfield(lua_State *L, int idx, const char *k) {
    (lua_getfield)(L, idx, k);
    return lua_type(L, -1);
}
static inline int lmc_rawget(lua_State *L, int idx) {
    (lua_rawget)(L, idx);
    return lua_type(L, -1);
}
static inline int lmc_rawgeti(lua_State *L, int idx, lua_Integer n) {
    (lua_rawgeti)(L, idx, (int)n);
    return lua_type(L, -1);
}
static inline int lmc_gettable(lua_State *L, int idx) {
    (lua_gettable)(L, idx);
    return lua_type(L, -1);
}
static inline int lmc_getmetafield(lua_State *L, int obj, const char *e) {
    return (luaL_getmetafield)(L, obj, e) ? lua_type(L, -1) : LUA_TNIL;
}
static inline int lmc_rawgetp(lua_State *L, int idx, const void *p) {
    idx = lmc_absindex(L, idx);
    lua_pushlightuserdata(L, (void *)p);
    return lmc_rawget(L, idx);
}
static inline void lmc_rawsetp(lua_State *L, int idx, const void *p) {
    idx = lmc_absindex(L, idx);
    lua_pushlightuserdata(L, (void *)p);
    lua_insert(L, -2);
    lua_rawset(L, idx);
}

static inline lua_Number lmc_tonumberx(lua_State *L, int idx, int *isnum) {
    int ok = lua_isnumber(L, idx);
    if (isnum) *isnum = ok;
    return ok ? lua_tonumber(L, idx) : 0;
}

static inline void *lmc_testudata(lua_State *L, int idx, const char *tname) {
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx)) return NULL;
    lua_getfield(L, LUA_REGISTRYINDEX, tname);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? p : NULL;
}

static inline void lmc_setmetatable(lua_State *L, const char *tname) {
    lua_getfield(L, LUA_REGISTRYINDEX, tname);
    lua_setmetatable(L, -2);
}

static inline void lmc_setfuncs(lua_State *L, const luaL_Reg *l, int nup) {
    luaL_checkstack(L, nup + 1, "too many upvalues");
    for (; l->name; l++) {
        for (int i = 0; i < nup; i++) lua_pushvalue(L, -nup);
        lua_pushcclosure(L, l->func, nup);
        lua_setfield(L, -(nup + 2), l->name);
    }
    lua_pop(L, nup);
}

static inline lua_Integer lmc_len(lua_State *L, int idx) {
    return (lua_Integer)lua_objlen(L, idx);
}

static inline int lmc_getsubtable(lua_State *L, int idx, const char *fname) {
    idx = lmc_absindex(L, idx);
    if (lmc_getfield(L, idx, fname) == LUA_TTABLE) return 1;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, idx, fname);
    return 0;
}

static inline void lmc_requiref(lua_State *L, const char *modname, lua_CFunction openf, int glb) {
    luaL_checkstack(L, 3, "not enough stack slots available");
    lmc_getsubtable(L, LUA_REGISTRYINDEX, "_LOADED");
    if (lmc_getfield(L, -1, modname) == LUA_TNIL || (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1))) {
        lua_pop(L, 1);
        lua_pushcfunction(L, openf);
        lua_pushstring(L, modname);
        lua_call(L, 1, 1);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, modname);
    }
    lua_remove(L, -2);
    if (glb) {
        lua_pushvalue(L, -1);
        lua_setglobal(L, modname);
    }
}

static inline const char *lmc_tolstring(lua_State *L, int idx, size_t *len) {
    idx = lmc_absindex(L, idx);
    if (luaL_callmeta(L, idx, "__tostring")) {
        if (!lua_isstring(L, -1)) luaL_error(L, "'__tostring' must return a string");
    } else {
        switch (lua_type(L, idx)) {
        case LUA_TNUMBER:
        case LUA_TSTRING: lua_pushvalue(L, idx); break;
        case LUA_TBOOLEAN: lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false"); break;
        case LUA_TNIL: lua_pushliteral(L, "nil"); break;
        default: {
            const char *kind = lmc_getmetafield(L, idx, "__name") == LUA_TSTRING ? lua_tostring(L, -1)
                                                                               : luaL_typename(L, idx);
            lua_pushfstring(L, "%s: %p", kind, lua_topointer(L, idx));
            if (kind != luaL_typename(L, idx)) lua_remove(L, -2);
        }
        }
    }
    return lua_tolstring(L, -1, len);
}

/* Pushes the number the whole string s spells and returns strlen(s) + 1; 0 (nothing
 * pushed) when it spells none. */
static inline size_t lmc_stringtonumber(lua_State *L, const char *s) {
    lua_pushstring(L, s);
    if (!lua_isnumber(L, -1)) { lua_pop(L, 1); return 0; }
    lua_pushnumber(L, lua_tonumber(L, -1));
    lua_remove(L, -2);
    return strlen(s) + 1;
}

/* Metatables name their type in __name, which messages show (5.3's luaL_newmetatable). */
static inline int lmc_newmetatable(lua_State *L, const char *tname) {
    if (!(luaL_newmetatable)(L, tname)) return 0;
    lua_pushstring(L, tname);
    lua_setfield(L, -2, "__name");
    return 1;
}

/* 5.1 loads text and binary chunks alike; mode is not checked. */
static inline int lmc_loadbufferx(lua_State *L, const char *buf, size_t size, const char *name, const char *mode) {
    (void)mode;
    return luaL_loadbuffer(L, buf, size, name);
}

#define lua_absindex lmc_absindex
#define lua_getfield lmc_getfield
#define lua_rawget lmc_rawget
#define lua_rawgeti lmc_rawgeti
#define lua_gettable lmc_gettable
#define luaL_getmetafield lmc_getmetafield
#define lua_rawgetp lmc_rawgetp
#define lua_rawsetp lmc_rawsetp
#define lua_rawlen(L, i) ((lua_Unsigned)lua_objlen(L, (i)))
#define luaL_len lmc_len
#define lua_tonumberx lmc_tonumberx
#undef lua_tointeger
#define lua_tointegerx lmc_tointegerx
#define lua_tointeger(L, i) lmc_tointegerx(L, (i), NULL)
#define lua_isinteger lmc_isinteger
#define luaL_testudata lmc_testudata
#define luaL_setmetatable lmc_setmetatable
#define luaL_setfuncs lmc_setfuncs
#undef luaL_newlibtable
#undef luaL_newlib
#define luaL_newlibtable(L, l) lua_createtable(L, 0, (int)(sizeof(l) / sizeof((l)[0]) - 1))
#define luaL_newlib(L, l) (luaL_newlibtable(L, l), luaL_setfuncs(L, l, 0))
#define luaL_getsubtable lmc_getsubtable
#define luaL_requiref lmc_requiref
#define luaL_tolstring lmc_tolstring
#define lua_stringtonumber lmc_stringtonumber
#define luaL_newmetatable lmc_newmetatable
#define luaL_loadbufferx lmc_loadbufferx
#define lua_pushfstring lmc_pushfstring
#define lua_pushvfstring lmc_pushvfstring
#define luaL_error lmc_error
#endif /* LUA_VERSION_NUM < 503 */

#if LUA_VERSION_NUM < 504
/* User values: a table of slots, as the userdata's one user value (5.3) or environment
 * (5.1). Only userdata made with slots (nuv > 0) have one: on 5.1 another userdata's
 * environment is the globals table. */
#if LUA_VERSION_NUM >= 503
#define lmc_set_slots(L, idx) lua_setuservalue(L, (idx))
#define lmc_push_slots(L, idx) ((void)lua_getuservalue(L, (idx)))
#else
#define lmc_set_slots(L, idx) ((void)lua_setfenv(L, (idx)))
#define lmc_push_slots(L, idx) lua_getfenv(L, (idx))
#endif

static inline void *lmc_newuserdatauv(lua_State *L, size_t size, int nuv) {
    void *p = lua_newuserdata(L, size);
    if (nuv > 0) {
        lua_createtable(L, nuv, 0);
        lmc_set_slots(L, -2);
    }
    return p;
}

/* Pops the value on top into slot n; 0 when the userdata has no slots. */
static inline int lmc_setiuservalue(lua_State *L, int idx, int n) {
    idx = lua_absindex(L, idx);
    lmc_push_slots(L, idx);
    if (!lua_istable(L, -1)) { lua_pop(L, 2); return 0; }
    lua_insert(L, -2);
    lua_rawseti(L, -2, n);
    lua_pop(L, 1);
    return 1;
}

/* Pushes slot n (nil when absent) and returns its type; LUA_TNONE without slots. */
static inline int lmc_getiuservalue(lua_State *L, int idx, int n) {
    idx = lua_absindex(L, idx);
    lmc_push_slots(L, idx);
    if (!lua_istable(L, -1)) { lua_pop(L, 1); lua_pushnil(L); return LUA_TNONE; }
    lua_rawgeti(L, -1, n);
    lua_remove(L, -2);
    return lua_type(L, -1);
}

/* 5.4's message: "<tname> expected, got <__name or type>". */
static inline int lmc_typeerror(lua_State *L, int arg, const char *tname) {
    const char *got;
    if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
    else if (lua_type(L, arg) == LUA_TLIGHTUSERDATA) got = "light userdata";
    else got = luaL_typename(L, arg);
    return luaL_argerror(L, arg, lua_pushfstring(L, "%s expected, got %s", tname, got));
}

#define lua_newuserdatauv lmc_newuserdatauv
#define lua_setiuservalue lmc_setiuservalue
#define lua_getiuservalue lmc_getiuservalue
#define luaL_typeerror lmc_typeerror
#endif /* LUA_VERSION_NUM < 504 */

#endif
