/* Storages and transfers (see storage.h). */
#define _DEFAULT_SOURCE   /* madvise */
#include "storage.h"
#include "luautil.h"
#include "vkcheck.h"
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14; older kernels answer EINVAL, ignored */
#endif
#endif

/* Transfers through staging go in pieces of this size, pipelined (lm_storage_read,
 * lm_storage_write); a download of up to LM_STAGING_WHOLE bytes into a Lua string
 * takes one staging chunk, copied once into the new string. */
#define LM_STAGING_PIECE ((VkDeviceSize)8 << 20)
#define LM_STAGING_WHOLE ((VkDeviceSize)64 << 20)

/* Lua's GC cannot see device bytes: run a full cycle whenever the bytes allocated since
 * the last one (less those freed explicitly since: lm_storage_release) exceed what is
 * live (at least 64 MiB), so garbage tensors are reclaimed before device memory runs
 * out, at a cost proportional to allocation that the GC has to find. */
static void gc_pressure(lua_State *L, lm_context *ctx, VkDeviceSize bytes) {
    ctx->bytes_since_gc += bytes;
    if (ctx->bytes_since_gc > ctx->gc_threshold) {
        ctx->bytes_since_gc = 0;
        ctx->gc_runs++;
        lua_gc(L, LUA_GCCOLLECT, 0);
        /* Frees of batches that have finished come back now. Collected tensors whose last
         * use is still being recorded come back once that batch runs: the stream submits
         * it at the next op when it holds much (lm_stream_op_done), not here, which would
         * cut a batch at every collection. */
        lm_stream_poll(ctx);
        /* What is live: frees still waiting on a batch are garbage already. */
        VkDeviceSize t = ctx->mem.in_use - ctx->stream.deferred_bytes;
        ctx->gc_threshold = t > ((VkDeviceSize)64 << 20) ? t : ((VkDeviceSize)64 << 20);
    }
}

/* A zeroed storage userdata on the stack (no metatable: it has no finalizer, its
 * tensors' finalizers release it). */
static lm_storage *push_storage(lua_State *L) {
    lm_storage *s = lua_newuserdatauv(L, sizeof *s, 0);
    memset(s, 0, sizeof *s);
    return s;
}

static void link_storage(lm_context *ctx, lm_storage *s) {
    s->refs = 1;
    s->ctx = ctx;
    s->prev = NULL;
    s->next = ctx->storages;
    if (ctx->storages) ctx->storages->prev = s;
    ctx->storages = s;
}

lm_storage *lm_storage_new(lua_State *L, lm_context *ctx, VkDeviceSize bytes, const char *fname) {
    if (!fname && (bytes > ctx->mem.max_single || bytes > ctx->mem.limit)) fname = lm_fname(L);
    if (bytes > ctx->mem.max_single)
        luaL_error(L, "%s: a tensor of %I bytes exceeds the device's largest allocation (%I bytes)",
                   fname, (LUAI_UACINT)bytes, (LUAI_UACINT)ctx->mem.max_single);
    if (bytes > ctx->mem.limit)
        luaL_error(L, "%s: out of device memory: requested %I bytes, more than the device limit of %I bytes",
                   fname, (LUAI_UACINT)bytes, (LUAI_UACINT)ctx->mem.limit);
    gc_pressure(L, ctx, bytes);
    lm_storage *s = push_storage(L);
    lm_chunk *c = NULL;
    VkResult r = lm_chunk_alloc(ctx, &ctx->mem.device, bytes, &c);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
        /* Garbage tensors and frees waiting on the device may be holding the memory. */
        lua_gc(L, LUA_GCCOLLECT, 0);
        lm_stream_sync(NULL, ctx);
        r = lm_chunk_alloc(ctx, &ctx->mem.device, bytes, &c);
    }
    if (r != VK_SUCCESS) {
        if (!fname) fname = lm_fname(L);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            luaL_error(L, "%s: out of device memory: requested %I bytes, %I in use", fname,
                       (LUAI_UACINT)bytes, (LUAI_UACINT)ctx->mem.in_use);
        lm_vk_error(L, "allocating device memory", r);
    }
    link_storage(ctx, s);
    s->chunk = c;
    s->bytes = bytes;
    s->address = lm_chunk_address(c);
    s->buffer = c->block->buffer;
    s->buffer_offset = c->offset;
    s->mapped = ctx->mem.direct ? lm_chunk_mapped(c) : NULL;
    return s;
}

