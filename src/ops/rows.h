/* Row kernels (softmax, log_softmax) over the last dimension: a workgroup per row, or a
 * subgroup per row for short rows (shaders/common/rows.glsl), rows folded onto a 2-D grid.
 * Shared shape checks, the choice of form and workgroup size, and the recording; and what
 * the column kernels of reductions and softmax over any dimension share (dims, plans). */
#ifndef LUMUS_OPS_ROWS_H
#define LUMUS_OPS_ROWS_H

#include "ops.h"

typedef struct lm_row_plan {
    int vec;            /* 4: vec4 loads (d a multiple of 4, or any_d), else 1 */
    int any_d;          /* the aligned vectors covering a row of any d (common/rows.glsl's ANY_D) */
    uint32_t n;         /* vectors per row (any_d: the most that cover one) */
    uint32_t wg;        /* threads per workgroup */
    uint32_t items;     /* vectors per thread a kernel may hold in registers */
    uint32_t rows_per_group;   /* 1: a workgroup per row; more: a subgroup per row */
} lm_row_plan;

/* opts.dim of the options at argument `arg` (already checked) for x: 1-based, negative
 * from the end; returns it 0-based, or `absent` when not given. Out of range raises
 * "dim 3 is out of range for a 2-D tensor (...)" naming the argument. */
int lm_dim_option(lua_State *L, int arg, const lm_tensor *x, int absent);

/* x seen as [outer, r, inner] about dimension dim (0-based; -1: all elements as one
 * row). Raises when r >= 2^31 or outer or inner >= 2^32. */
typedef struct lm_dim_view { uint32_t outer, r, inner; } lm_dim_view;
lm_dim_view lm_dim_view_of(lua_State *L, const lm_tensor *x, int dim);

/* The column kernels (shaders/reduce.comp, softmax_cols.comp): a workgroup of wg threads
 * as cols columns (o, c) by wg / cols lanes along r (`units` loads long: elements, or
 * vec4s); groups = col_groups workgroups cover the outer * inner columns. For inner > 1,
 * cols is inner's power of two up to wg, shrunk (to no fewer than min_bytes of adjacent
 * elements) while the grid is smaller than the device wants in flight; for inner == 1
 * (rows), the lanes are what the row needs (per_lane_scale times the usual units per lane
 * where the usual would give at least a subgroup of lanes, never fewer than a subgroup
 * then; 1: the usual) and the other threads take more rows. */
typedef struct lm_col_plan { uint32_t wg, cols, col_groups; uint64_t groups; } lm_col_plan;
lm_col_plan lm_plan_cols(const lm_context *ctx, lm_dim_view v, unsigned elem_bytes, uint32_t units,
                          unsigned min_bytes, unsigned per_lane_scale);
/* min_bytes for the reductions and softmax (which split r rather than narrow further:
 * a whole 128-byte line per row step) and for a softmax whose r is too short to split
 * (one 32-byte sector). */
#define LM_COL_MIN_BYTES_REDUCE 128
#define LM_COL_MIN_BYTES_SOFTMAX 32
/* Workgroups the device wants in flight for a streaming kernel. */
uint64_t lm_groups_wanted(const lm_context *ctx);

/* Raises unless x (argument 1) is float32, float16 or bfloat16 and the device can
 * read its dtype. */
void lm_check_float_input(lua_State *L, const lm_tensor *x, const lm_context *ctx);
/* Pushes a result of an op whose options are at argument argn: opts[key] when given
 * (plain, of this shape and dtype, on ctx, not overlapping x unless in_place and the same
 * elements), else a new tensor. */
lm_tensor *lm_push_result(lua_State *L, int argn, const char *key, lm_context *ctx, lm_dtype dtype,
                          int ndim, const int64_t *shape, const lm_tensor *x, int in_place);

/* The plan of softmax for rows of d on this device; any_d_ok: the kernel takes ANY_D, used
 * for d not a multiple of 4 unless tune.rows{scalar = true}. */
lm_row_plan lm_plan_softmax(const lm_context *ctx, int64_t d, int any_d_ok);

/* Records a row kernel over x (rows of d) into y with the plan and push constants (x's
 * dtype checked by the caller: lm_check_float_input). */
void lm_record_rows(lua_State *L, const char *op, lm_shader_id shader, const lm_row_plan *c,
                    int64_t rows, void *push, uint32_t push_bytes, uint32_t *groups_x,
                    lm_tensor *x, lm_tensor *y);

#endif
