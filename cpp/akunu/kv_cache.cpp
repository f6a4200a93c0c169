// KVCache allocation, rewind, and copying rows out and in.
#include "akunu/kv_cache.h"

#include "akunu/error.h"

namespace akunu {

KVCache::KVCache(const std::shared_ptr<Device>& device, const ModelConfig& c, int max_len, KvDType dtype)
    : dtype_(dtype), n_kv_heads_(c.n_kv_heads), head_dim_(c.head_dim), max_len_(max_len) {
    AKUNU_CHECK(max_len > 0, "the KV cache needs a positive length");
    for (const bool values : {false, true}) layout_[values] = kv_layout(kv_side(dtype, values), c.n_kv_heads, max_len, c.head_dim);
    for (int l = 0; l < c.n_layers; ++l) {
        k_.push_back(Buffer::allocate(device, size_t(layout_[0].bytes)));
        v_.push_back(Buffer::allocate(device, size_t(layout_[1].bytes)));
        bytes_ += size_t(layout_[0].bytes + layout_[1].bytes);
    }
}

KvBindings KVCache::bindings(int layer) const {
    const Buffer &k = k_[size_t(layer)], &v = v_[size_t(layer)];
    if (dtype_ == KvDType::kF16) return {dtype_, Binding(k), Binding(v), {}, {}};
    const KvLayout &lk = layout_[0], &lv = layout_[1];
    return {dtype_, Binding(k, 0, size_t(lk.data_bytes)), Binding(v, 0, size_t(lv.data_bytes)),
            Binding(k, size_t(lk.scale_offset), size_t(lk.bytes - lk.scale_offset)),
            Binding(v, size_t(lv.scale_offset), size_t(lv.bytes - lv.scale_offset))};
}

void KVCache::truncate(int n) {
    AKUNU_CHECK(n >= 0 && n <= length_, "truncate(" + std::to_string(n) + "): the cache holds " + std::to_string(length_) +
                                            " positions; truncate rewinds to a length from 0 to " +
                                            std::to_string(length_) + " (eval adds positions)");
    length_ = n;
}

void KVCache::set_length(int n) {
    AKUNU_CHECK(n >= 0 && n <= max_len_, "KV cache length " + std::to_string(n) + " is outside [0, " + std::to_string(max_len_) + "]");
    length_ = n;
}

void KVCache::walk_rows(int n, const std::function<void(size_t, bool, size_t, size_t)>& visit) const {
    AKUNU_CHECK(n >= 0 && n <= max_len_, "KV rows [0, " + std::to_string(n) + ") are outside a cache of " +
                                             std::to_string(max_len_) + " positions");
    // Head h's rows are [h, 0 : max_len, ...] in the values (codes) and, for a quantized
    // cache, in the scales: rows [0, n) are one piece of each.
    const size_t rows = size_t(max_len_);
    for (size_t l = 0; l < k_.size(); ++l)
        for (const bool values : {false, true}) {
            const KvDType side = kv_side(dtype_, values);
            const size_t row = size_t(head_dim_) * size_t(kv_value_bits(side)) / 8;
            for (int h = 0; h < n_kv_heads_; ++h) {
                visit(l, values, size_t(h) * rows * row, size_t(n) * row);
                if (side != KvDType::kF16) visit(l, values, size_t(layout_[values].scale_offset) + size_t(h) * rows * 2, size_t(n) * 2);
            }
        }
}

size_t KVCache::rows_bytes(int n) const {
    size_t total = 0;
    walk_rows(n, [&](size_t, bool, size_t, size_t bytes) { total += bytes; });
    return total;
}

std::vector<uint8_t> KVCache::save_rows(int n) const {
    std::vector<uint8_t> out(rows_bytes(n));
    size_t at = 0;
    walk_rows(n, [&](size_t layer, bool values, size_t offset, size_t bytes) {
        (values ? v_ : k_)[layer].read(out.data() + at, bytes, offset);
        at += bytes;
    });
    return out;
}

void KVCache::load_rows(const uint8_t* data, size_t size, int n) {
    const size_t want = rows_bytes(n);
    AKUNU_CHECK(size == want, "KV rows for " + std::to_string(n) + " positions take " + std::to_string(want) +
                                  " bytes in this cache, not " + std::to_string(size));
    size_t at = 0;
    walk_rows(n, [&](size_t layer, bool values, size_t offset, size_t bytes) {
        (values ? v_ : k_)[layer].write(data + at, bytes, offset);
        at += bytes;
    });
    length_ = n;
}

}  // namespace akunu
