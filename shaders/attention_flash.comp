#version 450
// Fused scaled dot-product attention for prefill (many query rows), FlashAttention-2
// style: a workgroup takes BR query rows of one (batch, head) and loops over tiles of
// BC keys staged in shared memory, with an online softmax (running max per row in log2
// units, scores pre-scaled by scale * log2(e), exp2) and the unnormalized output in
// registers. Causal key tiles past a row block's last visible key are never visited,
// and only tiles that cross the diagonal, the end of the keys or an explicit mask take
// the per-element masking path.
//
// Threads: TR = WG / TC row groups of TC lanes (the lanes of a row group lie in one
// subgroup: the pipeline is made with full subgroups and the logical index is built
// from the subgroup ids). Lane tc of row group tr owns rows tr*RM .. tr*RM+RM-1 of the
// block; for S = Q K^T it owns keys tc*CN .. tc*CN+CN-1 of the tile (an RM x CN micro
// tile), for O the vec4 columns tc + n*TC. The row max goes through subgroupShuffleXor
// once per tile; the row sums stay per lane (all lanes of a row share its max) and are
// added up once at the end. The shuffle loops count up to a constant (a shift-counted
// loop is not unrolled, which would leave the register arrays indexed dynamically, in
// local memory).
// Shared memory (vec4 units): Q^T (D4*4 rows of BR/4 vec4s), K^T of the tile (D4*4
// rows of BC/4), V of the tile (BC rows of DV4 = DN4 * TC, zeros past D4), P^T (BC rows of BR/4) in its own region,
// or over K^T when P_APART is false (one barrier more per tile). The transposed layouts
// make every micro-tile read a vec4 that a row group's lanes share or read contiguously.
//
// Masking as attention.comp: keys past Tk, the causal mask aligned bottom-right, a bool
// mask (false: not attended) or a float mask added to the scores; a row with no key
// left gives 0; NaN in a score or an attended value gives NaN.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#include "common/elem_io.glsl"

#ifdef FIXED_TC
layout(local_size_x = FIXED_WG) in;
#else
layout(local_size_x_id = 0) in;
#endif
#ifdef FIXED_TC
// The workgroup (FIXED_WG) and register tile fixed at compile time (FIXED_TC lanes,
// FIXED_RM x FIXED_CN, FIXED_DN4 output vec4s per row and lane): every register array has a constant size and
// every loop over it a constant bound in the SPIR-V itself, not only after specialization.
const uint TC = FIXED_TC;
const uint RM = FIXED_RM;
const uint CN = FIXED_CN;
#else
layout(constant_id = 1) const uint TC = 8;    // lanes per row group: a power of two <= the subgroup size
layout(constant_id = 2) const uint RM = 4;    // query rows per lane (a multiple of 4)
layout(constant_id = 3) const uint CN = 4;    // keys per lane per tile (a multiple of 4)
#endif
layout(constant_id = 4) const uint D = 64;    // head dimension
layout(constant_id = 5) const bool P_APART = true;
layout(constant_id = 6) const bool PREFETCH = true;   // the next K/V tile's loads before this tile's arithmetic
const uint WG = gl_WorkGroupSize.x;
const uint TR = WG / TC;
const uint BR = TR * RM;
const uint BC = TC * CN;
const uint D4 = (D + 3) / 4;
const uint DP = D4 * 4;
const uint DN4 = (D4 + TC - 1) / TC;          // output vec4s per row and lane
#ifdef FIXED_TC
const uint DN4_MAX = FIXED_DN4;               // the register array's size (the plan keeps DN4 == it)
#else
const uint DN4_MAX = DN4;
#endif
const uint DV4 = DN4_MAX * TC;                // V's shared row stride: D4 columns, zeros after
const uint BR4 = BR / 4;
const uint BC4 = BC / 4;
const uint RM4 = RM / 4;
const uint CN4 = CN / 4;
const uint QT_AT = 0;
const uint KT_AT = QT_AT + DP * BR4;
const uint KT_SIZE = P_APART ? DP * BC4 : (DP * BC4 > BC * BR4 ? DP * BC4 : BC * BR4);
const uint V_AT = KT_AT + KT_SIZE;
const uint P_AT = P_APART ? V_AT + BC * DV4 : KT_AT;
const uint KIT = (BC4 * DV4 + WG - 1u) / WG;  // K^T elements per thread and tile (a bound: D4 <= DV4)
const uint VIT = (BC * DV4 + WG - 1u) / WG;   // V vec4s per thread and tile
const uint SM_SIZE = V_AT + BC * DV4 + (P_APART ? BC * BR4 : 0u);
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

