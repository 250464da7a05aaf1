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
    check_out_shape(L, t, argn, field, ndim, shape);
    return t;
}
