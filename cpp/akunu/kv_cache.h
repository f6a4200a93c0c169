// KVCache: per layer, one K and one V buffer of [n_kv_heads, max_len] rows in the cache's
// format (kv_format.h: f16 values, or packed codes plus f16 row scales), allocated up front.
//
// current_length counts the positions that hold valid rows; reset() and truncate(n) only move
// it (a rewind), so nothing is freed or cleared in the hot path. save_rows/load_rows copy the
// first n positions out and in (saved model states, forks), in one order that the layout
// defines: per layer, K then V, per KV head, rows [0, n).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "akunu/buffer.h"
#include "akunu/kv_format.h"
#include "akunu/model_config.h"

namespace akunu {

class KVCache {
public:
    KVCache(const std::shared_ptr<Device>& device, const ModelConfig& c, int max_len, KvDType dtype = KvDType::kF16);

    const Buffer& k(int layer) const { return k_[size_t(layer)]; }
    const Buffer& v(int layer) const { return v_[size_t(layer)]; }
    KvBindings bindings(int layer) const;
    KvDType dtype() const { return dtype_; }
    const KvLayout& layout(bool values) const { return layout_[values]; }
    int n_layers() const { return int(k_.size()); }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    int max_length() const { return max_len_; }
    int current_length() const { return length_; }
    size_t bytes() const { return bytes_; }

    // Rows [0, n) of every layer's K and V, in the order above: n * row bytes per head.
    size_t rows_bytes(int n) const;
    std::vector<uint8_t> save_rows(int n) const;  // the GPU must be idle
    // Writes rows saved by save_rows(n) of a cache of the same shape and dtype (its max_length
    // may differ) and sets the length to n; throws, writing nothing, when the size is wrong.
    void load_rows(const uint8_t* data, size_t size, int n);

    void reset() { length_ = 0; }
    void truncate(int n);          // throws unless 0 <= n <= current_length
    void set_length(int n);        // the engine, after writing rows

private:
    // Calls visit(layer, values, offset, bytes) for each contiguous piece of rows [0, n) in
    // the saved order (values: V rather than K): the one place that knows where a row lives.
    void walk_rows(int n, const std::function<void(size_t, bool, size_t, size_t)>& visit) const;

    std::vector<Buffer> k_, v_;
    KvDType dtype_;
    KvLayout layout_[2];  // K, V
    int n_kv_heads_, head_dim_, max_len_;
    int length_ = 0;
    size_t bytes_ = 0;
};

}  // namespace akunu
