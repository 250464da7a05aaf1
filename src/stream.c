/* The command stream (see stream.h). */
#define _POSIX_C_SOURCE 199309L
#include "stream.h"
#include "context.h"
#include "vkcheck.h"
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    VkCommandPoolCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = ctx->queue_family,
    };
    VkResult r = vkCreateCommandPool(ctx->device, &pi, NULL, &st->pool);
    if (r != VK_SUCCESS) return r;
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = st->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
    };
    VkFenceCreateInfo fi = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    for (int i = 0; i < LM_RING; i++) {
        r = vkAllocateCommandBuffers(ctx->device, &ai, &st->slot[i].cb);
        if (r != VK_SUCCESS) return r;
        r = vkCreateFence(ctx->device, &fi, NULL, &st->slot[i].fence);
        if (r != VK_SUCCESS) return r;
    }
    VkSemaphoreTypeCreateInfo ti = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
        .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0,
    };
    VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
    r = vkCreateSemaphore(ctx->device, &si, NULL, &st->timeline);
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

/* Waits for one slot's fence; 0 on success, else the failing result. */
static VkResult wait_slot(lm_context *ctx, lm_slot *s) {
    lm_stream *st = &ctx->stream;
    VkResult r;
    double start = now_s();
    if (st->spin) {
        /* Sleeping in vkWaitForFences costs tens of µs on wake-up; a short spin does not. */
        do {
            r = vkGetFenceStatus(ctx->device, s->fence);
            if (r != VK_NOT_READY) break;
        } while (now_s() - start < 0.002);
        if (r == VK_SUCCESS) goto done;
        if (r != VK_NOT_READY) return r;
    }
    for (;;) {
        double left = st->wait_limit - (now_s() - start);
        if (left <= 0) { r = VK_TIMEOUT; break; }
        uint64_t ns = left >= 1.0 ? 1000000000ull : (uint64_t)(left * 1e9) + 1;
        r = vkWaitForFences(ctx->device, 1, &s->fence, VK_TRUE, ns);
        if (r != VK_TIMEOUT) break;
    }
    if (r != VK_SUCCESS) return r;
done:
    s->state = 0;
    return VK_SUCCESS;
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

VkCommandBuffer lm_stream_cmd(lua_State *L, lm_context *ctx, const char *op) {
    lm_stream *st = &ctx->stream;
    if (st->lost) lm_stream_check(L, ctx);
    st->op = op;
    st->nuse = 0;   /* uses declared by an op that raised before recording */
    if (st->cur >= 0) {
        st->slot[st->cur].last_op = op;
        return st->slot[st->cur].cb;
    }
    lm_slot *s = &st->slot[st->next_slot];
    if (s->state == 2) {
        /* The device is a whole ring behind: wait rather than queue without bound. */
        VkResult r = wait_slot(ctx, s);
        if (r != VK_SUCCESS) { wait_failed(ctx, s, r); update_completed(ctx); lm_stream_check(L, ctx); }
        update_completed(ctx);
    }
    LM_VK(L, vkResetFences(ctx->device, 1, &s->fence));
    LM_VK(L, vkResetCommandBuffer(s->cb, 0));
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
    if (st->nuse < (int)(sizeof st->use / sizeof st->use[0])) {
        st->use[st->nuse].s = s;
        st->use[st->nuse].write = write;
        st->nuse++;
    }
}

void lm_stream_read(lm_context *ctx, lm_storage *s) { add_use(ctx, s, 0); }
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
    }
    uint64_t serial = lm_stream_current_serial(ctx);
    for (int i = 0; i < st->nuse; i++) {
        lm_storage *s = st->use[i].s;
        if (st->use[i].write) s->write_epoch = st->epoch; else s->read_epoch = st->epoch;
        s->last_serial = serial;
        if (s->external) {
            if (st->use[i].write) st->ext_write_epoch = st->epoch; else st->ext_read_epoch = st->epoch;
            st->ext_serial = serial;
        }
    }
    st->nuse = 0;
}

