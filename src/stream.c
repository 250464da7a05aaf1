/* The command stream (see stream.h). */
#define _POSIX_C_SOURCE 200112L
#include <assert.h>
#include "stream.h"
#include "context.h"
#include "vkcheck.h"
#include "luautil.h"
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

/* vkQueueSubmit needs the queue to itself: the host's lock when it gave one (lumus.h),
 * else the mutex of this VkQueue (queues.c). */
static void lock_queue(lm_context *ctx) {
    if (ctx->lock_queue) ctx->lock_queue(ctx->queue_user); else pthread_mutex_lock(ctx->queue_mutex);
}
static void unlock_queue(lm_context *ctx) {
    if (ctx->unlock_queue) ctx->unlock_queue(ctx->queue_user); else pthread_mutex_unlock(ctx->queue_mutex);
}

/* A batch that has not finished after this long is reported rather than waited on
 * forever; LUMUS_WAIT_LIMIT (seconds) overrides it, e.g. for a host that wants a hung
 * or runaway kernel reported sooner. */
#define LM_WAIT_LIMIT_S 600.0

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double lm_stream_clock(void) { return now_s(); }

VkResult lm_stream_init(lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    memset(st, 0, sizeof *st);
    st->cur = -1;
    st->next_serial = 1;
    st->epoch = 1;
    st->spin = ctx->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
    st->wait_limit = LM_WAIT_LIMIT_S;
    const char *lim = getenv("LUMUS_WAIT_LIMIT");
    if (lim && *lim) {
        char *end = NULL;
        double v = strtod(lim, &end);
        if (end && *end == 0 && v > 0 && v <= 1e6) st->wait_limit = v;
    }
    /* One pool per slot, reset whole before the slot records again: cheaper in drivers
     * than resetting single command buffers (no RESET_COMMAND_BUFFER flag). */
    st->ready = 1;
    for (int i = 0; i < LM_RING; i++) {
        VkCommandPoolCreateInfo pi = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
            .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
            .queueFamilyIndex = ctx->queue_family,
        };
        VkResult r = vkCreateCommandPool(ctx->device, &pi, NULL, &st->slot[i].pool);
        if (r != VK_SUCCESS) return r;
        VkCommandBufferAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = st->slot[i].pool,
            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
        };
        r = vkAllocateCommandBuffers(ctx->device, &ai, &st->slot[i].cb);
        if (r != VK_SUCCESS) return r;
    }
    VkSemaphoreTypeCreateInfo ti = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0,
    };
    VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
    VkResult r = vkCreateSemaphore(ctx->device, &si, NULL, &st->timeline);
    if (r != VK_SUCCESS) return r;
    if (ctx->timestamp_bits > 0) {
        VkQueryPoolCreateInfo qi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = LM_TIMESTAMPS,
        };
        r = vkCreateQueryPool(ctx->device, &qi, NULL, &st->queries);
        if (r != VK_SUCCESS) return r;
    }
    return VK_SUCCESS;
}

static void release_deferred(lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    size_t keep = 0;
    for (size_t i = 0; i < st->ndeferred; i++) {
        if (st->deferred[i].serial <= st->completed) {
            st->deferred_bytes -= st->deferred[i].chunk->size;
            lm_chunk_free(ctx, st->deferred[i].chunk);
        } else st->deferred[keep++] = st->deferred[i];
    }
    st->ndeferred = keep;
}

/* completed = one before the oldest batch not known to be finished. */
static void update_completed(lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    uint64_t oldest = st->next_serial;
    for (int i = 0; i < LM_RING; i++)
        if (st->slot[i].state != 0 && st->slot[i].serial < oldest) oldest = st->slot[i].serial;
    st->completed = oldest - 1;
    release_deferred(ctx);
}

static void fail(lm_context *ctx, const lm_slot *s, const char *what, VkResult r) {
    lm_stream *st = &ctx->stream;
    if (r == VK_ERROR_DEVICE_LOST) st->lost = 1;
    st->failures++;
    if (s && s->last_op)
        snprintf(st->failed, sizeof st->failed, "lumus: device error %s (last op: %s): %s",
                 what, s->last_op, lm_vk_result_name(r));
    else
        snprintf(st->failed, sizeof st->failed, "lumus: device error %s: %s", what, lm_vk_result_name(r));
}

