/* safetensors headers: parsing, validation and writing (see safetensors.h). */
#include "safetensors.h"
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; unsigned size; } dtypes[LM_ST_NDTYPES] = {
    [LM_ST_BOOL] = { "BOOL", 1 }, [LM_ST_U8] = { "U8", 1 }, [LM_ST_I8] = { "I8", 1 },
    [LM_ST_F8_E5M2] = { "F8_E5M2", 1 }, [LM_ST_F8_E4M3] = { "F8_E4M3", 1 },
    [LM_ST_I16] = { "I16", 2 }, [LM_ST_U16] = { "U16", 2 }, [LM_ST_F16] = { "F16", 2 },
    [LM_ST_BF16] = { "BF16", 2 }, [LM_ST_I32] = { "I32", 4 }, [LM_ST_U32] = { "U32", 4 },
    [LM_ST_F32] = { "F32", 4 }, [LM_ST_F64] = { "F64", 8 }, [LM_ST_I64] = { "I64", 8 },
    [LM_ST_U64] = { "U64", 8 },
};

const char *lm_st_dtype_name(lm_st_dtype d) { return dtypes[d].name; }
unsigned lm_st_dtype_size(lm_st_dtype d) { return dtypes[d].size; }

int lm_st_dtype_from_name(const char *name) {
    for (int i = 0; i < LM_ST_NDTYPES; i++)
        if (strcmp(dtypes[i].name, name) == 0) return i;
    return -1;
}

static void fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void lm_st_free(lm_st_header *h) {
    if (!h) return;
    for (size_t i = 0; i < h->count; i++) free(h->entries[i].name);
    free(h->entries);
    for (size_t i = 0; i < h->nmeta; i++) { free(h->meta_keys[i]); free(h->meta_values[i]); }
    free(h->meta_keys);
    free(h->meta_values);
    free(h);
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* A non-negative JSON integer, or -1. */
static int64_t nonneg_integer(const json_t *v) {
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    return x < 0 ? -1 : (int64_t)x;
}

/* Reads one tensor's description into e; 0 on success. */
static int read_entry(const char *name, json_t *desc, lm_st_entry *e, char *err, size_t errlen) {
    if (!json_is_object(desc)) { fail(err, errlen, "tensor '%s' is not a JSON object", name); return -1; }
    json_t *dt = json_object_get(desc, "dtype");
    json_t *shape = json_object_get(desc, "shape");
    json_t *offs = json_object_get(desc, "data_offsets");
    if (!dt || !shape || !offs) {
        fail(err, errlen, "tensor '%s' lacks \"%s\"", name, !dt ? "dtype" : !shape ? "shape" : "data_offsets");
        return -1;
    }
    if (!json_is_string(dt)) { fail(err, errlen, "tensor '%s': dtype is not a string", name); return -1; }
    int d = lm_st_dtype_from_name(json_string_value(dt));
    if (d < 0) { fail(err, errlen, "tensor '%s' has unknown dtype '%.32s'", name, json_string_value(dt)); return -1; }
    e->dtype = (lm_st_dtype)d;
    if (!json_is_array(shape)) { fail(err, errlen, "tensor '%s': shape is not an array", name); return -1; }
    size_t nd = json_array_size(shape);
    if (nd > LM_ST_MAX_DIMS) { fail(err, errlen, "tensor '%s' has %zu dimensions (at most %d)", name, nd, LM_ST_MAX_DIMS); return -1; }
    e->ndim = (int)nd;
    /* Element counts are kept below 2^62 so that numel * 8 cannot overflow. */
    const int64_t limit = (int64_t)1 << 62;
    int64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        int64_t s = nonneg_integer(json_array_get(shape, i));
        if (s < 0) {
            fail(err, errlen, "tensor '%s': shape entry %zu is not a non-negative integer", name, i + 1);
            return -1;
        }
        e->shape[i] = s;
        if (s != 0 && numel > limit / s) { fail(err, errlen, "tensor '%s': shape overflows the element count", name); return -1; }
        numel *= s;
    }
    e->numel = numel;
    if (!json_is_array(offs) || json_array_size(offs) != 2) {
        fail(err, errlen, "tensor '%s': data_offsets is not an array of two integers", name);
        return -1;
    }
    int64_t b = nonneg_integer(json_array_get(offs, 0)), en = nonneg_integer(json_array_get(offs, 1));
    if (b < 0 || en < 0) { fail(err, errlen, "tensor '%s': data_offsets are not non-negative integers", name); return -1; }
    if (en < b) { fail(err, errlen, "tensor '%s': data_offsets [%lld, %lld] end before they begin", name, (long long)b, (long long)en); return -1; }
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    uint64_t want = (uint64_t)numel * dtypes[d].size;
    if (e->end - e->begin != want) {
        fail(err, errlen, "tensor '%s' has %llu bytes of data for %llu (%s, %lld elements)", name,
             (unsigned long long)(e->end - e->begin), (unsigned long long)want, dtypes[d].name, (long long)numel);
        return -1;
    }
    return 0;
}

