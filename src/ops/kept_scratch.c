/* Scratch storages kept by the context (see kept_scratch.h). */
#include "kept_scratch.h"

lm_storage *lm_kept_scratch(lua_State *L, lm_context *ctx, int slot, VkDeviceSize bytes, VkDeviceSize min_bytes,
                            int *made) {
    lm_storage *st = ctx->scratch[slot];
    *made = 0;
    if (st && st->bytes >= bytes) return st;
    VkDeviceSize want = min_bytes;
    while (want < bytes && want <= ((VkDeviceSize)-1) / 2) want *= 2;
    if (want < bytes || want > ctx->mem.max_single) want = bytes;
    /* The allocation may run finalizers, even a nested call that replaces the slot's
     * storage: the slot is read again after it. */
    lm_storage_new(L, ctx, want, NULL);
    lm_context_set_scratch(L, ctx, slot);   /* releases the old one */
    *made = 1;
    return ctx->scratch[slot];
}
