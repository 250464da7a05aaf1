/* lumus.add, sub, mul, div and scale: argument checks, broadcasting and the result.
 *
 * Operands are tensors or numbers (at least one tensor). Two tensors must have the same
 * shape, or one's shape must equal a trailing part of the other's (a [R, D] + b [D]);
 * the result has the larger shape and the smaller operand repeats over its leading
 * dimensions. A number, or the smaller tensor, may come first: the kernel then runs the
 * reversed op (2 - t is RSUB(t, 2)). */
#include "elementwise.h"
#include <lauxlib.h>

typedef struct binary_op { const char *name; lm_ew_op op, reversed; } binary_op;

static const binary_op ADD = { "add", LM_EW_ADD, LM_EW_ADD };
static const binary_op SUB = { "sub", LM_EW_SUB, LM_EW_RSUB };
static const binary_op MUL = { "mul", LM_EW_MUL, LM_EW_MUL };
static const binary_op DIV = { "div", LM_EW_DIV, LM_EW_RDIV };

/* The tensor at idx, or NULL for a number; anything else raises. */
static lm_tensor *tensor_or_number(lua_State *L, int idx) {
    if (lua_type(L, idx) == LUA_TNUMBER) return NULL;
    if (!luaL_testudata(L, idx, LM_TENSOR_MT)) lm_typeerror(L, idx, "tensor or number");
    return lm_check_tensor(L, idx);
}

/* Is small's shape a trailing part of big's (or equal to it)? */
static int is_trailing(const lm_tensor *small, const lm_tensor *big) {
    if (small->ndim > big->ndim) return 0;
    for (int i = 1; i <= small->ndim; i++)
        if (small->shape[small->ndim - i] != big->shape[big->ndim - i]) return 0;
    return 1;
}

static int binary(lua_State *L, const binary_op *o) {
    lm_contiguous_inputs(L, 1, 2);
    lm_tensor *a = tensor_or_number(L, 1);
    lm_tensor *b = tensor_or_number(L, 2);
    if (!a && !b) lm_argerror(L, 1, "tensor expected (both operands are numbers)");
    lm_check_options(L, 3, lm_out_option);
    lm_ew_op op = o->op;
    lm_tensor *big = a, *small = b;
    int small_arg = 2;
    if (!a || (b && b->ndim > a->ndim)) {
        big = b; small = a; small_arg = 1;
        op = o->reversed;
    }
    if (small && !is_trailing(small, big)) {
        char sa[256], sb[256];
        lm_shape_string(a->shape, a->ndim, sa, sizeof sa);
        lm_shape_string(b->shape, b->ndim, sb, sizeof sb);
        /* argument 2: never "bad self" for t:add(u) */
        lm_argerror(L, 2, "shapes %s and %s do not match (one must equal the other or a trailing part of it)", sa, sb);
    }
    lm_context *ctx = big->storage->ctx;
    if (small && small->storage->ctx != ctx) luaL_error(L, "%s: tensors belong to different devices", o->name);
    float scalar = small ? 0.0f : (float)lua_tonumber(L, small_arg);
    lm_operands in = { { a, b }, { "a", "b" } };
    lm_tensor *out = lm_push_out(L, 3, ctx, big->ndim, big->shape, &in, 1);
    lm_record_elementwise(L, o->name, op, big, small, scalar, out);
    return 1;
}

int lm_op_add(lua_State *L) { return binary(L, &ADD); }
int lm_op_sub(lua_State *L) { return binary(L, &SUB); }
int lm_op_mul(lua_State *L) { return binary(L, &MUL); }
int lm_op_div(lua_State *L) { return binary(L, &DIV); }

/* lumus.scale(t, s [, opts]): t * s for a number s. */
int lm_op_scale(lua_State *L) {
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *t = lm_check_tensor(L, 1);
    float s = (float)lm_check_number(L, 2);
    lm_check_options(L, 3, lm_out_option);
    lm_operands in = { { t }, { "t" } };
    lm_tensor *out = lm_push_out(L, 3, t->storage->ctx, t->ndim, t->shape, &in, 1);
    lm_record_elementwise(L, "scale", LM_EW_MUL, t, NULL, s, out);
    return 1;
}
