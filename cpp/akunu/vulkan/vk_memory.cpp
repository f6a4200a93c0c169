// Vulkan allocations for Buffers (vk_memory.h).
#include "akunu/vulkan/vk_memory.h"

#include <string>

#include "akunu/core/error.h"
#include "akunu/vulkan/device.h"

namespace akunu {

// Device-local memory the CPU can map counts as "mappable device memory" only when its heap is
// large (ReBAR or unified memory); a 256 MiB BAR window is kept for nothing in particular.
static constexpr uint64_t kMinMappableHeap = 1ull << 30;

static std::string mib(uint64_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

// Picks the memory type for `residency` among those allowed by `type_bits`; -1 when none fits.
static int choose_memory_type(const VkPhysicalDeviceMemoryProperties& mem, uint32_t type_bits, Residency residency,
                              bool* mapped) {
    const VkMemoryPropertyFlags kDevice = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const VkMemoryPropertyFlags kMappable = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    auto find = [&](VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid, uint64_t min_heap) {
        for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
            const auto flags = mem.memoryTypes[t].propertyFlags;
            if (!(type_bits & (1u << t)) || (flags & want) != want || (flags & avoid)) continue;
            if (mem.memoryHeaps[mem.memoryTypes[t].heapIndex].size < min_heap) continue;
            return int(t);
        }
        return -1;
    };
    int t = -1;
    switch (residency) {
        case Residency::kAuto:
            t = find(kDevice | kMappable, 0, kMinMappableHeap);
            if (t >= 0) {
                *mapped = true;
                return t;
            }
            t = find(kDevice, 0, 0);
            *mapped = false;
            return t;
        case Residency::kDeviceOnly:
            // Prefer memory the CPU cannot see; unified-memory devices (lavapipe) have only
            // mappable memory, which is then used without mapping it.
            t = find(kDevice, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0);
            if (t < 0) t = find(kDevice, 0, 0);
            *mapped = false;
            return t;
        case Residency::kHost:
            t = find(kMappable | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0, 0);
            if (t < 0) t = find(kMappable, 0, 0);
            *mapped = true;
            return t;
    }
    return -1;
}

Allocation vk_allocate(Device& device, size_t bytes, Residency residency, bool addressable) {
    const DeviceProfile& p = device.profile();
    VkDevice vk = device.handle();
    Allocation a;
    // A partial allocation is released on any throw.
    struct Guard {
        Device& device;
        Allocation& a;
        bool armed = true;
        ~Guard() {
            if (armed) vk_free(device, a);
        }
    } guard{device, a};
    VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    info.size = bytes;
    // Any buffer may hold a dispatch's workgroup counts (DispatchTable's indirect dispatches).
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT;
    if (addressable) {
        AKUNU_CHECK(p.buffer_device_address, "device '" + p.name +
                                                 "' lacks bufferDeviceAddress, which a KV cache in blocks needs; "
                                                 "load with the cache pre-allocated (kv_alloc \"full\")");
        info.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    }
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    AKUNU_VK_CHECK(vkCreateBuffer(vk, &info, nullptr, &a.handle));

    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(vk, a.handle, &req);
    bool mapped = false;
    // Tuning mapped_memory=0: device-local memory unmapped even where the host could map it (tests of staging).
    if (residency == Residency::kAuto && !p.tuning.mapped_memory) residency = Residency::kDeviceOnly;
    int type = choose_memory_type(device.memory_properties(), req.memoryTypeBits, residency, &mapped);
    AKUNU_CHECK(type >= 0, "device '" + p.name + "' has no memory type for this buffer");
    const VkDeviceSize heap_size =
        device.memory_properties().memoryHeaps[device.memory_properties().memoryTypes[type].heapIndex].size;
    AKUNU_CHECK(req.size <= heap_size, "cannot allocate " + mib(req.size) + " on '" + p.name +
                                           "': the chosen memory heap holds " + mib(heap_size));

    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = uint32_t(type);
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    if (addressable) alloc.pNext = &flags;
    VkResult r = vkAllocateMemory(vk, &alloc, nullptr, &a.memory);
    const bool out_of_memory = r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY;
    if (out_of_memory && residency == Residency::kAuto && mapped) {
        // A discrete GPU may map (ReBAR) less of its memory than it holds: the rest is still
        // device memory, which the host then reaches through staging (bench/NOTES.md,
        // "Mapped memory runs out before device memory does").
        type = choose_memory_type(device.memory_properties(), req.memoryTypeBits, Residency::kDeviceOnly, &mapped);
        alloc.memoryTypeIndex = uint32_t(type);
        r = type >= 0 ? vkAllocateMemory(vk, &alloc, nullptr, &a.memory) : r;
    }
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        throw Error("out of memory allocating " + mib(bytes) + " on '" + p.name + "' (" + vk_result_name(r) + "); " +
                    mib(device.allocated_bytes()) + " are already allocated by akunu");
    AKUNU_VK_CHECK(r);
    a.bytes = req.size;
    AKUNU_VK_CHECK(vkBindBufferMemory(vk, a.handle, a.memory, 0));
    if (mapped) AKUNU_VK_CHECK(vkMapMemory(vk, a.memory, 0, VK_WHOLE_SIZE, 0, &a.contents));
    a.host_cached = device.memory_properties().memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    guard.armed = false;
    return a;
}

void vk_free(Device& device, const Allocation& a) {
    VkDevice vk = device.handle();
    if (a.contents) vkUnmapMemory(vk, a.memory);
    if (a.handle) vkDestroyBuffer(vk, a.handle, nullptr);
    if (a.memory) vkFreeMemory(vk, a.memory, nullptr);
}

uint64_t vk_address(const Device& device, const Allocation& a) {
    VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = a.handle;
    return vkGetBufferDeviceAddress(device.handle(), &info);
}

}  // namespace akunu
