// VkResult names and the Vulkan error message format: "file:line: call failed with NAME (hint)".
#include "akunu/core/error.h"

#include <cstring>

namespace akunu {

const char* vk_result_name(VkResult result) {
    switch (result) {
#define AKUNU_RESULT(name) \
    case name: return #name;
        AKUNU_RESULT(VK_SUCCESS)
        AKUNU_RESULT(VK_NOT_READY)
        AKUNU_RESULT(VK_TIMEOUT)
        AKUNU_RESULT(VK_EVENT_SET)
        AKUNU_RESULT(VK_EVENT_RESET)
        AKUNU_RESULT(VK_INCOMPLETE)
        AKUNU_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
        AKUNU_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
        AKUNU_RESULT(VK_ERROR_INITIALIZATION_FAILED)
        AKUNU_RESULT(VK_ERROR_DEVICE_LOST)
        AKUNU_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
        AKUNU_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
        AKUNU_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
        AKUNU_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
        AKUNU_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
        AKUNU_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
        AKUNU_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
        AKUNU_RESULT(VK_ERROR_FRAGMENTED_POOL)
        AKUNU_RESULT(VK_ERROR_UNKNOWN)
        AKUNU_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
        AKUNU_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
        AKUNU_RESULT(VK_ERROR_FRAGMENTATION)
        AKUNU_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
        AKUNU_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
#undef AKUNU_RESULT
        default: return nullptr;
    }
}

// What a user can do about the failures that have a usual cause.
static const char* hint_for(VkResult result) {
    switch (result) {
        case VK_ERROR_OUT_OF_DEVICE_MEMORY:
            return "the device ran out of memory; use a smaller model, context or prefill chunk";
        case VK_ERROR_OUT_OF_HOST_MEMORY: return "the host ran out of memory";
        case VK_ERROR_DEVICE_LOST: return "the GPU reset or hung; a kernel may have run too long or read out of bounds";
        case VK_ERROR_INCOMPATIBLE_DRIVER:
            return "no Vulkan driver is installed; on Debian/Ubuntu, apt install mesa-vulkan-drivers "
                   "gives the CPU device lavapipe";
        case VK_ERROR_LAYER_NOT_PRESENT:
            return "the Khronos validation layer is missing; apt install vulkan-validationlayers, "
                   "or unset AKUNU_VALIDATION";
        default: return nullptr;
    }
}

void throw_vk_error(VkResult result, const char* call, const char* file, int line) {
    const char* name = vk_result_name(result);
    std::string message = std::string(file) + ":" + std::to_string(line) + ": " + call + " failed with " +
                          (name ? std::string(name) : "VkResult(" + std::to_string(int(result)) + ")");
    if (const char* hint = hint_for(result)) message += " (" + std::string(hint) + ")";
    throw Error(message);
}

}  // namespace akunu
