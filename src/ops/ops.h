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

/* Hostile scripts: any allocation can run Lua code (a finalizer), which may free a tensor
 * an op has already checked or drop the last reference to an opts.out tensor. So an op
 * keeps every tensor it uses on the stack (lm_push_field pushes opts[field], read raw,
 * or nil), allocates its results, and only then checks all of them again (lm_check_tensor,
 * lm_check_out on the same slots) before recording; nothing between that last check and
 * lm_stream_op_done may allocate from Lua. */
void lm_push_field(lua_State *L, int table_idx, const char *field);
/* The out tensor at stack slot idx (nil: NULL): live and of the given shape; messages
 * name it as `field` of argument `argn`. */
lm_tensor *lm_check_out(lua_State *L, int idx, int argn, const char *field, int ndim, const int64_t *shape);

#endif
