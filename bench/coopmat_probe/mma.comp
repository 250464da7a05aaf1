#version 450
// Tensor-core throughput with the operands in registers: each subgroup loads FM A and FN
// B 16x16 float16 matrices once, then does FM x FN products p.k times (float32
// accumulators). NV or KHR by COOP_KHR (shaders/common/coop.glsl).
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common/coop.glsl"
layout(local_size_x = 128) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Halves { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Floats { float v[]; };
layout(push_constant) uniform Params { uint64_t a, b, bias, c; uint m, n, k, lda, ldb, tm, tn, gx; } p;
#ifndef FM
#define FM 2
#define FN 4
#endif
void main() {
    COOP_A a[FM];
    COOP_B b[FN];
    COOP_C acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; ++i) COOP_LOAD(a[i], Halves(p.a).v, i * 256, 16, false);
    [[unroll]] for (uint j = 0; j < FN; ++j) COOP_LOAD(b[j], Halves(p.b).v, j * 256, 16, false);
    [[unroll]] for (uint i = 0; i < FM; ++i) [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = COOP_C(0.0);
    for (uint it = 0; it < p.k; ++it)
        [[unroll]] for (uint i = 0; i < FM; ++i) [[unroll]] for (uint j = 0; j < FN; ++j)
            acc[i][j] = COOP_MULADD(a[i], b[j], acc[i][j]);
    uint g = gl_WorkGroupID.x * 4 + gl_SubgroupID;
    [[unroll]] for (uint i = 0; i < FM; ++i) [[unroll]] for (uint j = 0; j < FN; ++j)
        COOP_STORE(acc[i][j], Floats(p.c).v, (g * FM * FN + i * FN + j) * 256, 16, false);
}
