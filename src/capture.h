/* lumus.capture: a function's ops recorded once into a graph that g:replay() submits
 * again, with no recording and no argument checks (docs/capture.md).
 *
 * While a capture records, lm_record_dispatch hands each tensor of a dispatch to
 * lm_capture_hold, which gives the graph a reference on its storage (and anchors the
 * storage's userdata), so the memory the graph's commands address stays the graph's
 * until it is freed. Storages alive when the capture began are its inputs: a replay
 * refuses to run once the script has freed every tensor over one of them. */
#ifndef LUMUS_CAPTURE_H
#define LUMUS_CAPTURE_H

#include <lua.h>
#include "tensor.h"

#define LM_GRAPH_MT "lumus.Graph"

/* Holds t's storage in the graph being recorded (ctx->stream.recording). t must be
 * live and its userdata on L's stack (as every tensor an op uses is, see ops.h). Raises
 * naming lumus.capture and `op` for what cannot be captured. May run Lua allocation:
 * call it before the op's last liveness check. */
void lm_capture_hold(lua_State *L, lm_context *ctx, const lm_tensor *t, const char *op);

/* lumus.capture(fn) -> graph, fn's results. */
int lm_capture(lua_State *L);
/* Registers the lumus.Graph metatable. */
void lm_capture_register(lua_State *L);

#endif
