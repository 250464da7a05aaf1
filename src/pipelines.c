/* Compute pipelines, specialized and cached (see pipelines.h). */
#include "pipelines.h"
#include "context.h"
#include "luautil.h"
#include "vkcheck.h"
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

VkResult lm_pipelines_init(lm_context *ctx) {
    lm_pipelines *pp = &ctx->pipes;
    memset(pp, 0, sizeof *pp);
    VkPushConstantRange range = { .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = LM_PUSH_BYTES };
    VkPipelineLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .pushConstantRangeCount = 1, .pPushConstantRanges = &range,
    };
    VkResult r = vkCreatePipelineLayout(ctx->device, &li, NULL, &pp->layout);
    if (r == VK_SUCCESS) lm_pipeline_cache_open(ctx);
    return r;
}

void lm_pipelines_destroy(lm_context *ctx) {
    lm_pipelines *pp = &ctx->pipes;
    lm_pipeline_cache_close(ctx);
    for (size_t i = 0; i < pp->count; i++) vkDestroyPipeline(ctx->device, pp->entries[i].pipeline, NULL);
    free(pp->entries);
    pp->entries = NULL;
    pp->count = pp->cap = 0;
    for (int i = 0; i < LM_SH_COUNT; i++)
        if (pp->modules[i]) vkDestroyShaderModule(ctx->device, pp->modules[i], NULL);
    if (pp->layout) vkDestroyPipelineLayout(ctx->device, pp->layout, NULL);
    pp->layout = VK_NULL_HANDLE;
}

/* A compute pipeline's one executable, for the VK_KHR_pipeline_executable_properties queries. */
static VkPipelineExecutableInfoKHR executable_of(VkPipeline p) {
    return (VkPipelineExecutableInfoKHR){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p, .executableIndex = 0,
    };
}

/* LUMUS_PIPELINE_STATS: the driver's statistics of a new pipeline (NVIDIA reports its
 * register count, which bounds how many workgroups share a multiprocessor), on stderr. */
static void print_statistics(lm_context *ctx, VkPipeline p, lm_shader_id id, const uint32_t spec[LM_MAX_SPEC]) {
    PFN_vkGetPipelineExecutableStatisticsKHR get = (PFN_vkGetPipelineExecutableStatisticsKHR)
        vkGetDeviceProcAddr(ctx->device, "vkGetPipelineExecutableStatisticsKHR");
    VkPipelineExecutableInfoKHR info = executable_of(p);
    VkPipelineExecutableStatisticKHR st[16];
    uint32_t n = 16;
    for (uint32_t i = 0; i < n; i++) st[i] = (VkPipelineExecutableStatisticKHR){ .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR };
    VkResult r = get ? get(ctx->device, &info, &n, st) : VK_ERROR_EXTENSION_NOT_PRESENT;
    fprintf(stderr, "lumus: pipeline %s spec", lm_shader_name(id));
    for (int i = 0; i < LM_MAX_SPEC; i++) fprintf(stderr, "%c%u", i ? ',' : ' ', spec[i]);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) { fprintf(stderr, ": statistics failed (%s)\n", lm_vk_result_name(r)); return; }
    for (uint32_t i = 0; i < n; i++) {
        fprintf(stderr, "%s %s=", i ? ";" : ":", st[i].name);
        switch (st[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: fprintf(stderr, "%u", st[i].value.b32); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: fprintf(stderr, "%lld", (long long)st[i].value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: fprintf(stderr, "%llu", (unsigned long long)st[i].value.u64); break;
        default: fprintf(stderr, "%g", st[i].value.f64); break;
        }
    }
    fputc('\n', stderr);
}

/* LUMUS_PIPELINE_IR=dir (with LUMUS_PIPELINE_STATS): each new pipeline's internal
 * representations, as the driver gives them, into dir/<shader>-<spec>-<k>.txt (.bin when
 * not text), one line per file on stderr: a developer's view of what a kernel compiled to. */
static const char *ir_dir(void) {
    const char *d = getenv("LUMUS_PIPELINE_IR");
    return d && *d ? d : NULL;
}

static void dump_ir(lm_context *ctx, VkPipeline p, lm_shader_id id, const uint32_t spec[LM_MAX_SPEC]) {
    PFN_vkGetPipelineExecutableInternalRepresentationsKHR get = (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)
        vkGetDeviceProcAddr(ctx->device, "vkGetPipelineExecutableInternalRepresentationsKHR");
    VkPipelineExecutableInfoKHR info = executable_of(p);
    VkPipelineExecutableInternalRepresentationKHR ir[8];
    uint32_t n = 8;
    for (uint32_t i = 0; i < n; i++) ir[i] = (VkPipelineExecutableInternalRepresentationKHR){ .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR };
    VkResult r = get ? get(ctx->device, &info, &n, ir) : VK_ERROR_EXTENSION_NOT_PRESENT;
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) { fprintf(stderr, "lumus: pipeline %s: internal representations failed (%s)\n", lm_shader_name(id), lm_vk_result_name(r)); return; }
    if (n == 0) fprintf(stderr, "lumus: pipeline %s: the driver gives no internal representation\n", lm_shader_name(id));
    for (uint32_t i = 0; i < n; i++) {
        ir[i].pData = malloc(ir[i].dataSize ? ir[i].dataSize : 1);
        if (!ir[i].pData) { n = i; break; }
    }
    r = get(ctx->device, &info, &n, ir);
    for (uint32_t i = 0; i < n; i++) {
        char path[1024];
        int len = snprintf(path, sizeof path, "%s/%s-", ir_dir(), lm_shader_name(id));
        for (int k = 0; k < LM_MAX_SPEC && len > 0 && len < (int)sizeof path; k++)
            len += snprintf(path + len, sizeof path - (size_t)len, "%s%u", k ? "_" : "", spec[k]);
        if (len > 0 && len < (int)sizeof path)
            snprintf(path + len, sizeof path - (size_t)len, "-%u.%s", i, ir[i].isText ? "txt" : "bin");
        FILE *f = r == VK_SUCCESS || r == VK_INCOMPLETE ? fopen(path, "wb") : NULL;
        const char *nul = ir[i].isText ? memchr(ir[i].pData, 0, ir[i].dataSize) : NULL;
        size_t bytes = nul ? (size_t)(nul - (const char *)ir[i].pData) : ir[i].dataSize;
        if (f) { fwrite(ir[i].pData, 1, bytes, f); fclose(f); }
        fprintf(stderr, "lumus: pipeline %s: %s (%s), %zu bytes -> %s\n", lm_shader_name(id), ir[i].name,
                ir[i].description, bytes, f ? path : "not written");
        free(ir[i].pData);
    }
}

