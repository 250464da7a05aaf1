/* Many lua_States on many threads: two pthreads, each with its own lua_State, run
 * layer_norm_forward at the same time and check every result against a float64
 * LayerNorm computed in C. Three modes (all by default, or those named on the command
 * line):
 *   own     each lua_State opens its own device (lumus's default);
 *   shared  both are attached to one host device and queue, with no lock of the host's:
 *           lumus's per-queue mutex serializes their submits;
 *   locked  both are attached with the host's queue lock callbacks, while a third
 *           thread of the host submits to the same queue under that lock; the lock
 *           checks that no two holders ever overlap.
 * Each thread's data and per-iteration bias differ, so a result computed from another
 * thread's tensors or a stale iteration fails. With LUMUS_VALIDATION=1 the host's
 * instance runs the validation layer (which also checks queue access across threads). */
#define _POSIX_C_SOURCE 199309L
#include "vk_host.h"
#include "lumus.h"
#include "lua_compat.h"
#include <lualib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 2
#define ROWS 48
#define D 256
#define ITERS 40
#define CHECK_EVERY 5
#define TOL 1e-4

typedef struct worker {
    int id;
    const lumus_vulkan_device *attach;      /* NULL: lumus's own device */
    char error[512];
    int checked;                            /* results compared with the reference */
    char device[256];
} worker;

/* The host's queue lock: a mutex, plus a check that holders never overlap. */
static pthread_mutex_t host_queue_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_int holders, overlaps;
static atomic_long lumus_locks;

static void lock_queue(void *user) {
    pthread_mutex_lock(&host_queue_mutex);
    if (atomic_fetch_add(&holders, 1) != 0) atomic_fetch_add(&overlaps, 1);
    if (user) atomic_fetch_add(&lumus_locks, 1);
}
static void unlock_queue(void *user) {
    (void)user;
    atomic_fetch_sub(&holders, 1);
    pthread_mutex_unlock(&host_queue_mutex);
}

static const char *SCRIPT =
    "local xs, ws, rows, d, iters, every = ...\n"
    "local lumus = require 'lumus'\n"
    "local x = lumus.from_bytes(xs, { rows, d })\n"
    "local w = lumus.from_bytes(ws, { d })\n"
    "local b = lumus.empty({ d })\n"
    "local y = lumus.empty({ rows, d })\n"
    "local snapshots = {}\n"
    "for i = 1, iters do\n"
    "  lumus.fill(b, i * 0.5)\n"                      /* bias of iteration i: y depends on i */
    "  lumus.layer_norm_forward(x, w, b, 1e-5, { out = y })\n"
    "  if i % every == 0 then snapshots[#snapshots + 1] = y:to_bytes() end\n"
    "end\n"
    "local dev = lumus.device()\n"
    "assert(lumus.tune.validation_messages() == 0, 'lumus saw validation messages')\n"
    "return snapshots, dev.name .. (dev.attached and ' (attached)' or ' (own)')\n";

static void *work(void *arg) {
    worker *w = arg;
    lua_State *L = luaL_newstate();
    if (!L) { snprintf(w->error, sizeof w->error, "luaL_newstate failed"); return NULL; }
    luaL_openlibs(L);
    float *x = malloc(sizeof(float) * ROWS * D), *wt = malloc(sizeof(float) * D);
    double *xhat = malloc(sizeof(double) * ROWS * D), *want = malloc(sizeof(double) * ROWS * D);
    if (!x || !wt || !xhat || !want) { snprintf(w->error, sizeof w->error, "out of memory"); goto done; }
    vk_rng rng = { 1000u + (uint64_t)w->id };
    double offset = 10.0 * (w->id + 1);
    for (int i = 0; i < ROWS * D; i++) x[i] = (float)(offset + (1 + w->id) * vk_rng_normal(&rng));
    for (int i = 0; i < D; i++) wt[i] = (float)(1 + 0.1 * vk_rng_normal(&rng));
    ref_layer_norm(x, wt, NULL, ROWS, D, 1e-5, xhat, NULL, NULL);

    if (lumus_open(L) != LUA_OK ||
        (w->attach && lumus_attach_vulkan(L, w->attach) != LUA_OK)) {
        snprintf(w->error, sizeof w->error, "%s", lua_tostring(L, -1));
        goto done;
    }
    if (luaL_loadstring(L, SCRIPT) != LUA_OK) { snprintf(w->error, sizeof w->error, "%s", lua_tostring(L, -1)); goto done; }
    lua_pushlstring(L, (const char *)x, sizeof(float) * ROWS * D);
    lua_pushlstring(L, (const char *)wt, sizeof(float) * D);
    lua_pushinteger(L, ROWS); lua_pushinteger(L, D);
    lua_pushinteger(L, ITERS); lua_pushinteger(L, CHECK_EVERY);
    if (lua_pcall(L, 6, 2, 0) != LUA_OK) { snprintf(w->error, sizeof w->error, "%s", lua_tostring(L, -1)); goto done; }
    snprintf(w->device, sizeof w->device, "%s", lua_tostring(L, -1));
    int n = (int)luaL_len(L, -2);
    for (int k = 1; k <= n; k++) {
        lua_rawgeti(L, -2, k);
        size_t len;
        const char *bytes = lua_tolstring(L, -1, &len);
        if (len != sizeof(float) * ROWS * D) { snprintf(w->error, sizeof w->error, "snapshot %d has %zu bytes", k, len); goto done; }
        double bias = k * CHECK_EVERY * 0.5;
        for (int i = 0; i < ROWS * D; i++) want[i] = xhat[i] + bias;
        float got[ROWS * D];
        memcpy(got, bytes, len);
        double e = max_rel_error(got, want, ROWS * D);
        if (!(e <= TOL)) {
            snprintf(w->error, sizeof w->error, "iteration %d: max rel error %.3g > %.0e", k * CHECK_EVERY, e, TOL);
            goto done;
        }
        w->checked++;
        lua_pop(L, 1);
    }
done:
    lua_close(L);
    free(x); free(wt); free(xhat); free(want);
    return NULL;
}

