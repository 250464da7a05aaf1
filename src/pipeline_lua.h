/* The Lua functions of the pipeline cache (pipeline_lua.c). */
#ifndef LUMUS_PIPELINE_LUA_H
#define LUMUS_PIPELINE_LUA_H

#include <lua.h>

/* lumus.warm_up([{ops = {names}}]) -> built, seconds: builds now the pipelines the
 * cache lists (those of the ops named, if given). */
int lm_warm_up(lua_State *L);
/* lumus.save_pipeline_cache() -> bytes, or nil and the reason. */
int lm_save_pipeline_cache(lua_State *L);
/* tune.pipeline_cache() -> the cache's path, state and counts. */
int lm_pipeline_cache_stats(lua_State *L);

#endif
