/* libFuzzer harness for the safetensors header parser (src/safetensors.c), without Lua
 * or a device: the input is a whole file (8-byte length, header, data section).
 *
 * Checks beyond "no crash, no sanitizer report": a header that parses satisfies the
 * format's invariants (ranges tile the data section, sizes match shapes), and writing
 * its tensors back with lm_st_format_header gives a header that parses again to the
 * same names, dtypes and shapes. */
#include "safetensors.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok, const char *what) {
    if (!ok) { fprintf(stderr, "safetensors fuzz: %s\n", what); abort(); }
}

static const lm_st_entry *by_name(const lm_st_header *h, const char *name) {
    for (size_t i = 0; i < h->count; i++) if (strcmp(h->entries[i].name, name) == 0) return &h->entries[i];
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)data[i] << (8 * i);
    if (n > size - 8) return 0;   /* the binding refuses these before parsing */
    char err[384];
    lm_st_header *h = lm_st_parse((const char *)data + 8, (size_t)n, size - 8 - n, err, sizeof err);
    if (!h) { check(err[0] != 0, "failed without a reason"); return 0; }
    uint64_t at = 0;
    for (size_t i = 0; i < h->count; i++) {
        const lm_st_entry *e = &h->entries[i];
        check(e->begin == at, "ranges do not tile the data section");
        check(e->end - e->begin == (uint64_t)e->numel * lm_st_dtype_size(e->dtype), "size differs from shape");
        at = e->end;
    }
    check(at == size - 8 - n, "tensors do not end at the data section's end");

    lm_st_out *outs = calloc(h->count ? h->count : 1, sizeof *outs);
    check(outs != NULL, "out of memory");
    for (size_t i = 0; i < h->count; i++) {
        const lm_st_entry *e = &h->entries[i];
        outs[i] = (lm_st_out){ .name = e->name, .dtype = e->dtype, .ndim = e->ndim, .shape = e->shape,
                               .bytes = e->end - e->begin };
    }
    size_t len = 0;
    char *prefix = lm_st_format_header(outs, h->count, (const char *const *)h->meta_keys,
                                       (const char *const *)h->meta_values, h->nmeta, &len, err, sizeof err);
    check(prefix != NULL, err);
    check(len % 8 == 0, "written header not padded to 8 bytes");
    lm_st_header *again = lm_st_parse(prefix + 8, len - 8, size - 8 - n, err, sizeof err);
    check(again != NULL, err);
    check(again->count == h->count && again->nmeta == h->nmeta, "rewritten header differs in size");
    for (size_t i = 0; i < h->count; i++) {
        const lm_st_entry *e = &h->entries[i], *f = by_name(again, e->name);
        check(f && f->dtype == e->dtype && f->ndim == e->ndim &&
              memcmp(f->shape, e->shape, sizeof e->shape[0] * (size_t)e->ndim) == 0, "rewritten tensor differs");
    }
    lm_st_free(again);
    free(prefix);
    free(outs);
    lm_st_free(h);
    return 0;
}
