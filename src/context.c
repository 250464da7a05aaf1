/* The device context (see context.h): instance, device choice, device and queue. */
#include "context.h"
#include "vkcheck.h"
#include "vk_ext.h"
#include "pipelines.h"
#include "queues.h"
#include "storage.h"
#include "lumus.h"
#include "lua_compat.h"
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LM_CONTEXT_KEY "lumus.context"
#define LM_CPU_DRIVER_HINT "install a Vulkan driver; with no GPU, the CPU driver lavapipe " \
                           "comes in Debian's package mesa-vulkan-drivers"

/* Counted from the validation layer's callback threads of every context at once. */
static atomic_ulong validation_count;
/* Contexts made and not yet destroyed, in every lua_State of the process. */
static atomic_int live_contexts;

/* The registry's handle; its user values anchor the scratch slots' storages. */
typedef struct { lm_context *ctx; } lm_context_box;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
        VkDebugUtilsMessageTypeFlagsEXT type, const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)type; (void)user;
    if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        atomic_fetch_add(&validation_count, 1);
        fprintf(stderr, "lumus: validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

unsigned long lm_validation_messages(void) { return atomic_load(&validation_count); }

static int env_flag(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

static int has_layer(const char *name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkLayerProperties *l = calloc(n, sizeof *l);
    int found = 0;
    if (l && vkEnumerateInstanceLayerProperties(&n, l) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) if (strcmp(l[i].layerName, name) == 0) found = 1;
    free(l);
    return found;
}

static const char *kind_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

static int kind_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

/* Everything a physical device tells about itself that lumus uses. */
typedef struct device_facts {
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceDriverProperties driver;
    uint32_t subgroup_size, min_subgroup, max_subgroup;
    int subgroup_arith, subgroup_vote, subgroup_shuffle, size_control, full_subgroups, bda, int64, timeline, int64_atomics;
    int narrow_storage;     /* storageBuffer16BitAccess and storageBuffer8BitAccess */
    int executable_stats;   /* VK_KHR_pipeline_executable_properties and its feature */
    uint32_t sm_count;      /* VK_NV_shader_sm_builtins: multiprocessors (0: no SM ids) */
    int coop_matrix;        /* VK_NV_cooperative_matrix and its feature (not yet its sizes) */
    int coop_khr;           /* VK_KHR_cooperative_matrix and its feature (not yet its sizes) */
    int coop_conversions;   /* VK_NV_cooperative_matrix2's cooperativeMatrixConversions */
    VkDeviceSize max_allocation;
    uint32_t queue_family, timestamp_bits;
    int has_queue;
} device_facts;

static int has_device_extension(VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkExtensionProperties *e = calloc(n, sizeof *e);
    if (!e) return 0;
    int found = 0;
    VkResult r = vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e);
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(e[i].extensionName, name) == 0;
    free(e);
    return found;
}

static void read_facts(VkPhysicalDevice pd, device_facts *f) {
    memset(f, 0, sizeof *f);
    vkGetPhysicalDeviceProperties(pd, &f->props);
    uint32_t api = f->props.apiVersion;
    int v13 = VK_API_VERSION_MINOR(api) >= 3 || VK_API_VERSION_MAJOR(api) > 1;
    int v12 = VK_API_VERSION_MINOR(api) >= 2 || VK_API_VERSION_MAJOR(api) > 1;
    VkPhysicalDeviceMaintenance4Properties m4 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES };
    VkPhysicalDeviceSubgroupSizeControlProperties scp = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES, .pNext = &m4 };
    VkPhysicalDeviceMaintenance3Properties m3 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES };
    VkPhysicalDeviceSubgroupProperties sp = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &m3 };
    f->driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sp };
    if (v12) m3.pNext = &f->driver;
    if (v13) f->driver.pNext = &scp;
    vkGetPhysicalDeviceProperties2(pd, &p2);
    f->subgroup_size = sp.subgroupSize;
    f->subgroup_arith = (sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                        (sp.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    f->subgroup_vote = (sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                       (sp.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT);
    f->subgroup_shuffle = (sp.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                          (sp.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    f->min_subgroup = v13 && scp.minSubgroupSize ? scp.minSubgroupSize : sp.subgroupSize;
    f->max_subgroup = v13 && scp.maxSubgroupSize ? scp.maxSubgroupSize : sp.subgroupSize;
    f->max_allocation = m3.maxMemoryAllocationSize;
    /* Every block is one VkBuffer: a tensor must also fit the largest buffer (1.3). */
    if (v13 && m4.maxBufferSize && m4.maxBufferSize < f->max_allocation) f->max_allocation = m4.maxBufferSize;
    if (!v12) f->driver.driverName[0] = 0;

    VkPhysicalDeviceVulkan13Features f13 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES };
    VkPhysicalDeviceVulkan12Features f12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES };
    VkPhysicalDeviceVulkan11Features f11 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES };
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexec = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR };
    VkPhysicalDeviceShaderSMBuiltinsFeaturesNV fsm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV };
    int has_exec = has_device_extension(pd, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    int has_sm = has_device_extension(pd, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
    int has_coop = has_device_extension(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) &&
                   !env_flag("LUMUS_NO_COOPERATIVE_MATRIX");
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV };
    /* The KHR shaders run only on Vulkan 1.3 devices (SPIR-V 1.6, as glslang builds them). */
    int has_khr = v13 && has_device_extension(pd, LM_KHR_COOPERATIVE_MATRIX_NAME) &&
                  !env_flag("LUMUS_NO_COOPERATIVE_MATRIX") && !env_flag("LUMUS_NO_KHR_COOPERATIVE_MATRIX");
    int has_cm2 = has_khr && has_device_extension(pd, LM_NV_COOPERATIVE_MATRIX_2_NAME);
    lm_coop_khr_features fkhr = { .sType = LM_STRUCTURE_TYPE_COOP_KHR_FEATURES };
    lm_coop2_features fcm2 = { .sType = LM_STRUCTURE_TYPE_COOP2_FEATURES };
    VkPhysicalDeviceFeatures2 feat = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2 };
    if (v12) { f11.pNext = &f12; feat.pNext = &f11; if (v13) f12.pNext = &f13; }
    if (has_exec) { fexec.pNext = feat.pNext; feat.pNext = &fexec; }
    if (has_sm) { fsm.pNext = feat.pNext; feat.pNext = &fsm; }
    if (has_coop) { fcm.pNext = feat.pNext; feat.pNext = &fcm; }
    if (has_khr) { fkhr.pNext = feat.pNext; feat.pNext = &fkhr; }
    if (has_cm2) { fcm2.pNext = feat.pNext; feat.pNext = &fcm2; }
    vkGetPhysicalDeviceFeatures2(pd, &feat);
    f->coop_matrix = has_coop && fcm.cooperativeMatrix;
    f->coop_khr = has_khr && fkhr.cooperativeMatrix;
    f->coop_conversions = f->coop_khr && has_cm2 && fcm2.cooperativeMatrixConversions;
    f->executable_stats = has_exec && fexec.pipelineExecutableInfo;
    if (has_sm && fsm.shaderSMBuiltins) {
        VkPhysicalDeviceShaderSMBuiltinsPropertiesNV smp = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV };
        VkPhysicalDeviceProperties2 p2sm = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &smp };
        vkGetPhysicalDeviceProperties2(pd, &p2sm);
        f->sm_count = smp.shaderSMCount;
    }
    f->int64_atomics = v12 && f12.shaderBufferInt64Atomics;
    f->narrow_storage = v12 && f11.storageBuffer16BitAccess && f12.storageBuffer8BitAccess;
    f->bda = v12 && f12.bufferDeviceAddress;
    f->timeline = v12 && f12.timelineSemaphore;
    f->int64 = feat.features.shaderInt64;
    f->size_control = v13 && f13.subgroupSizeControl;
    f->full_subgroups = v13 && f13.computeFullSubgroups;
    /* The kernel's needs: float16 matrices (shaderFloat16) and the Vulkan memory model,
     * which glslang declares for cooperative matrices. */
    int coop_needs = f->narrow_storage && f->full_subgroups && v12 && f12.vulkanMemoryModel &&
                     f12.shaderFloat16 && f->min_subgroup == f->max_subgroup;
    f->coop_matrix = f->coop_matrix && coop_needs;
    /* The KHR kernels also assume subgroups of 32 (their workgroups are sized so). */
    f->coop_khr = f->coop_khr && coop_needs && f->subgroup_size == 32;
    f->coop_conversions = f->coop_conversions && f->coop_khr;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties *q = calloc(nq ? nq : 1, sizeof *q);
    if (q) {
        vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, q);
        /* Prefer a family with timestamps; any compute family otherwise. */
        for (int pass = 0; pass < 2 && !f->has_queue; pass++)
            for (uint32_t i = 0; i < nq && !f->has_queue; i++)
                if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && (pass == 1 || q[i].timestampValidBits > 0)) {
                    f->queue_family = i;
                    f->timestamp_bits = q[i].timestampValidBits;
                    f->has_queue = 1;
                }
        free(q);
    }
}

