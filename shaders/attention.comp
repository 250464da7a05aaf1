#version 450
// Fused scaled dot-product attention, flash-attention style: a workgroup takes BQ query
// rows of one (batch, head) and loops over tiles of BK keys, keeping an online softmax
// (running max m and sum l per row, float32, in log2 units) and the unnormalized output
// in registers; the Tq x Tk score matrix never exists in memory.
//
// Threads: TR = WG / TC row groups of TC lanes. Lane tc of row group tr holds scores
// s[i][j] of rows tr*RM + i and keys tc + j*TC, and the output vec4s tc + n*TC of those
// rows. The TC lanes of a row group lie in one subgroup (the logical index is built
// from the subgroup ids, and the pipeline is made with full subgroups), so the row max
// and sum go through subgroupShuffleXor.
// Shared memory (vec4 units): the Q tile, pre-scaled by scale * log2(e), rows of D4+1
// vec4s; the K tile, the same layout; the V tile, rows of D4 vec4s; the probabilities P
// (rows of BK/4+1 vec4s) in a region of their own where shared memory allows (one
// barrier fewer per tile), else over the K tile once the scores are computed. The
// paddings keep the lanes' reads on distinct banks.
//
// Masking: keys past Tk, the causal mask aligned bottom-right (query i sees keys
// j <= i + Tk - Tq, as a KV cache needs), a bool mask (false: not attended) or a float
// mask added to the scores. A row with no key left gives 0 (PyTorch's SDPA since 2.5);
// NaN in the scores or values gives NaN. With splits > 1 (flash-decoding) the workgroups
// of one row tile take disjoint ranges of key tiles and write their unnormalized output,
// m and l (float32) to dst; attention_combine.comp merges them.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common/elem_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TC = 16;   // lanes per row group: a power of two <= the subgroup size
layout(constant_id = 2) const uint RM = 4;    // query rows per lane
layout(constant_id = 3) const uint CN = 4;    // keys per lane per tile
layout(constant_id = 4) const uint D = 64;    // head dimension
layout(constant_id = 5) const bool P_APART = false;   // P has its own region (else it overwrites K)
const uint WG = gl_WorkGroupSize.x;
const uint TR = WG / TC;
const uint BQ = TR * RM;
const uint BK = TC * CN;
const uint D4 = (D + 3) / 4;
const uint DP = D4 * 4;
const uint QS = D4 + 1;
const uint DN4 = (D4 + TC - 1) / TC;
const uint PS = (BK + 3) / 4 + 1;
const uint K_AT = BQ * QS;
const uint KP_SIZE = P_APART ? BK * QS : (BK * QS > BQ * PS ? BK * QS : BQ * PS);
const uint V_AT = K_AT + KP_SIZE;
const uint P_AT = P_APART ? V_AT + BK * D4 : K_AT;
const uint SM_SIZE = V_AT + BK * D4 + (P_APART ? BQ * PS : 0u);
shared vec4 sm[SM_SIZE];

layout(push_constant) uniform Params {
    uint64_t q, k, v, dst, mask;
    uint qsb, qsh, qst, ksb, ksh, kst, vsb, vsh, vst;   // element strides of batch, head, row
    uint msb, msh, mst, msk;                            // the mask's (0 where it broadcasts)
    uint H, BH, Tq, Tk;
    uint splits, tiles_per_split, groups_x, flags;      // flags: 1 causal, 2 bool mask, 4 float mask, 8 vec4 loads
    float scale;
} p;

const float LOG2E = 1.4426950408889634;
#define NEG_INF uintBitsToFloat(0xff800000u)

