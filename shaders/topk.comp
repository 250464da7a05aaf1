#version 450
// topk along one dimension: x read as [outer, d, inner], one workgroup per (outer, inner)
// row of d elements; writes the k largest (or smallest) values and their 1-based indices
// as [outer, k, inner], best first.
//
// Order: each element gets a 64-bit key (hi, lo) that is unique in its row:
//   hi  the value's bits made unsigned-orderable (NaN above +inf as in PyTorch, -0 as
//       +0), inverted for smallest;
//   lo  d - 1 - index, so that among equal values the lower index ranks higher.
// A radix select finds the k-th largest key T, 8 bits per pass from the top (a shared
// histogram of the next digit among the elements matching the bits known so far),
// stopping early once the chosen digit holds exactly the elements still wanted; the k
// elements whose key is >= T then go to shared memory and a bitonic sort orders them.
// Each pass reads the row once (4 passes over hi, one per 8 bits of d - 1 for lo, fewer
// when it stops early).
#include "common/buffers.glsl"
#include "common/reduce_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CAP = 1024;   // shared slots: a power of two >= k
const uint WG = gl_WorkGroupSize.x;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer IntArray { int v[]; };

layout(push_constant) uniform Params {
    uint64_t x, vals, idx;
    uint outer, d, inner, k;
    uint largest;
    uint groups_x;
} p;

shared uint hist[256];
shared uint s_prefix_hi, s_prefix_lo, s_mask_hi, s_mask_lo, s_want, s_done, s_count;
shared uint key_hi[CAP];
shared uint key_lo[CAP];

uint key_of(float v) {
    uint b = floatBitsToUint(v);
    uint k;
    if ((b & 0x7fffffffu) > 0x7f800000u) k = 0xffffffffu;             // NaN
    else {
        if (b == 0x80000000u) b = 0u;                                  // -0 as +0
        k = (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
    }
    return p.largest != 0u ? k : ~k;
}

void main() {
    uint64_t row = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    if (row >= uint64_t(p.outer) * p.inner) return;   // whole workgroup
    uint o = uint(row / p.inner), c = uint(row % p.inner);
    uint64_t base = uint64_t(o) * p.d * p.inner + c;
    uint t = gl_LocalInvocationID.x;
    uint lo_bits = p.d > 1u ? uint(findMSB(p.d - 1u)) + 1u : 0u;   // bits of d - 1

    if (t == 0) { s_prefix_hi = 0; s_prefix_lo = 0; s_mask_hi = 0; s_mask_lo = 0; s_want = p.k; s_done = 0; s_count = 0; }
    // Passes: 4 over hi (shift 24, 16, 8, 0), then over lo from its top bit down.
    uint passes = 4 + (lo_bits + 7) / 8;
    for (uint pass = 0; pass < passes; ++pass) {
        bool on_hi = pass < 4;
        uint shift, width;
        if (on_hi) { shift = 24 - 8 * pass; width = 8; }
        else {
            uint top = lo_bits - 8 * (pass - 4);
            shift = top > 8 ? top - 8 : 0;
            width = top - shift;
        }
        for (uint i = t; i < 256; i += WG) hist[i] = 0;
        barrier();
        if (s_done != 0u) break;   // uniform: read after the barrier
        uint ph = s_prefix_hi, pl = s_prefix_lo, mh = s_mask_hi, ml = s_mask_lo;
        uint dmask = (1u << width) - 1u;
        for (uint j = t; j < p.d; j += WG) {
            uint hi = key_of(load_elem(p.x, base + uint64_t(j) * p.inner));
            uint lo = p.d - 1u - j;
            if ((hi & mh) == ph && (lo & ml) == pl)
                atomicAdd(hist[((on_hi ? hi : lo) >> shift) & dmask], 1u);
        }
        barrier();
        if (t == 0) {
            uint want = s_want, above = 0, digit = 0;
            for (int dg = int(dmask); dg >= 0; --dg) {
                uint h = hist[dg];
                if (above + h >= want) { digit = uint(dg); break; }
                above += h;
            }
            if (on_hi) { s_prefix_hi |= digit << shift; s_mask_hi |= dmask << shift; }
            else { s_prefix_lo |= digit << shift; s_mask_lo |= dmask << shift; }
            s_want = want - above;
            if (hist[digit] == s_want) s_done = 1;
        }
        barrier();
    }
    barrier();
    // Keys >= (prefix, unknown bits 0): exactly k elements.
    uint th = s_prefix_hi, tl = s_prefix_lo;
    for (uint j = t; j < p.d; j += WG) {
        uint hi = key_of(load_elem(p.x, base + uint64_t(j) * p.inner));
        uint lo = p.d - 1u - j;
        if (hi > th || (hi == th && lo >= tl)) {
            uint slot = atomicAdd(s_count, 1u);
            if (slot < CAP) { key_hi[slot] = hi; key_lo[slot] = lo + 1u; }   // lo + 1: 0 marks padding
        }
    }
    uint n = 1;
    while (n < p.k) n <<= 1;
    barrier();
    for (uint i = p.k + t; i < n; i += WG) { key_hi[i] = 0u; key_lo[i] = 0u; }
    // Bitonic sort of n keys, descending.
    for (uint size = 2; size <= n; size <<= 1) {
        for (uint stride = size >> 1; stride > 0; stride >>= 1) {
            barrier();
            for (uint i = t; i < n / 2; i += WG) {
                uint a = 2 * i - (i & (stride - 1));
                uint b = a + stride;
                bool desc = (a & size) == 0u;
                uint ah = key_hi[a], al = key_lo[a], bh = key_hi[b], bl = key_lo[b];
                bool a_less = ah < bh || (ah == bh && al < bl);
                if (a_less == desc) {
                    key_hi[a] = bh; key_lo[a] = bl;
                    key_hi[b] = ah; key_lo[b] = al;
                }
            }
        }
    }
    barrier();
    uint64_t out_base = uint64_t(o) * p.k * p.inner + c;
    for (uint i = t; i < p.k; i += WG) {
        uint j = p.d - key_lo[i];   // d - 1 - (lo + 1 - 1)
        uint64_t at = out_base + uint64_t(i) * p.inner;
        if (p.vals != 0ul) store_elem(p.vals, at, load_elem(p.x, base + uint64_t(j) * p.inner));
        if (p.idx != 0ul) IntArray(p.idx + at * 4ul).v[0] = int(j + 1u);
    }
}
