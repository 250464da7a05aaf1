/* The optional `out`-style arguments that ops share. */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

static void check_out_shape(lua_State *L, const lm_tensor *t, int argn, const char *field,
                            int ndim, const int64_t *shape) {
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char want[256], got[256];
        lm_shape_string(shape, ndim, want, sizeof want);
        lm_shape_string(t->shape, t->ndim, got, sizeof got);
        lua_pushfstring(L, "%s must have shape %s, got %s", field, want, got);
        luaL_argerror(L, argn, lua_tostring(L, -1));
    }
}

lm_tensor *lm_opt_out(lua_State *L, int argn, const char *field, int ndim, const int64_t *shape) {
    lm_tensor *t = lm_field_tensor(L, argn, field, argn);
    if (t) check_out_shape(L, t, argn, field, ndim, shape);
    return t;
}

void lm_push_field(lua_State *L, int table_idx, const char *field) {
    if (!lua_istable(L, table_idx)) { lua_pushnil(L); return; }
    table_idx = lua_absindex(L, table_idx);
    lua_pushstring(L, field);
    lua_rawget(L, table_idx);
}

lm_tensor *lm_check_out(lua_State *L, int idx, int argn, const char *field, int ndim, const int64_t *shape) {
    if (lua_isnil(L, idx)) return NULL;
    lm_tensor *t = luaL_testudata(L, idx, LM_TENSOR_MT);
    if (!t) {
        lua_pushfstring(L, "%s must be a tensor, got %s", field, luaL_typename(L, idx));
        luaL_argerror(L, argn, lua_tostring(L, -1));
    }
    if (!t->storage) {
        lua_pushfstring(L, "%s: tensor has been freed", field);
        luaL_argerror(L, argn, lua_tostring(L, -1));
    }
    if (shape) check_out_shape(L, t, argn, field, ndim, shape);
    return t;
}

int lm_check_opts(lua_State *L, int argn) {
    if (lua_isnoneornil(L, argn)) return 0;
    if (!lua_istable(L, argn)) luaL_typeerror(L, argn, "options table");
    return 1;
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
    lm_tensor *out = lm_check_opts(L, argn) ? lm_opt_out(L, argn, "out", ndim, shape) : NULL;
    if (!out) {
        out = lm_push_tensor(L, ctx, ndim, shape);
        check_inputs_live(L, in);
        return out;
    }
    check_inputs_live(L, in);
    if (out->storage->ctx != ctx) luaL_argerror(L, argn, "out belongs to a different device");
    for (int i = 0; i < LM_LAUNCH_TENSORS; i++) {
        const lm_tensor *t = in->t[i];
        if (!t || !lm_tensors_overlap(out, t)) continue;
        if (in_place && t->offset == out->offset && t->numel == out->numel) continue;
        lua_pushfstring(L, in_place ? "out overlaps %s without being the same elements" : "out overlaps %s (an input of this op)",
                        in->name[i]);
        luaL_argerror(L, argn, lua_tostring(L, -1));
    }
    lua_getfield(L, argn, "out");
    return out;
}
