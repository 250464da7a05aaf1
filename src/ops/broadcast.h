/* Broadcasting by NumPy/PyTorch rules, for any op that combines tensors elementwise:
 * shapes are aligned from their last dimension; each pair of sizes is equal, or one of
 * them is 1 (or missing), and the result takes the larger. */
#ifndef LUMUS_OPS_BROADCAST_H
#define LUMUS_OPS_BROADCAST_H

#include "ops.h"

/* The shape the n tensors (NULL entries, numbers, take no part) broadcast to, into
 * *ndim and shape (at least one dimension; all NULL gives {1}). Returns -1 when they
 * broadcast, else the index of the first tensor that does not fit those before it. */
int lm_broadcast_shape(int n, const lm_tensor *const *t, int *ndim, int64_t *shape);

/* t's strides (elements) when viewed with the broadcast shape `shape`: 0 along the
 * dimensions it repeats over (size 1, or missing in front). */
void lm_broadcast_strides(const lm_tensor *t, int ndim, const int64_t *shape, int64_t *strides);

/* Raises "shapes AxB and C do not match (...)" at argument argn. */
int lm_broadcast_error(lua_State *L, int argn, const lm_tensor *a, const lm_tensor *b);

#endif