/* NULL when usable, else what is missing. */
static const char *unusable_reason(const device_facts *f) {
    uint32_t api = f->props.apiVersion;
    if (VK_API_VERSION_MAJOR(api) == 1 && VK_API_VERSION_MINOR(api) < 2) return "it supports only Vulkan 1.0/1.1 (1.2 is needed)";
    if (!f->has_queue) return "it has no compute queue";
    if (!f->bda) return "it lacks bufferDeviceAddress";
    if (!f->int64) return "it lacks shaderInt64";
    if (!f->timeline) return "it lacks timelineSemaphore";
    if (!f->subgroup_arith) return "it lacks subgroup arithmetic in compute shaders";
    return NULL;
}

static VkDeviceSize device_local_bytes(VkPhysicalDevice pd) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(pd, &mp);
    VkDeviceSize total = 0;
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++)
        if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) total += mp.memoryHeaps[i].size;
    return total;
}

static void set_int(lua_State *L, const char *k, lua_Integer v) { lua_pushinteger(L, v); lua_setfield(L, -2, k); }
static void set_str(lua_State *L, const char *k, const char *v) { lua_pushstring(L, v); lua_setfield(L, -2, k); }

void lm_push_device_info(lua_State *L, VkPhysicalDevice pd, uint32_t index) {
    device_facts f;
    read_facts(pd, &f);
    const VkPhysicalDeviceLimits *lim = &f.props.limits;
    lua_createtable(L, 0, 24);
    set_int(L, "index", index);
    set_str(L, "name", f.props.deviceName);
    set_str(L, "kind", kind_name(f.props.deviceType));
    set_str(L, "driver", f.driver.driverName[0] ? f.driver.driverName : "unknown");
    set_str(L, "driver_info", f.driver.driverInfo);
    uint32_t a = f.props.apiVersion;
    lua_pushfstring(L, "%d.%d.%d", (int)VK_API_VERSION_MAJOR(a), (int)VK_API_VERSION_MINOR(a), (int)VK_API_VERSION_PATCH(a));
    lua_setfield(L, -2, "api_version");
    set_int(L, "driver_version", f.props.driverVersion);
    set_int(L, "vendor_id", f.props.vendorID);
    set_int(L, "device_id", f.props.deviceID);
    set_int(L, "subgroup_size", f.subgroup_size);
    set_int(L, "min_subgroup_size", f.min_subgroup);
    set_int(L, "max_subgroup_size", f.max_subgroup);
    set_int(L, "device_local_bytes", (lua_Integer)device_local_bytes(pd));
    set_int(L, "max_storage_buffer_range", lim->maxStorageBufferRange);
    set_int(L, "max_allocation_size", (lua_Integer)f.max_allocation);
    set_int(L, "max_workgroup_size", lim->maxComputeWorkGroupInvocations);
    lua_createtable(L, 3, 0);
    for (int i = 0; i < 3; i++) { lua_pushinteger(L, lim->maxComputeWorkGroupCount[i]); lua_rawseti(L, -2, i + 1); }
    lua_setfield(L, -2, "max_workgroup_count");
    set_int(L, "timestamp_bits", f.timestamp_bits);
    lua_pushnumber(L, lim->timestampPeriod);
    lua_setfield(L, -2, "timestamp_period_ns");
    const char *why = unusable_reason(&f);
    lua_pushboolean(L, why == NULL);
    lua_setfield(L, -2, "usable");
    if (why) set_str(L, "unusable_reason", why);
}

