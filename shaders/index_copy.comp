#version 450
// lumus.index_copy: out[o, ids[j] - 1, c] = src[o, j, c] for j = 0..m-1, out viewed as
// [outer, size, inner] and src as [outer, m, inner] (both contiguous), elements of
// ELEM bytes moved as they are (any dtype). A thread per element of src; an id outside
// 1..size writes nothing, and where ids repeat the last slice j with that id is the one
// written (each thread skips its element when a later j has the same id), so the result
// does not depend on the order threads run in. Cost: numel(src) writes, plus m - j id
// reads per element of slice j.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#if ELEM == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define ET uint16_t
#elif ELEM == 1
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#define ET uint8_t
#else
#define ET uint
#endif

layout(buffer_reference, std430, buffer_reference_align = ELEM) buffer Elem { ET v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ids { int v[]; };

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params {
    uint64_t ids, src, dst;
    uint outer, size, inner, m;
    uint groups_x;
} p;

void main() {
    uint64_t e = uint64_t(gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    uint64_t per_outer = uint64_t(p.m) * p.inner;
    if (e >= uint64_t(p.outer) * per_outer) return;
    uint o = uint(e / per_outer);
    uint rest = uint(e % per_outer);
    uint j = rest / p.inner, c = rest % p.inner;
    int id = Ids(p.ids).v[j];
    if (id < 1 || uint(id) > p.size) return;
    for (uint k = j + 1u; k < p.m; ++k)
        if (Ids(p.ids).v[k] == id) return;
    uint64_t at = (uint64_t(o) * p.size + uint64_t(id - 1)) * p.inner + c;
    Elem(p.dst + at * uint64_t(ELEM)).v = Elem(p.src + e * uint64_t(ELEM)).v;
}
