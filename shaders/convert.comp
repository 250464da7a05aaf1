#version 450
// dst = src converted element by element between dtypes (src/ops/convert.c), both plain
// (contiguous, 16-byte aligned). SRC and DST are dtype codes (src/tensor.h's lm_dtype):
// 0 float32, 1 float16, 2 bfloat16, 3 int32, 4 bool.
//
// Each thread converts UNROLL quads of 4 elements spaced a workgroup apart (coalesced):
// a quad is one uvec4, uvec2 or uint of each side (elements 4k.. start 16-byte aligned
// for 4-byte dtypes, 8 for 2-byte, 4 for 1-byte), loads first then stores. The thread of
// quad n/4 converts the last n % 4 elements one by one: with NARROW=1 through 8/16-bit
// storage (needed when a side has 1- or 2-byte elements), else as 32-bit words.
//
// All conversions work on bit patterns in integer arithmetic, so they are exact and do
// not depend on the device's float rounding or denormal flushing:
//   float32 -> float16/bfloat16  round to nearest even; overflow gives inf; NaN stays a
//                                (quiet) NaN with its sign
//   float   -> int32             truncation toward zero; NaN gives 0; beyond the range
//                                saturates to -2^31 or 2^31 - 1
//   any     -> bool              nonzero (NaN included) is 1, zero (and -0) is 0
//   int32   -> float             round to nearest even (to float32 first for the 2-byte
//                                floats, as PyTorch)
//   bool    -> any               0 or 1
#include "common/buffers.glsl"

#ifndef NARROW
#define NARROW 0
#endif
#if NARROW
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require
layout(buffer_reference, std430, buffer_reference_align = 2) buffer U16Array { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer U8Array { uint8_t v[]; };
#endif

layout(buffer_reference, std430, buffer_reference_align = 16) buffer UVec4Array { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer UVec2Array { uvec2 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer UintArray { uint v[]; };

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 4;
layout(constant_id = 2) const uint SRC = 0;
layout(constant_id = 3) const uint DST = 0;

layout(push_constant) uniform Params {
    uint64_t src, dst;
    uint64_t n;        // elements
    uint groups_x;
} p;

const uint WG = gl_WorkGroupSize.x;
const uint F32 = 0, F16 = 1, BF16 = 2, I32 = 3, BOOL = 4;

uint elem_bytes(uint d) { return d == F16 || d == BF16 ? 2u : d == BOOL ? 1u : 4u; }

// float16 bits -> float32 bits (exact).
uint half_to_float(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 31u) return sign | 0x7f800000u | (m << 13);
    if (e != 0u) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0u) return sign;
    int top = findMSB(m);                       // a subnormal: m * 2^-24
    return sign | (uint(top + 103) << 23) | ((m << uint(23 - top)) & 0x7fffffu);
}

// Rounds v >> sh to nearest even (sh >= 1).
uint shift_round(uint v, uint sh) {
    uint q = v >> sh, rem = v & ((1u << sh) - 1u), half_ = 1u << (sh - 1u);
    return q + ((rem > half_ || (rem == half_ && (q & 1u) != 0u)) ? 1u : 0u);
}

// float32 bits -> float16 bits.
uint float_to_half(uint f) {
    uint sign = (f >> 16) & 0x8000u;
    uint a = f & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);   // NaN
    if (a >= 0x47800000u) return sign | 0x7c00u;                        // >= 2^16 (and inf)
    if (a >= 0x38800000u) return sign | shift_round(a - 0x38000000u, 13u);   // normal; may round to inf
    if (a <= 0x33000000u) return sign;                                  // <= 2^-25 rounds to 0
    uint e = a >> 23;                           // 102..112: a half subnormal (or the least normal)
    uint m = (a & 0x7fffffu) | 0x800000u;
    return sign | shift_round(m, 126u - e);
}

