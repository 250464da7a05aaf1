// Activations applied in the store of the linear kernels (gemv.comp, linear_small.comp):
// y = act(v) on float32 values. ACT codes are shared with C (src/ops/ops.h LM_ACT_*):
//   0 none, 1 relu, 2 gelu (erf form), 3 gelu_tanh, 4 silu, 5 tanh, 6 sigmoid.
// NaN stays NaN; limits at +-inf follow PyTorch (silu(-inf) = NaN as -inf * 0).
// gelu_tanh is the elementwise kernel's formula (same operations, so the same float32
// result on a device whose exp is deterministic), and gelu is the elementwise kernel's
// float32 gelu; the others are within a few float32 ulps of the float64 functions on
// [-20, 20].

float act_relu(float x) { return x < 0.0 ? 0.0 : x; }

float act_gelu_tanh(float x) {
    const float K = 1.5957691216057308;             // 2 sqrt(2/pi)
    const float K3 = 0.071354816271593;             // 2 sqrt(2/pi) * 0.044715
    float u2 = x * fma(K3, x * x, K);
    return x / (1.0 + exp(-u2));
}

// The standard normal distribution's upper tail Q(a) = P(Z > a) for a >= 0, as
// exp(-a^2/2) R(a): R is smooth on [0, inf) and, in t = (a - 4) / (a + 4) (which maps it
// to [-1, 1)), a polynomial of degree 10 (tools/fit_normal_tail.py: a least-squares fit
// reweighted towards equal relative ripple; as float32 coefficients within 3.6e-8 of R
// for a <= 4, 1e-7 to 8). The float32 evaluation keeps R within 2e-7
// relative; past a = 4 the rounding of a^2 in the exponent dominates (1e-6 at a = 5.5).
// e = exp(-a^2/2) is returned for callers that need the density too. a = +inf gives
// t = NaN: callers clamp a first.
float normal_tail(float a, out float e) {
    float t = (a - 4.0) / (a + 4.0);
    float r = fma(t, 1.94503464e-05, -3.53718096e-05);
    r = fma(r, t, -0.000179168856);
    r = fma(r, t, 0.000629177608);
    r = fma(r, t, 0.000504738127);
    r = fma(r, t, -0.0084880041);
    r = fma(r, t, 0.030865049);
    r = fma(r, t, -0.0717081055);
    r = fma(r, t, 0.124379285);
    r = fma(r, t, -0.170397684);
    r = fma(r, t, 0.094410643);
    e = exp2(a * a * -0.72134752044448170);   // exp(-a^2/2)
    return r * e;
}

// gelu, erf form: x Phi(x), Phi(x) = Q(-x) for x < 0 (small results keep their relative
// accuracy), 1 - Q(x) above. |x| is clamped to 1e4 (Q there is 0): +inf gives +inf,
// -inf NaN (as PyTorch's -inf * 0), NaN NaN, -0 -0. Measured against the float64
// reference on lavapipe (spec/ops_spec.lua's grid): within 1.05e-7 of max(1, |gelu|),
// and 1.4e-6 relative for x in [-5.5, 0).
float act_gelu(float x) {
    float e, q = normal_tail(min(abs(x), 1e4), e);
    return x * (x < 0.0 ? q : 1.0 - q);
}

float act_sigmoid(float x) {
    if (isnan(x)) return x;
    float e = exp(-abs(x));
    return (x < 0.0 ? e : 1.0) / (1.0 + e);
}

float act_silu(float x) {
    float e = exp(-abs(x));
    return (x < 0.0 ? x * e : x) / (1.0 + e);
}

// tanh: a Taylor series below 0.35 (to a^9: truncation under 2e-8 relative), else
// 1 - 2 / (e^2a + 1) (no cancellation past 0.35 worth a float32 ulp); sign restored.
float act_tanh(float x) {
    if (isnan(x)) return x;
    float a = abs(x);
    float y;
    if (a < 0.35) {
        float s = a * a;
        float q = fma(s, 62.0 / 2835.0, -17.0 / 315.0);
        q = fma(q, s, 2.0 / 15.0);
        q = fma(q, s, -1.0 / 3.0);
        y = fma(a * s, q, a);
    } else {
        y = a > 9.1 ? 1.0 : 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    }
    return x < 0.0 ? -y : y;
}

float act_apply(uint act, float v) {
    if (act == 1u) return act_relu(v);
    if (act == 2u) return act_gelu(v);
    if (act == 3u) return act_gelu_tanh(v);
    if (act == 4u) return act_silu(v);
    if (act == 5u) return act_tanh(v);
    if (act == 6u) return act_sigmoid(v);
    return v;
}
