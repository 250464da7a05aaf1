/* The optional `out`-style arguments that ops share. */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

lm_tensor *lm_opt_out(lua_State *L, int argn, const char *field, int ndim, const int64_t *shape) {
    lm_tensor *t = lm_field_tensor(L, argn, field, argn);
    if (!t) return NULL;
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char want[256], got[256];
        lm_shape_string(shape, ndim, want, sizeof want);
        lm_shape_string(t->shape, t->ndim, got, sizeof got);
        lua_pushfstring(L, "%s must have shape %s, got %s", field, want, got);
        luaL_argerror(L, argn, lua_tostring(L, -1));
    }
    return t;
}

int lm_check_opts(lua_State *L, int argn) {
    if (lua_isnoneornil(L, argn)) return 0;
    if (!lua_istable(L, argn)) luaL_typeerror(L, argn, "options table");
    return 1;
}

lm_tensor *lm_push_out(lua_State *L, int argn, lm_context *ctx, int ndim, const int64_t *shape,
                       const lm_operands *in, int in_place) {
    lm_tensor *out = lm_check_opts(L, argn) ? lm_opt_out(L, argn, "out", ndim, shape) : NULL;
    if (!out) return lm_push_tensor(L, ctx, ndim, shape);
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
