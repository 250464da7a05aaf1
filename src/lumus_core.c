/* luaopen_lumus_core: the C module's registration table. */
#define _GNU_SOURCE   /* dladdr, RTLD_NODELETE */
#include <dlfcn.h>
#include <lua.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include "lumus.h"
#include "context.h"
#include "tensor.h"
#include "luautil.h"
#include "timing.h"
#include "capture.h"
#include "ops/ops.h"
#include "ops/random.h"
#include "pipeline_lua.h"

static int l_synchronize(lua_State *L) {
    lm_stream_sync(L, lm_context_get(L));
    return 0;
}

static int l_pending(lua_State *L) {
    lua_pushboolean(L, lm_stream_pending(lm_context_get(L)));
    return 1;
}

static void set_int(lua_State *L, const char *k, lua_Integer v) { lua_pushinteger(L, v); lua_setfield(L, -2, k); }

static int l_memory(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    lm_stream_poll(ctx);
    const lm_memory *m = &ctx->mem;
    lua_createtable(L, 0, 8);
    set_int(L, "in_use", (lua_Integer)m->in_use);
    /* Of in_use, what lumus keeps for itself across calls (the context's scratch slots). */
    set_int(L, "internal", (lua_Integer)lm_context_scratch_bytes(ctx));
    set_int(L, "peak", (lua_Integer)m->peak);
    set_int(L, "reserved", (lua_Integer)m->device.reserved);
    set_int(L, "staging", (lua_Integer)m->staging.reserved);
    set_int(L, "device_total", (lua_Integer)m->total);
    set_int(L, "limit", (lua_Integer)m->limit);
    set_int(L, "blocks", m->device.nblocks);
    set_int(L, "allocations", (lua_Integer)m->chunks);
    set_int(L, "deferred_frees", (lua_Integer)ctx->stream.ndeferred);
    VkDeviceSize usage, budget = lm_memory_budget(ctx, &usage);
    set_int(L, "budget", (lua_Integer)budget);   /* the device heap's, 0 if unknown */
    return 1;
}

/* lumus.empty_cache(): the empty blocks both pools keep for reuse, and the scratch the
 * context keeps across calls, go back to the driver; returns the bytes released. Memory
 * that work in flight still uses comes back after that work (e.g. after synchronize). */
static int l_empty_cache(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    for (int i = 0; i < LM_SCRATCH_SLOTS; i++) lm_context_release_scratch(ctx, i);
    lm_stream_poll(ctx);
    lua_pushinteger(L, (lua_Integer)lm_memory_trim(ctx));
    return 1;
}

/* tune.stream_stats(): cumulative counters for specs and benchmarks that check how
 * often work is cut into batches, collections run and blocks come from the driver. */
static int l_stream_stats(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    lua_createtable(L, 0, 3);
    set_int(L, "submits", (lua_Integer)ctx->stream.submits);
    set_int(L, "gc_runs", (lua_Integer)ctx->gc_runs);
    set_int(L, "blocks_made", (lua_Integer)ctx->mem.device.blocks_made);
    return 1;
}

/* tune.host_profile([{on = true}]) -> {on, record, records, submit, submits, wait, waits,
 * barriers}: host seconds spent recording dispatches (pipeline lookup, hazards, commands),
 * submitting and waiting while the profile is on, and the barriers the hazard tracking
 * recorded between commands (each makes the next command wait for the ones before).
 * {on = true} zeroes the counts and turns it on; {} (or on = false) turns it off, keeping
 * the counts; no argument reads them. */
