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
// Rows whose d is not a multiple of 4 take VEC = 4 with ANY_D = 1 (common/rows.glsl): the
// aligned vectors that cover the row, lanes outside it -inf on the way in and unwritten on
// the way out. The streamed part goes STREAM vectors per thread per step, their loads all
// issued before any is used (indices clamped to the row's last vector instead of a branch
// per load) and one rescale of the running sum per step.
#extension GL_EXT_control_flow_attributes : require
#include "common/buffers.glsl"
#include "common/rows.glsl"

layout(constant_id = 1) const uint ITEMS = 1;   // vectors per thread held in registers
// Vectors per thread per streamed step (at least 1): 4, or 1 where the host knows every
// row is held (so the step's registers do not count against the held ones).
layout(constant_id = 3) const uint STREAM = 4;

// Split form (splits > 1, a workgroup per row): each row as `splits` chunks of `chunk`
// vectors, a workgroup per chunk, in two dispatches: STATS_OUT writes each chunk's (max,
// sum of exp(x - max)) to st; STATS_IN combines a row's pairs (splits <= the workgroup)
// and writes the chunk's outputs, reading it again. Few long rows then fill the device.
const uint STATS_OUT = 1u, STATS_IN = 2u;

layout(push_constant) uniform Params {
    uint64_t x, y;
    uint64_t rows;
    uint n;          // vectors per row (d / VEC; with ANY_D unused: each row counts its own)
    uint d;          // elements per row
    uint groups_x;   // width of the grid, for 2-D folding
    uint chunk;      // split form: vectors per chunk
    uint64_t st;     // split form: float (max, sum) pairs, [rows][splits]
    uint splits;     // 1: a row per workgroup or subgroup
    uint flags;      // split form: STATS_OUT or STATS_IN
} p;

// exp(v - m); where the max m is -inf (the thread saw only -inf, padding, or NaN that max
// dropped) it takes m as 0, so -inf gives 0 rather than exp(NaN) and NaN stays NaN.
VT exp_from(VT v, float m) { return exp(v - VT(m == NEG_INF ? 0.0 : m)); }
float scale_from(float m, float to) { return m == NEG_INF ? 0.0 : exp(m - to); }

// One row's vectors: vector idx (< count, or clamped to the last and read as -inf
// beyond), and the store of vector idx < count.
struct RowView { uint64_t x, y; uint skew, count; };

RowView row_view(uint64_t row) {
    RowView r;
#if ANY_D
    r.x = row_vec_base(p.x, row, p.d);
    r.y = row_vec_base(p.y, row, p.d);
    r.skew = row_skew(row, p.d);
    r.count = row_vectors(r.skew, p.d);
#else
    r.x = uint64_t(row_ptr(p.x, row, p.d));
    r.y = uint64_t(row_ptr(p.y, row, p.d));
    r.skew = 0u;
    r.count = p.n;
#endif
    return r;
}

VT view_load(RowView r, uint idx) {
    VT v = row_load(ROW_ARRAY(r.x), min(idx, r.count - 1u));
#if ANY_D
    return row_mask(r.skew, p.d, idx, v, NEG_INF);
#else
    return idx < r.count ? v : VT(NEG_INF);
#endif
}

void view_store(RowView r, uint idx, VT v) {
#if ANY_D
    row_store_masked(r.y, r.skew, p.d, idx, v);
#else
    row_store(ROW_ARRAY(r.y), idx, v);
#endif
}

#if LOG == 1
VT result(VT x, float row_m, float log_s, float inv) { return (x - row_m) - log_s; }
#else
VT result(VT x, float row_m, float log_s, float inv) { return exp_from(x, row_m) * inv; }
#endif

// v where idx < hi, else -inf: a select, not a branch, so a step's loads go out together.
#if VEC == 4
VT below(uint idx, uint hi, VT v) { return mix(VT(NEG_INF), v, bvec4(idx < hi)); }
#else
VT below(uint idx, uint hi, VT v) { return mix(NEG_INF, v, idx < hi); }
#endif

