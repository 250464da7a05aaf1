/* The device context: Vulkan instance, chosen physical device, logical device and
 * compute queue, plus the memory, stream and pipelines that live as long as it does.
 *
 * One context per lua_State, made on first use and kept in the registry by a handle
 * whose finalizer tears it down: at lua_close, whatever tensors are still referenced
 * (a finalizer may make tensors while the state closes, and Lua registers no finalizer
 * for them then). Teardown orphans every live storage (its ctx becomes NULL, and using
 * its tensors raises "the tensor's device context has been closed"), so nothing of the
 * context outlives it. */
#ifndef LUMUS_CONTEXT_H
#define LUMUS_CONTEXT_H

#include <pthread.h>
#include <vulkan/vulkan.h>
#include <lua.h>
#include "memory.h"
#include "stream.h"
#include "pipelines.h"

/* layer_norm_forward's kernel forms, for forcing one (0 = chosen per D and device). */
enum lm_ln_form { LM_LN_AUTO, LM_LN_GROUP, LM_LN_SUBGROUP, LM_LN_STREAM, LM_LN_SPLIT, LM_LN_ROW };

/* Reductions over rows: the form per op and row length where the device allows it (0), or
 * one for all (tune.reduce's "lanes", "subgroup" and "tile", in that order). */
enum lm_reduce_rows { LM_REDUCE_ROWS_AUTO, LM_REDUCE_ROWS_LANES, LM_REDUCE_ROWS_SUBGROUP, LM_REDUCE_ROWS_TILE };
/* Masked units for sums over rows: the device's default (GPUs), wherever allowed, never. */
enum lm_reduce_masked { LM_REDUCE_MASKED_AUTO, LM_REDUCE_MASKED_ON, LM_REDUCE_MASKED_OFF };

/* Storages the context keeps for ops from call to call, one per slot: anchored by the
 * context's registry handle, released by the context (at teardown and by
 * lumus.empty_cache) and counted as lumus.memory().internal. */
enum lm_scratch_slot { LM_SCRATCH_SPLIT_LN, LM_SCRATCH_MATMUL_SPLIT, LM_SCRATCH_GROUP_COUNTERS, LM_SCRATCH_SLOTS };

struct lm_context {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    int validation;
    VkPhysicalDevice phys;
    uint32_t device_index;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    int owns_device;                    /* 0 when a host handed its device in */
    pthread_mutex_t own_queue_mutex;
    pthread_mutex_t *queue_mutex;       /* serializes vkQueueSubmit on a shared queue */
    int shared_queue;                   /* queue_mutex comes from queues.c */
    void (*lock_queue)(void *);         /* the host's queue lock, when it gave one */
    void (*unlock_queue)(void *);
    void *queue_user;

    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memprops;
    uint32_t subgroup_size, min_subgroup, max_subgroup;
    int full_subgroups;                 /* computeFullSubgroups enabled */
    int subgroup_vote;                  /* subgroup vote operations in compute shaders */
    int subgroup_shuffle;               /* subgroup shuffle operations in compute shaders */
    int int64_atomics;                  /* shaderBufferInt64Atomics enabled */
    int narrow_storage;                 /* 8- and 16-bit storage buffer access enabled */
    uint32_t sm_count;                  /* VK_NV_shader_sm_builtins enabled: its SM count, else 0 */
    int coop_matrix;                    /* tensor cores for matmul: coop_nv or coop_khr */
    int coop_nv;                        /* VK_NV_cooperative_matrix enabled, 16x16x16 f16 -> f32 listed */
    int coop_khr;                       /* VK_KHR_cooperative_matrix enabled, the product listed, the KHR
                                           shaders built: their variants run instead of the NV ones */
    int coop_khr_conversions;           /* and VK_NV_cooperative_matrix2's conversions (attention) */
    int pipeline_stats;                 /* LUMUS_PIPELINE_STATS: print each pipeline's statistics */
    uint32_t timestamp_bits;
    VkDeviceSize max_allocation;        /* largest single tensor, in bytes */

    lm_memory mem;
    lm_stream stream;
    lm_pipelines pipes;