static int l_host_profile(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    lm_stream *st = &ctx->stream;
    static const char *const known[] = { "on", NULL };
    if (lm_check_options(L, 1, known)) {
        int on = lm_option_boolean(L, 1, "on", 0);
        if (on) memset(&st->prof, 0, sizeof st->prof);
        st->prof.on = on;
    }
    lua_createtable(L, 0, 8);
    lua_pushboolean(L, st->prof.on); lua_setfield(L, -2, "on");
    lua_pushnumber(L, st->prof.record); lua_setfield(L, -2, "record");
    lua_pushinteger(L, (lua_Integer)st->prof.records); lua_setfield(L, -2, "records");
    lua_pushnumber(L, st->prof.submit); lua_setfield(L, -2, "submit");
    lua_pushinteger(L, (lua_Integer)st->prof.submits); lua_setfield(L, -2, "submits");
    lua_pushnumber(L, st->prof.wait); lua_setfield(L, -2, "wait");
    lua_pushinteger(L, (lua_Integer)st->prof.waits); lua_setfield(L, -2, "waits");
    lua_pushinteger(L, (lua_Integer)st->prof.barriers); lua_setfield(L, -2, "barriers");
    return 1;
}

/* tune.stream([{submit_idle = k, prefault = bool}]) -> the settings; {} restores the
 * defaults (0; prefault on unless LUMUS_PREFAULT=0). */
static int l_stream_config(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    static const char *const known[] = { "submit_idle", "prefault", NULL };
    if (lm_check_options(L, 1, known)) {
        lua_Integer k = lm_option_integer(L, 1, "submit_idle", 0);
        if (k < 0 || k > LM_BATCH_OPS) lm_argerror(L, 1, "submit_idle must be in 0..%d", LM_BATCH_OPS);
        ctx->stream.submit_idle = (uint32_t)k;
        const char *pf = getenv("LUMUS_PREFAULT");
        ctx->mem.prefault = lm_option_boolean(L, 1, "prefault", !(pf && strcmp(pf, "0") == 0));
    }
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, ctx->stream.submit_idle);
    lua_setfield(L, -2, "submit_idle");
    lua_pushboolean(L, ctx->mem.prefault);
    lua_setfield(L, -2, "prefault");
    return 1;
}

static int l_reset_peak(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    ctx->mem.peak = ctx->mem.in_use;
    return 0;
}

/* lumus.set_memory_limit(bytes or nil): a cap on device bytes in use, for hosts that
 * run untrusted scripts; nil restores the device's heap size. */
static int l_set_memory_limit(lua_State *L) {
    lm_context *ctx = lm_context_get(L);
    if (lua_isnoneornil(L, 1)) { ctx->mem.limit = ctx->mem.total; return 0; }
    lua_Integer n = lm_check_integer(L, 1);
    if (n <= 0) lm_argerror(L, 1, "limit must be a positive number of bytes");
    ctx->mem.limit = (VkDeviceSize)n < ctx->mem.total ? (VkDeviceSize)n : ctx->mem.total;
    return 0;
}

static int l_validation_messages(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)lm_validation_messages());
    return 1;
}

/* Functions of the lumus table that take no tensor first. */
static const luaL_Reg functions[] = {
    {"device", lm_device}, {"devices", lm_devices},
    {"synchronize", l_synchronize}, {"pending", l_pending},
    {"memory", l_memory}, {"empty_cache", l_empty_cache}, {"reset_peak", l_reset_peak}, {"set_memory_limit", l_set_memory_limit},
    {"gpu_time", lm_gpu_time}, {"clock", lm_clock},
    {"zeros", lm_op_zeros}, {"ones", lm_op_ones}, {"full", lm_op_full},
    {"arange", lm_op_arange}, {"rand", lm_op_rand}, {"randn", lm_op_randn},
    {"manual_seed", lm_op_manual_seed}, {"get_rng_state", lm_op_get_rng_state}, {"set_rng_state", lm_op_set_rng_state},
    {"cat", lm_op_cat}, {"stack", lm_op_stack},
    {"capture", lm_capture},
    {"load_safetensors", lm_load_safetensors}, {"save_safetensors", lm_save_safetensors},
    {"warm_up", lm_warm_up}, {"save_pipeline_cache", lm_save_pipeline_cache},
    {"sgd_step_", lm_op_sgd_step_}, {"adam_step_", lm_op_adam_step_},
    {NULL, NULL}
};

