/* Recording of the elementwise kernel (shaders/elementwise.comp): which form runs (vec4
 * over plain operands, the repeated-row form, or the strided form), its grid, and the
 * argument helpers the elementwise ops share. */
#include "elementwise.h"
#include <lauxlib.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define EW_WG 256
#define EW_ND_WORDS 20          /* p.dims of the strided form */
#define U32_MAX 0xffffffffLL

_Static_assert(LM_EW_F32 == LM_FLOAT32 && LM_EW_F16 == LM_FLOAT16 && LM_EW_BF16 == LM_BFLOAT16
               && LM_EW_BOOL == LM_BOOL, "the shader's type codes are lm_dtype's");

int lm_ew_float_dtype(lm_dtype d) { return d == LM_FLOAT32 || d == LM_FLOAT16 || d == LM_BFLOAT16; }

float lm_ew_float(double v) {
    /* Converting a double beyond float's range is undefined in C: round by hand there
     * (values from 2^128 - 2^103 up round to infinity). */
    const double overflow = ldexp(1.0, 128) - ldexp(1.0, 103);
    if (v >= overflow) return INFINITY;
    if (v <= -overflow) return -INFINITY;
    if (v > FLT_MAX) return FLT_MAX;
    if (v < -FLT_MAX) return -FLT_MAX;
    return (float)v;
}

void lm_ew_check_float(lua_State *L, int argn, const lm_tensor *t) {
    if (!lm_ew_float_dtype(t->dtype))
        lm_argerror(L, argn, "dtype %s is not supported (float32, float16 or bfloat16)", lm_dtype_name(t->dtype));
}

void lm_ew_check_same_dtype(lua_State *L, int argn, const lm_tensor *a, const lm_tensor *b) {
    if (a->dtype != b->dtype)
        lm_argerror(L, argn, "dtypes %s and %s differ (convert with :to())", lm_dtype_name(a->dtype),
                    lm_dtype_name(b->dtype));
}

lm_tensor *lm_ew_push_result(lua_State *L, int argn, lm_context *ctx, lm_dtype dtype, int ndim,
                             const int64_t *shape, const lm_operands *in) {
    if (!lua_isnoneornil(L, argn) && !lua_istable(L, argn)) lm_typeerror(L, argn, "options table");
    lm_push_option(L, argn, "out");
    int given = !lua_isnil(L, -1);
    lua_pop(L, 1);
    lm_tensor *out;
    if (given) {
        out = lm_push_out(L, argn, ctx, ndim, shape, in, 1);
        if (out->dtype != dtype)
            lm_argerror(L, argn, "out must be %s, got %s", lm_dtype_name(dtype), lm_dtype_name(out->dtype));
        return out;
    }
    out = lm_push_tensor_dtype(L, ctx, dtype, ndim, shape);
    for (int i = 0; i < LM_LAUNCH_TENSORS; i++)
        if (in->t[i] && !in->t[i]->storage)
            luaL_error(L, "%s: %s has been freed during the call", lm_fname(L), in->name[i]);
    return out;
}

/* NVIDIA's float32 -> float16 conversion rounds to nearest even and keeps subnormals, as
 * the shader's half_bits does in software (shaders/elementwise.comp, HW_HALF). */
#define LM_VENDOR_NVIDIA 0x10DEu

/* The shader's HW_HALF: 1 where float16 results use the device's packHalf2x16. */
static uint32_t hw_half(const lm_context *ctx) {
    if (ctx->ew_hw_half) return ctx->ew_hw_half == 1;
    return ctx->props.vendorID == LM_VENDOR_NVIDIA;
}

/* The shader's FUSED_FMA: 1 where fma rounds once (NVIDIA compiles it to FFMA). */
static uint32_t fused_fma(const lm_context *ctx) {
    if (ctx->ew_fused_fma) return ctx->ew_fused_fma == 1;
    return ctx->props.vendorID == LM_VENDOR_NVIDIA;
}

/* A boolean option of tune.elementwise into *setting: 0 (absent: the device default),
 * 1 (true) or 2 (false). */
static void tri_option(lua_State *L, const char *key, int *setting) {
    int v = lm_option_boolean(L, 1, key, -1);
    *setting = v < 0 ? 0 : v ? 1 : 2;
}

