/* lumus's lauxlib: function names, argument errors and options tables (see luautil.h). */
#include "luautil.h"
#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Registry key of the table C function -> registered name (lm_register_name). */
static const char NAMES_KEY = 0;

static void push_names(lua_State *L) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &NAMES_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &NAMES_KEY);
    }
}

/* A C function's key in that table: the bytes of its pointer (on Lua 5.1 each
 * lua_pushcfunction makes a new closure, so the function value cannot be the key). */
static void push_function_key(lua_State *L, lua_CFunction f) {
    lua_pushlstring(L, (const char *)&f, sizeof f);
}

void lm_register_name(lua_State *L, lua_CFunction f, const char *name) {
    push_names(L);
    push_function_key(L, f);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        push_function_key(L, f);
        lua_pushstring(L, name);
        lua_rawset(L, -4);
    }
    lua_pop(L, 2);
}

void lm_register_names(lua_State *L, const luaL_Reg *fns, const char *prefix) {
    for (; fns->name; fns++) {
        if (!fns->func) continue;
        lua_pushfstring(L, "%s.%s", prefix, fns->name);
        lm_register_name(L, fns->func, lua_tostring(L, -1));
        lua_pop(L, 1);
    }
}

/* The running C function's registered name, pushed (nil if it has none). */
static void push_registered_name(lua_State *L, lua_Debug *ar) {
    lua_getinfo(L, "f", ar);
    lua_CFunction f = lua_tocfunction(L, -1);
    lua_pop(L, 1);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &NAMES_KEY) != LUA_TTABLE || !f) {
        lua_pop(L, 1);
        lua_pushnil(L);
        return;
    }
    push_function_key(L, f);
    lua_rawget(L, -2);
    lua_remove(L, -2);
}

/* The name the call site gives the running function (lua_getinfo "n"), or NULL where
 * there is none or it may name another function. A registered function is named by its
 * call site only when the site says its own name (its registered name's last part) or
 * an event (a metamethod): LuaJIT replaces a Lua function's frame by the function it
 * tail-calls, so it reports the name by which that Lua function was called ('make' for
 * `local function make() return lumus.zeros(bad) end`), or none. Where the site says
 * another name (that case, or an alias: `local z = lumus.zeros`), *short_name is the
 * registered name's last part ("zeros", what 5.4 reports for the tail call), else NULL.
 * The registered name (or nil) is left pushed. */
static const char *call_site_name(lua_State *L, lua_Debug *ar, const char **namewhat,
                                  const char **short_name) {
    *namewhat = "";
    *short_name = NULL;
    if (!lua_getstack(L, 0, ar)) { lua_pushnil(L); return NULL; }
    push_registered_name(L, ar);
    if (!lua_getinfo(L, "n", ar) || !ar->name || strcmp(ar->name, "?") == 0) return NULL;
    const char *what = ar->namewhat ? ar->namewhat : "";
    if (strcmp(what, "metamethod") != 0 && lua_type(L, -1) == LUA_TSTRING) {
        const char *reg = lua_tostring(L, -1);   /* kept alive by the names table */
        const char *dot = strrchr(reg, '.');
        const char *last = dot ? dot + 1 : reg;
        if (strcmp(last, ar->name) != 0) {
            *short_name = last;
            return NULL;
        }
    }
    *namewhat = what;
    return ar->name;
}

const char *lm_fname(lua_State *L) {
    lua_Debug ar;
    const char *namewhat, *short_name;
    const char *name = call_site_name(L, &ar, &namewhat, &short_name);
    if (short_name) {
        lua_pop(L, 1);
        return short_name;
    }
    if (name) {
        lua_pop(L, 1);
#if LUA_VERSION_NUM < 504
        /* A metamethod by its event, as 5.4 names it ("add"); 5.1, LuaJIT and 5.3 say "__add". */
        if (strcmp(namewhat, "metamethod") == 0 && strncmp(name, "__", 2) == 0) return name + 2;
#endif
        return name;
    }
    /* No call-site name: the registered one (kept alive by the names table). */
    const char *reg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "lumus";
    lua_pop(L, 1);
    return reg;
}

