/* Device memory: blocks from the driver, chunks for tensors (see memory.h). */
#include "memory.h"
#include "context.h"
#include <stdlib.h>
#include <string.h>

#define LM_MIB ((VkDeviceSize)1 << 20)
#define LM_SMALL_REQUEST (1 * LM_MIB)    /* requests up to this come from small blocks */
#define LM_SMALL_BLOCK (2 * LM_MIB)      /* a small block, and the rounding of large ones */
#define LM_SMALL_BLOCK_MAX (32 * LM_MIB)
#define LM_LARGE_BLOCK_MIN (16 * LM_MIB)
/* Empty staging blocks are kept while the staging pool holds at most this much: host
 * memory the device can reach is pinned by the driver, slow to allocate (far slower than
 * the copy through it), so transfers reuse it; lumus.empty_cache gives it back. */
#define LM_STAGING_KEEP (160 * LM_MIB)

static int find_type(const VkPhysicalDeviceMemoryProperties *mp, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags avoid) {
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        if ((f & want) == want && !(f & avoid)) return (int)i;
    }
    return -1;
}

static void pool_setup(lm_pool *p, const VkPhysicalDeviceMemoryProperties *mp, int type,
                       VkDeviceSize max_block) {
    memset(p, 0, sizeof *p);
    p->type_index = (uint32_t)type;
    VkMemoryPropertyFlags f = mp->memoryTypes[type].propertyFlags;
    p->host_visible = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0;
    p->host_coherent = (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
    p->max_block = max_block;
}

VkResult lm_memory_init(lm_context *ctx) {
    lm_memory *m = &ctx->mem;
    const VkPhysicalDeviceMemoryProperties *mp = &ctx->memprops;
    memset(m, 0, sizeof *m);
    const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int is_uma = ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                 ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    int dev = -1;
    /* On a CPU or integrated device, device-local memory is ordinary RAM: map it.
     * A discrete GPU's host-visible VRAM is read over PCIe uncached: use staging. */
    if (is_uma) dev = find_type(mp, DL | HV | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
    if (is_uma && dev < 0) dev = find_type(mp, DL | HV, 0);
    if (dev < 0) dev = find_type(mp, DL, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    if (dev < 0) dev = find_type(mp, DL, 0);
    if (dev < 0) dev = 0;
    pool_setup(&m->device, mp, dev, 256 * LM_MIB);
    m->direct = m->device.host_visible && m->device.host_coherent;
    /* LUMUS_TEST_STAGING=1 moves data through staging memory even where tensors could be
     * mapped, so that the path discrete GPUs take is tested on lavapipe too. */
    const char *staging = getenv("LUMUS_TEST_STAGING");
    if (staging && *staging && strcmp(staging, "0") != 0) m->direct = 0;
    int stg = find_type(mp, HV | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
    if (stg < 0) stg = find_type(mp, HV, 0);
    if (stg < 0 && !m->direct) return VK_ERROR_FEATURE_NOT_PRESENT;
    pool_setup(&m->staging, mp, stg < 0 ? dev : stg, 64 * LM_MIB);

    /* LUMUS_PREFAULT=0 turns off storage.c's pre-faulting of large strings (for A/B runs;
     * lumus.tune.stream{prefault=} sets it at run time). */
    const char *pf = getenv("LUMUS_PREFAULT");
    m->prefault = !(pf && strcmp(pf, "0") == 0);
    m->alignment = 256;
    VkDeviceSize a = ctx->props.limits.minStorageBufferOffsetAlignment;
    if (a > m->alignment) m->alignment = a;
    m->total = mp->memoryHeaps[mp->memoryTypes[dev].heapIndex].size;
    m->limit = m->total;
    m->max_single = ctx->max_allocation;
    return VK_SUCCESS;
}

static VkDeviceSize heap_budget(lm_context *ctx, uint32_t type_index, VkDeviceSize *usage) {
    *usage = 0;
    if (!ctx->mem.has_budget) return 0;
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT };
    VkPhysicalDeviceMemoryProperties2 mp = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &b };
    vkGetPhysicalDeviceMemoryProperties2(ctx->phys, &mp);
    uint32_t heap = ctx->memprops.memoryTypes[type_index].heapIndex;
    *usage = b.heapUsage[heap];
    return b.heapBudget[heap];
}

VkDeviceSize lm_memory_budget(lm_context *ctx, VkDeviceSize *usage) {
    return heap_budget(ctx, ctx->mem.device.type_index, usage);
}

static void block_destroy(lm_context *ctx, lm_pool *p, lm_block *b) {
    /* Every node of the address chain, used ones too (orphaned at teardown). */
    for (lm_chunk *c = b->first, *n; c; c = n) { n = c->next; free(c); }
    if (b->buffer) vkDestroyBuffer(ctx->device, b->buffer, NULL);
    if (b->memory) vkFreeMemory(ctx->device, b->memory, NULL);
    if (b->prev) b->prev->next = b->next; else p->blocks = b->next;
    if (b->next) b->next->prev = b->prev;
    p->reserved -= b->size;
    if (b->small) p->reserved_small -= b->size;
    p->nblocks--;
    free(b);
}

static void pool_destroy(lm_context *ctx, lm_pool *p) {
    while (p->blocks) block_destroy(ctx, p, p->blocks);
}

void lm_memory_destroy(lm_context *ctx) {
    pool_destroy(ctx, &ctx->mem.device);
    pool_destroy(ctx, &ctx->mem.staging);
}

static void free_list_push(lm_block *b, lm_chunk *c) {
    c->is_free = 1;
    c->free_prev = NULL;
    c->free_next = b->free_list;
    if (b->free_list) b->free_list->free_prev = c;
    b->free_list = c;
}

static void free_list_remove(lm_block *b, lm_chunk *c) {
    if (c->free_prev) c->free_prev->free_next = c->free_next; else b->free_list = c->free_next;
    if (c->free_next) c->free_next->free_prev = c->free_prev;
    c->free_prev = c->free_next = NULL;
    c->is_free = 0;
}

static VkResult block_create(lm_context *ctx, lm_pool *p, VkDeviceSize size, int small, lm_block **out) {
    /* Past the heap's budget the driver may page or fail other work: count it as full. */
    VkDeviceSize usage, budget = heap_budget(ctx, p->type_index, &usage);
    if (budget && (usage > budget || size > budget - usage)) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    lm_block *b = calloc(1, sizeof *b);
    lm_chunk *c = calloc(1, sizeof *c);
    if (!b || !c) { free(b); free(c); return VK_ERROR_OUT_OF_HOST_MEMORY; }
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = vkCreateBuffer(ctx->device, &bi, NULL, &b->buffer);
    if (r != VK_SUCCESS) goto fail;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(ctx->device, b->buffer, &req);
    if (!(req.memoryTypeBits & (1u << p->type_index))) { r = VK_ERROR_FEATURE_NOT_PRESENT; goto fail; }
    VkMemoryAllocateFlagsInfo fi = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
        .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
    };
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fi,
        .allocationSize = req.size, .memoryTypeIndex = p->type_index,
    };
    r = vkAllocateMemory(ctx->device, &ai, NULL, &b->memory);
    if (r != VK_SUCCESS) goto fail;
    r = vkBindBufferMemory(ctx->device, b->buffer, b->memory, 0);
    if (r != VK_SUCCESS) goto fail;
    if (p->host_visible) {
        void *ptr = NULL;
        r = vkMapMemory(ctx->device, b->memory, 0, VK_WHOLE_SIZE, 0, &ptr);
        if (r != VK_SUCCESS) goto fail;
        b->mapped = ptr;
    }
    VkBufferDeviceAddressInfo dai = { .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = b->buffer };
    b->address = vkGetBufferDeviceAddress(ctx->device, &dai);
    b->size = size;
    b->pool = p;
    b->small = small;
    c->offset = 0; c->size = size; c->block = b;
    b->first = c;   /* never merged away: a free merges into its lower neighbour */
    free_list_push(b, c);
    b->next = p->blocks;
    if (p->blocks) p->blocks->prev = b;
    p->blocks = b;
    p->reserved += size;
    if (small) p->reserved_small += size;
    p->nblocks++;
    p->blocks_made++;
    *out = b;
    return VK_SUCCESS;
fail:
    if (b->buffer) vkDestroyBuffer(ctx->device, b->buffer, NULL);
    if (b->memory) vkFreeMemory(ctx->device, b->memory, NULL);
    free(b); free(c);
    return r;
}

