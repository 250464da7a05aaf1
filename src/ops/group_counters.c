/* Counter words kept zero between dispatches (see group_counters.h). A fresh zeroed
 * buffer per call would need a fill and a barrier before the kernel, and a dependent
 * command costs microseconds on a GPU, as much as the second dispatch the counters save. */
#include "ops.h"
#include "group_counters.h"
#include "../storage.h"

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
    VkDeviceSize bytes = (VkDeviceSize)n * 4u;
    int fresh = 0;
    lm_storage *st = ctx->scratch[LM_SCRATCH_GROUP_COUNTERS];
    if (!st || st->bytes < bytes) {
        VkDeviceSize want = COUNTERS_MIN_BYTES;
        while (want < bytes && want <= ((VkDeviceSize)-1) / 2) want *= 2;
        if (want < bytes) want = bytes;
        /* The allocation may run finalizers: the slot is read again after it. */
        lm_storage_new(L, ctx, want, NULL);
        lm_context_set_scratch(L, ctx, LM_SCRATCH_GROUP_COUNTERS);   /* releases the old one */
        st = ctx->scratch[LM_SCRATCH_GROUP_COUNTERS];
        fresh = 1;
    }
    *view = (lm_tensor){ .storage = st, .dtype = LM_FLOAT32, .ndim = 1 };
    view->numel = view->shape[0] = (int64_t)(st->bytes / 4u);
    view->strides[0] = 1;
    if (fresh || ctx->counters_failures != ctx->stream.failures) zero(L, ctx, view);
    return 0;
}