/* A wait that failed. A batch still running after the wait limit may be using its
 * command buffer and memory: the slot stays busy, nothing it uses is freed, and the
 * device counts as lost (every later call raises). Other failures end the batch. */
static void wait_failed(lm_context *ctx, lm_slot *s, VkResult r) {
    if (r == VK_TIMEOUT) {
        fail(ctx, s, "(the device did not finish a batch within the wait limit)", r);
        ctx->stream.lost = 1;
    } else {
        fail(ctx, s, "while running", r);
        s->state = 0;
    }
}

void lm_stream_check(lua_State *L, lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    if (st->failed[0]) {
        char msg[sizeof st->failed];
        memcpy(msg, st->failed, sizeof msg);
        if (!st->lost) st->failed[0] = 0;   /* transient failures are reported once */
        luaL_error(L, "%s", msg);
    }
}

/* One spin-wait step: a pause instruction, so a polling core yields its pipeline (and
 * its sibling hyperthread) without leaving the CPU. */
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* How long a wait polls the timeline before sleeping in the driver: a driver's sleeping
 * wait wakes tens of µs after the device finishes (an interrupt, then the scheduler),
 * longer than a small batch runs, while a poll is a read of the semaphore's payload.
 * The first LM_SPIN_HOT_S poll back to back; the rest yield the core between polls, so
 * other threads still run while a longer batch finishes. */
#define LM_SPIN_HOT_S 50e-6
#define LM_SPIN_S 2e-3

static VkResult wait_from(lm_context *ctx, uint64_t value, double start);

/* Waits until the timeline reaches `value`; VK_SUCCESS, else the failing result
 * (VK_TIMEOUT after the wait limit). */
static VkResult wait_value(lm_context *ctx, uint64_t value) {
    lm_stream *st = &ctx->stream;
    uint64_t have = 0;
    VkResult r = vkGetSemaphoreCounterValue(ctx->device, st->timeline, &have);
    if (r != VK_SUCCESS || have >= value) return r;
    double start = now_s();
    r = wait_from(ctx, value, start);
    if (st->prof.on) { st->prof.wait += now_s() - start; st->prof.waits++; }
    return r;
}

/* wait_value's wait proper, begun at `start`: polls, then sleeps in the driver. */
static VkResult wait_from(lm_context *ctx, uint64_t value, double start) {
    lm_stream *st = &ctx->stream;
    uint64_t have = 0;
    VkResult r;
    if (st->spin) {
        for (unsigned i = 1;; i++) {
            r = vkGetSemaphoreCounterValue(ctx->device, st->timeline, &have);
            if (r != VK_SUCCESS || have >= value) return r;
            if (i % 32 == 0) {   /* the clock costs more than a poll */
                double t = now_s() - start;
                if (t >= LM_SPIN_S) break;
                if (t >= LM_SPIN_HOT_S) sched_yield();
            } else cpu_relax();
        }
    }
    VkSemaphoreWaitInfo wi = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
        .semaphoreCount = 1, .pSemaphores = &st->timeline, .pValues = &value,
    };
    for (;;) {
        double left = st->wait_limit - (now_s() - start);
        if (left <= 0) return VK_TIMEOUT;
        /* In slices of at most a second, so the limit holds whatever the driver does. */
        r = vkWaitSemaphores(ctx->device, &wi, left >= 1.0 ? 1000000000ull : (uint64_t)(left * 1e9) + 1);
        if (r != VK_TIMEOUT) return r;
    }
}

/* Waits for one slot's batch; VK_SUCCESS (the slot is idle again), else the failing result. */
static VkResult wait_slot(lm_context *ctx, lm_slot *s) {
    VkResult r = wait_value(ctx, s->serial);
    if (r == VK_SUCCESS) s->state = 0;
    return r;
}

/* Marks every submitted batch up to the timeline's value as finished; the value. */
static uint64_t note_finished(lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    uint64_t have = 0;
    if (vkGetSemaphoreCounterValue(ctx->device, st->timeline, &have) != VK_SUCCESS) return 0;
    for (int i = 0; i < LM_RING; i++)
        if (st->slot[i].state == 2 && st->slot[i].serial <= have) st->slot[i].state = 0;
    return have;
}