static int by_begin(const void *a, const void *b) {
    const lm_st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int read_metadata(json_t *meta, lm_st_header *h, char *err, size_t errlen) {
    if (!json_is_object(meta)) { fail(err, errlen, "__metadata__ is not a JSON object"); return -1; }
    size_t n = json_object_size(meta);
    h->meta_keys = calloc(n ? n : 1, sizeof *h->meta_keys);
    h->meta_values = calloc(n ? n : 1, sizeof *h->meta_values);
    if (!h->meta_keys || !h->meta_values) { fail(err, errlen, "out of host memory"); return -1; }
    const char *key;
    json_t *value;
    json_object_foreach(meta, key, value) {
        if (!json_is_string(value)) { fail(err, errlen, "__metadata__ value of '%s' is not a string", key); return -1; }
        char *k = dup_string(key), *v = dup_string(json_string_value(value));
        if (!k || !v) { free(k); free(v); fail(err, errlen, "out of host memory"); return -1; }
        h->meta_keys[h->nmeta] = k;
        h->meta_values[h->nmeta] = v;
        h->nmeta++;
    }
    return 0;
}

/* Ordered by begin, the ranges must tile [0, data_size) exactly. */
static int check_layout(lm_st_header *h, uint64_t data_size, char *err, size_t errlen) {
    qsort(h->entries, h->count, sizeof *h->entries, by_begin);
    uint64_t at = 0;
    for (size_t i = 0; i < h->count; i++) {
        const lm_st_entry *e = &h->entries[i];
        if (e->end > data_size) {
            fail(err, errlen, "tensor '%s' ends at byte %llu of the data section, which has %llu bytes (truncated file?)",
                 e->name, (unsigned long long)e->end, (unsigned long long)data_size);
            return -1;
        }
        if (e->begin < at) {
            fail(err, errlen, "tensor '%s' (data_offsets [%llu, %llu]) overlaps tensor '%s'", e->name,
                 (unsigned long long)e->begin, (unsigned long long)e->end, h->entries[i - 1].name);
            return -1;
        }
        if (e->begin > at) {
            fail(err, errlen, "bytes %llu to %llu of the data section belong to no tensor (before '%s')",
                 (unsigned long long)at, (unsigned long long)e->begin, e->name);
            return -1;
        }
        at = e->end;
    }
    if (at != data_size) {
        fail(err, errlen, "the data section has %llu bytes but its tensors end at byte %llu",
             (unsigned long long)data_size, (unsigned long long)at);
        return -1;
    }
    return 0;
}

lm_st_header *lm_st_parse(const char *json, size_t len, uint64_t data_size, char *err, size_t errlen) {
    if (len == 0 || json[0] != '{') { fail(err, errlen, "the header is not a JSON object"); return NULL; }
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) { fail(err, errlen, "invalid JSON header at byte %d: %s", je.position, je.text); return NULL; }
    lm_st_header *h = calloc(1, sizeof *h);
    if (!json_is_object(root)) { fail(err, errlen, "the header is not a JSON object"); goto bad; }
    if (!h) { fail(err, errlen, "out of host memory"); goto bad; }
    size_t n = json_object_size(root);
    h->entries = calloc(n ? n : 1, sizeof *h->entries);
    if (!h->entries) { fail(err, errlen, "out of host memory"); goto bad; }
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            if (read_metadata(value, h, err, errlen)) goto bad;
            continue;
        }
        lm_st_entry *e = &h->entries[h->count];
        if (read_entry(key, value, e, err, errlen)) goto bad;
        if (!(e->name = dup_string(key))) { fail(err, errlen, "out of host memory"); goto bad; }
        h->count++;
    }
    if (check_layout(h, data_size, err, errlen)) goto bad;
    json_decref(root);
    return h;