/* First fit within a block; splits the tail off as a new free chunk. */
static lm_chunk *block_take(lm_block *b, VkDeviceSize size) {
    for (lm_chunk *c = b->free_list; c; c = c->free_next) {
        if (c->size < size) continue;
        if (c->size > size) {
            lm_chunk *rest = calloc(1, sizeof *rest);
            if (!rest) return NULL;
            rest->offset = c->offset + size;
            rest->size = c->size - size;
            rest->block = b;
            rest->prev = c; rest->next = c->next;
            if (c->next) c->next->prev = rest;
            c->next = rest;
            c->size = size;
            free_list_push(b, rest);
        }
        free_list_remove(b, c);
        b->used += size;
        return c;
    }
    return NULL;
}

static VkDeviceSize pool_trim(lm_context *ctx, lm_pool *p);

static VkDeviceSize round_up(VkDeviceSize n, VkDeviceSize to) { return (n + to - 1) / to * to; }

/* The largest power of two <= n (n >= 1). */
static VkDeviceSize floor_pow2(VkDeviceSize n) {
    VkDeviceSize p = 1;
    while (p <= n / 2) p *= 2;
    return p;
}

/* The size of a new block for a request of `size` bytes: small blocks grow once the
 * class holds many (each is a vkAllocateMemory), large ones double with what the class
 * holds, so a big workload takes few blocks and a small one reserves little. */
