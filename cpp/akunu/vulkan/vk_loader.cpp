// dlopen-based resolution of the functions listed in vk_functions.inc.
#include "akunu/vulkan/vk_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "akunu/core/error.h"
#include "akunu/core/tuning.h"

namespace akunu {

#define AKUNU_VK_GLOBAL(name) PFN_##name name = nullptr;
#define AKUNU_VK_INSTANCE(name) PFN_##name name = nullptr;
#include "akunu/vulkan/vk_functions.inc"
#undef AKUNU_VK_GLOBAL
#undef AKUNU_VK_INSTANCE

static PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;

void load_vulkan_library() {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (get_instance_proc_addr) return;

    const std::string chosen = feature_value(Feature::kVulkanLibrary);
    const bool override_path = !chosen.empty();
    const char* path = override_path ? chosen.c_str() : "libvulkan.so.1";
    // The handle is kept for the life of the process: Vulkan objects may outlive any owner of ours.
    void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char* why = dlerror();
        throw Error(std::string("could not load the Vulkan loader '") + path + "': " + (why ? why : "unknown error") +
                    ". Install it (Debian/Ubuntu: apt install libvulkan1 mesa-vulkan-drivers)" +
                    (override_path ? ", or fix AKUNU_VULKAN_LIBRARY" : ""));
    }
    auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
    if (!gipa) throw Error(std::string("'") + path + "' is not a Vulkan loader: it has no vkGetInstanceProcAddr");

#define AKUNU_VK_GLOBAL(name) name = reinterpret_cast<PFN_##name>(gipa(nullptr, #name));
#define AKUNU_VK_INSTANCE(name)
#include "akunu/vulkan/vk_functions.inc"
#undef AKUNU_VK_GLOBAL
#undef AKUNU_VK_INSTANCE
    if (!vkCreateInstance) throw Error(std::string("the Vulkan loader '") + path + "' exports no vkCreateInstance");
    get_instance_proc_addr = gipa;
}

void load_vulkan_instance_functions(VkInstance instance) {
    // Optional functions (debug utils, push descriptors) stay null when their extension is absent;
    // callers check before use.
#define AKUNU_VK_GLOBAL(name)
#define AKUNU_VK_INSTANCE(name) name = reinterpret_cast<PFN_##name>(get_instance_proc_addr(instance, #name));
#include "akunu/vulkan/vk_functions.inc"
#undef AKUNU_VK_GLOBAL
#undef AKUNU_VK_INSTANCE
}

}  // namespace akunu
