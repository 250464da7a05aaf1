/* Row kernels (softmax, sum/mean) over the last dimension: a workgroup per row, or a
 * subgroup per row for short rows (shaders/common/rows.glsl), rows folded onto a 2-D grid.
 * Shared shape checks, the choice of form and workgroup size, and the recording. */
#ifndef LUMUS_OPS_ROWS_H
#define LUMUS_OPS_ROWS_H

#include "ops.h"

typedef struct lm_row_plan {
    int vec;            /* 4: vec4 loads (d a multiple of 4), else 1 */
    uint32_t n;         /* vectors per row */
    uint32_t wg;        /* threads per workgroup */
    uint32_t items;     /* vectors per thread a kernel may hold in registers */
    uint32_t rows_per_group;   /* 1: a workgroup per row; more: a subgroup per row */
} lm_row_plan;

/* The row length d and row count of x (argument 1); raises for d >= 2^31. */
void lm_rows_of(lua_State *L, const lm_tensor *x, int64_t *d, int64_t *rows);

/* Checks the options at argument `arg` of a row op over x: {dim=, out=}, and keepdim=
 * when `reduce`. dim may be the last dimension (1-based) or -1; other dimensions raise
 * "only the last dimension is supported". Returns keepdim (0 when not given). */
int lm_rows_options(lua_State *L, int arg, const lm_tensor *x, int reduce);

/* The plans of softmax and of sum/mean for rows of d on this device. */
lm_row_plan lm_plan_softmax(const lm_context *ctx, int64_t d);
lm_row_plan lm_plan_sum(const lm_context *ctx, int64_t d);

/* Records a row kernel over x (rows of d) into y with the plan and push constants. */
void lm_record_rows(lua_State *L, const char *op, lm_shader_id shader, const lm_row_plan *c,
                    int64_t rows, void *push, uint32_t push_bytes, uint32_t *groups_x,
                    lm_tensor *x, lm_tensor *y);

#endif
