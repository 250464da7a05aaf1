// Shared declarations for lumus compute shaders.
// Tensors are reached through buffer device addresses passed in push constants, so a
// kernel is not limited by maxStorageBufferRange and needs no descriptor sets. Row bases
// are computed in 64 bits so tensors past 4 Gi elements address correctly.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4Array { vec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer FloatArray { float v[]; };
