#version 450
// LayerNorm forward, subgroup form (see common/layer_norm.glsl), for short rows: each
// row is held by a segment of SEG lanes of one subgroup, SEG = WG / ROWS a power of two
// no larger than the device's smallest subgroup, so a subgroup holds several short rows
// (down to one lane per row) instead of idling most of its lanes. ITEMS vectors per lane
// in registers, two passes over them as in the group form. The pipeline is made with
// full subgroups, so the subgroups tile the workgroup and every segment lies in one.
#define LN_SHARE 3
#include "common/layer_norm.glsl"

void main() {
    uint at = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    uint lane = at % SEG;
    uint row = group_index() * ROWS + at / SEG;
    if (group_index() * ROWS >= p.rows) return;   // uniform over the workgroup
    // Segments past the last row take part in the reductions (which synchronize the
    // subgroup) with zeros, and write nothing.
    bool live = row < p.rows;
    uint srow = live ? row : p.rows - 1u;

    VT v[ITEMS];
    load_items(v, row, lane, SEG, p.n, live);
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) s += hsum(v[i]);
    float m0 = share_sum(s) / float(p.d);
    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * SEG;
        v[i] = live && idx < p.n ? ln_keep(row, idx, v[i] - m0) : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    q = share_sum2(q);
    // NaN, inf or overflow in the row: scaled statistics. Their reductions synchronize
    // the subgroup, so when any of its rows needs them every segment runs them, and only
    // those rows use them (the others keep their exact statistics from registers).
    bool rescale = live && !is_finite(q.y);
    if (subgroupMax(rescale ? 1u : 0u) != 0u) {   // (arithmetic, not vote: one feature fewer)
        ScaledStats z = scaled_stats(srow, lane, SEG);
        if (rescale) {
            for (uint idx = lane; idx < p.n; idx += SEG) ln_store(row, idx, scaled_y(z, row, idx));
            if (lane == 0u) store_stats(row, z.mean, z.invstd);
            return;
        }
    }
    if (!live) return;
    vec2 st = finish_stats(q);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * SEG;
        if (idx < p.n) ln_store(row, idx, fma((v[i] - st.x) * st.y, load_weight(row, idx), load_bias(row, idx)));
    }
    if (lane == 0u) store_stats(row, m0 + st.x, st.y);
}
