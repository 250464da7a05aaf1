// Shared by the row kernels (softmax, sum) over a [rows, d] tensor, rows folded onto a
// 2-D grid, row vectors as vec4 (VEC = 4, d a multiple of 4) or float. Two forms, by the
// specialization constant ROWS:
//   ROWS == 1  one workgroup per row: subgroup operations plus one shared-memory step;
//   ROWS > 1   one subgroup per row, ROWS rows per workgroup (short rows; the pipeline is
//              made with full subgroups, and ROWS counts the smallest subgroups that fit,
//              so larger ones loop over the rows).
// A kernel writes process_row(row, lane, width) with the row_* reductions and calls
// for_each_row() from main.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

// DT (0 when not defined): the element type in memory, float32, float16 (1) or bfloat16
// (2, the top half of a float32; stores round to nearest even); rows are read into and
// written from float32 (VT) through row_load and row_store.
#if DT == 1 || DT == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#if DT == 1
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#if VEC == 4
#define VT vec4
float hsum(vec4 v) { return (v.x + v.y) + (v.z + v.w); }
float hmax(vec4 v) { return max(max(v.x, v.y), max(v.z, v.w)); }
#else
#define VT float
float hsum(float v) { return v; }
float hmax(float v) { return v; }
#endif

#if VEC == 4
#define UVT uvec4
#define HVT f16vec4
#define BVT u16vec4
#define ROW_UNIT_ALIGN 8
#else
#define UVT uint
#define HVT float16_t
#define BVT uint16_t
#define ROW_UNIT_ALIGN 2
#endif
#if DT == 1
const uint ROW_ELEM_BYTES = 2;
layout(buffer_reference, std430, buffer_reference_align = ROW_UNIT_ALIGN) buffer RowArray { HVT v[]; };
#define ROW_ARRAY RowArray
VT row_load(ROW_ARRAY a, uint i) { return VT(a.v[i]); }
void row_store(ROW_ARRAY a, uint i, VT v) { a.v[i] = HVT(v); }
#elif DT == 2
const uint ROW_ELEM_BYTES = 2;
layout(buffer_reference, std430, buffer_reference_align = ROW_UNIT_ALIGN) buffer RowArray { BVT v[]; };
#define ROW_ARRAY RowArray
VT row_load(ROW_ARRAY a, uint i) { return uintBitsToFloat(UVT(a.v[i]) << 16); }
void row_store(ROW_ARRAY a, uint i, VT v) {
    UVT b = floatBitsToUint(v);
    UVT r = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;              // nearest even
    UVT q = (b >> 16) | 0x40u;                                  // NaN stays a quiet NaN
#if VEC == 4
    r = mix(r, q, greaterThan(b & 0x7fffffffu, uvec4(0x7f800000u)));
#else
    r = (b & 0x7fffffffu) > 0x7f800000u ? q : r;
#endif
    a.v[i] = BVT(r);
}
#else
const uint ROW_ELEM_BYTES = 4;
#if VEC == 4
#define ROW_ARRAY Vec4Array
#else
#define ROW_ARRAY FloatArray
#endif
VT row_load(ROW_ARRAY a, uint i) { return a.v[i]; }
void row_store(ROW_ARRAY a, uint i, VT v) { a.v[i] = v; }
#endif

#define NEG_INF uintBitsToFloat(0xff800000u)

