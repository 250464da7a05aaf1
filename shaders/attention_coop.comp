#version 450
// Fused scaled dot-product attention for float16 prefill on tensor cores
// (VK_NV_cooperative_matrix: 16x16x16 float16 products accumulated in float32),
// FlashAttention-2 style: a workgroup of 4 subgroups of 32 takes 64 query rows of one
// (batch, head), subgroup s the 16 rows s*16 .. s*16+15, and loops over tiles of BC keys.
//
// Per tile: the workgroup copies K and V (BC rows of D float16, 16-byte chunks) into
// shared memory; each subgroup then, on its own rows only (no workgroup barrier):
//   S = Q K^T        its Q strip (held in registers as D/16 matrices) times K^T, float32;
//   softmax          S through shared memory: lanes 2r and 2r+1 take row r, half the keys
//                    each: scale * log2(e), masks, the row max (one shuffle), the online
//                    rescale factor alpha = 2^(m_old - m_new), P = 2^(S - m_new) written
//                    as float16, the row sum kept per lane;
//   O *= alpha       the output accumulators through shared memory, skipped when every
//                    row of the strip keeps its max (alpha = 1, most tiles);
//   O += P V         P (float16, shared) times V.
// At the end O / l is written in float16. Causal key tiles past the block's last
// visible key are never visited; only tiles crossing the diagonal, the end of the keys
// or an explicit mask are masked element by element. Masks and NaN as attention.comp.
// Needs D a multiple of 16, row strides multiples of 8 elements, 16-byte aligned q, k, v
// (src/ops/attention.c checks) and subgroups of 32.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#define DT 1
#include "common/elem_io.glsl"

layout(local_size_x_id = 0) in;                 // 4 subgroups of 32
layout(constant_id = 1) const uint BC = 64;     // keys per tile (32 or 64)
layout(constant_id = 2) const uint D = 64;      // head dimension, a multiple of 16
layout(constant_id = 3) const bool PREFETCH = true;   // the next K/V tile's loads before this tile's arithmetic
layout(constant_id = 4) const uint STRIPS = 1;  // 16-row strips per subgroup (1 or 2): rows per K/V tile load

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
const uint SR = WG / 32u * 16u;     // rows of one pass of the subgroups (64)
const uint BR = SR * STRIPS;        // query rows per workgroup
const uint CH = 8;                  // float16 elements per uvec4 chunk
const uint DC = D / CH;             // chunks per row of Q, K, V
const uint SK = DC + 1;             // shared row stride of Q, K, V in chunks (one of padding)
const uint SP = BC / CH + 1;        // shared row stride of P in chunks
const uint SS = BC + 4;             // shared row stride of S in floats
const uint SO = D + 4;              // shared row stride of O in floats
const uint SF = SS > SO ? SS : SO;  // a subgroup's float rows hold S, then O
const uint HALF = BC / 2;           // keys per lane of a row pair
const uint DHALF = D / 2;
const uint KV_SIZE = 2 * BC * SK > BR * SK ? 2 * BC * SK : BR * SK;   // K then V; Q before the loop
const uint CIT = (BC * DC + WG - 1u) / WG;     // K (and V) chunks per thread and tile
shared uvec4 kv[KV_SIZE];
shared uvec4 ps[SR * SP];           // one pass's P (the strips take turns)
shared float sf[SR * SF];           // one pass's S, then O

const float LOG2E = 1.4426950408889634;
#define NEG_INF uintBitsToFloat(0xff800000u)

uvec4 chunk(uint64_t base, uint64_t elem, bool inside) {
    return inside ? Chunk(base + elem * 2ul).v : uvec4(0);
}

