/* The C API for hosts (lumus.h). Each entry point that may fail runs its work under
 * lua_pcall, so a host can call it outside any protected call and gets a status and a
 * message instead of a panic. */
#include "lumus.h"
#include "context.h"
#include "storage.h"
#include "tensor.h"
#include <lauxlib.h>
#include <string.h>

/* Runs f(arg) protected; f leaves `nresults` values, or the call pushes one message. */
static int protected_call(lua_State *L, lua_CFunction f, void *arg, int nresults) {
    if (!lua_checkstack(L, 3)) return LUA_ERRMEM;
    lua_pushcfunction(L, f);
    lua_pushlightuserdata(L, arg);
    return lua_pcall(L, 1, nresults, 0);
}

static void *arg_of(lua_State *L) { return lua_touserdata(L, 1); }

/* Tensors need lumus.Tensor's metatable: open the linked core if nothing has yet. */
static void ensure_core(lua_State *L) {
    if (luaL_getmetatable(L, LM_TENSOR_MT) == LUA_TNIL) {
        luaL_requiref(L, "lumus.core", luaopen_lumus_core, 0);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* ---- attach ---- */

static int do_attach(lua_State *L) {
    lm_context_attach(L, arg_of(L));
    return 0;
}

int lumus_attach_vulkan(lua_State *L, const lumus_vulkan_device *dev) {
    return protected_call(L, do_attach, (void *)dev, 0);
}

/* ---- wrap a host buffer ---- */

typedef struct wrap_args {
    const lumus_buffer *buf;
    int ndim;
    const int64_t *shape;
} wrap_args;

#define LM_WRAP_MAX_SIZE ((int64_t)1 << 40)

/* The element count of a C caller's shape; raises naming `fn` when it is not 1 to
 * LM_MAX_DIMS positive sizes with at most 2^40 elements in all. */
static int64_t checked_numel(lua_State *L, const char *fn, int ndim, const int64_t *shape) {
    if (ndim < 1 || ndim > LM_MAX_DIMS || !shape)
        luaL_error(L, "%s: a shape of 1 to %d sizes is needed, got %d", fn, LM_MAX_DIMS, ndim);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        int64_t v = shape[i];
        if (v <= 0 || v > LM_WRAP_MAX_SIZE || numel > LM_WRAP_MAX_SIZE / v)
            luaL_error(L, "%s: size %d of the shape must be positive (and the element count at "
                          "most 2^40), got %I", fn, i + 1, (LUAI_UACINT)v);
        numel *= v;
    }
    return numel;
}

static int do_push_buffer(lua_State *L) {
    const wrap_args *a = arg_of(L);
    const lumus_buffer *b = a->buf;
    if (!b || !b->buffer) return luaL_error(L, "lumus_push_buffer: no buffer given");
    int64_t numel = checked_numel(L, "lumus_push_buffer", a->ndim, a->shape);
    VkDeviceSize bytes = (VkDeviceSize)numel * lm_dtype_size(LM_FLOAT32);   /* wrapped buffers hold float32 */
    if (b->size < bytes)
        return luaL_error(L, "lumus_push_buffer: the shape needs %I bytes, the buffer range has %I",
                          (LUAI_UACINT)bytes, (LUAI_UACINT)b->size);
    lm_context *ctx = lm_context_peek(L);
    if (!ctx || ctx->owns_device)
        return luaL_error(L, "lumus_push_buffer: this lua_State %s; attach the buffer's device with "
                             "lumus_attach_vulkan first", ctx ? "uses lumus's own device" : "has no device attached");
    ensure_core(L);
    lm_tensor *t = lm_push_tensor_handle(L, a->ndim, a->shape);
    t->storage = lm_storage_wrap(L, ctx, b->buffer, b->offset, bytes, b->mapped);
    lua_setiuservalue(L, -2, 1);
    if (t->storage->address % 16 != 0) {
        lm_storage *s = t->storage;
        t->storage = NULL;
        lm_storage_unref(s);
        return luaL_error(L, "lumus_push_buffer: the range's device address must be a multiple of 16 bytes "
                             "(offset %I)", (LUAI_UACINT)b->offset);
    }
    return 1;
}

int lumus_push_buffer(lua_State *L, const lumus_buffer *buf, int ndim, const int64_t *shape) {
    wrap_args a = { buf, ndim, shape };
    return protected_call(L, do_push_buffer, &a, 1);
}

/* ---- new tensors ---- */

typedef struct new_args { int ndim; const int64_t *shape; } new_args;

static int do_push_tensor(lua_State *L) {
    const new_args *a = arg_of(L);
    checked_numel(L, "lumus_push_tensor", a->ndim, a->shape);
    lm_context *ctx = lm_context_get(L);
    ensure_core(L);
    lm_push_tensor(L, ctx, a->ndim, a->shape);
    return 1;
}

int lumus_push_tensor(lua_State *L, int ndim, const int64_t *shape) {
    new_args a = { ndim, shape };
    return protected_call(L, do_push_tensor, &a, 1);
}

/* ---- sync points and waits ---- */

typedef struct sync_args {
    lm_tensor *t;       /* NULL: all work */
    VkSemaphore *semaphore;
    uint64_t *value;
} sync_args;

static int do_sync_point(lua_State *L) {
    const sync_args *a = arg_of(L);
    lm_context *ctx;
    uint64_t value;
    if (a->t) {
        ctx = a->t->storage->ctx;
        value = lm_storage_serial(a->t->storage);
    } else {
        ctx = lm_context_get(L);
        value = ctx->stream.next_serial - 1;
    }
    lm_stream_flush(L, ctx, value);
    if (a->semaphore) *a->semaphore = ctx->stream.timeline;
    if (a->value) *a->value = value;
    return 0;
}

/* Pushes a message and returns LUA_ERRRUN: for checks made before a protected call. */
static int fail_with(lua_State *L, const char *msg) {
    if (!lua_checkstack(L, 1)) return LUA_ERRMEM;
    lua_pushstring(L, msg);
    return LUA_ERRRUN;
}

int lumus_tensor_sync_point(lua_State *L, int idx, VkSemaphore *semaphore, uint64_t *value) {
    /* The tensor is looked up here: the protected call's frame cannot see idx. */
    lm_tensor *t = luaL_testudata(L, idx, LM_TENSOR_MT);
    if (!t) return fail_with(L, "lumus_tensor_sync_point: the value at that index is not a tensor");
    if (!t->storage) return fail_with(L, "lumus_tensor_sync_point: the tensor has been freed");
    if (!t->storage->ctx)
        return fail_with(L, "lumus_tensor_sync_point: the tensor's device context has been closed");
    sync_args a = { t, semaphore, value };
    return protected_call(L, do_sync_point, &a, 0);
}

int lumus_sync_point(lua_State *L, VkSemaphore *semaphore, uint64_t *value) {
    sync_args a = { NULL, semaphore, value };
    return protected_call(L, do_sync_point, &a, 0);
}

typedef struct wait_args { VkSemaphore semaphore; uint64_t value; } wait_args;

static int do_wait_semaphore(lua_State *L) {
    const wait_args *a = arg_of(L);
    if (!a->semaphore) return luaL_error(L, "lumus_wait_semaphore: no semaphore given");
    lm_context *ctx = lm_context_get(L);
    if (!lm_stream_add_wait(ctx, a->semaphore, a->value))
        return luaL_error(L, "lumus_wait_semaphore: %d waits are already pending for the next submit", LM_MAX_WAITS);
    return 0;
}

int lumus_wait_semaphore(lua_State *L, VkSemaphore semaphore, uint64_t value) {
    wait_args a = { semaphore, value };
    return protected_call(L, do_wait_semaphore, &a, 0);
}

/* ---- tensors from the stack ---- */

static void fill_info(const lm_tensor *t, lumus_tensor_info *info) {
    memset(info, 0, sizeof *info);
    info->ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) info->shape[i] = t->shape[i];
    info->numel = t->numel;
    info->buffer = t->storage->buffer;
    info->offset = t->storage->buffer_offset + (VkDeviceSize)t->offset * lm_dtype_size(t->dtype);
    info->size = lm_tensor_bytes(t);
    info->address = lm_tensor_address(t);
    info->mapped = t->storage->mapped ? t->storage->mapped + (size_t)t->offset * lm_dtype_size(t->dtype) : NULL;
    info->wrapped = t->storage->external;
}

int lumus_to_tensor(lua_State *L, int idx, lumus_tensor_info *info) {
    lm_tensor *t = luaL_testudata(L, idx, LM_TENSOR_MT);
    /* lumus_tensor_info has no dtype: it describes float32 tensors only. */
    if (!t || !t->storage || !t->storage->ctx || !lm_tensor_is_contiguous(t) || t->dtype != LM_FLOAT32) return 0;
    if (info) fill_info(t, info);
    return 1;
}

void lumus_check_tensor(lua_State *L, int idx, lumus_tensor_info *info) {
    lm_tensor *t = lm_check_tensor(L, idx);
    /* The info describes contiguous elements only (it has no strides). */
    if (!lm_tensor_is_contiguous(t)) lm_argerror(L, idx, "tensor must be contiguous (a view with strides: pass t:contiguous())");
    if (t->dtype != LM_FLOAT32)
        lm_argerror(L, idx, "tensor must be float32 (the C API's tensor info has no dtype), got %s: pass t:float()",
                    lm_dtype_name(t->dtype));
    if (info) fill_info(t, info);
}

int lumus_context_count(void) { return lm_context_count(); }
