/* lumus.neg, relu, gelu (gelu_tanh, gelu_erf) and erf: t -> f(t), elementwise. */
#include "elementwise.h"
#include <lauxlib.h>

/* Records f(t) into opts.out (argument 2, options already checked) or a new tensor, and
 * returns it. */
static int unary_checked(lua_State *L, const char *name, lm_ew_op op, float scalar) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lm_operands in = { { t }, { "t" } };
    lm_tensor *out = lm_push_out(L, 2, t->storage->ctx, t->ndim, t->shape, &in, 1);
    lm_record_elementwise(L, name, op, t, NULL, scalar, out);
    return 1;
}

static int unary(lua_State *L, const char *name, lm_ew_op op, float scalar) {
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, lm_out_option);
    return unary_checked(L, name, op, scalar);
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
    static const char *const known[] = { "approximate", "out", NULL };
    static const char *const forms[] = { "none", "tanh", NULL };
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, known);
    int tanh_form = lm_option_choice(L, 2, "approximate", forms, 0) == 1;
    return tanh_form ? unary_checked(L, "gelu_tanh", LM_EW_GELU_TANH, 0.0f)
                     : unary_checked(L, "gelu_erf", LM_EW_GELU_ERF, 0.0f);
}