/* tune.elementwise([{hw_half = bool, fused_fma = bool}]) -> the settings: whether
 * float16 results are packed by the device's conversion or by the shader's software
 * rounding, and whether pow (and sqrt) take exact products from fma or from Dekker's
 * split (each by default on NVIDIA devices); an absent key restores its default. A
 * device whose fma is not fused gives inaccurate pow with fused_fma = true. */
int lm_op_elementwise_config(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    static const char *const known[] = { "hw_half", "fused_fma", NULL };
    if (lm_check_options(L, 1, known)) {
        tri_option(L, "hw_half", &ctx->ew_hw_half);
        tri_option(L, "fused_fma", &ctx->ew_fused_fma);
    }
    lua_createtable(L, 0, 2);
    lua_pushboolean(L, (int)hw_half(ctx));
    lua_setfield(L, -2, "hw_half");
    lua_pushboolean(L, (int)fused_fma(ctx));
    lua_setfield(L, -2, "fused_fma");
    return 1;
}

/* float32 pow takes the shader's VOTE variants where the device has subgroup votes. */
static int pow_vote(const lm_context *ctx, lm_ew_op op, uint32_t dtype) {
    return (op == LM_EW_POW || op == LM_EW_RPOW) && dtype == LM_EW_F32 && ctx->subgroup_vote;
}

/* The op's family (LM_EW_FAM_*): which of the shader's variants holds its code; the
 * shader's apply() lists the same ops under each family. */
static int ew_family(lm_ew_op op) {
    switch (op) {
    case LM_EW_EXP: case LM_EW_LOG: case LM_EW_EXPM1: case LM_EW_LOG1P: case LM_EW_LOG2:
    case LM_EW_LOG10: case LM_EW_EXP2: case LM_EW_TANH: case LM_EW_SIGMOID: case LM_EW_SILU:
        return LM_EW_FAM_EXPLOG;
    case LM_EW_POW: case LM_EW_RPOW:
        return LM_EW_FAM_POW;
    case LM_EW_SIN: case LM_EW_COS: case LM_EW_TAN:
        return LM_EW_FAM_TRIG;
    case LM_EW_ATAN: case LM_EW_ASIN: case LM_EW_ACOS: case LM_EW_ATAN2: case LM_EW_RATAN2:
    case LM_EW_SINH: case LM_EW_COSH: case LM_EW_ASINH: case LM_EW_ACOSH: case LM_EW_ATANH:
        return LM_EW_FAM_ARC;
    case LM_EW_GELU_TANH: case LM_EW_GELU_ERF: case LM_EW_GELU_TANH_GRAD: case LM_EW_GELU_ERF_GRAD:
    case LM_EW_ERF:
        return LM_EW_FAM_ERF;
    default:
        return LM_EW_FAM_BASIC;
    }
}

/* The shader variant for an op: the form (contiguous vec4s, floats, or strided) of its
 * family; float32 pow's vote variants where pow_vote holds. */
enum { EW_FORM_VEC4, EW_FORM_VEC1, EW_FORM_ND };
static lm_shader_id ew_shader(const lm_context *ctx, lm_ew_op op, uint32_t dtype, int form) {
    static const lm_shader_id variants[LM_EW_FAMILIES][3] = {
        [LM_EW_FAM_BASIC] = { LM_SH_EW_VEC4_BASIC, LM_SH_EW_VEC1_BASIC, LM_SH_EW_ND_BASIC },
        [LM_EW_FAM_EXPLOG] = { LM_SH_EW_VEC4_EXPLOG, LM_SH_EW_VEC1_EXPLOG, LM_SH_EW_ND_EXPLOG },
        [LM_EW_FAM_POW] = { LM_SH_EW_VEC4_POW, LM_SH_EW_VEC1_POW, LM_SH_EW_ND_POW },
        [LM_EW_FAM_TRIG] = { LM_SH_EW_VEC4_TRIG, LM_SH_EW_VEC1_TRIG, LM_SH_EW_ND_TRIG },
        [LM_EW_FAM_ARC] = { LM_SH_EW_VEC4_ARC, LM_SH_EW_VEC1_ARC, LM_SH_EW_ND_ARC },
        [LM_EW_FAM_ERF] = { LM_SH_EW_VEC4_ERF, LM_SH_EW_VEC1_ERF, LM_SH_EW_ND_ERF },
    };
    if (form != EW_FORM_VEC1 && pow_vote(ctx, op, dtype))
        return form == EW_FORM_VEC4 ? LM_SH_EW_VEC4_VOTE_POW : LM_SH_EW_ND_VOTE_POW;
    return variants[ew_family(op)][form];
}