static void full_barrier(VkCommandBuffer cb, VkAccessFlags dst_access, VkPipelineStageFlags dst_stage) {
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
        .dstAccessMask = dst_access,
    };
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                         VK_PIPELINE_STAGE_HOST_BIT, dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
}

#define LM_DEVICE_ACCESS (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | \
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)
#define LM_DEVICE_STAGES (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT)

/* What cannot go into a recording: work that runs (or data that moves) when it is called. */
static void refuse_in_recording(lua_State *L) {
    luaL_error(L, "lumus.capture: %s cannot be captured (it moves data between the host and the device "
               "or waits for the device when called, which a replay would not repeat; do it before or "
               "after the capture, around g:replay())", lm_fname(L));
}

/* The next slot of the ring, idle: a whole ring behind, the host waits rather than
 * queue without bound. Raises on device failure. */
static lm_slot *free_slot(lua_State *L, lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    lm_slot *s = &st->slot[st->next_slot];
    if (s->state == 2) {
        VkResult r = wait_slot(ctx, s);
        if (r != VK_SUCCESS) { wait_failed(ctx, s, r); update_completed(ctx); lm_stream_check(L, ctx); }
        update_completed(ctx);
    }
    return s;
}

VkCommandBuffer lm_stream_cmd(lua_State *L, lm_context *ctx, const char *op) {
    lm_stream *st = &ctx->stream;
    if (st->lost) lm_stream_check(L, ctx);
    if (st->recording) refuse_in_recording(L);
    st->op = op;
    st->nuse = 0;   /* uses declared by an op that raised before recording */
    if (st->cur >= 0) {
        st->slot[st->cur].last_op = op;
        return st->slot[st->cur].cb;
    }
    lm_slot *s = free_slot(L, ctx);
    LM_VK(L, vkResetCommandPool(ctx->device, s->pool, 0));
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    LM_VK(L, vkBeginCommandBuffer(s->cb, &bi));
    /* Order this batch after everything submitted before it (and after host writes). */
    full_barrier(s->cb, LM_DEVICE_ACCESS, LM_DEVICE_STAGES);
    if (ctx->timing && st->queries && st->stamps % 2 == 0 && st->stamps < LM_TIMESTAMPS) {
        /* gpu_time: this batch's start, written once everything before it has finished,
         * so an idle gap between batches falls outside every start-end pair. */
        if (st->stamps == 0) vkCmdResetQueryPool(s->cb, st->queries, 0, LM_TIMESTAMPS);
        vkCmdWriteTimestamp(s->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, st->queries, st->stamps++);
    }
    st->epoch++;
    s->state = 1;
    s->ops = 0;
    s->serial = st->next_serial++;
    s->last_op = op;
    st->cur = st->next_slot;
    st->next_slot = (st->next_slot + 1) % LM_RING;
    return s->cb;
}

uint64_t lm_stream_current_serial(lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    return st->cur >= 0 ? st->slot[st->cur].serial : st->next_serial;
}

static void add_use(lm_context *ctx, lm_storage *s, int write) {
    lm_stream *st = &ctx->stream;
    /* The callers declare at most LM_STREAM_USES (ops.h asserts it for dispatches). */
    assert(st->nuse < LM_STREAM_USES);
    st->use[st->nuse].s = s;
    st->use[st->nuse].write = write;
    st->nuse++;
}

void lm_stream_read(lm_context *ctx, lm_storage *s) { add_use(ctx, s, 0); }
void lm_stream_host_read(lm_context *ctx) { ctx->stream.host_reads = 1; }
void lm_stream_write(lm_context *ctx, lm_storage *s) { add_use(ctx, s, 1); }

