#version 450
// Fused scaled dot-product attention for float16 prefill on tensor cores
// (VK_NV_cooperative_matrix, or VK_KHR_cooperative_matrix with COOP_KHR: common/coop.glsl;
// the KHR form converts P with VK_NV_cooperative_matrix2's conversions), FlashAttention-2 style with the scores kept in registers:
// a workgroup of 4 subgroups of 32 takes 64 query rows of one (batch, head), subgroup s
// the 16 rows s*16 .. s*16+15, and loops over tiles of BC keys.
//
// Per tile: the workgroup copies K and V (BC rows of D float16, 16-byte chunks) into
// shared memory; each subgroup then, on its own rows only:
//   S = Q K^T      BC/16 float32 accumulator matrices (its Q strip is held in registers);
//   softmax        on the accumulators' own components: scale * log2(e), masks, the row
//                  max, alpha = 2^(m_old - m_new), P = 2^(S - m_new), the row sums;
//   O *= alpha     component by component, skipped when no row's max moves;
//   O += P V       P converted to float16 matrices in registers, V from shared memory.
// At the end O / l is written in float16 through shared memory.
//
// Row-wise steps need each component's row. NVIDIA's matrices (the only ones with this
// extension) give lane L the components of rows L/4 and L/4 + 8, so that a row lives in
// the 4 lanes of a quad and reduces by two shuffles. The kernel reads each component's
// row and column from matrices loaded with those indices, checks the rows against that
// layout once, and writes NaN everywhere if a device lays them out otherwise (never a
// silent wrong answer; bench/device_checks.lua and bench/attention.lua check the results).
// Where every lane's rows follow NVIDIA's order exactly (8 components, amask 0x33), the
// row-wise steps can take each component's row as a compile-time constant instead
// (FIXED_ROWS, tune.attention's coop_fixed_rows = true; off by default: not faster on the H200).
// Masks and NaN as attention.comp. Needs D a multiple of 16, row strides multiples of 8
// elements, 16-byte aligned q, k, v (src/ops/attention.c checks) and subgroups of 32.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#define DT 1
#define COOP_CONVERSIONS 1
#include "common/elem_io.glsl"
#include "common/coop.glsl"

layout(local_size_x_id = 0) in;                 // 4 subgroups of 32
layout(constant_id = 1) const uint BC = 64;     // keys per tile (32 or 64)
layout(constant_id = 2) const uint D = 64;      // head dimension, a multiple of 16
layout(constant_id = 3) const bool PREFETCH = true;   // the next K/V tile's loads before this tile's arithmetic
layout(constant_id = 4) const uint STRIPS = 1;  // unused here (one 16-row strip per subgroup)
// NVIDIA's component order as constants: 0 never, 1 where the device has it, 2 required
// (NaN where it has not: a probe for benches)
layout(constant_id = 5) const uint FIXED_ROWS = 0;
layout(constant_id = 6) const bool FOLD_SCALE = false; // the scale in exp2's fma outside edge tiles

layout(push_constant) uniform Params {
    uint64_t q, k, v, dst, mask;
    uint qsb, qsh, qst, ksb, ksh, kst, vsb, vsh, vst;   // element strides of batch, head, row
    uint msb, msh, mst, msk;                            // the mask's (0 where it broadcasts)
    uint H, BH, Tq, Tk;
    uint splits, tiles_per_split, groups_x, flags;      // flags: 1 causal, 2 bool mask, 4 float mask
    float scale;
} p;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Chunk { uvec4 v; };

const uint WG = gl_WorkGroupSize.x;
const uint BR = WG / 32u * 16u;     // query rows per workgroup (64)
const uint CH = 8;                  // float16 elements per uvec4 chunk
const uint DC = D / CH;             // chunks per row of Q, K, V
const uint SK = DC + 1;             // shared row stride of Q, K, V in chunks (one of padding)
const uint SO = D + 4;              // shared row stride of O in floats
const uint NB = BC / 16;            // score matrices per tile
const uint ND = D / 16;             // matrices across a row of Q or O
// One shared array (16-byte chunks) for everything in turn: the index tables (128 chunks a
// subgroup), Q, K then V per tile, and O's rows as floats (SO / 4 chunks a row) at the end.
const uint KV_TILE = 2 * BC * SK;
const uint O_CHUNKS = BR * SO / 4u;
const uint IDX_CHUNKS = WG / 32u * 128u;
const uint KV_A = KV_TILE > BR * SK ? KV_TILE : BR * SK;
const uint KV_B = O_CHUNKS > IDX_CHUNKS ? O_CHUNKS : IDX_CHUNKS;
const uint KV_SIZE = KV_A > KV_B ? KV_A : KV_B;
const uint CIT = (BC * DC + WG - 1u) / WG;     // K (and V) chunks per thread and tile
shared uvec4 kv[KV_SIZE];