/* The operands an op reads: 1, 2 or 3 (the shader's ARITY, the same rule). */
static int op_arity(lm_ew_op op) {
    switch (op) {
    case LM_EW_WHERE: case LM_EW_CLAMP: return 3;
    case LM_EW_ADD: case LM_EW_SUB: case LM_EW_MUL: case LM_EW_DIV: case LM_EW_RSUB: case LM_EW_RDIV:
    case LM_EW_POW: case LM_EW_RPOW: case LM_EW_MAXIMUM: case LM_EW_MINIMUM:
    case LM_EW_ATAN2: case LM_EW_RATAN2:
    case LM_EW_EQ: case LM_EW_NE: case LM_EW_LT: case LM_EW_LE: case LM_EW_GT: case LM_EW_GE:
    case LM_EW_GELU_TANH_GRAD: case LM_EW_GELU_ERF_GRAD:
        return 2;
    default: return 1;
    }
}

/* Elements per vector of the vec4 form (the shader's EPV): 8 for float16/bfloat16 data
 * unless b repeats, else `vec`. */
static uint64_t vec_elems(lm_dtype d, uint32_t mode, int vec) {
    return vec == 4 && d != LM_FLOAT32 && mode != LM_EW_BCAST ? 8u : (uint64_t)vec;
}

/* Vectors per thread: 16 bytes of each operand in flight 4 times (8 bytes 8 times for
 * 16-bit data in 4-element vectors). */
static uint32_t unroll_for(lm_dtype d, uint64_t elems) { return d == LM_FLOAT32 || elems == 8 ? 4u : 8u; }

/* The vec4 (vec = 4) or float (vec = 1, float32 only) form: a plain of the result's
 * shape; b plain of the same (LM_EW_SAME), plain and repeated (LM_EW_BCAST), plain with
 * one element per run of vectors (LM_EW_COLUMN, vec 4), or the number `scalar`
 * (LM_EW_SCALAR); c `third` (plain, of the result's shape) or the number scalar2. */
static void record_vec(lua_State *L, const lm_ew_call *c, lm_ew_op op, lm_tensor *a, lm_tensor *b,
                       lm_tensor *third, float scalar, float scalar2, uint32_t mode, int vec) {
    lm_context *ctx = c->out->storage->ctx;
    uint64_t elems = vec_elems(c->dtype, mode, vec);
    uint32_t unroll = unroll_for(c->dtype, elems);
    uint64_t nv = (uint64_t)c->out->numel / elems;
    uint64_t per_group = (uint64_t)EW_WG * unroll;
    uint64_t period = mode == LM_EW_BCAST ? (uint64_t)b->numel / (uint64_t)vec
                    : mode == LM_EW_COLUMN ? (uint64_t)c->out->numel / (uint64_t)b->numel / elems : 1;
    struct {
        uint64_t a, b, dst, n, period, wg_mod, c, wg_div;
        float scalar, scalar2;
        uint32_t groups_x, pad;
    } pc = {
        .a = lm_tensor_address(a),
        .b = b ? lm_tensor_address(b) : lm_tensor_address(a),   /* never read without b */
        .dst = lm_tensor_address(c->out), .n = (uint64_t)c->out->numel, .period = period,
        .wg_mod = EW_WG % period, .c = third ? lm_tensor_address(third) : lm_tensor_address(a),
        .wg_div = EW_WG / period,
        .scalar = scalar, .scalar2 = scalar2,
    };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (nv + per_group - 1) / per_group, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = c->name, .any_dtype = 1, .shader = ew_shader(ctx, op, (uint32_t)c->dtype, vec == 1 ? EW_FORM_VEC1 : EW_FORM_VEC4),
        .spec = { EW_WG, op, mode, (uint32_t)c->dtype, unroll, third != NULL, hw_half(ctx), fused_fma(ctx) },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { a, b, third }, .writes = { c->out },
    });
}

/* The strided form's view of the operands: the result's shape with size-1 dimensions
 * dropped and neighbours merged where every operand steps over them as one (outer
 * stride = inner stride * inner size; the contiguous result always does). */
typedef struct nd_plan {
    int ndim;
    int64_t size[LM_MAX_DIMS];
    int64_t stride[3][LM_MAX_DIMS];
} nd_plan;

