/* The pipeline cache on disk (see pipeline_cache.h). */
#define _POSIX_C_SOURCE 200809L
#include "pipeline_cache.h"
#include "context.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "LUMUSPC1"
#define HEADER_BYTES 40
/* Larger files are not read (drivers' caches for lumus's few hundred pipelines are a
 * few MiB); the list is capped likewise. */
#define MAX_FILE ((uint64_t)512 << 20)
#define MAX_KEYS 65536

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001b3ULL; }
    return h;
}
#define FNV_START 0xcbf29ce484222325ULL

static void put_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Which build of lumus: a hash of every embedded SPIR-V variant, in order. */
static uint64_t build_hash(void) {
    uint64_t h = FNV_START;
    for (int i = 0; i < LM_SH_COUNT; i++) {
        size_t bytes;
        const uint32_t *code = lm_shader_code((lm_shader_id)i, &bytes);
        const char *name = lm_shader_name((lm_shader_id)i);
        h = fnv1a(h, (const unsigned char *)name, strlen(name) + 1);
        h = fnv1a(h, (const unsigned char *)code, bytes);
    }
    return h;
}

static char *join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (!s) return NULL;
    memcpy(s, a, na);
    memcpy(s + na, b, nb + 1);
    return s;
}

/* The default file under $XDG_CACHE_HOME/lumus or ~/.cache/lumus, or NULL. */
static char *default_path(lm_context *ctx, char *why, size_t whylen) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[4096];
    if (xdg && xdg[0] == '/') snprintf(dir, sizeof dir, "%s/lumus", xdg);
    else if (home && home[0] == '/') snprintf(dir, sizeof dir, "%s/.cache/lumus", home);
    else { snprintf(why, whylen, "no $XDG_CACHE_HOME or $HOME to keep it in"); return NULL; }
    const VkPhysicalDeviceProperties *p = &ctx->props;
    char name[160], *at = name;
    at += sprintf(at, "/pipelines-%04x-%04x-%u-", p->vendorID, p->deviceID, p->driverVersion);
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) at += sprintf(at, "%02x", p->pipelineCacheUUID[i]);
    strcpy(at, ".bin");
    return join(dir, name);
}

/* mkdir -p of the directories above path (the default path's only). */
static void make_parents(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf) return;
    memcpy(buf, path, n + 1);
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        mkdir(buf, 0700);
        *s = '/';
    }
}

static int add_key(lm_pipeline_cache *pc, const lm_pipeline_key *k) {
    for (size_t i = 0; i < pc->nkeys; i++)
        if (memcmp(&pc->keys[i], k, sizeof *k) == 0) return 0;
    if (pc->nkeys >= MAX_KEYS) return 0;
    if (pc->nkeys == pc->cap) {
        size_t cap = pc->cap ? pc->cap * 2 : 64;
        lm_pipeline_key *n = realloc(pc->keys, cap * sizeof *n);
        if (!n) return 0;
        pc->keys = n;
        pc->cap = cap;
    }
    pc->keys[pc->nkeys++] = *k;
    return 1;
}

/* Reads and checks the file; on success returns the driver data (malloc'd, *n bytes)
 * and lists its pipelines; NULL with the reason otherwise. */