static VkDeviceSize block_size_for(const lm_pool *p, VkDeviceSize size, int small) {
    if (small) {
        VkDeviceSize bs = floor_pow2(p->reserved_small / 8 + 1);
        if (bs < LM_SMALL_BLOCK) bs = LM_SMALL_BLOCK;
        if (bs > LM_SMALL_BLOCK_MAX) bs = LM_SMALL_BLOCK_MAX;
        return bs;   /* >= 2 MiB > any small request */
    }
    if (size > p->max_block / 2) return size;   /* a block of its own */
    VkDeviceSize large = p->reserved - p->reserved_small;
    VkDeviceSize bs = floor_pow2(large + 1);
    if (bs < LM_LARGE_BLOCK_MIN) bs = LM_LARGE_BLOCK_MIN;
    if (bs > p->max_block) bs = p->max_block;
    return bs < size ? round_up(size, LM_SMALL_BLOCK) : bs;
}

/* A new block for `size` bytes: of the class's size, else just big enough; empty blocks
 * go back to the driver first when the device pool would pass the memory limit, and
 * when the driver (or the budget) refuses. */
static VkResult pool_grow(lm_context *ctx, lm_pool *p, VkDeviceSize size, int small, lm_block **b) {
    VkDeviceSize bs = block_size_for(p, size, small);
    VkDeviceSize least = small ? LM_SMALL_BLOCK : size;
    if (least < size) least = size;
    if (p == &ctx->mem.device && p->reserved + bs > ctx->mem.limit) {
        pool_trim(ctx, p);
        bs = block_size_for(p, size, small);
        if (p->reserved + bs > ctx->mem.limit) bs = least;
    }
    VkResult r = block_create(ctx, p, bs, small, b);
    if (r != VK_SUCCESS && bs > least) r = block_create(ctx, p, bs = least, small, b);
    if (r != VK_SUCCESS && pool_trim(ctx, p) > 0) r = block_create(ctx, p, bs, small, b);
    return r;
}

