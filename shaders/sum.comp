#version 450
// sum (and mean) over the last dimension: y[row] = sum(x[row, :]) / divisor, one
// workgroup or one subgroup per row (common/rows.glsl; divisor 1 for sum, d for mean).
// Accuracy: each thread adds its share of the row (every width-th vector) with compensated
// (Kahan) summation per component, so a thread's error stays near one rounding however
// long the row; the threads' results then meet in a tree (vector components pairwise,
// subgroup operations, then the subgroup partials). The error is a few roundings of
// sum(|x|) where a plain float32 loop would lose about one rounding per element.
// `precise` keeps the compiler from fusing or reassociating the compensation away.
// Non-finite values: an inf entry, or a share whose sum overflows, makes the compensation
// inf - inf = NaN. So a thread whose compensated result is not finite (a rare, cold path
// outside the loop) adds its share again plainly: +-inf entries and overflow then give
// +-inf, inf with -inf or any NaN gives NaN, as PyTorch's float32 sum does.
#include "common/buffers.glsl"
#include "common/rows.glsl"


layout(push_constant) uniform Params {
    uint64_t x, y;
    uint64_t rows;
    uint n;          // vectors per row (d / VEC)
    uint d;          // elements per row
    float divisor;
    uint groups_x;   // width of the grid, for 2-D folding
} p;

const uint UNROLL = 4;   // loads in flight per thread

void process_row(uint64_t row, uint lane, uint width) {
    ROW_ARRAY xr = row_ptr(p.x, row, p.d);
    precise VT s = VT(0.0);
    precise VT c = VT(0.0);      // the low part lost so far, negated
    for (uint base = lane; base < p.n; base += width * UNROLL) {
        VT u[UNROLL];
        for (uint i = 0; i < UNROLL; ++i) {
            uint idx = base + i * width;
            u[i] = idx < p.n ? xr.v[idx] : VT(0.0);
        }
        for (uint i = 0; i < UNROLL; ++i) {
            precise VT yv = u[i] - c;
            precise VT t = s + yv;
            c = (t - s) - yv;
            s = t;
        }
    }
    float part = hsum(s - c);
    if ((floatBitsToUint(part) & 0x7f800000u) == 0x7f800000u) {   // inf or NaN
        VT plain = VT(0.0);
        for (uint idx = lane; idx < p.n; idx += width) plain += xr.v[idx];
        part = hsum(plain);
    }
    float total = row_add(part);
    if (row_leader()) FloatArray(p.y + row * 4ul).v[0] = total / p.divisor;
}

void main() { for_each_row(p.groups_x, p.rows); }
