#version 450
// C = A B (+ bias) in float16 on tensor cores (VK_KHR_ or VK_NV_cooperative_matrix,
// common/coop.glsl): 16x16x16 float16 products accumulated in float32, C rounded to
// float16 once.
//
//   A: M x K row-major (rows lda elements apart).   B: K x N row-major (rows ldb apart), or
//   N x K row-major when TRANS_B (a torch-style weight).   bias: N elements or absent.
//   C: M x N row-major, contiguous.
//   Needs K, lda, ldb (and N unless TRANS_B) multiples of 8 and 16-byte aligned bases, so
//   that every 8-element chunk of a row is wholly inside or outside the operand.
//
// The block form comes from defines (shaders/variants.def): SG_M x SG_N subgroups, each
// computing FM x FN accumulator matrices of 16 x 16, so a workgroup computes a block of
// BM = 16 SG_M FM by BN = 16 SG_N FN elements of C. The K loop steps BK at a time: the
// workgroup copies a BM x BK tile of A and a BK x BN tile of B into shared memory (rows
// padded by one 16-byte chunk so that the matrix loads of neighbouring rows fall in
// different banks), while the next tiles are read from global memory into registers.
// With STAGES = 2 the tiles alternate between two shared buffers, one barrier per step;
// with 1, two. Chunks outside A or B read as zeros, so the edges need no other care; the
// epilogue goes through shared memory (the tile buffers, no longer needed) a 16 x 16
// matrix at a time and stores only elements inside C.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_memory_scope_semantics : require
#define DT 1
#include "common/buffers.glsl"
#include "common/coop.glsl"
#include "common/mm_io.glsl"

#ifndef SG_M
#define SG_M 2
#define SG_N 2
#define FM 4
#define FN 4
#define BK 32
#define STAGES 1
#endif

layout(local_size_x_id = 0) in;                 // SG_M * SG_N subgroups
layout(constant_id = 1) const bool TRANS_B = false;

layout(push_constant) uniform Params {
    uint64_t a, b, bias, c;
    uint m, n, k, lda, ldb;
    uint tiles_m, tiles_n, groups_x;
} p;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Chunks { uvec4 v[]; };

const uint WG = gl_WorkGroupSize.x;
const uint BM = 16 * SG_M * FM, BN = 16 * SG_N * FN;
const uint CH = 8;                              // float16 elements per uvec4 chunk
const uint KC = BK / CH;                        // chunks per BK-long row piece
const uint SA = KC + 1;                         // chunks per shared row of A (a row of M)
const uint SB = TRANS_B ? KC + 1 : BN / CH + 1; // per row of B as stored
const uint A_CHUNKS = BM * KC;
const uint B_CHUNKS = BN * KC;
const uint LA = (A_CHUNKS + WG - 1) / WG;       // chunks each thread moves
const uint LB = (B_CHUNKS + WG - 1) / WG;
const uint A_SIZE = BM * SA;                    // one stage of A, in chunks
const uint B_SIZE = TRANS_B ? BN * SB : BK * SB;
const uint STAGE = A_SIZE + B_SIZE;
const uint C_SIZE = SG_M * SG_N * 64;           // a 16 x 16 float matrix per subgroup

#ifndef SHARED_H4
#define SHARED_H4 0
#endif
#if SHARED_H4
// The tiles as scalar float16 (eight per chunk), the matrices loaded from a 16-bit type; the
// epilogue has its own floats.
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
shared float16_t tiles[8 * STAGES * STAGE];
shared float cst[C_SIZE * 4];
void put(uint i, uvec4 v) {
    [[unroll]] for (uint w = 0; w < 4; ++w) {
        f16vec2 h = unpackFloat2x16(v[w]);
        tiles[8 * i + 2 * w] = h.x;
        tiles[8 * i + 2 * w + 1] = h.y;
    }
}
const uint U = 8;                               // array elements per chunk
#else
// One array for both operands and every stage (A then B per stage); the epilogue reuses it.
const uint TILES = STAGES * STAGE > C_SIZE ? STAGES * STAGE : C_SIZE;
shared uvec4 tiles[TILES];
void put(uint i, uvec4 v) { tiles[i] = v; }
const uint U = 1;
#endif

uvec4 ra[LA], rb[LB];

uvec4 chunk(uint64_t base, uint64_t elem, bool inside) {
    return inside ? Chunks(base + elem * 2ul).v[0] : uvec4(0);
}