void lm_stream_hazards(lm_context *ctx, VkCommandBuffer cb) {
    lm_stream *st = &ctx->stream;
    int need = 0;
    for (int i = 0; i < st->nuse; i++) {
        lm_storage *s = st->use[i].s;
        uint64_t we = s->external ? st->ext_write_epoch : s->write_epoch;
        uint64_t re = s->external ? st->ext_read_epoch : s->read_epoch;
        if (we == st->epoch) need = 1;                                      /* RAW, WAW */
        if (st->use[i].write && re == st->epoch) need = 1;                   /* WAR */
    }
    if (need) {
        full_barrier(cb, LM_DEVICE_ACCESS, LM_DEVICE_STAGES);
        st->epoch++;
        if (st->prof.on) st->prof.barriers++;
    }
    if (st->recording) {
        /* Nothing runs until a replay, which sets the serials (capture.c). */
        for (int i = 0; i < st->nuse; i++) {
            lm_storage *s = st->use[i].s;
            if (st->use[i].write) s->write_epoch = st->epoch; else s->read_epoch = st->epoch;
            if (s->external) {
                if (st->use[i].write) st->ext_write_epoch = st->epoch; else st->ext_read_epoch = st->epoch;
            }
        }
        st->nuse = 0;
        return;
    }
    uint64_t serial = lm_stream_current_serial(ctx);
    for (int i = 0; i < st->nuse; i++) {
        lm_storage *s = st->use[i].s;
        if (st->use[i].write) s->write_epoch = st->epoch; else s->read_epoch = st->epoch;
        s->last_serial = serial;
        if (s->external) {
            st->host_reads = 1;   /* the host may read it through its own mapping */
            if (st->use[i].write) st->ext_write_epoch = st->epoch; else st->ext_read_epoch = st->epoch;
            st->ext_serial = serial;
        }
    }
    st->nuse = 0;
}

/* Submits cb, signalling `serial` on the timeline and waiting for the host's semaphores. */
static VkResult queue_submit(lm_context *ctx, VkCommandBuffer cb, uint64_t serial) {
    lm_stream *st = &ctx->stream;
    double t0 = st->prof.on ? now_s() : 0;
    VkSemaphore wait_sems[LM_MAX_WAITS];
    uint64_t wait_values[LM_MAX_WAITS];
    VkPipelineStageFlags wait_stages[LM_MAX_WAITS];
    uint32_t nw = (uint32_t)st->nwaits;
    for (uint32_t i = 0; i < nw; i++) {
        wait_sems[i] = st->waits[i].semaphore;
        wait_values[i] = st->waits[i].value;
        wait_stages[i] = LM_DEVICE_STAGES;
    }
    st->nwaits = 0;
    VkTimelineSemaphoreSubmitInfo ts = {
        .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
        .waitSemaphoreValueCount = nw, .pWaitSemaphoreValues = wait_values,
        .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &serial,
    };
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts,
        .waitSemaphoreCount = nw, .pWaitSemaphores = wait_sems, .pWaitDstStageMask = wait_stages,
        .commandBufferCount = 1, .pCommandBuffers = &cb,
        .signalSemaphoreCount = 1, .pSignalSemaphores = &st->timeline,
    };
    lock_queue(ctx);
    VkResult r = vkQueueSubmit(ctx->queue, 1, &si, VK_NULL_HANDLE);
    unlock_queue(ctx);
    if (st->prof.on) { st->prof.submit += now_s() - t0; st->prof.submits++; }
    return r;
}

void lm_stream_submit(lua_State *L, lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    int hold = st->stamp_hold;   /* for this submit only, whatever happens to it */
    st->stamp_hold = 0;
    if (st->cur < 0) return;
    lm_slot *s = &st->slot[st->cur];
    st->cur = -1;
    st->held = 0;
    /* gpu_time: this batch's end. Once the pairs run out, the last one stays open until
     * gpu_time's own submit, so it then spans (and counts) the gaps in its tail. */
    if (ctx->timing && st->queries && st->stamps % 2 == 1 && !hold &&
        (st->stamps < LM_TIMESTAMPS - 1 || st->stamp_final))
        vkCmdWriteTimestamp(s->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, st->queries, st->stamps++);
    /* Make device writes visible to host reads of mapped memory once the batch is done;
     * a batch whose results stay on the device skips it (a GPU flush per batch). */
    if (st->host_reads || ctx->mem.direct)
        full_barrier(s->cb, VK_ACCESS_HOST_READ_BIT, VK_PIPELINE_STAGE_HOST_BIT);
    st->host_reads = 0;
    VkResult r = vkEndCommandBuffer(s->cb);
    if (r == VK_SUCCESS) r = queue_submit(ctx, s->cb, s->serial);
    if (r != VK_SUCCESS) {
        s->state = 0;
        fail(ctx, s, "at submit", r);
        update_completed(ctx);
        if (L) lm_stream_check(L, ctx);
        return;
    }
    s->state = 2;
    st->submits++;
}

