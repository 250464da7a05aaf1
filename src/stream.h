/* The command stream: ops record into the current command buffer and return at once.
 *
 * A ring of command buffers with fences lets the host record the next batch while the
 * device runs earlier ones. A batch is submitted when the host reads data, on
 * synchronize, when it holds LM_BATCH_OPS ops, and at exit. Each submitted batch has a
 * serial; storages remember the last serial that used them, so a free waits for that
 * batch (deferred) and a host read waits only for what it needs. Barriers are recorded
 * only when an op reads or overwrites what an earlier op of the same batch wrote, or
 * overwrites what it read (tracked per storage with barrier epochs). */
#ifndef LUMUS_STREAM_H
#define LUMUS_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>
#include <lua.h>
#include "memory.h"

#define LM_RING 8
#define LM_BATCH_OPS 256
/* lumus.gpu_time stamps the start and end of every batch it times (pairs of queries). */
#define LM_TIMESTAMPS 128
#define LM_MAX_WAITS 16
#define LM_HELD_MIN ((VkDeviceSize)64 << 20)
/* Storages one recorded command may declare (a dispatch's reads and writes). Every use
 * must be kept: a dropped one is a hazard without a barrier. */
#define LM_STREAM_USES 16

/* A batch is done once the timeline semaphore reaches its serial: no fence to reset or
 * signal per batch, and one counter read tells which of the ring's batches finished. */
typedef struct lm_slot {
    VkCommandPool pool;         /* this slot's alone: reset as a whole before each batch */
    VkCommandBuffer cb;
    uint64_t serial;
    int state;          /* 0 idle, 1 recording, 2 submitted */
    uint32_t ops;
    const char *last_op;
} lm_slot;

typedef struct lm_deferred { lm_chunk *chunk; uint64_t serial; } lm_deferred;

/* A command buffer recorded once and submitted again and again (lumus.capture's graphs).
 * It begins and ends with full barriers, so each submit is ordered after everything
 * submitted before it and before everything after, and host reads see its writes. It is
 * recorded with SIMULTANEOUS_USE: a submit while an earlier one still runs is legal, and
 * the barriers run the two one after the other. */
typedef struct lm_recording {
    VkCommandPool pool;
    VkCommandBuffer cb;
    uint64_t last_serial;       /* serial of its last submit; 0 before the first */
    uint32_t ops;               /* dispatches recorded */
    int dead;                   /* the stream was destroyed first: no device objects left */
    struct lm_recording *prev, *next;   /* the stream's live recordings */
} lm_recording;

typedef struct lm_stream {
    int ready;                  /* lm_stream_init created the ring */
    lm_slot slot[LM_RING];
    int cur;                    /* recording slot, or -1 */
    uint64_t next_serial;       /* serial the next batch to begin will get */
    uint64_t completed;         /* every batch up to this serial has finished */
    uint64_t epoch;             /* advances at every barrier */
    lm_deferred *deferred;
    size_t ndeferred, cap;
    VkQueryPool queries;
    const char *op;             /* name of the op being recorded, for device errors */
    char failed[160];           /* a device failure to report at the next sync point */
    int lost;                   /* the device is lost: every later call fails */
    int next_slot;
    struct { lm_storage *s; int write; } use[LM_STREAM_USES];   /* storages the op being recorded uses */
    int nuse;
    int spin;                   /* poll the timeline before sleeping (discrete GPUs) */
    int host_reads;             /* the batch being recorded writes memory the host maps */
    int abandoned;              /* destroyed while a batch still ran: device objects left */
    double wait_limit;          /* seconds a batch may take before the device counts as lost */
    VkSemaphore timeline;       /* signalled with each batch's serial (lumus.h's hosts too) */
    /* Host buffers wrapped as tensors may alias each other, so the stream treats them
     * as one storage: the barrier epochs and serial of their last device use. */
    uint64_t ext_read_epoch, ext_write_epoch, ext_serial;
    struct { VkSemaphore semaphore; uint64_t value; } waits[LM_MAX_WAITS];
    int nwaits;                 /* host semaphores the next submit waits for */
    uint64_t submits;           /* batches submitted so far (lumus.tune.stream_stats) */
    uint64_t failures;          /* batches that failed (their work may not have run) */
    uint32_t stamps;            /* timestamp queries written by the gpu_time in progress */
    int stamp_final;            /* gpu_time's last submit: close the last pair */
    int stamp_hold;             /* a submit before a replay under gpu_time: leave the pair open */
    VkDeviceSize held;          /* bytes freed while this batch records, back once it runs */
    VkDeviceSize deferred_bytes; /* bytes of all deferred frees (counted in mem.in_use) */
    lm_recording *recording;    /* being recorded: ops go into it, not into a batch */
    lm_recording *recordings;   /* every live recording (destroyed with the stream) */
    uint32_t capture_mark;      /* lumus.capture's mark for the storages alive at its start */
    uint64_t replays;           /* recordings submitted so far */
    /* lumus.tune.host_profile (lumus_core.c): host seconds in each step of the stream,
     * counted only while on (bench/frame.lua's breakdown of an op's host cost). */
    struct { int on; double record, submit, wait; uint64_t records, submits, waits, barriers; } prof;
    /* tune.stream{submit_idle = k}: submit the batch after every k ops while the device
     * has nothing left to run, so it works while the host records the rest (0: off). */
    uint32_t submit_idle;
    /* lm_stream_note_long: the op being recorded runs long on the device. */
    int long_op;
} lm_stream;

