/* The embedding API end to end, from a host's point of view: the host makes its own
 * Vulkan instance and device, attaches them to a lua_State (lumus.h), wraps buffers of
 * its own as tensors, runs layer_norm_forward from Lua on them, waits on lumus's sync
 * point and checks the result from C against a float64 LayerNorm. Also: the API's
 * error messages, host-to-lumus ordering with lumus_wait_semaphore, that freeing a
 * wrapped tensor leaves the host's memory alone, and that lua_close leaves the host's
 * device usable. With LUMUS_VALIDATION=1 the host's instance runs the validation layer
 * and any message fails the test. Prints "PASS: ..." lines; exits 1 at the first failure. */
#define _POSIX_C_SOURCE 199309L
#include "vk_host.h"
#include "lumus.h"
#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EPS 1e-5
#define TOL 1e-4        /* |y - ref| / max(1, |ref|): float32 arithmetic on rows of ~1e3 */
#define WAIT_NS 60000000000ull

/* Runs a chunk with the values on top of the stack as its arguments; leaves nres. */
static void run(lua_State *L, const char *what, const char *code, int nargs, int nres) {
    if (luaL_loadstring(L, code) != LUA_OK) vk_fail("%s: %s", what, lua_tostring(L, -1));
    lua_insert(L, -nargs - 1);
    if (lua_pcall(L, nargs, nres, 0) != LUA_OK) vk_fail("%s: %s", what, lua_tostring(L, -1));
}

/* Expects status != LUA_OK with a message containing `part` on the stack; pops it. */
static void expect_error(lua_State *L, int status, const char *what, const char *part) {
    if (status == LUA_OK) vk_fail("%s: succeeded, an error was expected", what);
    const char *msg = lua_tostring(L, -1);
    if (!msg || !strstr(msg, part)) vk_fail("%s: message \"%s\" lacks \"%s\"", what, msg ? msg : "(none)", part);
    lua_pop(L, 1);
}

static lua_Integer memory_in_use(lua_State *L) {
    run(L, "memory", "return require('lumus').memory().in_use", 0, 1);
    lua_Integer n = lua_tointeger(L, -1);
    lua_pop(L, 1);
    return n;
}

static void wait_value(vk_host *h, VkSemaphore sem, uint64_t value, const char *what) {
    VkSemaphoreWaitInfo wi = {
        .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1, .pSemaphores = &sem, .pValues = &value,
    };
    VkResult r = vkWaitSemaphores(h->device, &wi, WAIT_NS);
    if (r != VK_SUCCESS) vk_fail("%s: vkWaitSemaphores returned %d", what, (int)r);
}

/* A lua_CFunction of the host's: numel of a tensor argument, via lumus_check_tensor. */
static int host_numel(lua_State *L) {
    lumus_tensor_info info;
    lumus_check_tensor(L, 1, &info);
    lua_pushinteger(L, info.numel);
    return 1;
}

static void check_attach_errors(lua_State *L, const lumus_vulkan_device *good) {
    lumus_vulkan_device bad = *good;
    bad.queue = VK_NULL_HANDLE;
    expect_error(L, lumus_attach_vulkan(L, &bad), "attach without a queue", "must all be given");
    bad = *good;
    bad.queue_family = 99;
    expect_error(L, lumus_attach_vulkan(L, &bad), "attach with a bad family", "queue family 99");
    bad = *good;
    bad.lock_queue = (void (*)(void *))abort;
    expect_error(L, lumus_attach_vulkan(L, &bad), "attach with half a lock", "both lock_queue and unlock_queue");
    lumus_buffer nothing = { 0 };
    int64_t shape[1] = { 4 };
    expect_error(L, lumus_push_buffer(L, &nothing, 1, shape), "wrap with no buffer", "no buffer given");
    lumus_buffer unattached = { (VkBuffer)(uintptr_t)1, 0, 16, NULL };   /* never used: refused first */
    expect_error(L, lumus_push_buffer(L, &unattached, 1, shape), "wrap before attach", "has no device attached");
    printf("PASS: attach rejects missing handles, a family out of range and half a queue lock\n");
}

