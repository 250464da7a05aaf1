/* The steps every op ends with (and the grid tuning hook): pick the specialized pipeline, declare what the dispatch
 * reads and writes (so the stream records a barrier only where a hazard exists), record
 * it, and count the op. While lumus.capture records, the dispatch goes into the graph,
 * which holds the memory of every tensor it uses. */
#include "ops.h"
#include "../capture.h"
#include <lauxlib.h>

void lm_record_dispatch(lua_State *L, lm_context *ctx, const lm_launch *d) {
    lm_stream *st = &ctx->stream;
    if (st->recording) {
        if (d->stateful)
            luaL_error(L, "lumus.capture: %s cannot be captured (it draws on state that advances with every call, "
                       "which a replay would repeat unchanged; draw outside the capture)", lm_fname(L));
        /* Before the liveness check below: holding may allocate from Lua. */
        for (int i = 0; i < LM_LAUNCH_TENSORS; i++) {
            if (d->reads[i] && d->reads[i]->storage) lm_capture_hold(L, ctx, d->reads[i], d->op);
            if (d->writes[i] && d->writes[i]->storage) lm_capture_hold(L, ctx, d->writes[i], d->op);
        }
    }
    /* Last line of defence for hostile scripts: a tensor freed by a finalizer after the op
     * checked it must not be recorded (its memory may already be another tensor's). */
    for (int i = 0; i < LM_LAUNCH_TENSORS; i++)
        if ((d->reads[i] && !d->reads[i]->storage) || (d->writes[i] && !d->writes[i]->storage))
            luaL_error(L, "%s: a tensor it uses has been freed during the call", d->op);
    /* Kernels written for float32 must never reinterpret other element types. */
    for (int i = 0; i < LM_LAUNCH_TENSORS && !d->any_dtype; i++) {
        const lm_tensor *used[2] = { d->reads[i], d->writes[i] };
        for (int j = 0; j < 2; j++)
            if (used[j] && used[j]->dtype != LM_FLOAT32)
                luaL_error(L, "%s: dtype %s is not supported (float32 only; convert with :float())", lm_fname(L),
                           lm_dtype_name(used[j]->dtype));
    }
    double t0 = st->prof.on ? lm_stream_clock() : 0;
    VkPipeline p = lm_pipeline_for(L, ctx, d->op, d->shader, d->spec, d->full_subgroups);
    VkCommandBuffer cb = st->recording ? lm_stream_recording_cmd(L, ctx, d->op) : lm_stream_cmd(L, ctx, d->op);
    for (int i = 0; i < LM_LAUNCH_TENSORS; i++) {
        if (d->reads[i]) lm_stream_read(ctx, d->reads[i]->storage);
        if (d->writes[i]) { lm_stream_write(ctx, d->writes[i]->storage); d->writes[i]->storage->version++; }
    }
    lm_stream_hazards(ctx, cb);
    lm_dispatch(cb, ctx, p, d->push, d->push_bytes, d->groups_x, d->groups_y ? d->groups_y : 1);
    if (st->prof.on) { st->prof.record += lm_stream_clock() - t0; st->prof.records++; }
    lm_stream_op_done(L, ctx);
}


/* tune.grid([{max_x = n}]) -> the grid width lm_grid folds at: a small cap sends small
 * tensors onto 2-D grids, for specs of that path; 0 restores the device limit. */
int lm_op_grid_config(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    static const char *const known[] = { "max_x", NULL };
    if (lm_check_options(L, 1, known)) {
        lua_Integer w = lm_option_integer(L, 1, "max_x", 0);
        if (w < 0 || w > 0xffffffffLL) lm_argerror(L, 1, "max_x must be in 0..2^32-1");
        ctx->grid_max_x = (uint32_t)w;
    }
    uint32_t max_x = ctx->props.limits.maxComputeWorkGroupCount[0];
    lua_pushinteger(L, ctx->grid_max_x && ctx->grid_max_x < max_x ? ctx->grid_max_x : max_x);
    return 1;
}

/* t:_version(): how many recorded dispatches have written t's storage (any view of it);
 * autograd compares it to detect an in-place change of a tensor its graph saved. */
int lm_op_version(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lua_pushinteger(L, (lua_Integer)t->storage->version);
    return 1;
}