void lm_stream_op_done(lua_State *L, lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    (void)L;
    if (st->cur < 0) return;
    VkDeviceSize live = ctx->mem.in_use - st->deferred_bytes;
    lm_slot *s = &st->slot[st->cur];
    if (++s->ops >= LM_BATCH_OPS || (st->held > LM_HELD_MIN && st->held > live)) {
        lm_stream_submit(NULL, ctx);
        return;
    }
    int long_op = st->long_op;
    st->long_op = 0;
    if (long_op || (st->submit_idle && s->ops % st->submit_idle == 0)) {
        uint64_t have = 0;
        if (vkGetSemaphoreCounterValue(ctx->device, st->timeline, &have) == VK_SUCCESS && have + 1 >= s->serial)
            lm_stream_submit(NULL, ctx);
    }
}

void lm_stream_note_long(lm_context *ctx) { ctx->stream.long_op = 1; }

static void wait_upto(lm_context *ctx, uint64_t serial) {
    lm_stream *st = &ctx->stream;
    while (!st->lost) {
        /* The newest batch <= serial: waiting for it waits for all older ones too. */
        lm_slot *newest = NULL;
        for (int i = 0; i < LM_RING; i++) {
            lm_slot *s = &st->slot[i];
            if (s->state == 2 && s->serial <= serial && (!newest || s->serial > newest->serial)) newest = s;
        }
        if (!newest) break;
        VkResult r = wait_value(ctx, newest->serial);
        if (r == VK_SUCCESS) { note_finished(ctx); continue; }
        /* Report it against the oldest batch still out: the one that failed or hung. */
        lm_slot *oldest = newest;
        for (int i = 0; i < LM_RING; i++) {
            lm_slot *s = &st->slot[i];
            if (s->state == 2 && s->serial < oldest->serial) oldest = s;
        }
        wait_failed(ctx, oldest, r);
    }
    update_completed(ctx);
}

void lm_stream_wait(lua_State *L, lm_context *ctx, uint64_t serial) {
    lm_stream *st = &ctx->stream;
    if (L && st->recording) refuse_in_recording(L);
    if (serial > st->completed) {
        if (st->cur >= 0 && st->slot[st->cur].serial <= serial) lm_stream_submit(L, ctx);
        wait_upto(ctx, serial);
    }
    if (L) lm_stream_check(L, ctx);
}

void lm_stream_flush(lua_State *L, lm_context *ctx, uint64_t serial) {
    lm_stream *st = &ctx->stream;
    if (L && st->recording) refuse_in_recording(L);
    if (st->cur >= 0 && st->slot[st->cur].serial <= serial) lm_stream_submit(L, ctx);
    if (L) lm_stream_check(L, ctx);
}

int lm_stream_add_wait(lm_context *ctx, VkSemaphore semaphore, uint64_t value) {
    lm_stream *st = &ctx->stream;
    if (st->nwaits == LM_MAX_WAITS) return 0;
    st->waits[st->nwaits].semaphore = semaphore;
    st->waits[st->nwaits].value = value;
    st->nwaits++;
    return 1;
}

void lm_stream_sync(lua_State *L, lm_context *ctx) {
    lm_stream_wait(L, ctx, ctx->stream.next_serial - 1);
}

void lm_stream_poll(lm_context *ctx) {
    note_finished(ctx);
    update_completed(ctx);
}

int lm_stream_pending(lm_context *ctx) {
    lm_stream_poll(ctx);
    return ctx->stream.completed + 1 < ctx->stream.next_serial;
}

