#version 450
#extension GL_EXT_control_flow_attributes : require
// Elementwise ops, one shader for all: out[k] = f(a[k], b, c) over n elements. The op
// (OP), where b comes from (MODE) and the element type (DT) are specialization
// constants, so each pipeline is one straight-line kernel. Two forms:
//
// VEC = 4 or 1 (contiguous operands of the result's shape, or numbers):
//   LM_EW_SAME    b has n elements and b[k] pairs with a[k]
//   LM_EW_BCAST   b has `period` vectors (its shape is a trailing part of a's) and repeats:
//                 b[k mod period]
//   LM_EW_SCALAR  b is the number p.scalar (unary ops ignore it)
//   LM_EW_COLUMN  b holds one element per `period` vectors (a [R, 1] column against
//                 [R, D], D a multiple of the elements per vector): b[k / period]
//   c is the number p.scalar2 (clamp's upper bound), or (C_TENSOR) a third operand
//   like b in LM_EW_SAME (where's b).
// VEC = 4 moves 4 elements at a time (8 for float16/bfloat16 data outside LM_EW_BCAST:
// see EPV) and leaves the tail to the first thread; VEC =
// 1 moves floats, for float32 broadcasts whose period is not a multiple of 4 (a's rows
// then start unaligned). Each thread handles UNROLL vectors a workgroup apart (loads
// first, then stores), as copy.comp does; those loops (and sin's per-component one) are
// marked [[unroll]]: NVIDIA's compiler otherwise kept the vectors of ops with long bodies
// (pow, atan2, sin) in local memory. The broadcast index k mod period takes one
// division per thread (32-bit when both fit), then adds and compares.
//
// ND = 1 (any operands): the result is contiguous; each operand is read through its own
// strides over the result's shape (0 where it broadcasts; the host merges dimensions
// first: see p.dims), or is a number. Each thread makes 4 consecutive
// results: one division chain per thread for the coordinates of the first, then a
// carry for the next three.
//
// Element types: float32, float16 and bfloat16 data (DT), bool for the results of
// comparisons and the mask of where. Arithmetic is float32; float16 and bfloat16 results
// are rounded once, to nearest even, on store. Loads of 16- and 8-bit elements read the
// aligned 32-bit word holding them; stores write whole words (2 halves, 4 bools) of the
// result, whose start is 16-byte aligned, and the last, partial word through atomics that
// leave its other bytes alone. So no 8/16-bit storage feature is needed.
//
// Groups past maxComputeWorkGroupCount[0] arrive on a 2-D grid. Indices are 64-bit, so
// tensors past 2^32 elements address correctly.
// out may be an input itself (the same elements): each element is read, then written,
// by the same thread.
#include "common/buffers.glsl"
#include "common/activation.glsl"
#ifdef VOTE
#extension GL_KHR_shader_subgroup_vote : require
#endif
#include "common/elementwise_ops.h"   // LM_EW_*: the op, mode and type codes, shared with C
#ifndef EW_FAMILY
#error "EW_FAMILY (LM_EW_FAM_*) picks the ops this variant holds"
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = LM_EW_ADD;
layout(constant_id = 2) const uint MODE = LM_EW_SAME;
layout(constant_id = 3) const uint DT = LM_EW_F32;
layout(constant_id = 4) const uint UNROLL = 4;   // src/ops/elementwise.c sizes the grid with it
// 1: float16 results are packed by packHalf2x16 (the device's conversion, which the host
// enables only where it rounds to nearest even with subnormals, as half_bits does; NaN
// payloads may differ), else by half_bits below. Constant id 6 (5 is C_TENSOR's).
layout(constant_id = 6) const uint HW_HALF = 0;
// 1: the device's fma is fused (one rounding), so two_prod's error term is one fma; the
// host sets it only for such devices (Vulkan does not promise it, and lavapipe's is a
// multiply and an add).
layout(constant_id = 7) const uint FUSED_FMA = 0;
const uint WG = gl_WorkGroupSize.x;

