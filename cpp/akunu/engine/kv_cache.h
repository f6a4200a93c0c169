// KVCache: per layer, the K and V rows of every position in the cache's format (kv_format.h:
// f16 values, or packed codes plus f16 row scales), laid out one of three ways
// (shaders/include/kv_rows.glsl, KvRows):
//
//   full    one buffer per side, [n_kv_heads, max_len] rows, allocated up front (the default)
//   blocks  blocks of AKUNU_KV_BLOCK (256) positions holding every such layer's K and V,
//           allocated as the sequence grows (reserve()), found by the kernels through a block
//           table of device addresses [n_layers, K/V, max_len / 256] that the host fills when it
//           allocates a block. The recorded commands never change: only the table does.
//   ring    a sliding-window layer's buffer of ring_rows < max_len positions, position t in
//           row t % ring_rows. A prefill chunk writes all its keys before its attention reads
//           any, so the ring must hold what its first query reads (window - 1 earlier keys) and
//           the whole chunk in distinct rows: ring_rows >= window + chunk - 1 (mlx-lm#1914 is
//           this bug in a ring of window rows). The engine takes window + max(chunk, 2 chains):
//           the extra rows are how far back truncate() can rewind a full ring (window - 1
//           rows must survive), and two pipelined chains are what generate() may take back.
//
// current_length counts the positions that hold valid rows; reset() and truncate(n) only move
// it (a rewind), so nothing is freed or cleared in the hot path. A ring has overwritten the
// rows of positions below sliding_from(); truncate refuses a length whose window reaches them.
// save_rows/load_rows copy rows out and in (saved model states, forks), in one order that the
// layout does not change: per layer, K then V, per KV head, the rows, then (quantized) the row
// scales; sliding-window layers hold rows [sliding_from, n), the others [0, n). A format with a
// recent window appends its rings' rows (KvRecent::save).
//
// A part of a model split across devices (split.h) holds the layers of its LayerRange only:
// the others are planned (their layout, for the decode plan) but take no memory, and the saved
// rows are its layers' rows in the same order, so the parts' rows in layer order are the whole
// cache's.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/engine/kv_format.h"
#include "akunu/engine/kv_recent.h"
#include "akunu/engine/layer_range.h"
#include "akunu/model/model_config.h"

namespace akunu {

// How the cache of a model is laid out and what it takes; the cache and the memory plan both
// use it, so they agree.
struct KvCachePlan {
    std::vector<KvRows> layers;  // per layer (of the whole model)
    LayerRange held;  // the layers with memory
    int ring_rows = 0;  // rows per head of the ring layers (0: none)
    uint64_t full_bytes = 0;  // buffers allocated up front (full and ring layers)
    uint64_t block_bytes = 0;  // one block: AKUNU_KV_BLOCK positions of every block layer
    uint64_t table_bytes = 0;  // the block tables
    int max_blocks = 0;  // blocks that hold the whole context
    KvRecentPlan recent;  // the recent window's rings (kv_recent.h), allocated up front
    uint64_t initial_bytes() const {
        return full_bytes + table_bytes + recent.bytes + (max_blocks > 0 ? block_bytes : 0);
    }
    uint64_t max_bytes() const { return full_bytes + table_bytes + recent.bytes + uint64_t(max_blocks) * block_bytes; }
};
// blocks: allocate non-ring layers in blocks; ring_rows > 0: sliding-window layers keep a ring
// of that many rows when it is shorter than max_len; recent > 0: the format's recent window,
// with rings of recent + recent_reserve rows.
KvCachePlan plan_kv_cache(const ModelConfig& c, int max_len, KvDType dtype, bool blocks, int ring_rows,
                          LayerRange held = {}, int recent = 0, int recent_reserve = 0);

class KVCache : public KvSource {
public:
    KVCache(const std::shared_ptr<Device>& device, const ModelConfig& c, int max_len, KvDType dtype = KvDType::kF16,
            bool blocks = false, int ring_rows = 0, LayerRange held = {}, int recent = 0, int recent_reserve = 0);

