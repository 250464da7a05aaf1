/* Device memory: blocks sub-allocated into chunks, and the storages tensors share.
 *
 * Drivers cap vkAllocateMemory calls (often at 4096) and each call is slow, so tensors
 * take chunks of blocks. Blocks start small and grow with use, in two size classes as
 * PyTorch's caching allocator has them: requests up to 1 MiB come from small blocks
 * (2 MiB, growing to 32 MiB once many are held), larger ones from large blocks that
 * double with what the class holds (16 MiB up to the pool's largest block), and a
 * request over half the largest block gets a block of its own. Empty blocks are kept
 * for reuse up to the peak in use; lumus.empty_cache, the memory limit and the device's
 * memory budget (VK_EXT_memory_budget) send them back to the driver. Every block is
 * bound to one VkBuffer whose device address kernels use directly; chunks are kept in
 * address order with boundary links so a free coalesces with its neighbours in O(1). */
#ifndef LUMUS_MEMORY_H
#define LUMUS_MEMORY_H

#include <stdint.h>
#include <vulkan/vulkan.h>

typedef struct lm_context lm_context;
typedef struct lm_block lm_block;
struct lm_pool;

typedef struct lm_chunk {
    VkDeviceSize offset, size;
    struct lm_chunk *prev, *next;           /* neighbours in address order */
    struct lm_chunk *free_prev, *free_next; /* links in the block's free list */
    lm_block *block;
    int is_free;
} lm_chunk;

struct lm_block {
    VkDeviceMemory memory;
    VkBuffer buffer;
    VkDeviceAddress address;
    unsigned char *mapped;      /* NULL unless the memory is host-visible */
    VkDeviceSize size, used;
    lm_chunk *free_list;
    lm_chunk *first;            /* the chunk at offset 0: the head of the address chain */
    lm_block *prev, *next;
    struct lm_pool *pool;
    int small;                  /* serves requests of the small class */
};

typedef struct lm_pool {
    uint32_t type_index;
    int host_visible, host_coherent;
    VkDeviceSize max_block;     /* largest block made for many requests */
    lm_block *blocks;
    VkDeviceSize reserved;      /* bytes held from the driver */
    VkDeviceSize reserved_small; /* of which in small blocks */
    uint32_t nblocks;
    uint64_t blocks_made;       /* vkAllocateMemory calls so far (each one is slow) */
} lm_pool;

typedef struct lm_memory {
    lm_pool device;             /* where tensors live */
    lm_pool staging;            /* host-visible, for transfers when device is not mapped */
    int direct;                 /* tensors are host-visible and coherent: map them directly */
    VkDeviceSize alignment;     /* of every chunk */
    VkDeviceSize in_use, peak;  /* bytes in live chunks of the device pool */
    VkDeviceSize limit;         /* refuse requests past this many bytes in use */
    VkDeviceSize total;         /* size of the device-local heap */
    VkDeviceSize max_single;    /* largest allocation the device accepts */
    uint64_t chunks;            /* live chunks in the device pool */
    int has_budget;             /* VK_EXT_memory_budget: blocks stay within heapBudget */
    int prefault;               /* large downloaded strings: pages faulted in one go (storage.c) */
} lm_memory;

/* A device allocation shared by a tensor and its views: a Lua userdata (so that Lua
 * frees it even when a tensor made during lua_close is never finalized), anchored by
 * each tensor's user value. `refs` counts the handles (tensors, scratch slots); the last
 * one gives the chunk back. Hazard fields are the stream's: the batch that last used it
 * and the barrier epoch of its last read and write. */
typedef struct lm_storage {
    int refs;
    lm_context *ctx;            /* NULL once the context is torn down (orphaned) */
    struct lm_storage *prev, *next;   /* the context's live storages, while refs > 0 */
    lm_chunk *chunk;
    VkDeviceSize bytes;
    VkDeviceAddress address;
    VkBuffer buffer;
    VkDeviceSize buffer_offset;
    unsigned char *mapped;      /* host pointer when directly mapped, else NULL */
    int external;               /* a host buffer (lumus.h): chunk is NULL, nothing to free */
    uint64_t last_serial;
    uint64_t read_epoch, write_epoch;
    uint32_t capture_mark;      /* stream.capture_mark of the capture it predates (capture.c) */
    uint64_t version;           /* bumped by every recorded dispatch that writes it (autograd's
                                 * check that a saved tensor was not changed in place) */
} lm_storage;

VkResult lm_memory_init(lm_context *ctx);
void lm_memory_destroy(lm_context *ctx);

/* A chunk of at least `bytes`; VK_ERROR_OUT_OF_DEVICE_MEMORY past the limit. */
VkResult lm_chunk_alloc(lm_context *ctx, lm_pool *pool, VkDeviceSize bytes, lm_chunk **out);
void lm_chunk_free(lm_context *ctx, lm_chunk *c);
/* Sends the empty blocks of both pools back to the driver; the bytes released. */
VkDeviceSize lm_memory_trim(lm_context *ctx);
/* The device heap's budget and this process's usage of it (VK_EXT_memory_budget);
 * 0 when the device does not report them. */
VkDeviceSize lm_memory_budget(lm_context *ctx, VkDeviceSize *usage);

static inline VkDeviceAddress lm_chunk_address(const lm_chunk *c) { return c->block->address + c->offset; }
static inline unsigned char *lm_chunk_mapped(const lm_chunk *c) {
    return c->block->mapped ? c->block->mapped + c->offset : NULL;
}

#endif
