// The process-wide Vulkan instance, with optional Khronos validation.
//
// One instance serves every akunu Device in the process; devices hold a shared_ptr to it so it
// lives until the last of them is gone. With AKUNU_VALIDATION=1 the Khronos validation layer is
// enabled and every message it emits is recorded: tests fail when the record is not empty.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "akunu/vulkan/vk_loader.h"

namespace akunu {

class Instance {
public:
    // The shared instance, created on first use. Throws if no loader or driver is present.
    static std::shared_ptr<Instance> get();
    ~Instance();
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;

    VkInstance handle() const { return instance_; }
    bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
    uint32_t api_version() const { return api_version_; }
    // Every physical device the driver reports, in driver order.
    std::vector<VkPhysicalDevice> physical_devices() const;

private:
    Instance();
    VkInstance instance_ = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
    uint32_t api_version_ = VK_API_VERSION_1_2;
};

// Validation messages (warnings and errors) recorded since the last clear, oldest first.
std::vector<std::string> validation_messages();
void clear_validation_messages();
// True when AKUNU_VALIDATION asks for the layer.
bool validation_requested();

// While one lives, validation messages raised on this thread are not recorded: around the
// creation of a device with extensions newer than the installed validation layer, and of
// kernels whose SPIR-V uses their capabilities (the cooperative-matrix-2 extensions and kernels
// against Debian 12's layer, 1.3.239, which rejects their structs and capabilities as unknown
// and so would fail every validated run on such a GPU).
class ValidationWaiver {
public:
    explicit ValidationWaiver(bool waive);
    ~ValidationWaiver();
    ValidationWaiver(const ValidationWaiver&) = delete;
    ValidationWaiver& operator=(const ValidationWaiver&) = delete;

private:
    bool previous_;
};

}  // namespace akunu
