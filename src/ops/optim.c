/* Optimizer steps, one fused dispatch per parameter (shaders/optim.comp):
 *   lumus.sgd_step_(param, grad [, {momentum_buffer=, lr=, momentum=, dampening=,
 *                   nesterov=, weight_decay=, first=}])
 *   lumus.adam_step_(param, grad, {exp_avg=, exp_avg_sq= [, max_exp_avg_sq=], step=,
 *                    lr=, beta1=, beta2=, eps=, weight_decay=, decoupled=})
 * They update param and the state tensors in place (PyTorch's torch.optim.SGD, Adam and
 * AdamW for one parameter; lua/lumus/optim.lua holds the optimizer objects). State
 * tensors travel in the options table: they are written, and an options table is where
 * lumus passes tensors an op writes. The scalars are computed here in double precision
 * (bias corrections from `step`) and rounded once to float32 push constants.
 * All tensors are float32, plain (contiguous, aligned) and of one shape, and no two
 * share memory: every element is read and written by one thread. */
#include "ops.h"
#include <lauxlib.h>
#include <math.h>

#define OPTIM_WG 256

static const char *const sgd_options[] = {
    "momentum_buffer", "lr", "momentum", "dampening", "nesterov", "weight_decay", "first", NULL,
};
static const char *const adam_options[] = {
    "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step", "lr", "beta1", "beta2", "eps",
    "weight_decay", "decoupled", NULL,
};

/* Push constants of shaders/optim.comp. */
typedef struct optim_push {
    uint64_t param, grad, s1, s2, s3;
    uint64_t n;
    uint32_t groups_x, flags;
    float lr, wd, c1, c2, c3, c4, eps;
} optim_push;

/* opts[key], a number that is finite and >= 0 (< 1 with below_one); dflt when absent. */
static double scalar_option(lua_State *L, int arg, const char *key, double dflt, int below_one) {
    double v = (double)lm_option_number(L, arg, key, dflt);
    if (!(v >= 0.0) || !isfinite(v) || (below_one && !(v < 1.0)))
        lm_argerror(L, arg, "%s must be a finite number %s, got %f", key,
                    below_one ? "in [0, 1)" : ">= 0", (lua_Number)v);
    return v;
}

/* The tensor at slot idx (or NULL for nil) must be a live float32 plain tensor of
 * param's shape; `what` names it. */
static lm_tensor *check_operand(lua_State *L, int idx, int argn, const char *what, const lm_tensor *param) {
    lm_tensor *t = lm_opt_tensor(L, idx);
    if (!t) return NULL;
    if (t->dtype != LM_FLOAT32)
        lm_argerror(L, argn, "%s must be float32, got %s", what, lm_dtype_name(t->dtype));
    if (param) {
        int same = t->ndim == param->ndim;
        for (int i = 0; same && i < t->ndim; i++) same = t->shape[i] == param->shape[i];
        if (!same) {
            char a[96], b[96];
            lm_shape_string(t->shape, t->ndim, a, sizeof a);
            lm_shape_string(param->shape, param->ndim, b, sizeof b);
            lm_argerror(L, argn, "%s has shape %s, param %s", what, a, b);
        }
        if (t->storage->ctx != param->storage->ctx)
            luaL_error(L, "%s: tensors belong to different devices", lm_fname(L));
    }
    if (!lm_tensor_is_plain(t))
        lm_argerror(L, argn, "%s must be contiguous and 16-byte aligned", what);
    return t;
}

/* Slots: 1 param, 2 grad, then the state tensors pushed at `first_state`. Checks them
 * all (again: nothing in between may have freed one) and records the dispatch. */
static void record_step(lua_State *L, const char *op, lm_shader_id shader, int stateful,
                        int first_state, const char *const names[3], optim_push *pc) {
    lm_tensor *param = check_operand(L, 1, 1, "param", NULL);
    if (!param) lm_typeerror(L, 1, "tensor");
    lm_check_writable(L, 1, param, "param");
    lm_tensor *grad = check_operand(L, 2, 2, "grad", param);
    if (!grad) lm_typeerror(L, 2, "tensor");
    lm_tensor *all[5] = { param, grad, NULL, NULL, NULL };
    const char *all_names[5] = { "param", "grad", names[0], names[1], names[2] };
    for (int i = 0; i < 3; i++)
        if (names[i]) all[2 + i] = check_operand(L, first_state + i, 3, names[i], param);
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (all[i] && all[j] && lm_tensors_overlap(all[i], all[j]))
                lm_argerror(L, j < 2 ? 2 : 3, "%s and %s share memory", all_names[i], all_names[j]);
    lm_context *ctx = param->storage->ctx;
    pc->param = lm_tensor_address(param);
    pc->grad = lm_tensor_address(grad);
    pc->s1 = all[2] ? lm_tensor_address(all[2]) : 0;
    pc->s2 = all[3] ? lm_tensor_address(all[3]) : 0;
    pc->s3 = all[4] ? lm_tensor_address(all[4]) : 0;
    pc->n = (uint64_t)param->numel;
    if (param->numel == 0) return;
    uint64_t groups = ((uint64_t)param->numel + 4u * OPTIM_WG - 1) / (4u * OPTIM_WG);
    uint32_t gy;
    pc->groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .shader = shader, .spec = { OPTIM_WG, 0, 0 }, .stateful = stateful,
        .push = pc, .push_bytes = sizeof *pc, .groups_x = pc->groups_x, .groups_y = gy,
        .reads = { param, grad, all[2], all[3], all[4] },
        .writes = { param, all[2], all[3], all[4] },
    });
}

