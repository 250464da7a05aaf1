#version 450
// dst = src, n floats. Each thread moves UNROLL vec4s spaced a workgroup apart (coalesced),
// loads first then stores; the last thread handles the n % 4 tail. Used by lumus.copy and
// as the bandwidth ceiling in bench/.
#include "common/buffers.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 4;

layout(push_constant) uniform Params {
    uint64_t src, dst;
    uint64_t n;        // floats
    uint groups_x;
} p;

const uint WG = gl_WorkGroupSize.x;

void main() {
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t n4 = p.n / 4ul;
    uint64_t first = group * (WG * UNROLL) + gl_LocalInvocationID.x;
    vec4 v[UNROLL];
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n4) v[i] = Vec4Array(p.src + k * 16ul).v[0];
    }
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n4) Vec4Array(p.dst + k * 16ul).v[0] = v[i];
    }
    if (group == 0ul && gl_LocalInvocationID.x == 0) {
        for (uint64_t k = n4 * 4ul; k < p.n; ++k)
            FloatArray(p.dst + k * 4ul).v[0] = FloatArray(p.src + k * 4ul).v[0];
    }
}
