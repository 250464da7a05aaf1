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
#define LM_EW_EXP 11
#define LM_EW_LOG 12
#define LM_EW_SQRT 13
#define LM_EW_RSQRT 14
#define LM_EW_TANH 15
#define LM_EW_SIGMOID 16
#define LM_EW_SILU 17
#define LM_EW_POW 18        /* a^b with C's pow special cases */
#define LM_EW_RPOW 19       /* b^a (a number base: 2^t) */
#define LM_EW_SQUARE 20     /* a * a (pow by the number 2, as PyTorch) */
#define LM_EW_CUBE 21       /* a * a * a (pow by 3) */
#define LM_EW_RSQUARE 22    /* 1 / (a * a) (pow by -2) */
#define LM_EW_MAXIMUM 23    /* NaN if either is NaN */
#define LM_EW_MINIMUM 24
#define LM_EW_CLAMP 25      /* minimum(maximum(a, b), c): b, c the bounds */
#define LM_EW_EQ 26         /* comparisons: a bool result, false for NaN (ne: true) */
#define LM_EW_NE 27
#define LM_EW_LT 28
#define LM_EW_LE 29
#define LM_EW_GT 30
#define LM_EW_GE 31
#define LM_EW_WHERE 32      /* a (a bool mask) ? b : c */
#define LM_EW_COPY 33       /* a */
#define LM_EW_GELU_TANH_GRAD 34   /* a * gelu_tanh'(b): a the gradient, b gelu's input */
#define LM_EW_GELU_ERF_GRAD 35    /* a * gelu_erf'(b) */
#define LM_EW_FLOOR 36
#define LM_EW_CEIL 37
#define LM_EW_ROUND 38      /* to nearest, halves to even (torch.round) */
#define LM_EW_TRUNC 39
#define LM_EW_SIGN 40       /* -1, 0 or 1; 0 for NaN and for -0 (PyTorch's (0 < a) - (a < 0)) */
#define LM_EW_SIN 41
#define LM_EW_COS 42
#define LM_EW_EXPM1 43      /* e^a - 1, exact near 0 */
#define LM_EW_LOG1P 44      /* log(1 + a), exact near 0 */
#define LM_EW_LOG2 45       /* exact at powers of 2 */
#define LM_EW_LOG10 46
#define LM_EW_EXP2 47       /* exact at integers */
#define LM_EW_TAN 48
#define LM_EW_ATAN 49
#define LM_EW_ASIN 50
#define LM_EW_ACOS 51
#define LM_EW_ATAN2 52      /* atan2(a, b): the angle of (b, a), C's special cases */
#define LM_EW_RATAN2 53     /* atan2(b, a) (a number first) */
#define LM_EW_SINH 54
#define LM_EW_COSH 55
#define LM_EW_ASINH 56
#define LM_EW_ACOSH 57
#define LM_EW_ATANH 58

/* Op families: each SPIR-V variant of shaders/elementwise.comp holds one family's ops
 * (the EW_FAMILY define), so that a driver building a pipeline translates only that
 * family's code (all ops in one module took lavapipe 0.3 s a pipeline). The family of
 * each op is src/ops/elementwise.c's ew_family. */
#define LM_EW_FAM_BASIC 0   /* arithmetic, comparisons, where, copy, rounding, sqrt */
#define LM_EW_FAM_EXPLOG 1  /* exp, log and their kin, tanh, sigmoid, silu */
#define LM_EW_FAM_POW 2
#define LM_EW_FAM_TRIG 3    /* sin, cos, tan */
#define LM_EW_FAM_ARC 4     /* inverse trigonometric and the hyperbolic functions */
#define LM_EW_FAM_ERF 5     /* erf, the gelus and their gradients */
#define LM_EW_FAMILIES 6

/* Operand and result types, specialization constant 3 (the float dtype of the data;
 * comparisons write bool, where reads a bool mask). The values are lm_dtype's. */
#define LM_EW_F32 0
#define LM_EW_F16 1
#define LM_EW_BF16 2
#define LM_EW_BOOL 4

/* Where b comes from, specialization constant 2. */
#define LM_EW_SAME 0        /* b has a's element count; b[k] pairs with a[k] */
#define LM_EW_BCAST 1       /* b is a trailing part of a's shape, repeated */
#define LM_EW_SCALAR 2      /* b is the number p.scalar (unary ops ignore it) */
#define LM_EW_COLUMN 3      /* b's shape is a leading part of a's (then size-1 dims): one b element per `period` vectors */
/* The general kernel (VEC undefined, ND=1) takes each operand through its own strides
 * over the collapsed result shape, or as a number; it has no modes. */

#endif
