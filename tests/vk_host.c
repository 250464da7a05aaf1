/* The host's Vulkan device, buffers and a float64 reference (see vk_host.h). */
#include "vk_host.h"
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_ulong validation_messages;

void vk_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
        VkDebugUtilsMessageTypeFlagsEXT type, const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)type; (void)user;
    if (sev >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
        atomic_fetch_add(&validation_messages, 1);
        printf("host validation: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

unsigned long vk_host_validation_messages(void) { return atomic_load(&validation_messages); }
int vk_host_validating(const vk_host *h) { return h->messenger != VK_NULL_HANDLE; }

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

static void create_instance(vk_host *h) {
    uint32_t loader = VK_API_VERSION_1_0;
    VKH(vkEnumerateInstanceVersion(&loader));
    if (loader < VK_API_VERSION_1_2) vk_fail("the Vulkan loader supports only %u.%u", VK_API_VERSION_MAJOR(loader), VK_API_VERSION_MINOR(loader));
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "lumus host test",
        .apiVersion = loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2,
    };
    const char *v = getenv("LUMUS_VALIDATION");
    int validate = v && *v && strcmp(v, "0") != 0 && has_layer("VK_LAYER_KHRONOS_validation");
    const char *layers[] = { "VK_LAYER_KHRONOS_validation" };
    const char *exts[] = { VK_EXT_DEBUG_UTILS_EXTENSION_NAME };
    VkInstanceCreateInfo ii = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app,
        .enabledLayerCount = validate ? 1 : 0, .ppEnabledLayerNames = layers,
        .enabledExtensionCount = validate ? 1 : 0, .ppEnabledExtensionNames = exts,
    };
    VKH(vkCreateInstance(&ii, NULL, &h->instance));
    if (validate) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(h->instance, "vkCreateDebugUtilsMessengerEXT");
        VkDebugUtilsMessengerCreateInfoEXT mi = {
            .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
            .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
            .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
            .pfnUserCallback = on_message,
        };
        if (!create) vk_fail("vkCreateDebugUtilsMessengerEXT is missing");
        VKH(create(h->instance, &mi, NULL, &h->messenger));
    }
}

/* The first device (or LUMUS_DEVICE=<index>) with Vulkan 1.2 and a compute queue. */
static void choose_device(vk_host *h) {
    uint32_t n = 0;
    VKH(vkEnumeratePhysicalDevices(h->instance, &n, NULL));
    if (n == 0) vk_fail("no Vulkan device");
    VkPhysicalDevice *pds = calloc(n, sizeof *pds);
    if (!pds) vk_fail("out of memory");
    VKH(vkEnumeratePhysicalDevices(h->instance, &n, pds));
    const char *want = getenv("LUMUS_DEVICE");
    char *end = NULL;
    long index = want && *want ? strtol(want, &end, 10) : -1;
    if (end && *end) index = -1;
    for (uint32_t i = 0; i < n && !h->phys; i++) {
        if (index >= 0 && (long)i != index) continue;
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        if (p.apiVersion < VK_API_VERSION_1_2) continue;
        uint32_t nq = 0;
        vkGetPhysicalDeviceQueueFamilyProperties(pds[i], &nq, NULL);
        VkQueueFamilyProperties q[16];
        if (nq > 16) nq = 16;
        vkGetPhysicalDeviceQueueFamilyProperties(pds[i], &nq, q);
        for (uint32_t f = 0; f < nq; f++) {
            if (q[f].queueFlags & VK_QUEUE_COMPUTE_BIT) {
                h->phys = pds[i];
                h->family = f;
                snprintf(h->name, sizeof h->name, "%s", p.deviceName);
                break;
            }
        }
    }
    free(pds);
    if (!h->phys) vk_fail("no Vulkan 1.2 device with a compute queue");
}

/* The device, as lumus.h asks: shaderInt64, bufferDeviceAddress, timelineSemaphore, and
 * the optional features (1.3 subgroup control, 64-bit buffer atomics, 8/16-bit storage) where it has them. */
