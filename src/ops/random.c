/* Random numbers on the device from Philox4x32-10 (docs/random.md):
 * lumus.manual_seed, get_rng_state, set_rng_state, rand, randn, multinomial, and the
 * in-place t:uniform_(a, b), t:normal_(mean, std).
 *
 * The global generator is a seed (the Philox key) and an offset: every call that draws
 * numbers uses the offset as counter words 2 and 3 and advances it by one, so calls
 * never share a block, and element i of a call is word i % 4 of block i / 4. The state
 * lives in the Lua registry (one per lua_State, like the context) and needs no device. */
#include "ops.h"
#include "random.h"
#include <lauxlib.h>
#include <float.h>
#include <math.h>
#include <string.h>

#define RANDOM_WG 256
/* PyTorch's default seed, for a generator nobody seeded. */
#define DEFAULT_SEED UINT64_C(67280421310721)

typedef struct rng_state { uint64_t seed, offset; } rng_state;

static const char rng_key = 'r';   /* its address keys the state in the registry */

static rng_state *get_rng(lua_State *L) {
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &rng_key) == LUA_TUSERDATA) {
        rng_state *g = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return g;
    }
    lua_pop(L, 1);
    rng_state *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->seed = DEFAULT_SEED;
    g->offset = 0;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &rng_key);
    return g;
}

/* The seed and offset for one call's numbers; advances the generator. */
static rng_state take_rng(lua_State *L) {
    rng_state *g = get_rng(L);
    rng_state now = *g;
    g->offset++;
    return now;
}

/* lumus.manual_seed(n): n any integer (its 64 bits are the key); the offset restarts. */
int lm_op_manual_seed(lua_State *L) {
    lua_Integer n = lm_check_integer(L, 1);
    if (lua_gettop(L) > 1) lm_argerror(L, 2, "no more arguments expected (manual_seed takes one integer)");
    rng_state *g = get_rng(L);
    g->seed = (uint64_t)n;
    g->offset = 0;
    return 0;
}

/* lumus.get_rng_state() -> {seed = integer, offset = integer}. */
int lm_op_get_rng_state(lua_State *L) {
    rng_state *g = get_rng(L);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)g->seed);
    lua_setfield(L, -2, "seed");
    lua_pushinteger(L, (lua_Integer)g->offset);
    lua_setfield(L, -2, "offset");
    return 1;
}

/* lumus.set_rng_state(s): s as get_rng_state returns it; both fields required, any
 * integers (their 64 bits, as get_rng_state gives them back). */
int lm_op_set_rng_state(lua_State *L) {
    static const char *const known[] = { "offset", "seed", NULL };
    if (!lm_check_options(L, 1, known)) lm_argerror(L, 1, "expected a table {seed =, offset =} (from get_rng_state)");
    lm_push_option(L, 1, "seed");
    lm_push_option(L, 1, "offset");
    if (lua_isnil(L, -2)) lm_argerror(L, 1, "seed is missing");
    if (lua_isnil(L, -1)) lm_argerror(L, 1, "offset is missing");
    lua_pop(L, 2);
    lua_Integer seed = lm_option_integer(L, 1, "seed", 0);
    lua_Integer offset = lm_option_integer(L, 1, "offset", 0);
    rng_state *g = get_rng(L);
    g->seed = (uint64_t)seed;
    g->offset = (uint64_t)offset;
    return 0;
}

/* Uniform draws for a dtype: the top 24, 11 or 8 bits of a word (float32, float16,
 * bfloat16), which the dtype holds exactly. */
static uint32_t uniform_bits(lm_dtype d) { return d == LM_FLOAT16 ? 11 : d == LM_BFLOAT16 ? 8 : 24; }

/* Records t = draw * scale + shift over a plain float32 t (uniform draws of `bits` bits,
 * clamped to at most `upper`). */
static void record_random(lua_State *L, lm_tensor *t, int normal, uint32_t bits, float scale, float shift,
                          float upper, const char *op) {
    lm_context *ctx = t->storage->ctx;
    rng_state g = take_rng(L);
    struct {
        uint64_t dst, n;
        uint32_t key[2], offset[2];
        float scale, shift, upper;
        uint32_t drop;
        float unit;
        uint32_t groups_x;
    } pc = {
        .dst = lm_tensor_address(t), .n = (uint64_t)t->numel,
        .key = { (uint32_t)g.seed, (uint32_t)(g.seed >> 32) },
        .offset = { (uint32_t)g.offset, (uint32_t)(g.offset >> 32) },
        .scale = scale, .shift = shift, .upper = upper,
        .drop = 32 - bits, .unit = ldexpf(1.0f, -(int)bits),
    };
    uint64_t groups = ((uint64_t)t->numel + 4u * RANDOM_WG - 1) / (4u * RANDOM_WG);
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, groups, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = op, .stateful = 1, .shader = normal ? LM_SH_RANDOM_NORMAL : LM_SH_RANDOM_UNIFORM,
        .spec = { RANDOM_WG, 0, 0 }, .push = &pc, .push_bytes = sizeof pc,
        .groups_x = pc.groups_x, .groups_y = gy, .writes = { t },
    });
}