static void plan_nd(int arity, lm_tensor *const *t, const lm_tensor *out, nd_plan *p) {
    int64_t bs[3][LM_MAX_DIMS] = { { 0 } };
    for (int k = 0; k < arity; k++)
        if (t[k]) lm_broadcast_strides(t[k], out->ndim, out->shape, bs[k]);
    int n = 0;
    for (int i = 0; i < out->ndim; i++) {
        int64_t s = out->shape[i];
        if (s == 1) continue;
        int merge = n > 0;
        for (int k = 0; merge && k < arity; k++) merge = p->stride[k][n - 1] == bs[k][i] * s;
        if (merge) {
            p->size[n - 1] *= s;
            for (int k = 0; k < arity; k++) p->stride[k][n - 1] = bs[k][i];
            continue;
        }
        p->size[n] = s;
        for (int k = 0; k < 3; k++) p->stride[k][n] = k < arity ? bs[k][i] : 0;
        n++;
    }
    if (n == 0) {
        p->size[0] = 1;
        for (int k = 0; k < 3; k++) p->stride[k][0] = 0;
        n = 1;
    }
    p->ndim = n;
}

static int nd_max_dims(int arity) {
    int d = EW_ND_WORDS / (1 + arity);
    return d < LM_MAX_DIMS ? d : LM_MAX_DIMS;
}

/* The strided form: out (plain) = op(operands) with `dtype` as the shader's DT. */
static void record_nd(lua_State *L, const char *name, lm_ew_op op, uint32_t dtype, int arity,
                      lm_tensor *const *t, const float *scalar, lm_tensor *out, const nd_plan *plan) {
    lm_context *ctx = out->storage->ctx;
    struct {
        uint64_t operand[3], dst, n;
        uint32_t ndim_flags, groups_x;
        uint32_t dims[EW_ND_WORDS];
    } pc = { .dst = lm_tensor_address(out), .n = (uint64_t)out->numel, .ndim_flags = (uint32_t)plan->ndim };
    _Static_assert(sizeof pc <= LM_PUSH_BYTES, "elementwise push constants");
    for (int k = 0; k < arity; k++) {
        if (t[k]) {
            pc.operand[k] = lm_tensor_address(t[k]);
        } else {
            uint32_t bits;
            memcpy(&bits, &scalar[k], sizeof bits);
            pc.operand[k] = bits;
            pc.ndim_flags |= 0x100u << k;
        }
    }
    int w = 1 + arity;
    for (int d = 0; d < plan->ndim; d++) {
        if (plan->size[d] > U32_MAX)
            luaL_error(L, "%s: a dimension of 2^32 elements or more that cannot be merged with its neighbours is not "
                       "supported", name);
        pc.dims[d * w] = (uint32_t)plan->size[d];
        for (int k = 0; k < arity; k++) {
            if (plan->stride[k][d] > U32_MAX)
                luaL_error(L, "%s: a view with a stride of 2^32 elements or more is not supported", name);
            pc.dims[d * w + 1 + k] = (uint32_t)plan->stride[k][d];
        }
    }
    uint64_t quads = ((uint64_t)out->numel + 3) / 4;
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (quads + EW_WG - 1) / EW_WG, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = name, .any_dtype = 1, .shader = ew_shader(ctx, op, dtype, EW_FORM_ND), .spec = { EW_WG, op, 0, dtype, 1, 0, hw_half(ctx), fused_fma(ctx) },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { t[0], arity > 1 ? t[1] : NULL, arity > 2 ? t[2] : NULL }, .writes = { out },
    });
}

/* Is t contiguous over the result's shape in the plan (the strides of a contiguous
 * tensor of that shape)? */
static int plan_contiguous(const nd_plan *p, int k) {
    int64_t step = 1;
    for (int d = p->ndim - 1; d >= 0; d--) {
        if (p->stride[k][d] != step) return 0;
        step *= p->size[d];
    }
    return 1;
}

static int plain_full(const lm_tensor *t, const lm_tensor *out) {
    return t && t->numel == out->numel && lm_tensor_is_plain(t);
}

/* Is t's shape, without leading size-1 dimensions, a trailing part of out's? */
static int is_trailing(const lm_tensor *t, const lm_tensor *out) {
    int first = 0;
    while (first < t->ndim - 1 && t->shape[first] == 1) first++;
    int n = t->ndim - first;
    if (n > out->ndim) return 0;
    for (int i = 1; i <= n; i++)
        if (t->shape[t->ndim - i] != out->shape[out->ndim - i]) return 0;
    return 1;
}