VkResult lm_stream_init(lm_context *ctx);
/* Waits for all work first; sets `abandoned` when a batch outlives the wait limit. */
void lm_stream_destroy(lm_context *ctx);

/* The command buffer being recorded (begun on demand); raises on device failure. */
VkCommandBuffer lm_stream_cmd(lua_State *L, lm_context *ctx, const char *op);

/* Declares that the op being recorded reads or writes a storage; records a barrier
 * when a hazard with earlier work of this batch exists. Call before the dispatch. */
void lm_stream_read(lm_context *ctx, lm_storage *s);
void lm_stream_write(lm_context *ctx, lm_storage *s);
void lm_stream_hazards(lm_context *ctx, VkCommandBuffer cb);
/* Declares that the op being recorded writes host-mapped memory the host reads once the
 * batch is done (a download into staging): the batch then ends with a barrier that makes
 * device writes visible to the host. Tensors lumus maps, and host buffers, always do. */
void lm_stream_host_read(lm_context *ctx);

/* Ends an op: counts it and submits the batch once it holds LM_BATCH_OPS ops, or once
 * the memory freed while it records (which comes back only when it has run) exceeds
 * what is live (at least LM_HELD_MIN), so a loop that never reads does not grow the pool
 * without bound. */
void lm_stream_op_done(lua_State *L, lm_context *ctx);
/* Declares that the op being recorded runs long on the device (a large matmul): once it
 * is done, the batch is submitted if the device has nothing left to run, so the device
 * works on it while the host records what follows (a training step's forward and
 * backward: otherwise the device waits for the whole step's recording). */
void lm_stream_note_long(lm_context *ctx);

void lm_stream_submit(lua_State *L, lm_context *ctx);
/* Waits until the batch `serial` has finished (submitting it if still recording). */
void lm_stream_wait(lua_State *L, lm_context *ctx, uint64_t serial);
void lm_stream_sync(lua_State *L, lm_context *ctx);
/* Non-blocking: notes finished batches and releases deferred frees. */
void lm_stream_poll(lm_context *ctx);
int lm_stream_pending(lm_context *ctx);

/* Frees a chunk now, or once the batch `serial` is done. */
void lm_stream_free_after(lm_context *ctx, lm_chunk *c, uint64_t serial);

/* Serial of the batch being recorded (what a use recorded now must wait for). */
uint64_t lm_stream_current_serial(lm_context *ctx);

/* Submits the batch being recorded if its serial is <= serial (so a host may wait for
 * it on the timeline semaphore); raises on device failure. */
void lm_stream_flush(lua_State *L, lm_context *ctx, uint64_t serial);

/* Makes the next submit wait for a host timeline semaphore; 0 when LM_MAX_WAITS are
 * already pending. */
int lm_stream_add_wait(lm_context *ctx, VkSemaphore semaphore, uint64_t value);

/* Recordings (lm_recording). record_begin submits the batch being recorded (work
 * before the recording goes to the queue first, and its barrier epochs stay apart) and
 * makes r the target of the ops that follow: lm_stream_recording_cmd hands out its
 * command buffer, while lm_stream_cmd (a transfer, gpu_time) and every host wait
 * (lm_stream_wait / sync / flush with a lua_State) raise, naming lumus.capture. Raises
 * on failure with r holding nothing. */
void lm_stream_record_begin(lua_State *L, lm_context *ctx, lm_recording *r);
VkCommandBuffer lm_stream_recording_cmd(lua_State *L, lm_context *ctx, const char *op);
/* Ends the recording; VK_SUCCESS, else r holds nothing (as after lm_stream_record_free). */
VkResult lm_stream_record_end(lm_context *ctx, lm_recording *r);
/* Submits r after the batch being recorded, waiting for the host semaphores that the
 * next submit would (lm_stream_add_wait) and signalling the timeline with its own serial
 * (r->last_serial); raises on device failure. */
void lm_stream_replay(lua_State *L, lm_context *ctx, lm_recording *r);
/* Frees r's command buffer once its last submit has finished (waits for it). */
void lm_stream_record_free(lm_context *ctx, lm_recording *r);

/* Monotonic seconds (for the host profile). */
double lm_stream_clock(void);

/* Raises the pending device failure, if any. */
void lm_stream_check(lua_State *L, lm_context *ctx);

#endif
