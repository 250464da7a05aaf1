/* Random numbers (random.c) and arange (arange.c): the functions lumus_core.c registers. */
#ifndef LUMUS_OPS_RANDOM_H
#define LUMUS_OPS_RANDOM_H

#include <lua.h>

int lm_op_manual_seed(lua_State *L);    /* lumus.manual_seed(n) */
int lm_op_get_rng_state(lua_State *L);  /* lumus.get_rng_state() -> {seed =, offset =} */
int lm_op_set_rng_state(lua_State *L);  /* lumus.set_rng_state(s) */
int lm_op_rand(lua_State *L);           /* lumus.rand(shape [, {dtype=}]) */
int lm_op_randn(lua_State *L);          /* lumus.randn(shape [, {dtype=}]) */
int lm_op_uniform_(lua_State *L);       /* t:uniform_([from [, to]]) */
int lm_op_normal_(lua_State *L);        /* t:normal_([mean [, std]]) */
int lm_op_multinomial(lua_State *L);    /* lumus.multinomial(probs, n [, {replacement=}]) */
int lm_op_arange(lua_State *L);         /* lumus.arange([start,] stop [, step] [, {dtype=}]) */

#endif