/* Case-insensitive substring test. */
static int contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return n == 0;
}

static void context_destroy(lm_context *ctx) {
    if (ctx->device) {
        lm_stream_destroy(ctx);
        if (!ctx->stream.abandoned) {   /* else left to the driver: see lm_stream_destroy */
            lm_pipelines_destroy(ctx);
            lm_memory_destroy(ctx);
            if (ctx->owns_device) vkDestroyDevice(ctx->device, NULL);
        }
    }
    if (ctx->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(ctx->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy) destroy(ctx->instance, ctx->messenger, NULL);
    }
    if (ctx->instance && ctx->owns_device && !ctx->stream.abandoned) vkDestroyInstance(ctx->instance, NULL);
    if (ctx->shared_queue) lm_queue_mutex_release(ctx->queue);
    pthread_mutex_destroy(&ctx->own_queue_mutex);
    free(ctx);
    atomic_fetch_sub(&live_contexts, 1);
}

int lm_context_count(void) { return atomic_load(&live_contexts); }

/* A zeroed context, counted as live until context_destroy. */
static lm_context *context_alloc(void) {
    lm_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    atomic_fetch_add(&live_contexts, 1);
    pthread_mutex_init(&ctx->own_queue_mutex, NULL);
    ctx->queue_mutex = &ctx->own_queue_mutex;
    return ctx;
}

/* The handle's finalizer: after the work in flight finishes, everything the context
 * made goes, and storages still referenced (tensors made while the state closes have
 * no finalizer) are orphaned, their memory going with the pools. */
static void context_teardown(lm_context *ctx) {
    for (int i = 0; i < LM_SCRATCH_SLOTS; i++) lm_context_release_scratch(ctx, i);
    for (lm_storage *s = ctx->storages, *next; s; s = next) {
        next = s->next;
        s->ctx = NULL;
        s->chunk = NULL;
        s->mapped = NULL;
        s->prev = s->next = NULL;
    }
    ctx->storages = NULL;
    context_destroy(ctx);
}