int lm_argerror(lua_State *L, int arg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *msg = lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_Debug ar;
    if (!lua_getstack(L, 0, &ar)) return luaL_error(L, "bad argument #%d (%s)", arg, msg);
    const char *namewhat, *short_name;
    const char *name = call_site_name(L, &ar, &namewhat, &short_name);
    lua_pop(L, 1);
    if (name && strcmp(namewhat, "method") == 0) {
        arg--;   /* self is not counted */
        if (arg == 0) return luaL_error(L, "calling '%s' on bad self (%s)", name, msg);
    }
    return luaL_error(L, "bad argument #%d to '%s' (%s)", arg, lm_fname(L), msg);
}

int lm_typeerror(lua_State *L, int arg, const char *tname) {
    const char *got;
    if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING) got = lua_tostring(L, -1);
    else if (lua_type(L, arg) == LUA_TLIGHTUSERDATA) got = "light userdata";
    else got = luaL_typename(L, arg);
    return lm_argerror(L, arg, "%s expected, got %s", tname, got);
}

lua_Integer lm_check_integer(lua_State *L, int arg) {
    int isint = 0;
    lua_Integer v = lua_tointegerx(L, arg, &isint);
    if (!isint) {
        if (lua_isnumber(L, arg)) lm_argerror(L, arg, "number has no integer representation");
        lm_typeerror(L, arg, "number");
    }
    return v;
}

lua_Integer lm_opt_integer(lua_State *L, int arg, lua_Integer dflt) {
    return lua_isnoneornil(L, arg) ? dflt : lm_check_integer(L, arg);
}

lua_Number lm_check_number(lua_State *L, int arg) {
    int isnum = 0;
    lua_Number v = lua_tonumberx(L, arg, &isnum);
    if (!isnum) lm_typeerror(L, arg, "number");
    return v;
}

const char *lm_check_lstring(lua_State *L, int arg, size_t *len) {
    const char *s = lua_tolstring(L, arg, len);
    if (!s) lm_typeerror(L, arg, "string");
    return s;
}

void lm_check_type(lua_State *L, int arg, int type) {
    if (lua_type(L, arg) != type) lm_typeerror(L, arg, lua_typename(L, type));
}

void lm_shape_string(const int64_t *shape, int ndim, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < ndim && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, i ? "x%lld" : "%lld", (long long)shape[i]);
}

/* ---- options tables ---- */

static int is_known(const char *key, const char *const known[]) {
    for (int i = 0; known[i]; i++)
        if (strcmp(key, known[i]) == 0) return 1;
    return 0;
}

/* Raises naming the key at stack top (its string, else its type: never converted, which
 * would confuse lua_next) and listing the known keys. */
static void unknown_option(lua_State *L, int arg, const char *const known[]) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; known[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, known[i]);
    }
    luaL_pushresult(&b);
    const char *list = known[0] ? lua_tostring(L, -1) : "none";
    if (lua_type(L, -2) == LUA_TSTRING)
        lm_argerror(L, arg, "unknown option '%s' (known: %s)", lua_tostring(L, -2), list);
    lm_argerror(L, arg, "unknown option: a %s key (options are named; known: %s)", luaL_typename(L, -2), list);
}

int lm_check_options(lua_State *L, int arg, const char *const known[]) {
    if (lua_isnoneornil(L, arg)) return 0;
    if (!lua_istable(L, arg)) lm_typeerror(L, arg, "options table");
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || !is_known(lua_tostring(L, -1), known))
            unknown_option(L, arg, known);
    }
    return 1;
}

void lm_push_option(lua_State *L, int arg, const char *key) {
    if (!lua_istable(L, arg)) { lua_pushnil(L); return; }
    arg = lua_absindex(L, arg);
    lua_pushstring(L, key);
    lua_rawget(L, arg);
}

lua_Integer lm_option_integer(lua_State *L, int arg, const char *key, lua_Integer dflt) {
    lm_push_option(L, arg, key);
    int isint = 1;
    lua_Integer v = dflt;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER) lm_argerror(L, arg, "%s must be an integer, got %s", key, luaL_typename(L, -1));
        v = lua_tointegerx(L, -1, &isint);
        if (!isint) lm_argerror(L, arg, "%s must be an integer, got %f", key, lua_tonumber(L, -1));
    }
    lua_pop(L, 1);
    return v;
}