void lm_stream_free_after(lm_context *ctx, lm_chunk *c, uint64_t serial) {
    lm_stream *st = &ctx->stream;
    if (serial <= st->completed) { lm_chunk_free(ctx, c); return; }
    if (st->ndeferred == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 64;
        lm_deferred *d = realloc(st->deferred, cap * sizeof *d);
        if (!d) {
            /* No room to remember it: wait for the batch instead of leaking the chunk. */
            wait_upto(ctx, serial);
            lm_chunk_free(ctx, c);
            return;
        }
        st->deferred = d;
        st->cap = cap;
    }
    st->deferred_bytes += c->size;
    if (st->cur >= 0 && serial == st->slot[st->cur].serial) st->held += c->size;
    st->deferred[st->ndeferred].chunk = c;
    st->deferred[st->ndeferred].serial = serial;
    st->ndeferred++;
}

/* Recordings still alive lose their command buffers (destroyed when `destroy`, else
 * left to the driver); their owners see `dead`. */
static void drop_recordings(lm_context *ctx, int destroy) {
    lm_stream *st = &ctx->stream;
    for (lm_recording *r = st->recordings; r; ) {
        lm_recording *next = r->next;
        if (destroy && r->pool) vkDestroyCommandPool(ctx->device, r->pool, NULL);
        r->pool = VK_NULL_HANDLE;
        r->cb = VK_NULL_HANDLE;
        r->dead = 1;
        r->prev = r->next = NULL;
        r = next;
    }
    st->recordings = NULL;
    st->recording = NULL;
}

void lm_stream_destroy(lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    if (!st->ready) return;
    lm_stream_submit(NULL, ctx);
    wait_upto(ctx, st->next_serial);
    /* After a wait-limit timeout: one more bounded wait for each batch still out, so a
     * slow (not hung) device finishes before its memory is freed. */
    for (int i = 0; i < LM_RING; i++) {
        if (st->slot[i].state != 2) continue;
        VkResult r = wait_slot(ctx, &st->slot[i]);
        if (r == VK_TIMEOUT) st->abandoned = 1; else st->slot[i].state = 0;
    }
    /* Still running: freeing its memory or command buffers could crash the
     * driver, so the device's objects are left to it (a leak, not a hang or a crash). */
    if (st->abandoned) { drop_recordings(ctx, 0); return; }
    /* A batch whose timeline value arrived may still be in the driver's hands (lavapipe's
     * queue thread still holds the semaphore after signalling it): destroying the
     * semaphore or pools requires the batches to have completed, which only an idle
     * queue promises. */
    lock_queue(ctx);
    VkResult idle = vkQueueWaitIdle(ctx->queue);
    unlock_queue(ctx);
    if (idle != VK_SUCCESS) { st->abandoned = 1; drop_recordings(ctx, 0); return; }
    drop_recordings(ctx, 1);
    /* Whatever is still deferred can go now: nothing runs any more. */
    st->completed = st->next_serial;
    release_deferred(ctx);
    free(st->deferred);
    st->deferred = NULL;
    if (st->queries) vkDestroyQueryPool(ctx->device, st->queries, NULL);
    if (st->timeline) vkDestroySemaphore(ctx->device, st->timeline, NULL);
    for (int i = 0; i < LM_RING; i++)
        if (st->slot[i].pool) vkDestroyCommandPool(ctx->device, st->slot[i].pool, NULL);
    st->ready = 0;
}

/* ---- recordings ---- */

