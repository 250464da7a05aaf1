/* lumus_open (lumus.h): lumus in a lua_State without the module search path, for hosts
 * that link liblumus.a. The C core is registered as loaded and the Lua modules of lua/,
 * embedded at build time (embed_lua.lua), as package.preload loaders. */
#include "lumus.h"
#include "lua_compat.h"

typedef struct lm_embedded_module {
    const char *name, *chunkname;
    const unsigned char *source;
    size_t size;
} lm_embedded_module;

#include "lua_modules.inc"

/* package.preload loader: runs the module's chunk with its name, as require would. */
static int load_embedded(lua_State *L) {
    const lm_embedded_module *m = lua_touserdata(L, lua_upvalueindex(1));
    if (luaL_loadbufferx(L, (const char *)m->source, m->size, m->chunkname, "t") != LUA_OK)
        return lua_error(L);
    lua_pushstring(L, m->name);
    lua_pushliteral(L, ":preload:");
    lua_call(L, 2, 1);
    return 1;
}

static int do_open(lua_State *L) {
    luaL_requiref(L, "lumus.core", luaopen_lumus_core, 0);
    lua_pop(L, 1);
    if (lua_getglobal(L, "package") != LUA_TTABLE)
        return luaL_error(L, "lumus_open: the package library is not open (luaL_openlibs first)");
    luaL_getsubtable(L, -1, "preload");
    for (const lm_embedded_module *m = lm_lua_modules; m->name; m++) {
        lua_pushlightuserdata(L, (void *)m);
        lua_pushcclosure(L, load_embedded, 1);
        lua_setfield(L, -2, m->name);
    }
    return 0;
}

int lumus_open(lua_State *L) {
    if (!lua_checkstack(L, 3)) return LUA_ERRMEM;
    lua_pushcfunction(L, do_open);
    return lua_pcall(L, 0, 0, 0);
}
