/* cat and stack: one strided copy (shaders/index_elems.comp, any dtype) per input into
 * its slice of one new output. */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

/* Pushes the tensors of the list at argument 1 onto the stack (so that they stay
 * referenced whatever the list becomes) and returns their count; all of them live, of
 * one dtype and device, with the same dimension count. */
static int push_list(lua_State *L) {
    if (!lua_istable(L, 1)) lm_argerror(L, 1, "list of tensors expected, got %s", luaL_typename(L, 1));
    lua_Unsigned n = lua_rawlen(L, 1);
    if (n == 0) lm_argerror(L, 1, "list is empty (at least one tensor is needed)");
    if (n > 100000) lm_argerror(L, 1, "list has too many tensors (at most 100000)");
    luaL_checkstack(L, (int)n + 8, "too many tensors");
    const lm_tensor *first = NULL;
    for (int i = 1; i <= (int)n; i++) {
        lua_rawgeti(L, 1, i);
        lm_tensor *t = luaL_testudata(L, -1, LM_TENSOR_MT);
        if (!t) lm_argerror(L, 1, "list[%d] must be a tensor, got %s", i, luaL_typename(L, -1));
        if (!t->storage) lm_argerror(L, 1, "list[%d]: tensor has been freed", i);
        if (!t->storage->ctx) lm_argerror(L, 1, "list[%d]: the tensor's device context has been closed", i);
        if (!first) { first = t; continue; }
        if (t->storage->ctx != first->storage->ctx) luaL_error(L, "%s: tensors belong to different devices", lm_fname(L));
        if (t->dtype != first->dtype)
            lm_argerror(L, 1, "list[%d] is %s, list[1] %s (convert with :to())", i, lm_dtype_name(t->dtype),
                        lm_dtype_name(first->dtype));
    }
    return (int)n;
}

/* The tensor at stack slot `slot`, checked live again (an allocation may free it). */
static lm_tensor *list_at(lua_State *L, int slot, int i) {
    lm_tensor *t = lua_touserdata(L, slot);
    if (!t->storage) luaL_error(L, "%s: list[%d] has been freed during the call", lm_fname(L), i);
    return t;
}

/* Reads `[dim] [, opts]` from argument 2: returns the options' index; *dim is the raw
 * dimension (1 when absent). */
static int dim_and_opts(lua_State *L, lua_Integer *dim, int *given) {
    *given = lua_type(L, 2) == LUA_TNUMBER;
    *dim = *given ? lm_check_integer(L, 2) : 1;
    if (!*given && !lua_isnoneornil(L, 2) && !lua_istable(L, 2))
        lm_argerror(L, 2, "dimension (an integer) or options table expected, got %s", luaL_typename(L, 2));
    int opts = *given ? 3 : 2;
    lm_check_options(L, opts, lm_out_option);
    return opts;
}

/* Copies each input at stack slots first.. into out, input i at `offsets[i]` elements. */
static void copy_inputs(lua_State *L, const char *op, lm_tensor *out, int first, int n, int skip_dim,
                        const int64_t *offsets) {
    for (int i = 0; i < n; i++) {
        lm_tensor *t = list_at(L, first + i, i + 1);
        lm_tensor slice = *out;
        slice.offset = out->offset + offsets[i];
        lm_index_elems g = { .x = t, .out = &slice, .ndim = t->ndim, .dim = -1 };
        for (int k = 0; k < t->ndim; k++) {
            g.shape[k] = t->shape[k];
            g.xs[k] = t->strides[k];
            g.is[k] = out->strides[skip_dim >= 0 && k >= skip_dim ? k + 1 : k];
        }
        lm_record_index_elems(L, op, &g);
    }
}

/* Pushes the result (opts.out or a new tensor) and refuses an out sharing memory with
 * any input. */
static lm_tensor *push_result(lua_State *L, int opts, int first, int n, int ndim, const int64_t *shape) {
    const lm_tensor *t0 = lua_touserdata(L, first);
    lm_operands none = { { NULL }, { NULL } };
    lm_tensor *out = lm_push_out_dtype(L, opts, t0->storage->ctx, t0->dtype, ndim, shape, &none);
    for (int i = 0; i < n; i++) {
        const lm_tensor *t = list_at(L, first + i, i + 1);
        if (lm_tensors_overlap(out, t)) lm_argerror(L, opts, "out overlaps list[%d] (an input of this op)", i + 1);
    }
    return out;
}