VkResult lm_chunk_alloc(lm_context *ctx, lm_pool *pool, VkDeviceSize bytes, lm_chunk **out) {
    lm_memory *m = &ctx->mem;
    VkDeviceSize a = m->alignment;
    VkDeviceSize size = bytes == 0 ? a : bytes;
    if (size > m->max_single || size > ((VkDeviceSize)-1) - a) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    size = (size + a - 1) / a * a;
    int is_device = pool == &m->device;
    if (is_device && (size > m->limit || m->in_use > m->limit - size)) return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    int small = size <= LM_SMALL_REQUEST;
    lm_chunk *c = NULL;
    for (lm_block *b = pool->blocks; b && !c; b = b->next)
        if (b->small == small && b->size - b->used >= size) c = block_take(b, size);
    if (!c) {
        lm_block *b = NULL;
        VkResult r = pool_grow(ctx, pool, size, small, &b);
        if (r != VK_SUCCESS) return r;
        c = block_take(b, size);
        if (!c) return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    if (is_device) {
        m->in_use += c->size;
        if (m->in_use > m->peak) m->peak = m->in_use;
        m->chunks++;
    }
    *out = c;
    return VK_SUCCESS;
}

void lm_chunk_free(lm_context *ctx, lm_chunk *c) {
    lm_block *b = c->block;
    lm_pool *p = b->pool;
    if (p == &ctx->mem.device) { ctx->mem.in_use -= c->size; ctx->mem.chunks--; }
    b->used -= c->size;
    /* Coalesce with free neighbours in address order. */
    if (c->next && c->next->is_free) {
        lm_chunk *n = c->next;
        free_list_remove(b, n);
        c->size += n->size;
        c->next = n->next;
        if (n->next) n->next->prev = c;
        free(n);
    }
    if (c->prev && c->prev->is_free) {
        lm_chunk *pv = c->prev;
        pv->size += c->size;
        pv->next = c->next;
        if (c->next) c->next->prev = pv;
        free(c);
        c = pv;
    } else {
        free_list_push(b, c);
    }
    /* An empty block is kept for reuse while the device pool holds no more than the peak
     * in use plus the larger of that block and half the peak (the staging pool: while it
     * is the only one or the pool is within LM_STAGING_KEEP), so a loop that frees and
     * reallocates its intermediates reuses its blocks instead of paying for a
     * vkAllocateMemory and vkFreeMemory every iteration. The half-peak slack is for
     * fragmentation: a training step of large tensors in shared blocks can need a quarter
     * more reserved than its peak, and a bound of one block let it free and retake a
     * block every step. */
    if (b->used == 0) {
        VkDeviceSize slack = b->size > ctx->mem.peak / 2 ? b->size : ctx->mem.peak / 2;
        int keep = p == &ctx->mem.device ? p->reserved <= ctx->mem.peak + slack
                                         : p->nblocks == 1 || p->reserved <= LM_STAGING_KEEP;
        if (!keep) block_destroy(ctx, p, b);
    }
}

/* Returns the pool's empty blocks to the driver; the bytes released. */
static VkDeviceSize pool_trim(lm_context *ctx, lm_pool *p) {
    VkDeviceSize n = 0;
    for (lm_block *b = p->blocks, *next; b; b = next) {
        next = b->next;
        if (b->used == 0) { n += b->size; block_destroy(ctx, p, b); }
    }
    return n;
}

VkDeviceSize lm_memory_trim(lm_context *ctx) {
    return pool_trim(ctx, &ctx->mem.device) + pool_trim(ctx, &ctx->mem.staging);
}
