/* lumus.capture and lumus.Graph (see capture.h). */
#include "capture.h"
#include "storage.h"
#include "vkcheck.h"
#include "luautil.h"
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

enum { GRAPH_FREED, GRAPH_RECORDING, GRAPH_READY };

typedef struct lm_graph {
    lm_recording rec;           /* first: the stream's recording is the graph's */
    lm_context *ctx;            /* valid while !rec.dead */
    int state;
    lm_storage **storages;      /* every storage its commands use, one reference each */
    unsigned char *input;       /* storages[i] was alive when the capture began */
    size_t n, cap;
    int nresults;               /* fn's results, kept in the user value at 1..nresults */
} lm_graph;

/* The graph's user value: a table anchoring the userdata of each storage it holds
 * (key: the storage as a light userdata) and fn's results (keys 1..nresults). While the
 * graph records, the registry maps the graph (light userdata) to that table too. */

static void graph_release(lm_graph *g, int explicit_free) {
    if (g->state == GRAPH_FREED) return;
    g->state = GRAPH_FREED;
    if (!g->rec.dead) lm_stream_record_free(g->ctx, &g->rec);
    /* Each storage's last_serial is the last replay's: frees wait for it. */
    for (size_t i = 0; i < g->n; i++) {
        if (explicit_free) lm_storage_release(g->storages[i]); else lm_storage_unref(g->storages[i]);
    }
    free(g->storages);
    free(g->input);
    g->storages = NULL;
    g->input = NULL;
    g->n = g->cap = 0;
}

void lm_capture_hold(lua_State *L, lm_context *ctx, const lm_tensor *t, const char *op) {
    lm_graph *g = (lm_graph *)(void *)ctx->stream.recording;
    lm_storage *s = t->storage;
    for (int i = 0; i < LM_SCRATCH_SLOTS; i++)
        if (ctx->scratch[i] == s)
            luaL_error(L, "lumus.capture: %s uses scratch memory that keeps state between calls (layer_norm_forward's "
                       "split form), which cannot be captured; choose another form with lumus.tune.layer_norm{form = ...}",
                       lm_fname(L));
    luaL_checkstack(L, 3, "lumus.capture");
    lua_rawgetp(L, LUA_REGISTRYINDEX, g);
    if (lua_rawgetp(L, -1, s) != LUA_TNIL) { lua_pop(L, 2); return; }
    lua_pop(L, 1);
    /* The tensor's userdata, or for a view an op made in C (a broadcast or transposed
     * operand) a tensor over the same storage, is on the stack (ops.h); its user value
     * is the storage's. */
    int top = lua_gettop(L) - 1, found = 0;
    for (int i = 1; i <= top && !found; i++) {
        const lm_tensor *u = lua_touserdata(L, i) == (const void *)t ? t : lm_test_tensor(L, i);
        if (!u || u->storage != s) continue;
        lua_getiuservalue(L, i, 1);
        if (lua_touserdata(L, -1) == (void *)s) found = 1; else lua_pop(L, 1);
    }
    if (!found)
        luaL_error(L, "lumus.capture: %s uses a tensor that is not among its arguments or results, "
                   "which cannot be captured", op);
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 32;
        lm_storage **ns = realloc(g->storages, cap * sizeof *ns);
        if (ns) g->storages = ns;
        unsigned char *ni = ns ? realloc(g->input, cap) : NULL;
        if (ni) g->input = ni;
        if (!ns || !ni) luaL_error(L, "lumus.capture: out of host memory");
        g->cap = cap;
    }
    lua_rawsetp(L, -2, s);
    lua_pop(L, 1);
    lm_storage_ref(s);
    g->input[g->n] = s->capture_mark == ctx->stream.capture_mark;
    g->storages[g->n++] = s;
}

static lm_graph *check_graph(lua_State *L, int idx) {
    lm_graph *g = luaL_testudata(L, idx, LM_GRAPH_MT);
    if (!g) lm_typeerror(L, idx, "lumus.Graph");
    return g;
}

static lm_graph *check_live_graph(lua_State *L, int idx) {
    lm_graph *g = check_graph(L, idx);
    if (g->state != GRAPH_READY) lm_argerror(L, idx, "graph has been freed");
    if (g->rec.dead) lm_argerror(L, idx, "the graph's device context has been closed");
    return g;
}