/* lumus.rand(shape [, {dtype=}]) and lumus.randn: float32 directly; float16 and
 * bfloat16 drawn in float32 (rand: with as many bits as they hold) and rounded to
 * nearest even by the conversion kernel. */
static int random_new(lua_State *L, int normal, const char *op) {
    int64_t shape[LM_MAX_DIMS];
    int ndim;
    lm_check_shape(L, 1, shape, &ndim, 0);
    lua_settop(L, 2);
    lm_dtype d = lm_check_factory_dtype(L, 2);
    if (d != LM_FLOAT32 && d != LM_FLOAT16 && d != LM_BFLOAT16)
        lm_argerror(L, 2, "dtype '%s' is not supported (float32, float16 or bfloat16)", lm_dtype_name(d));
    lm_context *ctx = lm_context_get(L);
    lm_tensor *t = lm_push_tensor(L, ctx, ndim, shape);                        /* slot 3 */
    record_random(L, t, normal, uniform_bits(d), 1.0f, 0.0f, normal ? INFINITY : nextafterf(1.0f, 0.0f), op);
    if (d == LM_FLOAT32) return 1;
    lm_push_tensor_dtype(L, ctx, d, ndim, shape);                              /* slot 4 */
    lm_convert_into(L, 4, 3);
    lua_settop(L, 4);
    return 1;
}

int lm_op_rand(lua_State *L) { return random_new(L, 0, "rand"); }
int lm_op_randn(lua_State *L) { return random_new(L, 1, "randn"); }

/* A finite number argument that float32 holds. */
static float check_float(lua_State *L, int arg, lua_Number dflt, const char *name) {
    lua_Number v = lua_isnoneornil(L, arg) ? dflt : lm_check_number(L, arg);
    if (!isfinite(v) || fabs(v) > FLT_MAX)
        lm_argerror(L, arg, "%s must be a finite float32 value, got %f", name, (LUAI_UACNUMBER)v);
    return (float)v;
}

/* Fills the tensor at 1 in place: directly when plain, else through a plain temporary
 * copied into the view's elements. */
static int fill_random(lua_State *L, int normal, float scale, float shift, float upper, const char *op) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lm_check_writable(L, 1, t, "the tensor");
    if (t->dtype != LM_FLOAT32) lm_argerror(L, 1, "the tensor must be float32, got %s", lm_dtype_name(t->dtype));
    if (lm_tensor_is_plain(t)) {
        record_random(L, t, normal, 24, scale, shift, upper, op);
    } else {
        lm_tensor *tmp = lm_push_tensor(L, t->storage->ctx, t->ndim, t->shape);
        t = lm_check_tensor(L, 1);
        record_random(L, tmp, normal, 24, scale, shift, upper, op);
        lm_record_strided_copy(L, tmp, t);
    }
    lua_settop(L, 1);
    return 1;
}

/* t:uniform_([from [, to]]): from + (to - from) u, u as lumus.rand, in float32
 * (to - from rounded once), kept below `to`. */
int lm_op_uniform_(lua_State *L) {
    lm_check_tensor(L, 1);
    float a = check_float(L, 2, 0.0, "from"), b = check_float(L, 3, 1.0, "to");
    if (lua_gettop(L) > 3) lm_argerror(L, 4, "no more arguments expected (uniform_ takes from, to)");
    if (!(a <= b)) lm_argerror(L, 3, "to must be >= from (%f), got %f", (LUAI_UACNUMBER)a, (LUAI_UACNUMBER)b);
    volatile float range = b - a;   /* rounded to float32 once, as the reference does */
    if (isinf(range)) lm_argerror(L, 3, "to - from overflows float32");
    return fill_random(L, 0, range, a, a < b ? nextafterf(b, a) : a, "uniform_");
}

/* t:normal_([mean [, std]]): mean + std z, z as lumus.randn. */
int lm_op_normal_(lua_State *L) {
    lm_check_tensor(L, 1);
    float mean = check_float(L, 2, 0.0, "mean"), std = check_float(L, 3, 1.0, "std");
    if (lua_gettop(L) > 3) lm_argerror(L, 4, "no more arguments expected (normal_ takes mean, std)");
    if (!(std >= 0.0f)) lm_argerror(L, 3, "std must be >= 0, got %f", (LUAI_UACNUMBER)std);
    return fill_random(L, 1, std, mean, INFINITY, "normal_");
}

/* lumus.multinomial(probs, n [, {replacement = false, out =}]) -> int32 1-based
 * categories: [n] for a 1-D probs, [rows, n] for 2-D (into opts.out, an int32 tensor of
 * that shape, when given). Rows the kernel finds invalid give 0s. */
