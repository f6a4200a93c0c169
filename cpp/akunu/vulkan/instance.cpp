// Instance creation, the validation-message record and physical-device enumeration.
#include "akunu/vulkan/instance.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "akunu/core/error.h"
#include "akunu/core/tuning.h"

namespace akunu {

// ---------------------------------------------------------------------------------------------
// Validation messages
// ---------------------------------------------------------------------------------------------

static std::mutex g_messages_mutex;
static std::vector<std::string> g_messages;

std::vector<std::string> validation_messages() {
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    return g_messages;
}

void clear_validation_messages() {
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    g_messages.clear();
}

bool validation_requested() { return feature_on(Feature::kValidation); }

// The layer calls the messenger on the thread of the call it checks.
static thread_local bool t_waived = false;

ValidationWaiver::ValidationWaiver(bool waive) : previous_(t_waived) { t_waived = t_waived || waive; }
ValidationWaiver::~ValidationWaiver() { t_waived = previous_; }

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                            VkDebugUtilsMessageTypeFlagsEXT,
                                                            const VkDebugUtilsMessengerCallbackDataEXT* data, void*) {
    if (t_waived) return VK_FALSE;
    const char* level = severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning";
    std::lock_guard<std::mutex> lock(g_messages_mutex);
    g_messages.push_back(std::string(level) + ": " + (data && data->pMessage ? data->pMessage : "(no text)"));
    return VK_FALSE;  // never abort the call that triggered the message
}

// ---------------------------------------------------------------------------------------------
// Instance
// ---------------------------------------------------------------------------------------------

static bool has_layer(const char* name) {
    uint32_t n = 0;
    AKUNU_VK_CHECK(vkEnumerateInstanceLayerProperties(&n, nullptr));
    std::vector<VkLayerProperties> layers(n);
    AKUNU_VK_CHECK(vkEnumerateInstanceLayerProperties(&n, layers.data()));
    for (const auto& l : layers)
        if (std::strcmp(l.layerName, name) == 0) return true;
    return false;
}

static bool has_instance_extension(const char* name) {
    uint32_t n = 0;
    AKUNU_VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr));
    std::vector<VkExtensionProperties> exts(n);
    AKUNU_VK_CHECK(vkEnumerateInstanceExtensionProperties(nullptr, &n, exts.data()));
    for (const auto& e : exts)
        if (std::strcmp(e.extensionName, name) == 0) return true;
    return false;
}

Instance::Instance() {
    load_vulkan_library();
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion) vkEnumerateInstanceVersion(&loader_version);
    AKUNU_CHECK(loader_version >= VK_API_VERSION_1_2,
                "the Vulkan loader supports only Vulkan " + std::to_string(VK_API_VERSION_MAJOR(loader_version)) + "." +
                    std::to_string(VK_API_VERSION_MINOR(loader_version)) + "; akunu needs 1.2 or newer");
    api_version_ = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;

    std::vector<const char*> layers, extensions;
    const bool validate = validation_requested();
    if (validate) {
        AKUNU_CHECK(has_layer("VK_LAYER_KHRONOS_validation"),
                    "AKUNU_VALIDATION is set but the Khronos validation layer is not installed "
                    "(Debian/Ubuntu: apt install vulkan-validationlayers)");
        AKUNU_CHECK(has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME),
                    "AKUNU_VALIDATION is set but the loader lacks VK_EXT_debug_utils");
        layers.push_back("VK_LAYER_KHRONOS_validation");
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }

    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "akunu";
    app.pEngineName = "akunu";
    app.apiVersion = api_version_;

    VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    messenger_info.messageSeverity =
        VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    messenger_info.messageType =
        VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    messenger_info.pfnUserCallback = on_validation_message;

    VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    // Chained so that messages from vkCreateInstance/vkDestroyInstance themselves are caught too.
    info.pNext = validate ? &messenger_info : nullptr;
    info.pApplicationInfo = &app;
    info.enabledLayerCount = uint32_t(layers.size());
    info.ppEnabledLayerNames = layers.data();
    info.enabledExtensionCount = uint32_t(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    AKUNU_VK_CHECK(vkCreateInstance(&info, nullptr, &instance_));
    load_vulkan_instance_functions(instance_);

    if (validate) {
        VkResult r = vkCreateDebugUtilsMessengerEXT(instance_, &messenger_info, nullptr, &messenger_);
        if (r != VK_SUCCESS) {
            vkDestroyInstance(instance_, nullptr);
            throw_vk_error(r, "vkCreateDebugUtilsMessengerEXT", __FILE__, __LINE__);
        }
    }
}

Instance::~Instance() {
    if (messenger_) vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
    vkDestroyInstance(instance_, nullptr);
}

std::shared_ptr<Instance> Instance::get() {
    // Weakly cached: the instance goes away with the last device, and a later call makes a new
    // one (which picks up a changed AKUNU_VALIDATION).
    static std::mutex mutex;
    static std::weak_ptr<Instance> cached;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto alive = cached.lock()) return alive;
    std::shared_ptr<Instance> created(new Instance());
    cached = created;
    return created;
}

std::vector<VkPhysicalDevice> Instance::physical_devices() const {
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(instance_, &n, nullptr);
    if (r == VK_ERROR_INITIALIZATION_FAILED || n == 0)
        throw Error(
            "no Vulkan device found: no driver is installed or none works here. Install one "
            "(Debian/Ubuntu: apt install mesa-vulkan-drivers gives the CPU device lavapipe; NVIDIA and AMD "
            "drivers bring their own), or check VK_DRIVER_FILES / VK_ICD_FILENAMES");
    AKUNU_VK_CHECK(r);
    std::vector<VkPhysicalDevice> devices(n);
    AKUNU_VK_CHECK(vkEnumeratePhysicalDevices(instance_, &n, devices.data()));
    devices.resize(n);
    return devices;
}

}  // namespace akunu
