/* lumus.h: the C API for hosts that embed lumus.
 *
 * A host (a game or app that runs Lua) uses this header to
 *   - open lumus in a lua_State without the module search path (static linking),
 *   - hand lumus the Vulkan device it already has, so lumus creates no second device
 *     and tensors can live in the host's own buffers,
 *   - wrap a range of one of its VkBuffers as a lumus tensor, without a copy, and learn
 *     when lumus's device work on it has finished,
 *   - pass tensors between C and Lua.
 *
 * Linking. Every function here is in build/liblumus.a (the objects of lumus/core.so
 * plus the Lua files of lua/lumus/, embedded); all but lumus_open are also exported by
 * lumus/core.so itself. Link liblumus.a, -lvulkan -ljansson -lm -lpthread and Lua 5.4. A host that loads lumus only
 * with `require "lumus"` from an installed tree needs none of this header; attaching a
 * device or wrapping buffers needs these functions, i.e. liblumus.a (or core.so linked
 * in directly). Use one copy of lumus per process: if liblumus.a is linked in, call
 * lumus_open, so that `require "lumus"` finds the linked copy instead of loading core.so.
 *
 * Errors. Functions returning int return LUA_OK (0) on success. On failure they return
 * a Lua error status (LUA_ERRRUN, LUA_ERRMEM) and push one error message string, as
 * lua_pcall does; they never raise, so a host may call them outside any protected call.
 * lumus_check_tensor is the exception: like luaL_checkudata it raises, for use inside
 * lua_CFunctions.
 *
 * Threads. A lua_State and everything lumus keeps for it (its device context, tensors,
 * command stream) must be used by one thread at a time, as Lua itself requires. Many
 * lua_States may use lumus from many threads at once. Each lua_State has its own
 * context: its own device, unless the host attaches one; several lua_States may be
 * attached to the same VkDevice and VkQueue. lumus's submissions to a shared VkQueue
 * take the queue lock given in lumus_vulkan_device; without one, lumus uses a mutex
 * shared by all of its contexts that submit to that VkQueue, which does NOT exclude
 * the host's own vkQueueSubmit/vkQueueWaitIdle/vkQueuePresentKHR on that queue: a host
 * that submits to the queue itself must give the lock callbacks. Tensors belong to one
 * lua_State and must not be passed to another. Each lua_State attached to a device keeps
 * its own memory pools there (blocks of 2 MiB up to 256 MiB; lumus.set_memory_limit
 * caps them per lua_State, lumus.empty_cache gives the unused ones back).
 * LUMUS_VALIDATION concerns only instances lumus creates: for an attached device, enable
 * the validation layer on the host's instance. LUMUS_PIPELINE_CACHE (a file, or "off")
 * applies to every context, attached ones too: each lua_State reads the pipeline cache
 * when its context is made and writes it at lua_close (docs/pipeline_cache.md); a host
 * calls lumus.warm_up() in Lua during its loading screen.
 *
 * Lifetime. lua_close waits for all of lumus's work in flight, then frees what lumus
 * created (memory blocks, command pools, fences, pipelines, its timeline semaphore, and
 * its own VkDevice and VkInstance), even when finalizers still hold or make tensors
 * while the state closes (using those tensors then raises), and leaves the host's
 * VkInstance, VkDevice, VkQueue and wrapped buffers alone. Destroy those only after
 * lua_close (or, for a wrapped buffer, after its sync point is reached and the tensors
 * wrapping it are no longer used).
 */
#ifndef LUMUS_H
#define LUMUS_H

#include <stdint.h>
#include <vulkan/vulkan.h>
#include <lua.h>

/* Lua 5.1 and LuaJIT name no LUA_OK; it is 0 on every version. */
#ifndef LUA_OK
#define LUA_OK 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LUMUS_C_API_VERSION 1

/* What lumus exports: these functions only (the build hides every other symbol with
 * -fvisibility=hidden, so lumus/core.so cannot clash with a host's own names). */
#if defined(__GNUC__) || defined(__clang__)
#define LUMUS_API __attribute__((visibility("default")))
#else
#define LUMUS_API
#endif
#define LUMUS_MAX_DIMS 8

/* The Lua module's C part: luaL_requiref(L, "lumus.core", luaopen_lumus_core, 0). */
LUMUS_API int luaopen_lumus_core(lua_State *L);

