/* Device timing for users: lumus.gpu_time(fn, ...) and lumus.clock(). */
#define _POSIX_C_SOURCE 199309L
#include "timing.h"
#include "context.h"
#include "luautil.h"
#include "vkcheck.h"
#include <lauxlib.h>
#include <time.h>

int lm_clock(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

/* Seconds the device spent on fn's work: the queue is drained first so earlier work is
 * not counted; then every batch recorded while fn runs gets a timestamp at its start
 * (written once all earlier work is done) and at its end (stream.c), and the result is
 * the sum of those intervals. Work cut into several batches (lumus.synchronize, host
 * reads, LM_BATCH_OPS ops, memory held back by a batch) is thus timed without the host
 * time between the batches, during which the device sat idle; past LM_TIMESTAMPS / 2
 * batches the last interval runs to the end and includes such gaps. fn's results
 * follow the time. */
int lm_gpu_time(lua_State *L) {
    lm_check_type(L, 1, LUA_TFUNCTION);
    lm_context *ctx = lm_context_get(L);
    lm_stream *st = &ctx->stream;
    if (!st->queries) luaL_error(L, "gpu_time: the device's compute queue has no timestamps");
    if (ctx->timing) luaL_error(L, "gpu_time: calls cannot nest");
    lm_stream_sync(L, ctx);
    st->stamps = 0;
    st->stamp_final = 0;
    ctx->timing = 1;
    lm_stream_cmd(L, ctx, "gpu_time");   /* opens the first batch and its first stamp */
    int base = lua_gettop(L);
    int status = lua_pcall(L, base - 1, LUA_MULTRET, 0);
    st->stamp_final = 1;
    /* An open last pair needs a batch to close it in (fn may have ended with a sync). */
    if (st->stamps % 2 == 1 && st->cur < 0 && !st->lost) lm_stream_cmd(L, ctx, "gpu_time");
    lm_stream_submit(NULL, ctx);
    ctx->timing = 0;
    lm_stream_sync(L, ctx);
    if (status != LUA_OK) return lua_error(L);
    int nres = lua_gettop(L);
    uint32_t n = st->stamps;
    if (n < 2 || n % 2) luaL_error(L, "gpu_time: timestamps were not recorded (%d written)", (int)n);
    uint64_t ts[LM_TIMESTAMPS];
    LM_VK(L, vkGetQueryPoolResults(ctx->device, st->queries, 0, n, sizeof ts[0] * n, ts,
                                   sizeof ts[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    uint64_t mask = ctx->timestamp_bits >= 64 ? ~0ull : ((1ull << ctx->timestamp_bits) - 1);
    uint64_t ticks = 0;
    for (uint32_t i = 0; i < n; i += 2) ticks += (ts[i + 1] - ts[i]) & mask;
    lua_pushnumber(L, (lua_Number)ticks * ctx->props.limits.timestampPeriod * 1e-9);
    lua_insert(L, 1);
    return nres + 1;
}