int lm_capture(lua_State *L) {
    lm_check_type(L, 1, LUA_TFUNCTION);
    if (lua_gettop(L) > 1) lm_argerror(L, 2, "no argument expected after the function");
    lm_context *ctx = lm_context_get(L);
    if (ctx->stream.recording)
        return luaL_error(L, "lumus.capture: a capture is already recording (captures cannot be nested)");
    lm_graph *g = lua_newuserdatauv(L, sizeof *g, 1);   /* slot 2 */
    memset(g, 0, sizeof *g);
    g->rec.dead = 1;   /* nothing to free until the recording begins */
    luaL_setmetatable(L, LM_GRAPH_MT);
    lua_newtable(L);
    lua_setiuservalue(L, 2, 1);
    g->ctx = ctx;
    /* The storages alive now are the graph's inputs; those made while it records are its own. */
    uint32_t mark = ++ctx->stream.capture_mark;
    for (lm_storage *s = ctx->storages; s; s = s->next) s->capture_mark = mark;
    lm_stream_record_begin(L, ctx, &g->rec);
    g->state = GRAPH_RECORDING;
    lua_getiuservalue(L, 2, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, g);
    lua_pushvalue(L, 1);
    int rc = lua_pcall(L, 0, LUA_MULTRET, 0);
    VkResult res = lm_stream_record_end(ctx, &g->rec);
    lua_pushnil(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, g);
    if (rc != LUA_OK) { graph_release(g, 1); return lua_error(L); }
    if (res != VK_SUCCESS) { graph_release(g, 1); return lm_vk_error(L, "lumus.capture: recording", res); }
    g->state = GRAPH_READY;
    int nres = lua_gettop(L) - 2;
    luaL_checkstack(L, 3, "lumus.capture");
    lua_getiuservalue(L, 2, 1);
    for (int i = 1; i <= nres; i++) { lua_pushvalue(L, 2 + i); lua_rawseti(L, -2, i); }
    lua_pop(L, 1);
    g->nresults = nres;
    lua_pushvalue(L, 2);
    lua_insert(L, 3);
    return nres + 1;
}

/* g:replay() -> the capture function's results (the same values every time). */
static int g_replay(lua_State *L) {
    lm_graph *g = check_live_graph(L, 1);
    if (lua_gettop(L) > 1) lm_argerror(L, 2, "no argument expected");
    lm_context *ctx = g->ctx;
    if (ctx->stream.recording)
        return luaL_error(L, "%s: cannot replay a graph inside lumus.capture", lm_fname(L));
    for (size_t i = 0; i < g->n; i++)
        if (g->input[i] && g->storages[i]->refs <= 1)
            return luaL_error(L, "%s: a tensor used by the graph has been freed (the graph holds the memory it "
                              "made, not its inputs: keep them alive while it is replayed)", lm_fname(L));
    lm_stream_replay(L, ctx, &g->rec);
    uint64_t serial = g->rec.last_serial;
    int external = 0;
    for (size_t i = 0; i < g->n; i++) {
        g->storages[i]->last_serial = serial;
        external |= g->storages[i]->external;
    }
    if (external) ctx->stream.ext_serial = serial;
    if (g->nresults == 0) return 0;
    luaL_checkstack(L, g->nresults + 1, "g:replay");
    lua_getiuservalue(L, 1, 1);
    for (int i = 1; i <= g->nresults; i++) lua_rawgeti(L, 2, i);
    return g->nresults;
}

static int g_free(lua_State *L) {
    lm_graph *g = check_graph(L, 1);
    if (g->state == GRAPH_RECORDING)
        return luaL_error(L, "%s: the graph is still recording", lm_fname(L));
    graph_release(g, 1);
    return 0;
}

static int g_gc(lua_State *L) {
    lm_graph *g = check_graph(L, 1);
    graph_release(g, 0);
    return 0;
}

static int g_is_freed(lua_State *L) {
    lm_graph *g = check_graph(L, 1);
    lua_pushboolean(L, g->state == GRAPH_FREED);
    return 1;
}

/* g:stats() -> {ops = dispatches recorded, tensors = storages held, inputs = of them, those alive before the capture} */
static int g_stats(lua_State *L) {
    lm_graph *g = check_live_graph(L, 1);
    size_t inputs = 0;
    for (size_t i = 0; i < g->n; i++) inputs += g->input[i];
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)g->rec.ops); lua_setfield(L, -2, "ops");
    lua_pushinteger(L, (lua_Integer)g->n); lua_setfield(L, -2, "storages");
    lua_pushinteger(L, (lua_Integer)inputs); lua_setfield(L, -2, "inputs");
    return 1;
}

static int g_tostring(lua_State *L) {
    lm_graph *g = check_graph(L, 1);
    if (g->state == GRAPH_FREED) lua_pushliteral(L, "[lumus.Graph (freed)]");
    else lua_pushfstring(L, "[lumus.Graph of %d ops over %d storages]", (int)g->rec.ops, (int)g->n);
    return 1;
}

void lm_capture_register(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"replay", g_replay}, {"free", g_free}, {"is_freed", g_is_freed}, {"stats", g_stats}, {NULL, NULL}
    };
    luaL_newmetatable(L, LM_GRAPH_MT);
    luaL_newlib(L, methods);
    lm_register_names(L, methods, "lumus.Graph");
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, g_gc); lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, g_free); lua_setfield(L, -2, "__close");
    lua_pushcfunction(L, g_tostring); lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "lumus.Graph"); lua_setfield(L, -2, "__name");
    lua_pop(L, 1);
}
