/* lumus.load_safetensors / lumus.save_safetensors: safetensors files to and from device
 * tensors, streamed in chunks through one host buffer (never a whole file or tensor in
 * host memory). The file format and its validation are src/safetensors.c; this file
 * moves the bytes and converts dtypes.
 *
 * Each call runs its body under lua_pcall so that whatever fails (a bad file, a read
 * error, the progress callback, out of memory) closes the file, removes a half-written
 * temporary and frees the tensors made so far before the error goes on; the file
 * userdata's finalizer is the backstop for the same. */
#define _POSIX_C_SOURCE 200809L
#include "ops.h"
#include "../safetensors.h"
#include "../storage.h"
#include <lauxlib.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bytes moved per chunk between the file and the device. */
#define ST_CHUNK ((size_t)16 << 20)
#define ST_FILE_MT "lumus.safetensors_file"
/* Most elements of one tensor (as tensor.c's limit on sizes). */
#define ST_MAX_ELEMENTS ((int64_t)1 << 40)

typedef struct st_file {
    FILE *f;
    lm_st_header *h;
    char *header;       /* save: the formatted prefix (malloc'd) */
    char *tmp;          /* save: the temporary file, removed unless renamed (malloc'd) */
} st_file;

static void st_close(st_file *sf) {
    if (sf->f) fclose(sf->f);
    sf->f = NULL;
    if (sf->tmp) remove(sf->tmp);
    free(sf->tmp);
    sf->tmp = NULL;
    lm_st_free(sf->h);
    sf->h = NULL;
    free(sf->header);
    sf->header = NULL;
}

static int st_gc(lua_State *L) {
    st_close(luaL_checkudata(L, 1, ST_FILE_MT));
    return 0;
}

