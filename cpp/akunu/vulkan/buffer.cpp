// Buffer allocation (memory-type choice, size checks, accounting) and host transfers.
#include "akunu/vulkan/buffer.h"

#include <sys/mman.h>

#include <cstring>
#include <utility>

#include "akunu/core/error.h"

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

Buffer Buffer::allocate(std::shared_ptr<Device> device, size_t bytes, Residency residency, bool addressable) {
    AKUNU_CHECK(device, "Buffer::allocate needs a device");
    const DeviceProfile& p = device->profile();
    AKUNU_CHECK(bytes > 0, "cannot allocate a buffer of 0 bytes");
    uint64_t largest_heap = 0;
    for (const auto& h : p.heaps) largest_heap = std::max(largest_heap, h.size_bytes);
    AKUNU_CHECK(bytes <= largest_heap, "cannot allocate " + mib(bytes) + " on '" + p.name +
                                           "': the largest memory heap holds " + mib(largest_heap));
    AKUNU_CHECK(bytes <= p.max_memory_allocation_bytes,
                "cannot allocate " + mib(bytes) + " on '" + p.name + "': one allocation may hold at most " +
                    mib(p.max_memory_allocation_bytes) + "; split the data over several buffers");

    Buffer b;
    b.device_ = std::move(device);
    if (b.device_->is_cpu()) {
        // Anonymous mappings are page-aligned and zero-filled; pages are touched on first use.
        void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            throw Error("out of memory allocating " + mib(bytes) + " on '" + p.name + "'; " +
                        mib(b.device_->allocated_bytes()) + " are already allocated by akunu");
        b.contents_ = mem;
        b.size_ = bytes;
        b.memory_bytes_ = bytes;
        b.addressable_ = addressable;
        b.device_->on_allocate(bytes);
        return b;
    }
    VkDevice vk = b.device_->handle();
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
    AKUNU_VK_CHECK(vkCreateBuffer(vk, &info, nullptr, &b.handle_));
    b.size_ = bytes;  // from here on, ~Buffer cleans up whatever exists

    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(vk, b.handle_, &req);
    bool mapped = false;
    int type = choose_memory_type(b.device_->memory_properties(), req.memoryTypeBits, residency, &mapped);
    AKUNU_CHECK(type >= 0, "device '" + p.name + "' has no memory type for this buffer");
    const VkDeviceSize heap_size =
        b.device_->memory_properties().memoryHeaps[b.device_->memory_properties().memoryTypes[type].heapIndex].size;
    AKUNU_CHECK(req.size <= heap_size, "cannot allocate " + mib(req.size) + " on '" + p.name +
                                           "': the chosen memory heap holds " + mib(heap_size));

    VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex = uint32_t(type);
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    if (addressable) alloc.pNext = &flags;
    b.addressable_ = addressable;
    VkResult r = vkAllocateMemory(vk, &alloc, nullptr, &b.memory_);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
        throw Error("out of memory allocating " + mib(bytes) + " on '" + p.name + "' (" + vk_result_name(r) + "); " +
                    mib(b.device_->allocated_bytes()) + " are already allocated by akunu");
    AKUNU_VK_CHECK(r);
    b.memory_bytes_ = req.size;
    b.device_->on_allocate(b.memory_bytes_);
    AKUNU_VK_CHECK(vkBindBufferMemory(vk, b.handle_, b.memory_, 0));
    if (mapped) AKUNU_VK_CHECK(vkMapMemory(vk, b.memory_, 0, VK_WHOLE_SIZE, 0, &b.contents_));
    return b;
}

uint64_t Buffer::address() const {
    AKUNU_CHECK(addressable_, "Buffer::address: the buffer was not allocated addressable");
    // The CPU kernels reach memory through host pointers: the address is the pointer itself.
    if (device_->is_cpu()) return uint64_t(reinterpret_cast<uintptr_t>(contents_));
    VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = handle_;
    return vkGetBufferDeviceAddress(device_->handle(), &info);
}

Buffer Buffer::allocate(std::shared_ptr<Device> device, const void* data, size_t bytes, Residency residency) {
    Buffer b = allocate(std::move(device), bytes, residency);
    b.write(data, bytes);
    return b;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        free();
        device_ = std::move(other.device_);
        handle_ = std::exchange(other.handle_, VK_NULL_HANDLE);
        memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
        size_ = std::exchange(other.size_, 0);
        memory_bytes_ = std::exchange(other.memory_bytes_, 0);
        contents_ = std::exchange(other.contents_, nullptr);
        addressable_ = std::exchange(other.addressable_, false);
    }
    return *this;
}

void Buffer::free() {
    if (!device_) return;
    if (device_->is_cpu()) {
        if (contents_) {
            munmap(contents_, size_);
            device_->on_free(memory_bytes_);
        }
        contents_ = nullptr;
        size_ = 0;
        memory_bytes_ = 0;
        device_.reset();
        return;
    }
    VkDevice vk = device_->handle();
    if (contents_) vkUnmapMemory(vk, memory_);
    if (handle_) vkDestroyBuffer(vk, handle_, nullptr);
    if (memory_) {
        vkFreeMemory(vk, memory_, nullptr);
        device_->on_free(memory_bytes_);
    }
    handle_ = VK_NULL_HANDLE;
    memory_ = VK_NULL_HANDLE;
    contents_ = nullptr;
    size_ = 0;
    memory_bytes_ = 0;
    device_.reset();
}

static void memory_barrier(VkCommandBuffer cb, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                           VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
    VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    barrier.srcAccessMask = src_access;
    barrier.dstAccessMask = dst_access;
    vkCmdPipelineBarrier(cb, src_stage, dst_stage, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

static void check_range(size_t size, size_t bytes, size_t offset, const char* what) {
    AKUNU_CHECK(offset <= size && bytes <= size - offset,
                std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                    " is outside a buffer of " + std::to_string(size) + " bytes");
}

void Buffer::write(const void* src, size_t bytes, size_t offset) {
    AKUNU_CHECK(size_, "write to an empty (freed or moved-from) buffer");
    check_range(size_, bytes, offset, "write");
    if (bytes == 0) return;
    if (contents_) {
        std::memcpy(static_cast<char*>(contents_) + offset, src, bytes);
        return;
    }
    Buffer staging = allocate(device_, bytes, Residency::kHost);
    std::memcpy(staging.contents_, src, bytes);
    device_->run_once([&](VkCommandBuffer cb) {
        // Earlier submissions may still read or write this range on the device.
        memory_barrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
        VkBufferCopy region{0, offset, bytes};
        vkCmdCopyBuffer(cb, staging.handle_, handle_, 1, &region);
    });
}

void Buffer::read(void* dst, size_t bytes, size_t offset) const {
    AKUNU_CHECK(size_, "read from an empty (freed or moved-from) buffer");
    check_range(size_, bytes, offset, "read");
    if (bytes == 0) return;
    if (contents_) {
        std::memcpy(dst, static_cast<const char*>(contents_) + offset, bytes);
        return;
    }
    Buffer staging = allocate(device_, bytes, Residency::kHost);
    device_->run_once([&](VkCommandBuffer cb) {
        memory_barrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
        VkBufferCopy region{offset, 0, bytes};
        vkCmdCopyBuffer(cb, handle_, staging.handle_, 1, &region);
        // Make the copy visible to the host before the fence is waited on.
        memory_barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                       VK_ACCESS_HOST_READ_BIT);
    });
    std::memcpy(dst, staging.contents_, bytes);
}

}  // namespace akunu
