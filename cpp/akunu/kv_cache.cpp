// KVCache allocation and rewind.
#include "akunu/kv_cache.h"

#include "akunu/error.h"

namespace akunu {

KVCache::KVCache(const std::shared_ptr<Device>& device, const ModelConfig& c, int max_len, KvDType dtype)
    : dtype_(dtype), n_kv_heads_(c.n_kv_heads), head_dim_(c.head_dim), max_len_(max_len) {
    AKUNU_CHECK(max_len > 0, "the KV cache needs a positive length");
    layout_ = kv_layout(dtype, c.n_kv_heads, max_len, c.head_dim);
    const size_t bytes = size_t(layout_.bytes);
    for (int l = 0; l < c.n_layers; ++l) {
        k_.push_back(Buffer::allocate(device, bytes));
        v_.push_back(Buffer::allocate(device, bytes));
        bytes_ += 2 * bytes;
    }
}

KvBindings KVCache::bindings(int layer) const {
    const Buffer &k = k_[size_t(layer)], &v = v_[size_t(layer)];
    const size_t data = size_t(layout_.data_bytes);
    if (dtype_ == KvDType::kF16) return {dtype_, Binding(k), Binding(v), {}, {}};
    const size_t scales = size_t(layout_.bytes - layout_.scale_offset), at = size_t(layout_.scale_offset);
    return {dtype_, Binding(k, 0, data), Binding(v, 0, data), Binding(k, at, scales), Binding(v, at, scales)};
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
