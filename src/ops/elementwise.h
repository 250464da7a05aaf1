/* Elementwise kernels (shaders/elementwise.comp): the op codes, which are the shader's
 * OP specialization constant, and the recording shared by the binary and unary ops. */
#ifndef LUMUS_OPS_ELEMENTWISE_H
#define LUMUS_OPS_ELEMENTWISE_H

#include "ops.h"
#include "../../shaders/common/elementwise_ops.h"

/* One of the op codes LM_EW_ADD... of shaders/common/elementwise_ops.h, which the shader
 * includes too. */
typedef uint32_t lm_ew_op;

/* Records out = op(a, b) where b is a tensor with a's element count or a trailing part of
 * a's shape (repeated), or, when b is NULL, the number `scalar` (ignored by unary ops).
 * Shapes are the caller's to check. `name` names the op in device errors. */
void lm_record_elementwise(lua_State *L, const char *name, lm_ew_op op, lm_tensor *a,
                           lm_tensor *b, float scalar, lm_tensor *out);

#endif
