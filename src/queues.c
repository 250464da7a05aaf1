/* Mutexes shared per VkQueue (see queues.h): a small list, guarded by one lock. */
#include "queues.h"
#include <stdlib.h>

typedef struct queue_entry {
    VkQueue queue;
    pthread_mutex_t mutex;
    int refs;
    struct queue_entry *next;
} queue_entry;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static queue_entry *entries;

pthread_mutex_t *lm_queue_mutex_acquire(VkQueue queue) {
    pthread_mutex_lock(&registry_lock);
    queue_entry *e = entries;
    while (e && e->queue != queue) e = e->next;
    if (!e && (e = calloc(1, sizeof *e)) != NULL) {
        e->queue = queue;
        pthread_mutex_init(&e->mutex, NULL);
        e->next = entries;
        entries = e;
    }
    if (e) e->refs++;
    pthread_mutex_unlock(&registry_lock);
    return e ? &e->mutex : NULL;
}

void lm_queue_mutex_release(VkQueue queue) {
    pthread_mutex_lock(&registry_lock);
    for (queue_entry **p = &entries; *p; p = &(*p)->next) {
        queue_entry *e = *p;
        if (e->queue != queue) continue;
        if (--e->refs == 0) {
            *p = e->next;
            pthread_mutex_destroy(&e->mutex);
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&registry_lock);
}