const bool COMPARE = OP >= LM_EW_EQ && OP <= LM_EW_GE;
const uint DT_A = OP == LM_EW_WHERE ? LM_EW_BOOL : DT;   // a's type
const uint DT_OUT = COMPARE ? LM_EW_BOOL : DT;
// float16/bfloat16 data: exp, log, tanh, sigmoid, silu and pow take cheaper float32 paths
// whose errors stay far below those formats' ulp (the results are rounded to them).
const bool NARROW = DT != LM_EW_F32;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer UintArray { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Uvec2Array { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Uvec4Array { uvec4 v[]; };

#ifdef ND
#define VT float
#else
#if VEC == 4
#define VT vec4
#else
#define VT float
#endif
#endif
// A float function applied to each component of a VT.
#if !defined(ND) && VEC == 4
#define MAP_FLOAT(f, x) vec4(f((x).x), f((x).y), f((x).z), f((x).w))
#else
#define MAP_FLOAT(f, x) f(x)
#endif

#if defined(VEC) && VEC == 4
#define BT bvec4
#define UT uvec4
#define ivec_t ivec4
#define LESS(x, y) lessThan(x, y)
#define LESS_EQ(x, y) lessThanEqual(x, y)
#define EQUAL(x, y) equal(x, y)
#define OR(x, y) bvec4(uvec4(x) | uvec4(y))
#define AND(x, y) bvec4(uvec4(x) & uvec4(y))
#define NOT(x) not(x)
#else
#define BT bool
#define UT uint
#define ivec_t int
#define LESS(x, y) ((x) < (y))
#define LESS_EQ(x, y) ((x) <= (y))
#define EQUAL(x, y) ((x) == (y))
#define OR(x, y) ((x) || (y))
#define AND(x, y) ((x) && (y))
#define NOT(x) (!(x))
#endif
// Per-component choice (a select, so the branch not taken may hold inf or NaN).
#define SELECT(cond, yes, no) mix(no, yes, cond)

#define INF uintBitsToFloat(0x7f800000u)
#define NAN uintBitsToFloat(0x7fc00000u)

BT is_nan(VT x) { return LESS(UT(0x7f800000u), floatBitsToUint(x) & UT(0x7fffffffu)); }
BT is_finite(VT x) { return LESS(floatBitsToUint(x) & UT(0x7fffffffu), UT(0x7f800000u)); }
// Whether every component of b holds.
bool all_(BT b) {
#if defined(VEC) && VEC == 4
    return all(b);
#else
    return b;
#endif
}

// 2^e for integral e in [-126, 127], exact.
VT pow2(VT e) { return uintBitsToFloat(UT(e + VT(127.0)) << 23); }

VT relu(VT x) { return SELECT(LESS(x, VT(0.0)), VT(0.0), x); }   // NaN stays NaN

// gelu, tanh form: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written as
// x / (1 + exp(-2u)) (the same function): no cancellation and no tanh, whose Vulkan
// precision is loose; exp overflowing to inf gives the right limit, -0.
VT gelu_tanh(VT x) {
    const float K = 1.5957691216057308;             // 2 sqrt(2/pi)
    const float K3 = 0.071354816271593;             // 2 sqrt(2/pi) * 0.044715
    VT u2 = x * fma(VT(K3), x * x, VT(K));
    return x / (VT(1.0) + exp(-u2));
}

// erf in float32, three pieces, coefficients from Chebyshev fits (mpmath.chebyfit, 40
// digits) of smooth functions of erf, highest degree first:
//   |t| < 1:      erf(t)  = t P1(t^2)                  (fit error 1.1e-9 relative)
//   1 <= t < 2.5: erfc(t) = exp(-t^2) P2(t - 1.75)       (6e-9 relative)
//   t >= 2.5:     erfc(t) = exp(-t^2) w P3(w), w = 1/t   (3e-9 relative)
// Measured on lavapipe against the float64 reference (spec/ops_spec.lua): erf within
// 1.3e-7 absolute on [-6, 6] (the spec allows 2e-7); gelu within 1.5e-7 of max(1, |ref|),
// and, through erfc for x < 0, within 3e-6 relative for x >= -5.66 (t <= 4), looser
// further out (1.5e-5 at x = -11, results near 1e-29) where the float32 rounding of t^2
// and of exp's argument dominate.
const float P1[7] = float[7](7.8758750626854883e-5, -0.00080168642871658695, 0.005189087423433974,
    -0.026854212010626412, 0.11283594715160218, -0.37612626666720331, 1.1283791658483509);
const float P2[10] = float[10](-3.8181908208609085e-5, 0.00012481533248760714,
    -0.00034130492518492368, 0.0010314877966782838, -0.0030214268655834458,
    0.0084058859998839901, -0.022259963299829882, 0.055763519391961678,
    -0.13097634587413929, 0.28497223598389343);
const float P3[9] = float[9](-1.2473580560382653, 2.4195225483053193, -1.6166016812156963,
    0.068762807923400754, 0.41907856222728454, 5.0521480066782993e-5, -0.28209052073475454,
    -1.1234091338008318e-7, 0.56418958384857927);

VT erf_inner(VT t) {          // |t| < 1
    VT s = t * t, r = VT(P1[0]);
    for (int i = 1; i < 7; ++i) r = fma(r, s, VT(P1[i]));
    return t * r;
}

VT erfc_outer(VT a) {         // a >= 1 (other values give garbage for SELECT to drop)
    VT u = a - VT(1.75), q2 = VT(P2[0]);
    for (int i = 1; i < 10; ++i) q2 = fma(q2, u, VT(P2[i]));
    VT w = VT(1.0) / a, q3 = VT(P3[0]);
    for (int i = 1; i < 9; ++i) q3 = fma(q3, w, VT(P3[i]));
    return exp(-a * a) * SELECT(LESS(a, VT(2.5)), q2, w * q3);
}

VT erf_(VT t) {
    VT a = abs(t);
    return SELECT(LESS(a, VT(1.0)), erf_inner(t), sign(t) * (VT(1.0) - erfc_outer(a)));
}

// gelu, erf form, float32: common/activation.glsl's act_gelu (one polynomial for the
// normal distribution's tail, the form the linear kernels' fused activation takes), a
// component at a time.
VT gelu_erf(VT x) { return MAP_FLOAT(act_gelu, x); }

// gelu's derivatives, times the gradient g. Tanh form: with s = 1 / (1 + e), e = exp(-u2)
// and u2 = x (K + K3 x^2) as in gelu_tanh (gelu = x s), the derivative is
// s + x s (1 - s) (K + 3 K3 x^2), where 1 - s = e s (no cancellation for large x; e = inf
// leaves s = 0, and the term 0).
VT gelu_tanh_grad(VT g, VT x) {
    const float K = 1.5957691216057308;             // 2 sqrt(2/pi)
    const float K3 = 0.071354816271593;             // 2 sqrt(2/pi) * 0.044715
    VT x2 = x * x;
    VT e = exp(-(x * fma(VT(K3), x2, VT(K))));
    VT s = VT(1.0) / (VT(1.0) + e);
    VT rest = SELECT(LESS(e, VT(INF)), e * s, VT(1.0));     // 1 - s
    VT d = fma(x * s * rest, fma(VT(3.0 * K3), x2, VT(K)), s);
    return g * d;
}
// Erf form: Phi(x) + x phi(x), Phi as act_gelu takes it, phi(x) = exp(-x^2/2) / sqrt(2 pi)
// from the same exponential.
float gelu_erf_derivative(float x) {
    float e, q = normal_tail(min(abs(x), 1e4), e);
    return fma(x, 0.3989422804014327 * e, x < 0.0 ? q : 1.0 - q);
}
VT gelu_erf_grad(VT g, VT x) { return g * MAP_FLOAT(gelu_erf_derivative, x); }

// ---- exp, log, sqrt, tanh, sigmoid, pow to a few ulps (GLSL's exp and log are bounded
// only loosely by Vulkan: 3 + 2|x| ulp, and log absolutely near 1).

// exp(r) for |r| <= 0.35: Taylor to degree 7 (truncation below 0.05 ulp).
VT exp_poly(VT r) {
    VT q = fma(r, VT(1.0 / 5040.0), VT(1.0 / 720.0));
    q = fma(q, r, VT(1.0 / 120.0));
    q = fma(q, r, VT(1.0 / 24.0));
    q = fma(q, r, VT(1.0 / 6.0));
    q = fma(q, r, VT(0.5));
    precise VT s = fma(r * r, q, r);
    precise VT e = VT(1.0) + s;
    return e;
}

// p * 2^k for integral k in [-160, 140]: two exact scalings, so a subnormal result is
// rounded once.
VT scale2(VT p, VT k) {
    VT k1 = floor(k * 0.5);
    return p * pow2(k1) * pow2(k - k1);
}

// exp(x) = p 2^k, p in [0.7, 1.42], for x within [-120, 89] (clamped: 0 and inf beyond).
void exp_parts(VT x, out VT p, out VT k) {
    VT xc = clamp(x, VT(-120.0), VT(89.0));
    k = roundEven(xc * 1.44269504088896341);
    // ln 2 in two parts (k * hi is exact); `precise` and no fma, or a compiler may
    // merge the two products back into one (Mesa does).
    precise VT r1 = xc - k * 0.693145751953125;
    precise VT r = r1 - k * 1.428606765330187e-6;
    p = exp_poly(r);
}

VT exp_(VT x) {
    VT p, k;
    exp_parts(x, p, k);
    return SELECT(is_nan(x), x, scale2(p, k));
}

// expm1(x) = 2^k (e^r - 1) + (2^k - 1) with x = k ln 2 + r as in exp_parts: e^r - 1 is
// exp's series without its leading 1 (no cancellation), and for |k| <= 24 the product by
// 2^k is exact and 2^k - 1 too, so the sum is rounded once; k = 0 is the series alone,
// which keeps small x exact to the last bit. Past k = 24 the -1 is below half an ulp of
// e^x; below k = -24 the result is -1.
VT expm1_(VT x) {
    VT xc = clamp(x, VT(-120.0), VT(89.0));
    VT k = roundEven(xc * 1.44269504088896341);
    precise VT r1 = xc - k * 0.693145751953125;
    precise VT r = r1 - k * 1.428606765330187e-6;
    VT q = fma(r, VT(1.0 / 5040.0), VT(1.0 / 720.0));
    q = fma(q, r, VT(1.0 / 120.0));
    q = fma(q, r, VT(1.0 / 24.0));
    q = fma(q, r, VT(1.0 / 6.0));
    q = fma(q, r, VT(0.5));
    precise VT em = fma(r * r, q, r);                 // e^r - 1
    VT kk = clamp(k, VT(-24.0), VT(24.0));
    VT t = pow2(kk);
    precise VT mid = t * em + (t - VT(1.0));          // t * em exact: t is a power of 2
    VT y = SELECT(LESS(VT(24.0), k), scale2(VT(1.0) + em, k) - VT(1.0), mid);
    y = SELECT(LESS(k, VT(-24.0)), VT(-1.0), y);
    y = SELECT(EQUAL(x, VT(0.0)), x, y);              // expm1(-0) = -0
    return SELECT(is_nan(x), x, y);
}

// exp for 16-bit results (float16, bfloat16): GLSL's exp2 is within 3 + 2|t| ulp of
// float32 (Vulkan), under 2^-15 relative for |t| <= 150, well inside one ulp of either
// format. Arguments below -100 (results only bfloat16's subnormals need) are shifted up
// by 64 and the result scaled back exactly, so a device flushing exp2's subnormal
// results to 0 still gives them.
VT exp_narrow(VT x) {
    VT t = clamp(x * 1.44269504088896341, VT(-160.0), VT(129.0));
    // float16 results are 0 below 2^-25: float32's subnormals never matter to them.
    if (DT == LM_EW_F16) return SELECT(is_nan(x), x, exp2(t));
    VT sh = SELECT(LESS(t, VT(-100.0)), VT(64.0), VT(0.0));
    return SELECT(is_nan(x), x, exp2(t + sh) * pow2(-sh));
}

// gelu, erf form, for 16-bit results: 0.5 x erfc(-t), t = x / sqrt 2, with erfc(z) for
// z >= 0 as u exp(-z^2 + P(u)), u = 1 / (1 + z/2), P of degree 9 (the classic Chebyshev
// fit, relative error under 1.2e-7), and
// erfc(-z) = 2 - erfc(z). With exp_narrow, cheaper than act_gelu: the 16-bit
// kernel was bound by these operations, not by memory. Within one ulp of either format
// over every input (spec/elementwise_narrow_more_spec.lua); NaN, +-inf and -0 as gelu_erf.
VT gelu_erf_narrow(VT x) {
    VT t = x * 0.70710678118654752;
    VT a = min(abs(t), VT(30.0));          // NaN x stays NaN through the last product
    VT u = VT(1.0) / fma(VT(0.5), a, VT(1.0));
    VT p = fma(u, VT(0.17087277), VT(-0.82215223));
    p = fma(u, p, VT(1.48851587));
    p = fma(u, p, VT(-1.13520398));
    p = fma(u, p, VT(0.27886807));
    p = fma(u, p, VT(-0.18628806));
    p = fma(u, p, VT(0.09678418));
    p = fma(u, p, VT(0.37409196));
    p = fma(u, p, VT(1.00002368));
    p = fma(u, p, VT(-1.26551223));
    VT e = exp_narrow(p - a * a), hx = 0.5 * x;
    // Below 0, (x u) e: u e alone can fall below float32's normal range (flushed on
    // some devices) where the result, a bfloat16 normal, does not (x = -13.06).
    return SELECT(LESS(t, VT(0.0)), (hx * u) * e, hx * (VT(2.0) - u * e));
}

// log(1 + f) pieces for m = 1 + f in [sqrt(1/2), sqrt(2)): s = f / (2 + f) and
// log(1 + f) = 2 atanh(s) = 2s + s R(s^2); R below.
VT atanh_tail(VT z) {          // R(z) = 2/3 z + 2/5 z^2 + ..., z = s^2 <= 0.0295
    VT q = fma(z, VT(2.0 / 13.0), VT(2.0 / 11.0));
    q = fma(q, z, VT(2.0 / 9.0));
    q = fma(q, z, VT(2.0 / 7.0));
    q = fma(q, z, VT(2.0 / 5.0));
    q = fma(q, z, VT(2.0 / 3.0));
    return q * z;
}

// x = m 2^e with m in [sqrt(1/2), sqrt(2)), for finite x > 0 (subnormals scaled first).
void split_log(VT x, out VT m, out VT e) {
    BT sub = LESS(x, VT(1.17549435e-38));
    VT xs = SELECT(sub, x * 8388608.0, x);
    UT bits = floatBitsToUint(xs);
    e = VT((bits >> 23) & UT(0xffu)) - SELECT(sub, VT(150.0), VT(127.0));
    m = uintBitsToFloat((bits & UT(0x7fffffu)) | UT(0x3f800000u));
    BT big = LESS(VT(1.41421356), m);
    m = SELECT(big, m * 0.5, m);
    e = SELECT(big, e + VT(1.0), e);
}

// log: log(1 + f) = f - f^2/2 + s (f^2/2 + R), so the division's rounding only touches
// a small correction, then e ln 2 in two parts.
VT log_(VT x) {
    VT m, e;
    split_log(x, m, e);
    precise VT f = m - VT(1.0);                  // exact
    VT s = f / (VT(2.0) + f);
    precise VT hfsq = 0.5 * f * f;
    precise VT r = s * (hfsq + atanh_tail(s * s));
    precise VT y = e * 0.693145751953125 + ((f - hfsq) + (e * 1.428606765330187e-6 + r));
    y = SELECT(EQUAL(x, VT(0.0)), VT(-INF), y);
    y = SELECT(EQUAL(x, VT(INF)), x, y);
    return SELECT(OR(LESS(x, VT(0.0)), is_nan(x)), VT(NAN), y);
}

// log1p(x) = log(u) + d / u with u = 1 + x rounded and d = (1 + x) - u, the rounding
// error of u, exact (x - (u - 1) below u = 2, 1 - (u - x) from 2 up: Sterbenz), so the
// correction restores what u lost; below 2^-24 u is 1 and the result x itself.
VT log1p_(VT x) {
    precise VT u = VT(1.0) + x;
    precise VT d = SELECT(LESS(u, VT(2.0)), x - (u - VT(1.0)), VT(1.0) - (u - x));
    VT y = log_(u) + d / u;
    y = SELECT(EQUAL(u, VT(1.0)), x, y);              // also keeps -0
    y = SELECT(EQUAL(x, VT(-1.0)), VT(-INF), y);
    y = SELECT(EQUAL(x, VT(INF)), x, y);
    return SELECT(OR(LESS(x, VT(-1.0)), is_nan(x)), VT(NAN), y);
}

// expm1 for 16-bit results: below |x| = 1/16 its series to x^4/24 (truncation under
// 2^-22 relative); elsewhere GLSL's exp2 less 1, whose error (3 + 2|t| ulp of e^x, |t| <=
// 129) stays under 2^-16 of |e^x - 1| >= 0.06. Both far inside one ulp of either format.
// bfloat16's float32 subnormals are returned as they are (below 2^-12, expm1 x rounds
// to x), for devices that flush them.
VT expm1_narrow(VT x) {
    VT q = fma(x, VT(1.0 / 24.0), VT(1.0 / 6.0));
    q = fma(q, x, VT(0.5));
    VT near = x * fma(x, q, VT(1.0));                 // not x + x^2 q, which gives +0 at -0
    VT far = exp2(clamp(x * 1.44269504088896341, VT(-160.0), VT(129.0))) - VT(1.0);
    VT y = SELECT(LESS(abs(x), VT(0.0625)), near, far);
    if (DT != LM_EW_F16) y = SELECT(LESS(abs(x), VT(2.44140625e-4)), x, y);
    return SELECT(is_nan(x), x, y);
}

// log1p for 16-bit results: below |x| = 1/16 its series to x^4/4 (truncation under
// 2^-18 relative); elsewhere GLSL's log2 of u = 1 + x rounded: u's rounding (2^-24
// relative) and log2's error (2^-21 absolutely on [0.5, 2], 3 ulp outside) stay under
// 2^-17 of |log1p x| >= 0.06. bfloat16's subnormals as in expm1_narrow.
VT log1p_narrow(VT x) {
    VT q = fma(x, VT(-0.25), VT(1.0 / 3.0));
    q = fma(q, x, VT(-0.5));
    VT near = fma(x * x, q, x);
    VT u = VT(1.0) + x;
    VT y = SELECT(LESS(abs(x), VT(0.0625)), near, log2(u) * 0.693147180559945309);
    if (DT != LM_EW_F16) y = SELECT(LESS(abs(x), VT(2.44140625e-4)), x, y);
    // Finite positive u as in log_narrow: y is the result; the special values below only
    // where some element of the vector needs them.
    if (all_(LESS(floatBitsToUint(u) - UT(1u), UT(0x7f7fffffu)))) return y;
    y = SELECT(EQUAL(x, VT(-1.0)), VT(-INF), y);
    y = SELECT(EQUAL(x, VT(INF)), x, y);
    return SELECT(OR(LESS(x, VT(-1.0)), is_nan(x)), VT(NAN), y);
}

// log for 16-bit results (float16, bfloat16): within 1/16 of 1, log1p's series in the
// exact f = x - 1 to f^4/4 (truncation under 2^-18 relative); elsewhere GLSL's log2
// (Vulkan: within 2^-21 absolutely on [0.5, 2], 3 ulp outside), whose error there is
// below 2^-17 of the result (|log2 x| >= 0.087). Both far inside one ulp of either format.
// float32 subnormals (bfloat16 has them; float16 does not) are scaled by 2^24 first, for
// devices that flush them.
VT log_narrow(VT x) {
    precise VT f = x - VT(1.0);
    VT q = fma(f, VT(-1.0 / 4.0), VT(1.0 / 3.0));
    q = fma(q, f, VT(-0.5));
    VT near = fma(f * f, q, f);
    VT far;
    if (DT == LM_EW_F16) {
        far = log2(x) * 0.693147180559945309;
    } else {
        BT sub = LESS(x, VT(1.17549435e-38));
        far = (log2(SELECT(sub, x * 16777216.0, x)) - SELECT(sub, VT(24.0), VT(0.0))) * 0.693147180559945309;
    }
    VT y = SELECT(LESS(abs(f), VT(0.0625)), near, far);
    // Finite positive x (its bits less 1 below FLT_MAX's, unsigned: 0 and negatives wrap
    // high, inf and NaN stay high): y is the result; the special values below only where
    // some element of the vector needs them.
    if (all_(LESS(floatBitsToUint(x) - UT(1u), UT(0x7f7fffffu)))) return y;
    y = SELECT(EQUAL(x, VT(0.0)), VT(-INF), y);
    y = SELECT(EQUAL(x, VT(INF)), x, y);
    return SELECT(OR(LESS(x, VT(0.0)), is_nan(x)), VT(NAN), y);
}

// a b = p + e exactly (Dekker's product with Veltkamp's split: Vulkan does not promise
// that fma is fused, and lavapipe's is not). |a|, |b| < 2^100.
void two_prod(VT a, VT b, out VT p, out VT e) {
    if (FUSED_FMA != 0u) {
        precise VT pf = a * b;
        p = pf;
        e = fma(a, b, -pf);
        return;
    }
    precise VT ca = 4097.0 * a, cb = 4097.0 * b;
    precise VT ah = ca - (ca - a), bh = cb - (cb - b);
    precise VT al = a - ah, bl = b - bh;
    precise VT pp = a * b;
    precise VT ee = ((ah * bh - pp) + ah * bl + al * bh) + al * bl;
    p = pp;
    e = ee;
}

// sqrt and 1/sqrt: inversesqrt (2 ulp in Vulkan) refined by a Newton step, and sqrt
// corrected from its residual (fma), as layer_norm does for invstd. A subnormal x is
// first scaled by 2^64 (exact) and the result by 2^-32 or 2^32 (exact): at x's own scale
// the residual's products fall below the normal range, where their rounding errors are
// no longer small relative to x (6e-6 of the result at x = 1.1e-40).
const float SUBNORMAL_UP = 18446744073709551616.0;     // 2^64
const float LEAST_NORMAL = 1.17549435e-38;             // 2^-126
BT subnormal(VT x) { return LESS(abs(x), VT(LEAST_NORMAL)); }

VT rsqrt_(VT x) {
    BT tiny = subnormal(x);
    VT xs = SELECT(tiny, x * SUBNORMAL_UP, x);
    VT r = inversesqrt(xs);
    precise VT refined = r * fma(-0.5 * (xs * r), r, VT(1.5));
    refined = SELECT(tiny, refined * 4294967296.0, refined);   // * 2^32
    VT y = SELECT(EQUAL(x, VT(INF)), VT(0.0), refined);
    y = SELECT(EQUAL(x, VT(0.0)), VT(1.0) / x, y);                  // 1 / +-0 = +-inf
    return SELECT(OR(LESS(x, VT(0.0)), is_nan(x)), VT(NAN), y);
}

VT sqrt_(VT x) {
    BT tiny = subnormal(x);
    VT xs = SELECT(tiny, x * SUBNORMAL_UP, x);
    VT r = inversesqrt(xs);
    r = r * fma(-0.5 * (xs * r), r, VT(1.5));
    VT s = xs * r, sq, sq_err;
    two_prod(s, s, sq, sq_err);
    precise VT resid = (xs - sq) - sq_err;      // xs - s^2, exact
    VT corrected = fma(0.5 * r, resid, s);
    corrected = SELECT(tiny, corrected * 2.3283064365386963e-10, corrected);   // * 2^-32
    // 0 and -0 keep their sign, inf stays inf, negatives and NaN give NaN.
    BT plain = OR(EQUAL(x, VT(0.0)), EQUAL(x, VT(INF)));
    return SELECT(OR(LESS(x, VT(0.0)), is_nan(x)), VT(NAN), SELECT(plain, x, corrected));
}

// ---- sin and cos, within 2 ulp of float64 for every finite float32 (1.4 measured on a
// sweep with the hardest cases near multiples of pi/2). x = k pi/2 + y, |y| <= pi/4, k
// mod 4 picking the function and sign. |x| <= pi/4 is y itself; up to 4096, Cody-Waite's
// reduction in floats (below, for whole vectors in that range); otherwise Payne-Hanek's
// reduction in integers: |x| = m 2^e (m 24 bits) times the bits of 2/pi that matter at
// that exponent (four 32-bit words: everything above them is a multiple of 4, and what
// follows changes y by under 2^-71), which gives k mod 4 and the fraction y / (pi/2) to
// 64 bits, so y keeps full precision even where x is within 2^-29 of a multiple of pi/2.
// The fraction becomes two floats t_hi + t_lo (48 bits), and y = t pi/2 a float pair
// (two_prod), whose low part corrects the polynomials: sin(y_hi + y_lo) = sin(y_hi) +
// y_lo cos(y_hi). sin and cos of |y| <= pi/4: minimax polynomials of degree 7 and 8
// (Cephes's sinf/cosf coefficients), with fma.
#if defined(VEC) && VEC == 4
#define NCOMP 4
#define COMP(v, i) v[i]
#else
#define NCOMP 1
#define COMP(v, i) v
#endif
// The binary digits of 2/pi, 32 at a time from the point: enough for |x| < 2^128.
const uint TWO_OVER_PI[7] = uint[7](0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                    0xdb629599u, 0x3c439041u, 0xfe5163abu);
const float PIO2_HI = 1.5707963705062866;       // pi/2 rounded to float32
const float PIO2_LO = -4.371138828673793e-08;   // pi/2 - PIO2_HI, rounded

// Bits [at, at + 32) of the 192-bit number l[0] + l[1] 2^32 + ... (at < 160).
uint bits_at(uint l[6], uint at) {
    uint w = at >> 5, b = at & 31u;
    uint lo = l[w], hi = l[min(w + 1u, 5u)];
    return b == 0u ? lo : (lo >> b) | (hi << (32u - b));
}

// For finite ax = |x| > pi/4: k mod 4 (q) and (ax - k pi/2) / (pi/2) = th + tl, |th| <= 1/2.
void reduce_quadrant(float ax, out uint q, out float th, out float tl) {
    uint bits = floatBitsToUint(ax);
    int e = int(bits >> 23) - 150;                  // ax = m 2^e
    uint m = (bits & 0x7fffffu) | 0x800000u;
    int i0 = e > 1 ? (e - 2) / 32 : 0;              // first word whose product is not 0 mod 4
    uint l[6];
    uint carry = 0u;
    for (int j = 0; j < 4; ++j) {                   // m times words i0..i0+3, least significant first
        uint hi, lo;
        umulExtended(m, TWO_OVER_PI[i0 + 3 - j], hi, lo);
        uint sum = lo + carry;
        carry = hi + (sum < lo ? 1u : 0u);
        l[j] = sum;
    }
    l[4] = carry;
    l[5] = 0u;
    // The product is worth l 2^(e - 32 (i0 + 4)): its point sits at bit 32 i0 + 128 - e,
    // so the fraction is the 64 bits below that and k mod 4 the 2 above.
    uint at = uint(32 * i0 + 64 - e);
    uint f0 = bits_at(l, at), f1 = bits_at(l, at + 32u), f2 = bits_at(l, at + 64u);
    q = f2 & 3u;
    bool up = (f1 >> 31) != 0u;                     // fraction >= 1/2: the next multiple
    if (up) {
        q = (q + 1u) & 3u;
        f0 = ~f0 + 1u;                              // 2^64 - fraction
        f1 = ~f1 + (f0 == 0u ? 1u : 0u);
    }
    if (f0 == 0u && f1 == 0u) { th = 0.0; tl = 0.0; return; }
    int lz = f1 != 0u ? 31 - findMSB(f1) : 63 - findMSB(f0);
    uint a1 = f1, a0 = f0;
    if (lz >= 32) { a1 = f0 << uint(lz - 32); a0 = 0u; }
    else if (lz > 0) { a1 = (f1 << uint(lz)) | (f0 >> uint(32 - lz)); a0 = f0 << uint(lz); }
    th = ldexp(float(a1 >> 8), -24 - lz);            // the top 24 bits, exact
    tl = ldexp(float(((a1 & 0xffu) << 16) | (a0 >> 16)), -48 - lz);
    if (up) { th = -th; tl = -tl; }
}

VT sin_poly(VT y) {
    VT y2 = y * y;
    return fma(y * y2, fma(y2, fma(y2, VT(-1.9515295891e-4), VT(8.3321608736e-3)), VT(-1.6666654611e-1)), y);
}
VT cos_poly(VT y) {
    VT y2 = y * y;
    return fma(y2 * y2, fma(y2, fma(y2, VT(2.443315711809948e-5), VT(-1.388731625493765e-3)), VT(4.166664568298827e-2)),
               fma(VT(-0.5), y2, VT(1.0)));
}

// a + b = s + e exactly (Knuth's two-sum: no order needed between a and b).
void two_sum(VT a, VT b, out VT s, out VT e) {
    precise VT ss = a + b;
    precise VT bb = ss - a;
    precise VT ee = (a - (ss - bb)) + (b - bb);
    s = ss;
    e = ee;
}

// Cody-Waite for |x| <= 4096 (k < 2^12): pi/2 = CW1 + CW2 + CW3 + CW4, the first three
// with 12 significant bits, so k CWi is exact; x - k CW1 is exact too (Sterbenz), and
// the rest is carried as a float pair by two-sums. 1.5 ulp at worst on a sweep with the
// neighbours of every multiple of pi/2 below 4096, without a fused fma.
const float CW1 = 1.5703125;
const float CW2 = 4.837512969970703e-4;
const float CW3 = 7.549533620476723e-8;
const float CW4 = 2.5633440682570896e-12;

// For 16-bit data, |x| <= 65536 (every finite float16): k = x 2/pi rounded (|k| < 2^16)
// and y = x - k pi/2 with pi/2 = CH1 + CH2 + CH3 + CH4, the first three with 8 significant
// bits or fewer, so each k CHi is exact (x - k CH1 too, by Sterbenz). y is then within
// 2^-37 + 2^-22 |y| of the true value, while the smallest |y| of a float16 is 2^-16
// (177.5) and of a bfloat16 2^-11: errors far below one ulp of either format, at a
// quarter of the float32 path's work (no float pairs, no sign handling: q = k mod 4
// holds for negative k too). precise keeps the steps as written (a compiler may fold
// k CH1 + k CH2 into k (CH1 + CH2), which rounds). Below 2^-12, sin x and tan x are x to
// float32's precision (which keeps -0 and subnormals as they are). bfloat16 vectors with
// a larger element take the float32 path as a whole.
const float CH1 = 1.5703125;
const float CH2 = 4.825592041015625e-4;
const float CH3 = 1.2665987014770508e-6;
const float CH4 = 9.92093629470503e-10;

VT sincos_narrow(VT x, bool want_cos) {
    VT k = roundEven(x * 0.636619772);
    precise VT y1 = x - k * CH1;
    precise VT y2 = y1 - k * CH2;
    precise VT y3 = y2 - k * CH3;
    precise VT y = y3 - k * CH4;
    UT q = UT(ivec_t(k)) & UT(3u);
    VT s = sin_poly(y), c = cos_poly(y);
    BT even = EQUAL(q & UT(1u), UT(0u));
    BT tiny = LESS(abs(x), VT(2.44140625e-4));
    if (OP == LM_EW_TAN) return SELECT(tiny, x, SELECT(even, s, -c) / SELECT(even, c, s));
    // sin: q 0..3 gives s, c, -s, -c; cos: c, -s, -c, s. NaN and inf give NaN through y.
    UT kk = want_cos ? q + UT(1u) : q;
    VT r = SELECT(even, want_cos ? c : s, want_cos ? s : c);
    r = SELECT(EQUAL(kk & UT(2u), UT(2u)), -r, r);
    return want_cos ? r : SELECT(tiny, x, r);
}

// sin(x) (want_cos false) or cos(x).
VT sincos_(VT x, bool want_cos) {
    if (NARROW && (DT == LM_EW_F16 || all_(OR(LESS_EQ(abs(x), VT(65536.0)), NOT(is_finite(x))))))
        return sincos_narrow(x, want_cos);
    VT ax = abs(x);
    BT small = LESS_EQ(ax, VT(0.785398163));
    VT yh = ax, yl = VT(0.0);
    UT q = UT(0u);
    BT skip = NOT(is_finite(x));   // NaN at the end whatever is computed for them
    if (all_(OR(LESS_EQ(ax, VT(4096.0)), skip)) && !all_(OR(small, skip))) {
        VT k = roundEven(ax * 0.636619772);
        precise VT r = ax - k * CW1;
        precise VT p2 = k * CW2;
        precise VT p3 = k * CW3;
        VT s1, e1, s2, e2;
        two_sum(r, -p2, s1, e1);
        two_sum(s1, -p3, s2, e2);
        precise VT lo = (e1 + e2) - k * CW4;
        two_sum(s2, lo, yh, yl);
        q = UT(SELECT(skip, VT(0.0), k)) & UT(3u);
    } else if (!all_(OR(small, skip))) {
        VT th, tl;
        [[unroll]] for (int i = 0; i < NCOMP; ++i) {
            uint qi = 0u;
            float hi = 0.0, lo = 0.0;
            if (!COMP(small, i) && COMP(ax, i) < INF) reduce_quadrant(COMP(ax, i), qi, hi, lo);
            COMP(q, i) = qi;
            COMP(th, i) = hi;
            COMP(tl, i) = lo;
        }
        VT p, e;
        two_prod(th, VT(PIO2_HI), p, e);             // th pi/2 as p + e, exactly
        precise VT low = e + fma(th, VT(PIO2_LO), tl * PIO2_HI);
        precise VT hi = p + low;
        precise VT rest = low - (hi - p);
        yh = SELECT(small, ax, hi);
        yl = SELECT(small, VT(0.0), rest);
    }
    VT s = sin_poly(yh), c = cos_poly(yh);
    VT sv = fma(yl, c, s), cv = fma(-yl, s, c);
    // tan(|x|): sv / cv in even quadrants, -cv / sv in odd ones (period pi); odd in x.
    if (OP == LM_EW_TAN) {
        BT even = EQUAL(q & UT(1u), UT(0u));
        VT t = SELECT(even, sv, -cv) / SELECT(even, cv, sv);
        t = SELECT(LESS(UT(0x7fffffffu), floatBitsToUint(x)), -t, t);
        return SELECT(is_finite(x), t, VT(NAN));
    }
    // sin: q 0..3 gives s, c, -s, -c; cos: c, -s, -c, s.
    UT k = want_cos ? q + UT(1u) : q;
    VT r = SELECT(EQUAL(q & UT(1u), UT(0u)), want_cos ? cv : sv, want_cos ? sv : cv);
    r = SELECT(EQUAL(k & UT(2u), UT(2u)), -r, r);
    // sin is odd (sin(-0) = -0); cos is even.
    if (!want_cos) r = SELECT(LESS(UT(0x7fffffffu), floatBitsToUint(x)), -r, r);
    return SELECT(is_finite(x), r, VT(NAN));
}

// tanh(x) = sign(x) t / (t + 2), t = expm1(2|x|); +-1 past |x| = 9.1, where the float32
// value is 1. 16-bit results: (1 - e) / (1 + e) with e = e^-2a = exp2(-2a log2 e), or a
// itself below 2^-7 (dropping a^3/3: under 2^-15 relative). exp2 (Vulkan: 3 + 2|t| ulp,
// |t| <= 29 here) leaves 1 - e within 2^-22 absolutely, under 2^-15 of tanh for a >= 2^-7:
// far inside one ulp of either format. a = inf meets min(a, 10) (tanh(10) rounds to 1 in
// both formats); NaN is selected at the end (GLSL's min of a NaN may give either operand).
VT tanh_(VT x) {
    VT a = abs(x);
    if (NARROW) {
        VT e = exp2(min(a, VT(10.0)) * -2.88539008177792681);
        VT yn = SELECT(LESS(a, VT(0.0078125)), a, (VT(1.0) - e) / (VT(1.0) + e));
        return SELECT(is_nan(x), x, uintBitsToFloat(floatBitsToUint(yn) | (floatBitsToUint(x) & UT(0x80000000u))));
    }
    // Below 0.35 tanh's own Taylor series to a^13 (truncation under 1e-9 relative), else
    // t = e^2a - 1 >= 1 (no cancellation).
    VT s = a * a;
    VT q = fma(s, VT(21844.0 / 6081075.0), VT(-1382.0 / 155925.0));
    q = fma(q, s, VT(62.0 / 2835.0));
    q = fma(q, s, VT(-17.0 / 315.0));
    q = fma(q, s, VT(2.0 / 15.0));
    q = fma(q, s, VT(-1.0 / 3.0));
    precise VT small = fma(a * s, q, a);
    VT p, k;
    exp_parts(2.0 * min(a, VT(9.5)), p, k);
    precise VT t = scale2(p, k) - VT(1.0);
    precise VT y = t / (t + VT(2.0));
    y = SELECT(LESS(a, VT(0.35)), small, y);
    y = SELECT(LESS(VT(9.1), a), VT(1.0), y);
    return SELECT(is_nan(x), x, uintBitsToFloat(floatBitsToUint(y) | (floatBitsToUint(x) & UT(0x80000000u))));
}

// sigmoid: 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (accurate down to the
// subnormal results that PyTorch's float32 1 / (1 + inf) flushes to 0); one division.
VT sigmoid_(VT x) {
    VT e = NARROW ? exp_narrow(-abs(x)) : exp_(-abs(x));
    precise VT d = VT(1.0) + e;
    VT s = SELECT(LESS(x, VT(0.0)), e, VT(1.0)) / d;
    return SELECT(is_nan(x), x, s);
}

// silu: x sigmoid(x) = x / (1 + e^-x), or x e^x / (1 + e^x) for x < 0: one exponential and
// one division; -inf gives -inf * 0 = NaN, as in PyTorch. In float32, below -80, where
// e^x is subnormal (or nearly), x e^x is taken as (x p) 2^k from e^x = p 2^k, rounded
// once; below -120 (where exp_parts clamps) |x e^x| < 2^-160 rounds to -0.
VT silu_(VT x) {
    BT neg = LESS(x, VT(0.0));
    if (DT == LM_EW_F16) {
        // e^-|x| by exp2 alone (float16 results are 0 below 2^-25, so float32's
        // subnormals never matter); the max keeps exp2's argument finite (-inf: e = 0,
        // and -inf * 0 = NaN as above). A NaN x is the numerator either way.
        VT e = exp2(max(abs(x) * -1.44269504088896341, VT(-160.0)));
        return SELECT(neg, x * e, x) / (VT(1.0) + e);
    }
    if (NARROW) {   // e^-|x| scaled exactly into subnormals: enough for bfloat16 results
        VT e = exp_narrow(-abs(x));
        return SELECT(neg, x * e, x) / (VT(1.0) + e);
    }
    VT p, k;
    exp_parts(-abs(x), p, k);
    VT e = scale2(p, k);
    precise VT d = VT(1.0) + e;
    VT near = SELECT(neg, x * e, x) / d;
    VT deep = SELECT(LESS(x, VT(-120.0)), VT(-0.0), scale2(x * p, k));
    return SELECT(LESS(x, VT(-80.0)), SELECT(is_finite(x), deep, VT(NAN)), near);
}

// pow(x, y) with C's special cases: 1 for y = 0 or x = 1 (NaN included); NaN for a
// negative finite x and a finite non-integral y; the sign of x kept for odd integral y.
// |x|^y = 2^(y log2 |x|), with log2 |x| as an unevaluated sum hi + lo (about 2^-40
// relative) and exact products, so large exponents stay accurate.
const float LOG2E_HI = 1.44269502162933349609375, LOG2E_LO = 1.925963033500011e-8;
// |x|^y for finite |x| = ax > 0 and finite y (other values give what pow_ replaces).
VT pow_mag(VT ax, VT y) {
    VT m, e;
    split_log(SELECT(is_finite(ax), max(ax, VT(1e-45)), VT(1.0)), m, e);
    precise VT f = m - VT(1.0);
    precise VT sh = VT(2.0) + f;
    precise VT sl = f - (sh - VT(2.0));        // 2 + f = sh + sl exactly
    VT u = f / sh;
    VT q_hi, q_lo;
    two_prod(u, sh, q_hi, q_lo);
    precise VT ul = (((f - q_hi) - q_lo) - u * sl) / sh;   // f / (2 + f) = u + ul
    // log(m) = 2u + (2ul + u R(u^2)); times log2(e) as hi + lo, the leading product exact.
    precise VT lm_lo = 2.0 * ul + u * atanh_tail(u * u);
    VT p_hi, p_err;
    two_prod(2.0 * u, VT(LOG2E_HI), p_hi, p_err);
    precise VT p_lo = p_err + ((2.0 * u) * LOG2E_LO + lm_lo * LOG2E_HI);
    precise VT hi0 = e + p_hi;                   // |p_hi| < 0.51 <= |e| unless e = 0
    precise VT lo0 = ((e - hi0) + p_hi) + p_lo;
    precise VT hi = hi0 + lo0;                   // renormalized: |lo| <= ulp(hi)
    precise VT lo = lo0 - (hi - hi0);
    // y (hi + lo), the product exact; y beyond 2^100 saturates the same way.
    VT yc = clamp(y, VT(-1.0e30), VT(1.0e30));
    VT t_hi, t_err;
    two_prod(yc, hi, t_hi, t_err);
    precise VT t_lo = t_err + yc * lo;
    VT tc = clamp(t_hi, VT(-160.0), VT(140.0));
    VT k = roundEven(tc);
    precise VT frac0 = (tc - k) + t_lo;         // |frac| <= 0.5 + tiny
    VT frac = SELECT(LESS(abs(t_hi), VT(150.0)), frac0, VT(0.0));   // else 0 or inf by k alone
    VT r = exp_poly(frac * 0.693147180559945309);
    return scale2(r, k);
}

// |x|^y for float16 results, finite ax > 0 and finite y (others give what pow_ replaces):
// exp2(y log2 ax), log2 ax taken near 1 (|f| < 1/16, f = ax - 1 exact) from log1p's
// series to f^4/4 (truncation under 2^-18 relative) and elsewhere from GLSL's log2, as
// log_narrow takes them; float16 inputs are float32 normals. The results are finite and
// not 0 only for |y log2 ax| < 25, where log2's relative error (under 2^-17) moves them by
// under 2^-13 of themselves; exp2 is within 3 + 2|t| ulp of float32 (Vulkan).
VT pow_half(VT ax, VT y) {
    precise VT f = ax - VT(1.0);
    VT q = fma(f, VT(-1.0 / 4.0), VT(1.0 / 3.0));
    q = fma(q, f, VT(-0.5));
    VT near = fma(f * f, q, f) * 1.44269504088896341;
    VT l2 = SELECT(LESS(abs(f), VT(0.0625)), near, log2(ax));
    return exp2(clamp(y * l2, VT(-160.0), VT(129.0)));
}

// 2^x for |x| <= 0.5005: 1 + x P(x), P of degree 6 fitted to (2^x - 1) / x (mpmath
// chebyfit, 40 digits); with the coefficients rounded to float32, within 2.4e-9 relative
// (0.04 ulp), most of it ln 2's rounding. Two operations fewer than exp_poly of x ln 2.
VT exp2_poly(VT x) {
    VT q = fma(x, VT(1.529741348e-05), VT(1.546156127e-04));
    q = fma(q, x, VT(1.333350199e-03));
    q = fma(q, x, VT(9.618056007e-03));
    q = fma(q, x, VT(5.550410971e-02));
    q = fma(q, x, VT(2.402265072e-01));
    q = fma(q, x, VT(6.931471825e-01));
    return fma(x, q, VT(1.0));
}

// |x|^y for the common case, in about half pow_mag's operations: x a normal positive
// float and |y| <= 4 (pow_ tests them); ok says where the result is normal (|k| <= 125).
// With x = m 2^e, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact) and C = 1 / ln 2:
//   t = y log2 x = y e + y C (f - hfsq + c),  hfsq = f^2/2,  c = s (hfsq + R(s^2)),
// as log_ takes log(1 + f). y e and (y C_hi) f are exact products, so the only rounding
// that grows with y is that of y C (c - hfsq): |c - hfsq| <= 0.07 and |y C| <= 5.8 keep
// it near 2^-24 absolute (the division and R touch only c, at most 0.018). With t = k +
// frac (k integral, |frac| <= 0.5, error under 2^-23 in all), 2^frac from exp2_poly and
// 2^k goes into the exponent field: within 3 ulp (lavapipe sweeps: 1.4; the specs check
// 4). Past |y| = 4 that rounding grows with |y log2 m| (1.7 ulp measured at |y| = 8) and
// pow_mag's double-float logarithm takes over.
VT pow_fast(VT x, VT y, out BT ok) {
    // x = m 2^e from the bits: subtracting sqrt(1/2)'s bits puts e in the exponent field
    // for m in [sqrt(1/2), sqrt(2)).
    UT bits = floatBitsToUint(x);
    UT off = bits - UT(0x3f3504f3u);
    UT eb = UT(ivec_t(off) >> 23);
    // e as a float through 1.5 * 2^23, whose last bits hold a small integer in two's
    // complement: an integer add and a float subtraction, no conversion (quarter-rate
    // on some GPUs); exact for |e| < 2^22.
    precise VT e = uintBitsToFloat(eb + UT(0x4b400000u)) - VT(12582912.0);
    VT m = uintBitsToFloat(bits - (eb << 23));
    precise VT f = m - VT(1.0);
    VT s = f / (VT(2.0) + f);
    VT hfsq = 0.5 * f * f;
    // R(z) to z^4 (atanh_tail's series cut two terms short): the rest is under 4.2e-9
    // for z = s^2 <= 0.0295, so c errs by under 7.2e-10 and t by under 4.2e-9 at |y| = 4
    // (0.05 ulp of the result).
    VT z = s * s;
    VT q = fma(z, VT(2.0 / 9.0), VT(2.0 / 7.0));
    q = fma(q, z, VT(2.0 / 5.0));
    q = fma(q, z, VT(2.0 / 3.0));
    VT c = s * fma(q, z, hfsq);
    VT yc = y;                                  // |y| <= 4: two_prod's operands stay small
    VT g_hi, g_err;
    two_prod(yc, VT(LOG2E_HI), g_hi, g_err);
    precise VT g_lo = g_err + yc * LOG2E_LO;      // y C = g_hi + g_lo
    VT a_hi, a_lo, p_hi, p_lo;
    two_prod(yc, e, a_hi, a_lo);                              // y e
    two_prod(g_hi, f, p_hi, p_lo);                            // g_hi f, |p_hi| <= 2.4
    precise VT sum = a_hi + p_hi;                            // |p_hi| <= |a_hi| unless e = 0
    precise VT sum_err = p_hi - (sum - a_hi);
    precise VT low = fma(g_hi, c - hfsq, fma(g_lo, f, a_lo + p_lo));   // |low| < 0.41
    // k = sum + low rounded to an integer, to nearest even, by adding 1.5 * 2^23
    // (|sum + low| < 2^22): kb's low bits then hold k in two's complement, so kb << 23
    // is k's exponent field; no rounding or conversion instruction. |frac| <= 0.5 + tiny.
    precise VT kb = (sum + low) + VT(12582912.0);
    precise VT k = kb - VT(12582912.0);
    precise VT frac = ((sum - k) + low) + sum_err;
    VT r = exp2_poly(frac);
    ok = LESS_EQ(abs(k), VT(125.0));          // x and y as pow_ admits them: a normal result
    return uintBitsToFloat(floatBitsToUint(r) + (floatBitsToUint(kb) << 23));
}

// Whether every active invocation of the subgroup has b (VOTE: the device has subgroup
// votes), else this invocation's b.
bool subgroup_all_(bool b) {
#ifdef VOTE
    return subgroupAll(b);
#else
    return b;
#endif
}

VT pow_(VT x, VT y) {
    // The short path where all of x and y allow it (the result's range is known only
    // after it). With votes, a subgroup takes it only when all of it can, so one whose
    // invocations differ runs the long path alone rather than both.
    // x normal, positive and finite: its bits less 2^-126's below those of inf less
    // 2^-126's, unsigned (negatives and NaN wrap high); one subtraction and comparison.
    if (!NARROW && subgroup_all_(all_(LESS(floatBitsToUint(x) - UT(0x00800000u), UT(0x7f000000u)))
                                 && all_(LESS_EQ(abs(y), VT(4.0))))) {
        BT ok;
        VT fast = pow_fast(x, y, ok);
        if (all_(ok)) return fast;
    }
    VT ax = abs(x);
    // 16-bit results: exp(y log |x|) has |y log |x|| < 17 (float16) or 93 (bfloat16)
    // wherever the result is finite and not 0; log_narrow's relative error (under 2^-17)
    // then moves the result by under 2^-12.9 or 2^-10.4 of itself, inside one ulp.
    VT mag = DT == LM_EW_F16 ? pow_half(ax, y) : NARROW ? exp_narrow(y * log_narrow(ax)) : pow_mag(ax, y);
    // A finite positive x and a finite y (bit-range tests, as log_narrow's; NaN fails
    // them): mag is the result
    // (x = 1 and y = 0 give exactly 1 there). The rest below only when some element of
    // the vector needs it.
    if (all_(LESS(floatBitsToUint(x) - UT(1u), UT(0x7f7fffffu))) && all_(is_finite(y))) return mag;
    // Zeros and infinities of x or y, which the logarithm above does not see.
    mag = SELECT(EQUAL(ax, VT(0.0)), SELECT(LESS(y, VT(0.0)), VT(INF), VT(0.0)), mag);
    mag = SELECT(EQUAL(ax, VT(INF)), SELECT(LESS(y, VT(0.0)), VT(0.0), VT(INF)), mag);
    BT yinf = EQUAL(abs(y), VT(INF));
    mag = SELECT(yinf, SELECT(EQUAL(LESS(VT(1.0), ax), LESS(VT(0.0), y)), VT(INF), VT(0.0)), mag);
    mag = SELECT(EQUAL(ax, VT(1.0)), VT(1.0), mag);
    // Sign and domain: a negative x (or -0) with an odd integral y flips the sign; a
    // negative finite x with a finite non-integral y is NaN.
    BT integral = EQUAL(floor(y), y);                      // infinities too
    BT odd = EQUAL(y - 2.0 * floor(0.5 * y), VT(1.0));    // exact; false for |y| >= 2^24 and inf
    BT negx = LESS(UT(0x7fffffffu), floatBitsToUint(x));  // sign bit: -0 too
    VT res = SELECT(negx, SELECT(odd, -mag, mag), mag);
    BT bad = AND(AND(LESS(x, VT(0.0)), is_finite(x)), AND(is_finite(y), NOT(integral)));
    res = SELECT(OR(bad, OR(is_nan(x), is_nan(y))), VT(NAN), res);
    return SELECT(OR(EQUAL(y, VT(0.0)), EQUAL(x, VT(1.0))), VT(1.0), res);
}

// log2 and log10 as log_ takes log(m) = (f - hfsq) + r of x = m 2^e, then e log_b(2) +
// log(m) log_b(e), the constants in two parts and the larger terms added last: at x =
// 2^e (f = 0) log2 is e exactly. 16-bit results: log_narrow times the constant.
// LOG10_2_HI has 15 significant bits, so e * LOG10_2_HI is exact for |e| <= 512.
const float LOG10_2_HI = 0.301025390625, LOG10_2_LO = 4.605039066518657e-06;
const float LOG10_E_HI = 0.4342944920063019, LOG10_E_LO = -1.0103049952192578e-08;
VT log_base_(VT x, bool ten) {
    if (NARROW) return log_narrow(x) * (ten ? 0.434294481903251828 : 1.44269504088896341);
    VT m, e;
    split_log(SELECT(is_finite(x), max(x, VT(1e-45)), VT(1.0)), m, e);
    precise VT f = m - VT(1.0);                  // exact
    VT s = f / (VT(2.0) + f);
    precise VT hfsq = 0.5 * f * f;
    precise VT r = s * (hfsq + atanh_tail(s * s));
    precise VT lm_hi = f - hfsq;                 // log(m) = lm_hi + r, |log(m)| < 0.35
    precise VT y;
    if (ten) {
        precise VT low = (lm_hi * LOG10_E_LO + r * LOG10_E_HI) + e * LOG10_2_LO;
        y = e * LOG10_2_HI + (lm_hi * LOG10_E_HI + low);
    } else {
        precise VT low = lm_hi * LOG2E_LO + r * LOG2E_HI;
        y = e + (lm_hi * LOG2E_HI + low);
    }
    y = SELECT(EQUAL(x, VT(0.0)), VT(-INF), y);
    y = SELECT(EQUAL(x, VT(INF)), x, y);
    return SELECT(OR(LESS(x, VT(0.0)), is_nan(x)), VT(NAN), y);
}

// 2^x = 2^k 2^f, k = round(x), |f| <= 0.5 exact, 2^f from exp2_poly (0.04 ulp): one
// rounding past the polynomial's, and 2^k exactly at integers; 0 and inf beyond the range.
VT exp2_(VT x) {
    VT t = clamp(x, VT(-160.0), VT(140.0));
    VT k = roundEven(t);
    VT y = scale2(exp2_poly(t - k), k);
    return SELECT(is_nan(x), x, y);
}

// atan(t) for t >= 0: t reduced to |r| <= tan(pi/8) with atan t = c + atan r (c = 0,
// r = t; c = pi/4, r = (t - 1) / (t + 1); c = pi/2, r = -1/t), atan r = r + r z P(z),
// z = r^2, P of degree 4 fitted to (atan r - r) / r^3 (mpmath chebyfit: 1.6e-8, under
// 0.05 ulp of atan r); c in two parts, added last. One division picks its operands by
// case (t / 1 is t: a reciprocal of 1 is exact).
const float PIO4_HI = 0.78539818525314331, PIO4_LO = -2.1855694143368964e-08;
const float PI_HI = 3.1415927410125732, PI_LO = -8.742277657347586e-08;
VT atan_reduced(VT r, VT c_hi, VT c_lo) {
    VT z = r * r;
    VT q = fma(z, VT(-0.06451928208121749), VT(0.10743731490791084));
    q = fma(q, z, VT(-0.1426395559798464));
    q = fma(q, z, VT(0.19999540483648964));
    q = fma(q, z, VT(-0.3333333176116852));
    precise VT y = c_hi + (fma(r * z, q, r) + c_lo);
    return y;
}
VT atan_pos(VT t) {
    BT big = LESS(VT(2.41421356), t);
    BT mid = AND(LESS(VT(0.41421356), t), NOT(big));
    VT r = SELECT(big, VT(-1.0), SELECT(mid, t - VT(1.0), t)) / SELECT(big, t, SELECT(mid, t + VT(1.0), VT(1.0)));
    VT c_hi = SELECT(big, VT(PIO2_HI), SELECT(mid, VT(PIO4_HI), VT(0.0)));
    VT c_lo = SELECT(big, VT(PIO2_LO), SELECT(mid, VT(PIO4_LO), VT(0.0)));
    return atan_reduced(r, c_hi, c_lo);
}
BT sign_bit(VT x) { return LESS(UT(0x7fffffffu), floatBitsToUint(x)); }
VT atan_(VT x) {
    VT y = atan_pos(abs(x));
    y = SELECT(sign_bit(x), -y, y);                // odd: atan(-0) = -0
    return SELECT(is_nan(x), x, y);
}
// atan2(y, x): atan of the smaller of |y|, |x| over the larger (t in [0, 1]), reduced as
// atan_pos reduces it but in one division: num / den, or (t - 1) / (t + 1) = (num - den) /
// (num + den) past tan(pi/8) (num - den exact from num >= den / 2; both scaled by 1/4, exactly,
// past 2^125 so that the sum stays finite); equal ones (both infinite too) are pi/4, both
// zero 0. Then pi/2 - a where |y| is the larger, pi - a where x is negative (-0
// included), and y's sign: C's special cases (atan2(+-0, -0) = +-pi).
VT atan2_(VT y, VT x) {
    VT ay = abs(y), ax = abs(x);
    BT swap = LESS(ax, ay);
    VT num = SELECT(swap, ax, ay), den = SELECT(swap, ay, ax);
    VT s = SELECT(LESS(VT(4.2535295865117308e37), den), VT(0.25), VT(1.0));
    VT n = num * s, d = den * s;
    BT mid = LESS(d * 0.41421356, n);
    VT r = SELECT(mid, n - d, n) / SELECT(mid, n + d, d);
    BT eq = EQUAL(num, den);
    BT zero = EQUAL(den, VT(0.0));
    r = SELECT(OR(eq, zero), VT(0.0), r);
    mid = AND(OR(mid, eq), NOT(zero));
    VT a = atan_reduced(r, SELECT(mid, VT(PIO4_HI), VT(0.0)), SELECT(mid, VT(PIO4_LO), VT(0.0)));
    precise VT comp = VT(PIO2_HI) + (VT(PIO2_LO) - a);
    a = SELECT(swap, comp, a);
    precise VT back = VT(PI_HI) + (VT(PI_LO) - a);
    a = SELECT(sign_bit(x), back, a);
    a = SELECT(sign_bit(y), -a, a);
    return SELECT(OR(is_nan(x), is_nan(y)), VT(NAN), a);
}
// asin(x) = atan2(x, sqrt((1 - x)(1 + x))), acos(x) = atan2(sqrt(...), x): the
// products lose nothing near +-1 (1 - x exact there); NaN outside [-1, 1].
VT asin_acos_(VT x, bool want_acos) {
    VT c = sqrt_(max((VT(1.0) - x) * (VT(1.0) + x), VT(0.0)));
    VT r = want_acos ? atan2_(c, x) : atan2_(x, c);
    return SELECT(LESS(VT(1.0), abs(x)), VT(NAN), r);
}

// sinh and cosh of |x|: below 20 from expm1 (sinh = (E + E / (E + 1)) / 2, E = e^|x| - 1:
// no cancellation near 0) and exp (cosh = (e + 1/e) / 2); from 20 (where e^-|x| is
// below a 2^-57 of e^|x|) as (t / 2) t with t = e^(|x|/2), finite up to the float32 end.
VT sinh_cosh_(VT x, bool want_cosh) {
    VT ax = abs(x);
    VT t = exp_(0.5 * min(ax, VT(90.0)));
    VT far = (0.5 * t) * t;
    VT near;
    if (want_cosh) {
        VT e = exp_(min(ax, VT(20.0)));
        near = 0.5 * (e + VT(1.0) / e);
    } else {
        VT em = expm1_(min(ax, VT(20.0)));
        near = 0.5 * (em + em / (em + VT(1.0)));
    }
    VT y = SELECT(LESS(ax, VT(20.0)), near, far);
    if (!want_cosh) y = SELECT(sign_bit(x), -y, y);   // odd: sinh(-0) = -0
    return SELECT(is_nan(x), x, y);
}
// asinh(x) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))) (no cancellation), acosh(x) =
// log1p((x - 1) + sqrt((x - 1)(x + 1))) (x - 1 exact near 1); past 2^12 both are
// log|x| + ln 2 (what they drop is below 2^-25 relative). atanh(x) = log1p(2|x| / (1 -
// |x|)) / 2 (1 - |x| exact from 1/2). Signs and domains as C's.
const float LN2_F = 0.693147180559945309;
VT asinh_(VT x) {
    VT ax = abs(x);
    VT xc = min(ax, VT(4096.0));
    VT q = xc * xc;
    VT near = log1p_(xc + q / (VT(1.0) + sqrt_(VT(1.0) + q)));
    VT y = SELECT(LESS(VT(4096.0), ax), log_(ax) + LN2_F, near);
    y = SELECT(sign_bit(x), -y, y);
    return SELECT(is_nan(x), x, y);
}
VT acosh_(VT x) {
    VT xc = clamp(x, VT(1.0), VT(4096.0));
    VT d = xc - VT(1.0);
    VT near = log1p_(d + sqrt_(d * (xc + VT(1.0))));
    VT y = SELECT(LESS(VT(4096.0), x), log_(x) + LN2_F, near);
    return SELECT(OR(LESS(x, VT(1.0)), is_nan(x)), VT(NAN), y);
}
VT atanh_(VT x) {
    VT ax = abs(x);
    VT y = 0.5 * log1p_((2.0 * ax) / (VT(1.0) - ax));
    y = SELECT(EQUAL(ax, VT(1.0)), VT(INF), y);
    y = SELECT(sign_bit(x), -y, y);
    return SELECT(OR(LESS(VT(1.0), ax), is_nan(x)), VT(NAN), y);
}

VT maximum_(VT a, VT b) { return SELECT(OR(is_nan(a), is_nan(b)), a + b, max(a, b)); }
VT minimum_(VT a, VT b) { return SELECT(OR(is_nan(a), is_nan(b)), a + b, min(a, b)); }

// The op's result; ops outside this variant's family (which the host never asks of it)
// give NaN.
VT apply(VT a, VT b, VT c) {
#if EW_FAMILY == LM_EW_FAM_BASIC
    if (OP == LM_EW_ADD) return a + b;
    if (OP == LM_EW_SUB) return a - b;
    if (OP == LM_EW_MUL) return a * b;
    if (OP == LM_EW_DIV) return a / b;
    if (OP == LM_EW_RSUB) return b - a;
    if (OP == LM_EW_RDIV) return b / a;
    if (OP == LM_EW_RELU) return relu(a);
    if (OP == LM_EW_ABS) return abs(a);
    if (OP == LM_EW_SQRT) return sqrt_(a);
    if (OP == LM_EW_RSQRT) return rsqrt_(a);
    if (OP == LM_EW_SQUARE) return a * a;
    if (OP == LM_EW_CUBE) return a * a * a;
    if (OP == LM_EW_RSQUARE) return VT(1.0) / (a * a);
    if (OP == LM_EW_MAXIMUM) return maximum_(a, b);
    if (OP == LM_EW_MINIMUM) return minimum_(a, b);
    if (OP == LM_EW_CLAMP) return minimum_(maximum_(a, b), c);
    if (OP == LM_EW_EQ) return VT(EQUAL(a, b));
    if (OP == LM_EW_NE) return VT(1.0) - VT(EQUAL(a, b));
    if (OP == LM_EW_LT) return VT(LESS(a, b));
    if (OP == LM_EW_LE) return VT(LESS_EQ(a, b));
    if (OP == LM_EW_GT) return VT(LESS(b, a));
    if (OP == LM_EW_GE) return VT(LESS_EQ(b, a));
    if (OP == LM_EW_WHERE) return SELECT(EQUAL(a, VT(0.0)), c, b);
    if (OP == LM_EW_COPY) return a;
    if (OP == LM_EW_FLOOR) return floor(a);
    if (OP == LM_EW_CEIL) return ceil(a);
    if (OP == LM_EW_ROUND) return roundEven(a);
    if (OP == LM_EW_TRUNC) return trunc(a);
    if (OP == LM_EW_SIGN) return VT(LESS(VT(0.0), a)) - VT(LESS(a, VT(0.0)));
#elif EW_FAMILY == LM_EW_FAM_EXPLOG
    if (OP == LM_EW_EXP) return NARROW ? exp_narrow(a) : exp_(a);
    if (OP == LM_EW_LOG) return NARROW ? log_narrow(a) : log_(a);
    if (OP == LM_EW_EXPM1) return NARROW ? expm1_narrow(a) : expm1_(a);
    if (OP == LM_EW_LOG1P) return NARROW ? log1p_narrow(a) : log1p_(a);
    if (OP == LM_EW_LOG2) return log_base_(a, false);
    if (OP == LM_EW_LOG10) return log_base_(a, true);
    if (OP == LM_EW_EXP2) return exp2_(a);
    if (OP == LM_EW_TANH) return tanh_(a);
    if (OP == LM_EW_SIGMOID) return sigmoid_(a);
    if (OP == LM_EW_SILU) return silu_(a);
#elif EW_FAMILY == LM_EW_FAM_POW
    if (OP == LM_EW_POW) return pow_(a, b);
    if (OP == LM_EW_RPOW) return pow_(b, a);
#elif EW_FAMILY == LM_EW_FAM_TRIG
    if (OP == LM_EW_SIN) return sincos_(a, false);
    if (OP == LM_EW_COS) return sincos_(a, true);
    if (OP == LM_EW_TAN) return sincos_(a, false);
#elif EW_FAMILY == LM_EW_FAM_ARC
    if (OP == LM_EW_ATAN) return atan_(a);
    if (OP == LM_EW_ASIN) return asin_acos_(a, false);
    if (OP == LM_EW_ACOS) return asin_acos_(a, true);
    if (OP == LM_EW_ATAN2) return atan2_(a, b);
    if (OP == LM_EW_RATAN2) return atan2_(b, a);
    if (OP == LM_EW_SINH) return sinh_cosh_(a, false);
    if (OP == LM_EW_COSH) return sinh_cosh_(a, true);
    if (OP == LM_EW_ASINH) return asinh_(a);
    if (OP == LM_EW_ACOSH) return acosh_(a);
    if (OP == LM_EW_ATANH) return atanh_(a);
#elif EW_FAMILY == LM_EW_FAM_ERF
    if (OP == LM_EW_GELU_TANH) return gelu_tanh(a);
    if (OP == LM_EW_GELU_ERF) return NARROW ? gelu_erf_narrow(a) : gelu_erf(a);
    if (OP == LM_EW_GELU_TANH_GRAD) return gelu_tanh_grad(a, b);
    if (OP == LM_EW_GELU_ERF_GRAD) return gelu_erf_grad(a, b);
    if (OP == LM_EW_ERF) return erf_(a);
#endif
    return VT(NAN);
}

// ---- Loads and stores by element type.

// float32 -> float16 bits, rounded to nearest even (overflow to inf, subnormals, NaN).
uint half_bits(float v) {
    uint x = floatBitsToUint(v);
    uint s = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return s | 0x7e00u;
    if (ax >= 0x477ff000u) return s | 0x7c00u;              // 65520 and up round to inf
    if (ax >= 0x38800000u) {                                 // a normal half
        uint r = ax - 0x38000000u;
        return s | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13);
    }
    return s | uint(roundEven(uintBitsToFloat(ax) * 16777216.0));   // subnormal (exact product)
}
// float32 -> bfloat16 bits, rounded to nearest even; NaN stays a (quiet) NaN.
uint bf16_bits(float v) {
    uint x = floatBitsToUint(v);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}
uint narrow_bits(float v, uint dt) {
    if (dt == LM_EW_BOOL) return v != 0.0 ? 1u : 0u;
    return dt == LM_EW_F16 ? half_bits(v) : bf16_bits(v);
}
float widen(uint h, uint dt) {
    if (dt == LM_EW_BOOL) return (h & 0xffu) != 0u ? 1.0 : 0.0;
    return dt == LM_EW_F16 ? unpackHalf2x16(h).x : uintBitsToFloat(h << 16);
}
uint elem_bytes(uint dt) { return dt == LM_EW_F32 ? 4u : dt == LM_EW_BOOL ? 1u : 2u; }

// 4 float16 or bfloat16 results in two words.
uvec2 half_words(vec4 v, uint dt) {
    if (dt == LM_EW_F16 && HW_HALF != 0u) return uvec2(packHalf2x16(v.xy), packHalf2x16(v.zw));
    return uvec2(narrow_bits(v.x, dt) | (narrow_bits(v.y, dt) << 16), narrow_bits(v.z, dt) | (narrow_bits(v.w, dt) << 16));
}

// Element i of a tensor at base.
float load1(uint64_t base, uint64_t i, uint dt) {
    if (dt == LM_EW_F32) return FloatArray(base + i * 4ul).v[0];
    uint64_t addr = base + i * uint64_t(elem_bytes(dt));
    uint w = UintArray(addr & ~3ul).v[0];
    return widen(w >> (uint(addr & 3ul) * 8u), dt);
}

// 4 bools in a word, 4 halves (float16 or bfloat16) in two words.
vec4 widen_bools(uint w) { return vec4(notEqual(uvec4(w, w >> 8, w >> 16, w >> 24) & 0xffu, uvec4(0u))); }
vec4 widen_halves(uvec2 w, uint dt) {
    if (dt == LM_EW_F16) return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
    return vec4(uintBitsToFloat(w.x << 16), uintBitsToFloat(w.x & 0xffff0000u),
                uintBitsToFloat(w.y << 16), uintBitsToFloat(w.y & 0xffff0000u));
}

// Elements 4q..4q+3 of a tensor at base (16-byte aligned).
vec4 load4(uint64_t base, uint64_t q, uint dt) {
    if (dt == LM_EW_F32) return Vec4Array(base + q * 16ul).v[0];
    if (dt == LM_EW_BOOL) return widen_bools(UintArray(base + q * 4ul).v[0]);
    return widen_halves(Uvec2Array(base + q * 8ul).v[0], dt);
}

// Elements 8q..8q+7 of a 16- or 8-bit tensor at base (16-byte aligned): one 16-byte
// load of halves, one 8-byte load of bools.
void load8(uint64_t base, uint64_t q, uint dt, out vec4 lo, out vec4 hi) {
    if (dt == LM_EW_BOOL) {
        uvec2 w = Uvec2Array(base + q * 8ul).v[0];
        lo = widen_bools(w.x);
        hi = widen_bools(w.y);
        return;
    }
    uvec4 w = Uvec4Array(base + q * 16ul).v[0];
    lo = widen_halves(w.xy, dt);
    hi = widen_halves(w.zw, dt);
}

// The bits of `value` under `mask` into the word at addr; the other bits stay (another
// tensor's or another view's bytes may share the word).
void store_masked(uint64_t addr, uint value, uint mask) {
    atomicAnd(UintArray(addr).v[0], ~mask);
    atomicOr(UintArray(addr).v[0], value & mask);
}

// Elements 4q..4q+count-1 (count 1 to 4) of a result at base (16-byte aligned): whole
// words where all their elements are written, masked atomics for a last partial word.
void store4(uint64_t base, uint64_t q, vec4 v, uint count, uint dt) {
    if (dt == LM_EW_F32) {
        if (count == 4u) Vec4Array(base + q * 16ul).v[0] = v;
        else for (uint i = 0u; i < count; ++i) FloatArray(base + (q * 4ul + i) * 4ul).v[0] = v[i];
        return;
    }
    if (dt == LM_EW_BOOL) {
        uint w = narrow_bits(v.x, dt) | (narrow_bits(v.y, dt) << 8) | (narrow_bits(v.z, dt) << 16)
                 | (narrow_bits(v.w, dt) << 24);
        if (count == 4u) UintArray(base + q * 4ul).v[0] = w;
        else store_masked(base + q * 4ul, w, (1u << (8u * count)) - 1u);
        return;
    }
    uvec2 w = half_words(v, dt);
    if (count == 4u) { Uvec2Array(base + q * 8ul).v[0] = w; return; }
    uint64_t a0 = base + q * 8ul;
    if (count >= 2u) UintArray(a0).v[0] = w.x; else store_masked(a0, w.x, 0xffffu);
    if (count == 3u) store_masked(a0 + 4ul, w.y, 0xffffu);
}

uint bool_word(vec4 v) {
    return uint(v.x != 0.0) | (uint(v.y != 0.0) << 8) | (uint(v.z != 0.0) << 16) | (uint(v.w != 0.0) << 24);
}

// All 8 elements 8q..8q+7 of a 16- or 8-bit result at base (16-byte aligned), one store.
void store8(uint64_t base, uint64_t q, vec4 lo, vec4 hi, uint dt) {
    if (dt == LM_EW_BOOL) Uvec2Array(base + q * 8ul).v[0] = uvec2(bool_word(lo), bool_word(hi));
    else Uvec4Array(base + q * 16ul).v[0] = uvec4(half_words(lo, dt), half_words(hi, dt));
}

#ifdef ND

// Per dimension (outermost first), 1 + ARITY words: the size, then each operand's stride
// in elements. 20 words hold 8 dimensions of unary ops, 6 of binary ones and 5 of
// ternary ones (the host collapses dimensions first, and copies operands to contiguous
// ones when more remain).
const uint ARITY = OP == LM_EW_WHERE || OP == LM_EW_CLAMP ? 3u
                 : (OP == LM_EW_ADD || OP == LM_EW_SUB || OP == LM_EW_MUL || OP == LM_EW_DIV
                    || OP == LM_EW_RSUB || OP == LM_EW_RDIV || OP == LM_EW_POW || OP == LM_EW_RPOW
                    || OP == LM_EW_MAXIMUM || OP == LM_EW_MINIMUM || COMPARE
                    || OP == LM_EW_ATAN2 || OP == LM_EW_RATAN2
                    || OP == LM_EW_GELU_TANH_GRAD || OP == LM_EW_GELU_ERF_GRAD) ? 2u : 1u;
const uint SCALAR_FLAG = 0x100u;   // ndim_flags bit 8 + k: operand k is the number in its address word

layout(push_constant) uniform Params {
    uint64_t operand[3];   // addresses (element offsets folded in), or a number's bits
    uint64_t dst;
    uint64_t n;            // elements of the result
    uint ndim_flags;       // dimensions in the low byte, SCALAR_FLAG << k above
    uint groups_x;
    uint dims[20];
} p;

void main() {
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t q = group * uint64_t(WG) + gl_LocalInvocationID.x;
    uint64_t first = q * 4ul;
    if (first >= p.n) return;
    int ndim = int(p.ndim_flags & 0xffu);
    const uint W = 1u + ARITY;
    uint coord[8];
    uint64_t off[3] = uint64_t[3](0ul, 0ul, 0ul);
    // Coordinates of the first element, innermost dimension fastest.
    if (p.n <= 0xfffffffful) {
        uint r = uint(first);
        for (int d = ndim - 1; d >= 0; --d) {
            uint size = p.dims[uint(d) * W];
            coord[d] = r % size;
            r /= size;
        }
    } else {
        uint64_t r = first;
        for (int d = ndim - 1; d >= 0; --d) {
            uint64_t size = uint64_t(p.dims[uint(d) * W]);
            coord[d] = uint(r % size);
            r /= size;
        }
    }
    for (int d = 0; d < ndim; ++d)
        for (uint k = 0u; k < ARITY; ++k) off[k] += uint64_t(coord[d]) * p.dims[uint(d) * W + 1u + k];
    uint count = uint(min(p.n - first, 4ul));
    vec4 res = vec4(0.0);
    // The 4 results in one run of the innermost dimension (the usual case): each operand
    // that steps 1 there from an aligned start is read as one vector, one that steps 0
    // (a [R, 1] column) as one element, so no carries either.
    uint inner = uint(ndim - 1) * W;
    bool run = count == 4u && coord[ndim - 1] + 3u < p.dims[inner];
    for (uint k = 0u; k < ARITY; ++k) {
        uint step = p.dims[inner + 1u + k];
        bool number = (p.ndim_flags & (SCALAR_FLAG << k)) != 0u;
        run = run && (number || step == 0u || (step == 1u && (off[k] & 3ul) == 0ul && (p.operand[k] & 15ul) == 0ul));
    }
    if (run) {
        vec4 v[3];
        for (uint k = 0u; k < 3u; ++k) {
            uint dt = k == 0u ? DT_A : DT;
            if (k >= ARITY) v[k] = vec4(0.0);
            else if ((p.ndim_flags & (SCALAR_FLAG << k)) != 0u) v[k] = vec4(uintBitsToFloat(uint(p.operand[k])));
            else if (p.dims[inner + 1u + k] == 0u) v[k] = vec4(load1(p.operand[k], off[k], dt));
            else v[k] = load4(p.operand[k], off[k] / 4ul, dt);
        }
        for (uint e = 0u; e < 4u; ++e) res[e] = apply(v[0][e], v[1][e], v[2][e]);
        store4(p.dst, q, res, 4u, DT_OUT);
        return;
    }
    for (uint e = 0u; e < count; ++e) {
        float v[3];
        for (uint k = 0u; k < 3u; ++k) {
            uint dt = k == 0u ? DT_A : DT;
            if (k >= ARITY) v[k] = 0.0;
            else if ((p.ndim_flags & (SCALAR_FLAG << k)) != 0u) v[k] = uintBitsToFloat(uint(p.operand[k]));
            else v[k] = load1(p.operand[k], off[k], dt);
        }
        res[e] = apply(v[0], v[1], v[2]);
        // The next element: a carry from the innermost dimension out.
        for (int d = ndim - 1; d >= 0; --d) {
            uint base = uint(d) * W;
            for (uint k = 0u; k < ARITY; ++k) off[k] += uint64_t(p.dims[base + 1u + k]);
            if (++coord[d] < p.dims[base]) break;
            for (uint k = 0u; k < ARITY; ++k) off[k] -= uint64_t(p.dims[base]) * p.dims[base + 1u + k];
            coord[d] = 0u;
        }
    }
    store4(p.dst, q, res, count, DT_OUT);
}

#else

layout(constant_id = 5) const uint C_TENSOR = 0;   // 1: c is a tensor like b in LM_EW_SAME (where)

layout(push_constant) uniform Params {
    uint64_t a, b, dst;   // device addresses
    uint64_t n;           // elements of a and dst
    uint64_t period;      // LM_EW_BCAST: vectors of b, the length of its repeat
    uint64_t wg_mod;      // WG mod period
    uint64_t c;           // C_TENSOR: c's address
    uint64_t wg_div;      // LM_EW_COLUMN: WG / period
    float scalar;         // b when MODE is LM_EW_SCALAR
    float scalar2;        // c unless C_TENSOR
    uint groups_x;        // width of the grid, for 2-D folding
} p;

#if VEC == 4
VT load(uint64_t base, uint64_t k, uint dt) { return load4(base, k, dt); }
#else
VT load(uint64_t base, uint64_t k, uint dt) { return FloatArray(base + k * 4ul).v[0]; }   // float32 only
#endif

uint64_t wrap(uint64_t j) { return j >= p.period ? j - p.period : j; }

uint64_t mod_period(uint64_t k) {
    return (k >> 32) == 0ul && (p.period >> 32) == 0ul ? uint64_t(uint(k) % uint(p.period)) : k % p.period;
}

// LM_EW_COLUMN: j = k / period and r = k % period for the vector k, then k advanced by WG
// (carried, no division).
void col_start(uint64_t k, out uint64_t j, out uint64_t r) {
    if ((k >> 32) == 0ul && (p.period >> 32) == 0ul) {
        uint q = uint(k) / uint(p.period);
        j = uint64_t(q);
        r = uint64_t(uint(k) - q * uint(p.period));
    } else {
        j = k / p.period;
        r = k - j * p.period;
    }
}
void col_step(inout uint64_t j, inout uint64_t r) {
    j += p.wg_div;
    r += p.wg_mod;
    if (r >= p.period) { r -= p.period; j += 1ul; }
}

#if VEC == 4
// Elements per thread and step: 8 where the data are float16 or bfloat16 and b does not
// repeat (one 16-byte access per operand, 8 bytes for bools), else 4 (a repeated b keeps
// periods that are multiples of 4). src/ops/elementwise.c sizes the grid by the same rule.
const uint EPV = DT != LM_EW_F32 && MODE != LM_EW_BCAST ? 8u : 4u;

// Elements start.. (start a multiple of 4, fewer than 8 of them), by one thread.
void tail(uint64_t start) {
    uint count = uint(p.n - start);
    for (uint h = 0u; h * 4u < count; ++h) {
        uint m = min(count - h * 4u, 4u);
        uint64_t at = start + uint64_t(h) * 4ul;
        vec4 a4 = vec4(0.0), b4 = vec4(p.scalar), c4 = vec4(p.scalar2);
        for (uint e = 0u; e < m; ++e) {
            a4[e] = load1(p.a, at + e, DT_A);
            if (MODE == LM_EW_SAME) b4[e] = load1(p.b, at + e, DT);
            if (C_TENSOR != 0u) c4[e] = load1(p.c, at + e, DT);
        }
        store4(p.dst, at / 4ul, apply(a4, b4, c4), m, DT_OUT);
    }
}

// where on 16-bit data (tensor operands) moves the bits of the chosen halves: no
// conversion either way, NaN payloads kept. The mask of the halves in a word from the
// bools in the low two bytes of w.
uint half_mask(uint w) { return ((w & 0xffu) != 0u ? 0xffffu : 0u) | ((w & 0xff00u) != 0u ? 0xffff0000u : 0u); }

void where8(uint64_t group) {
    uint64_t n8 = p.n / 8ul;
    uint64_t first = group * uint64_t(WG * UNROLL) + gl_LocalInvocationID.x;
    uvec2 m[UNROLL];
    uvec4 b[UNROLL], c[UNROLL];
    [[unroll]] for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n8) {
            m[i] = Uvec2Array(p.a + k * 8ul).v[0];
            b[i] = Uvec4Array(p.b + k * 16ul).v[0];
            c[i] = Uvec4Array(p.c + k * 16ul).v[0];
        }
    }
    [[unroll]] for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n8) {
            uvec4 sel = uvec4(half_mask(m[i].x), half_mask(m[i].x >> 16), half_mask(m[i].y), half_mask(m[i].y >> 16));
            Uvec4Array(p.dst + k * 16ul).v[0] = (b[i] & sel) | (c[i] & ~sel);
        }
    }
    // The last n % 8 elements, by the first thread, one half at a time.
    if (group == 0ul && gl_LocalInvocationID.x == 0u) {
        for (uint64_t e = n8 * 8ul; e < p.n; ++e) {
            uint64_t src = (load1(p.a, e, LM_EW_BOOL) != 0.0 ? p.b : p.c) + e * 2ul;
            uint h = (UintArray(src & ~3ul).v[0] >> (uint(src & 3ul) * 8u)) & 0xffffu;
            uint64_t dst = p.dst + e * 2ul;
            uint shift = uint(dst & 3ul) * 8u;
            store_masked(dst & ~3ul, h << shift, 0xffffu << shift);
        }
    }
}

