/* A minimal host that embeds lumus: it makes a lua_State, makes lumus available, loads
 * a script once and calls its frame function once per "frame", timing each frame, then
 * prints median/p90/max frame times and the script's own correctness check.
 *
 * Built twice by `make examples`:
 *   build/examples/host_static   links build/liblumus.a and calls lumus_open(), so
 *                                `require "lumus"` needs no files on disk;
 *   build/examples/host_require  links only Lua; `require "lumus"` finds the installed
 *                                module through LUA_PATH / LUA_CPATH (or the defaults).
 *
 * Usage: host_static [frames [script [rows [d]]]]
 *        (defaults: 120 frames, examples/host/frame.lua, 256 rows, D = 768)
 * Exit status: 0 when the script's check passes, 1 otherwise. */
#define _POSIX_C_SOURCE 199309L
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef LUMUS_STATIC
#include "lumus.h"
#endif
#ifndef LUA_OK   /* Lua 5.1 and LuaJIT have no name for it */
#define LUA_OK 0
#endif

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted values (nearest rank). */
static double quantile(const double *sorted, int n, double q) {
    int i = (int)(q * n + 0.5) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return sorted[i];
}

static int fail(lua_State *L, const char *what) {
    fprintf(stderr, "host: %s: %s\n", what, lua_tostring(L, -1));
    lua_close(L);
    return 1;
}

int main(int argc, char **argv) {
    int frames = argc > 1 ? atoi(argv[1]) : 120;
    const char *script = argc > 2 ? argv[2] : "examples/host/frame.lua";
    lua_Integer rows = argc > 3 ? atoi(argv[3]) : 256, d = argc > 4 ? atoi(argv[4]) : 768;
    if (frames < 1 || rows < 1 || d < 1) { fprintf(stderr, "usage: %s [frames [script [rows [d]]]]\n", argv[0]); return 2; }

    lua_State *L = luaL_newstate();
    if (!L) { fprintf(stderr, "host: cannot create a lua_State\n"); return 1; }
    luaL_openlibs(L);
#ifdef LUMUS_STATIC
    /* lumus.core and the Lua files of lua/lumus/, embedded, become loadable with require. */
    if (lumus_open(L) != LUA_OK) return fail(L, "lumus_open");
    const char *how = "linked statically (lumus_open)";
#else
    const char *how = "loaded with require from the module path";
#endif

    /* The script returns {frame = function(i) ... end, check = function() ... end}. */
    if (luaL_loadfile(L, script) != LUA_OK) return fail(L, "loading the script");
    lua_pushinteger(L, rows);
    lua_pushinteger(L, d);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) return fail(L, "running the script");
    if (!lua_istable(L, -1)) { lua_pushstring(L, "the script must return a table"); return fail(L, script); }
    int api = lua_gettop(L);

    if (luaL_dostring(L, "local d = require('lumus').device() return d.name .. ' (' .. d.kind .. ')'") != LUA_OK)
        return fail(L, "lumus.device");
    printf("lumus host example: lumus %s\n", how);
    printf("device: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);

    double *ms = malloc(sizeof *ms * (size_t)frames);
    if (!ms) { lua_pushstring(L, "out of memory"); return fail(L, "frame times"); }
    for (int i = 1; i <= frames; i++) {
        lua_getfield(L, api, "frame");
        lua_pushinteger(L, i);
        double t0 = now_ms();
        if (lua_pcall(L, 1, 0, 0) != LUA_OK) { free(ms); return fail(L, "frame"); }
        ms[i - 1] = now_ms() - t0;
    }
    double first = ms[0];
    qsort(ms, (size_t)frames, sizeof *ms, by_value);
    printf("frames: %d of layer_norm_forward on %lldx%lld (first frame %.3f ms, builds the pipeline)\n",
           frames, (long long)rows, (long long)d, first);
    printf("frame time ms: median %.3f p90 %.3f max %.3f\n",
           quantile(ms, frames, 0.5), quantile(ms, frames, 0.9), ms[frames - 1]);
    free(ms);

    lua_getfield(L, api, "check");
    if (lua_pcall(L, 0, 2, 0) != LUA_OK) return fail(L, "check");
    int ok = lua_toboolean(L, -2);
    printf("%s: %s\n", ok ? "PASS" : "FAIL", lua_tostring(L, -1));
    lua_close(L);    /* waits for lumus's work, frees its device objects */
    return ok ? 0 : 1;
}
