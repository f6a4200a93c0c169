// KVCache: per layer, K and V as [n_kv_heads, max_len, head_dim] f16, allocated up front.
//
// current_length counts the positions that hold valid rows; reset() and truncate(n) only move
// it (a rewind), so nothing is freed or cleared in the hot path.
#pragma once

#include <memory>
#include <vector>

#include "akunu/buffer.h"
#include "akunu/model_config.h"

namespace akunu {

class KVCache {
public:
    KVCache(const std::shared_ptr<Device>& device, const ModelConfig& c, int max_len);

    const Buffer& k(int layer) const { return k_[size_t(layer)]; }
    const Buffer& v(int layer) const { return v_[size_t(layer)]; }
    int n_layers() const { return int(k_.size()); }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    int max_length() const { return max_len_; }
    int current_length() const { return length_; }
    size_t bytes() const { return bytes_; }

    void reset() { length_ = 0; }
    void truncate(int n);          // throws unless 0 <= n <= current_length
    void set_length(int n);        // the engine, after writing rows

private:
    std::vector<Buffer> k_, v_;
    int n_kv_heads_, head_dim_, max_len_;
    int length_ = 0;
    size_t bytes_ = 0;
};

}  // namespace akunu