static st_file *push_file(lua_State *L) {
    st_file *sf = lua_newuserdatauv(L, sizeof *sf, 0);
    memset(sf, 0, sizeof *sf);
    if (luaL_newmetatable(L, ST_FILE_MT)) {
        lua_pushcfunction(L, st_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_setmetatable(L, -2);
    return sf;
}

/* Raises "<fname>: <path>: <problem>". */
static int file_error(lua_State *L, const char *path, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return luaL_error(L, "%s: %s: %s", lm_fname(L), path, msg);
}

/* The path at arg: a string without NUL bytes. */
static const char *check_path(lua_State *L, int arg) {
    size_t len;
    const char *p = lm_check_lstring(L, arg, &len);
    if (strlen(p) != len || len == 0) lm_argerror(L, arg, "path must be a non-empty string without NUL bytes");
    return p;
}

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* The lumus dtype a file dtype loads as, or -1. */
static int load_dtype(lm_st_dtype d) {
    switch (d) {
    case LM_ST_F32: return LM_FLOAT32;
    case LM_ST_F16: return LM_FLOAT16;
    case LM_ST_BF16: return LM_BFLOAT16;
    case LM_ST_I32: case LM_ST_I64: return LM_INT32;
    case LM_ST_U8: case LM_ST_BOOL: return LM_BOOL;
    default: return -1;
    }
}

static lm_st_dtype save_dtype(lm_dtype d) {
    switch (d) {
    case LM_FLOAT16: return LM_ST_F16;
    case LM_BFLOAT16: return LM_ST_BF16;
    case LM_INT32: return LM_ST_I32;
    case LM_BOOL: return LM_ST_BOOL;
    default: return LM_ST_F32;
    }
}

static int is_float(int d) { return d == LM_FLOAT32 || d == LM_FLOAT16 || d == LM_BFLOAT16; }

/* Calls t:free() on the tensor at idx. */
static void free_tensor(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    if (!luaL_testudata(L, idx, LM_TENSOR_MT)) return;
    lua_getfield(L, idx, "free");
    lua_pushvalue(L, idx);
    lua_call(L, 1, 0);
}

/* Frees every tensor value of the table at idx (a load that failed). */
static void free_all(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        free_tensor(L, -1);
        lua_pop(L, 1);
    }
}

/* ---- load ---- */

/* Converts a chunk of n file bytes of entry e in place into lumus's layout; returns the
 * bytes to upload. first is the index of the chunk's first element. Raises on a value
 * lumus's dtype cannot hold. */
static size_t convert_chunk(lua_State *L, const char *path, const lm_st_entry *e, unsigned char *buf,
                            size_t n, int64_t first) {
    if (e->dtype == LM_ST_I64) {
        size_t count = n / 8;
        for (size_t i = 0; i < count; i++) {
            int64_t v;
            memcpy(&v, buf + 8 * i, 8);
            if (v < INT32_MIN || v > INT32_MAX)
                file_error(L, path, "tensor '%s': element %lld is %lld, outside int32's range (I64 loads as int32)",
                           e->name, (long long)(first + (int64_t)i + 1), (long long)v);
            int32_t w = (int32_t)v;
            memcpy(buf + 4 * i, &w, 4);   /* 4i <= 8i: element i was read already */
        }
        return count * 4;
    }
    if (e->dtype == LM_ST_U8 || e->dtype == LM_ST_BOOL) {
        for (size_t i = 0; i < n; i++)
            if (buf[i] > 1)
                file_error(L, path, "tensor '%s': element %lld is %d, but %s loads as bool, which holds 0 and 1",
                           e->name, (long long)(first + (int64_t)i + 1), (int)buf[i], lm_st_dtype_name(e->dtype));
    }
    return n;
}

static void read_exact(lua_State *L, st_file *sf, const char *path, void *dst, size_t n, uint64_t at) {
    if (fread(dst, 1, n, sf->f) != n) {
        if (ferror(sf->f)) file_error(L, path, "read failed at byte %llu: %s", (unsigned long long)at, strerror(errno));
        file_error(L, path, "the file ends early at byte %llu (truncated?)", (unsigned long long)at);
    }
}

/* Arguments: path, opts, file userdata, result table, metadata table. */
static int load_body(lua_State *L) {
    const char *path = lua_tostring(L, 1);
    st_file *sf = lua_touserdata(L, 3);
    lm_context *ctx = lm_context_get(L);
    int want = -1;
    lm_push_option(L, 2, "dtype");
    if (!lua_isnil(L, -1)) want = lm_dtype_from_name(lua_tostring(L, -1));
    lua_pop(L, 1);
    lm_push_option(L, 2, "progress");
    int progress = lua_isnil(L, -1) ? 0 : lua_gettop(L);
    if (!progress) lua_pop(L, 1);

    /* Non-blocking, so that a FIFO or device named by mistake is refused, not waited on. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) file_error(L, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        file_error(L, path, "not a regular file");
    }
    sf->f = fdopen(fd, "rb");
    if (!sf->f) { close(fd); file_error(L, path, "cannot open: %s", strerror(errno)); }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8) file_error(L, path, "the file has %llu bytes, fewer than the 8 of the header length (truncated?)",
                             (unsigned long long)size);
    unsigned char len8[8];
    read_exact(L, sf, path, len8, 8, 0);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (hlen > LM_ST_MAX_HEADER)
        file_error(L, path, "header length %llu exceeds the limit of %llu bytes", (unsigned long long)hlen,
                   (unsigned long long)LM_ST_MAX_HEADER);
    if (hlen > size - 8)
        file_error(L, path, "header length %llu exceeds the %llu bytes after it (truncated file?)",
                   (unsigned long long)hlen, (unsigned long long)(size - 8));
    char *json = lua_newuserdatauv(L, hlen ? (size_t)hlen : 1, 0);
    int json_idx = lua_gettop(L);
    read_exact(L, sf, path, json, (size_t)hlen, 8);
    char err[384];
    sf->h = lm_st_parse(json, (size_t)hlen, size - 8 - hlen, err, sizeof err);
    if (!sf->h) file_error(L, path, "%s", err);
    lua_pushnil(L);
    lua_replace(L, json_idx);   /* the JSON text may go */
    const lm_st_header *h = sf->h;
    for (size_t i = 0; i < h->nmeta; i++) {
        lua_pushstring(L, h->meta_values[i]);
        lua_setfield(L, 5, h->meta_keys[i]);
    }

    /* Which entries to load: all, or those named (each must exist). */
    unsigned char *wanted = lua_newuserdatauv(L, h->count ? h->count : 1, 0);
    memset(wanted, 0, h->count ? h->count : 1);
    lm_push_option(L, 2, "names");
    if (lua_isnil(L, -1)) {
        memset(wanted, 1, h->count);
    } else {
        int names = lua_gettop(L);
        lua_createtable(L, 0, (int)(h->count < 1000000 ? h->count : 1000000));
        for (size_t i = 0; i < h->count; i++) {
            lua_pushinteger(L, (lua_Integer)i);
            lua_setfield(L, -2, h->entries[i].name);
        }
        lua_Integer n = (lua_Integer)lua_rawlen(L, names);
        for (lua_Integer k = 1; k <= n; k++) {
            lua_rawgeti(L, names, k);
            if (lua_type(L, -1) != LUA_TSTRING)
                lm_argerror(L, 2, "names[%I] must be a string, got %s", (LUAI_UACINT)k, luaL_typename(L, -1));
            lua_pushvalue(L, -1);
            if (lua_rawget(L, -3) != LUA_TNUMBER) file_error(L, path, "no tensor named '%s'", lua_tostring(L, -2));
            wanted[lua_tointeger(L, -1)] = 1;
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);

    /* Everything that makes a wanted tensor unloadable, before any device memory. */
    uint64_t total = 0;
    size_t biggest = 0;
    for (size_t i = 0; i < h->count; i++) {
        const lm_st_entry *e = &h->entries[i];
        if (!wanted[i]) continue;
        if (load_dtype(e->dtype) < 0)
            file_error(L, path, "tensor '%s' has dtype %s, which lumus does not load (F32, F16, BF16, I32, I64, U8, BOOL)",
                       e->name, lm_st_dtype_name(e->dtype));
        if (e->ndim > LM_MAX_DIMS)
            file_error(L, path, "tensor '%s' has %d dimensions; lumus tensors have at most %d", e->name, e->ndim, LM_MAX_DIMS);
        if (e->numel == 0)
            file_error(L, path, "tensor '%s' has no elements (a size-0 dimension); lumus tensors have at least one "
                       "(skip it with names=)", e->name);
        if (e->numel > ST_MAX_ELEMENTS)
            file_error(L, path, "tensor '%s' has %lld elements, more than lumus's %lld", e->name,
                       (long long)e->numel, (long long)ST_MAX_ELEMENTS);
        total += e->end - e->begin;
        if (e->end - e->begin > biggest) biggest = (size_t)(e->end - e->begin);
    }
    size_t chunk = biggest < ST_CHUNK ? biggest : ST_CHUNK;
    unsigned char *buf = lua_newuserdatauv(L, chunk ? chunk : 1, 0);

    uint64_t data_start = 8 + hlen, pos = data_start, done = 0;
    for (size_t i = 0; i < h->count; i++) {
        const lm_st_entry *e = &h->entries[i];
        if (!wanted[i]) continue;
        int top = lua_gettop(L);
        int64_t shape[LM_MAX_DIMS] = { 1 };
        int ndim = e->ndim ? e->ndim : 1;   /* a scalar loads as shape {1} */
        for (int d = 0; d < e->ndim; d++) shape[d] = e->shape[d];
        int dt = load_dtype(e->dtype);
        lm_tensor *t = lm_push_tensor_dtype(L, ctx, (lm_dtype)dt, ndim, shape);
        lua_pushvalue(L, -1);
        lua_setfield(L, 4, e->name);          /* in the result at once: freed if what follows fails */
        if (pos != data_start + e->begin) {
            pos = data_start + e->begin;
            if (fseeko(sf->f, (off_t)pos, SEEK_SET) != 0) file_error(L, path, "seek failed: %s", strerror(errno));
        }
        uint64_t bytes = e->end - e->begin, at = 0;
        VkDeviceSize dev = 0;
        while (at < bytes) {
            size_t n = bytes - at < chunk ? (size_t)(bytes - at) : chunk;
            read_exact(L, sf, path, buf, n, pos);
            size_t up = convert_chunk(L, path, e, buf, n, (int64_t)(at / lm_st_dtype_size(e->dtype)));
            t = lm_check_tensor(L, top + 1);
            lm_storage_write(L, t->storage, dev, buf, up);
            dev += up;
            at += n;
            pos += n;
            done += n;
            if (progress) {
                lua_pushvalue(L, progress);
                lua_pushinteger(L, (lua_Integer)done);
                lua_pushinteger(L, (lua_Integer)total);
                lua_call(L, 2, 0);
            }
        }
        if (want >= 0 && is_float(dt) && want != dt) {
            lua_pushcfunction(L, lm_op_to);
            lua_pushvalue(L, top + 1);
            lua_pushstring(L, lm_dtype_name((lm_dtype)want));
            lua_call(L, 2, 1);
            lua_setfield(L, 4, e->name);
            free_tensor(L, top + 1);
        }
        lua_settop(L, top);
    }
    return 0;
}

/* lumus.load_safetensors(path [, {dtype=, names=, progress=}]) -> tensors, metadata */
int lm_load_safetensors(lua_State *L) {
    check_path(L, 1);
    static const char *const known[] = { "dtype", "names", "progress", NULL };
    if (lm_check_options(L, 2, known)) {
        lm_push_option(L, 2, "dtype");
        if (!lua_isnil(L, -1)) {
            int d = lua_type(L, -1) == LUA_TSTRING ? lm_dtype_from_name(lua_tostring(L, -1)) : -1;
            if (!is_float(d))
                lm_argerror(L, 2, "dtype must be \"float32\", \"float16\" or \"bfloat16\" (the floating tensors' "
                            "dtype), got %s", lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1));
        }
        lm_push_option(L, 2, "names");
        if (!lua_isnil(L, -1) && !lua_istable(L, -1))
            lm_argerror(L, 2, "names must be a list of tensor names, got %s", luaL_typename(L, -1));
        lm_push_option(L, 2, "progress");
        if (!lua_isnil(L, -1) && !lua_isfunction(L, -1))
            lm_argerror(L, 2, "progress must be a function, got %s", luaL_typename(L, -1));
    }
    if (!host_is_little_endian()) luaL_error(L, "%s: safetensors needs a little-endian host", lm_fname(L));
    lm_context_get(L);
    lua_settop(L, 2);
    st_file *sf = push_file(L);   /* 3 */
    lua_newtable(L);              /* 4: the tensors */
    lua_newtable(L);              /* 5: the metadata */
    lua_pushcfunction(L, load_body);
    for (int i = 1; i <= 5; i++) lua_pushvalue(L, i);
    int rc = lua_pcall(L, 5, 0, 0);
    st_close(sf);
    if (rc != LUA_OK) {
        free_all(L, 4);
        lua_error(L);
    }
    return 2;
}

/* ---- save ---- */

static int by_begin(const void *a, const void *b) {
    const lm_st_out *x = *(const lm_st_out *const *)a, *y = *(const lm_st_out *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* A string key or value of the table being saved: no NUL bytes (names are C strings). */
static const char *checked_string(lua_State *L, int idx, const char *what) {
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "%s: %s must be strings, got %s", lm_fname(L), what, luaL_typename(L, idx));
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    if (strlen(s) != len) luaL_error(L, "%s: %s must not contain NUL bytes", lm_fname(L), what);
    return s;
}

/* Arguments: path, tensors, metadata, file userdata. */
static int save_body(lua_State *L) {
    const char *path = lua_tostring(L, 1);
    st_file *sf = lua_touserdata(L, 4);
    /* 5: name -> contiguous tensor (anchors what is written); counted first. */
    lua_newtable(L);
    size_t count = 0;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        const char *name = checked_string(L, -2, "tensor names");
        if (strcmp(name, "__metadata__") == 0)
            luaL_error(L, "%s: '__metadata__' cannot name a tensor (the format reserves it)", lm_fname(L));
        lm_tensor *t = luaL_testudata(L, -1, LM_TENSOR_MT);
        if (!t) luaL_error(L, "%s: tensors['%s'] is a %s, not a tensor", lm_fname(L), name, luaL_typename(L, -1));
        if (!t->storage) luaL_error(L, "%s: tensor '%s' has been freed", lm_fname(L), name);
        if (!lm_tensor_is_contiguous(t)) {
            lua_pushcfunction(L, lm_op_contiguous);
            lua_pushvalue(L, -2);
            lua_call(L, 1, 1);
            lua_replace(L, -2);
        }
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, 5);
        count++;
    }
    lm_st_out *outs = lua_newuserdatauv(L, (count ? count : 1) * sizeof *outs, 0);          /* 6 */
    lm_st_out **order = lua_newuserdatauv(L, (count ? count : 1) * sizeof *order, 0);      /* 7 */
    size_t k = 0;
    lua_pushnil(L);
    while (lua_next(L, 5)) {
        lm_tensor *t = lua_touserdata(L, -1);
        outs[k].name = lua_tostring(L, -2);     /* anchored by table 5 */
        outs[k].dtype = save_dtype(t->dtype);
        outs[k].ndim = t->ndim;
        outs[k].shape = t->shape;               /* the tensor userdata is anchored too */
        outs[k].bytes = lm_tensor_bytes(t);
        order[k] = &outs[k];
        k++;
        lua_pop(L, 1);
    }
    /* Metadata: 8 and 9 hold the keys' and values' pointers. */
    size_t nmeta = 0;
    if (lua_istable(L, 3)) {
        lua_pushnil(L);
        while (lua_next(L, 3)) { nmeta++; lua_pop(L, 1); }
    }
    const char **mkeys = lua_newuserdatauv(L, (nmeta ? nmeta : 1) * sizeof *mkeys, 0);
    const char **mvals = lua_newuserdatauv(L, (nmeta ? nmeta : 1) * sizeof *mvals, 0);
    size_t m = 0;
    if (nmeta) {
        lua_pushnil(L);
        while (lua_next(L, 3) && m < nmeta) {
            mkeys[m] = checked_string(L, -2, "metadata keys");
            mvals[m] = checked_string(L, -1, "metadata values");
            m++;
            lua_pop(L, 1);
        }
    }
    char err[384];
    size_t hlen = 0;
    sf->header = lm_st_format_header(outs, count, mkeys, mvals, m, &hlen, err, sizeof err);
    if (!sf->header) luaL_error(L, "%s: %s", lm_fname(L), err);
    qsort(order, count, sizeof *order, by_begin);

    const char *tmp = lua_pushfstring(L, "%s.tmp", path);
    sf->f = fopen(tmp, "wb");
    if (!sf->f) file_error(L, tmp, "cannot create: %s", strerror(errno));
    size_t tmplen = strlen(tmp) + 1;
    sf->tmp = malloc(tmplen);
    if (!sf->tmp) { fclose(sf->f); sf->f = NULL; remove(tmp); luaL_error(L, "%s: out of host memory", lm_fname(L)); }
    memcpy(sf->tmp, tmp, tmplen);
    if (fwrite(sf->header, 1, hlen, sf->f) != hlen) file_error(L, tmp, "write failed: %s", strerror(errno));

    size_t biggest = 0;
    for (size_t i = 0; i < count; i++) if (outs[i].bytes > biggest) biggest = (size_t)outs[i].bytes;
    size_t chunk = biggest < ST_CHUNK ? biggest : ST_CHUNK;
    unsigned char *buf = lua_newuserdatauv(L, chunk ? chunk : 1, 0);
    for (size_t i = 0; i < count; i++) {
        lua_getfield(L, 5, order[i]->name);
        lm_tensor *t = lm_check_tensor(L, -1);
        VkDeviceSize base = (VkDeviceSize)t->offset * lm_dtype_size(t->dtype);
        for (uint64_t at = 0; at < order[i]->bytes; ) {
            size_t n = order[i]->bytes - at < chunk ? (size_t)(order[i]->bytes - at) : chunk;
            lm_storage_read(L, t->storage, base + at, buf, n);
            if (fwrite(buf, 1, n, sf->f) != n) file_error(L, tmp, "write failed: %s", strerror(errno));
            at += n;
        }
        lua_pop(L, 1);
    }
    if (fflush(sf->f) != 0 || fsync(fileno(sf->f)) != 0) file_error(L, tmp, "write failed: %s", strerror(errno));
    int closed = fclose(sf->f);
    sf->f = NULL;
    if (closed != 0) file_error(L, tmp, "write failed: %s", strerror(errno));
    if (rename(tmp, path) != 0) file_error(L, path, "cannot replace it with %s: %s", tmp, strerror(errno));
    free(sf->tmp);      /* renamed: nothing to remove */
    sf->tmp = NULL;
    return 0;
}

/* lumus.save_safetensors(path, tensors [, metadata]) */
int lm_save_safetensors(lua_State *L) {
    check_path(L, 1);
    lm_check_type(L, 2, LUA_TTABLE);
    if (!lua_isnoneornil(L, 3)) lm_check_type(L, 3, LUA_TTABLE);
    if (!host_is_little_endian()) luaL_error(L, "%s: safetensors needs a little-endian host", lm_fname(L));
    lua_settop(L, 3);
    st_file *sf = push_file(L);   /* 4 */
    lua_pushcfunction(L, save_body);
    for (int i = 1; i <= 4; i++) lua_pushvalue(L, i);
    int rc = lua_pcall(L, 4, 0, 0);
    st_close(sf);
    if (rc != LUA_OK) lua_error(L);
    return 0;
}

/* The bodies run under lua_pcall, where Lua knows no name for them: they are named as
 * the functions they serve (lm_fname). */
void lm_safetensors_register_names(lua_State *L) {
    lm_register_name(L, load_body, "lumus.load_safetensors");
    lm_register_name(L, save_body, "lumus.save_safetensors");
}