/* Ops whose first argument is a tensor: lumus.<name>(t, ...) and t:<name>(...) alike. */
static const luaL_Reg tensor_ops[] = {
    {"layer_norm_forward", lm_op_layer_norm_forward}, {"layer_norm_backward", lm_op_layer_norm_backward},
    {"copy", lm_op_copy}, {"fill", lm_op_fill}, {"contiguous", lm_op_contiguous},
    {"matmul", lm_op_matmul}, {"linear", lm_op_linear},
    {"add", lm_op_add}, {"sub", lm_op_sub}, {"mul", lm_op_mul}, {"div", lm_op_div},
    {"scale", lm_op_scale},
    {"multinomial", lm_op_multinomial}, {"uniform_", lm_op_uniform_}, {"normal_", lm_op_normal_},
    {"pow", lm_op_pow}, {"maximum", lm_op_maximum}, {"minimum", lm_op_minimum}, {"atan2", lm_op_atan2},
    {"eq", lm_op_eq}, {"ne", lm_op_ne}, {"lt", lm_op_lt}, {"le", lm_op_le}, {"gt", lm_op_gt}, {"ge", lm_op_ge},
    {"where", lm_op_where},
    {"softmax", lm_op_softmax}, {"sum", lm_op_sum}, {"mean", lm_op_mean},
    {"log_softmax", lm_op_log_softmax}, {"var", lm_op_var}, {"max", lm_op_max}, {"min", lm_op_min},
    {"argmax", lm_op_argmax}, {"argmin", lm_op_argmin}, {"topk", lm_op_topk},
    {"to", lm_op_to},
    {"index_select", lm_op_index_select}, {"embedding", lm_op_embedding}, {"gather", lm_op_gather},
    {"split", lm_op_split}, {"chunk", lm_op_chunk},
    {"index_add", lm_op_index_add}, {"scatter_add", lm_op_scatter_add},
    {"cross_entropy_forward", lm_op_cross_entropy_forward}, {"cross_entropy_backward", lm_op_cross_entropy_backward},
    {"rms_norm", lm_op_rms_norm}, {"rope", lm_op_rope},
    {"scaled_dot_product_attention", lm_op_scaled_dot_product_attention},
    {"index_copy", lm_op_index_copy},
    {"layer_norm_linear", lm_op_layer_norm_linear},
    {NULL, NULL}
};
static const luaL_Reg *const tensor_op_lists[] = { tensor_ops, lm_unary_ops };

/* core.tune (lumus.tune): hooks for specs and benchmarks that read or force the kernels'
 * choices, and counters; not part of the ops' API. */
static const luaL_Reg tune_functions[] = {
    {"layer_norm", lm_op_layer_norm_config}, {"layer_norm_backward", lm_op_layer_norm_backward_config},
    {"matmul", lm_op_matmul_config},
    {"grid", lm_op_grid_config}, {"rows", lm_op_row_config}, {"softmax_cols", lm_op_softmax_cols_config},
    {"stream_stats", l_stream_stats}, {"host_profile", l_host_profile},
    {"stream", l_stream_config}, {"validation_messages", l_validation_messages},
    {"pipeline_cache", lm_pipeline_cache_stats},
    {"attention", lm_op_attention_config},
    {"transpose", lm_op_transpose_config}, {"elementwise", lm_op_elementwise_config},
    {"linear", lm_op_linear_config}, {"reduce", lm_op_reduce_config},
    {NULL, NULL}
};

/* Methods only: t:_version(), the count of writes into t's storage (autograd's check). */
static const luaL_Reg internal_methods[] = { {"_version", lm_op_version}, {NULL, NULL} };

/* Sets each list of tensor ops into the table on top of the stack. */
static void set_tensor_ops(lua_State *L) {
    for (size_t i = 0; i < sizeof tensor_op_lists / sizeof tensor_op_lists[0]; i++)
        luaL_setfuncs(L, tensor_op_lists[i], 0);
}