void lm_stream_submit(lua_State *L, lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    if (st->cur < 0) return;
    lm_slot *s = &st->slot[st->cur];
    st->cur = -1;
    st->held = 0;
    /* gpu_time: this batch's end. Once the pairs run out, the last one stays open until
     * gpu_time's own submit, so it then spans (and counts) the gaps in its tail. */
    if (ctx->timing && st->queries && st->stamps % 2 == 1 &&
        (st->stamps < LM_TIMESTAMPS - 1 || st->stamp_final))
        vkCmdWriteTimestamp(s->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, st->queries, st->stamps++);
    /* Make device writes visible to host reads of mapped memory after the fence. */
    full_barrier(s->cb, VK_ACCESS_HOST_READ_BIT, VK_PIPELINE_STAGE_HOST_BIT);
    VkResult r = vkEndCommandBuffer(s->cb);
    if (r == VK_SUCCESS) {
        /* Signal the batch's serial on the timeline; wait for the host's semaphores. */
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
            .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &s->serial,
        };
        VkSubmitInfo si = {
            .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts,
            .waitSemaphoreCount = nw, .pWaitSemaphores = wait_sems, .pWaitDstStageMask = wait_stages,
            .commandBufferCount = 1, .pCommandBuffers = &s->cb,
            .signalSemaphoreCount = 1, .pSignalSemaphores = &st->timeline,
        };
        lock_queue(ctx);
        r = vkQueueSubmit(ctx->queue, 1, &si, s->fence);
        unlock_queue(ctx);
    }
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
    if (++st->slot[st->cur].ops >= LM_BATCH_OPS || (st->held > LM_HELD_MIN && st->held > live))
        lm_stream_submit(NULL, ctx);
}

static void wait_upto(lm_context *ctx, uint64_t serial) {
    lm_stream *st = &ctx->stream;
    while (!st->lost) {
        lm_slot *oldest = NULL;
        for (int i = 0; i < LM_RING; i++) {
            lm_slot *s = &st->slot[i];
            if (s->state == 2 && s->serial <= serial && (!oldest || s->serial < oldest->serial)) oldest = s;
        }
        if (!oldest) break;
        VkResult r = wait_slot(ctx, oldest);
        if (r != VK_SUCCESS) wait_failed(ctx, oldest, r);
    }
    update_completed(ctx);
}

void lm_stream_wait(lua_State *L, lm_context *ctx, uint64_t serial) {
    lm_stream *st = &ctx->stream;
    if (serial > st->completed) {
        if (st->cur >= 0 && st->slot[st->cur].serial <= serial) lm_stream_submit(L, ctx);
        wait_upto(ctx, serial);
    }
    if (L) lm_stream_check(L, ctx);
}

void lm_stream_flush(lua_State *L, lm_context *ctx, uint64_t serial) {
    lm_stream *st = &ctx->stream;
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
    lm_stream *st = &ctx->stream;
    for (int i = 0; i < LM_RING; i++) {
        lm_slot *s = &st->slot[i];
        if (s->state == 2 && vkGetFenceStatus(ctx->device, s->fence) == VK_SUCCESS) s->state = 0;
    }
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

void lm_stream_destroy(lm_context *ctx) {
    lm_stream *st = &ctx->stream;
    if (!st->pool) return;
    lm_stream_submit(NULL, ctx);
    wait_upto(ctx, st->next_serial);
    /* After a wait-limit timeout: one more bounded wait for each batch still out, so a
     * slow (not hung) device finishes before its memory is freed. */
    for (int i = 0; i < LM_RING; i++) {
        if (st->slot[i].state != 2) continue;
        VkResult r = wait_slot(ctx, &st->slot[i]);
        if (r == VK_TIMEOUT) st->abandoned = 1; else st->slot[i].state = 0;
    }
    /* Still running: freeing its memory, fences or command buffers could crash the
     * driver, so the device's objects are left to it (a leak, not a hang or a crash). */
    if (st->abandoned) return;
    /* Whatever is still deferred can go now: nothing runs any more. */
    st->completed = st->next_serial;
    release_deferred(ctx);
    free(st->deferred);
    st->deferred = NULL;
    for (int i = 0; i < LM_RING; i++) if (st->slot[i].fence) vkDestroyFence(ctx->device, st->slot[i].fence, NULL);
    if (st->queries) vkDestroyQueryPool(ctx->device, st->queries, NULL);
    if (st->timeline) vkDestroySemaphore(ctx->device, st->timeline, NULL);
    vkDestroyCommandPool(ctx->device, st->pool, NULL);
    st->pool = VK_NULL_HANDLE;
}
