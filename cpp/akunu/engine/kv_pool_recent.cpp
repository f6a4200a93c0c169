// KvPoolRecent: a batch's per-sequence rings, copied on fork, and the shared blocks' tails
// (kv_pool_recent.h).
#include "akunu/engine/kv_pool_recent.h"

#include "akunu/core/error.h"

namespace akunu {

KvPoolRecent::KvPoolRecent(const std::shared_ptr<Device>& device, const KvRecentPlan& plan, int n_layers,
                           int n_kv_heads, int head_dim, int sequences)
    : plan_(plan), n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim), sequences_(sequences) {
    AKUNU_CHECK(plan.window > 0 && plan.rows >= plan.window, "a batch's recent window needs rings of at least " +
                                                                 std::to_string(plan.window) + " rows, not " +
                                                                 std::to_string(plan.rows));
    const size_t bytes = size_t(sequences) * size_t(n_kv_heads) * size_t(plan.rows) * size_t(head_dim) * 2;
    for (int l = 0; l < n_layers; ++l) {
        k_.push_back(Buffer::allocate(device, bytes));
        v_.push_back(Buffer::allocate(device, bytes));
    }
}

void KvPoolRecent::bind(KvBindings& b, int layer) const {
    b.recent = uint32_t(plan_.window);
    b.recent_rows = uint32_t(plan_.rows);
    b.k_recent = Binding(k_[size_t(layer)]);
    b.v_recent = Binding(v_[size_t(layer)]);
}

size_t KvPoolRecent::ring_bytes() const {
    size_t total = 0;
    for (size_t l = 0; l < k_.size(); ++l) total += k_[l].size() + v_[l].size();
    return total;
}

size_t KvPoolRecent::tail_bytes() const {
    size_t total = 0;
    for (const auto& [block, rows] : tails_) total += rows.size() * 2;
    return total;
}

size_t KvPoolRecent::row_offset(int seq, int head, int t) const {
    const size_t ring = size_t(seq) * size_t(n_kv_heads_) + size_t(head);
    return (ring * size_t(plan_.rows) + size_t(t % plan_.rows)) * size_t(head_dim_) * 2;
}

void KvPoolRecent::copy(int dst, int src) {
    const size_t part = size_t(n_kv_heads_) * size_t(plan_.rows) * size_t(head_dim_) * 2;
    std::vector<uint8_t> rows(part);
    for (int l = 0; l < n_layers_; ++l)
        for (Buffer* ring : {&k_[size_t(l)], &v_[size_t(l)]}) {
            ring->read(rows.data(), part, size_t(src) * part);
            ring->write(rows.data(), part, size_t(dst) * part);
        }
}

void KvPoolRecent::keep_tail(int block, int seq, int end) {
    const size_t row = size_t(head_dim_);
    std::vector<uint16_t> tail(size_t(n_layers_) * 2 * size_t(n_kv_heads_) * size_t(tail_rows()) * row);
    size_t at = 0;
    for (int l = 0; l < n_layers_; ++l)
        for (const Buffer* ring : {&k_[size_t(l)], &v_[size_t(l)]})
            for (int h = 0; h < n_kv_heads_; ++h)
                for (int t = end - tail_rows(); t < end; ++t, at += row)
                    ring->read(tail.data() + at, row * 2, row_offset(seq, h, t));
    tails_[block] = std::move(tail);
}

void KvPoolRecent::restore_tail(int block, int seq, int end) {
    const auto it = tails_.find(block);
    AKUNU_CHECK(it != tails_.end(), "block " + std::to_string(block) + " keeps no recent window to share");
    const size_t row = size_t(head_dim_);
    size_t at = 0;
    for (int l = 0; l < n_layers_; ++l)
        for (Buffer* ring : {&k_[size_t(l)], &v_[size_t(l)]})
            for (int h = 0; h < n_kv_heads_; ++h)
                for (int t = end - tail_rows(); t < end; ++t, at += row)
                    ring->write(it->second.data() + at, row * 2, row_offset(seq, h, t));
}

}  // namespace akunu