    VkDeviceSize bytes_since_gc, gc_threshold;
    uint64_t gc_runs;                   /* full collections run by allocation pressure */
    int timing;                         /* inside lumus.gpu_time */
    uint32_t ln_items_target, ln_wg_override;
    int ln_form;                  /* forced layer_norm form (lm_ln_form) */
    uint32_t ln_subgroup_items;   /* layer_norm tuning knobs (0 = default) */
    uint32_t ln_parts;            /* forced workgroups per row (split form) */
    uint32_t ln_spin_limit;       /* split form's polls for partners (0 = default) */
    int ln_no_tickets;            /* split form: rows by workgroup index, not tickets */
    int ln_return_scratch;        /* split form: also return the scratch (for tuning) */
    int ln_fenced_records;        /* split form: the 32-bit fenced protocol even with int64 atomics */
    uint32_t ln_classes;          /* split form: SM classes (0 = automatic, 1 = off) */
    int ln_scalar;                /* layer_norm, D % 4 != 0: 0 device default, 1 floats, 2 masked vec4s */
    lm_storage *scratch[LM_SCRATCH_SLOTS];
    lm_storage *storages;         /* every live storage of the context (orphaned at teardown) */
    /* The split LayerNorm scratch's state (slot LM_SCRATCH_SPLIT_LN). */
    uint32_t ln_epoch, ln_ticket_base;
    uint64_t ln_scratch_failures; /* stream.failures when it was last zeroed */
    uint64_t counters_failures;   /* the same for slot LM_SCRATCH_GROUP_COUNTERS (group_counters.c) */
    uint32_t mm_tile[5];          /* matmul tile override: bm, bn, bk, tm, tn (0 = automatic) */
    int mm_rotate;                /* matmul K-order rotation: 0 automatic, 1 on, 2 off */
    int mm_order;                 /* matmul thread order: 0 automatic, 1 row, 2 warp patches */
    int mm_builtin;               /* matmul compiled-in float32 tiles: 0 automatic, 1 on, 2 off */
    int mm_copy_b;                /* matmul b read transposed, copied first: 0 automatic, 1 always, 2 never */
    int mm_path;                  /* matmul kernel: 0 automatic, else a forced lm_mm_path */
    uint32_t mm_split;            /* matmul small-M path's K slices (0 = automatic) */
    uint32_t mm_coop_form;        /* matmul tensor-core block form, 1-based (0 = automatic) */
    uint32_t grid_max_x;          /* lm_grid width cap, for specs (0 = the device limit) */
    uint32_t row_wg, row_items;   /* softmax/sum workgroup and register items (0 = auto) */
    int row_scalar;               /* softmax rows of d % 4 != 0 an element at a time (tune.rows) */
    int softmax_cols_form;        /* softmax over a non-last dim: an lm_softmax_cols_form (tune.softmax_cols) */
    int softmax_long_rows;        /* softmax over few long rows: LM_SOFTMAX_LONG_ROWS_* (tune.softmax_cols) */
    int softmax_short_rows;       /* softmax over short rows: LM_SOFTMAX_SHORT_ROWS_* (tune.softmax_cols) */
    uint32_t softmax_tile_items;  /* softmax tile form: 16-byte units per thread (0 = auto; tune.softmax_cols) */
    int transpose_form;           /* strided copies' transpose form (strided.c; 0 = tile64) */
    int reduce_rows_form;         /* reductions over rows: an LM_REDUCE_ROWS_* (tune.reduce) */
    int reduce_masked;            /* sums over rows of any length as masked units: an
                                   * LM_REDUCE_MASKED_* (tune.reduce) */
    int reduce_two_dispatches;    /* split reductions: finish in a second dispatch (tune.reduce) */
    uint32_t reduce_groups_per_sm;   /* reductions: split below this many workgroups per SM (0 = default) */
    int ew_hw_half;               /* elementwise float16 packing: 0 device default, 1 hardware, 2 software */
    int ew_fused_fma;             /* elementwise exact products by fma: 0 device default, 1 on, 2 off */
    int linear_path;              /* linear: 0 automatic, 1 the small-model kernel, 2 matmul's (tune.linear) */
};

/* The context of this state, created on first use; raises if no device is usable. */
lm_context *lm_context_get(lua_State *L);

/* The context of this state if it has one, else NULL (creates nothing). */
lm_context *lm_context_peek(lua_State *L);

/* The storage on top of the stack becomes scratch slot `slot` (popped; its reference
 * passes to the context), replacing and releasing the slot's previous storage. */
void lm_context_set_scratch(lua_State *L, lm_context *ctx, int slot);
/* Releases slot `slot`'s storage, if any (its memory comes back once work on it is done). */
void lm_context_release_scratch(lm_context *ctx, int slot);
/* Bytes held in scratch slots. */
VkDeviceSize lm_context_scratch_bytes(const lm_context *ctx);

/* Contexts alive in the process (lumus_context_count). */
int lm_context_count(void);


/* Makes L's context on the host's device (lumus.h); raises if L already has a
 * context or the device cannot serve lumus. */
struct lumus_vulkan_device;
lm_context *lm_context_attach(lua_State *L, const struct lumus_vulkan_device *dev);

/* Pushes lumus.device()-style tables. */
void lm_push_device_info(lua_State *L, VkPhysicalDevice phys, uint32_t index);
int lm_devices(lua_State *L);
int lm_device(lua_State *L);

/* Number of validation messages seen (LUMUS_VALIDATION=1). */
unsigned long lm_validation_messages(void);

#endif
