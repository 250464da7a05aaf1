/* The unary elementwise ops: t -> f(t), same shape and dtype (float32, float16 or
 * bfloat16; views read by their strides). Each is one line of UNARY_OPS (name, kernel op
 * code from shaders/common/elementwise_ops.h, the number the kernel gets as b); the
 * table registers it as lumus.<name> and as a Tensor method (lm_unary_ops). clamp takes
 * its bounds as numbers. */
#include "elementwise.h"
#include <lauxlib.h>
#include <math.h>

/* -t as t * -1, which IEEE arithmetic makes exact (signed zeros included); 1 / t as the
 * number 1 divided by t (lumus.div's kernel). */
#define UNARY_OPS(X)                              \
    X(neg,       LM_EW_MUL,       -1.0f)          \
    X(relu,      LM_EW_RELU,      0.0f)           \
    X(erf,       LM_EW_ERF,       0.0f)           \
    X(gelu_tanh, LM_EW_GELU_TANH, 0.0f)           \
    X(gelu_erf,  LM_EW_GELU_ERF,  0.0f)           \
    X(abs,       LM_EW_ABS,       0.0f)           \
    X(exp,       LM_EW_EXP,       0.0f)           \
    X(log,       LM_EW_LOG,       0.0f)           \
    X(sqrt,      LM_EW_SQRT,      0.0f)           \
    X(rsqrt,     LM_EW_RSQRT,     0.0f)           \
    X(tanh,      LM_EW_TANH,      0.0f)           \
    X(sigmoid,   LM_EW_SIGMOID,   0.0f)           \
    X(silu,      LM_EW_SILU,      0.0f)           \
    X(square,    LM_EW_SQUARE,    0.0f)           \
    X(reciprocal, LM_EW_RDIV,     1.0f)           \
    X(floor,     LM_EW_FLOOR,     0.0f)           \
    X(ceil,      LM_EW_CEIL,      0.0f)           \
    X(round,     LM_EW_ROUND,     0.0f)           \
    X(trunc,     LM_EW_TRUNC,     0.0f)           \
    X(sign,      LM_EW_SIGN,      0.0f)           \
    X(sin,       LM_EW_SIN,       0.0f)           \
    X(cos,       LM_EW_COS,       0.0f)           \
    X(expm1,     LM_EW_EXPM1,     0.0f)           \
    X(log1p,     LM_EW_LOG1P,     0.0f)           \
    X(log2,      LM_EW_LOG2,      0.0f)           \
    X(log10,     LM_EW_LOG10,     0.0f)           \
    X(exp2,      LM_EW_EXP2,      0.0f)           \
    X(tan,       LM_EW_TAN,       0.0f)           \
    X(atan,      LM_EW_ATAN,      0.0f)           \
    X(asin,      LM_EW_ASIN,      0.0f)           \
    X(acos,      LM_EW_ACOS,      0.0f)           \
    X(sinh,      LM_EW_SINH,      0.0f)           \
    X(cosh,      LM_EW_COSH,      0.0f)           \
    X(asinh,     LM_EW_ASINH,     0.0f)           \
    X(acosh,     LM_EW_ACOSH,     0.0f)           \
    X(atanh,     LM_EW_ATANH,     0.0f)

/* Records f(t) (with the numbers b, c) into opts.out (argument argn, options already
 * checked) or a new tensor, and returns it. */
static int unary_checked(lua_State *L, int argn, const char *name, lm_ew_op op, float b, float c) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lm_ew_check_float(L, 1, t);
    lm_operands in = { { t }, { "t" } };
    lm_tensor *out = lm_ew_push_result(L, argn, t->storage->ctx, t->dtype, t->ndim, t->shape, &in);
    lm_record_ew(L, &(lm_ew_call){
        .name = name, .op = op, .reversed = op, .dtype = t->dtype,
        .t = { t }, .scalar = { 0.0f, b, c }, .out = out,
    });
    return 1;
}

static int unary(lua_State *L, const char *name, lm_ew_op op, float scalar) {
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, lm_out_option);
    return unary_checked(L, 2, name, op, scalar, 0.0f);
}

/* unary_<name>, not l_<name>: luaconf.h defines l_floor. */
#define UNARY_FUNCTION(name, op, scalar) \
    static int unary_##name(lua_State *L) { return unary(L, #name, op, scalar); }
