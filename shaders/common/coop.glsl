// 16x16x16 cooperative matrices (float16 A and B, float32 accumulator) through either
// extension: COOP_KHR selects VK_KHR_cooperative_matrix (glslang 13+), otherwise
// VK_NV_cooperative_matrix (Debian 12's glslc). The two differ only in spelling here:
// KHR types carry their use (A, B, accumulator) and loads take a layout constant.
// COOP_LOAD/COOP_STORE(matrix, array, offset, stride, column_major): offset and stride
// count elements of the array's type; column_major must be a literal true/false.
// COOP_C_TO_A(c): an accumulator as a float16 A matrix, in registers; KHR needs
// VK_NV_cooperative_matrix2's conversions for it, declared only where COOP_CONVERSIONS is
// defined (src/context.c enables that variant only where the device has them).
#extension GL_KHR_memory_scope_semantics : require
#if COOP_KHR
#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define COOP_A coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define COOP_B coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define COOP_C coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define COOP_LAYOUT(column_major) \
    ((column_major) ? gl_CooperativeMatrixLayoutColumnMajor : gl_CooperativeMatrixLayoutRowMajor)
#define COOP_LOAD(m, arr, offset, stride, column_major) \
    coopMatLoad(m, arr, offset, stride, COOP_LAYOUT(column_major))
#define COOP_STORE(m, arr, offset, stride, column_major) \
    coopMatStore(m, arr, offset, stride, COOP_LAYOUT(column_major))
#define COOP_MULADD coopMatMulAdd
#ifdef COOP_CONVERSIONS
#extension GL_NV_cooperative_matrix2 : require
#define COOP_C_TO_A(c) COOP_A(c)
#endif
#else
#extension GL_NV_cooperative_matrix : require
#define COOP_A fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define COOP_B fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define COOP_C fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define COOP_LOAD coopMatLoadNV
#define COOP_STORE coopMatStoreNV
#define COOP_MULADD coopMatMulAddNV
#define COOP_C_TO_A(c) COOP_A(c)
#endif
