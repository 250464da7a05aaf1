/* Storages an op keeps in a context scratch slot from call to call (kept_scratch.c). */
#ifndef LUMUS_KEPT_SCRATCH_H
#define LUMUS_KEPT_SCRATCH_H

#include <lua.h>
#include "../context.h"
#include "../storage.h"

/* Slot `slot`'s storage, of at least `bytes`: made, or replaced (releasing the old one)
 * when smaller, grown to a power of two from `min_bytes` (so sizes creeping up do not
 * reallocate every call; exactly `bytes` past the device's largest block). *made says
 * whether it is new (its contents undefined). May raise (out of device memory). */
lm_storage *lm_kept_scratch(lua_State *L, lm_context *ctx, int slot, VkDeviceSize bytes, VkDeviceSize min_bytes,
                            int *made);

#endif