void main() {
    uint qtiles = (p.Tq + BQ - 1) / BQ;
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (g >= qtiles * p.BH * p.splits) return;   // uniform over the workgroup
    uint split = g % p.splits;
    uint rest = g / p.splits;
    uint qt = qtiles - 1u - rest % qtiles;       // the longest causal tiles first
    uint z = rest / qtiles;
    uint b = z / p.H, h = z % p.H;
    uint t = TC == 1u ? gl_LocalInvocationID.x : gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    uint tc = t % TC, tr = t / TC;
    uint q0 = qt * BQ;
    bool causal = (p.flags & 1u) != 0u;
    bool vec_loads = (p.flags & 8u) != 0u;   // D % 4 == 0, q, k, v 4-element aligned with strides of 4s
    int shift = int(p.Tk) - int(p.Tq);

    // Q tile, scaled into log2 units
    uint64_t qbase = uint64_t(b) * p.qsb + uint64_t(h) * p.qsh;
    float qscale = p.scale * LOG2E;
    if (vec_loads) {
        for (uint e = gl_LocalInvocationID.x; e < BQ * D4; e += WG) {
            uint r = e / D4, c4 = e % D4;
            uint i = q0 + r;
            sm[r * QS + c4] = i < p.Tq ? elem_load4(p.q, qbase + uint64_t(i) * p.qst + c4 * 4u) * qscale : vec4(0.0);
        }
    } else {
        for (uint e = gl_LocalInvocationID.x; e < BQ * DP; e += WG) {
            uint r = e / DP, c = e % DP;
            uint i = q0 + r;
            float val = i < p.Tq && c < D ? elem_load(p.q, qbase + uint64_t(i) * p.qst + c) * qscale : 0.0;
            sm[r * QS + c / 4u][c % 4u] = val;
        }
    }

    // key tiles of this workgroup
    uint kend = p.Tk;
    if (causal) {
        int last = int(min(q0 + BQ, p.Tq)) - 1 + shift + 1;   // one past the last key any row sees
        kend = uint(clamp(last, 0, int(p.Tk)));
    }
    uint ntiles = (kend + BK - 1) / BK;
    uint t_begin = split * p.tiles_per_split;
    uint t_end = min(t_begin + p.tiles_per_split, ntiles);

    float m[RM], l[RM];
    vec4 o[RM * DN4];
    [[unroll]] for (uint i = 0; i < RM; ++i) { m[i] = NEG_INF; l[i] = 0.0; }
    [[unroll]] for (uint n = 0; n < RM * DN4; ++n) o[n] = vec4(0.0);
    uint64_t kbase = uint64_t(b) * p.ksb + uint64_t(h) * p.ksh;
    uint64_t vbase = uint64_t(b) * p.vsb + uint64_t(h) * p.vsh;
    uint64_t mbase = uint64_t(b) * p.msb + uint64_t(h) * p.msh;
    uint mask_kind = p.flags & 6u;

    for (uint kt = t_begin; kt < t_end; ++kt) {
        uint k0 = kt * BK;
        barrier();   // the previous tile's P and V reads are done
        if (vec_loads) {
            for (uint e = gl_LocalInvocationID.x; e < BK * D4; e += WG) {
                uint r = e / D4, c4 = e % D4;
                uint j = k0 + r;
                bool ok = j < p.Tk;
                sm[K_AT + r * QS + c4] = ok ? elem_load4(p.k, kbase + uint64_t(j) * p.kst + c4 * 4u) : vec4(0.0);
                sm[V_AT + r * D4 + c4] = ok ? elem_load4(p.v, vbase + uint64_t(j) * p.vst + c4 * 4u) : vec4(0.0);
            }
        } else {
            for (uint e = gl_LocalInvocationID.x; e < BK * DP; e += WG) {
                uint r = e / DP, c = e % DP;
                uint j = k0 + r;
                bool ok = j < p.Tk && c < D;
                float kv = ok ? elem_load(p.k, kbase + uint64_t(j) * p.kst + c) : 0.0;
                float vv = ok ? elem_load(p.v, vbase + uint64_t(j) * p.vst + c) : 0.0;
                sm[K_AT + r * QS + c / 4u][c % 4u] = kv;
                sm[V_AT + r * D4 + c / 4u][c % 4u] = vv;
            }
        }
        barrier();

        float s[RM * CN];
        [[unroll]] for (uint n = 0; n < RM * CN; ++n) s[n] = 0.0;
        [[unroll]] for (uint d4 = 0; d4 < D4; ++d4) {
            vec4 qv[RM];
            [[unroll]] for (uint i = 0; i < RM; ++i) qv[i] = sm[(tr * RM + i) * QS + d4];
            [[unroll]] for (uint j = 0; j < CN; ++j) {
                vec4 kv = sm[K_AT + (tc + j * TC) * QS + d4];
                [[unroll]] for (uint i = 0; i < RM; ++i) s[i * CN + j] += dot(qv[i], kv);
            }
        }

        [[unroll]] for (uint i = 0; i < RM; ++i) {
            uint qi = q0 + tr * RM + i;
            float mx = NEG_INF;
            [[unroll]] for (uint j = 0; j < CN; ++j) {
                uint kj = k0 + tc + j * TC;
                bool live = kj < p.Tk && qi < p.Tq && (!causal || int(kj) <= int(qi) + shift);
                float sv = s[i * CN + j];
                if (live && mask_kind != 0u) {
                    uint64_t mi = mbase + uint64_t(qi) * p.mst + uint64_t(kj) * p.msk;
                    if (mask_kind == 2u) live = bool_load(p.mask, mi);
                    else sv += elem_load(p.mask, mi) * LOG2E;
                }
                sv = live ? sv : NEG_INF;
                s[i * CN + j] = sv;
                mx = max(mx, sv);
            }
            [[unroll]] for (uint e = 0; e < 5u; ++e) if ((1u << e) < TC) mx = max(mx, subgroupShuffleXor(mx, 1u << e));
            float mn = max(m[i], mx);
            float mu = mn == NEG_INF ? 0.0 : mn;   // a row with nothing yet: exp2(-inf) = 0, not NaN
            float alpha = exp2(m[i] - mu);
            float rs = 0.0;
            [[unroll]] for (uint j = 0; j < CN; ++j) {
                float pv = exp2(s[i * CN + j] - mu);
                s[i * CN + j] = pv;
                rs += pv;
            }
            [[unroll]] for (uint e = 0; e < 5u; ++e) if ((1u << e) < TC) rs += subgroupShuffleXor(rs, 1u << e);
            l[i] = l[i] * alpha + rs;
            m[i] = mn;
            [[unroll]] for (uint n = 0; n < DN4; ++n) o[i * DN4 + n] *= alpha;
        }

        if (!P_APART) barrier();   // every lane is done with the K tile, which P overwrites
        [[unroll]] for (uint i = 0; i < RM; ++i)
            [[unroll]] for (uint j = 0; j < CN; ++j) {
                uint c = tc + j * TC;
                sm[P_AT + (tr * RM + i) * PS + c / 4u][c % 4u] = s[i * CN + j];
            }
        barrier();

        for (uint c4 = 0; c4 < PS - 1u; ++c4) {
            vec4 pv[RM];
            [[unroll]] for (uint i = 0; i < RM; ++i) pv[i] = sm[P_AT + (tr * RM + i) * PS + c4];
            [[unroll]] for (uint u = 0; u < 4u; ++u) {
                uint c = c4 * 4u + u;
                [[unroll]] for (uint n = 0; n < DN4; ++n) {
                    uint d4 = tc + n * TC;
                    if (c < BK && d4 < D4) {
                        vec4 vv = sm[V_AT + c * D4 + d4];
                        [[unroll]] for (uint i = 0; i < RM; ++i) o[i * DN4 + n] += pv[i][u] * vv;
                    }
                }
            }
        }
    }

    uint rows = p.BH * p.Tq;
    [[unroll]] for (uint i = 0; i < RM; ++i) {
        uint qi = q0 + tr * RM + i;
        if (qi >= p.Tq) continue;
        uint64_t row = uint64_t(z) * p.Tq + qi;
        if (p.splits == 1u) {
            float inv = l[i] == 0.0 ? 0.0 : 1.0 / l[i];
            [[unroll]] for (uint n = 0; n < DN4; ++n) {
                uint d4 = tc + n * TC;
                if (d4 >= D4) continue;
                vec4 val = l[i] == 0.0 ? vec4(0.0) : o[i * DN4 + n] * inv;
                [[unroll]] for (uint u = 0; u < 4u; ++u)
                    if (d4 * 4u + u < D) elem_store(p.dst, row * D + d4 * 4u + u, val[u]);
            }
        } else {
            uint64_t prow = uint64_t(split) * rows + row;
            [[unroll]] for (uint n = 0; n < DN4; ++n) {
                uint d4 = tc + n * TC;
                if (d4 >= D4) continue;
                [[unroll]] for (uint u = 0; u < 4u; ++u)
                    if (d4 * 4u + u < D) F32Ref(p.dst + (prow * D + d4 * 4u + u) * 4ul).v = o[i * DN4 + n][u];
            }
            if (tc == 0u) {
                uint64_t at = uint64_t(p.splits) * rows * D + prow * 2ul;
                F32Ref(p.dst + at * 4ul).v = m[i];
                F32Ref(p.dst + (at + 1ul) * 4ul).v = l[i];
            }
        }
    }
}
