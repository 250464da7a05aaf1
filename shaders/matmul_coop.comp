#version 450
// C = A B (+ bias) in float16 on tensor cores (VK_NV_cooperative_matrix): 16x16x16
// float16 products accumulated in float32, C rounded to float16 once.
//
//   A: M x K row-major (rows lda elements apart).   B: K x N row-major (rows ldb apart), or
//   N x K row-major when TRANS_B (a torch-style weight).   bias: N elements or absent.
//   C: M x N row-major, contiguous.
//   Needs K, lda, ldb (and N unless TRANS_B) multiples of 8 and 16-byte aligned bases, so
//   that every 8-element chunk of a row is wholly inside or outside the operand.
//
// A workgroup (4 subgroups, 2 x 2) computes a 128 x 128 block of C; each subgroup a
// 64 x 64 part of it as 4 x 4 accumulator matrices. The K loop steps 32 at a time: the
// workgroup copies a 128 x 32 tile of A and a 32 x 128 tile of B into shared memory (rows
// padded by 8 elements so that the matrix loads of neighbouring rows fall in different
// banks), while the next tiles are read from global memory into registers. Chunks outside
// A or B read as zeros, so the edges need no other care; the epilogue goes through shared
// memory a 16 x 16 matrix at a time and stores only elements inside C.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#define DT 1
#include "common/buffers.glsl"
#include "common/mm_io.glsl"

layout(local_size_x_id = 0) in;                 // 4 subgroups
layout(constant_id = 1) const bool TRANS_B = false;

layout(push_constant) uniform Params {
    uint64_t a, b, bias, c;
    uint m, n, k, lda, ldb;
    uint tiles_m, tiles_n, groups_x;
} p;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Chunks { uvec4 v[]; };

const uint WG = gl_WorkGroupSize.x;
const uint BM = 128, BN = 128, BK = 32;
const uint CH = 8;                              // float16 elements per uvec4 chunk
const uint PAD = 1;                             // chunks of padding per shared row
const uint SA = BK / CH + PAD;                  // chunks per shared row of A (a row of M)
const uint SB = TRANS_B ? BK / CH + PAD : BN / CH + PAD;   // per row of B as stored
const uint A_CHUNKS = BM * BK / CH;             // 512
const uint B_CHUNKS = BN * BK / CH;             // 512
const uint LA = (A_CHUNKS + WG - 1) / WG;       // chunks each thread moves
const uint LB = (B_CHUNKS + WG - 1) / WG;

shared uvec4 As[BM * SA];
shared uvec4 Bs[TRANS_B ? BN * SB : BK * SB];
shared float Cs[4 * 256];                       // one 16 x 16 float matrix per subgroup

uvec4 ra[LA], rb[LB];

uvec4 chunk(uint64_t base, uint64_t elem, bool inside) {
    return inside ? Chunks(base + elem * 2ul).v[0] : uvec4(0);
}

void load_tiles(uint m0, uint n0, uint k0) {
    [[unroll]] for (uint l = 0; l < LA; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;            // row e / 4, chunk e % 4
        uint r = e / (BK / CH), kc = k0 + (e % (BK / CH)) * CH;
        ra[l] = chunk(p.a, uint64_t(m0 + r) * p.lda + kc, e < A_CHUNKS && m0 + r < p.m && kc < p.k);
    }
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;
        if (TRANS_B) {                                        // row n: e / 4, chunk e % 4
            uint r = e / (BK / CH), kc = k0 + (e % (BK / CH)) * CH;
            rb[l] = chunk(p.b, uint64_t(n0 + r) * p.ldb + kc, e < B_CHUNKS && n0 + r < p.n && kc < p.k);
        } else {                                              // row k: e / 16, chunk e % 16
            uint r = e / (BN / CH), nc = n0 + (e % (BN / CH)) * CH;
            rb[l] = chunk(p.b, uint64_t(k0 + r) * p.ldb + nc, e < B_CHUNKS && k0 + r < p.k && nc < p.n);
        }
    }
}

void store_tiles() {
    [[unroll]] for (uint l = 0; l < LA; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;
        if (e < A_CHUNKS) As[(e / (BK / CH)) * SA + e % (BK / CH)] = ra[l];
    }
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;
        if (e < B_CHUNKS) {
            if (TRANS_B) Bs[(e / (BK / CH)) * SB + e % (BK / CH)] = rb[l];
            else Bs[(e / (BN / CH)) * SB + e % (BN / CH)] = rb[l];
        }
    }
}

void main() {
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (g >= p.tiles_m * p.tiles_n) return;               // padding of a folded grid
    uint m0 = (g % p.tiles_m) * BM, n0 = (g / p.tiles_m) * BN;   // neighbours share B's columns
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint wy = sg / 2u, wx = sg % 2u;                       // this subgroup's 64 x 64 part

    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[4][4];
    [[unroll]] for (uint i = 0; i < 4; ++i)
        [[unroll]] for (uint j = 0; j < 4; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

    load_tiles(m0, n0, 0u);
    for (uint k0 = 0; k0 < p.k; k0 += BK) {
        barrier();                                          // the last step's reads are done
        store_tiles();
        barrier();
        if (k0 + BK < p.k) load_tiles(m0, n0, k0 + BK);
        [[unroll]] for (uint kk = 0; kk < BK / 16; ++kk) {
            fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma[4];
            [[unroll]] for (uint i = 0; i < 4; ++i)
                coopMatLoadNV(ma[i], As, (wy * 64u + i * 16u) * SA + kk * 2u, SA, false);
            [[unroll]] for (uint j = 0; j < 4; ++j) {
                fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> mb;
                uint col = wx * 64u + j * 16u;
                if (TRANS_B) coopMatLoadNV(mb, Bs, col * SB + kk * 2u, SB, true);
                else coopMatLoadNV(mb, Bs, kk * 16u * SB + col / CH, SB, false);
                [[unroll]] for (uint i = 0; i < 4; ++i) acc[i][j] = coopMatMulAddNV(ma[i], mb, acc[i][j]);
            }
        }
    }

    // Epilogue: each accumulator through this subgroup's 16 x 16 staging matrix.
    uint width = gl_SubgroupSize;
    [[unroll]] for (uint i = 0; i < 4; ++i)
        [[unroll]] for (uint j = 0; j < 4; ++j) {
            coopMatStoreNV(acc[i][j], Cs, sg * 256u, 16u, false);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            uint rm = m0 + wy * 64u + i * 16u, cn = n0 + wx * 64u + j * 16u;
            for (uint e = lane; e < 256u; e += width) {
                uint m = rm + e / 16u, n = cn + e % 16u;
                if (m < p.m && n < p.n) {
                    float v = Cs[sg * 256u + e];
                    if (p.bias != 0ul) v += ld1(p.bias, n);
                    st1(p.c, uint64_t(m) * p.n + n, v);
                }
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
        }
}
