/* Cross entropy over the rows of logits [N, C] with int32 1-based class targets, as one
 * fused log-softmax + NLL kernel each way (shaders/cross_entropy.comp):
 *   lumus.cross_entropy_forward(logits, target [, {ignore_index = -100}])
 *     -> loss [N], logsumexp [N], weight [N] (1 for rows that count toward a mean, else 0)
 *   lumus.cross_entropy_backward(dloss, logits, target, logsumexp [, {ignore_index =}])
 *     -> dlogits [N, C]
 * lumus.cross_entropy (lua/lumus/loss.lua) reduces the per-row losses. A target outside
 * 1..C (and not ignore_index) gives a NaN loss and NaN gradient row: the kernel cannot
 * raise without reading the targets back to the host. */
#include "ops.h"
#include <lauxlib.h>
#include <string.h>

#define CE_WG 256
#define U32_MAX 0xffffffffULL
#define DEFAULT_IGNORE_INDEX (-100)

static const char *const ce_options[] = { "ignore_index", NULL };

static void check_vector(lua_State *L, int arg, const lm_tensor *t, const char *what, lm_dtype dtype, int64_t n) {
    if (t->dtype != dtype)
        lm_argerror(L, arg, "%s must be %s, got %s", what, lm_dtype_name(dtype), lm_dtype_name(t->dtype));
    if (t->ndim != 1 || t->shape[0] != n) {
        char s[256];
        lm_shape_string(t->shape, t->ndim, s, sizeof s);
        lm_argerror(L, arg, "%s must have shape [%I] (the rows of logits), got %s", what, (LUAI_UACINT)n, s);
    }
}

static void check_logits(lua_State *L, int arg, const lm_tensor *x) {
    if (x->dtype != LM_FLOAT32)
        lm_argerror(L, arg, "logits must be float32, got %s", lm_dtype_name(x->dtype));
    if (x->ndim != 2) {
        char s[256];
        lm_shape_string(x->shape, x->ndim, s, sizeof s);
        lm_argerror(L, arg, "logits must be a matrix [N, C], got shape %s", s);
    }
    if ((uint64_t)x->shape[0] > U32_MAX || (uint64_t)x->shape[1] > U32_MAX)
        luaL_error(L, "%s: N and C of 2^32 or more are not supported", lm_fname(L));
}

static int32_t ignore_index_of(lua_State *L, int arg) {
    lm_check_options(L, arg, ce_options);
    lua_Integer v = lm_option_integer(L, arg, "ignore_index", DEFAULT_IGNORE_INDEX);
    if (v < INT32_MIN || v > INT32_MAX)
        lm_argerror(L, arg, "ignore_index must fit int32, got %I", (LUAI_UACINT)v);
    return (int32_t)v;
}

static void same_ctx(lua_State *L, lm_context *ctx, const lm_tensor *t) {
    if (t->storage->ctx != ctx) luaL_error(L, "%s: tensors belong to different devices", lm_fname(L));
}

struct ce_push {
    uint64_t x, target, lse, a, b;
    uint32_t rows, cols;
    int32_t ignore_index;
    uint32_t groups_x;
};

static void record(lua_State *L, lm_context *ctx, const char *op, lm_shader_id shader, struct ce_push *pc,
                   lm_tensor *reads[4], lm_tensor *writes[3]) {
    uint32_t gy;
    pc->groups_x = lm_grid(L, ctx, pc->rows, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .any_dtype = 1, .shader = shader, .spec = { CE_WG },
        .push = pc, .push_bytes = sizeof *pc, .groups_x = pc->groups_x, .groups_y = gy,
        .reads = { reads[0], reads[1], reads[2], reads[3] }, .writes = { writes[0], writes[1], writes[2] },
    });
}

int lm_op_cross_entropy_forward(lua_State *L) {
    lm_tensor *x = lm_check_tensor(L, 1);
    lm_tensor *target = lm_check_tensor(L, 2);
    int32_t ignore = ignore_index_of(L, 3);
    check_logits(L, 1, x);
    int64_t n = x->shape[0];
    check_vector(L, 2, target, "target", LM_INT32, n);
    lm_context *ctx = x->storage->ctx;
    same_ctx(L, ctx, target);
    lua_settop(L, 3);
    lm_contiguous_inputs(L, 1, 2);
    int64_t shape[1] = { n };
    lm_tensor *loss = lm_push_tensor(L, ctx, 1, shape);
    lm_tensor *lse = lm_push_tensor(L, ctx, 1, shape);
    lm_tensor *weight = lm_push_tensor(L, ctx, 1, shape);
    x = lm_check_tensor(L, 1);
    target = lm_check_tensor(L, 2);
    loss = lm_check_tensor(L, 4);
    lse = lm_check_tensor(L, 5);
    weight = lm_check_tensor(L, 6);
    struct ce_push pc = {
        .x = lm_tensor_address(x), .target = lm_tensor_address(target), .lse = lm_tensor_address(lse),
        .a = lm_tensor_address(loss), .b = lm_tensor_address(weight),
        .rows = (uint32_t)n, .cols = (uint32_t)x->shape[1], .ignore_index = ignore,
    };
    record(L, ctx, "cross_entropy_forward", LM_SH_CROSS_ENTROPY_FWD, &pc,
           (lm_tensor *[4]){ x, target, NULL, NULL }, (lm_tensor *[3]){ loss, lse, weight });
    return 3;
}

int lm_op_cross_entropy_backward(lua_State *L) {
    lm_tensor *g = lm_check_tensor(L, 1);
    lm_tensor *x = lm_check_tensor(L, 2);
    lm_tensor *target = lm_check_tensor(L, 3);
    lm_tensor *lse = lm_check_tensor(L, 4);
    int32_t ignore = ignore_index_of(L, 5);
    check_logits(L, 2, x);
    int64_t n = x->shape[0];
    check_vector(L, 1, g, "dloss", LM_FLOAT32, n);
    check_vector(L, 3, target, "target", LM_INT32, n);
    check_vector(L, 4, lse, "logsumexp", LM_FLOAT32, n);
    lm_context *ctx = x->storage->ctx;
    same_ctx(L, ctx, g); same_ctx(L, ctx, target); same_ctx(L, ctx, lse);
    lua_settop(L, 5);
    lm_contiguous_inputs(L, 1, 4);
    lm_tensor *dx = lm_push_tensor(L, ctx, 2, x->shape);
    g = lm_check_tensor(L, 1);
    x = lm_check_tensor(L, 2);
    target = lm_check_tensor(L, 3);
    lse = lm_check_tensor(L, 4);
    dx = lm_check_tensor(L, 6);
    struct ce_push pc = {
        .x = lm_tensor_address(x), .target = lm_tensor_address(target), .lse = lm_tensor_address(lse),
        .a = lm_tensor_address(g), .b = lm_tensor_address(dx),
        .rows = (uint32_t)n, .cols = (uint32_t)x->shape[1], .ignore_index = ignore,
    };
    record(L, ctx, "cross_entropy_backward", LM_SH_CROSS_ENTROPY_BWD, &pc,
           (lm_tensor *[4]){ g, x, target, lse }, (lm_tensor *[3]){ dx, NULL, NULL });
    return 1;
}
