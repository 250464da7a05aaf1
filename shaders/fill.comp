#version 450
// dst[0..n bytes) = a 32-bit pattern repeated (one value of any dtype: a float32 or
// int32, two float16/bfloat16 or four bools), as 16-byte stores with a tail of words and,
// with NARROW=1 (8-bit storage), of the last n % 4 bytes. Tensors start 16-byte aligned,
// so byte j of the tensor is byte j % 4 of the pattern.
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

layout(push_constant) uniform Params {
    uint64_t dst;
    uint64_t n;        // bytes
    uint pattern;
    uint groups_x;
} p;

void main() {
    uint64_t k = (uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    uint64_t at = k * 16ul;
    if (at + 16ul <= p.n) {
        UVec4Array(p.dst + at).v[0] = uvec4(p.pattern);
    } else if (at < p.n) {
        uint64_t words = p.n / 4ul;
        for (uint64_t j = at / 4ul; j < words; ++j) UintArray(p.dst + j * 4ul).v[0] = p.pattern;
#if NARROW
        for (uint64_t j = words * 4ul; j < p.n; ++j)
            U8Array(p.dst + j).v[0] = uint8_t((p.pattern >> uint(8ul * (j % 4ul))) & 0xffu);
#endif
    }
}
