#version 450
// LayerNorm forward, tile form (see common/layer_norm.glsl), for many short rows of any
// D: a workgroup takes ROWS consecutive rows, which are one contiguous run of the
// flattened tensor, and moves it through shared memory. It reads the aligned 16-byte
// units (vec4s; with DT, 8 float16 or bfloat16 elements) that cover the run (every
// thread ITEMS of them, all in flight, adjacent threads adjacent units), normalizes each
// row there with a segment of SEG lanes (SEG = 1: a lane per row), and writes the run
// back as whole units, per element only in the two units it shares with the
// neighbouring runs. So memory sees full-width accesses however short or oddly aligned
// the rows, where forms that give each row its own lanes read a vector per lane for a
// row of 2 elements and store partial vectors element by element.
//
// The covering units at the run's ends hold elements of the neighbouring runs: read,
// never used, never written (in place, their workgroups may be rewriting them). The
// statistics are the other forms' (corrected two-pass; a non-finite row takes the
// scaled statistics, here from shared memory), each row's sums in one segment's lanes
// in a fixed order.
#include "common/layer_norm.glsl"

layout(constant_id = 3) const uint SEG = 1;   // lanes per row: a power of two <= WG
const uint UNIT = DT == 0 ? 4u : 8u;          // elements per 16-byte unit of memory
const uint TILE = WG * ITEMS * (UNIT / 4u);   // vec4s the run may cover
const uint SEGS = WG / SEG;                   // rows normalized at once
shared vec4 tile[TILE];
shared uint any_bad;

float tile_at(uint e) { return tile[e >> 2][e & 3u]; }
void tile_set(uint e, float v) { tile[e >> 2][e & 3u] = v; }

// Unit u of x into the tile, from the tile to unit u of y, one element k of y; a
// parameter element (weight, bias: x's dtype).
#if DT == 0
void load_unit(uint64_t u0, uint u) { tile[u] = Vec4Array(p.x + u0 * 16ul).v[u]; }
void store_unit(uint64_t u0, uint u) { Vec4Array(p.y + u0 * 16ul).v[u] = tile[u]; }
void store_one(uint64_t e, float v) { FloatArray(p.y + e * 4ul).v[0] = v; }
float param_at(uint64_t addr, float absent, uint k) { return addr != 0ul ? ParamFloat(addr).v[k] : absent; }
#else
layout(buffer_reference, std430, buffer_reference_align = 16) buffer HalfUnit { HALF4 a, b; };
void load_unit(uint64_t u0, uint u) {
    HalfUnit h = HalfUnit(p.x + (u0 + u) * 16ul);
    tile[2u * u] = half_to_float(h.a);
    tile[2u * u + 1u] = half_to_float(h.b);
}
void store_unit(uint64_t u0, uint u) {
    HalfUnit h = HalfUnit(p.y + (u0 + u) * 16ul);
    h.a = float_to_half(tile[2u * u]);
    h.b = float_to_half(tile[2u * u + 1u]);
}
void store_one(uint64_t e, float v) { HalfArray1(p.y + e * 2ul).v[0] = float_to_half(v); }
float param_at(uint64_t addr, float absent, uint k) { return addr != 0ul ? half_to_float(HalfArray1(addr).v[k]) : absent; }
#endif

// Sums (and maxima) over a segment through `partials`: every lane adds its segment's
// values in the same order, so all of them see the identical result. Called by every
// thread of the workgroup alike.
vec2 seg_sum2(vec2 v) {
    if (SEG == 1u) return v;
    uint tid = gl_LocalInvocationID.x;
    partials[tid] = v;
    barrier();
    vec2 t = vec2(0.0);
    for (uint i = tid - tid % SEG, end = i + SEG; i < end; ++i) t += partials[i];
    barrier();
    return t;
}
float seg_max(float v) {
    if (SEG == 1u) return v;
    uint tid = gl_LocalInvocationID.x;
    partials[tid] = vec2(v, 0.0);
    barrier();
    float t = 0.0;
    for (uint i = tid - tid % SEG, end = i + SEG; i < end; ++i) t = max(t, partials[i].x);
    barrier();
    return t;
}