static void unlink_recording(lm_stream *st, lm_recording *r) {
    if (r->prev) r->prev->next = r->next; else if (st->recordings == r) st->recordings = r->next;
    if (r->next) r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void destroy_recording(lm_context *ctx, lm_recording *r) {
    lm_stream *st = &ctx->stream;
    if (st->recording == r) st->recording = NULL;
    unlink_recording(st, r);
    if (r->pool) vkDestroyCommandPool(ctx->device, r->pool, NULL);   /* frees its buffer too */
    r->pool = VK_NULL_HANDLE;
    r->cb = VK_NULL_HANDLE;
}

void lm_stream_record_begin(lua_State *L, lm_context *ctx, lm_recording *r) {
    lm_stream *st = &ctx->stream;
    if (st->lost) lm_stream_check(L, ctx);
    lm_stream_submit(L, ctx);
    memset(r, 0, sizeof *r);
    VkCommandPoolCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = ctx->queue_family,
    };
    LM_VK(L, vkCreateCommandPool(ctx->device, &pi, NULL, &r->pool));
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = r->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
    };
    VkResult res = vkAllocateCommandBuffers(ctx->device, &ai, &r->cb);
    if (res == VK_SUCCESS) {
        VkCommandBufferBeginInfo bi = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT,
        };
        res = vkBeginCommandBuffer(r->cb, &bi);
    }
    if (res != VK_SUCCESS) {
        destroy_recording(ctx, r);
        lm_vk_error(L, "recording a capture", res);
    }
    full_barrier(r->cb, LM_DEVICE_ACCESS, LM_DEVICE_STAGES);
    r->next = st->recordings;
    if (st->recordings) st->recordings->prev = r;
    st->recordings = r;
    st->recording = r;
    st->epoch++;
}

VkCommandBuffer lm_stream_recording_cmd(lua_State *L, lm_context *ctx, const char *op) {
    lm_stream *st = &ctx->stream;
    if (st->lost) lm_stream_check(L, ctx);
    st->op = op;
    st->nuse = 0;
    st->recording->ops++;
    return st->recording->cb;
}

VkResult lm_stream_record_end(lm_context *ctx, lm_recording *r) {
    lm_stream *st = &ctx->stream;
    if (st->recording == r) st->recording = NULL;
    st->epoch++;
    if (r->dead || !r->cb) return VK_ERROR_INITIALIZATION_FAILED;
    /* Host reads after a replay (mapped tensors, staging downloads) see its writes. */
    full_barrier(r->cb, VK_ACCESS_HOST_READ_BIT | LM_DEVICE_ACCESS, VK_PIPELINE_STAGE_HOST_BIT | LM_DEVICE_STAGES);
    VkResult res = vkEndCommandBuffer(r->cb);
    if (res != VK_SUCCESS) destroy_recording(ctx, r);
    return res;
}

void lm_stream_replay(lua_State *L, lm_context *ctx, lm_recording *r) {
    lm_stream *st = &ctx->stream;
    if (st->lost) lm_stream_check(L, ctx);
    /* gpu_time: the recorded commands take no timestamps, so the replay runs inside a
     * pair: the batch before it carries the start stamp and is submitted without its
     * end, which the next batch writes (after the replay: a batch opens with a full
     * barrier). The pair thus also counts the host time until that batch is submitted. */
    int timed = ctx->timing && st->queries && st->stamps < LM_TIMESTAMPS - 1;
    if (timed && st->stamps % 2 == 0) lm_stream_cmd(L, ctx, "replay");
    st->stamp_hold = timed;
    lm_stream_submit(L, ctx);   /* work recorded before the replay runs before it */
    /* The replay takes a slot of the ring for its serial, so completion tracking and the
     * bound on work in flight cover it; the slot's own command buffer stays unused. */
    lm_slot *s = free_slot(L, ctx);
    s->serial = st->next_serial++;
    s->ops = r->ops;
    s->last_op = "replay";
    st->next_slot = (st->next_slot + 1) % LM_RING;
    VkResult res = queue_submit(ctx, r->cb, s->serial);
    if (res != VK_SUCCESS) {
        s->state = 0;
        fail(ctx, s, "at submit", res);
        update_completed(ctx);
        lm_stream_check(L, ctx);
        return;
    }
    s->state = 2;
    r->last_serial = s->serial;
    st->submits++;
    st->replays++;
}

void lm_stream_record_free(lm_context *ctx, lm_recording *r) {
    lm_stream *st = &ctx->stream;
    if (r->dead) return;
    if (r->last_serial > st->completed) {
        wait_upto(ctx, r->last_serial);
        if (r->last_serial > st->completed) {
            /* Still running (a hung device): leave its command buffer to the driver. */
            if (st->recording == r) st->recording = NULL;
            unlink_recording(st, r);
            r->dead = 1;
            return;
        }
    }
    destroy_recording(ctx, r);
    r->dead = 1;
}
