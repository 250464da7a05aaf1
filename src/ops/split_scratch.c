/* The split LayerNorm form's scratch (a ticket counter, a fallback count, then one
 * 64-byte record per row part; see shaders/layer_norm.comp), kept by the context from
 * call to call. A fresh scratch would need a fill and a barrier before every call
 * (a dependent dispatch costs microseconds on a GPU); instead each call tags its
 * records with a new epoch and takes its tickets from where the last call left the
 * counter, so the scratch is zeroed only when it is made, grown, or its state is in
 * doubt. */
#include "ops.h"
#include "split_scratch.h"
#include "kept_scratch.h"

#define SCRATCH_RECORD_BYTES 64u

static void zero(lua_State *L, lm_context *ctx, lm_tensor *view) {
    lm_record_fill(L, view, 0.0f);
    ctx->ln_epoch = 0;
    ctx->ln_ticket_base = 0;
    ctx->ln_scratch_failures = ctx->stream.failures;
}

void lm_split_scratch_begin(lua_State *L, lm_context *ctx, uint64_t records, lm_split_call *call) {
    int fresh;
    lm_storage *scratch = lm_kept_scratch(L, ctx, LM_SCRATCH_SPLIT_LN, (VkDeviceSize)SCRATCH_RECORD_BYTES * (records + 1u),
                                          SCRATCH_RECORD_BYTES, &fresh);
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
