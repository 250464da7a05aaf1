#version 450
// dst[0..n) = value, as vec4 stores with a scalar tail. Tensors start 16-byte aligned.
#include "common/buffers.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params {
    uint64_t dst;
    uint64_t n;        // floats
    float value;
    uint groups_x;
} p;

void main() {
    uint64_t k = (uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    uint64_t at = k * 4ul;
    if (at + 4ul <= p.n) {
        Vec4Array(p.dst + at * 4ul).v[0] = vec4(p.value);
    } else {
        for (uint64_t j = at; j < p.n; ++j) FloatArray(p.dst + j * 4ul).v[0] = p.value;
    }
}
