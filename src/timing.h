/* Device timing for users. */
#ifndef LUMUS_TIMING_H
#define LUMUS_TIMING_H
#include <lua.h>
int lm_gpu_time(lua_State *L);   /* lumus.gpu_time(fn, ...) -> seconds, fn's results... */
int lm_clock(lua_State *L);      /* lumus.clock() -> monotonic seconds */
#endif
