#version 450
// LayerNorm forward, group form (see common/layer_norm.glsl): one workgroup per row, or
// per REPEAT rows of the same skew taken one after another (slot_row). A row is read
// once into registers (ITEMS vectors per thread), reduced with subgroupAdd plus one
// shared-memory step, the variance taken from the registers (two-pass, exact), then y
// written (with REPEAT > 1, with weight and bias loaded once for the slot). Memory
// traffic: x read once, y written once.
#include "common/layer_norm.glsl"

void main() {
    uint slot = group_index();
    uint tid = gl_LocalInvocationID.x;
    VT wv[ITEMS], bv[ITEMS];   // REPEAT > 1: the slot's weight and bias, once loaded
    bool loaded = false;
    for (uint j = 0; j < REPEAT; ++j) {
        uint row = slot_row(slot, j);
        if (row >= p.rows) return;   // uniform over the workgroup

        VT v[ITEMS];
        float s = 0.0;
        for (uint i = 0; i < ITEMS; ++i) {
            uint idx = tid + i * WG;
            v[i] = idx < p.n ? ln_load(p.x, row, idx) : VT(0.0);
            s += hsum(v[i]);
        }
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
            continue;
        }
        vec2 st = finish_stats(q);

        if (REPEAT == 1u) {   // weight and bias read as they are used: fewer registers held
            for (uint i = 0; i < ITEMS; ++i) {
                uint idx = tid + i * WG;
                if (idx < p.n) ln_store(row, idx, fma((v[i] - st.x) * st.y, load_weight(row, idx), load_bias(row, idx)));
            }
        } else {
            if (!loaded) {
                for (uint i = 0; i < ITEMS; ++i) {
                    uint idx = tid + i * WG;
                    wv[i] = idx < p.n ? load_weight(row, idx) : VT(0.0);
                    bv[i] = idx < p.n ? load_bias(row, idx) : VT(0.0);
                }
                loaded = true;
            }
            for (uint i = 0; i < ITEMS; ++i) {
                uint idx = tid + i * WG;
                if (idx < p.n) ln_store(row, idx, fma((v[i] - st.x) * st.y, wv[i], bv[i]));
            }
        }
        if (tid == 0) store_stats(row, m0 + st.x, st.y);
    }
}
