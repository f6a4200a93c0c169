// Run-time loading of the Vulkan loader library (libvulkan.so.1).
//
// akunu is built with VK_NO_PROTOTYPES and resolves every entry point itself, so that importing
// the Python module never fails: a machine without a Vulkan loader or driver gets a clear
// akunu::Error from the first call that needs one. AKUNU_VULKAN_LIBRARY names another loader.
#pragma once

#include <vulkan/vulkan.h>

namespace akunu {

#define AKUNU_VK_GLOBAL(name) extern PFN_##name name;
#define AKUNU_VK_INSTANCE(name) extern PFN_##name name;
#include "akunu/vulkan/vk_functions.inc"
#undef AKUNU_VK_GLOBAL
#undef AKUNU_VK_INSTANCE

// Opens the loader library once and resolves the global entry points. Throws if it is missing.
void load_vulkan_library();

// Resolves the instance-level entry points for `instance`. akunu creates one instance per process.
void load_vulkan_instance_functions(VkInstance instance);

}  // namespace akunu
