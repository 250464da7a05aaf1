#version 450
// softmax (LOG == 0) or log_softmax (LOG == 1) over short rows of the last dimension,
// tile form: a workgroup takes ROWS consecutive rows (p.rows_per_group), one contiguous
// run of the flattened tensor, and moves it through shared memory as whole 16-byte units
// (4 float32 or 8 float16/bfloat16 elements; every thread ITEMS of them, all in flight,
// adjacent threads adjacent units). There a segment of SEG lanes takes each row (lanes
// consecutive within a subgroup, meeting by shuffles), each lane at most HOLD elements of
// it held in registers: the row's max M, the sum S of exp(x - M), and y = exp(x - M) / S
// or (x - M) - log(S) written back over x in shared memory. The run then goes back as
// whole units, element by element only in the two units it shares with the neighbouring
// runs. So memory sees full-width accesses however short or oddly aligned the rows,
// where the row kernel gives each row at least a subgroup (a row of 1 element: 1 of 32
// lanes busy).
// The units at the run's ends hold elements of the neighbouring runs: read, never used,
// never written (in place, their workgroups may be rewriting them); a unit past the
// tensor's last element is read element by element. Shared memory is skewed by one word
// per 32 (slot), so a lane per row of any length reads it with at most two-way bank
// conflicts and the unit-wide stores with none.
// Non-finite entries as shaders/softmax.comp and PyTorch: -inf gives 0 (log: -inf); a row
// with NaN or +inf, or of only -inf, gives all NaN. In place (y == x) is safe: a run is
// read in full before any of it is written, and runs do not overlap.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common/buffers.glsl"
#include "common/reduce_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ITEMS = 1;   // units per thread
layout(constant_id = 2) const uint SEG = 1;     // lanes per row: a power of two <= the subgroup
layout(constant_id = 3) const uint HOLD = 1;    // elements per lane: ceil(d / SEG) <= HOLD
const uint WG = gl_WorkGroupSize.x;
const uint UNIT = DT == 0 ? 4u : 8u;            // elements per 16-byte unit
const uint TILE = WG * ITEMS * UNIT;            // elements the run may cover
const uint SEGS = WG / SEG;                     // rows taken at once
#define NEG_INF uintBitsToFloat(0xff800000u)

#if DT == 1
layout(buffer_reference, std430, buffer_reference_align = 16) buffer UnitArray { f16vec4 a, b; };
#elif DT == 2
layout(buffer_reference, std430, buffer_reference_align = 16) buffer UnitArray { u16vec4 a, b; };
vec4 bf16_to_float(u16vec4 h) { return uintBitsToFloat(uvec4(h) << 16); }
u16vec4 float_to_bf16(vec4 v) {
    uvec4 b = floatBitsToUint(v);
    // NaN stays a (quiet) NaN; others round to nearest even (as store_elem).
    uvec4 r = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    return u16vec4(mix(r, (b >> 16) | 0x40u, greaterThan(b & 0x7fffffffu, uvec4(0x7f800000u))));
}
#endif

layout(push_constant) uniform Params {
    uint64_t x, y;
    uint rows;             // rows of the tensor
    uint d;                // elements per row: SEG * HOLD or fewer
    uint rows_per_group;   // ROWS: the run (ROWS * d + UNIT - 1 elements) fits TILE
    uint groups_x;         // width of the grid, for 2-D folding
} p;

shared float tile[TILE + TILE / 32u];
uint slot(uint e) { return e + (e >> 5); }

// The unit at unit index u (of the tensor) into tile elements t.. t + UNIT - 1.
void load_unit(uint64_t u, uint t) {
#if DT == 0
    vec4 v = Vec4Array(p.x + u * 16ul).v[0];
    for (uint k = 0u; k < 4u; ++k) tile[slot(t + k)] = v[k];
#else
    UnitArray a = UnitArray(p.x + u * 16ul);
#if DT == 1
    vec4 lo = vec4(a.a), hi = vec4(a.b);
#else
    vec4 lo = bf16_to_float(a.a), hi = bf16_to_float(a.b);
#endif
    for (uint k = 0u; k < 4u; ++k) { tile[slot(t + k)] = lo[k]; tile[slot(t + 4u + k)] = hi[k]; }
#endif
}

