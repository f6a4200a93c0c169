// Buffer allocation (memory-type choice, size checks, accounting) and host transfers.
#include "akunu/vulkan/buffer.h"

#include <cstring>
#include <utility>

#include "akunu/core/error.h"

namespace akunu {

static std::string mib(uint64_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

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
    const Allocation m = b.device_->allocate_memory(bytes, residency, addressable);
    b.handle_ = m.handle;
    b.memory_ = m.memory;
    b.contents_ = m.contents;
    b.host_cached_ = m.host_cached;
    b.size_ = bytes;
    b.memory_bytes_ = m.bytes;
    b.addressable_ = addressable;
    b.device_->on_allocate(m.bytes);
    return b;
}

uint64_t Buffer::address() const {
    AKUNU_CHECK(addressable_, "Buffer::address: the buffer was not allocated addressable");
    return device_->address_of({handle_, memory_, contents_, memory_bytes_});
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
        host_cached_ = std::exchange(other.host_cached_, true);
        addressable_ = std::exchange(other.addressable_, false);
    }
    return *this;
}

void Buffer::free() {
    if (!device_) return;
    if (handle_ || contents_) {
        device_->free_memory({handle_, memory_, contents_, memory_bytes_});
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
    device_->stage(bytes, [&](VkBuffer staging, void* host, size_t at, size_t n) {
        std::memcpy(host, static_cast<const char*>(src) + at, n);
        device_->run_once([&](VkCommandBuffer cb) {
            // Earlier submissions may still read or write this range on the device.
            memory_barrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                           VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT);
            VkBufferCopy region{0, offset + at, n};
            vkCmdCopyBuffer(cb, staging, handle_, 1, &region);
        });
    });
}

void Buffer::read(void* dst, size_t bytes, size_t offset) const {
    AKUNU_CHECK(size_, "read from an empty (freed or moved-from) buffer");
    check_range(size_, bytes, offset, "read");
    if (bytes == 0) return;
    if (contents_ && (host_cached_ || bytes <= kDirectReadBytes)) {
        std::memcpy(dst, static_cast<const char*>(contents_) + offset, bytes);
        return;
    }
    device_->stage(bytes, [&](VkBuffer staging, void* host, size_t at, size_t n) {
        device_->run_once([&](VkCommandBuffer cb) {
            memory_barrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_ACCESS_MEMORY_WRITE_BIT,
                           VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
            VkBufferCopy region{offset + at, 0, n};
            vkCmdCopyBuffer(cb, handle_, staging, 1, &region);
            // Make the copy visible to the host before the fence is waited on.
            memory_barrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                           VK_ACCESS_HOST_READ_BIT);
        });
        std::memcpy(static_cast<char*>(dst) + at, host, n);
    });
}

}  // namespace akunu
