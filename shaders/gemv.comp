#version 450
// C = A B (+ bias) for few rows of A: the small-M path of lumus.matmul and lumus.linear.
// Such products are bound by reading B; each workgroup streams a block of B's columns and
// keeps the partial sums of a block of MR rows (1..16) in registers, so B is read once
// per row block (once when M <= MR; more row blocks re-read B, from L2 when it is small).
// A (small) is re-read from cache.
//
//   A: M x K row-major, rows lda elements apart.   C: M x N row-major, contiguous.
//   B, by TRANS_B:
//   ROWS form (TRANS_B, a torch-style weight [N, K]): each subgroup owns CPT columns of C
//     (CPT rows of B) and its lanes walk K in vec4 steps (or single elements when not
//     VEC4), so a subgroup's loads of a B row are consecutive; KS subgroups split K
//     between them. Column indices past N are clamped on load and skipped on store.
//   COLS form (B is K x N row-major): each thread owns 4 columns of C: with VEC4 the 4
//     consecutive ones of one vec4 load, else 4 columns CT apart (consecutive threads,
//     consecutive columns: coalesced scalar loads); KS thread slices split K.
// Partial sums of the KS slices meet in shared memory; the first slice adds them, adds
// the bias (N elements, address 0 = none), applies the activation ACT and stores. Accumulation is float32; DT picks
// the element type of A, B, bias and C (common/mm_io.glsl).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common/buffers.glsl"
#include "common/mm_io.glsl"
#include "common/activation.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint MR = 1;         // rows of A and C
layout(constant_id = 2) const uint CPT = 4;        // ROWS form: columns per subgroup
layout(constant_id = 3) const uint KS = 1;         // K slices (ROWS: subgroups; COLS: thread slices)
layout(constant_id = 4) const bool TRANS_B = false;
layout(constant_id = 5) const uint VECW = 1;       // 1: K (ROWS) or N (COLS) in aligned vec4s; 2 (ROWS,
                                                   // float16): K in aligned 8-element (16-byte) loads; 0: single elements
const bool VEC4 = VECW != 0u;
layout(constant_id = 6) const uint SUBS = 32;      // ROWS form: subgroups per workgroup
layout(constant_id = 7) const uint ACT = 0;        // activation applied on store (common/activation.glsl)

layout(push_constant) uniform Params {
    uint64_t a, b, bias, c;
    uint m, n, k, lda, ldb;
    uint groups_x;                                 // grid width (2-D folding)
    uint groups;                                   // workgroups with work
    uint row_blocks;                               // blocks of MR rows (M > MR: a is read in blocks)
    uint bias_step;                                // 1: bias[n] per column; 0: bias[0] for all
} p;

// This workgroup's first row; rows past M read row M (clamped) and store nothing.
uint row0;
uint64_t a_row(uint i) { return uint64_t(min(row0 + i, p.m - 1u)) * p.lda; }

const uint WG = gl_WorkGroupSize.x;

// ROWS form: one float per subgroup, row and column; COLS form: one vec4 per thread.
shared float red_rows[TRANS_B ? SUBS * MR * CPT : 1];
shared vec4 red_cols[TRANS_B ? 1 : WG];

float bias_at(uint n) { return p.bias != 0ul ? ld1(p.bias, n * p.bias_step) : 0.0; }

void rows_form(uint g) {
    uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID, width = gl_SubgroupSize;
    uint local_group = sg / KS, ks = sg % KS;
    uint groups_per_wg = SUBS / KS;
    uint n0 = (g * groups_per_wg + local_group) * CPT;
    float acc[MR][CPT];
    [[unroll]] for (uint i = 0; i < MR; ++i)
        [[unroll]] for (uint j = 0; j < CPT; ++j) acc[i][j] = 0.0;
    uint64_t brow[CPT];
    [[unroll]] for (uint j = 0; j < CPT; ++j) brow[j] = uint64_t(min(n0 + j, p.n - 1u)) * p.ldb;
    if (local_group < groups_per_wg) {
#if DT == 1
        // float16: 16 bytes per load, as float32's vec4 (a vec4 of halves is 8 bytes).
        if (VECW == 2u) {
            uint k8 = p.k / 8u;
            for (uint q = ks * width + lane; q < k8; q += width * KS) {
                vec4 wl[CPT], wh[CPT];
                [[unroll]] for (uint j = 0; j < CPT; ++j) ld8(p.b, brow[j] + 8u * q, wl[j], wh[j]);
                [[unroll]] for (uint i = 0; i < MR; ++i) {
                    vec4 xl, xh;
                    ld8(p.a, a_row(i) + 8u * q, xl, xh);
                    [[unroll]] for (uint j = 0; j < CPT; ++j) acc[i][j] += dot(xl, wl[j]) + dot(xh, wh[j]);
                }
            }
        } else
#endif
        if (VEC4) {
            uint k4 = p.k / 4u;
            for (uint q = ks * width + lane; q < k4; q += width * KS) {
                vec4 w[CPT];
                [[unroll]] for (uint j = 0; j < CPT; ++j) w[j] = ld4(p.b, brow[j] + 4u * q);
                [[unroll]] for (uint i = 0; i < MR; ++i) {
                    vec4 x = ld4(p.a, a_row(i) + 4u * q);
                    [[unroll]] for (uint j = 0; j < CPT; ++j) acc[i][j] += dot(x, w[j]);
                }
            }
        } else {
            for (uint q = ks * width + lane; q < p.k; q += width * KS) {
                float w[CPT];
                [[unroll]] for (uint j = 0; j < CPT; ++j) w[j] = ld1(p.b, brow[j] + q);
                [[unroll]] for (uint i = 0; i < MR; ++i) {
                    float x = ld1(p.a, a_row(i) + q);
                    [[unroll]] for (uint j = 0; j < CPT; ++j) acc[i][j] = fma(x, w[j], acc[i][j]);
                }
            }
        }
    }
    // Each sum across the subgroup goes to shared memory, written by one lane each.
    [[unroll]] for (uint i = 0; i < MR; ++i)
        [[unroll]] for (uint j = 0; j < CPT; ++j) {
            float s = subgroupAdd(acc[i][j]);
            if (lane == (i * CPT + j) % width) red_rows[(sg * MR + i) * CPT + j] = s;
        }
    barrier();
    if (ks != 0u || local_group >= groups_per_wg) return;
    for (uint e = lane; e < MR * CPT; e += width) {
        uint i = e / CPT, j = e % CPT;
        float s = 0.0;
        for (uint t = 0; t < KS; ++t) s += red_rows[((sg + t) * MR + i) * CPT + j];
        uint n = n0 + j;
        if (n < p.n && row0 + i < p.m) st1(p.c, uint64_t(row0 + i) * p.n + n, act_apply(ACT, s + bias_at(n)));
    }
}