lm_storage *lm_storage_wrap(lua_State *L, lm_context *ctx, VkBuffer buffer, VkDeviceSize offset,
                            VkDeviceSize bytes, void *mapped) {
    lm_storage *s = push_storage(L);
    VkBufferDeviceAddressInfo ai = { .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = buffer };
    link_storage(ctx, s);
    s->external = 1;
    s->bytes = bytes;
    s->buffer = buffer;
    s->buffer_offset = offset;
    s->address = vkGetBufferDeviceAddress(ctx->device, &ai) + offset;
    s->mapped = mapped;
    return s;
}

uint64_t lm_storage_serial(const lm_storage *s) {
    uint64_t ext = s->ctx->stream.ext_serial;
    return s->external && ext > s->last_serial ? ext : s->last_serial;
}

void lm_storage_ref(lm_storage *s) { s->refs++; }

void lm_storage_release(lm_storage *s) {
    /* The last reference freed by the script, not found by the GC: its bytes need no
     * collection to come back, so they do not count towards the next one. */
    if (s->refs == 1 && s->chunk && s->ctx) {
        lm_context *ctx = s->ctx;
        ctx->bytes_since_gc = ctx->bytes_since_gc > s->bytes ? ctx->bytes_since_gc - s->bytes : 0;
    }
    lm_storage_unref(s);
}

void lm_storage_unref(lm_storage *s) {
    if (--s->refs > 0) return;
    lm_context *ctx = s->ctx;
    if (!ctx) return;   /* orphaned: its memory went with the context */
    if (s->prev) s->prev->next = s->next; else ctx->storages = s->next;
    if (s->next) s->next->prev = s->prev;
    s->prev = s->next = NULL;
    s->ctx = NULL;
    /* The device may still be reading or writing it: reuse waits for that batch. A host
     * buffer is the host's to reuse (after its sync point). The userdata is Lua's. */
    if (s->chunk) lm_stream_free_after(ctx, s->chunk, s->last_serial);
    s->chunk = NULL;
    s->mapped = NULL;
}

unsigned char *lm_storage_direct(lm_storage *s) { return s->mapped; }

/* Records a buffer copy between a staging chunk and the storage. */
static void record_copy(lua_State *L, lm_storage *s, lm_chunk *stage, VkDeviceSize offset,
                        VkDeviceSize n, int to_device, const char *op) {
    lm_context *ctx = s->ctx;
    VkCommandBuffer cb = lm_stream_cmd(L, ctx, op);
    if (to_device) lm_stream_write(ctx, s); else { lm_stream_read(ctx, s); lm_stream_host_read(ctx); }
    lm_stream_hazards(ctx, cb);
    VkBufferCopy region = {
        .srcOffset = to_device ? stage->offset : s->buffer_offset + offset,
        .dstOffset = to_device ? s->buffer_offset + offset : stage->offset,
        .size = n,
    };
    vkCmdCopyBuffer(cb, to_device ? stage->block->buffer : s->buffer,
                    to_device ? s->buffer : stage->block->buffer, 1, &region);
    lm_stream_op_done(L, ctx);
}

/* A staging chunk, or NULL (raises only through lm_stream_sync's device errors). */
static lm_chunk *try_staging(lua_State *L, lm_context *ctx, VkDeviceSize n) {
    lm_chunk *c = NULL;
    if (lm_chunk_alloc(ctx, &ctx->mem.staging, n, &c) == VK_SUCCESS) return c;
    /* Staging freed by batches still running comes back once they finish. */
    lm_stream_sync(L, ctx);
    return lm_chunk_alloc(ctx, &ctx->mem.staging, n, &c) == VK_SUCCESS ? c : NULL;
}

static lm_chunk *staging_chunk(lua_State *L, lm_context *ctx, VkDeviceSize n) {
    lm_chunk *c = try_staging(L, ctx, n);
    if (!c) lm_vk_error(L, "allocating staging memory", VK_ERROR_OUT_OF_DEVICE_MEMORY);
    return c;
}

