#version 450
// LayerNorm forward, subgroup form (see common/layer_norm.glsl): one subgroup per row,
// ROWS rows per workgroup, for short rows; the pipeline is made with full subgroups.
// Otherwise as the group form: the row held in registers, two passes over them.
#define LN_SHARE 1
#include "common/layer_norm.glsl"

void main() {
    uint first = group_index() * ROWS;
    uint lane = gl_SubgroupInvocationID;
    uint width = gl_SubgroupSize;
    // ITEMS is sized for the device's smallest subgroup, so any actual size covers a row.
    for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
        uint row = first + r;
        if (row >= p.rows) break;   // uniform over the subgroup
        VT v[ITEMS];
        float s = 0.0;
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = lane + i * width;
            v[i] = idx < p.n ? ln_load(p.x, row, idx) : VT(0.0);
            s += hsum(v[i]);
        }
        float m0 = subgroupAdd(s) / float(p.d);
        vec2 q = vec2(0.0);
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = lane + i * width;
            v[i] = idx < p.n ? ln_keep(row, idx, v[i] - m0) : VT(0.0);
            q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
        }
        q = subgroupAdd(q);
        if (!is_finite(q.y)) {   // uniform over the subgroup: NaN, inf or overflow
            ScaledStats z = scaled_stats(row, lane, width);
            for (uint idx = lane; idx < p.n; idx += width) ln_store(row, idx, scaled_y(z, row, idx));
            if (subgroupElect()) store_stats(row, z.mean, z.invstd);
            continue;
        }
        vec2 st = finish_stats(q);
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = lane + i * width;
            if (idx < p.n) ln_store(row, idx, fma((v[i] - st.x) * st.y, load_weight(row, idx), load_bias(row, idx)));
        }
        if (subgroupElect()) store_stats(row, m0 + st.x, st.y);
    }
}
