/* Elementwise kernels (shaders/elementwise.comp): the op codes, which are the shader's
 * OP specialization constant, and the recording shared by the binary and unary ops. */
#ifndef LUMUS_OPS_ELEMENTWISE_H
#define LUMUS_OPS_ELEMENTWISE_H

#include "ops.h"

typedef enum lm_ew_op {   /* the same numbers as OP_* in shaders/elementwise.comp */
    LM_EW_ADD, LM_EW_SUB, LM_EW_MUL, LM_EW_DIV, LM_EW_RSUB, LM_EW_RDIV,
    LM_EW_RELU, LM_EW_GELU_TANH, LM_EW_GELU_ERF, LM_EW_ERF
} lm_ew_op;

/* Records out = op(a, b) where b is a tensor with a's element count or a trailing part of
 * a's shape (repeated), or, when b is NULL, the number `scalar` (ignored by unary ops).
 * Shapes are the caller's to check. `name` names the op in device errors. */
void lm_record_elementwise(lua_State *L, const char *name, lm_ew_op op, lm_tensor *a,
                           lm_tensor *b, float scalar, lm_tensor *out);

#endif
