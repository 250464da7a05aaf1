#version 450
// Fused log-softmax + negative log-likelihood over the rows of logits [N, C]
// (lumus.cross_entropy). One workgroup per row; targets int32, 1-based.
//
// BACKWARD 0 (forward): lse[i] = max + log(sum(exp(x - max))) over the row, and
//   loss[i] = lse[i] - x[i, t]   for a target t in 1..C,
//             0                  for t == ignore_index (weight[i] = 0),
//             NaN                for any other t (out of range; weight[i] = 1).
//   weight[i] is 1 for every row that counts toward the mean, else 0.
// BACKWARD 1: dx[i, c] = (exp(x[i, c] - lse[i]) - [c + 1 == t]) * g[i], 0 on ignored
//   rows and NaN on rows whose target is out of range (the forward's NaN).
// Sums run in a fixed order (strided per thread, then a tree in shared memory), so
// results are the same bits from run to run.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ids { int v[]; };

layout(local_size_x_id = 0) in;
const uint WG = gl_WorkGroupSize.x;   // a power of two

layout(push_constant) uniform Params {
    uint64_t x, target, lse, a, b;   // forward: a = loss, b = weight; backward: a = g, b = dx
    uint rows, cols;
    int ignore_index;
    uint groups_x;
} p;

shared float red[WG];

float reduce_max(float v) {
    uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) {
            float o = red[lid + s];
            red[lid] = (isnan(o) || o > red[lid]) ? o : red[lid];
        }
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

float reduce_sum(float v) {
    uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}

void main() {
    uint row = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (row >= p.rows) return;   // uniform per workgroup: the barriers below stay uniform
    uint lid = gl_LocalInvocationID.x;
    Floats x = Floats(p.x + uint64_t(row) * p.cols * 4ul);
    int t = Ids(p.target).v[row];
    bool ignored = t == p.ignore_index;
    bool valid = t >= 1 && uint(t) <= p.cols;
#if BACKWARD
    float lse = Floats(p.lse).v[row];
    float g = Floats(p.a).v[row];
    float scale = ignored ? 0.0 : (valid ? g : uintBitsToFloat(0x7fc00000u));
    Floats dx = Floats(p.b + uint64_t(row) * p.cols * 4ul);
    for (uint c = lid; c < p.cols; c += WG) {
        float s = exp(x.v[c] - lse) - (int(c) + 1 == t ? 1.0 : 0.0);
        dx.v[c] = ignored ? 0.0 : s * scale;
    }
#else
    float m = uintBitsToFloat(0xff800000u);   // -inf
    for (uint c = lid; c < p.cols; c += WG) {
        float v = x.v[c];
        m = (isnan(v) || v > m) ? v : m;
    }
    m = reduce_max(m);
    float s = 0.0;
    // a row of only -inf has m = -inf: exp(-inf - -inf) = NaN, as PyTorch's NaN
    for (uint c = lid; c < p.cols; c += WG) s += exp(x.v[c] - m);
    s = reduce_sum(s);
    if (lid == 0) {
        float lse = m + log(s);
        Floats(p.lse).v[row] = lse;
        float loss = ignored ? 0.0 : (valid ? lse - x.v[t - 1] : uintBitsToFloat(0x7fc00000u));
        Floats(p.a).v[row] = loss;
        Floats(p.b).v[row] = ignored ? 0.0 : 1.0;
    }
#endif
}
