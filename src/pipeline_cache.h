/* The pipeline cache on disk: one VkPipelineCache per context, loaded when the context
 * is made and saved when it goes, so that pipelines are built once per machine rather
 * than once per process; plus the list of pipelines earlier processes used, which
 * lumus.warm_up builds ahead of the first call.
 *
 * Where (docs/pipeline_cache.md): LUMUS_PIPELINE_CACHE=<file> if set ("off" or "0":
 * no cache at all), else $XDG_CACHE_HOME/lumus/, else ~/.cache/lumus/, named
 * pipelines-<vendor>-<device>-<driverVersion>-<pipelineCacheUUID>.bin.
 *
 * The file: a 40-byte lumus header ("LUMUSPC1", a hash of the module's SPIR-V, the
 * count of listed pipelines, the size of the driver's data, and an FNV-1a checksum of
 * all that follows), the list, then vkGetPipelineCacheData's bytes. A file whose size,
 * checksum or Vulkan header (version, vendorID, deviceID, pipelineCacheUUID) does not
 * match is ignored, never handed to the driver; the list is ignored when the SPIR-V
 * hash differs (another build of lumus). Saving writes a temporary beside the file and
 * renames it over, so readers never see a half-written file. */
#ifndef LUMUS_PIPELINE_CACHE_H
#define LUMUS_PIPELINE_CACHE_H

#include <stdint.h>
#include <stddef.h>
#include <vulkan/vulkan.h>

typedef struct lm_context lm_context;

#define LM_PCACHE_NAME 48
#define LM_PCACHE_OP 32
#define LM_PCACHE_SPEC 8

/* A pipeline as the list keeps it: its shader by name (ids change between builds). */
typedef struct lm_pipeline_key {
    char shader[LM_PCACHE_NAME];
    char op[LM_PCACHE_OP];
    uint32_t spec[LM_PCACHE_SPEC];
    uint32_t full_subgroups;
} lm_pipeline_key;

enum lm_pcache_state { LM_PCACHE_OFF, LM_PCACHE_NEW, LM_PCACHE_LOADED, LM_PCACHE_IGNORED };

typedef struct lm_pipeline_cache {
    VkPipelineCache cache;      /* VK_NULL_HANDLE when off */
    char *path;                 /* malloc'd; NULL when off */
    int explicit_path;          /* from LUMUS_PIPELINE_CACHE: failures to save are reported */
    int state;                  /* lm_pcache_state */
    char reason[160];           /* why off or ignored */
    size_t loaded_bytes;        /* the driver data handed to vkCreatePipelineCache */
    lm_pipeline_key *keys;      /* listed: loaded, then each pipeline built here */
    size_t nkeys, cap, nloaded;
    int dirty;                  /* something to save */
    int feedback;               /* creation feedback is chained (Vulkan 1.3 device) */
    uint64_t built, hits;       /* pipelines created here, and of them cache hits (feedback) */
    size_t saved_bytes;         /* the last save's file size */
} lm_pipeline_cache;

/* Opens the cache for a context whose device and properties are set; never fails
 * (a cache that cannot be read or made is off, with the reason). */
void lm_pipeline_cache_open(lm_context *ctx);
/* Saves if anything is new (or always when force), then destroys the cache. */
void lm_pipeline_cache_close(lm_context *ctx);
/* Saves now; returns the bytes written, or 0 with the reason in *why (static text or
 * the cache's reason buffer). */
size_t lm_pipeline_cache_save(lm_context *ctx, const char **why);
/* Records that a pipeline was built (listing it if new); hit from creation feedback. */
void lm_pipeline_cache_note(lm_context *ctx, const lm_pipeline_key *key, int hit);

#endif
