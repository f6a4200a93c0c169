// KvPoolRecent: the recent window of a batch's cache (kv_pool.h; kv_recent.h is one sequence's).
// Each sequence has its own rings: per layer, K and V f16 [sequences, n_kv_heads, rows,
// head_dim], sequence s's position t in row t % rows of its part. kv_recent_store writes the
// step's rows into them after attention (each row into its own sequence's part), and
// attention_rows reads a row's older window positions from them (kv_recent.glsl).
//
// A fork starts with a copy of its source's rings. A sequence that adopts shared prefix blocks
// (prefix sharing) finds the window of the prefix's last position in a copy of the prefix's
// last block's tail, its last window - 1 positions in f16, which the pool keeps for each block
// it offers for sharing (taken from the publishing sequence's rings while they still hold them).
//
// A pool split by layers across devices (kv_pool.h) has one per part, holding its layers' rings
// on its device; the pool forks, keeps and restores every part's alike.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "akunu/engine/kv_format.h"
#include "akunu/engine/kv_recent.h"
#include "akunu/vulkan/buffer.h"

namespace akunu {

class KvPoolRecent {
public:
    // The rings of n_layers layers (a part's), on `device`.
    KvPoolRecent(const std::shared_ptr<Device>& device, const KvRecentPlan& plan, int n_layers, int n_kv_heads,
                 int head_dim, int sequences);

    int window() const { return plan_.window; }
    int rows() const { return plan_.rows; }
    void bind(KvBindings& b, int layer) const;  // the window's fields and rings of its layer `layer`
    size_t ring_bytes() const;  // the rings of every sequence
    size_t tail_bytes() const;  // the tails kept for shared blocks (host memory)

    // `dst` starts with `src`'s rings (a fork). The device must be idle.
    void copy(int dst, int src);
    // Whether a sequence holding `length` positions still has the positions before `end` that
    // a tail keeps in its rings (later positions overwrite them).
    bool holds_tail(int length, int end) const { return end - tail_rows() >= length - plan_.rows; }
    // Keeps the tail of `block`, which `seq` wrote up to position `end` (holds_tail).
    void keep_tail(int block, int seq, int end);
    void drop_tail(int block) { tails_.erase(block); }
    bool has_tail(int block) const { return tails_.count(block) > 0; }
    // `seq`'s rings take `block`'s tail as the positions before `end`. The device must be idle.
    void restore_tail(int block, int seq, int end);

private:
    int tail_rows() const { return plan_.window - 1; }
    size_t row_offset(int seq, int head, int t) const;

    KvRecentPlan plan_;
    int n_layers_, n_kv_heads_, head_dim_, sequences_;
    std::vector<Buffer> k_, v_;  // per layer: f16 [sequences, n_kv, rows, head_dim]
    // Per block: f16 [n_layers, 2, n_kv, window - 1, head_dim] of its last positions.
    std::map<int, std::vector<uint16_t>> tails_;
};

}  // namespace akunu