int lm_op_multinomial(lua_State *L) {
    static const char *const known[] = { "out", "replacement", NULL };
    lua_settop(L, 3);
    lm_contiguous_inputs(L, 1, 1);
    lm_tensor *probs = lm_check_tensor(L, 1);
    lua_Integer n = lm_check_integer(L, 2);
    lm_check_options(L, 3, known);
    int replacement = lm_option_boolean(L, 3, "replacement", 0);
    if (probs->dtype != LM_FLOAT32 && probs->dtype != LM_FLOAT16 && probs->dtype != LM_BFLOAT16)
        lm_argerror(L, 1, "probs must be float32, float16 or bfloat16, got %s", lm_dtype_name(probs->dtype));
    if (probs->ndim > 2) lm_argerror(L, 1, "probs must be 1-D or 2-D, got %d dimensions", probs->ndim);
    int64_t ncat = probs->shape[probs->ndim - 1];
    int64_t rows = probs->ndim == 2 ? probs->shape[0] : 1;
    if (ncat > INT32_MAX)
        lm_argerror(L, 1, "at most %d categories (int32 samples), got %I", INT32_MAX, (LUAI_UACINT)ncat);
    if (n < 1) lm_argerror(L, 2, "number of samples must be >= 1, got %I", (LUAI_UACINT)n);
    if (!replacement && n > ncat)
        lm_argerror(L, 2, "cannot draw %I samples without replacement from %I categories",
                    (LUAI_UACINT)n, (LUAI_UACINT)ncat);
    if (n > INT32_MAX) lm_argerror(L, 2, "number of samples must be < 2^31, got %I", (LUAI_UACINT)n);
    lm_context *ctx = probs->storage->ctx;
    /* llvmpipe (lavapipe) ends any invocation's loops after 65535 iterations in all,
     * which would leave samples unwritten: refuse what could reach that there. */
    uint64_t size = ((uint64_t)ncat + 255) / 256, per_draw = 40 + 2 * size;
    uint64_t iterations = 2 * size + 64 + (replacement ? ((uint64_t)n + 255) / 256 : (uint64_t)n) * per_draw;
    if (ctx->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU && iterations > 60000)
        lm_argerror(L, 2, "%I samples of %I categories exceed what a CPU device (lavapipe) runs in one kernel",
                    (LUAI_UACINT)n, (LUAI_UACINT)ncat);
    int64_t shape[2] = { rows, n };
    int ndim = probs->ndim;
    if (ndim == 1) shape[0] = n;
    lm_push_option(L, 3, "out");                                                /* slot 4 */
    lm_tensor *out;
    if (lua_isnil(L, 4)) {
        lua_pop(L, 1);
        out = lm_push_tensor_dtype(L, ctx, LM_INT32, ndim, shape);
    } else {
        out = lm_check_out(L, 4, 3, "out", ndim, shape);
        if (out->dtype != LM_INT32) lm_argerror(L, 3, "out must be int32, got %s", lm_dtype_name(out->dtype));
        if (lm_tensors_overlap(out, lm_check_tensor(L, 1))) lm_argerror(L, 3, "out shares memory with probs");
    }
    /* The weights the kernel reads: probs itself, or a float32 copy that it may change
     * (without replacement) or that converts a 16-bit probs. */
    lm_tensor *work = NULL;
    if (!replacement || probs->dtype != LM_FLOAT32) {
        work = lm_push_tensor(L, ctx, probs->ndim, probs->shape);              /* slot 5 */
        if (probs->dtype == LM_FLOAT32) lm_record_copy(L, lm_check_tensor(L, 1), work);
        else lm_convert_into(L, 5, 1);
        work = lm_check_tensor(L, 5);
        out = lm_check_out(L, 4, 3, "out", ndim, shape);
    }
    probs = lm_check_tensor(L, 1);   /* the allocations may have run a finalizer */
    rng_state g = take_rng(L);
    struct {
        uint64_t weights, dst, rows;
        uint32_t key[2], offset[2];
        uint32_t ncat, nsamples, replacement, groups_x;
    } pc = {
        .weights = lm_tensor_address(work ? work : probs), .dst = lm_tensor_address(out),
        .rows = (uint64_t)rows, .key = { (uint32_t)g.seed, (uint32_t)(g.seed >> 32) },
        .offset = { (uint32_t)g.offset, (uint32_t)(g.offset >> 32) },
        .ncat = (uint32_t)ncat, .nsamples = (uint32_t)n, .replacement = (uint32_t)replacement,
    };
    uint32_t gy;
    pc.groups_x = lm_grid(L, ctx, (uint64_t)rows, &gy);
    lm_record_dispatch(L, ctx, &(lm_launch){
        .op = "multinomial", .stateful = 1, .any_dtype = 1, .shader = LM_SH_RANDOM_MULTINOMIAL, .spec = { 256, 0, 0 },
        .push = &pc, .push_bytes = sizeof pc, .groups_x = pc.groups_x, .groups_y = gy,
        .reads = { work ? NULL : probs }, .writes = { out, work },
    });
    lua_pushvalue(L, 4);
    return 1;
}
