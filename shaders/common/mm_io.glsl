// Element access for the matmul kernels by the element type DT (0 when not defined):
// float32, float16 (1) or bfloat16 (2, the top half of a float32; stores round to
// nearest even, NaN stays NaN). Values are float32 in registers. Indices count elements
// from a base device address; ld4/st4 need the index a multiple of 4 and the base
// aligned to 4 elements.
#if DT == 1 || DT == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
// 16-bit values appear only between a load or store and its conversion: no 16-bit
// local, parameter or result, so the SPIR-V needs 16-bit storage only (no Int16 or
// Float16 capability).
#if DT == 1
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(buffer_reference, std430, buffer_reference_align = 8) buffer MmVec4 { f16vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer MmElem { float16_t v[]; };
const uint64_t MM_ELEM_BYTES = 2ul;
vec4 ld4(uint64_t base, uint64_t i) { return vec4(MmVec4(base + i * MM_ELEM_BYTES).v[0]); }
float ld1(uint64_t base, uint64_t i) { return float(MmElem(base + i * MM_ELEM_BYTES).v[0]); }
void st4(uint64_t base, uint64_t i, vec4 v) { MmVec4(base + i * MM_ELEM_BYTES).v[0] = f16vec4(v); }
void st1(uint64_t base, uint64_t i, float v) { MmElem(base + i * MM_ELEM_BYTES).v[0] = float16_t(v); }
// Elements i..i+7 as two vec4s, one 16-byte load (i a multiple of 8, base 16-byte aligned).
layout(buffer_reference, std430, buffer_reference_align = 16) buffer MmVec8 { uvec4 v[]; };
void ld8(uint64_t base, uint64_t i, out vec4 lo, out vec4 hi) {
    uvec4 u = MmVec8(base + i * MM_ELEM_BYTES).v[0];
    lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
}
#elif DT == 2
layout(buffer_reference, std430, buffer_reference_align = 8) buffer MmVec4 { u16vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer MmElem { uint16_t v[]; };
const uint64_t MM_ELEM_BYTES = 2ul;
uint mm_round_bf16(uint b) {
    if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16) | 0x40u;   // quiet NaN
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;                    // nearest even
}
vec4 ld4(uint64_t base, uint64_t i) { return uintBitsToFloat(uvec4(MmVec4(base + i * MM_ELEM_BYTES).v[0]) << 16); }
float ld1(uint64_t base, uint64_t i) { return uintBitsToFloat(uint(MmElem(base + i * MM_ELEM_BYTES).v[0]) << 16); }
void st4(uint64_t base, uint64_t i, vec4 v) {
    uvec4 b = floatBitsToUint(v);
    uvec4 r = uvec4(mm_round_bf16(b.x), mm_round_bf16(b.y), mm_round_bf16(b.z), mm_round_bf16(b.w));
    MmVec4(base + i * MM_ELEM_BYTES).v[0] = u16vec4(r);
}
void st1(uint64_t base, uint64_t i, float v) {
    MmElem(base + i * MM_ELEM_BYTES).v[0] = uint16_t(mm_round_bf16(floatBitsToUint(v)));
}
#else
layout(buffer_reference, std430, buffer_reference_align = 16) buffer MmVec4 { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer MmElem { float v[]; };
const uint64_t MM_ELEM_BYTES = 4ul;
vec4 ld4(uint64_t base, uint64_t i) { return MmVec4(base + i * MM_ELEM_BYTES).v[0]; }
float ld1(uint64_t base, uint64_t i) { return MmElem(base + i * MM_ELEM_BYTES).v[0]; }
void st4(uint64_t base, uint64_t i, vec4 v) { MmVec4(base + i * MM_ELEM_BYTES).v[0] = v; }
void st1(uint64_t base, uint64_t i, float v) { MmElem(base + i * MM_ELEM_BYTES).v[0] = v; }
#endif
