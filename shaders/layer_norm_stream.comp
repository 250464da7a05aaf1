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
    ROW_ARRAY xr = row_ptr(p.x, row);
    const uint held = WG * ITEMS;

    VT v[ITEMS];
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? xr.v[idx] : VT(0.0);
        s += hsum(v[i]);
    }
    for (uint idx = held + tid; idx < p.n; idx += WG) s += hsum(xr.v[idx]);
    float m0 = group_sum(vec2(s, 0.0)).x / float(p.d);

    vec2 q = vec2(0.0);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        v[i] = idx < p.n ? v[i] - m0 : VT(0.0);
        q += vec2(hsum(v[i]), hsum(v[i] * v[i]));
    }
    for (uint idx = held + tid; idx < p.n; idx += WG) {
        VT r = xr.v[idx] - m0;
        q += vec2(hsum(r), hsum(r * r));
    }
    q = group_sum(q);
    if (!is_finite(q.y)) {   // uniform: NaN, inf or overflow in the row
        ScaledStats z = scaled_stats(row, tid, WG);
        for (uint idx = tid; idx < p.n; idx += WG) row_ptr(p.y, row).v[idx] = scaled_y(z, row, idx);
        if (tid == 0) store_stats(row, z.mean, z.invstd);
        return;
    }
    vec2 st = finish_stats(q);

    ROW_ARRAY yr = row_ptr(p.y, row);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = tid + i * WG;
        if (idx < p.n) yr.v[idx] = fma((v[i] - st.x) * st.y, load_weight(idx), load_bias(idx));
    }
    for (uint idx = held + tid; idx < p.n; idx += WG)
        yr.v[idx] = fma((xr.v[idx] - m0 - st.x) * st.y, load_weight(idx), load_bias(idx));
    if (tid == 0) store_stats(row, m0 + st.x, st.y);
}