void cols_form(uint g) {
    const uint CT = WG / KS;                       // column threads per workgroup
    uint tid = gl_LocalInvocationID.x, ct = tid % CT, ks = tid / CT;
    uint base = g * CT * 4u;
    vec4 acc[MR];
    [[unroll]] for (uint i = 0; i < MR; ++i) acc[i] = vec4(0.0);
    uint ncol[4];                                  // this thread's columns (clamped)
    [[unroll]] for (uint q = 0; q < 4; ++q)
        ncol[q] = min(VEC4 ? base + 4u * ct + q : base + ct + q * CT, p.n - 1u);
    uint k = ks;
    // Four K rows per step: four independent loads of B in flight per thread.
    for (; k + 3u * KS < p.k; k += 4u * KS) {
        vec4 w[4];
        [[unroll]] for (uint r = 0; r < 4; ++r) {
            uint64_t row = uint64_t(k + r * KS) * p.ldb;
            if (VEC4) w[r] = ld4(p.b, row + ncol[0]);
            else w[r] = vec4(ld1(p.b, row + ncol[0]), ld1(p.b, row + ncol[1]), ld1(p.b, row + ncol[2]), ld1(p.b, row + ncol[3]));
        }
        [[unroll]] for (uint i = 0; i < MR; ++i)
            [[unroll]] for (uint r = 0; r < 4; ++r)
                acc[i] = fma(vec4(ld1(p.a, a_row(i) + k + r * KS)), w[r], acc[i]);
    }
    for (; k < p.k; k += KS) {
        uint64_t row = uint64_t(k) * p.ldb;
        vec4 w;
        if (VEC4) w = ld4(p.b, row + ncol[0]);
        else w = vec4(ld1(p.b, row + ncol[0]), ld1(p.b, row + ncol[1]), ld1(p.b, row + ncol[2]), ld1(p.b, row + ncol[3]));
        [[unroll]] for (uint i = 0; i < MR; ++i)
            acc[i] = fma(vec4(ld1(p.a, a_row(i) + k)), w, acc[i]);
    }
    vec4 bias = vec4(0.0);
    if (ks == 0u) [[unroll]] for (uint q = 0; q < 4; ++q) bias[q] = bias_at(ncol[q]);
    [[unroll]] for (uint i = 0; i < MR; ++i) {
        if (KS > 1u) {
            red_cols[tid] = acc[i];
            barrier();
            if (ks == 0u) for (uint t = 1; t < KS; ++t) acc[i] += red_cols[ct + t * CT];
            barrier();
        }
        if (ks == 0u && row0 + i < p.m) {
            uint64_t row = uint64_t(row0 + i) * p.n;
            vec4 v = acc[i] + bias;
            if (ACT != 0u) [[unroll]] for (uint q = 0; q < 4; ++q) v[q] = act_apply(ACT, v[q]);
            if (VEC4 && base + 4u * ct + 3u < p.n) {
                st4(p.c, row + base + 4u * ct, v);
            } else {
                [[unroll]] for (uint q = 0; q < 4; ++q) {
                    uint n = VEC4 ? base + 4u * ct + q : base + ct + q * CT;
                    if (n < p.n) st1(p.c, row + n, v[q]);
                }
            }
        }
    }
}

void main() {
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (g >= p.groups) return;                     // padding of a folded grid (whole workgroups)
    // Neighbouring workgroups take the row blocks of one column block (b shared in L2).
    row0 = (g % p.row_blocks) * MR;
    g /= p.row_blocks;
    if (TRANS_B) rows_form(g);
    else cols_form(g);
}
