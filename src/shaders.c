/* The SPIR-V of every shader variant of shaders/variants.def. The Makefile compiles and
 * validates each and generates shader_code.inc, one array code_<ID>[] per variant. */
#include "pipelines.h"

#include "shader_code.inc"

static const struct { const uint32_t *code; size_t bytes; const char *name; } shader_table[LM_SH_COUNT] = {
#define LM_SHADER(id, source, defines) [LM_SH_##id] = { code_##id, sizeof code_##id, #id },
#include "../shaders/variants.def"
#undef LM_SHADER
};

const char *lm_shader_name(lm_shader_id id) { return shader_table[id].name; }

const uint32_t *lm_shader_code(lm_shader_id id, size_t *bytes) {
    *bytes = shader_table[id].bytes;
    return shader_table[id].code;
}

int lm_shader_built(lm_shader_id id) { return shader_table[id].bytes >= 20; }   /* a SPIR-V header is 5 words */
