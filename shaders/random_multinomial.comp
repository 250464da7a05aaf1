#version 450
// out[r, s] = a 1-based category drawn from row r of the weights (rows x ncat), one
// workgroup per row. The row is cut into PARTS = 256 chunks of ceil(ncat / 256), grouped
// 16 to a group. Sums, all sequential from 0 in index order: T[c] of chunk c's weights,
// S[g] of group g's T, and Q[g + 1] = Q[g] + S[g] (Q[0] = 0). Sample s draws u (the
// uniform word of element r nsamples + s, as lumus.rand), target = u Q[16]; the group g
// is the last with Q[g] <= target; in it, chunk c is the first whose running
// Q[g] + (T sum of g's chunks through c) exceeds target; in it, the category is the first
// k whose base + (weight sum of c's elements through k) exceeds target, base being the
// running value before c; else (rounding) c's last category of weight > 0. Every pick
// has weight > 0, and the fixed order of every addition makes the samples the same on
// every device (lua/lumus/reference.lua repeats it).
// Without replacement, `weights` is a copy: each pick is set to 0 there and its chunk's
// T, its group's S and the Q from it on are recomputed before the next sample.
// A row with a negative, NaN or infinite weight, an infinite or zero sum, or (without
// replacement) fewer nonzero weights than samples gives 0 for all of its samples.
#include "common/buffers.glsl"
#include "common/philox.glsl"

#define PARTS 256u
layout(local_size_x = 256) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer IntArray { int v[]; };
// The weights are read after this invocation's own stores of zeros (without replacement).
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer WeightArray { float v[]; };

layout(push_constant) uniform Params {
    uint64_t weights;   // rows x ncat floats (the copy, without replacement)
    uint64_t dst;       // rows x nsamples int32
    uint64_t rows;
    uvec2 key, offset;
    uint ncat, nsamples;
    uint replacement;
    uint groups_x;
} p;

shared float T[PARTS];
shared float S[16];
shared float Q[17];
shared uint bad, nonzero;

float weight(uint64_t row, uint k) { return WeightArray(p.weights + (row * p.ncat + k) * 4ul).v[0]; }

float chunk_sum(uint64_t row, uint c, uint size) {
    precise float t = 0.0;
    uint end = min((c + 1u) * size, p.ncat);
    for (uint k = c * size; k < end; ++k) t = t + weight(row, k);
    return t;
}

void group_sum(uint g) {
    precise float t = 0.0;
    for (uint i = 0u; i < 16u; ++i) t = t + T[g * 16u + i];
    S[g] = t;
}

void group_prefixes(uint from) {
    precise float acc = Q[from];
    for (uint g = from; g < 16u; ++g) { acc = acc + S[g]; Q[g + 1u] = acc; }
}

// The category (0-based) for uniform u.
uint draw(uint64_t row, uint size, float u) {
    precise float target = u * Q[16];
    uint g = 15u;
    while (Q[g] > target) g--;                   // Q[0] = 0 <= target
    precise float run = 0.0;
    uint c = g * 16u + 15u;
    for (uint i = 0u; i < 16u; ++i) {
        precise float next = run + T[g * 16u + i];
        precise float at = Q[g] + next;
        if (at > target) { c = g * 16u + i; break; }
        run = next;
    }
    precise float base = Q[g] + run;
    uint end = min((c + 1u) * size, p.ncat);
    uint last = c * size;
    precise float local = 0.0;
    for (uint k = c * size; k < end; ++k) {
        float w = weight(row, k);
        local = local + w;
        precise float cum = base + local;
        if (w > 0.0) last = k;
        if (cum > target) return k;
    }
    return last;
}

float sample_uniform(uint64_t e) {
    uint64_t b = e >> 2;
    uvec4 w = philox4x32_10(uvec4(uint(b), uint(b >> 32), p.offset.x, p.offset.y), p.key);
    uint j = uint(e & 3ul);
    return philox_uniform(j == 0u ? w.x : j == 1u ? w.y : j == 2u ? w.z : w.w);
}

void main() {
    uint64_t row = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    if (row >= p.rows) return;                   // the grid's spare groups (uniform per group)
    uint lid = gl_LocalInvocationID.x;
    uint size = (p.ncat + PARTS - 1u) / PARTS;
    if (lid == 0u) { bad = 0u; nonzero = 0u; }
    barrier();
    uint end = min((lid + 1u) * size, p.ncat), count = 0u;
    bool invalid = false;
    for (uint k = lid * size; k < end; ++k) {
        float w = weight(row, k);
        if (!(w >= 0.0) || isinf(w)) invalid = true;     // negative, NaN or inf
        if (w > 0.0) count++;
    }
    if (invalid) atomicOr(bad, 1u);
    atomicAdd(nonzero, count);
    T[lid] = chunk_sum(row, lid, size);
    barrier();
    if (lid < 16u) group_sum(lid);
    barrier();
    if (lid == 0u) {
        Q[0] = 0.0;
        group_prefixes(0u);
        if (!(Q[16] > 0.0) || isinf(Q[16]) || (p.replacement == 0u && nonzero < p.nsamples)) bad = 1u;
    }
    barrier();
    uint64_t first = row * p.nsamples;
    if (bad != 0u) {
        for (uint s = lid; s < p.nsamples; s += PARTS) IntArray(p.dst + (first + s) * 4ul).v[0] = 0;
        return;
    }
    if (p.replacement != 0u) {
        for (uint s = lid; s < p.nsamples; s += PARTS)
            IntArray(p.dst + (first + s) * 4ul).v[0] = int(draw(row, size, sample_uniform(first + s))) + 1;
        return;
    }
    if (lid != 0u) return;                       // without replacement: one sample at a time
    for (uint s = 0u; s < p.nsamples; ++s) {
        uint k = draw(row, size, sample_uniform(first + s));
        IntArray(p.dst + (first + s) * 4ul).v[0] = int(k) + 1;
        WeightArray(p.weights + (row * p.ncat + k) * 4ul).v[0] = 0.0;
        uint c = k / size;
        T[c] = chunk_sum(row, c, size);
        group_sum(c / 16u);
        group_prefixes(c / 16u);
    }
}
