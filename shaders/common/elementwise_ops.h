/* Codes of the elementwise kernel (shaders/elementwise.comp), shared by C
 * (src/ops/elementwise.h) and GLSL, so plain #defines only. */
#ifndef LUMUS_ELEMENTWISE_OPS_H
#define LUMUS_ELEMENTWISE_OPS_H

/* The op, specialization constant 1: out = op(a, b). */
#define LM_EW_ADD 0
#define LM_EW_SUB 1
#define LM_EW_MUL 2
#define LM_EW_DIV 3
#define LM_EW_RSUB 4        /* b - a (a number first: 2 - t) */
#define LM_EW_RDIV 5        /* b / a */
#define LM_EW_RELU 6
#define LM_EW_GELU_TANH 7
#define LM_EW_GELU_ERF 8
#define LM_EW_ERF 9
#define LM_EW_ABS 10

/* Where b comes from, specialization constant 2. */
#define LM_EW_SAME 0        /* b has a's element count; b[k] pairs with a[k] */
#define LM_EW_BCAST 1       /* b is a trailing part of a's shape, repeated */
#define LM_EW_SCALAR 2      /* b is the number p.scalar (unary ops ignore it) */

#endif
