// Buffer: {handle, size, contents} (docs/architecture.md, "Buffers"), as a move-only RAII owner of a VkBuffer and its
// memory.
//
// `contents` is the CPU pointer when the memory is host-visible (lavapipe, unified memory, or
// ReBAR on NVIDIA, where all device memory is mappable) and null otherwise; write() and read()
// then go through the device's staging area. On the CPU backend a Buffer is page-aligned, zeroed host
// memory (no VkBuffer): contents is always set, and is its address. A Buffer keeps its Device
// alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "akunu/vulkan/device.h"
#include "akunu/vulkan/memory.h"

namespace akunu {

class Buffer {
public:
    // Throws for 0 bytes and for sizes over the largest heap or allocation the device allows.
    // `addressable`: shaders may reach it through its device address (address()), as a KV
    // cache in blocks is reached through its block table; needs bufferDeviceAddress. On the
    // CPU backend the address is the host pointer, contents().
    static Buffer allocate(std::shared_ptr<Device> device, size_t bytes, Residency residency = Residency::kAuto,
                           bool addressable = false);
    static Buffer allocate(std::shared_ptr<Device> device, const void* data, size_t bytes,
                           Residency residency = Residency::kAuto);

    Buffer() = default;
    ~Buffer() { free(); }
    Buffer(Buffer&& other) noexcept { *this = std::move(other); }
    Buffer& operator=(Buffer&& other) noexcept;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    VkBuffer handle() const { return handle_; }
    size_t size() const { return size_; }
    void* contents() const { return contents_; }  // null when not host-visible
    bool host_visible() const { return contents_ != nullptr; }
    explicit operator bool() const { return size_ != 0; }
    // Identifies the memory for hazard tracking: the VkBuffer, or the host pointer on the CPU.
    const void* id() const { return handle_ ? static_cast<const void*>(handle_) : contents_; }
    Device& device() const { return *device_; }
    uint64_t address() const;  // the device address of byte 0; throws unless allocated addressable
    const std::shared_ptr<Device>& device_ptr() const { return device_; }

    // Copies between host memory and [offset, offset + bytes) of this buffer: a memcpy when
    // host-visible, a staging copy otherwise, and for reads of uncached mapped memory of more
    // than kDirectReadBytes (the device copies them into cached host memory far faster than
    // the host reads them over the bus). A staging copy goes through the device's staging area
    // (Device::reserve_staging) in pieces of at most its size, allocating nothing whatever its
    // size. Throws when the range is outside the buffer.
    static constexpr size_t kDirectReadBytes = 16 << 10;
    void write(const void* src, size_t bytes, size_t offset = 0);
    void read(void* dst, size_t bytes, size_t offset = 0) const;

    // Releases the memory now; the Buffer becomes empty (as a moved-from one).
    void free();

    // What keeps this buffer alive, where something shared does (a Python akunu.Buffer): a
    // CommandList that records the buffer holds it until the list is restarted or destroyed,
    // so that a temporary passed to a kernel outlives the commands that read it.
    void set_owner(std::weak_ptr<const void> owner) { owner_ = std::move(owner); }
    std::shared_ptr<const void> owner() const { return owner_.lock(); }

private:
    std::shared_ptr<Device> device_;
    VkBuffer handle_ = VK_NULL_HANDLE;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    size_t size_ = 0;
    uint64_t memory_bytes_ = 0;  // what the allocation really took, for accounting
    void* contents_ = nullptr;
    bool host_cached_ = true;  // Allocation::host_cached
    bool addressable_ = false;
    std::weak_ptr<const void> owner_;
};

}  // namespace akunu
