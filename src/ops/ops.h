/* Kernels: argument checks, variant choice and dispatch, one op per file. */
#ifndef LUMUS_OPS_H
#define LUMUS_OPS_H

#include <lua.h>
#include "../tensor.h"

/* Records t[:] = v into the stream. */
void lm_record_fill(lua_State *L, lm_tensor *t, float v);
/* Records dst[:] = src[:] (same element count) into the stream. */
void lm_record_copy(lua_State *L, lm_tensor *src, lm_tensor *dst);

int lm_op_fill(lua_State *L);          /* lumus.fill(t, v) */
int lm_op_copy(lua_State *L);          /* lumus.copy(src [, {out=}]) */
int lm_op_layer_norm_forward(lua_State *L);
int lm_op_layer_norm_config(lua_State *L);

/* Reads the optional out tensor of an op: opts.out at argument `argn`, which must have
 * the given shape; returns NULL when absent. `what` names the op for messages. */
lm_tensor *lm_opt_out(lua_State *L, int argn, const char *field, int ndim, const int64_t *shape);

#endif