// float32 bits -> bfloat16 bits.
uint float_to_bfloat16(uint f) {
    if ((f & 0x7fffffffu) > 0x7f800000u) return (f >> 16) | 0x40u;    // NaN, quieted
    return (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
}

// float32 bits -> int32 (as uint bits), truncating.
uint float_to_int(uint f) {
    uint a = f & 0x7fffffffu;
    if (a > 0x7f800000u) return 0u;
    bool neg = (f >> 31) != 0u;
    uint e = a >> 23;
    if (e < 127u) return 0u;
    if (e >= 158u) return neg ? 0x80000000u : 0x7fffffffu;
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint v = e >= 150u ? m << (e - 150u) : m >> (150u - e);
    return neg ? uint(-int(v)) : v;
}

// int32 bits -> float32 bits.
uint int_to_float(uint i) {
    if (i == 0u) return 0u;
    uint sign = i & 0x80000000u;
    uint a = sign != 0u ? (~i + 1u) : i;        // |i|; 2^31 for -2^31
    uint top = uint(findMSB(a));
    if (top <= 23u) return sign | ((top + 127u) << 23) | ((a << (23u - top)) & 0x7fffffu);
    uint m = shift_round(a, top - 23u);         // 24 bits, or 2^24 when it rounded up
    return sign | ((top + 127u) << 23) + (m - 0x800000u);   // a carry steps the exponent
}

// One element: src's stored bits in the low bits of v -> dst's stored bits.
uint convert(uint v) {
    if (SRC == I32 && DST == BOOL) return v != 0u ? 1u : 0u;
    if (SRC == BOOL && (DST == I32 || DST == BOOL)) return v;
    uint f;                                     // the value as float32 bits
    if (SRC == F32) f = v;
    else if (SRC == F16) f = half_to_float(v);
    else if (SRC == BF16) f = v << 16;
    else if (SRC == I32) f = int_to_float(v);
    else f = v != 0u ? 0x3f800000u : 0u;
    if (DST == F32) return f;
    if (DST == F16) return float_to_half(f);
    if (DST == BF16) return float_to_bfloat16(f);
    if (DST == I32) return float_to_int(f);
    return (f & 0x7fffffffu) != 0u ? 1u : 0u;
}

uvec4 load_quad(uint64_t q) {
    uint sb = elem_bytes(SRC);
    if (sb == 4u) return UVec4Array(p.src + q * 16ul).v[0];
    if (sb == 2u) {
        uvec2 w = UVec2Array(p.src + q * 8ul).v[0];
        return uvec4(w.x & 0xffffu, w.x >> 16, w.y & 0xffffu, w.y >> 16);
    }
    uint w = UintArray(p.src + q * 4ul).v[0];
    return uvec4(w & 0xffu, (w >> 8) & 0xffu, (w >> 16) & 0xffu, w >> 24);
}

void store_quad(uint64_t q, uvec4 v) {
    uint db = elem_bytes(DST);
    if (db == 4u) UVec4Array(p.dst + q * 16ul).v[0] = v;
    else if (db == 2u) UVec2Array(p.dst + q * 8ul).v[0] = uvec2(v.x | (v.y << 16), v.z | (v.w << 16));
    else UintArray(p.dst + q * 4ul).v[0] = v.x | (v.y << 8) | (v.z << 16) | (v.w << 24);
}

uint load_one(uint64_t i) {
#if NARROW
    uint sb = elem_bytes(SRC);
    if (sb == 2u) return uint(U16Array(p.src + i * 2ul).v[0]);
    if (sb == 1u) return uint(U8Array(p.src + i).v[0]);
#endif
    return UintArray(p.src + i * 4ul).v[0];
}

void store_one(uint64_t i, uint v) {
#if NARROW
    uint db = elem_bytes(DST);
    if (db == 2u) { U16Array(p.dst + i * 2ul).v[0] = uint16_t(v); return; }
    if (db == 1u) { U8Array(p.dst + i).v[0] = uint8_t(v); return; }
#endif
    UintArray(p.dst + i * 4ul).v[0] = v;
}

void main() {
    uint64_t group = uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x;
    uint64_t n4 = p.n / 4ul;
    uint64_t first = group * (WG * UNROLL) + gl_LocalInvocationID.x;
    uvec4 v[UNROLL];
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t q = first + i * WG;
        if (q < n4) v[i] = load_quad(q);
    }
    for (uint i = 0; i < UNROLL; ++i) {
        uint64_t q = first + i * WG;
        if (q < n4) store_quad(q, uvec4(convert(v[i].x), convert(v[i].y), convert(v[i].z), convert(v[i].w)));
    }
    if (group == 0ul && gl_LocalInvocationID.x == 0) {
        for (uint64_t k = n4 * 4ul; k < p.n; ++k) store_one(k, convert(load_one(k)));
    }
}
