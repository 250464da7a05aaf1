/* Vulkan extensions newer than the headers lumus builds with (Debian 12's
 * libvulkan-dev, 1.3.239): the few enums and structures lumus uses, under its own names
 * so that newer headers do not clash. Values from the Vulkan registry. */
#ifndef LUMUS_VK_EXT_H
#define LUMUS_VK_EXT_H

#include <vulkan/vulkan.h>

/* VK_KHR_cooperative_matrix */
#define LM_KHR_COOPERATIVE_MATRIX_NAME "VK_KHR_cooperative_matrix"
#define LM_STRUCTURE_TYPE_COOP_KHR_FEATURES ((VkStructureType)1000506000)
#define LM_STRUCTURE_TYPE_COOP_KHR_PROPERTIES ((VkStructureType)1000506001)
#define LM_COMPONENT_FLOAT16 0   /* VkComponentTypeKHR */
#define LM_COMPONENT_FLOAT32 1
#define LM_SCOPE_SUBGROUP 3      /* VkScopeKHR */

typedef struct lm_coop_khr_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix;
    VkBool32 cooperativeMatrixRobustBufferAccess;
} lm_coop_khr_features;

typedef struct lm_coop_khr_properties {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    int32_t AType, BType, CType, ResultType;   /* VkComponentTypeKHR */
    VkBool32 saturatingAccumulation;
    int32_t scope;                             /* VkScopeKHR */
} lm_coop_khr_properties;

typedef VkResult (VKAPI_PTR *lm_get_coop_khr_properties)(VkPhysicalDevice, uint32_t *, lm_coop_khr_properties *);

/* VK_NV_cooperative_matrix2 (lumus uses its conversions only) */
#define LM_NV_COOPERATIVE_MATRIX_2_NAME "VK_NV_cooperative_matrix2"
#define LM_STRUCTURE_TYPE_COOP2_FEATURES ((VkStructureType)1000593000)

typedef struct lm_coop2_features {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrixWorkgroupScope;
    VkBool32 cooperativeMatrixFlexibleDimensions;
    VkBool32 cooperativeMatrixReductions;
    VkBool32 cooperativeMatrixConversions;
    VkBool32 cooperativeMatrixPerElementOperations;
    VkBool32 cooperativeMatrixTensorAddressing;
    VkBool32 cooperativeMatrixBlockLoads;
} lm_coop2_features;

#endif
