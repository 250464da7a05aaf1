/* The unary elementwise ops: t -> f(t). Each is one line of UNARY_OPS (name, kernel op
 * code from shaders/common/elementwise_ops.h, the number the kernel gets as b); the
 * table registers it as lumus.<name> and as a Tensor method (lm_unary_ops). */
#include "elementwise.h"
#include <lauxlib.h>

/* -t as t * -1, which IEEE arithmetic makes exact (signed zeros included). */
#define UNARY_OPS(X)                              \
    X(neg,       LM_EW_MUL,       -1.0f)          \
    X(relu,      LM_EW_RELU,      0.0f)           \
    X(erf,       LM_EW_ERF,       0.0f)           \
    X(gelu_tanh, LM_EW_GELU_TANH, 0.0f)           \
    X(gelu_erf,  LM_EW_GELU_ERF,  0.0f)           \
    X(abs,       LM_EW_ABS,       0.0f)

/* Records f(t) into opts.out (argument 2, options already checked) or a new tensor, and
 * returns it. */
static int unary_checked(lua_State *L, const char *name, lm_ew_op op, float scalar) {
    lm_contiguous_inputs(L, 1, 1);
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

#define UNARY_FUNCTION(name, op, scalar) \
    static int l_##name(lua_State *L) { return unary(L, #name, op, scalar); }
UNARY_OPS(UNARY_FUNCTION)

/* lumus.gelu(t [, {approximate = "none" | "tanh", out =}]): the erf form by default, as
 * in PyTorch. */
static int l_gelu(lua_State *L) {
    static const char *const known[] = { "approximate", "out", NULL };
    static const char *const forms[] = { "none", "tanh", NULL };
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, known);
    int tanh_form = lm_option_choice(L, 2, "approximate", forms, 0) == 1;
    return tanh_form ? unary_checked(L, "gelu_tanh", LM_EW_GELU_TANH, 0.0f)
                     : unary_checked(L, "gelu_erf", LM_EW_GELU_ERF, 0.0f);
}

#define UNARY_ENTRY(name, op, scalar) { #name, l_##name },
const luaL_Reg lm_unary_ops[] = {
    UNARY_OPS(UNARY_ENTRY)
    { "gelu", l_gelu },
    { NULL, NULL }
};
