/* The SPIR-V of every shader variant, compiled by glslc at build time (see Makefile). */
#include "pipelines.h"

static const uint32_t ln_group_vec4[] = {
#include "layer_norm_group_vec4.inc"
};
static const uint32_t ln_group_vec1[] = {
#include "layer_norm_group_vec1.inc"
};
static const uint32_t ln_subgroup_vec4[] = {
#include "layer_norm_subgroup_vec4.inc"
};
static const uint32_t ln_subgroup_vec1[] = {
#include "layer_norm_subgroup_vec1.inc"
};
static const uint32_t ln_stream_vec4[] = {
#include "layer_norm_stream_vec4.inc"
};
static const uint32_t ln_stream_vec1[] = {
#include "layer_norm_stream_vec1.inc"
};
static const uint32_t ln_split_vec4[] = {
#include "layer_norm_split_vec4.inc"
};
static const uint32_t ln_split_vec1[] = {
#include "layer_norm_split_vec1.inc"
};
static const uint32_t ln_split64_vec4[] = {
#include "layer_norm_split64_vec4.inc"
};
static const uint32_t ln_split64_vec1[] = {
#include "layer_norm_split64_vec1.inc"
};
static const uint32_t ln_split64sm_vec4[] = {
#include "layer_norm_split64sm_vec4.inc"
};
static const uint32_t ln_split64sm_vec1[] = {
#include "layer_norm_split64sm_vec1.inc"
};
static const uint32_t ln_row_vec4[] = {
#include "layer_norm_row_vec4.inc"
};
static const uint32_t ln_row_vec1[] = {
#include "layer_norm_row_vec1.inc"
};
static const uint32_t copy_spv[] = {
#include "copy.inc"
};
static const uint32_t fill_spv[] = {
#include "fill.inc"
};
static const uint32_t matmul_spv[] = {
#include "matmul.inc"
};
static const uint32_t ew_vec4[] = {
#include "elementwise_vec4.inc"
};
static const uint32_t ew_vec1[] = {
#include "elementwise_vec1.inc"
};
static const uint32_t softmax_vec4[] = {
#include "softmax_vec4.inc"
};
static const uint32_t softmax_vec1[] = {
#include "softmax_vec1.inc"
};
static const uint32_t sum_vec4[] = {
#include "sum_vec4.inc"
};
static const uint32_t sum_vec1[] = {
#include "sum_vec1.inc"
};

#define LM_CODE(a) { a, sizeof a, #a }
static const struct { const uint32_t *code; size_t bytes; const char *name; } shader_table[LM_SH_COUNT] = {
    [LM_SH_LN_GROUP_VEC4] = LM_CODE(ln_group_vec4),
    [LM_SH_LN_GROUP_VEC1] = LM_CODE(ln_group_vec1),
    [LM_SH_LN_SUBGROUP_VEC4] = LM_CODE(ln_subgroup_vec4),
    [LM_SH_LN_SUBGROUP_VEC1] = LM_CODE(ln_subgroup_vec1),
    [LM_SH_LN_STREAM_VEC4] = LM_CODE(ln_stream_vec4),
    [LM_SH_LN_STREAM_VEC1] = LM_CODE(ln_stream_vec1),
    [LM_SH_LN_SPLIT_VEC4] = LM_CODE(ln_split_vec4),
    [LM_SH_LN_SPLIT_VEC1] = LM_CODE(ln_split_vec1),
    [LM_SH_LN_SPLIT64_VEC4] = LM_CODE(ln_split64_vec4),
    [LM_SH_LN_SPLIT64_VEC1] = LM_CODE(ln_split64_vec1),
    [LM_SH_LN_SPLIT64SM_VEC4] = LM_CODE(ln_split64sm_vec4),
    [LM_SH_LN_SPLIT64SM_VEC1] = LM_CODE(ln_split64sm_vec1),
    [LM_SH_LN_ROW_VEC4] = LM_CODE(ln_row_vec4),
    [LM_SH_LN_ROW_VEC1] = LM_CODE(ln_row_vec1),
    [LM_SH_COPY] = LM_CODE(copy_spv),
    [LM_SH_FILL] = LM_CODE(fill_spv),
    [LM_SH_MATMUL] = LM_CODE(matmul_spv),
    [LM_SH_EW_VEC4] = LM_CODE(ew_vec4), [LM_SH_EW_VEC1] = LM_CODE(ew_vec1),
    [LM_SH_SOFTMAX_VEC4] = LM_CODE(softmax_vec4), [LM_SH_SOFTMAX_VEC1] = LM_CODE(softmax_vec1),
    [LM_SH_SUM_VEC4] = LM_CODE(sum_vec4), [LM_SH_SUM_VEC1] = LM_CODE(sum_vec1),
};

const char *lm_shader_name(lm_shader_id id) { return shader_table[id].name; }

const uint32_t *lm_shader_code(lm_shader_id id, size_t *bytes) {
    *bytes = shader_table[id].bytes;
    return shader_table[id].code;
}