static unsigned char *read_file(lm_context *ctx, lm_pipeline_cache *pc, size_t *n) {
    FILE *f = fopen(pc->path, "rb");
    if (!f) {
        if (errno == ENOENT) { pc->state = LM_PCACHE_NEW; return NULL; }
        snprintf(pc->reason, sizeof pc->reason, "cannot open: %s", strerror(errno));
        pc->state = LM_PCACHE_IGNORED;
        return NULL;
    }
    unsigned char *buf = NULL;
    const char *bad = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) { bad = "not a regular file"; goto done; }
    uint64_t size = (uint64_t)st.st_size;
    if (size < HEADER_BYTES) { bad = "shorter than its header"; goto done; }
    if (size > MAX_FILE) { bad = "larger than 512 MiB"; goto done; }
    buf = malloc((size_t)size);
    if (!buf) { bad = "out of host memory"; goto done; }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) { bad = "read failed"; goto done; }
    if (memcmp(buf, MAGIC, 8) != 0) { bad = "not a lumus pipeline cache"; goto done; }
    uint64_t hash = get_u64(buf + 8);
    uint32_t count = get_u32(buf + 16);
    uint64_t vk_bytes = get_u64(buf + 24), sum = get_u64(buf + 32);
    if (count > MAX_KEYS || (uint64_t)count * sizeof(lm_pipeline_key) + vk_bytes + HEADER_BYTES != size) {
        bad = "its sizes do not add up to the file's (truncated?)";
        goto done;
    }
    if (fnv1a(FNV_START, buf + HEADER_BYTES, (size_t)(size - HEADER_BYTES)) != sum) { bad = "checksum mismatch"; goto done; }
    const unsigned char *vk = buf + HEADER_BYTES + (size_t)count * sizeof(lm_pipeline_key);
    /* The Vulkan pipeline cache header, version one: headerSize, headerVersion,
     * vendorID, deviceID, pipelineCacheUUID. */
    if (vk_bytes < 32 || get_u32(vk) < 32 || get_u32(vk) > vk_bytes) { bad = "its Vulkan header is malformed"; goto done; }
    if (get_u32(vk + 4) != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) { bad = "unknown Vulkan header version"; goto done; }
    if (get_u32(vk + 8) != ctx->props.vendorID || get_u32(vk + 12) != ctx->props.deviceID ||
        memcmp(vk + 16, ctx->props.pipelineCacheUUID, VK_UUID_SIZE) != 0) {
        bad = "made for another device or driver";
        goto done;
    }
    if (hash == build_hash()) {
        for (uint32_t i = 0; i < count; i++) {
            lm_pipeline_key k;
            memcpy(&k, buf + HEADER_BYTES + (size_t)i * sizeof k, sizeof k);
            k.shader[LM_PCACHE_NAME - 1] = 0;
            k.op[LM_PCACHE_OP - 1] = 0;
            add_key(pc, &k);
        }
    }
    pc->nloaded = pc->nkeys;
    memmove(buf, vk, (size_t)vk_bytes);
    *n = (size_t)vk_bytes;
done:
    fclose(f);
    if (bad) {
        free(buf);
        snprintf(pc->reason, sizeof pc->reason, "%s", bad);
        pc->state = LM_PCACHE_IGNORED;
        return NULL;
    }
    pc->state = LM_PCACHE_LOADED;
    return buf;
}

void lm_pipeline_cache_open(lm_context *ctx) {
    lm_pipeline_cache *pc = &ctx->pipes.pcache;
    memset(pc, 0, sizeof *pc);
    const char *env = getenv("LUMUS_PIPELINE_CACHE");
    if (env && (strcmp(env, "off") == 0 || strcmp(env, "0") == 0)) {
        snprintf(pc->reason, sizeof pc->reason, "LUMUS_PIPELINE_CACHE=%s", env);
        return;
    }
    if (env && *env) { pc->path = join(env, ""); pc->explicit_path = 1; }
    else pc->path = default_path(ctx, pc->reason, sizeof pc->reason);
    if (!pc->path) return;
    size_t n = 0;
    unsigned char *data = read_file(ctx, pc, &n);
    VkPipelineCacheCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = n, .pInitialData = data };
    VkResult r = vkCreatePipelineCache(ctx->device, &ci, NULL, &pc->cache);
    if (r != VK_SUCCESS && data) {
        /* The driver refused the data itself: start empty. */
        snprintf(pc->reason, sizeof pc->reason, "the driver refused its data (%d)", (int)r);
        pc->state = LM_PCACHE_IGNORED;
        pc->nkeys = pc->nloaded = 0;
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(ctx->device, &ci, NULL, &pc->cache);
    }
    if (data && pc->state == LM_PCACHE_LOADED) pc->loaded_bytes = n;
    free(data);
    if (r != VK_SUCCESS) {
        pc->cache = VK_NULL_HANDLE;
        snprintf(pc->reason, sizeof pc->reason, "vkCreatePipelineCache failed (%d)", (int)r);
        pc->state = LM_PCACHE_OFF;
        free(pc->path);
        pc->path = NULL;
        return;
    }
    /* Creation feedback (core in 1.3) tells cache hits from builds; only on devices lumus
     * made itself, whose API version it chose. */
    uint32_t api = ctx->props.apiVersion;
    pc->feedback = ctx->owns_device && (VK_API_VERSION_MAJOR(api) > 1 || VK_API_VERSION_MINOR(api) >= 3);
}