void lm_storage_write(lua_State *L, lm_storage *s, VkDeviceSize offset, const void *src, VkDeviceSize n) {
    lm_context *ctx = s->ctx;
    if (s->mapped) {
        /* The host writes now: earlier device work on this storage must be done. */
        lm_stream_wait(L, ctx, lm_storage_serial(s));
        memcpy(s->mapped + offset, src, n);
        return;
    }
    /* In pieces, each submitted once filled, so the device copies one piece while the
     * host fills the next; the ring bounds how many are in flight. */
    const unsigned char *p = src;
    for (VkDeviceSize done = 0; done < n; ) {
        VkDeviceSize piece = n - done < LM_STAGING_PIECE ? n - done : LM_STAGING_PIECE;
        lm_chunk *stage = staging_chunk(L, ctx, piece);
        memcpy(lm_chunk_mapped(stage), p + done, piece);
        record_copy(L, s, stage, offset + done, piece, 1, "upload");
        lm_stream_free_after(ctx, stage, lm_stream_current_serial(ctx));
        done += piece;
        if (done < n) lm_stream_submit(L, ctx);
    }
}

/* Downloads [offset, offset + n) through staging pieces, LM_READ_DEPTH in flight: the
 * device fills the next pieces while the host copies one out. */
#define LM_READ_DEPTH 3

void lm_storage_read(lua_State *L, lm_storage *s, VkDeviceSize offset, void *dst, VkDeviceSize n) {
    lm_context *ctx = s->ctx;
    if (s->mapped) {
        lm_stream_wait(L, ctx, lm_storage_serial(s));
        memcpy(dst, s->mapped + offset, n);
        return;
    }
    unsigned char *p = dst;
    struct { lm_chunk *stage; VkDeviceSize at, size; uint64_t serial; } q[LM_READ_DEPTH];
    int head = 0, count = 0;
    VkDeviceSize recorded = 0, copied = 0;
    int failed = 0;
    while (copied < n && !failed) {
        while (count < LM_READ_DEPTH && recorded < n) {
            VkDeviceSize piece = n - recorded < LM_STAGING_PIECE ? n - recorded : LM_STAGING_PIECE;
            /* Without room for another piece, copy out what is in flight first. */
            lm_chunk *stage = count ? NULL : staging_chunk(L, ctx, piece);
            if (!stage && lm_chunk_alloc(ctx, &ctx->mem.staging, piece, &stage) != VK_SUCCESS) break;
            record_copy(L, s, stage, offset + recorded, piece, 0, "download");
            int k = (head + count) % LM_READ_DEPTH;
            q[k].stage = stage; q[k].at = recorded; q[k].size = piece;
            q[k].serial = lm_stream_current_serial(ctx);
            count++;
            recorded += piece;
            lm_stream_submit(NULL, ctx);
        }
        lm_stream_wait(NULL, ctx, q[head].serial);
        failed = ctx->stream.failed[0] != 0;
        if (!failed) memcpy(p + q[head].at, lm_chunk_mapped(q[head].stage), q[head].size);
        copied += q[head].size;
        lm_stream_free_after(ctx, q[head].stage, q[head].serial);
        head = (head + 1) % LM_READ_DEPTH;
        count--;
    }
    /* After a device failure: the pieces still out are freed once their batches end. */
    for (; count > 0; count--, head = (head + 1) % LM_READ_DEPTH)
        lm_stream_free_after(ctx, q[head].stage, q[head].serial);
    lm_stream_check(L, ctx);
}

/* Strings of at least this many bytes get their pages faulted in at once. A new large
 * string is fresh memory from the allocator (mmap for glibc's malloc), and copying into
 * it takes a page fault per 4 KiB page, which costs more than the copy itself: at 64 MiB,
 * Lua's own s:sub(1) runs near 1.4 GB/s on some hosts. One madvise asks for huge pages
 * (where the kernel's THP mode is "madvise") and populates the range in one call. */
#define LM_PREFAULT_MIN ((size_t)4 << 20)

static void prefault(void *p, size_t n) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    uintptr_t mask = (uintptr_t)pg - 1;
    uintptr_t lo = ((uintptr_t)p + mask) & ~mask, hi = ((uintptr_t)p + n) & ~mask;
    if (hi <= lo) return;
    /* Only advice: contents are unchanged, and a refusal leaves the ordinary faults. */
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
    (void)p; (void)n;
#endif
}

void lm_host_prefault(lm_context *ctx, void *p, size_t n) {
    if (ctx->mem.prefault && n >= LM_PREFAULT_MIN) prefault(p, n);
}