// Elements 4*c4 .. 4*c4+3 of the row at element offset at (zeros past D).
vec4 load_row4(uint64_t base, uint64_t at, uint c4, bool vec_loads) {
    if (vec_loads) return elem_load4(base, at + c4 * 4u);
    vec4 r = vec4(0.0);
    [[unroll]] for (uint u = 0; u < 4u; ++u)
        if (c4 * 4u + u < D) r[u] = elem_load(base, at + c4 * 4u + u);
    return r;
}

// This thread's share of the K and V tile at key K0, from global memory into registers
// kx and vx: KIT elements of K^T's copy (4 keys of one vec4 column each), VIT of V's
// (zeros past Tk and past D4). A macro: arrays sized by specialization constants cannot
// go through function parameters (the optimizer fails on their copies).
#define FETCH_KV(K0) \
    [[unroll]] for (uint it = 0; it < KIT; ++it) { \
        uint e = gl_LocalInvocationID.x + it * WG; \
        uint j4 = e % BC4, c4 = e / BC4; \
        [[unroll]] for (uint u = 0; u < 4u; ++u) { \
            uint j = (K0) + j4 * 4u + u; \
            kx[it * 4u + u] = e < BC4 * D4 && j < p.Tk ? load_row4(p.k, kbase + uint64_t(j) * p.kst, c4, vec_loads) : vec4(0.0); \
        } \
    } \
    [[unroll]] for (uint it = 0; it < VIT; ++it) { \
        uint e = gl_LocalInvocationID.x + it * WG; \
        uint r = e / DV4, c4 = e % DV4; \
        uint j = (K0) + r; \
        vx[it] = e < BC * DV4 && j < p.Tk && c4 < D4 ? load_row4(p.v, vbase + uint64_t(j) * p.vst, c4, vec_loads) : vec4(0.0); \
    }

// The registers of FETCH_KV into shared memory, K transposed (4 vec4s of K^T each).
#define STASH_KV() \
    [[unroll]] for (uint it = 0; it < KIT; ++it) { \
        uint e = gl_LocalInvocationID.x + it * WG; \
        uint j4 = e % BC4, c4 = e / BC4; \
        [[unroll]] for (uint u = 0; u < 4u; ++u) /* (an if around this loop stops the unrolling) */ \
            if (e < BC4 * D4) \
                sm[KT_AT + (c4 * 4u + u) * BC4 + j4] = \
                    vec4(kx[it * 4u][u], kx[it * 4u + 1u][u], kx[it * 4u + 2u][u], kx[it * 4u + 3u][u]); \
    } \
    [[unroll]] for (uint it = 0; it < VIT; ++it) { \
        uint e = gl_LocalInvocationID.x + it * WG; \
        if (e < BC * DV4) sm[V_AT + e] = vx[it]; \
    }