float exponent_of(float v) { return float((floatBitsToUint(v) >> 23) & 0xffu); }

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint r0 = group_index() * ROWS;
    if (r0 >= p.rows) return;   // uniform
    uint nrows = min(ROWS, p.rows - r0);
    uint64_t e0 = uint64_t(r0) * uint64_t(p.d);
    uint64_t e1 = e0 + uint64_t(nrows) * uint64_t(p.d);
    uint64_t v0 = e0 / UNIT;
    uint nv = uint((e1 - 1ul) / UNIT - v0) + 1u;    // units, <= WG * ITEMS (the host's ROWS)
    uint o = uint(e0 - v0 * UNIT);                   // the run's first element in the tile

    for (uint i = 0u; i < ITEMS; ++i) {
        uint v = tid + i * WG;
        if (v < nv) load_unit(v0, v);
    }
    if (tid == 0u) any_bad = 0u;
    barrier();

    uint seg = tid / SEG, lane = tid % SEG;
    float fd = float(p.d);
    for (uint base = 0u; base < nrows; base += SEGS) {   // uniform
        uint j = base + seg;
        bool live = j < nrows;
        uint at = o + j * p.d;
        uint end = live ? at + p.d : at;                 // no elements past the last row
        float s = 0.0;
        for (uint e = at + lane; e < end; e += SEG) s += tile_at(e);
        float m0 = seg_sum2(vec2(s, 0.0)).x / fd;
        vec2 q = vec2(0.0);
        for (uint e = at + lane; e < end; e += SEG) { float r = tile_at(e) - m0; q += vec2(r, r * r); }
        q = seg_sum2(q);
        vec2 st = finish_stats(q);
        // y = (((x * sc) - m0) - c) * a * b, mean and invstd: exact statistics, or below.
        float sc = 1.0, c = st.x, a = 1.0, b = st.y, mean = m0 + st.x, invstd = st.y;
        bool bad = live && !is_finite(q.y);
        // Whether a row of this batch is NaN, inf or overflows: a lane's own row where it
        // has the row alone (no reduction to keep in step), else uniform over the
        // workgroup through a flag holding the last batch with such a row (+1). A thread
        // writes the next batch's value only after that batch's first segment sum, whose
        // barrier every thread passes after reading this one's.
        bool rescale = bad;
        if (SEG > 1u) {
            if (bad) any_bad = base + 1u;
            barrier();
            rescale = any_bad == base + 1u;
        }
        if (rescale) {
            // common/layer_norm.glsl's scaled_stats, over the row in shared memory.
            float em = 0.0;
            for (uint e = at + lane; e < end; e += SEG) em = max(em, exponent_of(tile_at(e)));
            int ex = clamp(int(seg_max(em)) - 127, 0, 126);
            float scale = pow2(-ex);
            float s1 = 0.0;
            for (uint e = at + lane; e < end; e += SEG) { precise float xs = tile_at(e) * scale; s1 += xs; }
            float ms0 = seg_sum2(vec2(s1, 0.0)).x / fd;
            float s2 = 0.0;
            for (uint e = at + lane; e < end; e += SEG) { precise float xs = tile_at(e) * scale; s2 += xs - ms0; }
            float mean_s = ms0 + seg_sum2(vec2(s2, 0.0)).x / fd;
            float s3 = 0.0;
            for (uint e = at + lane; e < end; e += SEG) { precise float xs = tile_at(e) * scale; float r = xs - mean_s; s3 += r * r; }
            float var_s = seg_sum2(vec2(s3, 0.0)).x / fd;
            if (bad) {
                sc = scale; m0 = mean_s; c = 0.0;
                if (!is_finite(ms0)) {   // NaN or +-inf in the row
                    const float nan = uintBitsToFloat(0x7fc00000u);
                    m0 = 0.0; a = 1.0; b = nan; mean = ms0 * pow2(ex); invstd = nan;
                } else {
                    mean = mean_s * pow2(ex);
                    float ve = var_s * pow2(ex) * pow2(ex) + p.eps;
                    if (is_finite(ve)) {
                        a = pow2(ex); b = invsqrt_refined(ve); invstd = b;
                    } else {
                        a = 1.0; b = invsqrt_refined(var_s + p.eps * pow2(-ex) * pow2(-ex));
                        invstd = b * pow2(-ex);
                    }
                }
            }
        }
        for (uint e = at + lane, k = lane; e < end; e += SEG, k += SEG) {
            precise float xs = tile_at(e) * sc;
            float y = (((xs - m0) - c) * a) * b;
            tile_set(e, fma(y, param_at(p.weight, 1.0, k), param_at(p.bias, 0.0, k)));
        }
        if (live && lane == 0u) store_stats(r0 + j, mean, invstd);
    }
    barrier();

    for (uint i = 0u; i < ITEMS; ++i) {
        uint v = tid + i * WG;
        if (v >= nv) continue;
        uint64_t first = (v0 + uint64_t(v)) * UNIT;   // the unit's first element
        if (first >= e0 && first + UNIT <= e1) {
            store_unit(v0, v);
        } else {
            for (uint k = 0u; k < UNIT; ++k)
                if (first + k >= e0 && first + k < e1) store_one(first + k, tile_at(v * UNIT + k));
        }
    }
}
