#version 450
// dst[i] = start + i step for int32 dst, in exact integer arithmetic (the op checked
// that every value fits int32).
#include "common/buffers.glsl"

layout(local_size_x_id = 0) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer IntArray { int v[]; };

layout(push_constant) uniform Params {
    uint64_t dst;
    uint64_t n;
    int64_t start, step;
    uint groups_x;
} p;

void main() {
    uint64_t i = (uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    if (i < p.n) IntArray(p.dst + i * 4ul).v[0] = int(p.start + int64_t(i) * p.step);
}