/* One LayerNorm on wrapped buffers: x (at a nonzero offset) and weight are the host's,
 * the bias is a lumus tensor, y is the host's; mean and invstd come back as lumus tensors. */
static void layer_norm_on_host_buffers(vk_host *h, lua_State *L, int rows, int d, uint64_t seed) {
    const VkDeviceSize x_off = 256, xb = (VkDeviceSize)rows * d * 4;
    vk_host_buffer bx, bw, by;
    vk_host_buffer_create(h, x_off + xb, &bx);
    vk_host_buffer_create(h, (VkDeviceSize)d * 4, &bw);
    vk_host_buffer_create(h, xb, &by);
    float *x = (float *)((unsigned char *)bx.mapped + x_off);
    float *bias = malloc((size_t)d * sizeof *bias);
    double *want = malloc((size_t)rows * d * sizeof *want), *wmean = malloc((size_t)rows * sizeof *wmean),
           *winv = malloc((size_t)rows * sizeof *winv);
    float *saved_x = malloc((size_t)xb);
    if (!bias || !want || !wmean || !winv || !saved_x) vk_fail("out of memory");
    vk_rng rng = { seed };
    for (long i = 0; i < (long)rows * d; i++) x[i] = (float)(1000.0 + 3.0 * vk_rng_normal(&rng));
    for (int i = 0; i < d; i++) bw.mapped[i] = (float)(1.0 + 0.1 * vk_rng_normal(&rng));
    for (int i = 0; i < d; i++) bias[i] = (float)(0.1 * vk_rng_normal(&rng));
    for (long i = 0; i < (long)rows * d; i++) by.mapped[i] = NAN;   /* unwritten elements fail */
    memcpy(saved_x, x, (size_t)xb);
    ref_layer_norm(x, bw.mapped, bias, rows, d, EPS, want, wmean, winv);

    lua_Integer in_use = memory_in_use(L);
    int64_t shape[2] = { rows, d }, wshape[1] = { d };
    lumus_buffer wx = { bx.buffer, x_off, xb, x };
    lumus_buffer ww = { bw.buffer, 0, bw.size, NULL };          /* not mapped: staging */
    lumus_buffer wy = { by.buffer, 0, by.size, by.mapped };
    lumus_buffer wy2 = { by.buffer, 0, by.size, NULL };         /* an alias of y, unmapped */
    if (lumus_push_buffer(L, &wx, 2, shape) != LUA_OK) vk_fail("wrap x: %s", lua_tostring(L, -1));
    if (lumus_push_buffer(L, &ww, 1, wshape) != LUA_OK) vk_fail("wrap w: %s", lua_tostring(L, -1));
    if (lumus_push_buffer(L, &wy, 2, shape) != LUA_OK) vk_fail("wrap y: %s", lua_tostring(L, -1));
    if (lumus_push_buffer(L, &wy2, 2, shape) != LUA_OK) vk_fail("wrap y again: %s", lua_tostring(L, -1));
    int top = lua_gettop(L), ix = top - 3, iw = top - 2, iy = top - 1, iy2 = top;
    if (memory_in_use(L) != in_use) vk_fail("wrapping took lumus device memory");

    lumus_tensor_info info;
    if (!lumus_to_tensor(L, ix, &info)) vk_fail("lumus_to_tensor: x is not a tensor");
    if (info.buffer != bx.buffer || info.offset != x_off || info.size != xb || !info.wrapped ||
        info.mapped != (void *)x || info.ndim != 2 || info.shape[0] != rows || info.shape[1] != d || info.numel != (int64_t)rows * d)
        vk_fail("lumus_to_tensor: x's info does not describe the host buffer");

    /* Lua records the op and returns at once; nothing is synchronized in Lua. */
    lua_pushvalue(L, ix); lua_pushvalue(L, iw); lua_pushlstring(L, (const char *)bias, (size_t)d * 4);
    lua_pushvalue(L, iy); lua_pushinteger(L, d);
    run(L, "layer_norm_forward", "local x, w, bias, y, d = ...\n"
        "local lumus = require 'lumus'\n"
        "local b = lumus.from_bytes(bias, { d })\n"
        "local out, mean, invstd = lumus.layer_norm_forward(x, w, b, 1e-5, { out = y })\n"
        "assert(rawequal(out, y), 'out= is not returned as y')\n"
        "return mean, invstd", 5, 2);
    int imean = lua_gettop(L) - 1, iinv = lua_gettop(L);

    VkSemaphore sem;
    uint64_t value;
    if (lumus_tensor_sync_point(L, iy, &sem, &value) != LUA_OK) vk_fail("sync point: %s", lua_tostring(L, -1));
    if (!sem || value == 0) vk_fail("sync point of y: no semaphore or value 0 after an op wrote it");
    wait_value(h, sem, value, "waiting for y");
    double e = max_rel_error(by.mapped, want, (long)rows * d);
    if (!(e <= TOL)) vk_fail("%dx%d: y read from the host's mapping is off by %.3g (tolerance %.0e)", rows, d, e, TOL);

    /* The same elements through the unmapped alias (staging), and mean/invstd. */
    lua_pushvalue(L, iy2); lua_pushvalue(L, imean); lua_pushvalue(L, iinv);
    lua_pushvalue(L, iy);
    run(L, "read back", "local y2, m, r, y = ...\n"
        "local t, t2, last = y:to_table(), y2:to_table(), y:to_bytes(y:numel())\n"
        "local f32 = require('lumus.compat').unpack_bytes\n"
        "assert(t[#t][#t[1]] == f32('f32', last)[1] and t2[#t2][#t2[1]] == t[#t][#t[1]], 'to_table differs from to_bytes')\n"
        "return y2:to_bytes(), m:to_bytes(), r:to_bytes(), y:to_bytes()", 4, 4);
    size_t n2, nm, nr, n1;
    const char *y2 = lua_tolstring(L, -4, &n2), *m = lua_tolstring(L, -3, &nm), *r = lua_tolstring(L, -2, &nr);
    const char *y1 = lua_tolstring(L, -1, &n1);
    if (n2 != xb || memcmp(y2, by.mapped, xb) != 0) vk_fail("y read through staging differs from the mapping");
    if (n1 != xb || memcmp(y1, by.mapped, xb) != 0) vk_fail("y read through its mapped wrapper differs from the mapping");
    if (nm != (size_t)rows * 4 || nr != (size_t)rows * 4) vk_fail("mean/invstd have the wrong size");
    double em = 0, ei = 0;
    for (int i = 0; i < rows; i++) {
        float fm, fr;
        memcpy(&fm, m + 4 * i, 4); memcpy(&fr, r + 4 * i, 4);
        double a = fabs(fm - wmean[i]) / fabs(wmean[i]), b = fabs(fr / winv[i] - 1);
        if (!(a <= em)) em = a;
        if (!(b <= ei)) ei = b;
    }
    if (!(em <= 1e-6) || !(ei <= 1e-4)) vk_fail("mean off by %.3g (rel), invstd by %.3g (rel)", em, ei);
    lua_pop(L, 4);
    printf("PASS: %dx%d layer_norm_forward on host buffers: y max rel error %.2e, mean %.2e, invstd %.2e "
           "(to_table/to_bytes through mapping and staging agree)\n",
           rows, d, e, em, ei);

    /* Wrappers of one range alias: a device write through one must be waited for by a
     * host read through the other (mapped), and ordered before a device read of it. */
    lua_pushvalue(L, iy); lua_pushvalue(L, iy2);
    run(L, "alias", "local y, y2 = ...\nlocal lumus = require 'lumus'\n"
        "local f32 = require('lumus.compat').unpack_bytes\n"
        "local function all(s, v, what) for i = 1, #s, 4 do assert(f32('f32', s, i, 1)[1] == v, what) end end\n"
        "lumus.fill(y2, 7)\nall(y:to_bytes(), 7, 'host read through y did not wait for the write through y2')\n"
        "lumus.fill(y, 9)\nall(lumus.copy(y2):to_bytes(), 9, 'device read through y2 missed the write through y')", 2, 0);
    printf("PASS: a write through one wrapper is seen by reads through another of the same range\n");

    /* Freeing wrapped tensors frees nothing of the host's. */
    lua_pushvalue(L, ix);
    run(L, "free", "local x = ...\nx:free()\ncollectgarbage()\ncollectgarbage()", 1, 0);
    if (lumus_to_tensor(L, ix, &info)) vk_fail("lumus_to_tensor accepts a freed tensor");
    if (memcmp(x, saved_x, (size_t)xb) != 0) vk_fail("the host's x changed after its tensor was freed");
    lua_settop(L, top - 4);
    run(L, "collect", "collectgarbage() collectgarbage()", 0, 0);
    if (lumus_sync_point(L, &sem, &value) != LUA_OK) vk_fail("sync point: %s", lua_tostring(L, -1));
    wait_value(h, sem, value, "waiting for all work");
    if (memcmp(x, saved_x, (size_t)xb) != 0) vk_fail("the host's x changed after collection");
    if (memory_in_use(L) != in_use)
        vk_fail("lumus memory in use is %lld bytes after collection, %lld before", (long long)memory_in_use(L), (long long)in_use);
    printf("PASS: freeing and collecting wrapped tensors leaves the host's memory alone\n");

    vk_host_buffer_destroy(h, &bx);
    vk_host_buffer_destroy(h, &bw);
    vk_host_buffer_destroy(h, &by);
    free(bias); free(want); free(wmean); free(winv); free(saved_x);
}

