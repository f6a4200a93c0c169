// KvRecent: the recent window's rings, which positions they hold, and copying their rows out
// and in (kv_recent.h).
#include "akunu/engine/kv_recent.h"

#include <algorithm>

#include "akunu/core/error.h"

namespace akunu {

KvRecentPlan plan_kv_recent(int window, int reserve, int held_layers, int n_kv_heads, int head_dim) {
    if (window <= 0) return {};
    KvRecentPlan p{window, window + std::max(reserve, 0), 0};
    p.bytes = uint64_t(held_layers) * 2 * uint64_t(n_kv_heads) * uint64_t(p.rows) * uint64_t(head_dim) * 2;
    return p;
}

KvRecent::KvRecent(const std::shared_ptr<Device>& device, const KvRecentPlan& plan, int n_layers, LayerRange held,
                   int n_kv_heads, int head_dim)
    : plan_(plan),
      held_(held),
      n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      holds_(size_t(plan.rows), -1) {
    const size_t bytes = size_t(n_kv_heads) * size_t(plan.rows) * size_t(head_dim) * 2;
    for (int l = 0; l < n_layers; ++l) {
        const bool mine = plan.window > 0 && held.holds(l, n_layers);
        k_.push_back(mine ? Buffer::allocate(device, bytes) : Buffer());
        v_.push_back(mine ? Buffer::allocate(device, bytes) : Buffer());
    }
}

size_t KvRecent::bytes() const {
    size_t total = 0;
    for (size_t l = 0; l < k_.size(); ++l) total += (k_[l] ? k_[l].size() : 0) + (v_[l] ? v_[l].size() : 0);
    return total;
}

size_t KvRecent::row_offset(int head, int t) const {
    return (size_t(head) * size_t(plan_.rows) + size_t(t % plan_.rows)) * size_t(head_dim_) * 2;
}

void KvRecent::wrote(int from, int to) {
    for (int t = std::max(from, to - plan_.rows); t < to; ++t) holds_[size_t(t % plan_.rows)] = t;
}

std::vector<int> KvRecent::missing(int n) const {
    std::vector<int> out;
    for (int t = first_read(n); t < n; ++t)
        if (holds_[size_t(t % plan_.rows)] != t) out.push_back(t);
    return out;
}

void KvRecent::put(int layer, bool values, int head, int t, const uint16_t* row) {
    Buffer& ring = const_cast<Buffer&>(values ? v_[size_t(layer)] : k_[size_t(layer)]);  // one of this cache's own
    ring.write(row, size_t(head_dim_) * 2, row_offset(head, t));
    holds_[size_t(t % plan_.rows)] = t;
}

size_t KvRecent::saved_bytes(int n) const {
    if (plan_.window == 0) return 0;
    const int layers = held_.end(n_layers_) - held_.first;
    return size_t(layers) * 2 * size_t(n_kv_heads_) * size_t(n - first_read(n)) * size_t(head_dim_) * 2;
}

std::vector<uint8_t> KvRecent::save(int n) const {
    std::vector<uint8_t> out(saved_bytes(n));
    const size_t row = size_t(head_dim_) * 2;
    size_t at = 0;
    for (int l = held_.first; plan_.window > 0 && l < held_.end(n_layers_); ++l)
        for (const Buffer* ring : {&k_[size_t(l)], &v_[size_t(l)]})
            for (int h = 0; h < n_kv_heads_; ++h)
                for (int t = first_read(n); t < n; ++t, at += row) ring->read(out.data() + at, row, row_offset(h, t));
    return out;
}

void KvRecent::load(const uint8_t* data, int n) {
    AKUNU_CHECK(plan_.window > 0 || n == 0 || saved_bytes(n) == 0, "the cache has no recent window to load");
    const size_t row = size_t(head_dim_) * 2;
    size_t at = 0;
    forget();  // rows of another sequence must not pass for the loaded one's
    for (int l = held_.first; plan_.window > 0 && l < held_.end(n_layers_); ++l)
        for (const bool values : {false, true})
            for (int h = 0; h < n_kv_heads_; ++h)
                for (int t = first_read(n); t < n; ++t, at += row)
                    put(l, values, h, t, reinterpret_cast<const uint16_t*>(data + at));
}

}  // namespace akunu
