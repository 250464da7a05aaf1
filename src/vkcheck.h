/* Turning Vulkan results into Lua errors. */
#ifndef LUMUS_VKCHECK_H
#define LUMUS_VKCHECK_H

#include <vulkan/vulkan.h>
#include <lua.h>

/* The name of a VkResult, e.g. "VK_ERROR_OUT_OF_DEVICE_MEMORY". */
const char *lm_vk_result_name(VkResult r);

/* Raises "lumus: <what> failed: <result>" (never returns). */
int lm_vk_error(lua_State *L, const char *what, VkResult r);

/* Checks a call made with a lua_State at hand. */
#define LM_VK(L, call) do { VkResult lm_r_ = (call); \
    if (lm_r_ != VK_SUCCESS) lm_vk_error((L), #call, lm_r_); } while (0)

#endif