/* The host writes x on its own timeline: lumus's submit must wait for the host's
 * semaphore before running. */
static void waits_for_host_semaphore(vk_host *h, lua_State *L) {
    const int rows = 8, d = 64;
    vk_host_buffer bx, by;
    vk_host_buffer_create(h, (VkDeviceSize)rows * d * 4, &bx);
    vk_host_buffer_create(h, (VkDeviceSize)rows * d * 4, &by);
    VkSemaphoreTypeCreateInfo ti = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                     .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE };
    VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
    VkSemaphore host_sem;
    VKH(vkCreateSemaphore(h->device, &si, NULL, &host_sem));
    vk_rng rng = { 99 };
    for (int i = 0; i < rows * d; i++) bx.mapped[i] = (float)vk_rng_normal(&rng);
    double want[8 * 64];
    ref_layer_norm(bx.mapped, NULL, NULL, rows, d, EPS, want, NULL, NULL);

    int64_t shape[2] = { rows, d };
    lumus_buffer wx = { bx.buffer, 0, bx.size, bx.mapped }, wy = { by.buffer, 0, by.size, by.mapped };
    if (lumus_wait_semaphore(L, host_sem, 1) != LUA_OK) vk_fail("wait semaphore: %s", lua_tostring(L, -1));
    if (lumus_push_buffer(L, &wx, 2, shape) != LUA_OK || lumus_push_buffer(L, &wy, 2, shape) != LUA_OK)
        vk_fail("wrap: %s", lua_tostring(L, -1));
    run(L, "layer_norm_forward", "local x, y = ...\nrequire('lumus').layer_norm_forward(x, nil, nil, 1e-5, { out = y })", 2, 0);
    VkSemaphore sem;
    uint64_t value, now = 0;
    if (lumus_sync_point(L, &sem, &value) != LUA_OK) vk_fail("sync point: %s", lua_tostring(L, -1));
    struct timespec pause = { 0, 100 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    VKH(vkGetSemaphoreCounterValue(h->device, sem, &now));
    if (now >= value) vk_fail("lumus's batch ran before the host signalled its semaphore");
    VkSemaphoreSignalInfo sig = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, .semaphore = host_sem, .value = 1 };
    VKH(vkSignalSemaphore(h->device, &sig));
    wait_value(h, sem, value, "waiting after the host's signal");
    double e = max_rel_error(by.mapped, want, rows * d);
    if (!(e <= TOL)) vk_fail("layer_norm after the host's semaphore is off by %.3g", e);
    printf("PASS: lumus_wait_semaphore holds lumus's submit until the host signals (then y max rel error %.2e)\n", e);
    run(L, "collect", "collectgarbage()", 0, 0);
    if (lumus_sync_point(L, &sem, &value) != LUA_OK) vk_fail("sync point: %s", lua_tostring(L, -1));
    wait_value(h, sem, value, "waiting for all work");
    vkDestroySemaphore(h->device, host_sem, NULL);
    vk_host_buffer_destroy(h, &bx);
    vk_host_buffer_destroy(h, &by);
}