// Online (max, sum) over this thread's vectors lo + lane, lo + lane + width, ... below hi,
// STREAM per step, their loads issued before any is used, one rescale of s per step.
void stream_stats(RowView r, uint lo, uint hi, uint lane, uint width, inout float m, inout float s) {
    for (uint first = lo + lane; first < hi; first += width * STREAM) {
        VT u[STREAM];
        float step_m = m;
        [[unroll]] for (uint k = 0u; k < STREAM; ++k) {
            uint idx = first + k * width;
            u[k] = below(idx, hi, view_load(r, idx));
            step_m = max(step_m, hmax(u[k]));
        }
        float add = 0.0;
        [[unroll]] for (uint k = 0u; k < STREAM; ++k) add += hsum(exp_from(u[k], step_m));
        s = s * scale_from(m, step_m) + add;
        m = step_m;
    }
}

// Outputs of this thread's vectors of [lo, hi) read again, STREAM read before any is
// written (in place each element is read and written by this thread alone).
void stream_write(RowView r, uint lo, uint hi, uint lane, uint width, float row_m, float row_s) {
    float log_s = log(row_s), inv = 1.0 / row_s;
    for (uint first = lo + lane; first < hi; first += width * STREAM) {
        VT u[STREAM];
        [[unroll]] for (uint k = 0u; k < STREAM; ++k) u[k] = view_load(r, first + k * width);
        [[unroll]] for (uint k = 0u; k < STREAM; ++k) {
            uint idx = first + k * width;
            if (idx < hi) view_store(r, idx, result(u[k], row_m, log_s, inv));
        }
    }
}

void process_row(uint64_t row, uint lane, uint width) {
    RowView r = row_view(row);
    uint held = min(width * ITEMS, r.count);

    VT v[ITEMS];
    float m_held = NEG_INF;
    for (uint i = 0; i < ITEMS; ++i) {
        v[i] = view_load(r, lane + i * width);
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
    stream_stats(r, held, r.count, lane, width, m, s);

    float row_m = row_max(m);
    float row_s = row_add(s * scale_from(m, row_m));

#if LOG == 1
    float log_s = log(row_s);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * width;
        if (idx < r.count) view_store(r, idx, (v[i] - row_m) - log_s);
    }
#else
    float held_scale = scale_from(m_held, row_m) * (1.0 / row_s);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * width;
        if (idx < r.count) view_store(r, idx, v[i] * held_scale);
    }
#endif
    stream_write(r, held, r.count, lane, width, row_m, row_s);
}

// One chunk of a row in the split form (a workgroup; uniform control flow).
void process_chunk(uint64_t g) {
    uint64_t row = g / uint64_t(p.splits);
    uint c = uint(g % uint64_t(p.splits));
    RowView r = row_view(row);
    uint lo = min(c * p.chunk, r.count), hi = min(lo + p.chunk, r.count);
    uint lane = gl_LocalInvocationID.x;
    FloatArray st = FloatArray(p.st + row * uint64_t(p.splits) * 8ul);
    if (p.flags == STATS_OUT) {
        float m = NEG_INF, s = 0.0;
        stream_stats(r, lo, hi, lane, WG, m, s);
        float chunk_m = group_max(m);
        float chunk_s = group_add(s * scale_from(m, chunk_m));
        if (lane == 0u) {
            st.v[2u * c] = chunk_m;
            st.v[2u * c + 1u] = chunk_s;
        }
        return;
    }
    // The row's (max, sum) from its chunks' pairs, a pair per thread.
    float m = lane < p.splits ? st.v[2u * lane] : NEG_INF;
    float s = lane < p.splits ? st.v[2u * lane + 1u] : 0.0;
    float row_m = group_max(m);
    float row_s = group_add(s * scale_from(m, row_m));
    stream_write(r, lo, hi, lane, WG, row_m, row_s);
}

void main() {
    if (p.splits > 1u) {
        uint64_t g = row_index(p.groups_x);
        if (g < p.rows * uint64_t(p.splits)) process_chunk(g);   // uniform
        return;
    }
    for_each_row(p.groups_x, p.rows);
}
