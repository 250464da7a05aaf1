/* Broadcast shapes and strides (broadcast.h). */
#include "broadcast.h"
#include <lauxlib.h>

int lm_broadcast_shape(int n, const lm_tensor *const *t, int *ndim, int64_t *shape) {
    int nd = 1;
    for (int k = 0; k < n; k++)
        if (t[k] && t[k]->ndim > nd) nd = t[k]->ndim;
    for (int i = 0; i < nd; i++) shape[i] = 1;
    *ndim = nd;
    for (int k = 0; k < n; k++) {
        if (!t[k]) continue;
        int lead = nd - t[k]->ndim;
        for (int i = 0; i < t[k]->ndim; i++) {
            int64_t s = t[k]->shape[i], *r = &shape[lead + i];
            if (s == *r || s == 1) continue;
            if (*r != 1) return k;
            *r = s;
        }
    }
    return -1;
}

void lm_broadcast_strides(const lm_tensor *t, int ndim, const int64_t *shape, int64_t *strides) {
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int k = i - lead;
        strides[i] = k < 0 || (t->shape[k] == 1 && shape[i] != 1) ? 0 : t->strides[k];
    }
}

int lm_broadcast_error(lua_State *L, int argn, const lm_tensor *a, const lm_tensor *b) {
    char sa[256], sb[256];
    lm_shape_string(a->shape, a->ndim, sa, sizeof sa);
    lm_shape_string(b->shape, b->ndim, sb, sizeof sb);
    return lm_argerror(L, argn, "shapes %s and %s do not match (aligned from the last dimension, each pair of "
                       "sizes must be equal or one of them 1)", sa, sb);
}
