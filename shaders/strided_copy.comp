#version 450
// Copies between strided views (element offsets folded into the addresses).
//
// General form: dst[i] = src[i] for every element i of a shape of up to 8 dimensions,
// each side through its own strides, or dst[i] = value (flags & FILL_FLAG). The caller
// merges dimensions that are contiguous with each other on both sides first, so most
// views reach here with one to three; sizes and strides are 32-bit. Each thread moves
// ELEMS elements spaced a workgroup apart in row-major order, so a contiguous side is
// accessed coalesced.
//
// TRANSPOSE=1: the shape [B, R, C] where src steps 1 along R and dst 1 along C (a
// transposed matrix made contiguous, B of them). A 32 x 8 workgroup moves a 32 x 32 tile
// through shared memory: it reads columns of the tile along src's contiguous R and writes
// rows along dst's contiguous C, so both sides are coalesced. The tile has 33 columns so
// that the column reads of shared memory fall in different banks.
//
// ELEM_BYTES (4, 2 or 1) is the element size of every dtype of that size: elements move
// as bits (32-bit words, or through 8/16-bit storage), never as floats.
#include "common/buffers.glsl"

#ifndef ELEM_BYTES
#define ELEM_BYTES 4
#endif
#define ET uint
#if ELEM_BYTES == 16
// Copies only (no fill): runs of 16 contiguous, 16-byte aligned bytes on both sides as one
// unit (src/ops/strided.c rescales the shape and strides to such units).
layout(buffer_reference, std430, buffer_reference_align = 16) buffer ElemArray { uvec4 v[]; };
#undef ET
#define ET uvec4
#define LOAD(addr) ElemArray(addr).v[0]
#define STORE(addr, x) ElemArray(addr).v[0] = (x)
#elif ELEM_BYTES == 4
layout(buffer_reference, std430, buffer_reference_align = 4) buffer ElemArray { uint v[]; };
#define LOAD(addr) ElemArray(addr).v[0]
#define STORE(addr, x) ElemArray(addr).v[0] = (x)
#elif ELEM_BYTES == 2
#extension GL_EXT_shader_16bit_storage : require
layout(buffer_reference, std430, buffer_reference_align = 2) buffer ElemArray { uint16_t v[]; };
#define LOAD(addr) uint(ElemArray(addr).v[0])
#define STORE(addr, x) ElemArray(addr).v[0] = uint16_t(x)
#else
#extension GL_EXT_shader_8bit_storage : require
layout(buffer_reference, std430, buffer_reference_align = 1) buffer ElemArray { uint8_t v[]; };
#define LOAD(addr) uint(ElemArray(addr).v[0])
#define STORE(addr, x) ElemArray(addr).v[0] = uint8_t(x)
#endif
#define ESIZE uint64_t(ELEM_BYTES)

#ifndef TRANSPOSE
#define TRANSPOSE 0
#endif

#if TRANSPOSE

#define TILE 32
#define ROWS 8
layout(local_size_x = TILE, local_size_y = ROWS) in;

layout(push_constant) uniform Params {
    uint64_t src, dst;
    uint batch, r, c;          // the shape [B, R, C]
    uint src_b, src_c;         // src strides of B and C (R's is 1)
    uint dst_b, dst_r;         // dst strides of B and R (C's is 1)
    uint tiles_r, tiles_c;     // tiles per matrix
    uint groups_x;
} p;

shared uint tile[TILE][TILE + 1];

void main() {
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t per_matrix = uint64_t(p.tiles_r) * p.tiles_c;
    if (group >= per_matrix * p.batch) return;        // uniform per workgroup
    uint b = uint(group / per_matrix);
    uint t = uint(group % per_matrix);
    uint r0 = (t / p.tiles_c) * TILE, c0 = (t % p.tiles_c) * TILE;
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint64_t src_base = p.src + uint64_t(b) * p.src_b * ESIZE;
    uint64_t dst_base = p.dst + uint64_t(b) * p.dst_b * ESIZE;
    for (uint j = ty; j < TILE; j += ROWS) {
        uint r = r0 + tx, c = c0 + j;
        if (r < p.r && c < p.c)
            tile[j][tx] = LOAD(src_base + (uint64_t(c) * p.src_c + r) * ESIZE);
    }
    barrier();
    for (uint j = ty; j < TILE; j += ROWS) {
        uint r = r0 + j, c = c0 + tx;
        if (r < p.r && c < p.c)
            STORE(dst_base + (uint64_t(r) * p.dst_r + c) * ESIZE, tile[tx][j]);
    }
}

#else

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ELEMS = 4;

const uint FILL_FLAG = 0x100u;   // in ndim_flags above the dimension count

layout(push_constant) uniform Params {
    uint64_t src;      // with FILL_FLAG: the value's bits in the low bits
    uint64_t dst;
    uint64_t n;        // elements
    uint ndim_flags;
    uint groups_x;
    uint size[8];
    uint src_stride[8];
    uint dst_stride[8];
} p;

void main() {
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t first = group * uint64_t(gl_WorkGroupSize.x * ELEMS) + gl_LocalInvocationID.x;
    int ndim = int(p.ndim_flags & 0xffu);
    bool fill = (p.ndim_flags & FILL_FLAG) != 0u;
    for (uint e = 0; e < ELEMS; ++e) {
        uint64_t i = first + uint64_t(e * gl_WorkGroupSize.x);
        if (i >= p.n) return;
        uint64_t s = 0ul, d = 0ul;
        if (p.n <= 0xfffffffful) {
            uint r = uint(i);
            for (int k = ndim - 1; k >= 0; --k) {
                uint c = r % p.size[k];
                r /= p.size[k];
                s += uint64_t(c) * p.src_stride[k];
                d += uint64_t(c) * p.dst_stride[k];
            }
        } else {
            uint64_t r = i;
            for (int k = ndim - 1; k >= 0; --k) {
                uint64_t c = r % uint64_t(p.size[k]);
                r /= uint64_t(p.size[k]);
                s += c * p.src_stride[k];
                d += c * p.dst_stride[k];
            }
        }
        ET v;
        if (fill) v = ET(uint(p.src));
        else v = LOAD(p.src + s * ESIZE);
        STORE(p.dst + d * ESIZE, v);
    }
}

#endif