bad:
    json_decref(root);
    lm_st_free(h);
    return NULL;
}

/* Layout order: larger elements first (each tensor then starts aligned), then names. */
static int by_layout(const void *a, const void *b) {
    const lm_st_out *x = *(const lm_st_out *const *)a, *y = *(const lm_st_out *const *)b;
    unsigned sx = dtypes[x->dtype].size, sy = dtypes[y->dtype].size;
    if (sx != sy) return sx > sy ? -1 : 1;
    return strcmp(x->name, y->name);
}

char *lm_st_format_header(lm_st_out *tensors, size_t count, const char *const *meta_keys,
                          const char *const *meta_values, size_t nmeta, size_t *len,
                          char *err, size_t errlen) {
    char *text = NULL, *out = NULL;
    lm_st_out **order = malloc((count ? count : 1) * sizeof *order);
    json_t *root = json_object();
    if (!order || !root) { fail(err, errlen, "out of host memory"); goto done; }
    for (size_t i = 0; i < count; i++) order[i] = &tensors[i];
    qsort(order, count, sizeof *order, by_layout);
    uint64_t at = 0;
    for (size_t i = 0; i < count; i++) {
        lm_st_out *t = order[i];
        t->begin = at;
        at += t->bytes;
        json_t *shape = json_array(), *offs = json_array(), *desc = json_object();
        int bad = !shape || !offs || !desc;
        for (int d = 0; d < t->ndim && !bad; d++) bad = json_array_append_new(shape, json_integer(t->shape[d]));
        bad = bad || json_array_append_new(offs, json_integer((json_int_t)t->begin));
        bad = bad || json_array_append_new(offs, json_integer((json_int_t)(t->begin + t->bytes)));
        bad = bad || json_object_set_new(desc, "dtype", json_string(dtypes[t->dtype].name));
        bad = bad || json_object_set(desc, "shape", shape) || json_object_set(desc, "data_offsets", offs);
        json_decref(shape);
        json_decref(offs);
        if (bad || json_object_set_new(root, t->name, desc)) {
            if (bad) json_decref(desc);
            fail(err, errlen, "tensor name '%s' is not valid UTF-8 (or out of host memory)", t->name);
            goto done;
        }
    }
    if (nmeta) {
        json_t *meta = json_object();
        if (!meta || json_object_set_new(root, "__metadata__", meta)) { fail(err, errlen, "out of host memory"); goto done; }
        for (size_t i = 0; i < nmeta; i++) {
            json_t *v = json_string(meta_values[i]);
            if (!v || json_object_set_new(meta, meta_keys[i], v)) {
                fail(err, errlen, "metadata '%s' is not valid UTF-8 (key and value)", meta_keys[i]);
                goto done;
            }
        }
    }
    text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text) { fail(err, errlen, "out of host memory"); goto done; }
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    out = malloc(8 + padded);
    if (!out) { fail(err, errlen, "out of host memory"); goto done; }
    for (int i = 0; i < 8; i++) out[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
    memcpy(out + 8, text, n);
    memset(out + 8 + n, ' ', padded - n);
    *len = 8 + padded;
done:
    free(text);
    free(order);
    json_decref(root);
    return out;
}