/* The host's own submissions to the shared queue, under its lock, until told to stop. */
typedef struct submitter { vk_host *h; atomic_int stop; long submits; char error[128]; } submitter;

static void *submit_loop(void *arg) {
    submitter *s = arg;
    VkFenceCreateInfo fi = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
    VkFence fence;
    if (vkCreateFence(s->h->device, &fi, NULL, &fence) != VK_SUCCESS) { snprintf(s->error, sizeof s->error, "vkCreateFence"); return NULL; }
    while (!atomic_load(&s->stop)) {
        lock_queue(NULL);
        VkResult r = vkQueueSubmit(s->h->queue, 0, NULL, fence);
        if (r == VK_SUCCESS && s->submits % 8 == 0) r = vkQueueWaitIdle(s->h->queue);
        unlock_queue(NULL);
        if (r == VK_SUCCESS) r = vkWaitForFences(s->h->device, 1, &fence, VK_TRUE, 60000000000ull);
        if (r == VK_SUCCESS) r = vkResetFences(s->h->device, 1, &fence);
        if (r != VK_SUCCESS) { snprintf(s->error, sizeof s->error, "host submit failed: %d", (int)r); break; }
        s->submits++;
    }
    vkDestroyFence(s->h->device, fence, NULL);
    return NULL;
}

static int run_mode(const char *mode, vk_host *h) {
    lumus_vulkan_device dev;
    const lumus_vulkan_device *attach = NULL;
    if (strcmp(mode, "shared") == 0 || strcmp(mode, "locked") == 0) {
        dev = vk_host_device(h);
        if (strcmp(mode, "locked") == 0) {
            dev.lock_queue = lock_queue;
            dev.unlock_queue = unlock_queue;
            dev.queue_user = &dev;        /* non-NULL: counts lumus's own locks */
        }
        attach = &dev;
    } else if (strcmp(mode, "own") != 0) {
        printf("FAIL: unknown mode %s (own, shared, locked)\n", mode);
        return 1;
    }
    atomic_store(&lumus_locks, 0);
    atomic_store(&overlaps, 0);
    worker w[WORKERS];
    pthread_t t[WORKERS], st;
    submitter sub = { .h = h };
    int locked = strcmp(mode, "locked") == 0;
    if (locked && pthread_create(&st, NULL, submit_loop, &sub) != 0) { printf("FAIL: pthread_create\n"); return 1; }
    for (int i = 0; i < WORKERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].attach = attach;
        if (pthread_create(&t[i], NULL, work, &w[i]) != 0) { printf("FAIL: pthread_create\n"); return 1; }
    }
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
    if (locked) { atomic_store(&sub.stop, 1); pthread_join(st, NULL); }
    int bad = 0;
    for (int i = 0; i < WORKERS; i++) {
        if (w[i].error[0]) { printf("FAIL: %s: thread %d: %s\n", mode, i, w[i].error); bad = 1; }
        else if (w[i].checked != ITERS / CHECK_EVERY) { printf("FAIL: %s: thread %d checked %d results\n", mode, i, w[i].checked); bad = 1; }
    }
    if (locked) {
        if (sub.error[0]) { printf("FAIL: locked: %s\n", sub.error); bad = 1; }
        if (atomic_load(&lumus_locks) < WORKERS * (ITERS / CHECK_EVERY)) {
            printf("FAIL: locked: lumus took the host's queue lock %ld times, fewer than its submits\n", atomic_load(&lumus_locks));
            bad = 1;
        }
        if (atomic_load(&overlaps)) { printf("FAIL: locked: %d overlapping queue lock holders\n", atomic_load(&overlaps)); bad = 1; }
    }
    if (!bad) {
        printf("PASS: %s: %d threads x %d layer_norm_forward calls on %s, %d results each within %.0e of float64",
               mode, WORKERS, ITERS, w[0].device, ITERS / CHECK_EVERY, TOL);
        if (locked) printf("; lumus took the host's lock %ld times while the host submitted %ld times", atomic_load(&lumus_locks), sub.submits);
        printf("\n");
    }
    return bad;
}

int main(int argc, char **argv) {
    const char *all[] = { "own", "shared", "locked" };
    const char **modes = argc > 1 ? (const char **)argv + 1 : all;
    int nmodes = argc > 1 ? argc - 1 : 3;
    vk_host h;
    vk_host_create(&h);
    int bad = 0;
    for (int i = 0; i < nmodes; i++) bad |= run_mode(modes[i], &h);
    VKH(vkDeviceWaitIdle(h.device));
    vk_host_destroy(&h);
    if (vk_host_validation_messages() != 0) { printf("FAIL: %lu validation messages\n", vk_host_validation_messages()); bad = 1; }
    if (!bad) printf("threads: all passed\n");
    return bad;
}
