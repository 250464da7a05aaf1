/* The split LayerNorm form's scratch (a ticket counter, a fallback count, then one
 * 64-byte record per row part; see shaders/layer_norm.comp), kept by the context from
 * call to call. A fresh scratch would need a fill and a barrier before every call
 * (a dependent dispatch costs microseconds on a GPU); instead each call tags its
 * records with a new epoch and takes its tickets from where the last call left the
 * counter, so the scratch is zeroed only when it is made, grown, or its state is in
 * doubt. */
#include "ops.h"
#include "split_scratch.h"
#include "../storage.h"

#define SCRATCH_RECORD_BYTES 64u

static void zero(lua_State *L, lm_context *ctx, lm_tensor *view) {
    lm_record_fill(L, view, 0.0f);
    ctx->ln_epoch = 0;
    ctx->ln_ticket_base = 0;
    ctx->ln_scratch_failures = ctx->stream.failures;
}

void lm_split_scratch_begin(lua_State *L, lm_context *ctx, uint64_t records, lm_split_call *call) {
    VkDeviceSize bytes = (VkDeviceSize)SCRATCH_RECORD_BYTES * (records + 1u);
    int fresh = 0;
    lm_storage *scratch = ctx->scratch[LM_SCRATCH_SPLIT_LN];
    if (!scratch || scratch->bytes < bytes) {
        /* Grown to a power of two, so rows creeping up do not reallocate each call. */
        VkDeviceSize want = SCRATCH_RECORD_BYTES;
        while (want < bytes && want <= ((VkDeviceSize)-1) / 2) want *= 2;
        if (want < bytes) want = bytes;
        /* The allocation may run finalizers, even a nested call that replaces the
         * scratch: the context's fields are read again after it. */
        lm_storage_new(L, ctx, want, NULL);
        lm_context_set_scratch(L, ctx, LM_SCRATCH_SPLIT_LN);   /* releases the old one */
        scratch = ctx->scratch[LM_SCRATCH_SPLIT_LN];
        fresh = 1;
    }
    lm_tensor *v = &call->view;
    *v = (lm_tensor){ .storage = scratch, .dtype = LM_FLOAT32, .ndim = 1 };
    v->numel = v->shape[0] = (int64_t)(scratch->bytes / 4u);
    v->strides[0] = 1;
    /* A batch that failed never ran its calls: the counter is not where the host
     * thinks. The epoch is 32 bits: before it wraps, old tags could match again. */
    if (fresh || ctx->ln_scratch_failures != ctx->stream.failures || ctx->ln_epoch == UINT32_MAX)
        zero(L, ctx, v);
    call->epoch = ++ctx->ln_epoch;
    call->ticket_base = ctx->ln_ticket_base;
}

void lm_split_scratch_end(lm_context *ctx, uint64_t launched, int tickets) {
    if (tickets) ctx->ln_ticket_base += (uint32_t)launched;   /* wraps, as the counter does */
}

void lm_split_scratch_release(lm_context *ctx) {
    lm_context_release_scratch(ctx, LM_SCRATCH_SPLIT_LN);
}