void lm_context_release_scratch(lm_context *ctx, int slot) {
    lm_storage *s = ctx->scratch[slot];
    ctx->scratch[slot] = NULL;
    if (s) lm_storage_unref(s);
}

VkDeviceSize lm_context_scratch_bytes(const lm_context *ctx) {
    VkDeviceSize n = 0;
    for (int i = 0; i < LM_SCRATCH_SLOTS; i++)
        if (ctx->scratch[i] && ctx->scratch[i]->chunk) n += ctx->scratch[i]->chunk->size;
    return n;
}
static VkResult create_instance(lm_context *ctx, char *err, size_t errlen) {
    uint32_t loader = VK_API_VERSION_1_0;
    vkEnumerateInstanceVersion(&loader);
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "lumus", .pEngineName = "lumus",
        .apiVersion = loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : loader,
    };
    const char *layers[1], *exts[1];
    uint32_t nl = 0, ne = 0;
    if (env_flag("LUMUS_VALIDATION")) {
        if (!has_layer("VK_LAYER_KHRONOS_validation")) {
            snprintf(err, errlen, "LUMUS_VALIDATION is set but the layer VK_LAYER_KHRONOS_validation is not "
                     "installed (Debian package vulkan-validationlayers)");
            return VK_ERROR_LAYER_NOT_PRESENT;
        }
        layers[nl++] = "VK_LAYER_KHRONOS_validation";
        exts[ne++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
        ctx->validation = 1;
    }
    VkInstanceCreateInfo ii = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
        .enabledLayerCount = nl, .ppEnabledLayerNames = layers,
        .enabledExtensionCount = ne, .ppEnabledExtensionNames = exts,
    };
    VkResult r = vkCreateInstance(&ii, NULL, &ctx->instance);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
        snprintf(err, errlen, "no Vulkan device found (%s)", LM_CPU_DRIVER_HINT);
        return r;
    }
    if (r != VK_SUCCESS) {
        snprintf(err, errlen, "vkCreateInstance failed: %s", lm_vk_result_name(r));
        return r;
    }
    if (ctx->validation) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(ctx->instance, "vkCreateDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
            .pfnUserCallback = on_validation,
        };
        if (create) {
            r = create(ctx->instance, &mi, NULL, &ctx->messenger);
            if (r != VK_SUCCESS) { snprintf(err, errlen, "vkCreateDebugUtilsMessengerEXT failed: %s", lm_vk_result_name(r)); return r; }
        }
    }
    return VK_SUCCESS;
}

/* Picks the device: LUMUS_DEVICE (index or name substring) or the best kind. */
static VkResult choose_device(lm_context *ctx, device_facts *chosen, char *err, size_t errlen) {
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(ctx->instance, &n, NULL);
    if (r != VK_SUCCESS) { snprintf(err, errlen, "vkEnumeratePhysicalDevices failed: %s", lm_vk_result_name(r)); return r; }
    if (n == 0) { snprintf(err, errlen, "no Vulkan device found (%s)", LM_CPU_DRIVER_HINT); return VK_ERROR_INCOMPATIBLE_DRIVER; }
    VkPhysicalDevice *pds = calloc(n, sizeof *pds);
    if (!pds) return VK_ERROR_OUT_OF_HOST_MEMORY;
    r = vkEnumeratePhysicalDevices(ctx->instance, &n, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) { free(pds); snprintf(err, errlen, "vkEnumeratePhysicalDevices failed: %s", lm_vk_result_name(r)); return r; }
    const char *want = getenv("LUMUS_DEVICE");
    if (want && !*want) want = NULL;
    char *end = NULL;
    long want_index = want ? strtol(want, &end, 10) : -1;
    int by_index = want && end && *end == 0;
    int best = -1, best_rank = 99;
    const char *last_reason = NULL;
    for (uint32_t i = 0; i < n; i++) {
        device_facts f;
        read_facts(pds[i], &f);
        int match = !want || (by_index ? (long)i == want_index : contains_ci(f.props.deviceName, want));
        if (!match) continue;
        const char *why = unusable_reason(&f);
        if (why) { last_reason = why; if (want) { snprintf(err, errlen, "LUMUS_DEVICE=%s selects \"%s\", which lumus cannot use: %s", want, f.props.deviceName, why); free(pds); return VK_ERROR_FEATURE_NOT_PRESENT; } continue; }
        int rank = kind_rank(f.props.deviceType);
        if (rank < best_rank) { best = (int)i; best_rank = rank; *chosen = f; }
    }
    if (best < 0) {
        if (want) snprintf(err, errlen, "LUMUS_DEVICE=%s matches none of the %u Vulkan devices (see lumus.devices())", want, n);
        else snprintf(err, errlen, "no usable Vulkan device: %s (%s)", last_reason ? last_reason : "none found", LM_CPU_DRIVER_HINT);
        free(pds);
        return VK_ERROR_FEATURE_NOT_PRESENT;
    }
    ctx->phys = pds[best];
    ctx->device_index = (uint32_t)best;
    free(pds);
    return VK_SUCCESS;
}

