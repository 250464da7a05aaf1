/* Mutexes for VkQueues that several lumus contexts share.
 *
 * Vulkan requires vkQueueSubmit on one VkQueue to be externally synchronized. When a
 * host attaches the same device and queue to several lua_States (each with its own
 * context, often on its own thread) and gives no lock of its own, their submissions
 * take the one mutex this registry keeps for that queue. */
#ifndef LUMUS_QUEUES_H
#define LUMUS_QUEUES_H

#include <pthread.h>
#include <vulkan/vulkan.h>

/* The mutex of `queue`, made on first request; NULL when out of host memory. Each
 * successful call must be matched by one lm_queue_mutex_release. */
pthread_mutex_t *lm_queue_mutex_acquire(VkQueue queue);
void lm_queue_mutex_release(VkQueue queue);

#endif