void main8(uint64_t group) {
    if (OP == LM_EW_WHERE && MODE == LM_EW_SAME && C_TENSOR != 0u) {
        where8(group);
        return;
    }
    uint64_t n8 = p.n / 8ul;
    uint64_t first = group * uint64_t(WG * UNROLL) + gl_LocalInvocationID.x;
    vec4 a0[UNROLL], a1[UNROLL], b0[UNROLL], b1[UNROLL], c0[UNROLL], c1[UNROLL];
    uint64_t j = 0ul, r = 0ul;
    if (MODE == LM_EW_COLUMN) col_start(first, j, r);
    [[unroll]] for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n8) {
            load8(p.a, k, DT_A, a0[i], a1[i]);
            if (MODE == LM_EW_SAME) load8(p.b, k, DT, b0[i], b1[i]);
            else if (MODE == LM_EW_COLUMN) { b0[i] = vec4(load1(p.b, j, DT)); b1[i] = b0[i]; }
            else { b0[i] = vec4(p.scalar); b1[i] = b0[i]; }
            if (C_TENSOR != 0u) load8(p.c, k, DT, c0[i], c1[i]);
            else { c0[i] = vec4(p.scalar2); c1[i] = c0[i]; }
        }
        if (MODE == LM_EW_COLUMN) col_step(j, r);
    }
    [[unroll]] for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n8) store8(p.dst, k, apply(a0[i], b0[i], c0[i]), apply(a1[i], b1[i], c1[i]), DT_OUT);
    }
    if (group == 0ul && gl_LocalInvocationID.x == 0u && p.n > n8 * 8ul) tail(n8 * 8ul);
}
#endif

