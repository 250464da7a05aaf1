#version 450
// LayerNorm forward, streaming form (see common/layer_norm.glsl): one workgroup per
// row, for rows too long for registers. ITEMS vectors per thread stay in registers,
// the rest is read again in each of the three passes (sum, deviations, write); the same
// exact statistics as the group form.
#include "common/layer_norm.glsl"

// The first WG * ITEMS vectors of the row stay in registers; the rest is read from
// memory in each pass (where a recently read row mostly comes from L2).
void main() {
    uint row = group_index();
    if (row >= p.rows) return;
    uint tid = gl_LocalInvocationID.x;
    const uint held = WG * ITEMS;

    VT v[ITEMS];
    load_items(v, row, tid, WG, p.n, true);
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) s += hsum(v[i]);
    for (uint idx = held + tid; idx < p.n; idx += WG) s += hsum(ln_load(p.x, row, idx));
    float m0 = group_sum(vec2(s, 0.0)).x / float(p.d);

    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? ln_keep(row, idx, v[i] - m0) : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    for (uint idx = held + tid; idx < p.n; idx += WG) {
        VT r = ln_keep(row, idx, ln_load(p.x, row, idx) - m0);
        q += vec2(hsum(r), hsum(r * r));
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
    for (uint idx = held + tid; idx < p.n; idx += WG)
        ln_store(row, idx, fma((ln_load(p.x, row, idx) - m0 - st.x) * st.y, load_weight(row, idx), load_bias(row, idx)));
    if (tid == 0) store_stats(row, m0 + st.x, st.y);
}
