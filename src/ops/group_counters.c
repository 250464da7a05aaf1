/* Counter words kept zero between dispatches (see group_counters.h). A fresh zeroed
 * buffer per call would need a fill and a barrier before the kernel, and a dependent
 * command costs microseconds on a GPU, as much as the second dispatch the counters save. */
#include "ops.h"
#include "group_counters.h"
#include "kept_scratch.h"

#define COUNTERS_MIN_BYTES 4096u

static void zero(lua_State *L, lm_context *ctx, lm_tensor *view) {
    lm_record_fill(L, view, 0.0f);
    ctx->counters_failures = ctx->stream.failures;
}

int lm_group_counters(lua_State *L, lm_context *ctx, uint64_t n, lm_tensor *view) {
    int64_t words = (int64_t)n;
    if (ctx->stream.recording) {
        *view = *lm_push_tensor(L, ctx, 1, &words);
        lm_record_fill(L, view, 0.0f);
        return 1;
    }
    int fresh;
    lm_storage *st = lm_kept_scratch(L, ctx, LM_SCRATCH_GROUP_COUNTERS, (VkDeviceSize)n * 4u, COUNTERS_MIN_BYTES, &fresh);
    *view = (lm_tensor){ .storage = st, .dtype = LM_FLOAT32, .ndim = 1 };
    view->numel = view->shape[0] = (int64_t)(st->bytes / 4u);
    view->strides[0] = 1;
    if (fresh || ctx->counters_failures != ctx->stream.failures) zero(L, ctx, view);
    return 0;
}
