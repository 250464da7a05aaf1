#version 450
// One optimizer step over a float32 parameter in one pass: each thread reads 4
// consecutive elements of the parameter, its gradient and its state tensors, and writes
// the new parameter and state. Every scalar (learning rate, bias corrections, ...) comes
// in push constants, computed by the host in double precision (src/ops/optim.c), so the
// arithmetic here is PyTorch's per-element sequence in float32:
//
// KIND = 0, SGD (s1: momentum buffer, when HAS_MOMENTUM):
//   g = grad + weight_decay * param
//   buf = FIRST ? g : momentum * buf + (1 - dampening) * g
//   g = NESTEROV ? g + momentum * buf : buf
//   param = param - lr * g
// KIND = 1, Adam / AdamW (s1: exp_avg, s2: exp_avg_sq, s3: max_exp_avg_sq with AMSGRAD):
//   DECOUPLED (AdamW): param = param * (1 - lr * weight_decay); else g = grad + weight_decay * param
//   m = m + (1 - beta1) (g - m)                        (torch's lerp for a weight < 0.5)
//   v = beta2 v + (1 - beta2) g g
//   vmax = max(vmax, v) with AMSGRAD, the denominator's source
//   param = param - step_size * m / (sqrt(vmax or v) / sqrt(bias_correction2) + eps)
// Tensors start 16-byte aligned; the last thread takes the n % 4 tail element by element.
#include "common/buffers.glsl"

#ifndef KIND
#define KIND 0
#endif

layout(local_size_x_id = 0) in;

// flags
const uint HAS_MOMENTUM = 1u;   // SGD
const uint NESTEROV = 2u;       // SGD
const uint FIRST = 4u;          // SGD: the momentum buffer starts as g
const uint AMSGRAD = 1u;        // Adam
const uint DECOUPLED = 2u;      // Adam: AdamW's weight decay

layout(push_constant) uniform Params {
    uint64_t param, grad, s1, s2, s3;
    uint64_t n;
    uint groups_x;
    uint flags;
    float lr;          // SGD: lr;            Adam: step_size = lr / bias_correction1
    float wd;          // weight decay (Adam L2 / SGD); AdamW: 1 - lr * weight_decay
    float c1;          // SGD: momentum;      Adam: 1 - beta1
    float c2;          // SGD: 1 - dampening; Adam: beta2
    float c3;          // Adam: 1 - beta2
    float c4;          // Adam: sqrt(bias_correction2)
    float eps;
} p;

void update(inout float w, float g, inout float a, inout float b, inout float c) {
#if KIND == 0
    if (p.wd != 0.0) g = g + p.wd * w;
    if ((p.flags & HAS_MOMENTUM) != 0u) {
        a = (p.flags & FIRST) != 0u ? g : p.c1 * a + p.c2 * g;
        g = (p.flags & NESTEROV) != 0u ? g + p.c1 * a : a;
    }
    w = w - p.lr * g;
#else
    if ((p.flags & DECOUPLED) != 0u) w = w * p.wd;
    else if (p.wd != 0.0) g = g + p.wd * w;
    a = a + p.c1 * (g - a);
    b = p.c2 * b + p.c3 * (g * g);
    float v = b;
    if ((p.flags & AMSGRAD) != 0u) { c = max(c, b); v = c; }
    w = w - p.lr * (a / (sqrt(v) / p.c4 + p.eps));
#endif
}

void main() {
    uint64_t k = (uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    uint64_t first = k * 4ul;
    if (first >= p.n) return;
    bool s1 = p.s1 != 0ul, s2 = p.s2 != 0ul, s3 = p.s3 != 0ul;
    if (first + 4ul <= p.n) {
        uint64_t at = first * 4ul;
        vec4 w = Vec4Array(p.param + at).v[0];
        vec4 g = Vec4Array(p.grad + at).v[0];
        vec4 a = s1 ? Vec4Array(p.s1 + at).v[0] : vec4(0.0);
        vec4 b = s2 ? Vec4Array(p.s2 + at).v[0] : vec4(0.0);
        vec4 c = s3 ? Vec4Array(p.s3 + at).v[0] : vec4(0.0);
        for (int i = 0; i < 4; ++i) update(w[i], g[i], a[i], b[i], c[i]);
        Vec4Array(p.param + at).v[0] = w;
        if (s1) Vec4Array(p.s1 + at).v[0] = a;
        if (s2) Vec4Array(p.s2 + at).v[0] = b;
        if (s3) Vec4Array(p.s3 + at).v[0] = c;
        return;
    }
    for (uint64_t j = first; j < p.n; ++j) {
        uint64_t at = j * 4ul;
        float w = FloatArray(p.param + at).v[0];
        float g = FloatArray(p.grad + at).v[0];
        float a = s1 ? FloatArray(p.s1 + at).v[0] : 0.0;
        float b = s2 ? FloatArray(p.s2 + at).v[0] : 0.0;
        float c = s3 ? FloatArray(p.s3 + at).v[0] : 0.0;
        update(w, g, a, b, c);
        FloatArray(p.param + at).v[0] = w;
        if (s1) FloatArray(p.s1 + at).v[0] = a;
        if (s2) FloatArray(p.s2 + at).v[0] = b;
        if (s3) FloatArray(p.s3 + at).v[0] = c;
    }
}