static VkResult create_device(lm_context *ctx, const device_facts *f, char *err, size_t errlen) {
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = f->queue_family,
        .queueCount = 1, .pQueuePriorities = &prio,
    };
    VkPhysicalDeviceVulkan13Features f13 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
        .subgroupSizeControl = f->size_control ? VK_TRUE : VK_FALSE,
        .computeFullSubgroups = f->full_subgroups ? VK_TRUE : VK_FALSE,
    };
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .pNext = f->size_control || f->full_subgroups ? &f13 : NULL,
        .bufferDeviceAddress = VK_TRUE,
        .timelineSemaphore = VK_TRUE,
        .shaderBufferInt64Atomics = f->int64_atomics ? VK_TRUE : VK_FALSE,
        .storageBuffer8BitAccess = f->narrow_storage ? VK_TRUE : VK_FALSE,
        .vulkanMemoryModel = f->coop_matrix || f->coop_khr ? VK_TRUE : VK_FALSE,
        .shaderFloat16 = f->coop_matrix || f->coop_khr ? VK_TRUE : VK_FALSE,
    };
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12,
        .storageBuffer16BitAccess = f->narrow_storage ? VK_TRUE : VK_FALSE,
    };
    /* Statistics capture only when asked for: drivers may skip their caches for it. */
    int stats = env_flag("LUMUS_PIPELINE_STATS") && f->executable_stats;
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexec = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pNext = &f11, .pipelineExecutableInfo = VK_TRUE,
    };
    /* SM ids let the split LayerNorm keep weight and bias slices in one SM's L1. */
    VkPhysicalDeviceShaderSMBuiltinsFeaturesNV fsm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV,
        .pNext = stats ? (void *)&fexec : (void *)&f11, .shaderSMBuiltins = VK_TRUE,
    };
    VkPhysicalDeviceFeatures2 feat = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = f->sm_count ? (void *)&fsm : stats ? (void *)&fexec : (void *)&f11,
        .features = { .shaderInt64 = VK_TRUE },
    };
    /* Cooperative matrices (tensor cores) for the float16 matmul kernel. */
    VkPhysicalDeviceCooperativeMatrixFeaturesNV fcm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
        .pNext = feat.pNext, .cooperativeMatrix = VK_TRUE,
    };
    if (f->coop_matrix) feat.pNext = &fcm;
    /* The same through VK_KHR_cooperative_matrix, with VK_NV_cooperative_matrix2's
     * conversions (an accumulator as an A matrix, for attention) where there are. */
    lm_coop_khr_features fkhr = { .sType = LM_STRUCTURE_TYPE_COOP_KHR_FEATURES, .pNext = feat.pNext,
                                  .cooperativeMatrix = VK_TRUE };
    if (f->coop_khr) feat.pNext = &fkhr;
    lm_coop2_features fcm2 = { .sType = LM_STRUCTURE_TYPE_COOP2_FEATURES, .pNext = feat.pNext,
                               .cooperativeMatrixConversions = VK_TRUE };
    if (f->coop_conversions) feat.pNext = &fcm2;
    const char *exts[5];
    uint32_t ne = 0;
    if (stats) exts[ne++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    if (f->sm_count) exts[ne++] = VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME;
    if (f->coop_matrix) exts[ne++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (f->coop_khr) exts[ne++] = LM_KHR_COOPERATIVE_MATRIX_NAME;
    if (f->coop_conversions) exts[ne++] = LM_NV_COOPERATIVE_MATRIX_2_NAME;
    VkDeviceCreateInfo di = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &feat,
        .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
        .enabledExtensionCount = ne, .ppEnabledExtensionNames = exts,
    };
    VkResult r = vkCreateDevice(ctx->phys, &di, NULL, &ctx->device);
    if (r != VK_SUCCESS) { snprintf(err, errlen, "vkCreateDevice failed: %s", lm_vk_result_name(r)); return r; }
    vkGetDeviceQueue(ctx->device, f->queue_family, 0, &ctx->queue);
    ctx->pipeline_stats = stats;
    if (env_flag("LUMUS_PIPELINE_STATS") && !stats)
        fprintf(stderr, "lumus: LUMUS_PIPELINE_STATS: \"%s\" has no VK_KHR_pipeline_executable_properties\n",
                f->props.deviceName);
    return VK_SUCCESS;
}

/* Whether the device lists 16x16x16 float16 x float16 + float32 -> float32 subgroup
 * products, the shape shaders/matmul_coop.comp uses. */
