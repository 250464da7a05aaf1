/* The safetensors file format: parsing and validating a header, and writing one.
 * Plain C over jansson; no Lua, no device (the Lua binding is src/ops/safetensors_io.c).
 *
 * A file is: 8 bytes N (little-endian u64), N bytes of JSON (an object; trailing spaces
 * allowed), then the data section. The JSON maps each tensor name to
 * {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} (offsets relative to
 * the data section) and may hold "__metadata__", a map of strings to strings.
 *
 * What a valid header satisfies (lm_st_parse checks all of it): names unique; every
 * dtype one of the format's; shape entries non-negative integers whose product times
 * the element size neither overflows nor differs from end - begin; the tensors' byte
 * ranges, ordered by begin, start at 0, follow one another with no gap and no overlap,
 * and end exactly at the end of the data section (as the reference reader requires). */
#ifndef LUMUS_SAFETENSORS_H
#define LUMUS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* Largest header accepted, as the reference implementation's cap. */
#define LM_ST_MAX_HEADER ((uint64_t)100000000)
/* Most dimensions a tensor of the file may have (lumus itself takes 8). */
#define LM_ST_MAX_DIMS 32

/* The format's dtypes. */
typedef enum lm_st_dtype {
    LM_ST_BOOL, LM_ST_U8, LM_ST_I8, LM_ST_F8_E5M2, LM_ST_F8_E4M3, LM_ST_I16, LM_ST_U16,
    LM_ST_F16, LM_ST_BF16, LM_ST_I32, LM_ST_U32, LM_ST_F32, LM_ST_F64, LM_ST_I64, LM_ST_U64,
    LM_ST_NDTYPES
} lm_st_dtype;

/* "F32" etc., and the element size in bytes. */
const char *lm_st_dtype_name(lm_st_dtype d);
unsigned lm_st_dtype_size(lm_st_dtype d);
/* The dtype of this name, or -1. */
int lm_st_dtype_from_name(const char *name);

typedef struct lm_st_entry {
    char *name;                     /* NUL-terminated UTF-8 (JSON strings hold no NUL here) */
    lm_st_dtype dtype;
    int ndim;                       /* 0 for a scalar */
    int64_t shape[LM_ST_MAX_DIMS];
    int64_t numel;                  /* 1 for a scalar */
    uint64_t begin, end;            /* bytes of the data section */
} lm_st_entry;

typedef struct lm_st_header {
    size_t count;
    lm_st_entry *entries;           /* ordered by begin (file order) */
    size_t nmeta;
    char **meta_keys, **meta_values;
} lm_st_header;

/* Parses and validates the header JSON `json` (len bytes) of a file whose data section
 * has data_size bytes. Returns a header to free with lm_st_free, or NULL with what is
 * wrong written into err. */
lm_st_header *lm_st_parse(const char *json, size_t len, uint64_t data_size, char *err, size_t errlen);
void lm_st_free(lm_st_header *h);

/* One tensor to write (lm_st_format_header). */
typedef struct lm_st_out {
    const char *name;
    lm_st_dtype dtype;
    int ndim;
    const int64_t *shape;
    uint64_t bytes;
    uint64_t begin;                 /* set by lm_st_format_header */
} lm_st_out;

/* Lays the tensors out (largest element size first, then by name, so every tensor
 * starts aligned to its element size and the file is the same for the same tensors),
 * setting each one's begin, and returns the whole file prefix: the 8-byte length and
 * the JSON padded with spaces to a multiple of 8 bytes. malloc'd (*len bytes), or NULL
 * with err (a name that is not UTF-8, out of memory). */
char *lm_st_format_header(lm_st_out *tensors, size_t count, const char *const *meta_keys,
                          const char *const *meta_values, size_t nmeta, size_t *len,
                          char *err, size_t errlen);

#endif
