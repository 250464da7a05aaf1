#version 450
// Tiled transpose copy (the strided copy's tile64 form, src/ops/strided.c): over merged
// dimensions where dst steps 1 along its last dimension C and src steps 1 along another
// dimension R, each TILE x TILE tile of (R, C) moves through shared memory: read along
// src's contiguous R, written along dst's contiguous C, so both sides are coalesced.
// Every other dimension (up to MAX_BATCH) is a batch, with its own src and dst strides.
//
// A TILE x ROWS workgroup: each thread loads PER = TILE / ROWS elements (all issued
// before the first is used) and stores PER. Within a tile the offsets are 32-bit (the
// host checks TILE * stride < 2^32); the tile's base is 64-bit. The shared tile has
// TILE + 1 columns so that a warp's column reads fall in different banks. Full tiles
// (the uniform common case) skip the bounds checks.
//
// ELEM_BYTES (4, 2 or 1): elements move as bits, as in strided_copy.comp.
#include "common/buffers.glsl"
#extension GL_EXT_control_flow_attributes : require

#ifndef ELEM_BYTES
#define ELEM_BYTES 4
#endif
#if ELEM_BYTES == 4
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

#define TILE 64
#define ROWS 4
#define PER (TILE / ROWS)
#define MAX_BATCH 4
layout(local_size_x = TILE, local_size_y = ROWS) in;

layout(push_constant) uniform Params {
    uint64_t src, dst;
    uint r, c;                 // the tile dimensions' sizes
    uint src_c, dst_r;         // src's stride along C, dst's along R (the other two are 1)
    uint tiles_r, tiles_c;     // tiles per matrix
    uint groups, groups_x;     // workgroups in all (< 2^32), grid width
    uint nbatch;               // batch dimensions, outermost first
    uint bsize[MAX_BATCH], src_b[MAX_BATCH], dst_b[MAX_BATCH];
} p;

shared uint tile[TILE][TILE + 1];

void main() {
    uint group = gl_WorkGroupID.y * p.groups_x + gl_WorkGroupID.x;
    if (group >= p.groups) return;                    // uniform per workgroup
    uint per_matrix = p.tiles_r * p.tiles_c;
    uint b = group / per_matrix;
    uint t = group - b * per_matrix;
    uint tr = t / p.tiles_c;
    uint r0 = tr * TILE, c0 = (t - tr * p.tiles_c) * TILE;
    uint64_t src_off = 0ul, dst_off = 0ul;
    for (int k = int(p.nbatch) - 1; k >= 0; --k) {
        uint i = b % p.bsize[k];
        b /= p.bsize[k];
        src_off += uint64_t(i) * p.src_b[k];
        dst_off += uint64_t(i) * p.dst_b[k];
    }
    uint64_t src_base = p.src + (src_off + uint64_t(c0) * p.src_c + r0) * ESIZE;
    uint64_t dst_base = p.dst + (dst_off + uint64_t(r0) * p.dst_r + c0) * ESIZE;
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    bool full = r0 + TILE <= p.r && c0 + TILE <= p.c;
    uint v[PER];
    if (full) {
        [[unroll]] for (uint j = 0; j < PER; ++j)
            v[j] = LOAD(src_base + uint64_t((ty + j * ROWS) * p.src_c + tx) * ESIZE);
    } else {
        [[unroll]] for (uint j = 0; j < PER; ++j) {
            v[j] = 0u;
            if (r0 + tx < p.r && c0 + ty + j * ROWS < p.c)
                v[j] = LOAD(src_base + uint64_t((ty + j * ROWS) * p.src_c + tx) * ESIZE);
        }
    }
    [[unroll]] for (uint j = 0; j < PER; ++j) tile[ty + j * ROWS][tx] = v[j];
    barrier();
    [[unroll]] for (uint j = 0; j < PER; ++j) v[j] = tile[tx][ty + j * ROWS];
    if (full) {
        [[unroll]] for (uint j = 0; j < PER; ++j)
            STORE(dst_base + uint64_t((ty + j * ROWS) * p.dst_r + tx) * ESIZE, v[j]);
    } else {
        [[unroll]] for (uint j = 0; j < PER; ++j)
            if (r0 + ty + j * ROWS < p.r && c0 + tx < p.c)
                STORE(dst_base + uint64_t((ty + j * ROWS) * p.dst_r + tx) * ESIZE, v[j]);
    }
}