void main() {
    uint qtiles = (p.Tq + BR - 1) / BR;
    uint g = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (g >= qtiles * p.BH) return;              // uniform over the workgroup
    uint qt = qtiles - 1u - g % qtiles;          // the longest causal blocks first
    uint z = g / qtiles;
    uint b = z / p.H, h = z % p.H;
    uint t = TC == 1u ? gl_LocalInvocationID.x : gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    uint tc = t % TC, tr = t / TC;
    uint q0 = qt * BR;
    bool causal = (p.flags & 1u) != 0u;
    bool vec_loads = (p.flags & 8u) != 0u;
    uint mask_kind = p.flags & 6u;
    int shift = int(p.Tk) - int(p.Tq);

    // Q^T, scaled into log2 units: a thread takes 4 rows of one vec4 column and
    // writes them as 4 vec4s of Q^T (constant components only).
    uint64_t qbase = uint64_t(b) * p.qsb + uint64_t(h) * p.qsh;
    float qscale = p.scale * LOG2E;
    for (uint e = gl_LocalInvocationID.x; e < BR4 * D4; e += WG) {
        uint r4 = e % BR4, c4 = e / BR4;
        vec4 x[4];
        [[unroll]] for (uint u = 0; u < 4u; ++u) {
            uint i = q0 + r4 * 4u + u;
            x[u] = i < p.Tq ? load_row4(p.q, qbase + uint64_t(i) * p.qst, c4, vec_loads) * qscale : vec4(0.0);
        }
        [[unroll]] for (uint u = 0; u < 4u; ++u)
            sm[QT_AT + (c4 * 4u + u) * BR4 + r4] = vec4(x[0][u], x[1][u], x[2][u], x[3][u]);
    }

    uint kend = p.Tk;
    if (causal) {
        int last = int(min(q0 + BR, p.Tq)) - 1 + shift + 1;   // one past the last key any row sees
        kend = uint(clamp(last, 0, int(p.Tk)));
    }
    uint ntiles = (kend + BC - 1) / BC;

    float m[RM], l[RM];
    vec4 o[RM * DN4_MAX];
    [[unroll]] for (uint i = 0; i < RM; ++i) { m[i] = NEG_INF; l[i] = 0.0; }
    [[unroll]] for (uint n = 0; n < RM * DN4_MAX; ++n) o[n] = vec4(0.0);
    uint64_t kbase = uint64_t(b) * p.ksb + uint64_t(h) * p.ksh;
    uint64_t vbase = uint64_t(b) * p.vsb + uint64_t(h) * p.vsh;
    uint64_t mbase = uint64_t(b) * p.msb + uint64_t(h) * p.msh;

    // K and V of a tile pass through registers (kx, vx) on their way to shared memory;
    // with PREFETCH the next tile's loads are issued before this tile's arithmetic, so
    // that their latency hides behind it.
    vec4 kx[KIT * 4u], vx[VIT];
    FETCH_KV(0u)
    for (uint kt = 0; kt < ntiles; ++kt) {
        uint k0 = kt * BC;
        barrier();   // the previous tile's K^T, V and P^T reads are done
        STASH_KV()
        barrier();
        if (PREFETCH && kt + 1u < ntiles) { FETCH_KV(k0 + BC) }

        // S = Q K^T for this lane's RM x CN micro tile
        float s[RM * CN];
        [[unroll]] for (uint n = 0; n < RM * CN; ++n) s[n] = 0.0;
        for (uint d = 0; d < DP; ++d) {
            vec4 qv[RM4], kv[CN4];
            [[unroll]] for (uint i = 0; i < RM4; ++i) qv[i] = sm[QT_AT + d * BR4 + tr * RM4 + i];
            [[unroll]] for (uint j = 0; j < CN4; ++j) kv[j] = sm[KT_AT + d * BC4 + tc * CN4 + j];
            [[unroll]] for (uint i = 0; i < RM; ++i)
                [[unroll]] for (uint j = 0; j < CN; ++j) s[i * CN + j] += qv[i / 4u][i % 4u] * kv[j / 4u][j % 4u];
        }

        // masking, only where the tile needs it (uniform over the workgroup)
        bool edge = k0 + BC > p.Tk || mask_kind != 0u || (causal && int(k0 + BC - 1u) > int(q0) + shift);
        if (edge) {
            [[unroll]] for (uint i = 0; i < RM; ++i) {
                uint qi = q0 + tr * RM + i;
                [[unroll]] for (uint j = 0; j < CN; ++j) {
                    uint kj = k0 + tc * CN + j;
                    bool live = kj < p.Tk && qi < p.Tq && (!causal || int(kj) <= int(qi) + shift);
                    float sv = s[i * CN + j];
                    if (live && mask_kind != 0u) {
                        uint64_t mi = mbase + uint64_t(qi) * p.mst + uint64_t(kj) * p.msk;
                        if (mask_kind == 2u) live = bool_load(p.mask, mi);
                        else sv += elem_load(p.mask, mi) * LOG2E;
                    }
                    s[i * CN + j] = live ? sv : NEG_INF;
                }
            }
        }

        // online softmax: the row max over the row group's lanes, rescale, P = 2^(S - m)
        [[unroll]] for (uint i = 0; i < RM; ++i) {
            float mx = NEG_INF;
            [[unroll]] for (uint j = 0; j < CN; ++j) mx = max(mx, s[i * CN + j]);
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
            l[i] = l[i] * alpha + rs;
            m[i] = mn;
            [[unroll]] for (uint n = 0; n < DN4_MAX; ++n) o[i * DN4_MAX + n] *= alpha;
        }

        if (!P_APART) barrier();   // every lane is done with K^T, which P^T overwrites
        [[unroll]] for (uint j = 0; j < CN; ++j)
            [[unroll]] for (uint i4 = 0; i4 < RM4; ++i4)
                sm[P_AT + (tc * CN + j) * BR4 + tr * RM4 + i4] =
                    vec4(s[(i4 * 4u) * CN + j], s[(i4 * 4u + 1u) * CN + j], s[(i4 * 4u + 2u) * CN + j], s[(i4 * 4u + 3u) * CN + j]);
        barrier();

        // O += P V (V's rows padded with zeros to DV4 columns: no bounds in this loop,
        // so that it unrolls and o stays in registers)
        for (uint c = 0; c < BC; ++c) {
            vec4 pv[RM4];
            [[unroll]] for (uint i = 0; i < RM4; ++i) pv[i] = sm[P_AT + c * BR4 + tr * RM4 + i];
            [[unroll]] for (uint n = 0; n < DN4_MAX; ++n) {
                vec4 vv = sm[V_AT + c * DV4 + tc + n * TC];
                [[unroll]] for (uint i = 0; i < RM; ++i) o[i * DN4_MAX + n] += pv[i / 4u][i % 4u] * vv;
            }
        }
        if (!PREFETCH && kt + 1u < ntiles) { FETCH_KV(k0 + BC) }
    }

    // O / l through shared memory (Q^T's region holds BR rows of D4 vec4s), then written
    // out by the whole workgroup in row order
    barrier();   // every lane is done with the last tile's shared memory
    [[unroll]] for (uint i = 0; i < RM; ++i) {
        float li = l[i];
        [[unroll]] for (uint e = 0; e < 5u; ++e) if ((1u << e) < TC) li += subgroupShuffleXor(li, 1u << e);
        float inv = li == 0.0 ? 0.0 : 1.0 / li;   // a row with no key left gives 0
        [[unroll]] for (uint n = 0; n < DN4_MAX; ++n) {
            uint d4 = tc + n * TC;
            if (d4 < D4) sm[QT_AT + (tr * RM + i) * D4 + d4] = li == 0.0 ? vec4(0.0) : o[i * DN4_MAX + n] * inv;
        }
    }
    barrier();
    uint rows = min(BR, p.Tq - q0);
    uint64_t obase = (uint64_t(z) * p.Tq + q0) * D;
    for (uint e = gl_LocalInvocationID.x; e < rows * D; e += WG) {
        uint r = e / D, c = e % D;
        elem_store(p.dst, obase + e, sm[QT_AT + r * D4 + c / 4u][c % 4u]);
    }
}
