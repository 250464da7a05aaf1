/* Counter words for kernels whose workgroups count themselves in, the last of a group
 * finishing the group's work (group_counters.c). */
#ifndef LUMUS_GROUP_COUNTERS_H
#define LUMUS_GROUP_COUNTERS_H

#include <stdint.h>
#include <lua.h>
#include "../tensor.h"

/* Sets *view to `n` counter words, all 0, for one dispatch whose kernel leaves them 0
 * again (each group's last workgroup resets its word). The context's kept words
 * (slot LM_SCRATCH_GROUP_COUNTERS), made or grown and zeroed by a recorded fill when
 * too few, zeroed again after a failed batch (which may have left counts behind); while
 * a graph is captured, which cannot hold scratch, a fresh zeroed tensor pushed on the
 * stack. Returns whether it pushed one. May raise (out of device memory). */
int lm_group_counters(lua_State *L, lm_context *ctx, uint64_t n, lm_tensor *view);

#endif
