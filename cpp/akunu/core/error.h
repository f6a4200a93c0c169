// akunu's one error path. Every failure, from a Vulkan call or from a user's input, throws
// akunu::Error; the Python module turns it into an exception and the C API into a status.
// Nothing in akunu aborts the process on bad input.
#pragma once

#include <stdexcept>
#include <string>

#include <vulkan/vulkan.h>

namespace akunu {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" for a VkResult; "VkResult(<n>)" for codes we do not know.
const char* vk_result_name(VkResult result);

[[noreturn]] void throw_vk_error(VkResult result, const char* call, const char* file, int line);

}  // namespace akunu

// Runs in release builds too: every Vulkan call that can fail goes through this.
#define AKUNU_VK_CHECK(call)                                                                                      \
    do {                                                                                                          \
        VkResult akunu_vk_result_ = (call);                                                                       \
        if (akunu_vk_result_ != VK_SUCCESS) ::akunu::throw_vk_error(akunu_vk_result_, #call, __FILE__, __LINE__); \
    } while (0)

// For conditions on user input or engine invariants: throws akunu::Error(message).
#define AKUNU_CHECK(cond, message)                               \
    do {                                                         \
        if (!(cond)) throw ::akunu::Error(std::string(message)); \
    } while (0)
