/* The optional `out` tensor that ops share: read, checked and pushed (see ops.h). */
#include "ops.h"
#include <lauxlib.h>

const char *const lm_out_option[] = { "out", NULL };
const char *const lm_no_options[] = { NULL };

static void check_out_shape(lua_State *L, const lm_tensor *t, int argn, const char *field,
                            int ndim, const int64_t *shape) {
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char want[256], got[256];
        lm_shape_string(shape, ndim, want, sizeof want);
        lm_shape_string(t->shape, t->ndim, got, sizeof got);
        lm_argerror(L, argn, "%s must have shape %s, got %s", field, want, got);
    }
}

void lm_check_writable(lua_State *L, int argn, const lm_tensor *t, const char *what) {
    for (int i = 0; i < t->ndim; i++)
        if (t->strides[i] == 0 && t->shape[i] > 1)
            lm_argerror(L, argn, "%s is an expanded view (dimension %d has stride 0): its elements share "
                        "memory and cannot be written", what, i + 1);
}

lm_tensor *lm_check_out_view(lua_State *L, int idx, int argn, const char *field, int ndim, const int64_t *shape) {
    if (lua_isnil(L, idx)) return NULL;
    lm_tensor *t = lm_test_tensor(L, idx);
    if (!t) lm_argerror(L, argn, "%s must be a tensor, got %s", field, luaL_typename(L, idx));
    if (!t->storage) lm_argerror(L, argn, "%s: tensor has been freed", field);
    if (shape) check_out_shape(L, t, argn, field, ndim, shape);
    lm_check_writable(L, argn, t, field);
    return t;
}

lm_tensor *lm_check_out(lua_State *L, int idx, int argn, const char *field, int ndim, const int64_t *shape) {
    lm_tensor *t = lm_check_out_view(L, idx, argn, field, ndim, shape);
    if (t && !lm_tensor_is_plain(t))
        lm_argerror(L, argn, "%s must be contiguous and 16-byte aligned (a view is written only by copy and "
                    "fill: compute into a new tensor, then %s:copy(result))", field, field);
    return t;
}

/* Reading opts.out or allocating the result may run a finalizer that frees an input the
 * op has checked (see ops.h): the op then raises instead of recording freed memory. */
static void check_inputs_live(lua_State *L, const lm_operands *in) {
    for (int i = 0; i < LM_LAUNCH_TENSORS; i++)
        if (in->t[i] && !in->t[i]->storage)
            luaL_error(L, "%s: %s has been freed during the call", lm_fname(L), in->name[i]);
}

lm_tensor *lm_push_out(lua_State *L, int argn, lm_context *ctx, int ndim, const int64_t *shape,
                       const lm_operands *in, int in_place) {
    if (!lua_isnoneornil(L, argn) && !lua_istable(L, argn)) lm_typeerror(L, argn, "options table");
    lm_push_option(L, argn, "out");
    lm_tensor *out = lm_check_out(L, -1, argn, "out", ndim, shape);
    if (!out) {
        lua_pop(L, 1);
        out = lm_push_tensor(L, ctx, ndim, shape);
        check_inputs_live(L, in);
        return out;
    }
    check_inputs_live(L, in);
    if (out->storage->ctx != ctx) lm_argerror(L, argn, "out belongs to a different device");
    for (int i = 0; i < LM_LAUNCH_TENSORS; i++) {
        const lm_tensor *t = in->t[i];
        if (!t || !lm_tensors_overlap(out, t)) continue;
        /* Same bytes of the same buffer, not the same offsets: two wrappers of one host
         * buffer at different offsets both have offset 0 into their own storages. */
        if (in_place && lm_tensors_same_memory(t, out)) continue;
        lm_argerror(L, argn, in_place ? "out overlaps %s without being the same elements" : "out overlaps %s (an input of this op)",
                    in->name[i]);
    }
    return out;
}
