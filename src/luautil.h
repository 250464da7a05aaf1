/* The Lua helpers every layer of lumus uses for its arguments (lumus's lauxlib): the
 * name of the running function, argument errors, and options tables. Depends on Lua only.
 *
 * Naming rule for messages: a function is named as the call site names it when Lua
 * knows that name ("bad argument #1 to 'zeros'", "calling 'reshape' on bad self");
 * otherwise (called through pcall, as a tail call or from C) by the name it was
 * registered under: "lumus.<name>" for a function of the lumus table (ops that are also
 * methods included), "lumus.Tensor.<name>" for a method only, "lumus.tune.<name>" for a
 * tuning hook. Never by hash order, never as lumus.core.<name>. */
#ifndef LUMUS_LUAUTIL_H
#define LUMUS_LUAUTIL_H

#include <stddef.h>
#include <stdint.h>
#include "lua_compat.h"

/* Records `name` for the C function f (the first name given wins), for lm_fname. */
void lm_register_name(lua_State *L, lua_CFunction f, const char *name);
/* lm_register_name for each function of a luaL_Reg list, as "<prefix>.<name>". */
struct luaL_Reg;
void lm_register_names(lua_State *L, const struct luaL_Reg *fns, const char *prefix);

/* The running C function's name for a message (see the rule above). For error paths
 * only: it may leave that name on the stack. */
const char *lm_fname(lua_State *L);

/* Raises "bad argument #arg to 'fname' (message)" with a printf-style message
 * (lua_pushfstring's formats: %s %d %I %f %p %c %%), adjusted for method calls as
 * luaL_argerror is. Never returns. */
int lm_argerror(lua_State *L, int arg, const char *fmt, ...);
/* "tname expected, got <type>" for argument arg. Never returns. */
int lm_typeerror(lua_State *L, int arg, const char *tname);

/* luaL_check* and luaL_opt* counterparts whose messages follow the naming rule. */
lua_Integer lm_check_integer(lua_State *L, int arg);
lua_Integer lm_opt_integer(lua_State *L, int arg, lua_Integer dflt);
lua_Number lm_check_number(lua_State *L, int arg);
const char *lm_check_lstring(lua_State *L, int arg, size_t *len);
void lm_check_type(lua_State *L, int arg, int type);

/* "2x3" */
void lm_shape_string(const int64_t *shape, int ndim, char *buf, size_t len);

/* ---- options tables ----
 * An options table is the last argument of a function: nil/none, or a table whose keys
 * are all among the function's known keys. Keys and values are read raw (lua_next,
 * lua_rawget): a metamethod could answer differently on each read or free a tensor the
 * caller has checked. Errors name the argument: "unknown option 'keepdims' (known:
 * dim, keepdim, out)", "dim must be an integer, got string". */

/* Checks argument `arg` against `known` (NULL-terminated); returns 1 for a table, 0
 * for nil or none. */
int lm_check_options(lua_State *L, int arg, const char *const known[]);
/* Pushes opts[key] (raw) of the options at argument arg, or nil when there are none. */
void lm_push_option(lua_State *L, int arg, const char *key);
/* Typed reads of opts[key]; an absent key (or no options) gives dflt; a value of
 * another type raises naming the key. */
lua_Integer lm_option_integer(lua_State *L, int arg, const char *key, lua_Integer dflt);
lua_Number lm_option_number(lua_State *L, int arg, const char *key, lua_Number dflt);
int lm_option_boolean(lua_State *L, int arg, const char *key, int dflt);
/* The index of opts[key] among `names` (NULL-terminated); absent: dflt; any other
 * value raises listing the names. */
int lm_option_choice(lua_State *L, int arg, const char *key, const char *const names[], int dflt);

#endif
