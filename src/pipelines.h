/* Compute pipelines: the embedded SPIR-V variants, specialized and cached on first use.
 * Kernels take all their arguments as push constants (buffer device addresses and
 * sizes), so every pipeline shares one layout with no descriptor sets. */
#ifndef LUMUS_PIPELINES_H
#define LUMUS_PIPELINES_H

#include <stdint.h>
#include <stddef.h>
#include <vulkan/vulkan.h>
#include <lua.h>
#include "pipeline_cache.h"

typedef struct lm_context lm_context;

/* One id per SPIR-V variant, LM_SH_<ID>, in the order of shaders/variants.def. */
typedef enum lm_shader_id {
#define LM_SHADER(id, source, defines) LM_SH_##id,
#include "../shaders/variants.def"
#undef LM_SHADER
    LM_SH_COUNT
} lm_shader_id;

#define LM_MAX_SPEC 8   /* matmul uses ids 0..7 (workgroup, tile sizes, flags) */
#define LM_PUSH_BYTES 128

typedef struct lm_pipeline_entry {
    lm_shader_id shader;
    uint32_t spec[LM_MAX_SPEC];
    VkPipeline pipeline;
} lm_pipeline_entry;

typedef struct lm_pipelines {
    VkPipelineLayout layout;
    VkShaderModule modules[LM_SH_COUNT];
    lm_pipeline_entry *entries;
    size_t count, cap;
    lm_pipeline_cache pcache;       /* the cache on disk (pipeline_cache.h) */
} lm_pipelines;

/* The embedded SPIR-V of each shader (shaders.c). */
const uint32_t *lm_shader_code(lm_shader_id id, size_t *bytes);
const char *lm_shader_name(lm_shader_id id);
/* Whether the variant was compiled: a COOP_KHR=1 variant is a single 0 word when the
 * build had no glslang 13+ (Makefile). */
int lm_shader_built(lm_shader_id id);

VkResult lm_pipelines_init(lm_context *ctx);
void lm_pipelines_destroy(lm_context *ctx);

/* The pipeline for a shader with spec[0] = workgroup size, spec[1..] its constants
 * (unused ones zero); raises on failure. `full_subgroups` asks for whole subgroups. */
VkPipeline lm_pipeline(lua_State *L, lm_context *ctx, lm_shader_id id,
                       const uint32_t spec[LM_MAX_SPEC], int full_subgroups);
/* The same, naming the op that asked for it in the list the cache keeps for
 * lumus.warm_up (op names as lm_launch's). */
VkPipeline lm_pipeline_for(lua_State *L, lm_context *ctx, const char *op, lm_shader_id id,
                           const uint32_t spec[LM_MAX_SPEC], int full_subgroups);

/* Builds now the pipelines the cache lists (earlier processes' and this one's) that are
 * not built yet; with ops != 0, only those whose op is in the list of strings at that
 * stack index. Returns how many were built. */
size_t lm_pipelines_warm_up(lua_State *L, lm_context *ctx, int ops);

/* Splits `groups` workgroups into a grid within maxComputeWorkGroupCount; returns the
 * width, writes the height. Raises if even a 2-D grid cannot hold them. */
uint32_t lm_grid(lua_State *L, lm_context *ctx, uint64_t groups, uint32_t *height);


/* Binds, pushes constants and dispatches a gx * gy grid. */
void lm_dispatch(VkCommandBuffer cb, lm_context *ctx, VkPipeline p, const void *push,
                 uint32_t push_bytes, uint32_t gx, uint32_t gy);

#endif