#ifndef ANY_D
#define ANY_D 0
#endif
#if ANY_D
#if VEC != 4
#error "ANY_D needs VEC = 4"
#endif
// Rows of any d (ANY_D = 1, row kernels that take it) as the aligned 4-element vectors of
// the flattened tensor that cover them: vector idx of a row is vector floor(row*d / 4) + idx
// of the buffer, and its lane k holds element 4*idx + k - o of the row, o = (row*d) mod 4
// (the row's skew). Element indices are unsigned: below the row's start they wrap to
// values >= d, so one "< d" test finds every lane outside the row. Plain tensors start
// aligned to a whole vector, and allocations hold whole 16-byte blocks, so the vectors
// that cover a row never leave the tensor's memory.
#include "elem_io.glsl"   // elem_store: the partial vectors' element stores
uint row_skew(uint64_t row, uint d) { return uint((row * uint64_t(d)) & 3ul); }
// The address of the vector holding the row's first element.
uint64_t row_vec_base(uint64_t base, uint64_t row, uint d) {
    return base + ((row * uint64_t(d)) >> 2) * uint64_t(4u * ROW_ELEM_BYTES);
}
// Vectors that cover a row of skew o.
uint row_vectors(uint o, uint d) { return (o + d + 3u) >> 2; }
// v's lanes outside the row (elements 4*idx - o + k >= d) replaced by `outside`.
VT row_mask(uint o, uint d, uint idx, VT v, float outside) {
    uvec4 e = uvec4(4u * idx - o) + uvec4(0u, 1u, 2u, 3u);
    return mix(VT(outside), v, lessThan(e, uvec4(d)));
}
// Writes the lanes of v inside the row: one vector store where all four are, else one
// element store per lane inside (a partial vector shares its other lanes with the
// neighbouring rows, whose workgroups may be writing them at the same time).
void row_store_masked(uint64_t at, uint o, uint d, uint idx, VT v) {
    uint e0 = 4u * idx - o;
    if (e0 < d && d - e0 >= 4u) {
        row_store(ROW_ARRAY(at), idx, v);
        return;
    }
    for (uint k = 0u; k < 4u; ++k)
        if (e0 + k < d) elem_store(at, uint64_t(4u * idx + k), v[k]);
}
#endif
// The workgroup size is specialization constant 0; declared here, before WG reads it.
layout(local_size_x_id = 0) in;
layout(constant_id = 2) const uint ROWS = 1;
const uint WG = gl_WorkGroupSize.x;

uint64_t row_index(uint groups_x) {
    return uint64_t(gl_WorkGroupID.y) * groups_x + gl_WorkGroupID.x;
}

ROW_ARRAY row_ptr(uint64_t base, uint64_t row, uint d) {
    return ROW_ARRAY(base + row * uint64_t(d) * ROW_ELEM_BYTES);
}

// Reductions over the workgroup, for any subgroup size: a subgroup operation, then the
// first subgroup combines the per-subgroup partials the same way (a tree of depth about
// log2(WG) where subgroup operations are trees), and every thread gets the result.
shared float red_part[WG];
shared float red_total;
float add2(float x, float y) { return x + y; }
#define GROUP_REDUCE(name, subgroup_op, combine, identity)                         \
float name(float v) {                                                             \
    float s = subgroup_op(v);                                                     \
    if (subgroupElect()) red_part[gl_SubgroupID] = s;                             \
    barrier();                                                                    \
    if (gl_SubgroupID == 0) {                                                     \
        float t = identity;                                                       \
        for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize) \
            t = combine(t, red_part[i]);                                          \
        t = subgroup_op(t);                                                       \
        if (subgroupElect()) red_total = t;                                       \
    }                                                                             \
    barrier();                                                                    \
    float r = red_total;                                                          \
    barrier();              /* red_part and red_total are reused by the next call */ \
    return r;                                                                     \
}
GROUP_REDUCE(group_add, subgroupAdd, add2, 0.0)
GROUP_REDUCE(group_max, subgroupMax, max, NEG_INF)

// Over the threads of one row, in either form.
float row_add(float v) { if (ROWS == 1) return group_add(v); return subgroupAdd(v); }
float row_max(float v) { if (ROWS == 1) return group_max(v); return subgroupMax(v); }
bool row_leader() { return ROWS == 1 ? gl_LocalInvocationID.x == 0 : subgroupElect(); }

void process_row(uint64_t row, uint lane, uint width);

void for_each_row(uint groups_x, uint64_t rows) {
    uint64_t group = row_index(groups_x);
    if (ROWS == 1) {
        if (group < rows) process_row(group, gl_LocalInvocationID.x, WG);   // uniform
    } else {
        for (uint r = gl_SubgroupID; r < ROWS; r += gl_NumSubgroups) {
            uint64_t row = group * ROWS + r;
            if (row >= rows) break;                                          // per subgroup
            process_row(row, gl_SubgroupInvocationID, gl_SubgroupSize);
        }
    }
}