const float LOG2E = 1.4426950408889634;
#define NEG_INF uintBitsToFloat(0xff800000u)
#define ACC COOP_C

uvec4 chunk(uint64_t base, uint64_t elem, bool inside) {
    return inside ? Chunk(base + elem * 2ul).v : uvec4(0);
}

#define FETCH_KV(K0) \
    [[unroll]] for (uint it = 0; it < CIT; ++it) { \
        uint e = gl_LocalInvocationID.x + it * WG; \
        uint rr = e / DC, c = e % DC; \
        bool inside = e < BC * DC && (K0) + rr < p.Tk; \
        kc[it] = chunk(p.k, kbase + uint64_t((K0) + rr) * p.kst + c * CH, inside); \
        vc[it] = chunk(p.v, vbase + uint64_t((K0) + rr) * p.vst + c * CH, inside); \
    }

// Component c of a lane's accumulator is in row ra (else ra + 8): read from the index
// tables (amask), or NVIDIA's order for a 16x16 float accumulator of 8 components a lane
// (c0, c1 row ra; c2, c3 row ra + 8; c4..c7 likewise for columns 8..15) as a constant.
#define ROW_A_READ(c) (((amask >> uint(c)) & 1u) != 0u)
#define ROW_A_FIXED(c) (((c) & 2) == 0)

// One tile's softmax on s[] (NC components a lane, ROW_A(c) their rows, UNROLL [[unroll]]
// where NC is a constant), updating m, l and O. Outside edge tiles (no mask, no causal cut, all keys inside, qscale > 0) the
// scale is not applied to S: max(S) * qscale is the scaled rows' maximum exactly and
// exp2(fma(S, qscale, -m)) rounds once where (S * qscale) - m rounded twice.
#define SOFTMAX_TILE(NC, ROW_A, UNROLL) { \
    float mx_a = NEG_INF, mx_b = NEG_INF; \
    if (edge) { \
        [[unroll]] for (uint j = 0; j < NB; ++j) { \
            UNROLL for (int c = 0; c < (NC); ++c) { \
                bool in_a = ROW_A(c); \
                float x = s[j][c] * qscale; \
                uint qi = in_a ? qi_a : qi_b; \
                uint kj = k0 + j * 16u + uint(colm[c]); \
                bool live = kj < p.Tk && qi < p.Tq && (!causal || int(kj) <= int(qi) + shift); \
                if (live && mask_kind != 0u) { \
                    uint64_t mi = mbase + uint64_t(qi) * p.mst + uint64_t(kj) * p.msk; \
                    if (mask_kind == 2u) live = bool_load(p.mask, mi); \
                    else x += elem_load(p.mask, mi) * LOG2E; \
                } \
                x = live ? x : NEG_INF; \
                s[j][c] = x; \
                if (in_a) mx_a = max(mx_a, x); else mx_b = max(mx_b, x); \
            } \
        } \
    } else if (scaled) { \
        [[unroll]] for (uint j = 0; j < NB; ++j) { \
            UNROLL for (int c = 0; c < (NC); ++c) { \
                float x = s[j][c] * qscale; \
                s[j][c] = x; \
                if (ROW_A(c)) mx_a = max(mx_a, x); else mx_b = max(mx_b, x); \
            } \
        } \
    } else { \
        [[unroll]] for (uint j = 0; j < NB; ++j) { \
            UNROLL for (int c = 0; c < (NC); ++c) { \
                if (ROW_A(c)) mx_a = max(mx_a, s[j][c]); else mx_b = max(mx_b, s[j][c]); \
            } \
        } \
    } \
    float sc = scaled ? 1.0 : qscale;            /* s[] is scaled already */ \
    mx_a = max(mx_a, subgroupShuffleXor(mx_a, 1u)); \
    mx_a = max(mx_a, subgroupShuffleXor(mx_a, 2u)) * sc; \
    mx_b = max(mx_b, subgroupShuffleXor(mx_b, 1u)); \
    mx_b = max(mx_b, subgroupShuffleXor(mx_b, 2u)) * sc; \
    float mn_a = max(m_a, mx_a), mn_b = max(m_b, mx_b); \
    float mu_a = mn_a == NEG_INF ? 0.0 : mn_a;   /* a row with nothing yet: exp2(-inf) = 0, not NaN */ \
    float mu_b = mn_b == NEG_INF ? 0.0 : mn_b; \
    float alpha_a = exp2(m_a - mu_a), alpha_b = exp2(m_b - mu_b); \
    m_a = mn_a; \
    m_b = mn_b; \
    float rs_a = 0.0, rs_b = 0.0; \
    [[unroll]] for (uint j = 0; j < NB; ++j) { \
        UNROLL for (int c = 0; c < (NC); ++c) { \
            bool in_a = ROW_A(c); \
            float pv = exp2(fma(s[j][c], sc, -(in_a ? mu_a : mu_b))); \
            s[j][c] = pv; \
            if (in_a) rs_a += pv; else rs_b += pv; \
        } \
    } \
    l_a = l_a * alpha_a + rs_a; \
    l_b = l_b * alpha_b + rs_b; \
    if (!subgroupAll(alpha_a == 1.0 && alpha_b == 1.0)) { \
        [[unroll]] for (uint n = 0; n < ND; ++n) \
            UNROLL for (int c = 0; c < (NC); ++c) o[n][c] *= ROW_A(c) ? alpha_a : alpha_b; \
    } \
}

