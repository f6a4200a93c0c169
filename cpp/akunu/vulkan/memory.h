// Allocation: one block of a device's memory as its backend made it (Device::allocate_memory):
// a VkBuffer bound to VkDeviceMemory on Vulkan devices (vk_memory.h), or page-aligned, zeroed
// host memory on the CPU backend (cpu/cpu_memory.h). Buffer owns one and keeps the accounting.
#pragma once

#include <cstdint>

#include <vulkan/vulkan.h>

namespace akunu {

enum class Residency {
    kAuto,  // device-local; mapped when the device can map device-local memory (ReBAR/UMA)
    kDeviceOnly,  // device-local and never mapped: transfers always go through the staging area
    kHost,  // host memory the device reads over the bus: staging and readback
};

struct Allocation {
    VkBuffer handle = VK_NULL_HANDLE;  // Vulkan only
    VkDeviceMemory memory = VK_NULL_HANDLE;  // Vulkan only
    void* contents = nullptr;  // where the host reaches it; null when not mapped
    uint64_t bytes = 0;  // what the allocation took, for accounting
    // Mapped memory whose host reads go through the CPU's caches. A discrete GPU's mapped
    // device memory (ReBAR) is uncached: the host reads it a few bytes per bus round trip.
    bool host_cached = true;
};

}  // namespace akunu
