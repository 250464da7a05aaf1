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
// VEC == 4 (inner a multiple of 4; x and y plain, so 16-byte aligned): each thread takes
// 4 adjacent columns, one load of 4 elements per row, as if inner were inner / 4 columns
// of vec4s (p.inner counts those units). Each thread keeps UNROLL loads in flight.
// HELD == 1 (one dispatch; chunk <= LANES * HOLD, chosen by the host from the shape): each
// thread loads its at most HOLD rows of the column once into registers, takes the
// statistics from them and writes the outputs from them, so x is read once (the
// streaming form reads it twice: the second read misses L2 once the columns in flight
// outgrow it).
// In place (y == x) is safe: each element is read for the statistics, then read again
// (or taken from registers) and written by the same thread.
#include "common/buffers.glsl"
#include "common/reduce_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint COLS = 1;   // a power of two dividing WG
const uint WG = gl_WorkGroupSize.x;
const uint LANES = WG / COLS;
layout(constant_id = 2) const uint HELD = 0;   // 1: rows held in registers (see above)
const uint UNROLL = 4;   // loads in flight per thread
const uint HOLD = 16;    // rows (units) per thread in the held form: src/ops/softmax.c's SOFTMAX_COLS_HOLD
#define NEG_INF uintBitsToFloat(0xff800000u)
#define STATE_IN 1u
#define STATE_OUT 2u

#if VEC == 4
#define VT vec4
#define IS_NEG_INF(m) equal(m, vec4(NEG_INF))
layout(buffer_reference, std430, buffer_reference_align = 16) buffer PairArray { vec4 m, s; };
#if DT == 1
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Half4Array { f16vec4 v[]; };
VT load_unit(uint64_t base, uint64_t at) { return vec4(Half4Array(base + at * 8ul).v[0]); }
void store_unit(uint64_t base, uint64_t at, VT v) { Half4Array(base + at * 8ul).v[0] = f16vec4(v); }
#elif DT == 2
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Bf4Array { u16vec4 v[]; };
VT load_unit(uint64_t base, uint64_t at) { return uintBitsToFloat(uvec4(Bf4Array(base + at * 8ul).v[0]) << 16); }
void store_unit(uint64_t base, uint64_t at, VT v) {
    uvec4 b = floatBitsToUint(v);
    // NaN stays a (quiet) NaN; others round to nearest even (as store_elem).
    uvec4 rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    uvec4 r = mix(rounded, (b >> 16) | 0x40u, greaterThan(b & 0x7fffffffu, uvec4(0x7f800000u)));
    Bf4Array(base + at * 8ul).v[0] = u16vec4(r);
}
#else
VT load_unit(uint64_t base, uint64_t at) { return Vec4Array(base + at * 16ul).v[0]; }
void store_unit(uint64_t base, uint64_t at, VT v) { Vec4Array(base + at * 16ul).v[0] = v; }
#endif
#else
#define VT float
#define IS_NEG_INF(m) ((m) == NEG_INF)
layout(buffer_reference, std430, buffer_reference_align = 8) buffer PairArray { float m, s; };
VT load_unit(uint64_t base, uint64_t at) { return load_elem(base, at); }
void store_unit(uint64_t base, uint64_t at, VT v) { store_elem(base, at, v); }
#endif
const uint PAIR_BYTES = VEC == 4 ? 32 : 8;

layout(push_constant) uniform Params {
    uint64_t x, y;
    uint64_t st;         // per-chunk (max, sum) pairs, [outer, splits, inner] (splits > 1)
    uint outer, r, inner;   // inner in units (VEC columns)
    uint chunk;          // rows of r per split
    uint splits;
    uint flags;          // 0 (one dispatch), STATE_OUT or STATE_IN
    uint col_groups;     // ceil(outer * inner / COLS)
    uint groups_x;
} p;

// exp(v - m); where the max m is -inf (only -inf so far, or NaN that max dropped) it
// takes m as 0, so -inf gives 0 rather than exp(NaN) and NaN stays NaN.
VT exp_from(VT v, VT m) { return exp(v - mix(m, VT(0.0), IS_NEG_INF(m))); }
VT scale_from(VT m, VT to) { return mix(exp(m - to), VT(0.0), IS_NEG_INF(m)); }

shared VT sh_m[WG];
shared VT sh_s[WG];

// (mo, so) into (m, s), each sum scaled to the larger max.
void merge(inout VT m, inout VT s, VT mo, VT so) {
    VT mm = max(m, mo);
    s = s * scale_from(m, mm) + so * scale_from(mo, mm);
    m = mm;
}

