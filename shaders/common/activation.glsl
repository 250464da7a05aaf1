// Activations applied in the store of the linear kernels (gemv.comp, linear_small.comp):
// y = act(v) on float32 values. ACT codes are shared with C (src/ops/ops.h LM_ACT_*):
//   0 none, 1 relu, 2 gelu (erf form), 3 gelu_tanh, 4 silu, 5 tanh, 6 sigmoid.
// NaN stays NaN; limits at +-inf follow PyTorch (silu(-inf) = NaN as -inf * 0).
// gelu_tanh is the elementwise kernel's formula (same operations, so the same float32
// result on a device whose exp is deterministic); the others are within a few float32
// ulps of the float64 functions on [-20, 20] (erfc from a rational Chebyshev-style fit of
// relative error below 1.2e-7).

float act_relu(float x) { return x < 0.0 ? 0.0 : x; }

float act_gelu_tanh(float x) {
    const float K = 1.5957691216057308;             // 2 sqrt(2/pi)
    const float K3 = 0.071354816271593;             // 2 sqrt(2/pi) * 0.044715
    float u2 = x * fma(K3, x * x, K);
    return x / (1.0 + exp(-u2));
}

// erfc(z) for z >= 0: z' = 1 / (1 + z/2), erfc = z' exp(-z^2 + P(z')), P of degree 9.
float act_erfc_pos(float z) {
    float u = 1.0 / (1.0 + 0.5 * z);
    float p = fma(u, 0.17087277, -0.82215223);
    p = fma(u, p, 1.48851587);
    p = fma(u, p, -1.13520398);
    p = fma(u, p, 0.27886807);
    p = fma(u, p, -0.18628806);
    p = fma(u, p, 0.09678418);
    p = fma(u, p, 0.37409196);
    p = fma(u, p, 1.00002368);
    p = fma(u, p, -1.26551223);
    return u * exp(p - z * z);
}

// 0.5 x (1 + erf(x / sqrt 2)): 0.5 x erfc(-t) for x < 0 (small results keep their
// relative accuracy), x - 0.5 x erfc(t) above.
float act_gelu(float x) {
    float t = abs(x) * 0.70710678118654752;
    float c = act_erfc_pos(min(t, 30.0));
    return x < 0.0 ? 0.5 * x * c : x - 0.5 * x * c;
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
