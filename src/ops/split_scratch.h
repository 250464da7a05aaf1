/* The split LayerNorm form's scratch, kept by the context across calls (split_scratch.c). */
#ifndef LUMUS_SPLIT_SCRATCH_H
#define LUMUS_SPLIT_SCRATCH_H

#include <stdint.h>
#include <lua.h>
#include "../tensor.h"

typedef struct lm_split_call {
    lm_tensor view;          /* the scratch as a tensor, for the dispatch's hazards */
    uint32_t epoch;          /* this call's ready tag (nonzero) */
    uint32_t ticket_base;    /* the ticket counter's value when this call starts */
} lm_split_call;

/* Readies the scratch for a call of `records` (row, part) records: made or grown (and
 * then zeroed by a recorded fill) when too small, zeroed again when the epoch would
 * wrap or a batch failed since it was last used. May raise (out of device memory). */
void lm_split_scratch_begin(lua_State *L, lm_context *ctx, uint64_t records, lm_split_call *call);
/* After the call's dispatch is recorded: `launched` workgroups each took a ticket. */
void lm_split_scratch_end(lm_context *ctx, uint64_t launched, int tickets);
/* Releases the scratch (the context's slot LM_SCRATCH_SPLIT_LN; the context also
 * releases it itself, at teardown and in lumus.empty_cache). */
void lm_split_scratch_release(lm_context *ctx);

#endif
