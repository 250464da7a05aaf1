/* The Lua functions of the pipeline cache (pipeline_cache.h): lumus.warm_up,
 * lumus.save_pipeline_cache and tune.pipeline_cache. Above the context, which makes
 * the cache. */
#include "pipeline_lua.h"
#include "context.h"
#include "luautil.h"
#include "stream.h"
#include <lauxlib.h>

/* lumus.warm_up([{ops = {names}}]) -> built, seconds */
int lm_warm_up(lua_State *L) {
    static const char *const known[] = { "ops", NULL };
    int ops = 0;
    if (lm_check_options(L, 1, known)) {
        lm_push_option(L, 1, "ops");
        if (!lua_isnil(L, -1)) {
            if (!lua_istable(L, -1)) lm_argerror(L, 1, "ops must be a list of op names, got %s", luaL_typename(L, -1));
            ops = lua_gettop(L);
            lua_Integer n = (lua_Integer)lua_rawlen(L, ops);
            for (lua_Integer i = 1; i <= n; i++) {
                lua_rawgeti(L, ops, i);
                if (lua_type(L, -1) != LUA_TSTRING)
                    lm_argerror(L, 1, "ops[%I] must be a string, got %s", (LUAI_UACINT)i, luaL_typename(L, -1));
                lua_pop(L, 1);
            }
        }
    }
    lm_context *ctx = lm_context_get(L);
    double t0 = lm_stream_clock();
    size_t built = lm_pipelines_warm_up(L, ctx, ops);
    /* The first read of a result through staging would otherwise make the staging pool's
     * first block then: make it now (an empty block stays in its pool until trimmed). */
    lm_chunk *c;
    if (!ctx->mem.direct && lm_chunk_alloc(ctx, &ctx->mem.staging, (VkDeviceSize)1 << 20, &c) == VK_SUCCESS)
        lm_chunk_free(ctx, c);
    lua_pushinteger(L, (lua_Integer)built);
    lua_pushnumber(L, lm_stream_clock() - t0);
    return 2;
}

/* lumus.save_pipeline_cache() -> bytes, or nil and the reason */
int lm_save_pipeline_cache(lua_State *L) {
    const char *why;
    size_t n = lm_pipeline_cache_save(lm_context_get(L), &why);
    if (!n) { lua_pushnil(L); lua_pushstring(L, why); return 2; }
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
}

/* tune.pipeline_cache() -> {path, state, reason, loaded_bytes, listed, built, hits,
 * feedback, saved_bytes} */
int lm_pipeline_cache_stats(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    const lm_pipeline_cache *pc = &ctx->pipes.pcache;
    static const char *const states[] = { "off", "new", "loaded", "ignored" };
    lua_createtable(L, 0, 9);
    if (pc->path) { lua_pushstring(L, pc->path); lua_setfield(L, -2, "path"); }
    lua_pushstring(L, states[pc->state]); lua_setfield(L, -2, "state");
    if (pc->reason[0]) { lua_pushstring(L, pc->reason); lua_setfield(L, -2, "reason"); }
    lua_pushinteger(L, (lua_Integer)pc->loaded_bytes); lua_setfield(L, -2, "loaded_bytes");
    lua_pushinteger(L, (lua_Integer)pc->nloaded); lua_setfield(L, -2, "listed");
    lua_pushinteger(L, (lua_Integer)pc->built); lua_setfield(L, -2, "built");
    lua_pushinteger(L, (lua_Integer)pc->hits); lua_setfield(L, -2, "hits");
    lua_pushboolean(L, pc->feedback); lua_setfield(L, -2, "feedback");
    lua_pushinteger(L, (lua_Integer)pc->saved_bytes); lua_setfield(L, -2, "saved_bytes");
    return 1;
}
