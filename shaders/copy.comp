#version 450
// dst = src, n bytes of any dtype (both start 16-byte aligned). Each thread moves UNROLL
// 16-byte blocks spaced a workgroup apart (coalesced), loads first then stores; the first
// thread moves the n % 16 tail as 32-bit words, and its last n % 4 bytes with NARROW=1
// (8-bit storage, for 1- and 2-byte dtypes). Used by lumus.copy and as the bandwidth
// ceiling in bench/.
#include "common/buffers.glsl"

#ifndef NARROW
#define NARROW 0
#endif
#if NARROW
#extension GL_EXT_shader_8bit_storage : require
layout(buffer_reference, std430, buffer_reference_align = 1) buffer U8Array { uint8_t v[]; };
#endif
layout(buffer_reference, std430, buffer_reference_align = 16) buffer UVec4Array { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer UintArray { uint v[]; };

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 4;

layout(push_constant) uniform Params {
    uint64_t src, dst;
    uint64_t n;        // bytes
    uint groups_x;
} p;

const uint WG = gl_WorkGroupSize.x;

void main() {
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t n16 = p.n / 16ul;
    uint64_t first = group * (WG * UNROLL) + gl_LocalInvocationID.x;
    uvec4 v[UNROLL];
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n16) v[i] = UVec4Array(p.src + k * 16ul).v[0];
    }
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t k = first + i * WG;
        if (k < n16) UVec4Array(p.dst + k * 16ul).v[0] = v[i];
    }
    if (group == 0ul && gl_LocalInvocationID.x == 0) {
        uint64_t words = p.n / 4ul;
        for (uint64_t k = n16 * 4ul; k < words; ++k)
            UintArray(p.dst + k * 4ul).v[0] = UintArray(p.src + k * 4ul).v[0];
#if NARROW
        for (uint64_t k = words * 4ul; k < p.n; ++k) U8Array(p.dst + k).v[0] = U8Array(p.src + k).v[0];
#endif
    }
}