static int coop_f16_listed(VkInstance instance, VkPhysicalDevice pd) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(instance,
            "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (!get || get(pd, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkCooperativeMatrixPropertiesNV *p = calloc(n, sizeof *p);
    if (!p) return 0;
    for (uint32_t i = 0; i < n; i++) p[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    int found = 0;
    VkResult r = get(pd, &n, p);
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        for (uint32_t i = 0; i < n && !found; i++)
            found = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
                    p[i].AType == VK_COMPONENT_TYPE_FLOAT16_NV && p[i].BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
                    p[i].CType == VK_COMPONENT_TYPE_FLOAT32_NV && p[i].DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
                    p[i].scope == VK_SCOPE_SUBGROUP_NV;
    free(p);
    return found;
}

/* The same through VK_KHR_cooperative_matrix (structures of lumus_vk_ext.h: Debian 12's
 * headers predate it). */
static int coop_khr_f16_listed(VkInstance instance, VkPhysicalDevice pd) {
    lm_get_coop_khr_properties get = (lm_get_coop_khr_properties)vkGetInstanceProcAddr(instance,
        "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (!get || get(pd, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    lm_coop_khr_properties *p = calloc(n, sizeof *p);
    if (!p) return 0;
    for (uint32_t i = 0; i < n; i++) p[i].sType = LM_STRUCTURE_TYPE_COOP_KHR_PROPERTIES;
    int found = 0;
    VkResult r = get(pd, &n, p);
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        for (uint32_t i = 0; i < n && !found; i++)
            found = p[i].MSize == 16 && p[i].NSize == 16 && p[i].KSize == 16 &&
                    p[i].AType == LM_COMPONENT_FLOAT16 && p[i].BType == LM_COMPONENT_FLOAT16 &&
                    p[i].CType == LM_COMPONENT_FLOAT32 && p[i].ResultType == LM_COMPONENT_FLOAT32 &&
                    p[i].scope == LM_SCOPE_SUBGROUP && !p[i].saturatingAccumulation;
    free(p);
    return found;
}

static void adopt_facts(lm_context *ctx, const device_facts *f) {
    ctx->props = f->props;
    vkGetPhysicalDeviceMemoryProperties(ctx->phys, &ctx->memprops);
    ctx->queue_family = f->queue_family;
    ctx->subgroup_size = f->subgroup_size;
    ctx->min_subgroup = f->min_subgroup;
    ctx->max_subgroup = f->max_subgroup;
    ctx->full_subgroups = f->full_subgroups;
    ctx->subgroup_vote = f->subgroup_vote;
    ctx->subgroup_shuffle = f->subgroup_shuffle;
    ctx->int64_atomics = f->int64_atomics;
    ctx->narrow_storage = f->narrow_storage;
    ctx->sm_count = f->sm_count;
    ctx->coop_nv = f->coop_matrix && coop_f16_listed(ctx->instance, ctx->phys);
    /* KHR where the device lists the product and this build has the KHR shaders (glslang
     * 13+ at build time); otherwise the NV ones. */
    ctx->coop_khr = f->coop_khr && coop_khr_f16_listed(ctx->instance, ctx->phys) &&
                    lm_shader_built(LM_SH_MATMUL_COOP_KHR);
    ctx->coop_khr_conversions = ctx->coop_khr && f->coop_conversions && lm_shader_built(LM_SH_ATTENTION_COOP_REGS_KHR);
    ctx->coop_matrix = ctx->coop_nv || ctx->coop_khr;
    ctx->timestamp_bits = f->timestamp_bits;
    ctx->max_allocation = f->max_allocation ? f->max_allocation : ((VkDeviceSize)1 << 30);
}

static VkResult finish_context(lm_context *ctx, char *err, size_t errlen) {
    VkResult r = lm_memory_init(ctx);
    /* A physical-device query: the extension need not be enabled on the device. */
    ctx->mem.has_budget = has_device_extension(ctx->phys, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (r == VK_SUCCESS) r = lm_pipelines_init(ctx);
    if (r == VK_SUCCESS) r = lm_stream_init(ctx);
    if (r != VK_SUCCESS) snprintf(err, errlen, "device setup failed: %s", lm_vk_result_name(r));
    ctx->gc_threshold = (VkDeviceSize)64 << 20;
    return r;
}

static lm_context *context_new(char *err, size_t errlen) {
    lm_context *ctx = context_alloc();
    if (!ctx) { snprintf(err, errlen, "out of host memory"); return NULL; }
    ctx->owns_device = 1;
    device_facts f;
    memset(&f, 0, sizeof f);
    if (create_instance(ctx, err, errlen) != VK_SUCCESS ||
        choose_device(ctx, &f, err, errlen) != VK_SUCCESS) { context_destroy(ctx); return NULL; }
    adopt_facts(ctx, &f);
    if (create_device(ctx, &f, err, errlen) != VK_SUCCESS ||
        finish_context(ctx, err, errlen) != VK_SUCCESS) { context_destroy(ctx); return NULL; }
    return ctx;
}

/* The handle is unreachable only once lua_close runs (the registry holds it until
 * then): the context goes now, whatever still refers to it. The handle stays in the
 * registry with no context, so later calls raise instead of making a new one. */
static int box_gc(lua_State *L) {
    lm_context_box *b = lua_touserdata(L, 1);
    if (b && b->ctx) {
        lm_context *ctx = b->ctx;
        b->ctx = NULL;
        context_teardown(ctx);
    }
    return 0;
}

/* An empty registry handle on the stack, made before the context so that a memory
 * error raised here cannot leak one. Not inside a finalizer: during lua_close Lua
 * registers no finalizer for new objects, so a context made there would never be
 * torn down (lua_gc answers -1 while a finalizer runs). */
static lm_context_box *new_box(lua_State *L, const char *fname) {
    if (lua_gc(L, LUA_GCCOUNT, 0) < 0)
        luaL_error(L, "%s: the device context cannot be created inside a finalizer (__gc) "
                      "(use lumus before, so that lua_close can free it)", fname);
    lm_context_box *b = lua_newuserdatauv(L, sizeof *b, LM_SCRATCH_SLOTS);
    b->ctx = NULL;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, box_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    return b;
}

lm_context *lm_context_peek(lua_State *L) {
    lm_context *ctx = NULL;
    if (lua_getfield(L, LUA_REGISTRYINDEX, LM_CONTEXT_KEY) == LUA_TUSERDATA)
        ctx = ((lm_context_box *)lua_touserdata(L, -1))->ctx;
    lua_pop(L, 1);
    return ctx;
}

lm_context *lm_context_get(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, LM_CONTEXT_KEY) == LUA_TUSERDATA) {
        lm_context_box *b = lua_touserdata(L, -1);
        lua_pop(L, 1);
        if (b->ctx) return b->ctx;
        luaL_error(L, "lumus: the device context has been closed");
    }
    lua_pop(L, 1);
    char err[512] = "";
    lm_context_box *b = new_box(L, "lumus");
    b->ctx = context_new(err, sizeof err);
    if (!b->ctx) { lua_pop(L, 1); luaL_error(L, "lumus: %s", err); }
    lua_setfield(L, LUA_REGISTRYINDEX, LM_CONTEXT_KEY);
    return b->ctx;
}

/* Where `pd` is in the instance's list, for lumus.devices()' "selected" (0 if absent). */
static uint32_t index_of(VkInstance instance, VkPhysicalDevice pd) {
    uint32_t n = 0, found = 0;
    if (vkEnumeratePhysicalDevices(instance, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    VkPhysicalDevice *pds = calloc(n, sizeof *pds);
    if (pds && vkEnumeratePhysicalDevices(instance, &n, pds) >= VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) if (pds[i] == pd) found = i;
    free(pds);
    return found;
}

/* A context on the host's handles. Nothing it does not create is destroyed with it. */
static lm_context *context_attach(const lumus_vulkan_device *dev, char *err, size_t errlen) {
    if (!dev || !dev->instance || !dev->physical_device || !dev->device || !dev->queue) {
        snprintf(err, errlen, "instance, physical_device, device and queue must all be given");
        return NULL;
    }
    if (!dev->lock_queue != !dev->unlock_queue) {
        snprintf(err, errlen, "give both lock_queue and unlock_queue, or neither");
        return NULL;
    }
    lm_context *ctx = context_alloc();
    if (!ctx) { snprintf(err, errlen, "out of host memory"); return NULL; }
    ctx->owns_device = 0;
    ctx->instance = dev->instance;
    ctx->phys = dev->physical_device;
    ctx->device = dev->device;
    ctx->queue = dev->queue;
    device_facts f;
    read_facts(ctx->phys, &f);
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->phys, &nq, NULL);
    VkQueueFamilyProperties *q = calloc(nq ? nq : 1, sizeof *q);
    if (!q) { snprintf(err, errlen, "out of host memory"); context_destroy(ctx); return NULL; }
    vkGetPhysicalDeviceQueueFamilyProperties(ctx->phys, &nq, q);
    int compute = dev->queue_family < nq && (q[dev->queue_family].queueFlags & VK_QUEUE_COMPUTE_BIT);
    f.queue_family = dev->queue_family;
    f.timestamp_bits = compute ? q[dev->queue_family].timestampValidBits : 0;
    f.has_queue = compute;
    free(q);
    const char *why = compute ? unusable_reason(&f) : NULL;
    if (!compute || why) {
        if (!compute) snprintf(err, errlen, "queue family %u of \"%s\" has no compute support", dev->queue_family, f.props.deviceName);
        else snprintf(err, errlen, "the device \"%s\" cannot serve lumus: %s", f.props.deviceName, why);
        context_destroy(ctx);
        return NULL;
    }
    /* Vulkan 1.3 features only where the host says it enabled them. */
    f.size_control = f.size_control && (dev->features & LUMUS_VK_SUBGROUP_SIZE_CONTROL);
    f.full_subgroups = f.full_subgroups && (dev->features & LUMUS_VK_COMPUTE_FULL_SUBGROUPS);
    f.int64_atomics = f.int64_atomics && (dev->features & LUMUS_VK_BUFFER_INT64_ATOMICS);
    f.narrow_storage = f.narrow_storage && (dev->features & LUMUS_VK_NARROW_STORAGE);
    f.sm_count = 0;   /* the host's device has no VK_NV_shader_sm_builtins of lumus's asking */
    f.coop_matrix = 0;   /* nor VK_NV_cooperative_matrix */
    f.coop_khr = 0;
    f.coop_conversions = 0;
    if (dev->lock_queue) {
        ctx->lock_queue = dev->lock_queue;
        ctx->unlock_queue = dev->unlock_queue;
        ctx->queue_user = dev->queue_user;
    } else {
        pthread_mutex_t *m = lm_queue_mutex_acquire(ctx->queue);
        if (!m) { snprintf(err, errlen, "out of host memory"); context_destroy(ctx); return NULL; }
        ctx->queue_mutex = m;
        ctx->shared_queue = 1;
    }
    ctx->device_index = index_of(ctx->instance, ctx->phys);
    adopt_facts(ctx, &f);
    if (finish_context(ctx, err, errlen) != VK_SUCCESS) { context_destroy(ctx); return NULL; }
    return ctx;
}

lm_context *lm_context_attach(lua_State *L, const struct lumus_vulkan_device *dev) {
    int had = lua_getfield(L, LUA_REGISTRYINDEX, LM_CONTEXT_KEY) != LUA_TNIL;
    lua_pop(L, 1);
    if (had) luaL_error(L, "lumus_attach_vulkan: this lua_State already has a device context "
                           "(attach before the first tensor or device call)");
    char err[512] = "";
    lm_context_box *b = new_box(L, "lumus_attach_vulkan");
    b->ctx = context_attach(dev, err, sizeof err);
    if (!b->ctx) { lua_pop(L, 1); luaL_error(L, "lumus_attach_vulkan: %s", err); }
    lua_setfield(L, LUA_REGISTRYINDEX, LM_CONTEXT_KEY);
    return b->ctx;
}

void lm_context_set_scratch(lua_State *L, lm_context *ctx, int slot) {
    lm_storage *s = lua_touserdata(L, -1);
    if (lua_getfield(L, LUA_REGISTRYINDEX, LM_CONTEXT_KEY) != LUA_TUSERDATA ||
        ((lm_context_box *)lua_touserdata(L, -1))->ctx != ctx) {
        lm_storage_unref(s);   /* unanchored: it must leave the context's list */
        luaL_error(L, "lumus: the device context has been closed");
    }
    lua_insert(L, -2);
    lua_setiuservalue(L, -2, slot + 1);
    lua_pop(L, 1);
    lm_context_release_scratch(ctx, slot);
    ctx->scratch[slot] = s;
}

int lm_devices(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    uint32_t n = 0;
    LM_VK(L, vkEnumeratePhysicalDevices(ctx->instance, &n, NULL));
    VkPhysicalDevice *pds = lua_newuserdatauv(L, (n ? n : 1) * sizeof *pds, 0);
    VkResult r = vkEnumeratePhysicalDevices(ctx->instance, &n, pds);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) lm_vk_error(L, "vkEnumeratePhysicalDevices", r);
    lua_createtable(L, (int)n, 0);
    for (uint32_t i = 0; i < n; i++) {
        lm_push_device_info(L, pds[i], i);
        lua_pushboolean(L, i == ctx->device_index);
        lua_setfield(L, -2, "selected");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

int lm_device(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    lm_push_device_info(L, ctx->phys, ctx->device_index);
    lua_pushboolean(L, ctx->mem.direct);
    lua_setfield(L, -2, "host_visible");
    lua_pushboolean(L, ctx->validation);
    lua_setfield(L, -2, "validation");
    lua_pushboolean(L, !ctx->owns_device);
    lua_setfield(L, -2, "attached");
    lua_pushboolean(L, ctx->int64_atomics);
    lua_setfield(L, -2, "int64_atomics");
    lua_pushboolean(L, ctx->narrow_storage);
    lua_setfield(L, -2, "narrow_storage");
    lua_pushinteger(L, (lua_Integer)ctx->sm_count);
    lua_setfield(L, -2, "sm_count");
    lua_pushboolean(L, ctx->coop_matrix);
    lua_setfield(L, -2, "cooperative_matrix");
    lua_pushboolean(L, ctx->coop_khr);
    lua_setfield(L, -2, "cooperative_matrix_khr");
    return 1;
}
