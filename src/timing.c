/* Device timing for users: lumus.gpu_time(fn, ...) and lumus.clock(). */
#define _POSIX_C_SOURCE 199309L
#include "timing.h"
#include "context.h"
#include "vkcheck.h"
#include <lauxlib.h>
#include <time.h>

int lm_clock(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

static void stamp(lua_State *L, lm_context *ctx, uint32_t query) {
    VkCommandBuffer cb = lm_stream_cmd(L, ctx, "gpu_time");
    if (query == 0) vkCmdResetQueryPool(cb, ctx->stream.queries, 0, LM_TIMESTAMPS);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ctx->stream.queries, query);
}

/* Seconds of device time between a timestamp before fn's work and one after it. The
 * queue is drained first so earlier work is not counted; fn's results follow. */
int lm_gpu_time(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lm_context *ctx = lm_context_get(L);
    if (!ctx->stream.queries) luaL_error(L, "gpu_time: the device's compute queue has no timestamps");
    if (ctx->timing) luaL_error(L, "gpu_time: calls cannot nest");
    lm_stream_sync(L, ctx);
    stamp(L, ctx, 0);
    ctx->timing = 1;
    int base = lua_gettop(L);
    int status = lua_pcall(L, base - 1, LUA_MULTRET, 0);
    ctx->timing = 0;
    stamp(L, ctx, 1);
    lm_stream_sync(L, ctx);
    if (status != LUA_OK) return lua_error(L);
    int nres = lua_gettop(L);
    uint64_t ts[LM_TIMESTAMPS];
    LM_VK(L, vkGetQueryPoolResults(ctx->device, ctx->stream.queries, 0, LM_TIMESTAMPS, sizeof ts, ts,
                                   sizeof ts[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    uint64_t mask = ctx->timestamp_bits >= 64 ? ~0ull : ((1ull << ctx->timestamp_bits) - 1);
    uint64_t ticks = (ts[1] - ts[0]) & mask;
    lua_pushnumber(L, (lua_Number)ticks * ctx->props.limits.timestampPeriod * 1e-9);
    lua_insert(L, 1);
    return nres + 1;
}