/* Makes lumus available to `require` in L without the search path: registers
 * lumus.core as loaded and the embedded Lua modules ("lumus", "lumus.reference", ...)
 * in package.preload. Needs the package library (luaL_openlibs). Only in liblumus.a. */
LUMUS_API int lumus_open(lua_State *L);

/* ---- Sharing the host's Vulkan device ---- */

/* Optional features lumus uses when the host enabled them (otherwise it does without:
 * its subgroup-per-row LayerNorm form needs computeFullSubgroups). */
#define LUMUS_VK_SUBGROUP_SIZE_CONTROL  0x1u
#define LUMUS_VK_COMPUTE_FULL_SUBGROUPS 0x2u
/* A Vulkan 1.2 feature: VkPhysicalDeviceVulkan12Features.shaderBufferInt64Atomics lets
 * LayerNorm's rows too long for one workgroup exchange statistics with fewer round trips. */
#define LUMUS_VK_BUFFER_INT64_ATOMICS   0x4u
/* VkPhysicalDeviceVulkan11Features.storageBuffer16BitAccess and
 * VkPhysicalDeviceVulkan12Features.storageBuffer8BitAccess: the kernels of tensors whose
 * dtype is float16, bfloat16 or bool read and write them (without, those raise). */
#define LUMUS_VK_NARROW_STORAGE         0x8u

/* What lumus needs of an attached device:
 *   - the instance created with VkApplicationInfo.apiVersion >= VK_API_VERSION_1_2,
 *     through the system Vulkan loader (libvulkan.so.1), which lumus calls directly;
 *   - a physical device with Vulkan 1.2 and subgroup arithmetic in compute shaders
 *     (VkPhysicalDeviceSubgroupProperties: COMPUTE stage, ARITHMETIC operations);
 *   - the VkDevice created with these features enabled:
 *       VkPhysicalDeviceFeatures.shaderInt64,
 *       VkPhysicalDeviceVulkan12Features.bufferDeviceAddress and .timelineSemaphore,
 *     and optionally the 1.3 features named by `features` above. No extension is needed.
 *   - a queue of `queue_family`, which must support VK_QUEUE_COMPUTE_BIT (timestamps
 *     for lumus.gpu_time need timestampValidBits > 0).
 * Vulkan cannot tell lumus which features a device was created with: a device created
 * without them makes lumus's kernels invalid usage. */
typedef struct lumus_vulkan_device {
    VkInstance instance;
    VkPhysicalDevice physical_device;
    VkDevice device;
    uint32_t queue_family;
    VkQueue queue;
    uint32_t features;                  /* LUMUS_VK_* flags the host enabled */
    /* Optional: lumus calls lock_queue(queue_user) before and unlock_queue(queue_user)
     * after each of its vkQueueSubmit calls. Give both or neither. */
    void (*lock_queue)(void *queue_user);
    void (*unlock_queue)(void *queue_user);
    void *queue_user;
} lumus_vulkan_device;

/* Makes lumus in L use the host's device instead of creating its own. Call it before
 * any lumus use in L (it may be called before or after `require "lumus"`, but before
 * the first tensor, lumus.device() or other call that needs a device); the handles
 * are copied, and must stay valid until lua_close(L). lumus never destroys them.
 * Fails with a message if L already has a device context, if the physical device lacks
 * something lumus needs, or if queue_family has no compute support. */
LUMUS_API int lumus_attach_vulkan(lua_State *L, const lumus_vulkan_device *dev);

/* ---- Host buffers as tensors ---- */

/* A range of a host VkBuffer of the attached device, holding float32 values. The buffer
 * must have been created with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT and
 * VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT and bound to memory allocated with
 * VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT; reading or writing it from Lua when `mapped`
 * is NULL (to_table, to_bytes, ...) goes through staging and needs
 * VK_BUFFER_USAGE_TRANSFER_SRC_BIT / _DST_BIT too. */
typedef struct lumus_buffer {
    VkBuffer buffer;
    VkDeviceSize offset;    /* bytes from the buffer's start; the address must be a
                             * multiple of 16 (the kernels' vec4 loads) */
    VkDeviceSize size;      /* bytes available at offset: at least 4 * elements */
    void *mapped;           /* host pointer to byte `offset`, if the memory is mapped
                             * and HOST_COHERENT; NULL to go through staging */
} lumus_buffer;

