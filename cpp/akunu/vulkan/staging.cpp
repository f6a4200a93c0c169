// The device's staging area (Device::reserve_staging): one host-memory buffer, planned at load,
// that the transfers of unmapped buffers copy through instead of allocating one per call.
#include "akunu/vulkan/device.h"

namespace akunu {

void Device::reserve_staging(size_t bytes) {
    if (is_cpu() || bytes == 0) return;  // host memory throughout: nothing is ever staged
    std::lock_guard<std::mutex> lock(staging_mutex_);
    if (bytes <= staging_size_) return;
    const Allocation grown = allocate_memory(bytes, Residency::kHost, false);
    on_allocate(grown.bytes);
    free_staging();
    staging_ = grown;
    staging_size_ = bytes;
}

size_t Device::staging_bytes() const {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    return staging_size_;
}

bool Device::stage(size_t bytes, const std::function<void(VkBuffer, void*)>& transfer) {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    if (bytes > staging_size_) return false;
    transfer(staging_.handle, staging_.contents);
    return true;
}

// With staging_mutex_ held, or from the destructor.
void Device::free_staging() {
    if (staging_size_ == 0) return;
    free_memory(staging_);
    on_free(staging_.bytes);
    staging_ = {};
    staging_size_ = 0;
}

}  // namespace akunu