void main() {
    uint64_t nv = p.n / uint64_t(VEC);
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
#if VEC == 4
    if (EPV == 8u) {
        main8(group);
        return;
    }
#endif
    uint64_t first = group * uint64_t(WG * UNROLL) + gl_LocalInvocationID.x;
    uint64_t j = MODE == LM_EW_BCAST ? mod_period(first) : 0ul, r = 0ul;
    if (MODE == LM_EW_COLUMN) col_start(first, j, r);
    VT va[UNROLL], vb[UNROLL], vc[UNROLL];
    [[unroll]] for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < nv) {
            va[i] = load(p.a, k, DT_A);
            if (MODE == LM_EW_SAME) vb[i] = load(p.b, k, DT);
            else if (MODE == LM_EW_BCAST) vb[i] = load(p.b, j, DT);
            else if (MODE == LM_EW_COLUMN) vb[i] = VT(load1(p.b, j, DT));
            else vb[i] = VT(p.scalar);
            vc[i] = C_TENSOR != 0u ? load(p.c, k, DT) : VT(p.scalar2);
        }
        if (MODE == LM_EW_BCAST) j = wrap(j + p.wg_mod);
        if (MODE == LM_EW_COLUMN) col_step(j, r);
    }
    [[unroll]] for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
#if VEC == 4
        if (k < nv) store4(p.dst, k, apply(va[i], vb[i], vc[i]), 4u, DT_OUT);
#else
        if (k < nv) FloatArray(p.dst + k * 4ul).v[0] = apply(va[i], vb[i], vc[i]);
#endif
    }
#if VEC == 4
    // The last n % 4 elements, by the first thread (never in LM_EW_BCAST, whose period
    // is a multiple of 4 here).
    if (group == 0ul && gl_LocalInvocationID.x == 0u && p.n > nv * 4ul) tail(nv * 4ul);
#endif
}

#endif