UNARY_OPS(UNARY_FUNCTION)

/* lumus.gelu(t [, {approximate = "none" | "tanh", out =}]): the erf form by default, as
 * in PyTorch. */
static int l_gelu(lua_State *L) {
    static const char *const known[] = { "approximate", "out", NULL };
    static const char *const forms[] = { "none", "tanh", NULL };
    lm_check_tensor(L, 1);
    lm_check_options(L, 2, known);
    int tanh_form = lm_option_choice(L, 2, "approximate", forms, 0) == 1;
    return tanh_form ? unary_checked(L, 2, "gelu_tanh", LM_EW_GELU_TANH, 0.0f, 0.0f)
                     : unary_checked(L, 2, "gelu_erf", LM_EW_GELU_ERF, 0.0f, 0.0f);
}

/* A bound of clamp at argument idx: a number, or nil for none (-inf or +inf). */
static float clamp_bound(lua_State *L, int idx, float none) {
    if (lua_isnoneornil(L, idx)) return none;
    if (lua_type(L, idx) != LUA_TNUMBER) lm_typeerror(L, idx, "number or nil");
    return lm_ew_float(lua_tonumber(L, idx));
}

/* lumus.clamp(t, min, max [, opts]): minimum(maximum(t, min), max), a nil bound being
 * none; NaN in t or a NaN bound gives NaN, and min > max gives max, as in PyTorch. */
static int l_clamp(lua_State *L) {
    lm_check_tensor(L, 1);
    float lo = clamp_bound(L, 2, -INFINITY), hi = clamp_bound(L, 3, INFINITY);
    lm_check_options(L, 4, lm_out_option);
    if (lua_isnoneornil(L, 2) && lua_isnoneornil(L, 3))
        lm_argerror(L, 2, "at least one of min and max must be a number");
    return unary_checked(L, 4, "clamp", LM_EW_CLAMP, lo, hi);
}

/* lumus.gelu_backward(grad, x [, {approximate = "none" | "tanh", out =}]): grad times
 * gelu's derivative at x, in one pass (autograd's backward of gelu); grad and x of one
 * shape and float dtype. */
static int l_gelu_backward(lua_State *L) {
    static const char *const known[] = { "approximate", "out", NULL };
    static const char *const forms[] = { "none", "tanh", NULL };
    lm_tensor *g = lm_check_tensor(L, 1);
    lm_tensor *x = lm_check_tensor(L, 2);
    lm_check_options(L, 3, known);
    int tanh_form = lm_option_choice(L, 3, "approximate", forms, 0) == 1;
    lm_ew_check_float(L, 1, g);
    lm_ew_check_float(L, 2, x);
    lm_ew_check_same_dtype(L, 2, g, x);
    int same = g->ndim == x->ndim;
    for (int i = 0; same && i < g->ndim; i++) same = g->shape[i] == x->shape[i];
    if (!same) {
        char gs[256], xs[256];
        lm_shape_string(g->shape, g->ndim, gs, sizeof gs);
        lm_shape_string(x->shape, x->ndim, xs, sizeof xs);
        lm_argerror(L, 2, "x must have grad's shape %s, got %s", gs, xs);
    }
    if (x->storage->ctx != g->storage->ctx) luaL_error(L, "gelu_backward: tensors belong to different devices");
    lm_operands in = { { g, x }, { "grad", "x" } };
    lm_tensor *out = lm_ew_push_result(L, 3, g->storage->ctx, g->dtype, g->ndim, g->shape, &in);
    lm_ew_op op = tanh_form ? LM_EW_GELU_TANH_GRAD : LM_EW_GELU_ERF_GRAD;
    lm_record_ew(L, &(lm_ew_call){
        .name = "gelu_backward", .op = op, .reversed = op, .dtype = g->dtype,
        .t = { g, x }, .out = out,
    });
    return 1;
}

#define UNARY_ENTRY(name, op, scalar) { #name, unary_##name },
const luaL_Reg lm_unary_ops[] = {
    UNARY_OPS(UNARY_ENTRY)
    { "gelu", l_gelu },
    { "clamp", l_clamp },
    { "gelu_backward", l_gelu_backward },
    { NULL, NULL }
};