int lm_op_cat(lua_State *L) {
    lua_Integer d;
    int dim_given;
    int opts = dim_and_opts(L, &d, &dim_given);
    lua_settop(L, 3);
    int first = 4, n = push_list(L);
    const lm_tensor *t0 = lua_touserdata(L, first);
    if (d < 0) d += t0->ndim + 1;
    if (d < 1 || d > t0->ndim)
        lm_argerror(L, 2, "dimension %I out of range (list[1] has %d; dims are 1-based, -1 is the last)",
                    (LUAI_UACINT)(dim_given ? lua_tointeger(L, 2) : 1), t0->ndim);
    int dim = (int)d - 1;
    int64_t shape[LM_MAX_DIMS], total = 0;
    memcpy(shape, t0->shape, sizeof shape);
    for (int i = 0; i < n; i++) {
        const lm_tensor *t = lua_touserdata(L, first + i);
        int fits = t->ndim == t0->ndim, bad = -1;
        for (int k = 0; fits && k < t->ndim; k++)
            if (k != dim && t->shape[k] != t0->shape[k]) { fits = 0; bad = k; }
        if (!fits) {
            char a[256], b[256];
            lm_shape_string(t->shape, t->ndim, a, sizeof a);
            lm_shape_string(t0->shape, t0->ndim, b, sizeof b);
            if (bad < 0)
                lm_argerror(L, 1, "list[%d] has shape %s, list[1] %s: cat needs the same number of dimensions", i + 1, a, b);
            lm_argerror(L, 1, "list[%d] has shape %s, list[1] %s: sizes must match except in dimension %d "
                        "(dimension %d differs)", i + 1, a, b, dim + 1, bad + 1);
        }
        total += t->shape[dim];
    }
    shape[dim] = total;
    lm_check_result_size(L, t0->ndim, shape);
    lm_tensor *out = push_result(L, opts, first, n, t0->ndim, shape);
    int64_t *offs = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        offs[i] = at * out->strides[dim];
        at += ((const lm_tensor *)lua_touserdata(L, first + i))->shape[dim];
    }
    copy_inputs(L, "cat", out, first, n, -1, offs);
    lua_settop(L, first + n);
    return 1;
}

int lm_op_stack(lua_State *L) {
    lua_Integer d;
    int dim_given;
    int opts = dim_and_opts(L, &d, &dim_given);
    lua_settop(L, 3);
    int first = 4, n = push_list(L);
    const lm_tensor *t0 = lua_touserdata(L, first);
    if (d < 0) d += t0->ndim + 2;
    if (d < 1 || d > t0->ndim + 1)
        lm_argerror(L, 2, "dimension %I out of range (1 to %d for list[1] of %d dimensions; -1 appends)",
                    (LUAI_UACINT)(dim_given ? lua_tointeger(L, 2) : 1), t0->ndim + 1, t0->ndim);
    if (t0->ndim == LM_MAX_DIMS)
        lm_argerror(L, 1, "list[1] already has %d dimensions (the most supported)", LM_MAX_DIMS);
    int dim = (int)d - 1;
    for (int i = 1; i < n; i++) {
        const lm_tensor *t = lua_touserdata(L, first + i);
        int same = t->ndim == t0->ndim;
        for (int k = 0; same && k < t->ndim; k++) same = t->shape[k] == t0->shape[k];
        if (!same) {
            char a[256], b[256];
            lm_shape_string(t->shape, t->ndim, a, sizeof a);
            lm_shape_string(t0->shape, t0->ndim, b, sizeof b);
            lm_argerror(L, 1, "list[%d] has shape %s, list[1] %s: stack needs equal shapes", i + 1, a, b);
        }
    }
    int64_t shape[LM_MAX_DIMS];
    for (int k = 0, j = 0; k <= t0->ndim; k++) shape[k] = k == dim ? n : t0->shape[j++];
    lm_check_result_size(L, t0->ndim + 1, shape);
    lm_tensor *out = push_result(L, opts, first, n, t0->ndim + 1, shape);
    int64_t *offs = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0);
    for (int i = 0; i < n; i++) offs[i] = i * out->strides[dim];
    copy_inputs(L, "stack", out, first, n, dim, offs);
    lua_settop(L, first + n);
    return 1;
}
