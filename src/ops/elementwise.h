/* Elementwise kernels (shaders/elementwise.comp): the op codes, which are the shader's
 * OP specialization constant, and the recording and argument helpers shared by the
 * unary, binary, comparison and where ops. */
#ifndef LUMUS_OPS_ELEMENTWISE_H
#define LUMUS_OPS_ELEMENTWISE_H

#include "ops.h"
#include "broadcast.h"
#include "../../shaders/common/elementwise_ops.h"

/* One of the op codes LM_EW_ADD... of shaders/common/elementwise_ops.h, which the shader
 * includes too. */
typedef uint32_t lm_ew_op;

/* One elementwise call: out = op(t0, t1, t2) over the result's shape, each operand a
 * tensor that broadcasts to it (any strides, views included) or, where t[k] is NULL,
 * the number scalar[k]. The op decides how many operands it uses (op_arity in
 * elementwise.c, ARITY in the shader). `dtype` is the data's
 * (float32, float16 or bfloat16; comparisons write bool, where's t0 is bool). `reversed`
 * is the op with its first two operands swapped (a - b -> RSUB), which lets the
 * recording put a full-shape operand first. Shapes, dtypes and devices are the
 * caller's to check; `name` names the op in device errors. */
typedef struct lm_ew_call {
    const char *name;
    lm_ew_op op, reversed;
    lm_dtype dtype;
    lm_tensor *t[3];
    float scalar[3];
    lm_tensor *out;
} lm_ew_call;

/* Records the call: the vec4 kernel when every tensor operand is plain (tensor.h) and
 * of the result's shape, or a plain trailing part of it repeated (a bias row); else the
 * strided kernel, which reads each operand through its broadcast strides. */
void lm_record_ew(lua_State *L, const lm_ew_call *c);

/* Is this a dtype the elementwise ops compute on (float32, float16, bfloat16)? */
int lm_ew_float_dtype(lm_dtype d);
/* v as a float32 operand: rounded to nearest, +-inf beyond float32's range. */
float lm_ew_float(double v);
/* Raises unless t's dtype is one the ops compute on: "dtype int32 is not supported
 * (float32, float16 or bfloat16)", naming argument argn. */
void lm_ew_check_float(lua_State *L, int argn, const lm_tensor *t);
/* Raises "dtypes float32 and float16 differ (convert with :to())" at argument argn. */
void lm_ew_check_same_dtype(lua_State *L, int argn, const lm_tensor *a, const lm_tensor *b);

/* Pushes the result: opts.out (options at argument argn, already checked) when given,
 * checked for shape, dtype, device and overlap (an input exactly is allowed: in place),
 * else a new tensor of this dtype and shape. Then checks that the inputs `in` are still
 * live (an allocation may have run a finalizer). */
lm_tensor *lm_ew_push_result(lua_State *L, int argn, lm_context *ctx, lm_dtype dtype, int ndim,
                             const int64_t *shape, const lm_operands *in);

/* A binary op: name, op code, its reversal (see lm_ew_call), and whether it compares
 * (bool result). */
typedef struct lm_binary_op { const char *name; lm_ew_op op, reversed; int compare; } lm_binary_op;
/* lumus.<op>(a, b [, opts]), a and b tensors or numbers (one at least a tensor), broadcast
 * (binary.c). */
int lm_ew_binary(lua_State *L, const lm_binary_op *o);

#endif
