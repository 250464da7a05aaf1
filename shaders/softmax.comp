#version 450
// softmax over the last dimension: y = exp(x - max) / sum(exp(x - max)), one workgroup or
// one subgroup per row (common/rows.glsl). With LOG == 1, log_softmax: y = (x - max) -
// log(sum(exp(x - max))), from x itself (the held vectors stay x), so nothing underflows.
// The first width * ITEMS vectors of the row are read once into registers: each thread takes
// the max of its share, keeps e = exp(x - that max), and sums the e's. Longer rows stream
// the rest: a running max and a sum rescaled when the max grows (online softmax), so the
// statistics take one read of the row. The threads' (max, sum) pairs then combine into the
// row's max M and sum S (each sum scaled by exp(its max - M) <= 1, so nothing overflows),
// and y is written: e * exp(thread max - M) / S from registers, exp(x - M) / S re-read for
// the streamed part. Memory traffic: one read and one write when the row fits, else two
// reads of the streamed part (the second mostly from L2) and one write.
// Non-finite entries, as PyTorch: -inf entries (masks) give 0; a row of only -inf, a row
// with +inf and a row with NaN give all NaN. GLSL's max may drop a NaN operand, so a NaN
// must not be lost through the max: it reaches s through exp(NaN - m) and makes the row's
// sum, hence every output, NaN. A +inf entry does the same through exp(inf - inf).
// In place (y == x) is safe: a row is read in full before any of it is written, except the
// streamed part, where each element is read again and written by the same thread.
#include "common/buffers.glsl"
#include "common/rows.glsl"

layout(constant_id = 1) const uint ITEMS = 1;   // vectors per thread held in registers

layout(push_constant) uniform Params {
    uint64_t x, y;
    uint64_t rows;
    uint n;          // vectors per row (d / VEC)
    uint d;          // elements per row
    uint groups_x;   // width of the grid, for 2-D folding
} p;

// exp(v - m); where the max m is -inf (the thread saw only -inf, padding, or NaN that max
// dropped) it takes m as 0, so -inf gives 0 rather than exp(NaN) and NaN stays NaN.
VT exp_from(VT v, float m) { return exp(v - VT(m == NEG_INF ? 0.0 : m)); }
float scale_from(float m, float to) { return m == NEG_INF ? 0.0 : exp(m - to); }

void process_row(uint64_t row, uint lane, uint width) {
    ROW_ARRAY xr = row_ptr(p.x, row, p.d);
    uint held = width * ITEMS;

    VT v[ITEMS];
    float m_held = NEG_INF;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * width;
        v[i] = idx < p.n ? row_load(xr, idx) : VT(NEG_INF);
        m_held = max(m_held, hmax(v[i]));
    }
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
#if LOG == 1
        s += hsum(exp_from(v[i], m_held));
#else
        v[i] = exp_from(v[i], m_held);
        s += hsum(v[i]);
#endif
    }
    float m = m_held;
    for (uint idx = held + lane; idx < p.n; idx += width) {
        VT u = row_load(xr, idx);
        float grown = max(m, hmax(u));
        s = s * scale_from(m, grown) + hsum(exp_from(u, grown));
        m = grown;
    }

    float row_m = row_max(m);
    float row_s = row_add(s * scale_from(m, row_m));

    ROW_ARRAY yr = row_ptr(p.y, row, p.d);
#if LOG == 1
    float log_s = log(row_s);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * width;
        if (idx < p.n) row_store(yr, idx, (v[i] - row_m) - log_s);
    }
    for (uint idx = held + lane; idx < p.n; idx += width) row_store(yr, idx, (row_load(xr, idx) - row_m) - log_s);
#else
    float inv = 1.0 / row_s;
    float held_scale = scale_from(m_held, row_m) * inv;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * width;
        if (idx < p.n) row_store(yr, idx, v[i] * held_scale);
    }
    for (uint idx = held + lane; idx < p.n; idx += width) row_store(yr, idx, exp_from(row_load(xr, idx), row_m) * inv);
#endif
}

void main() { for_each_row(p.groups_x, p.rows); }
