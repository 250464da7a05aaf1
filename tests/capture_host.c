/* lumus.capture from a host's point of view (lumus.h): a graph over the host's own
 * buffers, replayed with the host's timeline semaphore as a wait and lumus's timeline as
 * the signal. Checks that a replay waits for the host's semaphore, that the sync points
 * after it (lumus_sync_point, lumus_tensor_sync_point on its output) are reached only
 * once it has run, with results the host reads through its own mapping, for new
 * contents the host wrote between replays. Prints "PASS: ..." lines; exits 1 at the
 * first failure. */
#define _POSIX_C_SOURCE 199309L
#include "vk_host.h"
#include "lumus.h"
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <time.h>

#define N 256
#define WAIT_NS 60000000000ull

static void run(lua_State *L, const char *what, const char *code, int nargs, int nres) {
    if (luaL_loadstring(L, code) != LUA_OK) vk_fail("%s: %s", what, lua_tostring(L, -1));
    lua_insert(L, -nargs - 1);
    if (lua_pcall(L, nargs, nres, 0) != LUA_OK) vk_fail("%s: %s", what, lua_tostring(L, -1));
}

static void wait_value(vk_host *h, VkSemaphore sem, uint64_t value, const char *what) {
    VkSemaphoreWaitInfo wi = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1, .pSemaphores = &sem, .pValues = &value,
    };
    VkResult r = vkWaitSemaphores(h->device, &wi, WAIT_NS);
    if (r != VK_SUCCESS) vk_fail("%s: vkWaitSemaphores returned %d", what, (int)r);
}

/* y = 2 x + 1 over the host's buffers, checked from C. */
static void check_y(const vk_host_buffer *bx, const vk_host_buffer *by, const char *what) {
    for (int i = 0; i < N; i++)
        if (by->mapped[i] != 2.0f * bx->mapped[i] + 1.0f)
            vk_fail("%s: y[%d] = %g, want %g", what, i, (double)by->mapped[i], 2.0 * bx->mapped[i] + 1.0);
}

int main(void) {
    vk_host h;
    vk_host_create(&h);
    printf("host device: %s%s\n", h.name, vk_host_validating(&h) ? " (validation layer on)" : "");
    lua_State *L = luaL_newstate();
    if (!L) vk_fail("luaL_newstate");
    luaL_openlibs(L);
    if (lumus_open(L) != LUA_OK) vk_fail("lumus_open: %s", lua_tostring(L, -1));
    lumus_vulkan_device dev = vk_host_device(&h);
    if (lumus_attach_vulkan(L, &dev) != LUA_OK) vk_fail("attach: %s", lua_tostring(L, -1));

    vk_host_buffer bx, by;
    vk_host_buffer_create(&h, N * 4, &bx);
    vk_host_buffer_create(&h, N * 4, &by);
    for (int i = 0; i < N; i++) { bx.mapped[i] = (float)i; by.mapped[i] = -1.0f; }
    int64_t shape[1] = { N };
    lumus_buffer wx = { bx.buffer, 0, bx.size, bx.mapped }, wy = { by.buffer, 0, by.size, by.mapped };
    if (lumus_push_buffer(L, &wx, 1, shape) != LUA_OK || lumus_push_buffer(L, &wy, 1, shape) != LUA_OK)
        vk_fail("wrap: %s", lua_tostring(L, -1));
    /* The graph (kept in a global) and its output y, which stays on the stack. */
    run(L, "capture", "local x, y = ...\nlocal lumus = require('lumus')\n"
        "graph = lumus.capture(function() lumus.scale(x, 2, { out = y }); lumus.add(y, 1, { out = y }) end)\n"
        "return y", 2, 1);
    if (by.mapped[0] != -1.0f) vk_fail("the capture ran its work (y changed before any replay)");
    printf("PASS: capturing over host buffers runs nothing\n");

    VkSemaphoreTypeCreateInfo ti = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE };
    VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
    VkSemaphore host_sem;
    VKH(vkCreateSemaphore(h.device, &si, NULL, &host_sem));

    for (uint64_t round = 1; round <= 3; round++) {
        /* The host's new input, "written on its timeline": the replay waits for it. */
        for (int i = 0; i < N; i++) bx.mapped[i] = (float)(i * (int)round) - 7.0f;
        if (lumus_wait_semaphore(L, host_sem, round) != LUA_OK) vk_fail("wait semaphore: %s", lua_tostring(L, -1));
        run(L, "replay", "graph:replay()", 0, 0);
        VkSemaphore sem, tsem;
        uint64_t value, tvalue, now = 0;
        if (lumus_sync_point(L, &sem, &value) != LUA_OK) vk_fail("sync point: %s", lua_tostring(L, -1));
        if (lumus_tensor_sync_point(L, -1, &tsem, &tvalue) != LUA_OK) vk_fail("tensor sync point: %s", lua_tostring(L, -1));
        if (tsem != sem || tvalue != value) vk_fail("y's sync point is not the replay's (%llu, all work %llu)",
                                                    (unsigned long long)tvalue, (unsigned long long)value);
        struct timespec pause = { 0, 50 * 1000 * 1000 };
        nanosleep(&pause, NULL);
        VKH(vkGetSemaphoreCounterValue(h.device, sem, &now));
        if (now >= value) vk_fail("round %llu: the replay ran before the host signalled", (unsigned long long)round);
        VkSemaphoreSignalInfo sig = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, .semaphore = host_sem, .value = round };
        VKH(vkSignalSemaphore(h.device, &sig));
        wait_value(&h, sem, value, "waiting for the replay");
        check_y(&bx, &by, "after the replay");
    }
    printf("PASS: 3 replays wait for the host's semaphore, signal lumus's timeline, and see new host input\n");

    run(L, "free", "graph:free(); graph = nil; collectgarbage()", 0, 0);
    lua_close(L);
    VKH(vkDeviceWaitIdle(h.device));
    vkDestroySemaphore(h.device, host_sem, NULL);
    vk_host_buffer_destroy(&h, &bx);
    vk_host_buffer_destroy(&h, &by);
    int validating = vk_host_validating(&h);
    vk_host_destroy(&h);
    if (vk_host_validation_messages() != 0) vk_fail("%lu validation messages", vk_host_validation_messages());
    if (validating) printf("PASS: the validation layer reported nothing\n");
    printf("capture_host: all passed\n");
    return 0;
}
