// Vulkan memory for Buffers: the memory type for a residency, a VkBuffer bound to it, mapped
// where the host can reach it, and a device address where asked.
#pragma once

#include <cstddef>

#include "akunu/vulkan/memory.h"

namespace akunu {

class Device;

// Throws akunu::Error naming the device and what akunu already holds when memory runs out.
Allocation vk_allocate(Device& device, size_t bytes, Residency residency, bool addressable);
void vk_free(Device& device, const Allocation& a);
uint64_t vk_address(const Device& device, const Allocation& a);

}  // namespace akunu
