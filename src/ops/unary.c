/* lumus.neg, relu, gelu (gelu_tanh, gelu_erf) and erf: t -> f(t), elementwise. */
#include "elementwise.h"
#include <lauxlib.h>
#include <string.h>

/* Records f(t) into opts.out (argument 2) or a new tensor, and returns it. */
static int unary(lua_State *L, const char *name, lm_ew_op op, float scalar) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lm_operands in = { { t }, { "t" } };
    lm_tensor *out = lm_push_out(L, 2, t->storage->ctx, t->ndim, t->shape, &in, 1);
    lm_record_elementwise(L, name, op, t, NULL, scalar, out);
    return 1;
}

/* -t as t * -1, which IEEE arithmetic makes exact (signed zeros included). */
int lm_op_neg(lua_State *L) { return unary(L, "neg", LM_EW_MUL, -1.0f); }
int lm_op_relu(lua_State *L) { return unary(L, "relu", LM_EW_RELU, 0.0f); }
int lm_op_erf(lua_State *L) { return unary(L, "erf", LM_EW_ERF, 0.0f); }
int lm_op_gelu_tanh(lua_State *L) { return unary(L, "gelu_tanh", LM_EW_GELU_TANH, 0.0f); }
int lm_op_gelu_erf(lua_State *L) { return unary(L, "gelu_erf", LM_EW_GELU_ERF, 0.0f); }

/* lumus.gelu(t [, {approximate = "none" | "tanh", out =}]): the erf form by default, as
 * in PyTorch. */
int lm_op_gelu(lua_State *L) {
    lm_ew_op op = LM_EW_GELU_ERF;
    if (lm_check_opts(L, 2)) {
        int ty = lua_getfield(L, 2, "approximate");
        const char *s = ty == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        if (s && strcmp(s, "tanh") == 0) op = LM_EW_GELU_TANH;
        else if (ty != LUA_TNIL && !(s && strcmp(s, "none") == 0)) {
            lua_pushfstring(L, "approximate must be \"none\" or \"tanh\", got %s%s%s",
                            s ? "\"" : "", s ? s : luaL_typename(L, -1), s ? "\"" : "");
            luaL_argerror(L, 2, lua_tostring(L, -1));
        }
        lua_pop(L, 1);
    }
    return unary(L, op == LM_EW_GELU_TANH ? "gelu_tanh" : "gelu_erf", op, 0.0f);
}
