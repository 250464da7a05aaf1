#version 450
// Element gather and strided copy over views of up to 8 dimensions, any dtype (UNIT bytes
// per element): lumus.gather, lumus.index_select and lumus.embedding where the row form
// does not apply, and the copies of cat and stack.
//
// For each element c (coordinates over `shape`, row-major order i):
//   DIM < 8 (a gather): id = ids[sum c_k is_k] (int32, 1-based);
//       out[i] = x[sum_{k != DIM} c_k xs_k + (id - 1) xs_DIM]   (out contiguous)
//       and out[i] = 0 when id is outside 1..size: nothing outside x is read.
//   DIM = 15 (a copy): out[sum c_k is_k] = x[sum c_k xs_k]      (is: out's strides)
// The element count is the product of the shape; the grid is 2-D when it must be.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_control_flow_attributes : require

#if UNIT == 4
#define ELEM uint
#define ZERO 0u
#elif UNIT == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#define ELEM uint16_t
#define ZERO uint16_t(0u)
#else
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#define ELEM uint8_t
#define ZERO uint8_t(0u)
#endif

layout(buffer_reference, std430, buffer_reference_align = UNIT) buffer Elems { ELEM v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ids { int v[]; };

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ELEMS = 4;

const uint NO_DIM = 15u;

layout(push_constant) uniform Params {
    uint64_t x, ids, dst;
    uint shape[8];
    uint xs[8];        // x's strides (elements)
    uint is[8];        // ids' strides (a gather) or out's (a copy)
    uint ndim_dim;     // ndim | DIM << 4
    uint size;         // x's size along DIM
} p;

void main() {
    uint ndim = p.ndim_dim & 15u, dim = p.ndim_dim >> 4;
    uint64_t n = 1ul;
    for (uint k = 0; k < ndim; ++k) n *= uint64_t(p.shape[k]);
    uint64_t group = uint64_t(gl_WorkGroupID.y) * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint64_t first = group * uint64_t(gl_WorkGroupSize.x * ELEMS) + gl_LocalInvocationID.x;
    for (uint e = 0; e < ELEMS; ++e) {
        uint64_t i = first + uint64_t(e * gl_WorkGroupSize.x);
        if (i >= n) return;
        uint64_t xo = 0ul, io = 0ul;
        if (n <= 0xfffffffful) {
            uint r = uint(i);
            for (int k = int(ndim) - 1; k >= 0; --k) {
                uint c = r % p.shape[k];
                r /= p.shape[k];
                io += uint64_t(c) * p.is[k];
                if (uint(k) != dim) xo += uint64_t(c) * p.xs[k];
            }
        } else {
            uint64_t r = i;
            for (int k = int(ndim) - 1; k >= 0; --k) {
                uint64_t c = r % uint64_t(p.shape[k]);
                r /= uint64_t(p.shape[k]);
                io += c * p.is[k];
                if (uint(k) != dim) xo += c * p.xs[k];
            }
        }
        if (dim == NO_DIM) {
            Elems(p.dst + io * uint64_t(UNIT)).v[0] = Elems(p.x + xo * uint64_t(UNIT)).v[0];
        } else {
            int id = Ids(p.ids + io * 4ul).v[0];
            ELEM v = ZERO;
            if (id >= 1 && uint(id) <= p.size)
                v = Elems(p.x + (xo + uint64_t(uint(id - 1)) * p.xs[dim]) * uint64_t(UNIT)).v[0];
            Elems(p.dst + i * uint64_t(UNIT)).v[0] = v;
        }
    }
}