    KvBindings bindings(int layer) const override;  // with the recent window's rings
    // A full or ring layer's K and V buffers (empty for a layer in blocks).
    const Buffer& k(int layer) const { return k_[size_t(layer)]; }
    const Buffer& v(int layer) const { return v_[size_t(layer)]; }
    KvRows rows(int layer) const { return plan_.layers[size_t(layer)]; }
    KvDType dtype() const { return dtype_; }
    const KvLayout& layout(bool values) const { return layout_[values]; }
    const KvCachePlan& plan() const { return plan_; }
    int n_layers() const { return int(plan_.layers.size()); }  // the whole model's
    bool holds(int layer) const { return plan_.held.holds(layer, n_layers()); }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    int max_length() const { return max_len_; }
    int current_length() const { return length_; }
    size_t bytes() const;  // allocated now
    int blocks_allocated() const { return int(blocks_.size()); }

    // Makes positions [0, n) writable: allocates the blocks they lack (one allocation per block,
    // so only when n crosses a block boundary; nothing for a pre-allocated cache). Call it
    // before a submission writes those positions.
    void reserve(int n);

    // One side of one layer, rows [0, n) (sliding layers: [sliding_from, n), earlier rows zero),
    // gathered into host memory: [n_kv, n, row bytes], or with `scales` the f16 row scales
    // [n_kv, n]. The GPU must be idle.
    std::vector<uint8_t> read_side(int layer, bool values, bool scales, int n) const;

    // Rows in the saved order above: n * row bytes per head (from `from` on for sliding layers).
    size_t rows_bytes(int n, int from = 0) const;
    std::vector<uint8_t> save_rows(int n) const;  // from sliding_from(); the GPU must be idle
    // Writes rows saved by save_rows(n) (sliding layers from `from`) of a cache of the same
    // shape and dtype (its max_length and layout may differ) and sets the length to n; throws,
    // writing nothing, when the size is wrong. A ring keeps the newest rows it has room for.
    void load_rows(const uint8_t* data, size_t size, int n, int from = 0);

    const KvRecent& recent() const { return recent_; }
    int sliding_from() const { return sliding_from_; }
    void reset();
    void truncate(int n);  // throws unless 0 <= n <= current_length and the window holds
    void set_length(int n);  // the engine, after writing rows

private:
    // Calls visit(buffer, offset, bytes) for each contiguous piece of rows [from, n) of one side
    // of one layer, in the saved order; buffer is null for rows a ring has no room for.
    void walk_side(int layer, bool values, int from, int n,
                   const std::function<void(const Buffer*, size_t, size_t, bool scales)>& visit) const;
    void walk_rows(int n, int from, const std::function<void(const Buffer*, size_t, size_t)>& visit) const;
    int rows_from(int layer, int from) const { return sliding_[size_t(layer)] ? from : 0; }
    // Fills the rings' rows a query at n reads that a deep rewind overwrote, from the codes.
    void rebuild_recent(int n);
    void rebuild_recent_rows(int layer, bool values, int from, int to);
    KvBindings side_bindings(int layer) const;  // the K and V sides alone

    std::shared_ptr<Device> device_;
    KvCachePlan plan_;
    std::vector<Buffer> k_, v_;  // full and ring layers; empty for block layers
    std::vector<bool> sliding_;  // per layer: a sliding-window layer
    std::vector<Buffer> blocks_;  // [AKUNU_KV_BLOCK positions of every block layer's K and V]
    Buffer table_;  // u64 [n_layers, 2, table_stride / 8] block addresses
    std::vector<size_t> block_offset_;  // [layer * 2 + side]: where a side sits in a block
    size_t table_stride_ = 0;  // bytes per (layer, side) table
    size_t table_filled_ = 0;  // entries per (layer, side) table written so far
    void fill_table_to(size_t blocks);  // writes block 0's address up to a page past `blocks`
    KvDType dtype_;
    KvLayout layout_[2];  // K, V of a full or ring buffer
    KvLayout block_layout_[2];
    int n_kv_heads_, head_dim_, max_len_, window_;
    int length_ = 0;
    int sliding_from_ = 0;
    KvRecent recent_;
};

}  // namespace akunu
