// The device's staging area (Device::reserve_staging): one host-memory buffer, planned at load,
// that the transfers of unmapped buffers copy through in pieces instead of allocating one per call.
#include <algorithm>

#include "akunu/vulkan/device.h"

namespace akunu {

static constexpr size_t kLeastStagingKib = 4096;

void Device::reserve_staging(size_t bytes) {
    if (is_cpu() || bytes == 0) return;  // host memory throughout: nothing is ever staged
    std::lock_guard<std::mutex> lock(staging_mutex_);
    grow_staging(bytes);
}

size_t Device::staging_bytes() const {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    return staging_size_;
}

void Device::stage(size_t bytes, const std::function<void(VkBuffer, void*, size_t, size_t)>& piece) {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    if (staging_size_ == 0) grow_staging(0);  // none reserved: the least area, once
    for (size_t at = 0; at < bytes; at += staging_size_)
        piece(staging_.handle, staging_.contents, at, std::min(staging_size_, bytes - at));
}

// With staging_mutex_ held: the area holds at least `bytes`, and never less than tuning staging_kib.
void Device::grow_staging(size_t bytes) {
    const int kib = profile_.tuning.staging_kib;
    bytes = std::max(bytes, (kib < 0 ? kLeastStagingKib : std::max<size_t>(size_t(kib), 1)) * 1024);
    if (bytes <= staging_size_) return;
    const Allocation grown = allocate_memory(bytes, Residency::kHost, false);
    on_allocate(grown.bytes);
    free_staging();
    staging_ = grown;
    staging_size_ = bytes;
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
