#version 450
// LayerNorm forward, two-stage split form (see common/layer_norm.glsl), for rows too
// long for one workgroup and too few to fill the device. A row is cut into PARTS slices
// of p.chunk vectors, one workgroup per slice, ITEMS vectors per thread, in two
// dispatches with no waiting inside either:
//   STAGE 1  each slice's (shift, mean offset, M2), two-pass from registers, to its
//            record in the scratch (p.scratch, 4 floats per slice);
//   STAGE 2  each slice combines its row's records (Chan's pairwise update, the same sums
//            in the same order in every slice of the row, so all agree), reads its slice
//            again and writes y. Slices run in the reverse of stage 1's order, so the
//            slices stage 1 read last, which the L2 cache may still hold, are read first.
// x is read twice; a row's slices need not run at once (the one-dispatch split form
// waits for its partners, a wait that grows with their number). Not in place: a row
// whose statistics come out non-finite is read again whole by every slice (scaled
// statistics) while others may have written theirs.
#ifndef STAGE
#error "define STAGE as 1 or 2"
#endif
#include "common/layer_norm.glsl"

const uint PARTS = ROWS;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Records { vec4 v[]; };

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint job = group_index();
    uint jobs = p.rows * PARTS;   // the host keeps this within 32 bits
    if (job >= jobs) return;      // uniform: grid padding
#if STAGE == 2
    job = jobs - 1u - job;
#endif
    uint row = job / PARTS, part = job % PARTS;
    uint first = part * p.chunk;
    uint end = min(first + p.chunk, p.n);

    VT v[ITEMS];
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        v[i] = idx < end ? ln_load(p.x, row, idx) : VT(0.0);
        s += hsum(v[i]);
    }
#if STAGE == 1
    // Elements in the slice: 0 only where ANY_D's last vectors lie past this row's end.
    float count = slice_count(row, first, end);
    float total = group_sum(vec2(s, 0.0)).x;
    float shift = count > 0.0 ? total / count : 0.0;
    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        VT r = idx < end ? ln_keep(row, idx, v[i] - shift) : VT(0.0);
        q += vec2(hsum(r), hsum(r * r));
    }
    q = group_sum(q);
    float offset = count > 0.0 ? q.x / count : 0.0;   // slice mean = shift + offset
    float m2 = q.y - q.x * offset;                    // sum of squared deviations
    m2 = m2 < 0.0 ? 0.0 : m2;   // not max(m2, 0.0), which may turn an overflow's NaN into 0
    if (tid == 0u) Records(p.scratch).v[job] = vec4(shift, offset, m2, 0.0);
#else
    // The row's records: thread k takes slices k, k + WG, ...; two workgroup sums in a
    // fixed order give the mean's offset from slice 0's shift and the total M2.
    uint rec0 = row * PARTS;
    float base = Records(p.scratch).v[rec0].x;
    float n_total = float(p.d);
    float wsum = 0.0;
    for (uint k = tid; k < PARTS; k += WG) {
        vec4 r = Records(p.scratch).v[rec0 + k];
        float n_k = slice_count(row, min(k * p.chunk, p.n), min((k + 1u) * p.chunk, p.n));
        wsum += n_k * ((r.x - base) + r.y);
    }
    float delta = group_sum(vec2(wsum, 0.0)).x / n_total;
    float msum = 0.0;
    for (uint k = tid; k < PARTS; k += WG) {
        vec4 r = Records(p.scratch).v[rec0 + k];
        float n_k = slice_count(row, min(k * p.chunk, p.n), min((k + 1u) * p.chunk, p.n));
        float dk = (r.x - base) + r.y - delta;
        msum += r.z + n_k * dk * dk;
    }
    float m2_total = group_sum(vec2(msum, 0.0)).x;
    if (!is_finite(m2_total)) {
        // NaN, inf or overflow in the row: every slice takes the row's statistics
        // scaled, from memory, and writes itself.
        ScaledStats z = scaled_stats(row, tid, WG);
        for (uint idx = first + tid; idx < end; idx += WG) ln_store(row, idx, scaled_y(z, row, idx));
        if (part == 0u && tid == 0u) store_stats(row, z.mean, z.invstd);
        return;
    }
    float invstd = invsqrt_refined(m2_total / n_total + p.eps);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = first + tid + i * WG;
        if (idx < end) ln_store(row, idx, fma(((v[i] - base) - delta) * invstd, load_weight(row, idx), load_bias(row, idx)));
    }
    if (part == 0u && tid == 0u) store_stats(row, base + delta, invstd);
#endif
}
