#version 450
// softmax (LOG == 0) or log_softmax (LOG == 1) over a dimension that is not the last: x
// read as [outer, r, inner], the softmax taken along r for each (outer, inner) column.
// A workgroup takes COLS adjacent columns (o, c), flattened as o * inner + c, its WG
// threads as COLS columns by LANES = WG / COLS lanes (as shaders/reduce.comp; inner == 1:
// COLS short rows per workgroup): thread (column, lane)
// walks rows lane, lane + LANES, ... with a running max and a sum rescaled when the max
// grows (online softmax), so each step of a lane's COLS threads reads adjacent elements.
// The lanes' (max, sum) pairs meet in a fixed tree in shared memory (each sum scaled by
// exp(its max - the larger max) <= 1), then each thread re-reads its rows and writes
// exp(x - M) / S, or (x - M) - log(S) for log_softmax (no exp to underflow).
// Non-finite entries as shaders/softmax.comp and PyTorch: -inf entries give 0 (log: -inf);
// a column with NaN or +inf, or of only -inf, gives all NaN.
// Few columns with a long r: r is split into chunks over workgroups (splits > 1). A first
// dispatch (STATE_OUT) writes each chunk's (max, sum) per column; the second (STATE_IN)
// has each workgroup of a chunk merge all of its columns' chunk pairs (lanes over the
// chunks, then the same fixed tree: every workgroup of a column gets the same M and S,
// so results stay deterministic) and write that chunk's outputs.
// In place (y == x) is safe: each element is read for the statistics, then read again
// and written by the same thread.
#include "common/buffers.glsl"
#include "common/reduce_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint COLS = 1;   // a power of two dividing WG
const uint WG = gl_WorkGroupSize.x;
const uint LANES = WG / COLS;
#define NEG_INF uintBitsToFloat(0xff800000u)

#define STATE_IN 1u
#define STATE_OUT 2u

layout(buffer_reference, std430, buffer_reference_align = 8) buffer PairArray { vec2 v[]; };

layout(push_constant) uniform Params {
    uint64_t x, y;
    uint64_t st;         // per-chunk (max, sum) pairs, [outer, splits, inner] (splits > 1)
    uint outer, r, inner;
    uint chunk;          // rows of r per split
    uint splits;
    uint flags;          // 0 (one dispatch), STATE_OUT or STATE_IN
    uint col_groups;     // ceil(outer * inner / COLS)
    uint groups_x;
} p;

float exp_from(float v, float m) { return exp(v - (m == NEG_INF ? 0.0 : m)); }
float scale_from(float m, float to) { return m == NEG_INF ? 0.0 : exp(m - to); }

shared float sh_m[WG];
shared float sh_s[WG];

// (mo, so) into (m, s), each sum scaled to the larger max.
void merge(inout float m, inout float s, float mo, float so) {
    float mm = max(m, mo);
    s = s * scale_from(m, mm) + so * scale_from(mo, mm);
    m = mm;
}

void main() {
    uint64_t g = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    if (g >= uint64_t(p.col_groups) * p.splits) return;   // whole workgroup
    uint split = uint(g % p.splits);
    uint cg = uint(g / p.splits);
    uint t = gl_LocalInvocationID.x;
    uint64_t q = uint64_t(cg) * COLS + t % COLS;   // the column: (o, c) flattened
    uint lane = t / COLS;
    bool valid = q < uint64_t(p.outer) * p.inner;
    uint o = valid ? uint(q / p.inner) : 0u;
    uint c = valid ? uint(q % p.inner) : 0u;
    uint64_t col = uint64_t(o) * p.r * p.inner + c;
    uint r0 = split * p.chunk;
    uint r1 = min(r0 + p.chunk, p.r);
    uint64_t st_col = uint64_t(o) * p.splits * p.inner + c;   // pair of chunk 0

    float m = NEG_INF, s = 0.0;
    if (valid && (p.flags & STATE_IN) != 0u) {
        for (uint k = lane; k < p.splits; k += LANES) {
            vec2 ms = PairArray(p.st + (st_col + uint64_t(k) * p.inner) * 8ul).v[0];
            merge(m, s, ms.x, ms.y);
        }
    } else if (valid) {
        for (uint r = r0 + lane; r < r1; r += LANES) {
            float v = load_elem(p.x, col + uint64_t(r) * p.inner);
            float grown = max(m, v);
            s = s * scale_from(m, grown) + exp_from(v, grown);
            m = grown;
        }
    }
    sh_m[t] = m; sh_s[t] = s;
    for (uint step = LANES / 2; step > 0; step >>= 1) {
        barrier();
        if (lane < step) {
            uint u = t + step * COLS;
            merge(m, s, sh_m[u], sh_s[u]);
            sh_m[t] = m; sh_s[t] = s;
        }
    }
    barrier();
    uint t0 = t % COLS;   // lane 0 of this column holds its statistics
    float row_m = sh_m[t0], row_s = sh_s[t0];
    if (!valid) return;
    if ((p.flags & STATE_OUT) != 0u) {
        if (lane == 0u) PairArray(p.st + (st_col + uint64_t(split) * p.inner) * 8ul).v[0] = vec2(row_m, row_s);
        return;
    }
#if LOG == 1
    float log_s = log(row_s);
    for (uint r = r0 + lane; r < r1; r += LANES) {
        uint64_t at = col + uint64_t(r) * p.inner;
        store_elem(p.y, at, (load_elem(p.x, at) - row_m) - log_s);
    }
#else
    float inv = 1.0 / row_s;
    for (uint r = r0 + lane; r < r1; r += LANES) {
        uint64_t at = col + uint64_t(r) * p.inner;
        store_elem(p.y, at, exp_from(load_elem(p.x, at), row_m) * inv);
    }
#endif
}