_Static_assert(LM_PCACHE_SPEC == LM_MAX_SPEC, "the cache's list keeps every specialization constant");

static VkResult module_for(lm_context *ctx, lm_shader_id id, VkShaderModule *out) {
    lm_pipelines *pp = &ctx->pipes;
    if (!pp->modules[id]) {
        size_t bytes;
        const uint32_t *code = lm_shader_code(id, &bytes);
        VkShaderModuleCreateInfo mi = {
            .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = bytes, .pCode = code,
        };
        VkResult r = vkCreateShaderModule(ctx->device, &mi, NULL, &pp->modules[id]);
        if (r != VK_SUCCESS) { pp->modules[id] = VK_NULL_HANDLE; return r; }
    }
    *out = pp->modules[id];
    return VK_SUCCESS;
}

static VkPipeline find(lm_pipelines *pp, lm_shader_id id, const uint32_t spec[LM_MAX_SPEC]) {
    for (size_t i = 0; i < pp->count; i++) {
        lm_pipeline_entry *e = &pp->entries[i];
        if (e->shader == id && memcmp(e->spec, spec, sizeof e->spec) == 0) return e->pipeline;
    }
    return VK_NULL_HANDLE;
}

/* Builds one pipeline (through the disk cache) and tables it; never raises except for
 * host memory. */