// This thread's chunks of the K and V tile at key K0 into registers kc and vc (zeros past
// Tk). A macro: arrays sized by specialization constants cannot go through parameters.
#define FETCH_KV(K0) \
    [[unroll]] for (uint it = 0; it < CIT; ++it) { \
        uint e = gl_LocalInvocationID.x + it * WG; \
        uint rr = e / DC, c = e % DC; \
        bool inside = e < BC * DC && (K0) + rr < p.Tk; \
        kc[it] = chunk(p.k, kbase + uint64_t((K0) + rr) * p.kst + c * CH, inside); \
        vc[it] = chunk(p.v, vbase + uint64_t((K0) + rr) * p.vst + c * CH, inside); \
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
    uint r = lane >> 1, half_ = lane & 1u;       // this lane's row of the strip, and half of it
    uint row0 = sg * 16u;                        // the strip's first row in its pass
    bool causal = (p.flags & 1u) != 0u;
    uint mask_kind = p.flags & 6u;
    int shift = int(p.Tk) - int(p.Tq);
    float qscale = p.scale * LOG2E;

    // Q: staged through the K/V region, then held as D/16 matrices per strip
    uint64_t qbase = uint64_t(b) * p.qsb + uint64_t(h) * p.qsh;
    for (uint e = gl_LocalInvocationID.x; e < BR * DC; e += WG) {
        uint rr = e / DC, c = e % DC;
        kv[rr * SK + c] = chunk(p.q, qbase + uint64_t(q0 + rr) * p.qst + c * CH, q0 + rr < p.Tq);
    }
    barrier();
    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> qm[STRIPS * (D / 16)];
    [[unroll]] for (uint st = 0; st < STRIPS; ++st)
        [[unroll]] for (uint kk = 0; kk < D / 16; ++kk)
            coopMatLoadNV(qm[st * (D / 16) + kk], kv, (st * SR + row0) * SK + kk * 2u, SK, false);

    uint kend = p.Tk;
    if (causal) {
        int last = int(min(q0 + BR, p.Tq)) - 1 + shift + 1;   // one past the last key any row sees
        kend = uint(clamp(last, 0, int(p.Tk)));
    }
    uint ntiles = (kend + BC - 1) / BC;

    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> o[STRIPS * (D / 16)];
    [[unroll]] for (uint n = 0; n < STRIPS * (D / 16); ++n) o[n] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    float m[STRIPS], l[STRIPS];                  // per strip: row qi's running max (log2 units) and this lane's sum
    [[unroll]] for (uint st = 0; st < STRIPS; ++st) { m[st] = NEG_INF; l[st] = 0.0; }
    uint64_t kbase = uint64_t(b) * p.ksb + uint64_t(h) * p.ksh;
    uint64_t vbase = uint64_t(b) * p.vsb + uint64_t(h) * p.vsh;
    uint64_t mbase = uint64_t(b) * p.msb + uint64_t(h) * p.msh;
    uint sbase = (row0 + r) * SF;                // this lane's row of its subgroup's floats

    // K and V pass through registers (kc, vc) on their way to shared memory; with PREFETCH
    // the next tile's loads are issued before this tile's arithmetic.
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

        [[unroll]] for (uint st = 0; st < STRIPS; ++st) {
            uint qi = q0 + st * SR + row0 + r;   // this lane's query row
            // S = Q K^T for the strip, into its float rows
            [[unroll]] for (uint j = 0; j < BC / 16; ++j) {
                fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> s = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
                [[unroll]] for (uint kk = 0; kk < D / 16; ++kk) {
                    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> kb;
                    coopMatLoadNV(kb, kv, j * 16u * SK + kk * 2u, SK, true);
                    s = coopMatMulAddNV(qm[st * (D / 16) + kk], kb, s);
                }
                coopMatStoreNV(s, sf, row0 * SF + j * 16u, SF, false);
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();

            // online softmax on row r, keys half_*HALF .. +HALF
            bool edge = k0 + BC > p.Tk || mask_kind != 0u || (causal && int(k0 + BC - 1u) > int(q0 + st * SR) + shift);
            float sv[HALF];
            float mx = NEG_INF;
            [[unroll]] for (uint c = 0; c < HALF; ++c) {
                uint col = half_ * HALF + c;
                float x = sf[sbase + col] * qscale;
                if (edge) {
                    uint kj = k0 + col;
                    bool live = kj < p.Tk && qi < p.Tq && (!causal || int(kj) <= int(qi) + shift);
                    if (live && mask_kind != 0u) {
                        uint64_t mi = mbase + uint64_t(qi) * p.mst + uint64_t(kj) * p.msk;
                        if (mask_kind == 2u) live = bool_load(p.mask, mi);
                        else x += elem_load(p.mask, mi) * LOG2E;
                    }
                    x = live ? x : NEG_INF;
                }
                sv[c] = x;
                mx = max(mx, x);
            }
            mx = max(mx, subgroupShuffleXor(mx, 1u));
            float mn = max(m[st], mx);
            float mu = mn == NEG_INF ? 0.0 : mn; // a row with nothing yet: exp2(-inf) = 0, not NaN
            float alpha = exp2(m[st] - mu);
            float rs = 0.0;
            [[unroll]] for (uint c = 0; c < HALF; ++c) {
                sv[c] = exp2(sv[c] - mu);
                rs += sv[c];
            }
            l[st] = l[st] * alpha + rs;
            m[st] = mn;
            [[unroll]] for (uint c8 = 0; c8 < HALF / CH; ++c8) {
                uint c = c8 * CH;
                ps[(row0 + r) * SP + half_ * (HALF / CH) + c8] =
                    uvec4(packHalf2x16(vec2(sv[c], sv[c + 1u])), packHalf2x16(vec2(sv[c + 2u], sv[c + 3u])),
                          packHalf2x16(vec2(sv[c + 4u], sv[c + 5u])), packHalf2x16(vec2(sv[c + 6u], sv[c + 7u])));
            }
            bool keep = subgroupAll(alpha == 1.0);
            subgroupMemoryBarrierShared();
            subgroupBarrier();                   // S is read, P is written

            // O *= alpha (rows of the strip), through the float rows
            if (!keep) {
                [[unroll]] for (uint n = 0; n < D / 16; ++n) coopMatStoreNV(o[st * (D / 16) + n], sf, row0 * SF + n * 16u, SF, false);
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                [[unroll]] for (uint c = 0; c < DHALF; ++c) sf[sbase + half_ * DHALF + c] *= alpha;
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                [[unroll]] for (uint n = 0; n < D / 16; ++n) coopMatLoadNV(o[st * (D / 16) + n], sf, row0 * SF + n * 16u, SF, false);
            }

            // O += P V
            [[unroll]] for (uint kb = 0; kb < BC / 16; ++kb) {
                fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> pm;
                coopMatLoadNV(pm, ps, row0 * SP + kb * 2u, SP, false);
                [[unroll]] for (uint n = 0; n < D / 16; ++n) {
                    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> vb;
                    coopMatLoadNV(vb, kv, (BC + kb * 16u) * SK + n * 2u, SK, false);
                    o[st * (D / 16) + n] = coopMatMulAddNV(pm, vb, o[st * (D / 16) + n]);
                }
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();                   // the float rows and P are free again
        }
        if (!PREFETCH && kt + 1u < ntiles) { FETCH_KV(k0 + BC) }
    }

    // O / l, in float16, strip by strip through the float rows
    [[unroll]] for (uint st = 0; st < STRIPS; ++st) {
        uint qi = q0 + st * SR + row0 + r;
        [[unroll]] for (uint n = 0; n < D / 16; ++n) coopMatStoreNV(o[st * (D / 16) + n], sf, row0 * SF + n * 16u, SF, false);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        float lt = l[st] + subgroupShuffleXor(l[st], 1u);
        if (qi < p.Tq) {
            uint64_t row = uint64_t(z) * p.Tq + qi;
            float inv = lt == 0.0 ? 0.0 : 1.0 / lt;
            [[unroll]] for (uint c = 0; c < DHALF; ++c) {
                uint col = half_ * DHALF + c;
                elem_store(p.dst, row * D + col, lt == 0.0 ? 0.0 : sf[sbase + col] * inv);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();                       // the float rows are read before the next strip's O
    }
}
