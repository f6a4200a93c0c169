// KvRecent: the f16 rings of a quantized cache's recent window (kv_format.h KvFormat): per held
// layer, K and V rings f16 [n_kv_heads, rows, head_dim], position t in row t % rows. A step's
// attention reads its own rows from its Q/K/V rows and the older ones of the window from the
// rings; kv_recent_store then writes the step's rows in (shaders/include/kv_recent.glsl).
//
// rows = window + reserve: a rewind of up to `reserve` positions (generate() taking back two
// pipelined chains, rejected speculative drafts) finds the rows the window of its new length
// reads still in the ring. A deeper rewind has overwritten some of them; the cache rebuilds
// those from its own codes (KVCache::truncate), so the next window - 1 queries read those
// positions as the cache stores them, as if they had aged out of the window. The host keeps the
// position each ring row holds to tell the two apart.
//
// Saved states and forks carry the rows the window of the saved length reads, in position order
// (save/load), so a restored model continues exactly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "akunu/engine/layer_range.h"
#include "akunu/vulkan/buffer.h"

namespace akunu {

struct KvRecentPlan {
    int window = 0;  // positions a query reads in f16 (0: no window)
    int rows = 0;  // ring rows per KV head: window + reserve
    uint64_t bytes = 0;  // the rings of the held layers
};
// The rings of `window` positions with a rewind reserve of `reserve` positions.
KvRecentPlan plan_kv_recent(int window, int reserve, int held_layers, int n_kv_heads, int head_dim);

class KvRecent {
public:
    KvRecent(const std::shared_ptr<Device>& device, const KvRecentPlan& plan, int n_layers, LayerRange held,
             int n_kv_heads, int head_dim);

    const KvRecentPlan& plan() const { return plan_; }
    const Buffer& k(int layer) const { return k_[size_t(layer)]; }
    const Buffer& v(int layer) const { return v_[size_t(layer)]; }
    size_t bytes() const;

    // The engine's steps wrote positions [from, to) (a cache length going from `from` to `to`).
    void wrote(int from, int to);
    // The rings hold nothing of the sequence now in the cache (reset, a state loaded).
    void forget() { std::fill(holds_.begin(), holds_.end(), -1); }
    // Positions of [n + 1 - window, n), which a query at n reads from the rings, that the rings
    // no longer hold.
    std::vector<int> missing(int n) const;
    // Writes row t of one side's head (head_dim f16) into its ring, on the host.
    void put(int layer, bool values, int head, int t, const uint16_t* row);

    // Rows [n + 1 - window, n) (from 0), per held layer, K then V, per head, in position order.
    size_t saved_bytes(int n) const;
    std::vector<uint8_t> save(int n) const;  // the GPU must be idle
    void load(const uint8_t* data, int n);  // data holds saved_bytes(n)

private:
    int first_read(int n) const { return n + 1 - plan_.window > 0 ? n + 1 - plan_.window : 0; }
    size_t row_offset(int head, int t) const;

    KvRecentPlan plan_;
    LayerRange held_;
    int n_layers_, n_kv_heads_, head_dim_;
    std::vector<Buffer> k_, v_;  // per layer; empty for layers another part holds
    std::vector<int> holds_;  // per ring row: the position it holds, -1 for none
};

}  // namespace akunu