/* Wrappers of one buffer at byte offsets 0 and 16 share bytes 16..31 while each has
 * element offset 0 in its own storage: as an op's input and out that is a data race, so
 * it is refused (by byte range, not by element offset); a wrapper of the same bytes is
 * the same elements and works in place. */
static void partial_overlap_refused(vk_host *h, lua_State *L) {
    vk_host_buffer b;
    vk_host_buffer_create(h, 256, &b);
    for (int i = 0; i < 16; i++) b.mapped[i] = (float)(i + 1);
    int64_t shape[1] = { 8 };
    lumus_buffer at0 = { b.buffer, 0, 32, b.mapped }, at16 = { b.buffer, 16, 32, NULL },
                 again0 = { b.buffer, 0, 32, NULL };
    if (lumus_push_buffer(L, &at0, 1, shape) != LUA_OK || lumus_push_buffer(L, &at16, 1, shape) != LUA_OK ||
        lumus_push_buffer(L, &again0, 1, shape) != LUA_OK)
        vk_fail("wrap: %s", lua_tostring(L, -1));
    run(L, "partial overlap", "local a, b, a2 = ...\nlocal lumus = require 'lumus'\n"
        "local function refused(what, f, ...)\n"
        "  local ok, e = pcall(f, ...)\n"
        "  assert(not ok, what .. ' accepted an out that partly overlaps its input')\n"
        "  assert(tostring(e):find('overlaps', 1, true), what .. ': ' .. tostring(e))\n"
        "end\n"
        "refused('neg', lumus.neg, a, { out = b })\n"
        "refused('add', lumus.add, b, 1, { out = a })\n"
        "refused('add of two', lumus.add, a2, a, { out = b })\n"
        "refused('softmax', lumus.softmax, a, { out = b })\n"
        "refused('copy', lumus.copy, a, { out = b })\n"
        "for i, v in ipairs(b:to_table()) do assert(v == i + 4, 'a refused op wrote element ' .. i) end\n"
        "lumus.neg(a, { out = a2 })\n"
        "for i, v in ipairs(a:to_table()) do assert(v == -i, 'in place through another wrapper: element ' .. i .. ' is ' .. v) end",
        3, 0);
    run(L, "collect", "collectgarbage() collectgarbage()", 0, 0);
    VkSemaphore sem;
    uint64_t value;
    if (lumus_sync_point(L, &sem, &value) != LUA_OK) vk_fail("sync point: %s", lua_tostring(L, -1));
    wait_value(h, sem, value, "waiting for all work");
    vk_host_buffer_destroy(h, &b);
    printf("PASS: an out that partly overlaps an input through wrappers of one buffer is refused; the same bytes work in place\n");
}

