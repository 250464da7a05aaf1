#version 450
// Tensor-core throughput fed from shared memory: each iteration loads FM A and FN B 16x16
// float16 matrices from shared memory (fixed places, rows padded by PAD 16-byte chunks;
// B column-major with COLB) and does 2 x FM x FN products. NV or KHR by COOP_KHR.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common/coop.glsl"
layout(local_size_x = 128) in;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Floats { float v[]; };
layout(push_constant) uniform P { uint64_t a, b, bias, c; uint m, n, k, lda, ldb, tm, tn, gx; } p;
#ifndef FM
#define FM 2
#define FN 4
#endif
#ifndef PAD
#define PAD 1
#endif
#ifndef COLB
#define COLB 0
#endif
// A tile rows: 128 rows x 32 halves (4 chunks) + PAD chunks; B likewise.
const uint SA = 4 + PAD;
shared uvec4 tiles[2 * 128 * SA];
void main() {
    uint sg = gl_SubgroupID;
    for (uint i = gl_LocalInvocationID.x; i < 2 * 128 * SA; i += 128) tiles[i] = uvec4(i * 0x00010001u);
    barrier();
    COOP_C acc[FM][FN];
    [[unroll]] for (uint i = 0; i < FM; ++i) [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = COOP_C(0.0);
    for (uint it = 0; it < p.k; ++it) {
        [[unroll]] for (uint kk = 0; kk < 2; ++kk) {
            COOP_A ma[FM];
            [[unroll]] for (uint i = 0; i < FM; ++i) COOP_LOAD(ma[i], tiles, (sg * 32 + i * 16) * SA + kk * 2, SA, false);
            [[unroll]] for (uint j = 0; j < FN; ++j) {
                COOP_B mb;
#if COLB
                COOP_LOAD(mb, tiles, 128 * SA + (j * 16) * SA + kk * 2, SA, true);
#else
                COOP_LOAD(mb, tiles, 128 * SA + (kk * 16) * SA + j * 2, SA, false);
#endif
                [[unroll]] for (uint i = 0; i < FM; ++i) acc[i][j] = COOP_MULADD(ma[i], mb, acc[i][j]);
            }
        }
    }
    uint g = gl_WorkGroupID.x * 4 + sg;
    [[unroll]] for (uint i = 0; i < FM; ++i) [[unroll]] for (uint j = 0; j < FN; ++j)
        COOP_STORE(acc[i][j], Floats(p.c).v, (g * FM * FN + i * FN + j) * 256, 16, false);
}
