#version 450
// The combine pass of split attention (attention.comp with splits > 1): each output
// element of row r merges the splits' unnormalized outputs O_s, maxima m_s (log2 units)
// and sums l_s: with M = max m_s, out = sum O_s 2^(m_s - M) / sum l_s 2^(m_s - M); a row
// that no split saw any key for gives 0, and NaN in any split gives NaN.
#include "common/elem_io.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params {
    uint64_t part, out_;
    uint64_t rows;
    uint d, splits, groups_x;
} p;

#define NEG_INF uintBitsToFloat(0xff800000u)

void main() {
    uint64_t idx = (uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (idx >= p.rows * p.d) return;
    uint64_t row = idx / p.d;
    uint c = uint(idx % p.d);
    uint64_t ml = p.part + uint64_t(p.splits) * p.rows * p.d * 4ul;
    float mx = NEG_INF;
    for (uint s = 0; s < p.splits; ++s) mx = max(mx, F32Ref(ml + ((uint64_t(s) * p.rows + row) * 2ul) * 4ul).v);
    float mu = mx == NEG_INF ? 0.0 : mx;
    float lsum = 0.0, acc = 0.0;
    for (uint s = 0; s < p.splits; ++s) {
        uint64_t at = uint64_t(s) * p.rows + row;
        float w = exp2(F32Ref(ml + at * 8ul).v - mu);
        lsum += F32Ref(ml + at * 8ul + 4ul).v * w;
        acc += F32Ref(p.part + (at * p.d + c) * 4ul).v * w;
    }
    elem_store(p.out_, idx, lsum == 0.0 ? 0.0 : acc / lsum);
}
