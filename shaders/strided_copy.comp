#version 450
// dst[i] = src[i] for every element i of a shape, both sides read and written through
// their own strides (element offsets folded into the addresses); with FILL=1,
// dst[i] = value. The caller collapses dimensions that are contiguous with each other on
// both sides first, so most views reach here with one to three dimensions; sizes and
// strides are 32-bit. Each thread moves ELEMS elements spaced a workgroup apart, in the
// shape's row-major order, so a contiguous side is accessed coalesced.
#include "common/buffers.glsl"

#ifndef FILL
#define FILL 0
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ELEMS = 4;

layout(push_constant) uniform Params {
    uint64_t src;      // FILL: the value's bits in the low word
    uint64_t dst;
    uint64_t n;        // elements
    uint ndim;
    uint groups_x;
    uint size[8];
    uint src_stride[8];
    uint dst_stride[8];
} p;

void main() {
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t first = group * uint64_t(gl_WorkGroupSize.x * ELEMS) + gl_LocalInvocationID.x;
    for (uint e = 0; e < ELEMS; ++e) {
        uint64_t i = first + uint64_t(e * gl_WorkGroupSize.x);
        if (i >= p.n) return;
        uint64_t s = 0ul, d = 0ul;
        if (p.n <= 0xfffffffful) {
            uint r = uint(i);
            for (int k = int(p.ndim) - 1; k >= 0; --k) {
                uint c = r % p.size[k];
                r /= p.size[k];
                s += uint64_t(c) * p.src_stride[k];
                d += uint64_t(c) * p.dst_stride[k];
            }
        } else {
            uint64_t r = i;
            for (int k = int(p.ndim) - 1; k >= 0; --k) {
                uint64_t c = r % uint64_t(p.size[k]);
                r /= uint64_t(p.size[k]);
                s += c * p.src_stride[k];
                d += c * p.dst_stride[k];
            }
        }
#if FILL
        FloatArray(p.dst + d * 4ul).v[0] = uintBitsToFloat(uint(p.src));
#else
        FloatArray(p.dst + d * 4ul).v[0] = FloatArray(p.src + s * 4ul).v[0];
#endif
    }
}
