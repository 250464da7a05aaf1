/* Comparisons eq, ne, lt, le, gt, ge: operands as for add (tensors of one float dtype,
 * broadcast, or numbers); the result is a bool tensor. NaN compares false, except for ne
 * (true), as IEEE and PyTorch. */
#include "elementwise.h"

static const lm_binary_op EQ = { "eq", LM_EW_EQ, LM_EW_EQ, 1 };
static const lm_binary_op NE = { "ne", LM_EW_NE, LM_EW_NE, 1 };
static const lm_binary_op LT = { "lt", LM_EW_LT, LM_EW_GT, 1 };
static const lm_binary_op LE = { "le", LM_EW_LE, LM_EW_GE, 1 };
static const lm_binary_op GT = { "gt", LM_EW_GT, LM_EW_LT, 1 };
static const lm_binary_op GE = { "ge", LM_EW_GE, LM_EW_LE, 1 };

int lm_op_eq(lua_State *L) { return lm_ew_binary(L, &EQ); }
int lm_op_ne(lua_State *L) { return lm_ew_binary(L, &NE); }
int lm_op_lt(lua_State *L) { return lm_ew_binary(L, &LT); }
int lm_op_le(lua_State *L) { return lm_ew_binary(L, &LE); }
int lm_op_gt(lua_State *L) { return lm_ew_binary(L, &GT); }
int lm_op_ge(lua_State *L) { return lm_ew_binary(L, &GE); }