void store_unit(uint64_t u, uint t) {
    vec4 lo = vec4(tile[slot(t)], tile[slot(t + 1u)], tile[slot(t + 2u)], tile[slot(t + 3u)]);
#if DT == 0
    Vec4Array(p.y + u * 16ul).v[0] = lo;
#else
    vec4 hi = vec4(tile[slot(t + 4u)], tile[slot(t + 5u)], tile[slot(t + 6u)], tile[slot(t + 7u)]);
    UnitArray a = UnitArray(p.y + u * 16ul);
#if DT == 1
    a.a = f16vec4(lo); a.b = f16vec4(hi);
#else
    a.a = float_to_bf16(lo); a.b = float_to_bf16(hi);
#endif
#endif
}

// Max and sum over a segment by a butterfly of shuffles: every lane of it ends with the
// same value. Called by every thread alike (uniform control flow).
float seg_max(float v) {
    for (uint m = 1u; m < SEG; m <<= 1) v = max(v, subgroupShuffleXor(v, m));
    return v;
}
float seg_sum(float v) {
    for (uint m = 1u; m < SEG; m <<= 1) v += subgroupShuffleXor(v, m);
    return v;
}

// exp(v - m); where the max m is -inf (only -inf, or NaN that max dropped) it takes m as
// 0, so -inf gives 0 rather than exp(NaN) and NaN stays NaN.
float exp_from(float v, float m) { return exp(v - (m == NEG_INF ? 0.0 : m)); }

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint r0 = (gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * p.rows_per_group;
    if (r0 >= p.rows) return;   // whole workgroup
    uint nrows = min(p.rows_per_group, p.rows - r0);
    uint64_t e0 = uint64_t(r0) * p.d;
    uint64_t e1 = e0 + uint64_t(nrows) * p.d;
    uint64_t total = uint64_t(p.rows) * p.d;
    uint64_t u0 = e0 / UNIT;
    uint nu = uint((e1 - 1ul) / UNIT - u0) + 1u;   // <= WG * ITEMS (the host's ROWS)
    uint o = uint(e0 - u0 * UNIT);                 // the run's first element in the tile

    for (uint i = 0u; i < ITEMS; ++i) {
        uint u = tid + i * WG;
        if (u >= nu) continue;
        uint64_t first = (u0 + u) * UNIT;
        if (first + UNIT <= total) {
            load_unit(u0 + u, u * UNIT);
        } else {
            for (uint k = 0u; k < UNIT; ++k)
                if (first + k < total) tile[slot(u * UNIT + k)] = load_elem(p.x, first + k);
        }
    }
    barrier();

    uint seg = tid / SEG, lane = tid % SEG;
    for (uint base = 0u; base < nrows; base += SEGS) {   // uniform
        uint j = base + seg;
        uint at = o + j * p.d + lane;
        uint n = j < nrows ? p.d : 0u;                   // this row's elements, none past the run
        float v[HOLD];
        float m = NEG_INF;
        for (uint k = 0u; k < HOLD; ++k) {
            uint c = lane + k * SEG;
            v[k] = c < n ? tile[slot(at + k * SEG)] : NEG_INF;
            m = max(m, v[k]);
        }
        m = seg_max(m);
        // A NaN that max dropped still reaches s through exp(NaN - m); +inf through
        // exp(inf - inf).
        float s = 0.0;
        for (uint k = 0u; k < HOLD; ++k) {
            float e = exp_from(v[k], m);
#if LOG == 0
            v[k] = e;
#endif
            s += e;
        }
        s = seg_sum(s);
#if LOG == 1
        float log_s = log(s);
#else
        float inv = 1.0 / s;
#endif
        for (uint k = 0u; k < HOLD; ++k) {
            uint c = lane + k * SEG;
#if LOG == 1
            if (c < n) tile[slot(at + k * SEG)] = (v[k] - m) - log_s;
#else
            if (c < n) tile[slot(at + k * SEG)] = v[k] * inv;
#endif
        }
    }
    barrier();

    for (uint i = 0u; i < ITEMS; ++i) {
        uint u = tid + i * WG;
        if (u >= nu) continue;
        uint64_t first = (u0 + u) * UNIT;
        if (first >= e0 && first + UNIT <= e1) {
            store_unit(u0 + u, u * UNIT);
        } else {
            for (uint k = 0u; k < UNIT; ++k)
                if (first + k >= e0 && first + k < e1) store_elem(p.y, first + k, tile[slot(u * UNIT + k)]);
        }
    }
}
