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

/* Threads per row aiming at `target` vectors each, at most `max_items` held; rows of at
 * most 4 vectors per lane of the smallest subgroup take a subgroup each. */
lm_row_plan lm_plan_rows(const lm_context *ctx, int64_t d, uint32_t target, uint32_t max_items);

/* The plan softmax uses for rows of d (softmax.c). */
lm_row_plan lm_plan_softmax(const lm_context *ctx, int64_t d);

/* Records a row kernel over x (rows of d) into y with the plan and push constants. */
void lm_record_rows(lua_State *L, const char *op, lm_shader_id shader, const lm_row_plan *c,
                    int64_t rows, void *push, uint32_t push_bytes, uint32_t *groups_x,
                    lm_tensor *x, lm_tensor *y);

#endif