void load_tiles(uint m0, uint n0, uint k0) {
    [[unroll]] for (uint l = 0; l < LA; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;            // row e / KC, chunk e % KC
        uint r = e / KC, kc = k0 + (e % KC) * CH;
        ra[l] = chunk(p.a, uint64_t(m0 + r) * p.lda + kc, e < A_CHUNKS && m0 + r < p.m && kc < p.k);
    }
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;
        if (TRANS_B) {                                        // row n: e / KC, chunk e % KC
            uint r = e / KC, kc = k0 + (e % KC) * CH;
            rb[l] = chunk(p.b, uint64_t(n0 + r) * p.ldb + kc, e < B_CHUNKS && n0 + r < p.n && kc < p.k);
        } else {                                              // row k: e / (BN/CH)
            uint r = e / (BN / CH), nc = n0 + (e % (BN / CH)) * CH;
            rb[l] = chunk(p.b, uint64_t(k0 + r) * p.ldb + nc, e < B_CHUNKS && k0 + r < p.k && nc < p.n);
        }
    }
}

void store_tiles(uint s) {
    uint a0 = s * STAGE, b0 = a0 + A_SIZE;
    [[unroll]] for (uint l = 0; l < LA; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;
        if (e < A_CHUNKS) put(a0 + (e / KC) * SA + e % KC, ra[l]);
    }
    [[unroll]] for (uint l = 0; l < LB; ++l) {
        uint e = gl_LocalInvocationID.x + l * WG;
        if (e < B_CHUNKS) {
            if (TRANS_B) put(b0 + (e / KC) * SB + e % KC, rb[l]);
            else put(b0 + (e / (BN / CH)) * SB + e % (BN / CH), rb[l]);
        }
    }
}

COOP_C acc[FM][FN];

void multiply(uint s, uint wy, uint wx) {
    uint a0 = s * STAGE, b0 = a0 + A_SIZE;
    [[unroll]] for (uint kk = 0; kk < BK / 16; ++kk) {
        COOP_A ma[FM];
        [[unroll]] for (uint i = 0; i < FM; ++i)
            COOP_LOAD(ma[i], tiles, U * (a0 + (wy * FM * 16u + i * 16u) * SA + kk * 2u), U * SA, false);
        [[unroll]] for (uint j = 0; j < FN; ++j) {
            COOP_B mb;
            uint col = wx * FN * 16u + j * 16u;
            if (TRANS_B) COOP_LOAD(mb, tiles, U * (b0 + col * SB + kk * 2u), U * SB, true);
            else COOP_LOAD(mb, tiles, U * (b0 + kk * 16u * SB + col / CH), U * SB, false);
            [[unroll]] for (uint i = 0; i < FM; ++i) acc[i][j] = COOP_MULADD(ma[i], mb, acc[i][j]);
        }
    }
}

void main() {
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (g >= p.tiles_m * p.tiles_n) return;               // padding of a folded grid
    uint m0 = (g % p.tiles_m) * BM, n0 = (g / p.tiles_m) * BN;   // neighbours share B's columns
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint wy = sg / SG_N, wx = sg % SG_N;                   // this subgroup's part of the block

    [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = COOP_C(0.0);

    load_tiles(m0, n0, 0u);
#if STAGES == 2
    store_tiles(0u);
    barrier();
    uint s = 0u;
    for (uint k0 = 0; k0 < p.k; k0 += BK) {
        bool more = k0 + BK < p.k;
        if (more) load_tiles(m0, n0, k0 + BK);
        multiply(s, wy, wx);
        // The other stage was last read before the previous barrier: safe to fill.
        if (more) store_tiles(s ^ 1u);
        barrier();
        s ^= 1u;
    }
#else
    for (uint k0 = 0; k0 < p.k; k0 += BK) {
        barrier();                                          // the last step's reads are done
        store_tiles(0u);
        barrier();
        if (k0 + BK < p.k) load_tiles(m0, n0, k0 + BK);
        multiply(0u, wy, wx);
    }
    barrier();                                              // the epilogue reuses the tiles
#endif

    // Epilogue: each accumulator through this subgroup's 16 x 16 staging matrix (floats
    // stored as the bits of uvec4 chunks, 4 per chunk, 4 chunks per row).
    uint width = gl_SubgroupSize, cs = sg * 64u;
    [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j) {
#if SHARED_H4
            COOP_STORE(acc[i][j], cst, cs * 4u, 16u, false);
#else
            COOP_STORE(acc[i][j], tiles, cs, 4u, false);
#endif
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            uint rm = m0 + wy * FM * 16u + i * 16u, cn = n0 + wx * FN * 16u + j * 16u;
            for (uint e = lane; e < 256u; e += width) {
                uint m = rm + e / 16u, n = cn + e % 16u;
                if (m < p.m && n < p.n) {
#if SHARED_H4
                    float v = cst[cs * 4u + e];
#else
                    float v = uintBitsToFloat(tiles[cs + e / 4u][e % 4u]);
#endif
                    if (p.bias != 0ul) v += ld1(p.bias, n);
                    st1(p.c, uint64_t(m) * p.n + n, v);
                }
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
        }
}
