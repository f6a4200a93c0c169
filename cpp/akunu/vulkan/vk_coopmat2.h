// VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 feature structs, which the Vulkan
// headers of Debian 12 (1.3.239) predate. Layouts and structure types from the Vulkan registry
// (extensions 507 and 594); where the headers define them, these are the same structs.
#pragma once

#include "akunu/vulkan/vk_loader.h"

namespace akunu::vk {

constexpr const char* kKhrCooperativeMatrix = "VK_KHR_cooperative_matrix";
constexpr const char* kNvCooperativeMatrix2 = "VK_NV_cooperative_matrix2";

struct CooperativeMatrixFeaturesKHR {
    VkStructureType sType = VkStructureType(1000506000);  // ..._PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR
    void* pNext = nullptr;
    VkBool32 cooperativeMatrix = VK_FALSE;
    VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};

struct CooperativeMatrix2FeaturesNV {
    VkStructureType sType = VkStructureType(1000593000);  // ..._PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV
    void* pNext = nullptr;
    VkBool32 cooperativeMatrixWorkgroupScope = VK_FALSE;
    VkBool32 cooperativeMatrixFlexibleDimensions = VK_FALSE;
    VkBool32 cooperativeMatrixReductions = VK_FALSE;
    VkBool32 cooperativeMatrixConversions = VK_FALSE;
    VkBool32 cooperativeMatrixPerElementOperations = VK_FALSE;
    VkBool32 cooperativeMatrixTensorAddressing = VK_FALSE;
    VkBool32 cooperativeMatrixBlockLoads = VK_FALSE;
};

}  // namespace akunu::vk