/* Pushes a tensor of shape[0..ndim-1] (1 to 8 positive sizes) whose elements are the
 * buffer range, row-major, no copy. Freeing the tensor (t:free(), __gc, lua_close)
 * frees no host memory. On failure pushes a message instead (see Errors).
 *
 * Ordering. lumus's command buffers begin with a barrier over compute, transfer and
 * host writes, so host writes through `mapped` made before the Lua call, and host
 * compute/transfer work submitted to the same queue before lumus's next submit, are
 * seen by lumus. For other stages, another queue, or a write the host submits later,
 * use lumus_wait_semaphore. Hazards between tensors that wrap the same or overlapping
 * ranges are tracked (lumus orders all wrapped tensors' device accesses as if they
 * might alias). */
LUMUS_API int lumus_push_buffer(lua_State *L, const lumus_buffer *buf, int ndim, const int64_t *shape);

/* ---- Synchronizing with lumus ---- */

/* lumus's timeline semaphore for L's context and the value it will reach once all
 * device work recorded so far on the tensor at idx has finished (for a wrapped tensor:
 * on every wrapped tensor of L). Pending work is submitted, so waiting cannot deadlock.
 * Wait with vkWaitSemaphores, or in the host's own VkSubmitInfo (a
 * VkTimelineSemaphoreSubmitInfo wait value). The semaphore is lumus's: do not signal or
 * destroy it; it lives until lua_close. After a device error lumus reports in Lua,
 * a value may never be reached: wait with a timeout. */
LUMUS_API int lumus_tensor_sync_point(lua_State *L, int idx, VkSemaphore *semaphore, uint64_t *value);

/* The same for all work recorded in L so far. */
LUMUS_API int lumus_sync_point(lua_State *L, VkSemaphore *semaphore, uint64_t *value);

/* Makes lumus's next submit in L wait (at compute and transfer stages) until the host's
 * timeline semaphore reaches value: for buffers the host writes on the device after or
 * apart from lumus's work. Up to 16 waits may be pending at once. */
LUMUS_API int lumus_wait_semaphore(lua_State *L, VkSemaphore semaphore, uint64_t value);

/* ---- Tensors between C and Lua ---- */

/* What a tensor is in device memory. Elements are float32, contiguous, row-major. */
typedef struct lumus_tensor_info {
    int ndim;
    int64_t shape[LUMUS_MAX_DIMS];
    int64_t numel;
    VkBuffer buffer;            /* the VkBuffer holding the elements (lumus's or the host's) */
    VkDeviceSize offset;        /* byte offset of element 0 in buffer */
    VkDeviceSize size;          /* bytes: 4 * numel */
    VkDeviceAddress address;    /* device address of element 0 */
    void *mapped;               /* host pointer to element 0 when lumus maps it, else NULL;
                                 * valid only after its sync point is reached */
    int wrapped;                /* 1 if the memory is a host buffer (lumus_push_buffer) */
} lumus_tensor_info;

/* 1 and fills *info if the value at idx is a live (not freed) contiguous tensor, else 0
 * (a strided view gives 0: the info has no strides; pass t:contiguous()).
 * Never raises. The info stays valid while the tensor is alive. */
LUMUS_API int lumus_to_tensor(lua_State *L, int idx, lumus_tensor_info *info);

/* As lumus_to_tensor, but raises a Lua argument error ("tensor expected" / "tensor has
 * been freed" / "tensor must be contiguous") for anything else: for use inside
 * lua_CFunctions. */
LUMUS_API void lumus_check_tensor(lua_State *L, int idx, lumus_tensor_info *info);

/* Pushes a new lumus-owned tensor of this shape (uninitialized device memory), on L's
 * context (its own device, or the attached one). On failure pushes a message. */
LUMUS_API int lumus_push_tensor(lua_State *L, int ndim, const int64_t *shape);

/* ---- Diagnostics ---- */

/* Device contexts alive in the process, over all lua_States: each lua_State that used
 * a device has one until lua_close. For a host's leak checks (0 once every state that
 * used lumus is closed). */
LUMUS_API int lumus_context_count(void);

#ifdef __cplusplus
}
#endif

#endif