/* Lua's allocator, wrapped for the length of one lua_pushlstring: the first new block of
 * at least `want` bytes (the string's, allocated before anything else in that call) is
 * pre-faulted. With a serial, the first allocation of the call (the string's) then waits
 * for that batch, so a download fills the staging memory while the pages are faulted in,
 * and Lua's copy out of it starts only once it is complete. Every block still comes from,
 * and goes back to, Lua's own allocator. */
typedef struct prefault_hook {
    lua_Alloc f; void *ud; size_t want; int done;
    lm_context *ctx; uint64_t serial; int waited;
} prefault_hook;

static void *prefault_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    prefault_hook *h = ud;
    void *p = h->f(h->ud, ptr, osize, nsize);
    if (p && !ptr && !h->done && nsize >= h->want) { h->done = 1; prefault(p, nsize); }
    if (h->serial && !h->waited) { h->waited = 1; lm_stream_wait(NULL, h->ctx, h->serial); }
    return p;
}

typedef struct push_args { const char *p; size_t n; } push_args;

static int push_string(lua_State *L) {
    const push_args *a = lua_touserdata(L, 1);
    lua_pushlstring(L, a->p, a->n);
    return 1;
}

/* lm_push_host_string, the bytes valid once batch `serial` (0: now) has finished.
 * Raises (a memory error) only after restoring the allocator. */
static void push_string_after(lua_State *L, lm_context *ctx, const char *p, size_t n, uint64_t serial) {
    if (!ctx->mem.prefault || n < LM_PREFAULT_MIN) {
        if (serial) lm_stream_wait(NULL, ctx, serial);
        lua_pushlstring(L, p, n);
        return;
    }
    push_args a = { p, n };
    prefault_hook h = { NULL, NULL, n, 0, ctx, serial, 0 };
    h.f = lua_getallocf(L, &h.ud);
    luaL_checkstack(L, 3, "to_bytes");
    lua_setallocf(L, prefault_alloc, &h);
    lua_pushcfunction(L, push_string);
    lua_pushlightuserdata(L, &a);
    int rc = lua_pcall(L, 1, 1, 0);
    lua_setallocf(L, h.f, h.ud);
    if (serial && !h.waited) lm_stream_wait(NULL, ctx, serial);   /* an allocation failed first */
    if (rc != LUA_OK) lua_error(L);
}

void lm_push_host_string(lua_State *L, lm_context *ctx, const char *p, size_t n) {
    push_string_after(L, ctx, p, n, 0);
}

typedef struct staged_push { lm_context *ctx; const char *p; size_t n; uint64_t serial; } staged_push;

static int push_staged(lua_State *L) {
    const staged_push *a = lua_touserdata(L, 1);
    push_string_after(L, a->ctx, a->p, a->n, a->serial);
    return 1;
}

int lm_storage_push_bytes(lua_State *L, lm_storage *s, VkDeviceSize offset, size_t n) {
    lm_context *ctx = s->ctx;
    if (s->mapped) {
        /* Lua's memory errors collect without finalizers: nothing frees s meanwhile. */
        lm_stream_wait(L, ctx, lm_storage_serial(s));
        lm_push_host_string(L, ctx, (const char *)s->mapped + offset, n);
        return 1;
    }
    if (n == 0 || n > LM_STAGING_WHOLE) return 0;
    lm_chunk *stage = staging_chunk(L, ctx, n);
    record_copy(L, s, stage, offset, n, 0, "download");
    uint64_t serial = lm_stream_current_serial(ctx);
    /* Submitted now, waited for inside the push once the string's pages are being
     * faulted in (push_string_after), so the two overlap. */
    lm_stream_submit(NULL, ctx);
    /* The string straight from staging: one host copy. Protected, so the staging chunk
     * goes back even when the allocation fails. */
    staged_push a = { ctx, (const char *)lm_chunk_mapped(stage), n, serial };
    luaL_checkstack(L, 3, "to_bytes");
    lua_pushcfunction(L, push_staged);
    lua_pushlightuserdata(L, &a);
    int rc = lua_pcall(L, 1, 1, 0);
    /* The batch has finished here (waited for in the push, or after a failed allocation). */
    lm_stream_wait(NULL, ctx, serial);
    lm_stream_free_after(ctx, stage, serial);
    if (rc != LUA_OK) lua_error(L);
    if (ctx->stream.failed[0]) {   /* the bytes copied are not the tensor's */
        lua_pop(L, 1);
        lm_stream_check(L, ctx);
    }
    return 1;
}