void main() {
    uint qtiles = (p.Tq + BR - 1) / BR;
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (g >= qtiles * p.BH) return;              // uniform over the workgroup
    uint qt = qtiles - 1u - g % qtiles;          // the longest causal blocks first
    uint z = g / qtiles;
    uint b = z / p.H, h = z % p.H;
    uint q0 = qt * BR;
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
    uint row0 = sg * 16u;                        // the strip's first row in the block
    uint ra = lane >> 2;                         // this lane's rows of a matrix: ra and ra + 8
    bool causal = (p.flags & 1u) != 0u;
    uint mask_kind = p.flags & 6u;
    int shift = int(p.Tk) - int(p.Tq);
    float qscale = p.scale * LOG2E;

    // The row and column of each component: matrices loaded from index tables.
    for (uint e = lane; e < 64u; e += 32u) {    // chunk e: elements 4e .. 4e+3, row 4e / 16
        uint r4 = (4u * e) / 16u, c4 = (4u * e) % 16u;
        kv[sg * 128u + e] = uvec4(floatBitsToUint(float(r4)));
        kv[sg * 128u + 64u + e] = floatBitsToUint(vec4(c4, c4 + 1u, c4 + 2u, c4 + 3u));
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    ACC rowm, colm;
    COOP_LOAD(rowm, kv, sg * 128u, 4u, false);
    COOP_LOAD(colm, kv, sg * 128u + 64u, 4u, false);
    bool layout_ok = rowm.length() <= 32;
    uint amask = 0u;                             // bit c: component c is in row ra (else ra + 8)
    for (int c = 0; c < rowm.length(); ++c) {
        uint rr = uint(rowm[c]);
        layout_ok = layout_ok && (rr == ra || rr == ra + 8u);
        if (rr == ra) amask |= 1u << uint(c);
    }
    layout_ok = subgroupAll(layout_ok);
    bool fixed_rows = FIXED_ROWS != 0u && subgroupAll(rowm.length() == 8 && amask == 0x33u);
    layout_ok = layout_ok && (fixed_rows || FIXED_ROWS != 2u);

    // Q: staged through the K/V region, then held as D/16 matrices
    uint64_t qbase = uint64_t(b) * p.qsb + uint64_t(h) * p.qsh;
    barrier();                                   // every subgroup's index tables are read
    for (uint e = gl_LocalInvocationID.x; e < BR * DC; e += WG) {
        uint rr = e / DC, c = e % DC;
        kv[rr * SK + c] = chunk(p.q, qbase + uint64_t(q0 + rr) * p.qst + c * CH, q0 + rr < p.Tq);
    }
    barrier();
    COOP_A qm[ND];
    [[unroll]] for (uint kk = 0; kk < ND; ++kk) COOP_LOAD(qm[kk], kv, row0 * SK + kk * 2u, SK, false);

    uint kend = p.Tk;
    if (causal) {
        int last = int(min(q0 + BR, p.Tq)) - 1 + shift + 1;   // one past the last key any row sees
        kend = uint(clamp(last, 0, int(p.Tk)));
    }
    uint ntiles = (kend + BC - 1) / BC;

    ACC o[ND];
    [[unroll]] for (uint n = 0; n < ND; ++n) o[n] = ACC(0.0);
    float m_a = NEG_INF, m_b = NEG_INF;          // running max of rows ra and ra + 8 (log2 units)
    float l_a = 0.0, l_b = 0.0;                  // this lane's part of their sums
    uint64_t kbase = uint64_t(b) * p.ksb + uint64_t(h) * p.ksh;
    uint64_t vbase = uint64_t(b) * p.vsb + uint64_t(h) * p.vsh;
    uint64_t mbase = uint64_t(b) * p.msb + uint64_t(h) * p.msh;
    uint qi_a = q0 + row0 + ra, qi_b = qi_a + 8u;

    uvec4 kc[CIT], vc[CIT];
    FETCH_KV(0u)
    for (uint kt = 0; kt < ntiles; ++kt) {
        uint k0 = kt * BC;
        barrier();                               // every subgroup is done with the last K and V (and Q)
        [[unroll]] for (uint it = 0; it < CIT; ++it) {
            uint e = gl_LocalInvocationID.x + it * WG;
            uint rr = e / DC, c = e % DC;
            if (e < BC * DC) {
                kv[rr * SK + c] = kc[it];
                kv[(BC + rr) * SK + c] = vc[it];
            }
        }
        barrier();
        if (PREFETCH && kt + 1u < ntiles) { FETCH_KV(k0 + BC) }

        // S = Q K^T
        ACC s[NB];
        [[unroll]] for (uint j = 0; j < NB; ++j) {
            s[j] = ACC(0.0);
            [[unroll]] for (uint kk = 0; kk < ND; ++kk) {
                COOP_B kb;
                COOP_LOAD(kb, kv, j * 16u * SK + kk * 2u, SK, true);
                s[j] = COOP_MULADD(qm[kk], kb, s[j]);
            }
        }

        // Scale, masks and the rows' maxima; P = 2^(S - m), the sums, O *= alpha
        bool edge = k0 + BC > p.Tk || mask_kind != 0u || (causal && int(k0 + BC - 1u) > int(q0 + row0) + shift);
        bool scaled = edge || !FOLD_SCALE || !(qscale > 0.0);
        if (fixed_rows) SOFTMAX_TILE(8, ROW_A_FIXED, [[unroll]])
        else SOFTMAX_TILE(s[0].length(), ROW_A_READ, )
        [[unroll]] for (uint j = 0; j < NB; ++j) {
            COOP_A pm = COOP_C_TO_A(s[j]);
            [[unroll]] for (uint n = 0; n < ND; ++n) {
                COOP_B vb;
                COOP_LOAD(vb, kv, (BC + j * 16u) * SK + n * 2u, SK, false);
                o[n] = COOP_MULADD(pm, vb, o[n]);
            }
        }
        if (!PREFETCH && kt + 1u < ntiles) { FETCH_KV(k0 + BC) }
    }

    // O / l, in float16, through this subgroup's rows of sf
    l_a += subgroupShuffleXor(l_a, 1u);
    l_a += subgroupShuffleXor(l_a, 2u);
    l_b += subgroupShuffleXor(l_b, 1u);
    l_b += subgroupShuffleXor(l_b, 2u);
    float inv_a = l_a == 0.0 ? 0.0 : 1.0 / l_a, inv_b = l_b == 0.0 ? 0.0 : 1.0 / l_b;
    float bad = layout_ok ? 0.0 : uintBitsToFloat(0x7fc00000u);
    barrier();                                   // every subgroup is done with the last K and V
    uint obase = row0 * (SO / 4u);               // this strip's rows of O, in chunks
    [[unroll]] for (uint n = 0; n < ND; ++n) {
        if (fixed_rows) {
            [[unroll]] for (int c = 0; c < 8; ++c) o[n][c] = o[n][c] * (ROW_A_FIXED(c) ? inv_a : inv_b) + bad;
        } else {
            for (int c = 0; c < o[n].length(); ++c) o[n][c] = o[n][c] * (ROW_A_READ(c) ? inv_a : inv_b) + bad;
        }
        COOP_STORE(o[n], kv, obase + n * 4u, SO / 4u, false);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    uint64_t rowbase = uint64_t(z) * p.Tq;
    for (uint e = lane; e < 16u * D; e += 32u) {
        uint rr = e / D, col = e % D;
        uint f = (row0 + rr) * SO + col;         // float index into the rows of O
        if (q0 + row0 + rr < p.Tq)
            elem_store(p.dst, (rowbase + q0 + row0 + rr) * D + col, uintBitsToFloat(kv[f / 4u][f % 4u]));
    }
}