int lm_op_sgd_step_(lua_State *L) {
    lm_check_tensor(L, 1);
    lm_check_tensor(L, 2);
    int has_opts = lm_check_options(L, 3, sgd_options);
    double lr = scalar_option(L, 3, "lr", 1e-3, 0);
    double momentum = scalar_option(L, 3, "momentum", 0.0, 0);
    double dampening = scalar_option(L, 3, "dampening", 0.0, 0);
    double wd = scalar_option(L, 3, "weight_decay", 0.0, 0);
    int nesterov = lm_option_boolean(L, 3, "nesterov", 0);
    int first = lm_option_boolean(L, 3, "first", 0);
    lua_settop(L, 3);
    lm_push_option(L, 3, "momentum_buffer");           /* slot 4 */
    int has_buf = has_opts && !lua_isnil(L, 4);
    if (momentum != 0.0 && !has_buf)
        lm_argerror(L, 3, "momentum_buffer is needed when momentum is not 0");
    if (momentum == 0.0 && has_buf)
        lm_argerror(L, 3, "momentum_buffer given with momentum 0");
    if (nesterov && (momentum == 0.0 || dampening != 0.0))
        lm_argerror(L, 3, "nesterov needs a momentum and zero dampening");
    optim_push pc = {
        .flags = (has_buf ? 1u : 0u) | (nesterov ? 2u : 0u) | (first ? 4u : 0u),
        .lr = (float)lr, .wd = (float)wd, .c1 = (float)momentum, .c2 = (float)(1.0 - dampening),
    };
    const char *const names[3] = { has_buf ? "momentum_buffer" : NULL, NULL, NULL };
    record_step(L, "sgd_step_", LM_SH_OPTIM_SGD, 0, 4, names, &pc);
    lua_settop(L, 1);
    return 1;
}

int lm_op_adam_step_(lua_State *L) {
    lm_check_tensor(L, 1);
    lm_check_tensor(L, 2);
    if (!lm_check_options(L, 3, adam_options)) lm_typeerror(L, 3, "options table");
    double lr = scalar_option(L, 3, "lr", 1e-3, 0);
    double beta1 = scalar_option(L, 3, "beta1", 0.9, 1);
    double beta2 = scalar_option(L, 3, "beta2", 0.999, 1);
    double eps = scalar_option(L, 3, "eps", 1e-8, 0);
    double wd = scalar_option(L, 3, "weight_decay", 0.0, 0);
    int decoupled = lm_option_boolean(L, 3, "decoupled", 0);
    lua_Integer step = lm_option_integer(L, 3, "step", 0);
    if (step < 1) lm_argerror(L, 3, "step must be an integer >= 1 (the count including this step), got %I", step);
    lua_settop(L, 3);
    lm_push_option(L, 3, "exp_avg");                   /* slot 4 */
    lm_push_option(L, 3, "exp_avg_sq");                /* slot 5 */
    lm_push_option(L, 3, "max_exp_avg_sq");            /* slot 6 */
    if (lua_isnil(L, 4)) lm_argerror(L, 3, "exp_avg (a tensor of param's shape) is missing");
    if (lua_isnil(L, 5)) lm_argerror(L, 3, "exp_avg_sq (a tensor of param's shape) is missing");
    int amsgrad = !lua_isnil(L, 6);
    /* torch.optim.Adam: step_size = lr / (1 - beta1^step), denominator
     * sqrt(v) / sqrt(1 - beta2^step) + eps; AdamW scales param by 1 - lr * weight_decay. */
    double bc1 = 1.0 - pow(beta1, (double)step);
    double bc2 = 1.0 - pow(beta2, (double)step);
    optim_push pc = {
        .flags = (amsgrad ? 1u : 0u) | (decoupled ? 2u : 0u),
        .lr = (float)(lr / bc1), .wd = (float)(decoupled ? 1.0 - lr * wd : wd),
        .c1 = (float)(1.0 - beta1), .c2 = (float)beta2, .c3 = (float)(1.0 - beta2),
        .c4 = (float)sqrt(bc2), .eps = (float)eps,
    };
    if (bc1 == 0.0 || bc2 == 0.0)
        lm_argerror(L, 3, "beta1 and beta2 must be below 1 (bias corrections of 0)");
    const char *const names[3] = { "exp_avg", "exp_avg_sq", amsgrad ? "max_exp_avg_sq" : NULL };
    /* stateful: its push constants depend on the step count, which a capture would freeze */
    record_step(L, "adam_step_", LM_SH_OPTIM_ADAM, 1, 4, names, &pc);
    lua_settop(L, 1);
    return 1;
}
