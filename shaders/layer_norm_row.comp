#version 450
// LayerNorm forward, row form (see common/layer_norm.glsl): one invocation per row,
// three passes over it (sum, deviations, write) from the cache. No barriers and no
// subgroup operations, which a CPU device (lavapipe) pays dearly for; wrong for a GPU,
// whose lanes would then read far-apart addresses.
#define LN_SHARE 2
#include "common/layer_norm.glsl"

// Sums of x - shift and of its square over the row: four accumulators per lane (vec4
// components, or four scalars), each summing blocks of ROW_BLOCK vectors first, so the
// rounding stays near a tree's rather than growing with the row length.
// llvmpipe stops an invocation's loops after 65535 iterations in all (and computes
// garbage), so the host uses this form only for rows of at most LN_ROW_MAX_VECTORS.
const uint ROW_BLOCK = 64u;
void row_sums(ROW_ARRAY xr, float shift, out vec4 q1, out vec4 q2) {
    q1 = vec4(0.0); q2 = vec4(0.0);
#if VEC == 4
    for (uint b = 0u; b < p.n; b += ROW_BLOCK) {
        vec4 b1 = vec4(0.0), b2 = vec4(0.0);
        for (uint i = b; i < min(b + ROW_BLOCK, p.n); ++i) { vec4 r = xr.v[i] - shift; b1 += r; b2 += r * r; }
        q1 += b1; q2 += b2;
    }
#else
    uint n4 = p.n & ~3u;
    for (uint b = 0u; b < n4; b += 4u * ROW_BLOCK) {
        vec4 b1 = vec4(0.0), b2 = vec4(0.0);
        for (uint i = b; i < min(b + 4u * ROW_BLOCK, n4); i += 4u) {
            vec4 r = vec4(xr.v[i], xr.v[i + 1u], xr.v[i + 2u], xr.v[i + 3u]) - shift;
            b1 += r; b2 += r * r;
        }
        q1 += b1; q2 += b2;
    }
    for (uint i = n4; i < p.n; ++i) { float r = xr.v[i] - shift; q1.x += r; q2.x += r * r; }
#endif
}

void main() {
    uint row = group_index() * WG + gl_LocalInvocationID.x;
    if (row >= p.rows) return;
    ROW_ARRAY xr = row_ptr(p.x, row);
    vec4 q1, q2;
    row_sums(xr, 0.0, q1, q2);
    float m0 = hsum4(q1) / float(p.d);
    row_sums(xr, m0, q1, q2);
    vec2 sums = vec2(hsum4(q1), hsum4(q2));
    if (!is_finite(sums.y)) {   // NaN, inf or overflow in the row
        ScaledStats z = scaled_stats(row, 0u, 1u);
        for (uint i = 0u; i < p.n; ++i) ln_store(row, i, scaled_y(z, row, i));
        store_stats(row, z.mean, z.invstd);
        return;
    }
    vec2 st = finish_stats(sums);
    ROW_ARRAY yr = row_ptr(p.y, row);
    for (uint i = 0u; i < p.n; ++i)
        yr.v[i] = fma((xr.v[i] - m0 - st.x) * st.y, load_weight(row, i), load_bias(row, i));
    store_stats(row, m0 + st.x, st.y);
}
