#version 450
// dst[i] = value i of a Philox4x32-10 stream (shaders/common/philox.glsl), times `scale`
// plus `shift`: invocation b computes block b (counter = b, offset; key = the seed) and
// writes elements 4b..4b+3. NORMAL=0: uniform [0, 1) from each word, (w >> drop) unit
// (drop 8, unit 2^-24 for float32; fewer bits for the 16-bit dtypes, so that their
// rounding cannot reach 1), clamped below `upper`; NORMAL=1: Box-Muller normals from
// words (0, 1) and (2, 3).
#include "common/buffers.glsl"
#include "common/philox.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params {
    uint64_t dst;
    uint64_t n;         // floats
    uvec2 key;          // the seed, low word first
    uvec2 offset;       // the call's counter words 2 and 3
    float scale, shift, upper;
    uint drop;
    float unit;
    uint groups_x;
} p;

void main() {
    uint64_t b = (uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    uint64_t at = b * 4ul;
#if NORMAL
    philox_load_log_tables();
    barrier();
#endif
    if (at >= p.n) return;
    uvec4 w = philox4x32_10(uvec4(uint(b), uint(b >> 32), p.offset.x, p.offset.y), p.key);
#if NORMAL
    vec4 z = vec4(philox_normal2(w.x, w.y), philox_normal2(w.z, w.w));
#else
    vec4 z = vec4(w >> p.drop) * p.unit;   // exact: at most 24 bits times a power of 2
#endif
    precise vec4 v = z * p.scale + p.shift;
#if !NORMAL
    v = min(v, vec4(p.upper));
#endif
    if (at + 4ul <= p.n) {
        Vec4Array(p.dst + at * 4ul).v[0] = v;
    } else {
        for (uint j = 0u; at + uint64_t(j) < p.n; ++j) FloatArray(p.dst + (at + uint64_t(j)) * 4ul).v[0] = v[j];
    }
}
