/* Storages: reference-counted device allocations, and host <-> device transfers. */
#ifndef LUMUS_STORAGE_H
#define LUMUS_STORAGE_H

#include <lua.h>
#include "context.h"

/* Pushes a storage of `bytes` (one reference) and returns it. The caller anchors the
 * userdata (a tensor's user value, a scratch slot) before anything that may raise: a
 * live storage is on its context's list until its last reference goes. `fname` names
 * the caller in messages (NULL: the running function, see lm_fname). Tells the Lua GC
 * about device bytes, retries after a full collection when the device is out of
 * memory, and raises "out of device memory: requested N bytes, M in use" when that is
 * not enough. */
lm_storage *lm_storage_new(lua_State *L, lm_context *ctx, VkDeviceSize bytes, const char *fname);
/* Pushes a storage over `bytes` of a host VkBuffer at `offset` (lumus.h's
 * lumus_push_buffer), anchored as above: no chunk, not counted in lumus.memory(), and
 * freeing it frees none of the host's memory. `mapped` is the host's pointer to that
 * offset, or NULL to use staging. */
lm_storage *lm_storage_wrap(lua_State *L, lm_context *ctx, VkBuffer buffer, VkDeviceSize offset,
                            VkDeviceSize bytes, void *mapped);
void lm_storage_ref(lm_storage *s);
void lm_storage_unref(lm_storage *s);
/* lm_storage_unref for a free the script asked for (tensor:free(), a <close> variable),
 * as opposed to the GC finding the tensor (see gc_pressure in storage.c). */
void lm_storage_release(lm_storage *s);

/* Host data into a storage: copied before return (staged or mapped), so the caller may
 * reuse `src` at once. The write is ordered after earlier device work on the storage. */
void lm_storage_write(lua_State *L, lm_storage *s, VkDeviceSize offset, const void *src, VkDeviceSize n);
/* Device data into host memory; waits only for the work that touches the storage. */
void lm_storage_read(lua_State *L, lm_storage *s, VkDeviceSize offset, void *dst, VkDeviceSize n);
/* Pushes bytes [offset, offset + n) of the storage as a Lua string and returns 1, or
 * returns 0 (nothing pushed) when that needs a host buffer and lm_storage_read: a large
 * n through staging. The string is built from the mapped or staging memory directly. */
int lm_storage_push_bytes(lua_State *L, lm_storage *s, VkDeviceSize offset, size_t n);
/* Pushes the n host bytes at p as a new string, a large one with its pages faulted in at
 * once (unless lumus.tune.stream{prefault = false}). */
void lm_push_host_string(lua_State *L, lm_context *ctx, const char *p, size_t n);
/* Faults in the pages of a large fresh host buffer at once (as lm_push_host_string). */
void lm_host_prefault(lm_context *ctx, void *p, size_t n);
/* The serial after which no recorded device work touches the storage (for a wrapped
 * host buffer: no work on any wrapped buffer, since they may alias). */
uint64_t lm_storage_serial(const lm_storage *s);
/* A host pointer to write a fresh storage directly (NULL when staging is needed). */
unsigned char *lm_storage_direct(lm_storage *s);

#endif
