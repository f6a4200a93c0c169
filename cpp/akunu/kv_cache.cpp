// KVCache allocation and rewind.
#include "akunu/kv_cache.h"

#include "akunu/error.h"
#include "akunu/memory_plan.h"

namespace akunu {

KVCache::KVCache(const std::shared_ptr<Device>& device, const ModelConfig& c, int max_len)
    : n_kv_heads_(c.n_kv_heads), head_dim_(c.head_dim), max_len_(max_len) {
    AKUNU_CHECK(max_len > 0, "the KV cache needs a positive length");
    const size_t bytes = size_t(c.n_kv_heads) * size_t(max_len) * kv_row_bytes(KvDType::kF16, c.head_dim);
    for (int l = 0; l < c.n_layers; ++l) {
        k_.push_back(Buffer::allocate(device, bytes));
        v_.push_back(Buffer::allocate(device, bytes));
        bytes_ += 2 * bytes;
    }
}

void KVCache::truncate(int n) {
    AKUNU_CHECK(n >= 0 && n <= length_, "truncate(" + std::to_string(n) + "): the cache holds " + std::to_string(length_) +
                                            " positions");
    length_ = n;
}

void KVCache::set_length(int n) {
    AKUNU_CHECK(n >= 0 && n <= max_len_, "KV cache length " + std::to_string(n) + " is outside [0, " + std::to_string(max_len_) + "]");
    length_ = n;
}

}  // namespace akunu
