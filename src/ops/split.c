/* t:split(size or sizes [, dim]) and t:chunk(n [, dim]): lists of views along one
 * dimension (t:narrow of each piece), sharing t's storage. */
#include "ops.h"
#include <lauxlib.h>

/* Pushes the list of narrow views of the tensor at slot 1 along dim (0-based), piece i
 * of sizes[i] (0-terminated, summing to the dimension's size). */
static void push_pieces(lua_State *L, int dim, const int64_t *sizes, int n) {
    lua_createtable(L, n, 0);
    int list = lua_gettop(L);
    luaL_getmetatable(L, LM_TENSOR_MT);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, "narrow");
    int narrow = lua_gettop(L);
    int64_t start = 1;
    for (int i = 0; i < n; i++) {
        lua_pushvalue(L, narrow);
        lua_pushvalue(L, 1);
        lua_pushinteger(L, dim + 1);
        lua_pushinteger(L, (lua_Integer)start);
        lua_pushinteger(L, (lua_Integer)sizes[i]);
        lua_call(L, 4, 1);
        lua_rawseti(L, list, i + 1);
        start += sizes[i];
    }
    lua_settop(L, list);
}

/* Pieces of `size` along dim (the last one smaller when size does not divide it). */
static int split_even(lua_State *L, int dim, int64_t total, int64_t size) {
    int64_t n = size >= total ? 1 : (total + size - 1) / size;   /* no overflow for huge sizes */
    if (n > 1000000) lm_argerror(L, 2, "%I pieces (at most 10^6 in one call)", (LUAI_UACINT)n);
    int64_t *sizes = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0);
    for (int64_t i = 0; i < n; i++) sizes[i] = i < n - 1 ? size : total - size * (n - 1);
    push_pieces(L, dim, sizes, (int)n);
    return 1;
}

int lm_op_split(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    int dim = lua_isnoneornil(L, 3) ? 0 : lm_index_dim(L, 3, t->ndim);
    int64_t total = t->shape[dim];
    if (!lua_istable(L, 2)) {
        lua_Integer size = lm_check_integer(L, 2);
        if (size < 1) lm_argerror(L, 2, "split size must be positive, got %I", (LUAI_UACINT)size);
        lua_settop(L, 3);
        return split_even(L, dim, total, size);
    }
    lua_Unsigned n = lua_rawlen(L, 2);
    if (n == 0 || (int64_t)n > total || n > 1000000)
        lm_argerror(L, 2, "sizes must list 1 to %I positive sizes (dimension %d has size %I), got %I",
                    (LUAI_UACINT)total, dim + 1, (LUAI_UACINT)total, (LUAI_UACINT)n);
    lua_settop(L, 3);
    int64_t *sizes = lua_newuserdatauv(L, sizeof(int64_t) * (size_t)n, 0);
    int64_t sum = 0;
    for (lua_Unsigned i = 0; i < n; i++) {
        lua_rawgeti(L, 2, (lua_Integer)i + 1);
        int isint = 0;
        lua_Integer s = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint || s < 1 || s > total)
            lm_argerror(L, 2, "sizes[%I] must be a positive integer (at most %I)", (LUAI_UACINT)(i + 1), (LUAI_UACINT)total);
        sizes[i] = s;
        sum += s;
    }
    if (sum != total)
        lm_argerror(L, 2, "sizes sum to %I, dimension %d has size %I", (LUAI_UACINT)sum, dim + 1, (LUAI_UACINT)total);
    push_pieces(L, dim, sizes, (int)n);
    return 1;
}

int lm_op_chunk(lua_State *L) {
    lm_tensor *t = lm_check_tensor(L, 1);
    lua_Integer n = lm_check_integer(L, 2);
    int dim = lua_isnoneornil(L, 3) ? 0 : lm_index_dim(L, 3, t->ndim);
    if (n < 1) lm_argerror(L, 2, "chunk count must be positive, got %I", (LUAI_UACINT)n);
    int64_t total = t->shape[dim];
    int64_t size = n >= total ? 1 : (total + n - 1) / n;
    lua_settop(L, 3);
    return split_even(L, dim, total, size);
}
