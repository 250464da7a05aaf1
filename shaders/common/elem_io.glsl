// Scalar element access by byte address for the kernels that read strided float tensors
// (attention, rope): DT 0 float32, 1 float16, 2 bfloat16 (the top half of a float32;
// stores round to nearest even, a NaN stays a quiet NaN). Values are float32 in registers.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#if DT == 1 || DT == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#if DT == 1
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32Ref { float v; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32Ref { uint v; };
// elem_load4: 4 consecutive elements at element i (i a multiple of 4, base aligned to 4
// elements).
#if DT == 1
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Elem4Ref { f16vec4 v; };
vec4 elem_load4(uint64_t base, uint64_t i) { return vec4(Elem4Ref(base + i * 2ul).v); }
#elif DT == 2
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Elem4Ref { u16vec4 v; };
vec4 elem_load4(uint64_t base, uint64_t i) { return uintBitsToFloat(uvec4(Elem4Ref(base + i * 2ul).v) << 16); }
#else
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Elem4Ref { vec4 v; };
vec4 elem_load4(uint64_t base, uint64_t i) { return Elem4Ref(base + i * 4ul).v; }
#endif
#if DT == 1
layout(buffer_reference, std430, buffer_reference_align = 2) buffer ElemRef { float16_t v; };
const uint64_t ELEM_BYTES = 2;
float elem_load(uint64_t base, uint64_t i) { return float(ElemRef(base + i * ELEM_BYTES).v); }
void elem_store(uint64_t base, uint64_t i, float x) { ElemRef(base + i * ELEM_BYTES).v = float16_t(x); }
#elif DT == 2
layout(buffer_reference, std430, buffer_reference_align = 2) buffer ElemRef { uint16_t v; };
const uint64_t ELEM_BYTES = 2;
float elem_load(uint64_t base, uint64_t i) { return uintBitsToFloat(uint(ElemRef(base + i * ELEM_BYTES).v) << 16); }
void elem_store(uint64_t base, uint64_t i, float x) {
    uint b = floatBitsToUint(x);
    uint r = (b & 0x7fffffffu) > 0x7f800000u ? (b >> 16) | 0x40u : (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    ElemRef(base + i * ELEM_BYTES).v = uint16_t(r);
}
#else
const uint64_t ELEM_BYTES = 4;
float elem_load(uint64_t base, uint64_t i) { return F32Ref(base + i * ELEM_BYTES).v; }
void elem_store(uint64_t base, uint64_t i, float x) { F32Ref(base + i * ELEM_BYTES).v = x; }
#endif

// Byte i of a bool tensor at base, read through its aligned 32-bit word (no 8-bit
// storage needed; allocations are whole words, so the word lies inside the buffer).
bool bool_load(uint64_t base, uint64_t i) {
    uint64_t a = base + i;
    uint w = U32Ref(a & ~uint64_t(3)).v;
    return ((w >> (uint(a & uint64_t(3)) * 8u)) & 0xffu) != 0u;
}