void main() {
    uint64_t g = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t total = uint64_t(p.col_groups) * p.splits;
    if (g >= total) return;   // whole workgroup
    // The second dispatch of a split takes the chunks in reverse: workgroups start
    // roughly in grid order, so its first ones re-read what the first dispatch read last,
    // still in L2 (the tail of x that fits), instead of what left L2 first.
    if ((p.flags & STATE_IN) != 0u) g = total - 1ul - g;
    uvec2 cs = div_mod(g, p.splits);
    uint cg = cs.x, split = cs.y;
    uint t = gl_LocalInvocationID.x;
    uint64_t q = uint64_t(cg) * COLS + t % COLS;   // the column: (o, c) flattened
    uint lane = t / COLS;
    bool valid = q < uint64_t(p.outer) * p.inner;
    uvec2 oc = valid ? div_mod(q, p.inner) : uvec2(0u);
    uint o = oc.x, c = oc.y;
    uint64_t col = uint64_t(o) * p.r * p.inner + c;
    uint r0 = split * p.chunk;
    uint r1 = min(r0 + p.chunk, p.r);
    uint64_t st_col = uint64_t(o) * p.splits * p.inner + c;   // pair of chunk 0

    VT m = VT(NEG_INF), s = VT(0.0);
    VT held[HOLD];
    if (HELD != 0u) {
        // Missing rows as -inf: they change neither the max nor the sum. A NaN that max
        // drops still reaches s through exp(NaN - m); +inf through exp(inf - inf).
        for (uint k = 0; k < HOLD; ++k) {
            uint rk = r0 + lane + k * LANES;
            held[k] = valid && rk < r1 ? load_unit(p.x, col + uint64_t(rk) * p.inner) : VT(NEG_INF);
        }
        for (uint k = 0; k < HOLD; ++k) m = max(m, held[k]);
        for (uint k = 0; k < HOLD; ++k) s += exp_from(held[k], m);
    } else if (valid && (p.flags & STATE_IN) != 0u) {
        for (uint k = lane; k < p.splits; k += LANES) {
            PairArray pr = PairArray(p.st + (st_col + uint64_t(k) * p.inner) * PAIR_BYTES);
            merge(m, s, pr.m, pr.s);
        }
    } else if (valid) {
        for (uint r = r0 + lane; r < r1; r += LANES * UNROLL) {
            // UNROLL rows at once (missing ones as -inf, which change nothing): one
            // rescale of the sum per block. A NaN that max drops still reaches s
            // through exp(NaN - grown); +inf through exp(inf - inf).
            VT u[UNROLL];
            for (uint k = 0; k < UNROLL; ++k) {
                uint rk = r + k * LANES;
                u[k] = rk < r1 ? load_unit(p.x, col + uint64_t(rk) * p.inner) : VT(NEG_INF);
            }
            VT grown = m;
            for (uint k = 0; k < UNROLL; ++k) grown = max(grown, u[k]);
            s *= scale_from(m, grown);
            for (uint k = 0; k < UNROLL; ++k) s += exp_from(u[k], grown);
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
    VT row_m = sh_m[t0], row_s = sh_s[t0];
    if (!valid) return;
    if ((p.flags & STATE_OUT) != 0u) {
        if (lane == 0u) {
            PairArray pr = PairArray(p.st + (st_col + uint64_t(split) * p.inner) * PAIR_BYTES);
            pr.m = row_m;
            pr.s = row_s;
        }
        return;
    }
#if LOG == 1
    VT log_s = log(row_s);
#else
    VT inv = 1.0 / row_s;
#endif
    if (HELD != 0u) {
        for (uint k = 0; k < HOLD; ++k) {
            uint rk = r0 + lane + k * LANES;
#if LOG == 1
            if (rk < r1) store_unit(p.y, col + uint64_t(rk) * p.inner, (held[k] - row_m) - log_s);
#else
            if (rk < r1) store_unit(p.y, col + uint64_t(rk) * p.inner, exp_from(held[k], row_m) * inv);
#endif
        }
        return;
    }
    for (uint r = r0 + lane; r < r1; r += LANES * UNROLL) {
        VT u[UNROLL];
        for (uint k = 0; k < UNROLL; ++k) {
            uint rk = r + k * LANES;
            if (rk < r1) u[k] = load_unit(p.x, col + uint64_t(rk) * p.inner);
        }
        for (uint k = 0; k < UNROLL; ++k) {
            uint rk = r + k * LANES;
#if LOG == 1
            if (rk < r1) store_unit(p.y, col + uint64_t(rk) * p.inner, (u[k] - row_m) - log_s);
#else
            if (rk < r1) store_unit(p.y, col + uint64_t(rk) * p.inner, exp_from(u[k], row_m) * inv);
#endif
        }
    }
}
