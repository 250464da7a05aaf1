#version 450
// LayerNorm forward, group form (see common/layer_norm.glsl): one workgroup per row.
// The row is read once into registers (ITEMS vectors per thread), reduced with
// subgroupAdd plus one shared-memory step, the variance taken from the registers
// (two-pass, exact), then y written. Memory traffic: x read once, y written once.
#include "common/layer_norm.glsl"

void main() {
    uint row = group_index();
    if (row >= p.rows) return;   // uniform over the workgroup
    uint tid = gl_LocalInvocationID.x;

    VT v[ITEMS];
    load_items(v, row, tid, WG, p.n, true);
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) s += hsum(v[i]);
    float m0 = group_sum(vec2(s, 0.0)).x / float(p.d);

    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? ln_keep(row, idx, v[i] - m0) : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    q = group_sum(q);
    if (!is_finite(q.y)) {   // uniform: NaN, inf or overflow in the row
        ScaledStats z = scaled_stats(row, tid, WG);
        for (uint idx = tid; idx < p.n; idx += WG) ln_store(row, idx, scaled_y(z, row, idx));
        if (tid == 0) store_stats(row, z.mean, z.invstd);
        return;
    }
    vec2 st = finish_stats(q);

    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        if (idx < p.n) ln_store(row, idx, fma((v[i] - st.x) * st.y, load_weight(row, idx), load_bias(row, idx)));
    }
    if (tid == 0) store_stats(row, m0 + st.x, st.y);
}