static void create_device(vk_host *h) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(h->phys, &p);
    int v13 = p.apiVersion >= VK_API_VERSION_1_3;
    VkPhysicalDeviceVulkan13Features has13 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES };
    VkPhysicalDeviceVulkan12Features has12 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                               .pNext = v13 ? &has13 : NULL };
    VkPhysicalDeviceVulkan11Features has11 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                               .pNext = &has12 };
    VkPhysicalDeviceFeatures2 has = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &has11 };
    vkGetPhysicalDeviceFeatures2(h->phys, &has);
    if (!has.features.shaderInt64 || !has12.bufferDeviceAddress || !has12.timelineSemaphore)
        vk_fail("%s lacks shaderInt64, bufferDeviceAddress or timelineSemaphore", h->name);
    VkPhysicalDeviceVulkan13Features f13 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
        .subgroupSizeControl = has13.subgroupSizeControl, .computeFullSubgroups = has13.computeFullSubgroups,
    };
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = v13 ? &f13 : NULL,
        .bufferDeviceAddress = VK_TRUE, .timelineSemaphore = VK_TRUE,
        .shaderBufferInt64Atomics = has12.shaderBufferInt64Atomics,
        .storageBuffer8BitAccess = has12.storageBuffer8BitAccess,
    };
    VkPhysicalDeviceVulkan11Features f11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12,
        .storageBuffer16BitAccess = has11.storageBuffer16BitAccess,
    };
    VkPhysicalDeviceFeatures2 feat = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11,
        .features = { .shaderInt64 = VK_TRUE },
    };
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = h->family,
        .queueCount = 1, .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo di = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &feat,
        .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi,
    };
    VKH(vkCreateDevice(h->phys, &di, NULL, &h->device));
    vkGetDeviceQueue(h->device, h->family, 0, &h->queue);
    h->features = (f13.subgroupSizeControl && v13 ? LUMUS_VK_SUBGROUP_SIZE_CONTROL : 0) |
                  (f13.computeFullSubgroups && v13 ? LUMUS_VK_COMPUTE_FULL_SUBGROUPS : 0) |
                  (f12.shaderBufferInt64Atomics ? LUMUS_VK_BUFFER_INT64_ATOMICS : 0) |
                  (f11.storageBuffer16BitAccess && f12.storageBuffer8BitAccess ? LUMUS_VK_NARROW_STORAGE : 0);
    vkGetPhysicalDeviceMemoryProperties(h->phys, &h->memprops);
}

void vk_host_create(vk_host *h) {
    memset(h, 0, sizeof *h);
    create_instance(h);
    choose_device(h);
    create_device(h);
}

void vk_host_destroy(vk_host *h) {
    vkDestroyDevice(h->device, NULL);
    if (h->messenger) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy =
            (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(h->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy) destroy(h->instance, h->messenger, NULL);
    }
    vkDestroyInstance(h->instance, NULL);
    memset(h, 0, sizeof *h);
}

lumus_vulkan_device vk_host_device(const vk_host *h) {
    lumus_vulkan_device d = {
        .instance = h->instance, .physical_device = h->phys, .device = h->device,
        .queue_family = h->family, .queue = h->queue, .features = h->features,
    };
    return d;
}

void vk_host_buffer_create(vk_host *h, VkDeviceSize size, vk_host_buffer *b) {
    memset(b, 0, sizeof *b);
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VKH(vkCreateBuffer(h->device, &bi, NULL, &b->buffer));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(h->device, b->buffer, &req);
    const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < h->memprops.memoryTypeCount && type == UINT32_MAX; i++)
        if ((req.memoryTypeBits & (1u << i)) && (h->memprops.memoryTypes[i].propertyFlags & want) == want) type = i;
    if (type == UINT32_MAX) vk_fail("no host-visible coherent memory for a storage buffer");
    VkMemoryAllocateFlagsInfo fi = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
    };
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fi,
        .allocationSize = req.size, .memoryTypeIndex = type,
    };
    VKH(vkAllocateMemory(h->device, &ai, NULL, &b->memory));
    VKH(vkBindBufferMemory(h->device, b->buffer, b->memory, 0));
    void *p = NULL;
    VKH(vkMapMemory(h->device, b->memory, 0, VK_WHOLE_SIZE, 0, &p));
    b->mapped = p;
    b->size = size;
}

void vk_host_buffer_destroy(vk_host *h, vk_host_buffer *b) {
    vkDestroyBuffer(h->device, b->buffer, NULL);
    vkFreeMemory(h->device, b->memory, NULL);
    memset(b, 0, sizeof *b);
}

static uint64_t splitmix64(vk_rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double vk_rng_normal(vk_rng *r) {
    double u1 = ((double)(splitmix64(r) >> 11) + 1.0) / 9007199254740993.0;   /* (0, 1] */
    double u2 = (double)(splitmix64(r) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void ref_layer_norm(const float *x, const float *w, const float *b, int rows, int d, double eps,
                    double *y, double *mean, double *invstd) {
    for (int r = 0; r < rows; r++) {
        const float *row = x + (long)r * d;
        double m = 0, v = 0;
        for (int i = 0; i < d; i++) m += row[i];
        m /= d;
        for (int i = 0; i < d; i++) v += (row[i] - m) * (row[i] - m);
        v /= d;
        double is = 1.0 / sqrt(v + eps);
        for (int i = 0; i < d; i++)
            y[(long)r * d + i] = (row[i] - m) * is * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
        if (mean) mean[r] = m;
        if (invstd) invstd[r] = is;
    }
}

double max_rel_error(const float *got, const double *want, long n) {
    double worst = 0;
    for (long i = 0; i < n; i++) {
        double scale = fabs(want[i]) > 1 ? fabs(want[i]) : 1;
        double e = fabs((double)got[i] - want[i]) / scale;
        if (!(e <= worst)) worst = e;     /* NaN counts as worst */
    }
    return worst;
}
