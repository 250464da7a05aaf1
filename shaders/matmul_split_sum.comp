#version 450
// The second pass of a float32 matmul split over K (src/ops/matmul.c): C = the sum of the
// s partial products P[0] + P[1] + ... + P[s-1], added in that order (the result does not
// depend on scheduling), + bias. P: s blocks of M x N floats, contiguous; C: M x N,
// contiguous; bias: N floats or absent (address 0), added last as the unsplit kernel's
// epilogue adds it. VEC4 (N a multiple of 4, 16-byte aligned bases): each thread makes 4
// consecutive elements of C; otherwise one.
#include "common/buffers.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool VEC4 = true;

layout(push_constant) uniform Params {
    uint64_t parts, bias, c;
    uint64_t count;        // elements of C (M * N)
    uint n, splits, groups_x;
} p;

void main() {
    uint64_t t = uint64_t(gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    if (VEC4) {
        uint64_t i = t * 4ul;
        if (i >= p.count) return;
        vec4 s = Vec4Array(p.parts + i * 4ul).v[0];
        for (uint z = 1u; z < p.splits; ++z) s += Vec4Array(p.parts + (uint64_t(z) * p.count + i) * 4ul).v[0];
        if (p.bias != 0ul) s += Vec4Array(p.bias + (i % uint64_t(p.n)) * 4ul).v[0];
        Vec4Array(p.c + i * 4ul).v[0] = s;
    } else {
        uint64_t i = t;
        if (i >= p.count) return;
        float s = FloatArray(p.parts + i * 4ul).v[0];
        for (uint z = 1u; z < p.splits; ++z) s += FloatArray(p.parts + (uint64_t(z) * p.count + i) * 4ul).v[0];
        if (p.bias != 0ul) s += FloatArray(p.bias + (i % uint64_t(p.n)) * 4ul).v[0];
        FloatArray(p.c + i * 4ul).v[0] = s;
    }
}
