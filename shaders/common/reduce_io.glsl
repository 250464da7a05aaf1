// Loads and stores of one element in the tensor's dtype, converted to and from float32
// (the reduction and softmax kernels). DT: 0 float32, 1 float16, 2 bfloat16 (the top 16
// bits of a float32; stores round to nearest even). Addresses are in elements.
#if DT == 1 || DT == 2
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif
#if DT == 1
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(buffer_reference, std430, buffer_reference_align = 2) buffer ElemArray { float16_t v[]; };
float load_elem(uint64_t base, uint64_t i) { return float(ElemArray(base + i * 2ul).v[0]); }
void store_elem(uint64_t base, uint64_t i, float v) { ElemArray(base + i * 2ul).v[0] = float16_t(v); }
const uint ELEM_BYTES = 2;
#elif DT == 2
layout(buffer_reference, std430, buffer_reference_align = 2) buffer ElemArray { uint16_t v[]; };
float load_elem(uint64_t base, uint64_t i) { return uintBitsToFloat(uint(ElemArray(base + i * 2ul).v[0]) << 16); }
void store_elem(uint64_t base, uint64_t i, float v) {
    uint b = floatBitsToUint(v);
    // NaN stays a (quiet) NaN; others round to nearest even.
    uint r = (b & 0x7fffffffu) > 0x7f800000u ? (b >> 16) | 0x40u : (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    ElemArray(base + i * 2ul).v[0] = uint16_t(r);
}
const uint ELEM_BYTES = 2;
#else
float load_elem(uint64_t base, uint64_t i) { return FloatArray(base + i * 4ul).v[0]; }
void store_elem(uint64_t base, uint64_t i, float v) { FloatArray(base + i * 4ul).v[0] = v; }
const uint ELEM_BYTES = 4;
#endif

// (q / n, q % n) for q < n * 2^32: a 32-bit division where q fits and none where n == 1,
// as a 64-bit one is a long software routine on GPUs (per thread, it bounded reductions
// over rows of a few elements).
uvec2 div_mod(uint64_t q, uint n) {
    if (n == 1u) return uvec2(uint(q), 0u);
    if ((q >> 32) == 0ul) { uint q32 = uint(q); return uvec2(q32 / n, q32 % n); }
    return uvec2(uint(q / n), uint(q % n));
}
