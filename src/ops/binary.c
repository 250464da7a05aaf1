/* The binary elementwise ops: add, sub, mul, div, pow, maximum, minimum, atan2 (and the
 * comparisons of compare.c through lm_ew_binary), and scale.
 *
 * Operands are tensors or numbers (at least one a tensor). Tensors broadcast by
 * NumPy/PyTorch rules (broadcast.h) and must have the same float dtype; the result has
 * the broadcast shape and their dtype (bool for comparisons). Numbers are float32
 * operands of the float32 arithmetic, whatever the tensor's dtype. */
#include "elementwise.h"
#include <lauxlib.h>

static const lm_binary_op ADD = { "add", LM_EW_ADD, LM_EW_ADD, 0 };
static const lm_binary_op SUB = { "sub", LM_EW_SUB, LM_EW_RSUB, 0 };
static const lm_binary_op MUL = { "mul", LM_EW_MUL, LM_EW_MUL, 0 };
static const lm_binary_op DIV = { "div", LM_EW_DIV, LM_EW_RDIV, 0 };
static const lm_binary_op POW = { "pow", LM_EW_POW, LM_EW_RPOW, 0 };
static const lm_binary_op MAXIMUM = { "maximum", LM_EW_MAXIMUM, LM_EW_MAXIMUM, 0 };
static const lm_binary_op MINIMUM = { "minimum", LM_EW_MINIMUM, LM_EW_MINIMUM, 0 };
static const lm_binary_op ATAN2 = { "atan2", LM_EW_ATAN2, LM_EW_RATAN2, 0 };

/* The tensor at idx, or NULL for a number; anything else raises. */
static lm_tensor *tensor_or_number(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TNUMBER) return NULL;
    if (!luaL_testudata(L, idx, LM_TENSOR_MT)) lm_typeerror(L, idx, "tensor or number");
    return lm_check_tensor(L, idx);
}

/* pow(t, y) for the numbers y that PyTorch computes otherwise than by pow (so that,
 * e.g., pow(-8, 0.5) is sqrt's NaN and pow(-0, 0.5) is -0, as there): the op, with
 * *scalar set where it takes one; 0 for the general pow. */
static lm_ew_op pow_special(float y, float *scalar) {
    if (y == 2.0f) return LM_EW_SQUARE;
    if (y == 3.0f) return LM_EW_CUBE;
    if (y == 0.5f) return LM_EW_SQRT;
    if (y == -0.5f) return LM_EW_RSQRT;
    if (y == -2.0f) return LM_EW_RSQUARE;
    if (y == 1.0f) return LM_EW_COPY;
    if (y == -1.0f) { *scalar = 1.0f; return LM_EW_RDIV; }
    return 0;
}

int lm_ew_binary(lua_State *L, const lm_binary_op *o) {
    lm_tensor *a = tensor_or_number(L, 1);
    lm_tensor *b = tensor_or_number(L, 2);
    if (!a && !b) lm_argerror(L, 1, "tensor expected (both operands are numbers)");
    lm_check_options(L, 3, lm_out_option);
    if (a) lm_ew_check_float(L, 1, a);
    if (b) lm_ew_check_float(L, 2, b);
    if (a && b) lm_ew_check_same_dtype(L, 2, a, b);
    const lm_tensor *both[2] = { a, b };
    int ndim;
    int64_t shape[LM_MAX_DIMS];
    if (lm_broadcast_shape(2, both, &ndim, shape) >= 0) lm_broadcast_error(L, 2, a, b);
    lm_tensor *any = a ? a : b;
    lm_context *ctx = any->storage->ctx;
    if (a && b && b->storage->ctx != ctx) luaL_error(L, "%s: tensors belong to different devices", o->name);
    lm_dtype dtype = any->dtype;
    lm_operands in = { { a, b }, { "a", "b" } };
    lm_tensor *out = lm_ew_push_result(L, 3, ctx, o->compare ? LM_BOOL : dtype, ndim, shape, &in);
    lm_ew_call c = {
        .name = o->name, .op = o->op, .reversed = o->reversed, .dtype = dtype,
        .t = { a, b }, .out = out,
    };
    if (!a) c.scalar[0] = lm_ew_float(lua_tonumber(L, 1));
    if (!b) c.scalar[1] = lm_ew_float(lua_tonumber(L, 2));
    if (o->op == LM_EW_POW && !b) {
        lm_ew_op special = pow_special(c.scalar[1], &c.scalar[1]);
        if (special) c.op = special;
    }
    lm_record_ew(L, &c);
    return 1;
}

int lm_op_add(lua_State *L) { return lm_ew_binary(L, &ADD); }
int lm_op_sub(lua_State *L) { return lm_ew_binary(L, &SUB); }
int lm_op_mul(lua_State *L) { return lm_ew_binary(L, &MUL); }
int lm_op_div(lua_State *L) { return lm_ew_binary(L, &DIV); }
int lm_op_pow(lua_State *L) { return lm_ew_binary(L, &POW); }
int lm_op_maximum(lua_State *L) { return lm_ew_binary(L, &MAXIMUM); }
int lm_op_minimum(lua_State *L) { return lm_ew_binary(L, &MINIMUM); }
int lm_op_atan2(lua_State *L) { return lm_ew_binary(L, &ATAN2); }

/* lumus.scale(t, s [, opts]): t * s for a number s. */
int lm_op_scale(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    float s = lm_ew_float(lm_check_number(L, 2));
    lm_check_options(L, 3, lm_out_option);
    lm_ew_check_float(L, 1, t);
    lm_operands in = { { t }, { "t" } };
    lm_tensor *out = lm_ew_push_result(L, 3, t->storage->ctx, t->dtype, t->ndim, t->shape, &in);
    lm_record_ew(L, &(lm_ew_call){
        .name = "scale", .op = LM_EW_MUL, .reversed = LM_EW_MUL, .dtype = t->dtype,
        .t = { t, NULL }, .scalar = { 0.0f, s }, .out = out,
    });
    return 1;
}