static VkResult build(lua_State *L, lm_context *ctx, const char *op, lm_shader_id id,
                      const uint32_t spec[LM_MAX_SPEC], int full_subgroups, VkPipeline *out) {
    lm_pipelines *pp = &ctx->pipes;
    if (pp->count == pp->cap) {
        size_t cap = pp->cap ? pp->cap * 2 : 16;
        lm_pipeline_entry *n = realloc(pp->entries, cap * sizeof *n);
        if (!n) luaL_error(L, "lumus: out of host memory for a pipeline");
        pp->entries = n;
        pp->cap = cap;
    }
    VkShaderModule module;
    VkResult r = module_for(ctx, id, &module);
    if (r != VK_SUCCESS) return r;
    VkSpecializationMapEntry map[LM_MAX_SPEC];
    for (uint32_t i = 0; i < LM_MAX_SPEC; i++) {
        map[i].constantID = i;
        map[i].offset = i * (uint32_t)sizeof(uint32_t);
        map[i].size = sizeof(uint32_t);
    }
    VkSpecializationInfo si = {
        .mapEntryCount = LM_MAX_SPEC, .pMapEntries = map, .dataSize = sizeof(uint32_t) * LM_MAX_SPEC, .pData = spec,
    };
    VkPipelineCreationFeedback whole = { 0 }, stage = { 0 };
    VkPipelineCreationFeedbackCreateInfo fb = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pPipelineCreationFeedback = &whole, .pipelineStageCreationFeedbackCount = 1,
        .pPipelineStageCreationFeedbacks = &stage,
    };
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .pNext = pp->pcache.feedback ? &fb : NULL,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .flags = full_subgroups && ctx->full_subgroups ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = module,
            .pName = "main",
            .pSpecializationInfo = &si,
        },
        .layout = pp->layout,
        .flags = !ctx->pipeline_stats ? 0 : VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR
                 | (ir_dir() ? VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR : 0),
    };
    VkPipeline p;
    r = vkCreateComputePipelines(ctx->device, pp->pcache.cache, 1, &ci, NULL, &p);
    if (r != VK_SUCCESS) return r;
    if (ctx->pipeline_stats) print_statistics(ctx, p, id, spec);
    if (ctx->pipeline_stats && ir_dir()) dump_ir(ctx, p, id, spec);
    lm_pipeline_entry *e = &pp->entries[pp->count++];
    e->shader = id;
    memcpy(e->spec, spec, sizeof e->spec);
    e->pipeline = p;
    lm_pipeline_key key;
    memset(&key, 0, sizeof key);
    snprintf(key.shader, sizeof key.shader, "%s", lm_shader_name(id));
    snprintf(key.op, sizeof key.op, "%s", op ? op : "");
    memcpy(key.spec, spec, sizeof key.spec);
    key.full_subgroups = full_subgroups != 0;
    int hit = (whole.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
              (whole.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
    lm_pipeline_cache_note(ctx, &key, hit);
    *out = p;
    return VK_SUCCESS;
}

VkPipeline lm_pipeline_for(lua_State *L, lm_context *ctx, const char *op, lm_shader_id id,
                           const uint32_t spec[LM_MAX_SPEC], int full_subgroups) {
    VkPipeline p = find(&ctx->pipes, id, spec);
    if (p) return p;
    VkResult r = build(L, ctx, op, id, spec, full_subgroups, &p);
    if (r != VK_SUCCESS) lm_vk_error(L, "creating a compute pipeline", r);
    return p;
}

VkPipeline lm_pipeline(lua_State *L, lm_context *ctx, lm_shader_id id,
                       const uint32_t spec[LM_MAX_SPEC], int full_subgroups) {
    return lm_pipeline_for(L, ctx, NULL, id, spec, full_subgroups);
}

static int listed(lua_State *L, int arg, const char *op) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, arg);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, arg, i);
        int same = strcmp(lua_tostring(L, -1), op) == 0;
        lua_pop(L, 1);
        if (same) return 1;
    }
    return 0;
}

size_t lm_pipelines_warm_up(lua_State *L, lm_context *ctx, int ops) {
    lm_pipeline_cache *pc = &ctx->pipes.pcache;
    size_t built = 0;
    for (size_t i = 0; i < pc->nkeys; i++) {
        lm_pipeline_key k = pc->keys[i];   /* a copy: building may grow the list */
        if (ops && !listed(L, ops, k.op)) continue;
        int id = -1;
        for (int s = 0; s < LM_SH_COUNT && id < 0; s++) if (strcmp(lm_shader_name((lm_shader_id)s), k.shader) == 0) id = s;
        /* The list is this machine's own file, checked; still, a workgroup size the
         * device cannot run is never built. */
        if (id < 0 || k.spec[0] == 0 || k.spec[0] > ctx->props.limits.maxComputeWorkGroupInvocations) continue;
        if (find(&ctx->pipes, (lm_shader_id)id, k.spec)) continue;
        VkPipeline p;
        if (build(L, ctx, k.op[0] ? k.op : NULL, (lm_shader_id)id, k.spec, (int)k.full_subgroups, &p) == VK_SUCCESS) built++;
    }
    return built;
}

uint32_t lm_grid(lua_State *L, lm_context *ctx, uint64_t groups, uint32_t *height) {
    uint64_t max_x = ctx->props.limits.maxComputeWorkGroupCount[0];
    if (ctx->grid_max_x && ctx->grid_max_x < max_x) max_x = ctx->grid_max_x;
    uint64_t max_y = ctx->props.limits.maxComputeWorkGroupCount[1];
    if (groups == 0) groups = 1;
    if (groups <= max_x) { *height = 1; return (uint32_t)groups; }
    uint64_t h = (groups + max_x - 1) / max_x;
    if (h > max_y) luaL_error(L, "%s: %I workgroups exceed the device's grid", lm_fname(L), (LUAI_UACINT)groups);
    uint64_t w = (groups + h - 1) / h;   /* as square as the rows allow: less waste */
    *height = (uint32_t)h;
    return (uint32_t)w;
}

void lm_dispatch(VkCommandBuffer cb, lm_context *ctx, VkPipeline p, const void *push,
                 uint32_t push_bytes, uint32_t gx, uint32_t gy) {
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    vkCmdPushConstants(cb, ctx->pipes.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    vkCmdDispatch(cb, gx, gy, 1);
}