lua_Number lm_option_number(lua_State *L, int arg, const char *key, lua_Number dflt) {
    lm_push_option(L, arg, key);
    lua_Number v = dflt;
    if (!lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TNUMBER) lm_argerror(L, arg, "%s must be a number, got %s", key, luaL_typename(L, -1));
        v = lua_tonumber(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

int lm_option_boolean(lua_State *L, int arg, const char *key, int dflt) {
    lm_push_option(L, arg, key);
    int v = dflt;
    if (!lua_isnil(L, -1)) {
        if (!lua_isboolean(L, -1)) lm_argerror(L, arg, "%s must be a boolean, got %s", key, luaL_typename(L, -1));
        v = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

int lm_option_choice(lua_State *L, int arg, const char *key, const char *const names[], int dflt) {
    lm_push_option(L, arg, key);
    if (lua_isnil(L, -1)) { lua_pop(L, 1); return dflt; }
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    for (int i = 0; s && names[i]; i++)
        if (strcmp(s, names[i]) == 0) { lua_pop(L, 1); return i; }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; names[i]; i++) {
        if (i) luaL_addstring(&b, names[i + 1] ? ", " : " or ");
        luaL_addchar(&b, '"');
        luaL_addstring(&b, names[i]);
        luaL_addchar(&b, '"');
    }
    luaL_pushresult(&b);
    if (s) lm_argerror(L, arg, "%s must be %s, got \"%s\"", key, lua_tostring(L, -1), s);
    return lm_argerror(L, arg, "%s must be %s, got %s", key, lua_tostring(L, -1), luaL_typename(L, -2));
}

#if LUA_VERSION_NUM < 503
/* ---- Lua 5.1 and LuaJIT: the integer checks and %I of lua_compat.h ---- */

/* 5.4's rule for a float (or a numeric string) converted to an integer: exact or
 * refused. Numbers are doubles here, so this is every number. */
lua_Integer lmc_tointegerx(lua_State *L, int idx, int *isint) {
    const lua_Number lim = sizeof(lua_Integer) >= 8 ? 9223372036854775808.0 : 2147483648.0;
    int ok = 0;
    lua_Integer v = 0;
    if (lua_isnumber(L, idx)) {
        lua_Number n = lua_tonumber(L, idx);
        if (n == floor(n) && n >= -lim && n < lim) { ok = 1; v = (lua_Integer)n; }
    }
    if (isint) *isint = ok;
    return v;
}

/* A number (not a string) with an integer value. */
int lmc_isinteger(lua_State *L, int idx) {
    int ok = 0;
    if (lua_type(L, idx) == LUA_TNUMBER) lmc_tointegerx(L, idx, &ok);
    return ok;
}

/* lua_pushvfstring with 5.3's formats: %s %d %I %f %p %c %%. */
const char *lmc_pushvfstring(lua_State *L, const char *fmt, va_list ap) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    char num[64];
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') { luaL_addchar(&b, *p); continue; }
        switch (*++p) {
        case 's': { const char *s = va_arg(ap, const char *); luaL_addstring(&b, s ? s : "(null)"); continue; }
        case 'c': luaL_addchar(&b, (char)va_arg(ap, int)); continue;
        case 'd': snprintf(num, sizeof num, "%d", va_arg(ap, int)); break;
        case 'I': snprintf(num, sizeof num, "%lld", (long long)va_arg(ap, LUAI_UACINT)); break;
        case 'f': snprintf(num, sizeof num, "%.14g", (double)va_arg(ap, lua_Number)); break;
        case 'p': snprintf(num, sizeof num, "%p", va_arg(ap, void *)); break;
        case '%': luaL_addchar(&b, '%'); continue;
        case 0: luaL_addchar(&b, '%'); p--; continue;   /* a trailing '%' */
        default: luaL_addchar(&b, '%'); luaL_addchar(&b, *p); continue;
        }
        luaL_addstring(&b, num);
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

const char *lmc_pushfstring(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *s = lmc_pushvfstring(L, fmt, ap);
    va_end(ap);
    return s;
}

int lmc_error(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    luaL_where(L, 1);
    lmc_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}
#endif
