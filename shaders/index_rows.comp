#version 450
// Row gather: out row r = row ids[r] of x, for index_select over a contiguous x and for
// embedding (lumus.index_select, lumus.embedding). Moves bytes only, any dtype.
//
// x is viewed as [outer, size, words]: `size` rows of `words` words per outer block;
// out as [outer, n_ids, words]. Row r (0-based, of outer * n_ids) takes ids[r % n_ids]
// (1-based, int32, ids_stride elements apart). An id outside 1..size reads nothing and
// writes a row of zeros: the kernel never addresses outside x.
//
// UNIT is the word size in bytes (16, 8, 4, 2 or 1), the largest that divides the row's
// byte count and both bases. A row belongs to 2^tpr_log2 consecutive threads (a power of
// two near words / ELEMS, chosen by the caller), so a workgroup copies several short rows
// or part of a long one with no division per word; each thread moves words lane,
// lane + tpr, ... (consecutive threads, consecutive words: coalesced on both sides), ELEMS
// at a time, all loads before the stores, as buffer references may alias.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_control_flow_attributes : require

#if UNIT == 16
#define WORD uvec4
#define ZERO uvec4(0u)
#elif UNIT == 8
#define WORD uvec2
#define ZERO uvec2(0u)
#elif UNIT == 4
#define WORD uint
#define ZERO 0u
#elif UNIT == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define WORD uint16_t
#define ZERO uint16_t(0u)
#else
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#define WORD uint8_t
#define ZERO uint8_t(0u)
#endif

layout(buffer_reference, std430, buffer_reference_align = UNIT) buffer Words { WORD v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ids { int v[]; };

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ELEMS = 4;

layout(push_constant) uniform Params {
    uint64_t x, ids, dst;
    uint rows;         // outer * n_ids
    uint n_ids, size, words, ids_stride;
    uint tpr_log2;     // threads per row: 1 << tpr_log2 (<= the workgroup size)
    uint groups_x;
} p;

void main() {
    uint group = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    uint tpr = 1u << p.tpr_log2;
    uint lid = gl_LocalInvocationID.x;
    uint row = group * (gl_WorkGroupSize.x >> p.tpr_log2) + (lid >> p.tpr_log2);
    if (row >= p.rows) return;
    uint lane = lid & (tpr - 1u);
    uint o = row / p.n_ids, j = row - o * p.n_ids;
    int id = Ids(p.ids + uint64_t(j) * p.ids_stride * 4ul).v[0];
    bool valid = id >= 1 && uint(id) <= p.size;
    uint64_t src = p.x + (uint64_t(o) * p.size + uint(valid ? id - 1 : 0)) * p.words * uint64_t(UNIT);
    uint64_t dst = p.dst + uint64_t(row) * p.words * uint64_t(UNIT);
    for (uint w0 = lane; w0 < p.words; w0 += tpr * ELEMS) {
        WORD v[ELEMS];
        [[unroll]] for (uint e = 0; e < ELEMS; ++e) {
            uint w = w0 + e * tpr;
            v[e] = valid && w < p.words ? Words(src + uint64_t(w) * UNIT).v[0] : ZERO;
        }
        [[unroll]] for (uint e = 0; e < ELEMS; ++e) {
            uint w = w0 + e * tpr;
            if (w < p.words) Words(dst + uint64_t(w) * UNIT).v[0] = v[e];
        }
    }
}