static void api_errors(vk_host *h, lua_State *L) {
    vk_host_buffer b;
    vk_host_buffer_create(h, 1024, &b);
    int64_t shape[2] = { 4, 4 };
    lumus_buffer misaligned = { b.buffer, 4, 512, NULL }, small = { b.buffer, 0, 60, NULL }, ok = { b.buffer, 0, 64, NULL };
    expect_error(L, lumus_push_buffer(L, &misaligned, 2, shape), "misaligned wrap", "multiple of 16");
    expect_error(L, lumus_push_buffer(L, &small, 2, shape), "short wrap", "needs 64 bytes, the buffer range has 60");
    expect_error(L, lumus_push_buffer(L, &ok, 0, shape), "wrap with no dims", "1 to 8 sizes");
    int64_t negative[2] = { 4, -1 };
    expect_error(L, lumus_push_buffer(L, &ok, 2, negative), "wrap with a negative size", "size 2 of the shape must be positive");
    expect_error(L, lumus_tensor_sync_point(L, 1, NULL, NULL), "sync point of a non-tensor", "not a tensor");
    expect_error(L, lumus_wait_semaphore(L, VK_NULL_HANDLE, 1), "wait on no semaphore", "no semaphore");

    /* lumus-owned tensors from C, and lumus_check_tensor inside a host function. */
    if (lumus_push_tensor(L, 2, shape) != LUA_OK) vk_fail("push tensor: %s", lua_tostring(L, -1));
    lumus_tensor_info info;
    if (!lumus_to_tensor(L, -1, &info) || info.wrapped || info.numel != 16 || info.size != 64 || !info.buffer || !info.address)
        vk_fail("lumus_push_tensor: info does not describe a 4x4 lumus tensor");
    lua_pushnumber(L, 3);
    if (lumus_to_tensor(L, -1, &info)) vk_fail("lumus_to_tensor accepts a number");
    lua_pop(L, 1);
    lua_pushcfunction(L, host_numel);
    run(L, "check_tensor", "local t, numel = ...\n"
        "assert(numel(t) == 16)\n"
        "local ok, err = pcall(numel, 42)\n"
        "assert(not ok and err:find('tensor expected, got number', 1, true), err)\n"
        "t:free()\nok, err = pcall(numel, t)\n"
        "assert(not ok and err:find('tensor has been freed', 1, true), err)", 2, 0);
    vk_host_buffer_destroy(h, &b);
    printf("PASS: lumus_push_buffer, sync point and wait report misuse by message; push/check/to_tensor work\n");
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
    check_attach_errors(L, &dev);
    if (lumus_attach_vulkan(L, &dev) != LUA_OK) vk_fail("attach: %s", lua_tostring(L, -1));
    expect_error(L, lumus_attach_vulkan(L, &dev), "second attach", "already has a device context");
    run(L, "device", "local d = require('lumus').device()\nassert(d.attached, 'not attached')\nreturn d.name, d.int64_atomics", 0, 2);
    if (strcmp(lua_tostring(L, -2), h.name) != 0) vk_fail("lumus uses \"%s\", not the host's device", lua_tostring(L, -2));
    /* An optional feature is used exactly when the host says it enabled it. */
    if (lua_toboolean(L, -1) != !!(h.features & LUMUS_VK_BUFFER_INT64_ATOMICS))
        vk_fail("lumus.device().int64_atomics does not follow the host's LUMUS_VK_BUFFER_INT64_ATOMICS");
    lua_pop(L, 2);
    printf("PASS: lumus in this lua_State runs on the host's device\n");

    layer_norm_on_host_buffers(&h, L, 37, 200, 1);    /* vec4 rows */
    layer_norm_on_host_buffers(&h, L, 5, 1001, 2);    /* odd D: scalar loads */
    waits_for_host_semaphore(&h, L);
    partial_overlap_refused(&h, L);
    api_errors(&h, L);

    lua_close(L);
    /* The host's device, queue and memory are still the host's to use after lua_close. */
    VKH(vkQueueWaitIdle(h.queue));
    vk_host_buffer b;
    vk_host_buffer_create(&h, 256, &b);
    b.mapped[0] = 1.5f;
    vk_host_buffer_destroy(&h, &b);
    VKH(vkDeviceWaitIdle(h.device));
    int validating = vk_host_validating(&h);
    vk_host_destroy(&h);     /* the layer reports objects lumus left behind here */
    if (vk_host_validation_messages() != 0) vk_fail("%lu validation messages", vk_host_validation_messages());
    printf("PASS: after lua_close the host's device still works and %s\n",
           validating ? "the validation layer reported nothing" : "is destroyed by the host");
    printf("wrap: all passed\n");
    return 0;
}
