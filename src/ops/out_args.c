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
