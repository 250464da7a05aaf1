/* The host's side of the embedding tests: a Vulkan instance, device and queue of the
 * host's own (made as a game engine would, with the features lumus.h asks for), host
 * buffers, and a float64 LayerNorm to check lumus against from C. */
#ifndef LUMUS_TESTS_VK_HOST_H
#define LUMUS_TESTS_VK_HOST_H

#include <stdint.h>
#include <vulkan/vulkan.h>
#include "lumus.h"

typedef struct vk_host {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkDevice device;
    uint32_t family;
    VkQueue queue;
    uint32_t features;          /* LUMUS_VK_* enabled on the device */
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    VkPhysicalDeviceMemoryProperties memprops;
} vk_host;

typedef struct vk_host_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize size;
    float *mapped;              /* host-visible, coherent memory, mapped */
} vk_host_buffer;

/* Exits with status 1 after printing "FAIL: ..." (tests stop at the first failure). */
void vk_fail(const char *fmt, ...);
#define VKH(call) do { VkResult vkh_r_ = (call); \
    if (vkh_r_ != VK_SUCCESS) vk_fail("%s returned %d (%s:%d)", #call, (int)vkh_r_, __FILE__, __LINE__); } while (0)

/* Instance, device and queue; the validation layer with a message counter when
 * LUMUS_VALIDATION=1 (and the layer is installed). Exits on failure. */
void vk_host_create(vk_host *h);
/* Messages of warning or error severity seen so far, from any thread. */
unsigned long vk_host_validation_messages(void);
int vk_host_validating(const vk_host *h);
void vk_host_destroy(vk_host *h);

/* The handles to attach, with no queue lock. */
lumus_vulkan_device vk_host_device(const vk_host *h);

/* A buffer with storage, device-address and transfer usage in host-visible memory. */
void vk_host_buffer_create(vk_host *h, VkDeviceSize size, vk_host_buffer *b);
void vk_host_buffer_destroy(vk_host *h, vk_host_buffer *b);

/* SplitMix64, and normal deviates from it (Box-Muller). */
typedef struct vk_rng { uint64_t state; } vk_rng;
double vk_rng_normal(vk_rng *r);

/* y = w * (x - mean) * invstd + b per row of d, in float64; w or b may be NULL. */
void ref_layer_norm(const float *x, const float *w, const float *b, int rows, int d, double eps,
                    double *y, double *mean, double *invstd);

/* Largest |got - want| / max(1, |want|). */
double max_rel_error(const float *got, const double *want, long n);

#endif
