#version 450
// Elementwise ops, one shader for all: out[k] = f(a[k], b) over n floats. The op (OP) and
// where b comes from (MODE) are specialization constants, so each pipeline is one
// straight-line kernel:
//   LM_EW_SAME    b has n elements and b[k] pairs with a[k]
//   LM_EW_BCAST   b has `period` vectors (its shape is a trailing part of a's) and repeats:
//                 b[k mod period]
//   LM_EW_SCALAR  b is the number p.scalar (unary ops ignore it)
// VEC = 4 moves vec4s and leaves the n % 4 tail to the first workgroup; VEC = 1 moves
// floats, for broadcasts whose period is not a multiple of 4 (a's rows then start
// unaligned).
// Each thread handles UNROLL vectors a workgroup apart (loads first, then stores), as
// copy.comp does; groups past maxComputeWorkGroupCount[0] arrive on a 2-D grid. Indices
// are 64-bit, so tensors past 2^32 elements address correctly. The broadcast index
// k mod period takes one division per thread (32-bit when both fit), then adds and
// compares.
// out may be a or b itself: each element is read, then written, by the same thread.
#include "common/buffers.glsl"
#include "common/elementwise_ops.h"   // LM_EW_*: the op and mode codes, shared with C

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = LM_EW_ADD;
layout(constant_id = 2) const uint MODE = LM_EW_SAME;
const uint WG = gl_WorkGroupSize.x;
const uint UNROLL = 4;   // src/ops/elementwise.c sizes the grid with the same number

layout(push_constant) uniform Params {
    uint64_t a, b, dst;   // device addresses
    uint64_t n;           // elements of a and dst
    uint64_t period;      // LM_EW_BCAST: vectors of b, the length of its repeat
    uint64_t wg_mod;      // WG mod period
    float scalar;
    uint groups_x;        // width of the grid, for 2-D folding
} p;

#if VEC == 4
#define VT vec4
#define ARRAY Vec4Array
#define LESS(x, y) lessThan(x, y)
#else
#define VT float
#define ARRAY FloatArray
#define LESS(x, y) ((x) < (y))
#endif
// Per-component choice (a select, so the branch not taken may hold inf or NaN).
#define SELECT(cond, yes, no) mix(no, yes, cond)

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

// gelu, erf form: 0.5 x (1 + erf(x / sqrt 2)); for x < 0, 1 + erf(t) is erfc(-t), taken
// directly so that small results keep their relative accuracy.
VT gelu_erf(VT x) {
    VT t = x * 0.70710678118654752;
    VT a = abs(t), c = erfc_outer(a);
    VT one_plus = SELECT(LESS(a, VT(1.0)), VT(1.0) + erf_inner(t),
                         SELECT(LESS(t, VT(0.0)), c, VT(2.0) - c));
    return 0.5 * x * one_plus;
}

VT apply(VT a, VT b) {
    if (OP == LM_EW_ADD) return a + b;
    if (OP == LM_EW_SUB) return a - b;
    if (OP == LM_EW_MUL) return a * b;
    if (OP == LM_EW_DIV) return a / b;
    if (OP == LM_EW_RSUB) return b - a;
    if (OP == LM_EW_RDIV) return b / a;
    if (OP == LM_EW_RELU) return relu(a);
    if (OP == LM_EW_GELU_TANH) return gelu_tanh(a);
    if (OP == LM_EW_GELU_ERF) return gelu_erf(a);
    if (OP == LM_EW_ABS) return abs(a);
    return erf_(a);
}

VT load(uint64_t base, uint64_t k) { return ARRAY(base + k * uint64_t(VEC * 4)).v[0]; }
void store(uint64_t base, uint64_t k, VT v) { ARRAY(base + k * uint64_t(VEC * 4)).v[0] = v; }
uint64_t wrap(uint64_t j) { return j >= p.period ? j - p.period : j; }

uint64_t mod_period(uint64_t k) {
    return (k >> 32) == 0ul && (p.period >> 32) == 0ul ? uint64_t(uint(k) % uint(p.period)) : k % p.period;
}

void main() {
    uint64_t nv = p.n / uint64_t(VEC);
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t first = group * uint64_t(WG * UNROLL) + gl_LocalInvocationID.x;
    uint64_t j = MODE == LM_EW_BCAST ? mod_period(first) : 0ul;
    VT va[UNROLL], vb[UNROLL];
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < nv) {
            va[i] = load(p.a, k);
            if (MODE == LM_EW_SAME) vb[i] = load(p.b, k);
            else if (MODE == LM_EW_BCAST) vb[i] = load(p.b, j);
            else vb[i] = VT(p.scalar);
        }
        if (MODE == LM_EW_BCAST) j = wrap(j + p.wg_mod);
    }
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < nv) store(p.dst, k, apply(va[i], vb[i]));
    }
#if VEC == 4
    // The last n % 4 elements (never in LM_EW_BCAST, whose period is a multiple of 4 here).
    uint64_t e = nv * 4ul + gl_LocalInvocationID.x;
    if (group == 0ul && e < p.n) {
        float ae = FloatArray(p.a + e * 4ul).v[0];
        float be = p.scalar;
        if (MODE == LM_EW_SAME) be = FloatArray(p.b + e * 4ul).v[0];
        FloatArray(p.dst + e * 4ul).v[0] = apply(VT(ae), VT(be)).x;
    }
#endif
}
