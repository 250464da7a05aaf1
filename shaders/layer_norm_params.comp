#version 450
// LayerNorm forward's parameters as float32 copies for one call (tune.layer_norm{
// shifted_params = true}; common/layer_norm.glsl's SHIFTED): for weight and bias (each
// where its address is nonzero), p.copies arrays of 4 * p.n floats, copy o holding
// element f - o of the parameter at float f and 0 outside the parameter. Vector idx of
// copy o is then exactly the lanes that vector idx of a row of skew o needs, one aligned
// load in place of two loads and a lane shift (and, for 16-bit parameters, of a
// conversion per vector). DT: the parameters' dtype (0 float32, 1 float16, 2 bfloat16).
#include "common/buffers.glsl"
#ifndef DT
#define DT 0
#endif
#if DT != 0
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer ParamF16 { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) readonly buffer ParamBf16 { uint16_t v[]; };
#endif

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Params {
    uint64_t weight, bias;           // the parameters (0: absent)
    uint64_t weight_out, bias_out;   // their copies (float32, p.copies * 4 * p.n each)
    uint d;                          // elements of a parameter
    uint n;                          // vectors per copy
    uint copies;                     // 4 (rows of any skew) or 1 (skew 0 only)
    uint groups_x;                   // width of the dispatch grid, for 2-D folding
} p;

float param_at(uint64_t at, uint e) {
#if DT == 0
    return FloatArray(at).v[e];
#elif DT == 1
    return float(ParamF16(at).v[e]);
#else
    return uintBitsToFloat(uint(ParamBf16(at).v[e]) << 16);
#endif
}

void copy_lane(uint64_t from, uint64_t to, uint64_t g) {
    if (from == 0ul) return;
    uint per_copy = 4u * p.n;
    uint o = uint(g / per_copy), f = uint(g % per_copy);
    uint e = f - o;   // below the parameter's start it wraps past d
    FloatArray(to + g * 4ul).v[0] = e < p.d ? param_at(from, e) : 0.0;
}

void main() {
    uint64_t g = (uint64_t(gl_WorkGroupID.y) * p.groups_x + gl_WorkGroupID.x) * gl_WorkGroupSize.x
                 + gl_LocalInvocationID.x;
    if (g >= uint64_t(p.copies) * 4ul * uint64_t(p.n)) return;
    copy_lane(p.weight, p.weight_out, g);
    copy_lane(p.bias, p.bias_out, g);
}
