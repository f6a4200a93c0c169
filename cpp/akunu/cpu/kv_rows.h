// Where a KV-cache row lives on the CPU: the C++ form of shaders/include/kv_rows.glsl, shared by
// every CPU kernel that reads or writes the cache (rope_kv, kv_store, attention_split,
// flash_attention). A row is one (KV head, position t) of one side (K or V): head_dim f16
// values, or a quantized format's packed words, and for those one f16 scale.
//
//   full    one buffer per side, [n_kv, rows, ...]: row head * rows + t; the scales are
//           their own binding, [n_kv, rows] f16
//   ring    the same buffer as a ring of `rows` positions: row head * rows + t % rows
//   blocks  blocks of AKUNU_KV_BLOCK positions reached through a table of addresses [blocks]
//           (on the CPU a buffer's address is its host pointer); in a block the side's rows
//           [n_kv, AKUNU_KV_BLOCK, ...], then a quantized side's scales [n_kv, AKUNU_KV_BLOCK]
//
// A full or ring buffer is one block of `rows` positions that every position falls in (t % rows
// is t in a full cache, whose kernels never ask for t >= rows), so one rule finds a row in all
// three: the block's base, then head * block_rows + t % block_rows inside it. Which layout a
// kernel row reads is data, bits of its registry variant; the kernels hold no layout branches.
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/vulkan/cpu_kernel.h"
#include "params.h"

namespace akunu::cpu {

// kBatch: blocks of a pool shared by many sequences, each step row in its own sequence's blocks
// (the tables of all sequences side by side, a BatchRow per row after the StepState).
enum class CacheLayout : uint32_t { kFull = 0, kRing = 1, kBlocks = 2, kBatch = 3 };

// A kernel row's variant carries the cache layout in these bits, beside the K and V formats
// (kv_codes.h) in bits 0-15.
constexpr uint32_t kCacheLayoutShift = 20;
inline CacheLayout cache_layout(uint32_t variant) { return CacheLayout((variant >> kCacheLayoutShift) & 3u); }

inline bool in_blocks(uint32_t variant) {
    return cache_layout(variant) == CacheLayout::kBlocks || cache_layout(variant) == CacheLayout::kBatch;
}

// Where step row `row` sits: its position, and (kBatch) the first block-table entry of its
// sequence, whose tables hold a block per AKUNU_KV_BLOCK positions of `max_len`.
struct RowPlace {
    size_t pos;
    size_t first_block;
};
inline RowPlace row_place(uint32_t variant, const StepState& step, size_t row, size_t max_len) {
    if (cache_layout(variant) != CacheLayout::kBatch) return {step.pos + row, 0};
    const BatchRow& b = reinterpret_cast<const BatchRow*>(&step + 1)[row];
    return {b.pos, size_t(b.seq) * ((max_len + AKUNU_KV_BLOCK - 1) / AKUNU_KV_BLOCK)};
}

// One side of one layer's cache, as a kernel sees it through its bindings.
struct KvRowMap {
    const uint64_t* table = nullptr;  // blocks: [blocks] host addresses of this side's part of each block
    uint8_t* data = nullptr;  // full, ring: the rows [n_kv, block_rows, row_bytes]
    uint16_t* scales = nullptr;  // full, ring, quantized: [n_kv, block_rows] f16; else null
    size_t block_rows = 0;  // positions per head in one block: the buffer's rows, or AKUNU_KV_BLOCK
    size_t row_bytes = 0;  // one row's values or codes
    size_t scales_at = 0;  // blocks: bytes from a block's base to its scales
    bool quantized = false;  // rows have scales

    struct Row {
        uint8_t* data;  // the row's row_bytes
        uint16_t* scale;  // its f16 scale; null for f16 rows
    };

    // The same side seen from a sequence whose block table starts `first_block` entries in.
    KvRowMap from_block(size_t first_block) const {
        KvRowMap m = *this;
        if (m.table) m.table += first_block;
        return m;
    }

    Row at(size_t head, size_t t) const {
        uint8_t* base = data;
        size_t slot = t;
        if (table) {
            base = reinterpret_cast<uint8_t*>(uintptr_t(table[t / AKUNU_KV_BLOCK]));
            slot = t % AKUNU_KV_BLOCK;
        } else if (t >= block_rows) {  // a ring that has wrapped (a full cache never does)
            slot = t % block_rows;
        }
        const size_t r = head * block_rows + slot;
        if (!quantized) return {base + r * row_bytes, nullptr};
        uint16_t* sc = table ? reinterpret_cast<uint16_t*>(base + scales_at) : scales;
        return {base + r * row_bytes, sc + r};
    }
};

// The map of a kernel's side whose rows (or block table) are binding `rows_binding` and whose
// scales, in a full or ring cache, are binding `scales_binding`. `cache_rows` is the buffer's
// rows per head (ignored for blocks), `row_bytes` a row's bytes, `quantized` whether rows have
// scales.
inline KvRowMap kv_row_map(const CpuArgs& a, int rows_binding, int scales_binding, size_t cache_rows, size_t n_kv,
                           size_t row_bytes, bool quantized) {
    KvRowMap m;
    m.row_bytes = row_bytes;
    m.quantized = quantized;
    if (in_blocks(a.variant)) {
        m.table = a.at<const uint64_t>(rows_binding);
        m.block_rows = AKUNU_KV_BLOCK;
        m.scales_at = n_kv * AKUNU_KV_BLOCK * row_bytes;  // after every head's rows: kv_rows.glsl KV_SCALE_BASE
    } else {
        m.data = a.b[rows_binding];
        m.scales = quantized ? a.at<uint16_t>(scales_binding) : nullptr;
        m.block_rows = cache_rows;
    }
    return m;
}

}  // namespace akunu::cpu