/* The tensor ops of the module table at `from` into the table on top, as the same
 * function values (on Lua 5.1 each luaL_setfuncs makes new closures: lumus.add and
 * t.add would differ). */
static void copy_tensor_ops(lua_State *L, int from) {
    for (size_t i = 0; i < sizeof tensor_op_lists / sizeof tensor_op_lists[0]; i++)
        for (const luaL_Reg *r = tensor_op_lists[i]; r->name; r++) {
            lua_getfield(L, from, r->name);
            lua_setfield(L, -2, r->name);
        }
}

/* os.exit, waiting first for this state's work in flight. A process that exits without
 * closing its state (os.exit without `close`; Lua 5.1's never closes it) would otherwise
 * end with the device still running that work, and lavapipe's threads then race the exit
 * handlers of the driver's libraries (LLVM's destructors) and may crash. A failed wait (a
 * lost device) does not stop the exit; a state that never made its context makes none. */
static int sync_if_made(lua_State *L) {
    lm_context *ctx = lm_context_peek(L);
    if (ctx) lm_stream_sync(L, ctx);
    return 0;
}
static int l_exit_after_work(lua_State *L) {
    lua_pushcfunction(L, sync_if_made);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) lua_pop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* os.exit becomes l_exit_after_work over the function it was (once: a module loaded
 * again leaves the wrapper as it is). Nothing where the state has no os.exit. */
static void wrap_os_exit(lua_State *L) {
    lua_getglobal(L, "os");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "exit");
        if (lua_isfunction(L, -1) && lua_tocfunction(L, -1) != l_exit_after_work) {
            lua_pushcclosure(L, l_exit_after_work, 1);
            lua_setfield(L, -2, "exit");
        } else {
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

/* Keeps this module mapped once loaded. lua_close may unload it (package's handle is
 * finalized) before finalizers that still call into it, or before userdata whose __gc
 * is here: LuaJIT finalizes in an order where that happens (a crash at exit with a
 * tensor used from a finalizer). Linked statically, this pins the program: harmless. */
static void pin_module(void) {
    Dl_info info;
    if (dladdr((void *)(uintptr_t)luaopen_lumus_core, &info) && info.dli_fname)
        (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

LUMUS_API int luaopen_lumus_core(lua_State *L) {
    pin_module();
    wrap_os_exit(L);
    luaL_newlib(L, functions);
    lm_register_names(L, functions, "lumus");
    lm_safetensors_register_names(L);
    set_tensor_ops(L);
    for (size_t i = 0; i < sizeof tensor_op_lists / sizeof tensor_op_lists[0]; i++)
        lm_register_names(L, tensor_op_lists[i], "lumus");
    luaL_newlib(L, tune_functions);
    lm_register_names(L, tune_functions, "lumus.tune");
    lua_setfield(L, -2, "tune");
    lm_tensor_register(L);
    lm_capture_register(L);
    /* The ops as methods too: module.Tensor.methods (the metatable's __index). */
    lua_getfield(L, -1, "Tensor");
    lua_getfield(L, -1, "methods");
    copy_tensor_ops(L, lua_absindex(L, -3));
    luaL_setfuncs(L, lm_convert_methods, 0);
    lm_register_names(L, lm_convert_methods, "lumus.Tensor");
    luaL_setfuncs(L, internal_methods, 0);
    lua_pop(L, 2);
    lm_register_names(L, internal_methods, "lumus.Tensor");
    lua_pushliteral(L, "0.2.0");   /* the rock's version (lumus-0.2.0-1.rockspec) */
    lua_setfield(L, -2, "version");
    lua_newtable(L);   /* core._host, for lua/lumus/compat.lua */
    luaL_setfuncs(L, lm_host_pack_functions, 0);
    lm_register_names(L, lm_host_pack_functions, "lumus.core._host");
    lua_setfield(L, -2, "_host");
    return 1;
}