/* The elements of out each element of t stands for where t's shape is a leading part of
 * out's followed by size-1 dimensions (a [R, 1] column against [R, D]: D), else 0. */
static int64_t column_run(const lm_tensor *t, const lm_tensor *out) {
    int lead = out->ndim - t->ndim;
    int split = 0;              /* t's dimensions past the last that is not 1, in out's terms */
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) split = lead + i + 1;
    int64_t run = 1;
    for (int i = 0; i < out->ndim; i++) {
        if (i >= split) run *= out->shape[i];
        else if (i < lead ? out->shape[i] != 1 : t->shape[i - lead] != out->shape[i]) return 0;
    }
    return run;
}

void lm_record_ew(lua_State *L, const lm_ew_call *c) {
    lm_tensor *t[3] = { c->t[0], c->t[1], c->t[2] };
    float s[3] = { c->scalar[0], c->scalar[1], c->scalar[2] };
    lm_tensor *out = c->out;
    lm_ew_op op = c->op;
    int arity = op_arity(op);
    /* A full-shape tensor first, where the op can be swapped (a number - t, bias + x). */
    if (arity == 2 && t[1] && (!t[0] || (t[1]->numel == out->numel && t[0]->numel != out->numel))) {
        lm_tensor *tt = t[0]; t[0] = t[1]; t[1] = tt;
        float ss = s[0]; s[0] = s[1]; s[1] = ss;
        op = c->reversed;
    }
    /* The vec4 form: every tensor operand plain and of the result's shape (b may also be
     * a repeated trailing part, below). */
    int vec_ok = plain_full(t[0], out) && (arity < 3 || !t[2] || plain_full(t[2], out));
    lm_tensor *third = arity > 2 ? t[2] : NULL;
    if (vec_ok && (arity < 2 || !t[1] || plain_full(t[1], out))) {
        record_vec(L, c, op, t[0], arity > 1 ? t[1] : NULL, third, s[1], s[2], t[1] ? LM_EW_SAME : LM_EW_SCALAR, 4);
        return;
    }
    if (vec_ok && arity == 2 && lm_tensor_is_plain(t[1]) && is_trailing(t[1], out)) {
        int vec = t[1]->numel % 4 ? 1 : 4;
        if (vec == 4 || (c->dtype == LM_FLOAT32 && out->dtype == LM_FLOAT32)) {   /* vec 1: floats only */
            record_vec(L, c, op, t[0], t[1], NULL, 0.0f, s[2], LM_EW_BCAST, vec);
            return;
        }
    }
    if (vec_ok && arity == 2 && lm_tensor_is_plain(t[1])) {
        int64_t run = column_run(t[1], out);
        if (run > 1 && (uint64_t)run % vec_elems(c->dtype, LM_EW_COLUMN, 4) == 0) {
            record_vec(L, c, op, t[0], t[1], NULL, 0.0f, s[2], LM_EW_COLUMN, 4);
            return;
        }
    }
    nd_plan plan;
    plan_nd(arity, t, out, &plan);
    int top = lua_gettop(L);
    if (plan.ndim > nd_max_dims(arity)) {
        /* Too many dimensions for the push constants: each tensor operand that is not
         * contiguous over the result becomes a contiguous copy of its broadcast view (a
         * unary copy fits every rank), then everything merges into one dimension. */
        for (int k = 0; k < arity; k++) {
            if (!t[k] || plan_contiguous(&plan, k)) continue;
            lm_tensor *src = t[k];
            luaL_checkstack(L, 2, "elementwise copies");
            lm_tensor *copy = lm_push_tensor_dtype(L, out->storage->ctx, src->dtype, out->ndim, out->shape);
            nd_plan one;
            plan_nd(1, &src, copy, &one);
            record_nd(L, c->name, LM_EW_COPY, (uint32_t)src->dtype, 1, &src, s, copy, &one);
            t[k] = copy;     /* on the stack until recorded (the stream keeps its memory after) */
        }
        plan_nd(arity, t, out, &plan);
    }
    record_nd(L, c->name, op, (uint32_t)c->dtype, arity, t, s, out, &plan);
    lua_settop(L, top);      /* the op's result on top again */
}