void lm_pipeline_cache_note(lm_context *ctx, const lm_pipeline_key *key, int hit) {
    lm_pipeline_cache *pc = &ctx->pipes.pcache;
    pc->built++;
    if (!pc->cache) return;
    if (hit) pc->hits++;
    else if (pc->feedback) pc->dirty = 1;
    if (add_key(pc, key)) pc->dirty = 1;
}

size_t lm_pipeline_cache_save(lm_context *ctx, const char **why) {
    lm_pipeline_cache *pc = &ctx->pipes.pcache;
    *why = pc->reason;
    if (!pc->cache || !pc->path) { if (!pc->reason[0]) *why = "the pipeline cache is off"; return 0; }
    size_t vk_bytes = 0;
    VkResult r = vkGetPipelineCacheData(ctx->device, pc->cache, &vk_bytes, NULL);
    if (r != VK_SUCCESS) { *why = "vkGetPipelineCacheData failed"; return 0; }
    size_t list = pc->nkeys * sizeof(lm_pipeline_key), total = HEADER_BYTES + list + vk_bytes;
    unsigned char *buf = malloc(total);
    if (!buf) { *why = "out of host memory"; return 0; }
    if (list) memcpy(buf + HEADER_BYTES, pc->keys, list);
    r = vkGetPipelineCacheData(ctx->device, pc->cache, &vk_bytes, buf + HEADER_BYTES + list);
    if (r != VK_SUCCESS) { free(buf); *why = "vkGetPipelineCacheData failed"; return 0; }
    total = HEADER_BYTES + list + vk_bytes;   /* the driver may return less the second time */
    memcpy(buf, MAGIC, 8);
    put_u64(buf + 8, build_hash());
    put_u64(buf + 16, (uint64_t)pc->nkeys);   /* u32 count, u32 zero */
    put_u64(buf + 24, (uint64_t)vk_bytes);
    put_u64(buf + 32, fnv1a(FNV_START, buf + HEADER_BYTES, total - HEADER_BYTES));
    if (!pc->explicit_path) make_parents(pc->path);
    /* A temporary of this process's own beside the file, renamed over it. */
    char suffix[48];
    static atomic_ulong saves;   /* contexts of several threads may save at once */
    snprintf(suffix, sizeof suffix, ".tmp.%ld.%lu", (long)getpid(), (unsigned long)atomic_fetch_add(&saves, 1));
    char *tmp = join(pc->path, suffix);
    size_t written = 0;
    FILE *f = tmp ? fopen(tmp, "wb") : NULL;
    if (!f) *why = tmp ? "cannot create its temporary file" : "out of host memory";
    else {
        int ok = fwrite(buf, 1, total, f) == total;
        ok = fclose(f) == 0 && ok;
        if (!ok) { remove(tmp); *why = "write failed"; }
        else if (rename(tmp, pc->path) != 0) { remove(tmp); *why = "cannot rename its temporary file"; }
        else { written = total; pc->dirty = 0; pc->saved_bytes = total; }
    }
    free(tmp);
    free(buf);
    return written;
}

void lm_pipeline_cache_close(lm_context *ctx) {
    lm_pipeline_cache *pc = &ctx->pipes.pcache;
    if (pc->cache && pc->dirty) {
        const char *why;
        if (!lm_pipeline_cache_save(ctx, &why) && pc->explicit_path)
            fprintf(stderr, "lumus: pipeline cache not saved to %s: %s\n", pc->path, why);
    }
    if (pc->cache) vkDestroyPipelineCache(ctx->device, pc->cache, NULL);
    pc->cache = VK_NULL_HANDLE;
    free(pc->path);
    free(pc->keys);
    pc->path = NULL;
    pc->keys = NULL;
    pc->nkeys = pc->cap = 0;
}
