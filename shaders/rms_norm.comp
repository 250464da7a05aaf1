#version 450
// RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps) * weight, one workgroup or
// one subgroup per row (common/rows.glsl), float32 math for every storage dtype. The first
// width * ITEMS vectors of the row are held in registers; a longer row streams the rest
// and reads it again for y. NaN or inf in the row makes its mean square NaN or inf, hence
// (as PyTorch's float32 formula) y NaN, or 0 for finite entries of a row whose mean square
// overflows. In place (y == x) is safe: each element is read before the same thread writes it.
#include "common/buffers.glsl"
#include "common/rows.glsl"

layout(constant_id = 1) const uint ITEMS = 1;   // vectors per thread held in registers

layout(push_constant) uniform Params {
    uint64_t x, y, w;   // w == 0: no weight
    uint64_t rows;
    uint n;             // vectors per row (d / VEC)
    uint d;             // elements per row
    uint groups_x;      // width of the grid, for 2-D folding
    float eps;
} p;

VT weight_at(uint idx) {
    if (p.w == 0ul) return VT(1.0);
    return row_load(ROW_ARRAY(p.w), idx);
}

void process_row(uint64_t row, uint lane, uint width) {
    ROW_ARRAY xr = row_ptr(p.x, row, p.d);
    uint held = width * ITEMS;
    VT v[ITEMS];
    float s = 0.0;
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * width;
        v[i] = idx < p.n ? row_load(xr, idx) : VT(0.0);
        s += hsum(v[i] * v[i]);
    }
    for (uint idx = held + lane; idx < p.n; idx += width) {
        VT u = row_load(xr, idx);
        s += hsum(u * u);
    }
    float r = inversesqrt(row_add(s) / float(p.d) + p.eps);
    ROW_ARRAY yr = row_ptr(p.y, row, p.d);
    for (uint i = 0; i < ITEMS; ++i) {
        uint idx = lane + i * width;
        if (idx < p.n) row_store(yr, idx, v[i] * r * weight_at(idx));
    }
    for (uint idx = held + lane; idx < p.n; idx += width) row_store(yr, idx, row_load(xr, idx) * r * weight_at(idx));
}

void main() { for_each_row(p.groups_x, p.rows); }
