/* Tensors: the lumus.Tensor userdata, its shape, strides and its storage.
 * A tensor is a handle onto a storage shared by its views (transpose, narrow, expand...:
 * other shapes, strides and offsets over the same elements); free(), __gc and __close
 * drop the handle, and any later use raises "tensor has been freed". The storage lives
 * while any handle on it does. */
#ifndef LUMUS_TENSOR_H
#define LUMUS_TENSOR_H

#include <stdint.h>
#include <lua.h>
#include "context.h"
#include "luautil.h"

#define LM_TENSOR_MT "lumus.Tensor"
#define LM_MAX_DIMS 8

/* Element types. Storage is packed at lm_dtype_size bytes per element; bool holds 0 or 1
 * in one byte. The names are the Lua API's (t:dtype(), {dtype=}). */
typedef enum lm_dtype { LM_FLOAT32 = 0, LM_FLOAT16, LM_BFLOAT16, LM_INT32, LM_BOOL, LM_NDTYPES } lm_dtype;

static inline unsigned lm_dtype_size(lm_dtype d) {
    static const unsigned char size[LM_NDTYPES] = { 4, 2, 2, 4, 1 };
    return size[d];
}
/* "float32", "float16", "bfloat16", "int32", "bool". */
const char *lm_dtype_name(lm_dtype d);
/* The dtype of this name, or -1. */
int lm_dtype_from_name(const char *name);

/* Host conversions (tensor.c), the same as the device's (shaders/convert.comp): float32
 * to float16/bfloat16 rounds to nearest even, overflow gives inf, a NaN stays a quiet NaN
 * with its sign; the widenings are exact. */
uint16_t lm_float_to_half(float f);
float lm_half_to_float(uint16_t h);
uint16_t lm_float_to_bfloat16(float f);
float lm_bfloat16_to_float(uint16_t b);
/* Stores the Lua value at idx (a number or a boolean) as one element of dtype d at dst.
 * Floats round through float32 (as PyTorch); int32 takes integers in range only (a
 * fraction, NaN or inf is refused); bool is true for any nonzero number (NaN included).
 * Returns NULL, or what is wrong with the value ("is a fraction (int32 holds integers)"),
 * for the caller's message. */
const char *lm_dtype_store(lua_State *L, int idx, lm_dtype d, void *dst);
/* Pushes the element of dtype d at src: a number (its exact value) for the floats, an
 * integer for int32, a boolean for bool. */
void lm_dtype_push(lua_State *L, lm_dtype d, const void *src);
/* The dtype named by the string at argument arg; raises naming the value otherwise. */
lm_dtype lm_check_dtype(lua_State *L, int arg);

typedef struct lm_tensor {
    lm_storage *storage;        /* NULL once freed */
    lm_dtype dtype;
    int ndim;
    int64_t shape[LM_MAX_DIMS];
    int64_t strides[LM_MAX_DIMS];   /* in elements, >= 0 (0: an expanded dimension) */
    int64_t offset;                 /* in elements, into the storage */
    int64_t numel;
} lm_tensor;

/* The tensor at idx, not freed; raises naming the argument otherwise. */
lm_tensor *lm_check_tensor(lua_State *L, int idx);
/* The tensor at idx, or NULL when the value there is no tensor (as luaL_testudata with
 * LM_TENSOR_MT, cheaper); freed tensors included. */
lm_tensor *lm_test_tensor(lua_State *L, int idx);
/* As lm_check_tensor, but nil (or none) gives NULL. */
lm_tensor *lm_opt_tensor(lua_State *L, int idx);
/* opts[key] of the options at argument arg (read raw, see luautil.h): a live tensor, or
 * NULL when absent; raises naming the key otherwise. */
lm_tensor *lm_option_tensor(lua_State *L, int arg, const char *key);

/* Reads a shape at idx: a table of 1..8 positive integers, or one integer. Sizes of -1
 * are allowed once when `allow_infer` (reshape; returned negated, for the caller to
 * resolve). Returns the element count. */
int64_t lm_check_shape(lua_State *L, int idx, int64_t *shape, int *ndim, int allow_infer);
/* The options of a factory that makes float32 only, at argument arg: nil or
 * {dtype = "float32"}; any other dtype raises naming it as unsupported. */
void lm_check_factory_options(lua_State *L, int arg);
/* The same for factories that make every dtype: returns {dtype=}'s (float32 when absent). */
lm_dtype lm_check_factory_dtype(lua_State *L, int arg);

/* Pushes a new float32 tensor of this shape with fresh (uninitialized) device memory. */
lm_tensor *lm_push_tensor(lua_State *L, lm_context *ctx, int ndim, const int64_t *shape);
/* The same in any dtype. */
lm_tensor *lm_push_tensor_dtype(lua_State *L, lm_context *ctx, lm_dtype dtype, int ndim, const int64_t *shape);

/* Row-major with no gaps (size-1 dimensions may have any stride). */
int lm_tensor_is_contiguous(const lm_tensor *t);
/* Frees t's storage as tensor:free() does (a deferred free: it goes back once the work
 * recorded on it is done) and leaves t freed; nothing when t is freed already. */
void lm_tensor_release(lm_tensor *t);
/* What the kernels of the ops read and write through lm_tensor_address: contiguous and
 * starting 16-byte aligned (their vec4 accesses). A view that is not goes through a
 * copy (ops/strided.c). */
int lm_tensor_is_plain(const lm_tensor *t);
/* Elements from the first one to one past the last one reachable in the storage. */
int64_t lm_tensor_span(const lm_tensor *t);

/* 0 for a freed tensor (a finalizer may free one while an op sets up): the op's record
 * step then refuses it rather than this crashing (see lm_record_dispatch). */
static inline VkDeviceAddress lm_tensor_address(const lm_tensor *t) {
    return t->storage ? t->storage->address + (VkDeviceAddress)t->offset * lm_dtype_size(t->dtype) : 0;
}
static inline VkDeviceSize lm_tensor_bytes(const lm_tensor *t) {
    return (VkDeviceSize)t->numel * lm_dtype_size(t->dtype);
}

/* Do two tensors' byte ranges (first to last element reachable) overlap? Conservative
 * for strided views: interleaved views that share no element count as overlapping. */
int lm_tensors_overlap(const lm_tensor *a, const lm_tensor *b);
/* Are they exactly the same elements in the same order (same buffer and start, and
 * both contiguous with the same count, or the same shape and strides)? */
int lm_tensors_same_memory(const lm_tensor *a, const lm_tensor *b);

/* Pushes a contiguous tensor of this shape with no storage yet (the caller sets one;
 * until then the handle is safe to collect). Shape sizes must be valid. */
lm_tensor *lm_push_tensor_handle(lua_State *L, int ndim, const int64_t *shape);

/* Registers the metatable and constructors into the table on top of the stack, and
 * their names for messages (lm_register_name). */
void lm_tensor_register(lua_State *L);

#endif
