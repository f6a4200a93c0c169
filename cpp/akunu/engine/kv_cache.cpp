// KVCache: the layouts (full, blocks, ring), block allocation, rewind with a ring's limit, and
// copying rows out and in.
#include "akunu/engine/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "akunu/core/error.h"
#include "akunu/core/half.h"
#include "akunu/core/kv_codes.h"
#include "params.h"

namespace akunu {

namespace {

constexpr size_t kBlockAlign = 256;  // where each side of a layer starts inside a block
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// The plan
// ---------------------------------------------------------------------------------------------

KvCachePlan plan_kv_cache(const ModelConfig& c, int max_len, KvDType dtype, bool blocks, int ring_rows, LayerRange held,
                          int recent, int recent_reserve) {
    AKUNU_CHECK(max_len > 0, "the KV cache needs a positive length");
    KvCachePlan p;
    p.held = held;
    const bool ring = ring_rows > 0 && ring_rows < max_len && c.n_sliding_layers > 0;
    p.ring_rows = ring ? ring_rows : 0;
    for (int l = 0; l < c.n_layers; ++l) {
        const KvRows r = ring && c.is_sliding(l) ? KvRows::kRing : blocks ? KvRows::kBlocks : KvRows::kFull;
        p.layers.push_back(r);
        if (!held.holds(l, c.n_layers)) continue;
        for (const bool values : {false, true}) {
            const KvDType side = kv_side(dtype, values);
            if (r == KvRows::kBlocks)
                p.block_bytes += align_up(size_t(kv_block_layout(side, c.n_kv_heads, c.head_dim).bytes), kBlockAlign);
            else
                p.full_bytes +=
                    kv_layout(side, c.n_kv_heads, r == KvRows::kRing ? ring_rows : max_len, c.head_dim).bytes;
        }
    }
    AKUNU_CHECK(recent == 0 || dtype != KvDType::kF16, "an f16 KV cache has no recent window");
    p.recent = plan_kv_recent(recent, recent_reserve, held.end(c.n_layers) - held.first, c.n_kv_heads, c.head_dim);
    if (p.block_bytes > 0) {
        p.max_blocks = (max_len + AKUNU_KV_BLOCK - 1) / AKUNU_KV_BLOCK;
        p.table_bytes = uint64_t(c.n_layers) * 2 * align_up(size_t(p.max_blocks) * 8, kBlockAlign);
    }
    return p;
}

// ---------------------------------------------------------------------------------------------
// Allocation
// ---------------------------------------------------------------------------------------------

KVCache::KVCache(const std::shared_ptr<Device>& device, const ModelConfig& c, int max_len, KvDType dtype, bool blocks,
                 int ring_rows, LayerRange held, int recent, int recent_reserve)
    : device_(device),
      plan_(plan_kv_cache(c, max_len, dtype, blocks, ring_rows, held, recent, recent_reserve)),
      dtype_(dtype),
      n_kv_heads_(c.n_kv_heads),
      head_dim_(c.head_dim),
      max_len_(max_len),
      window_(c.sliding_window),
      recent_(device, plan_.recent, c.n_layers, held, c.n_kv_heads, c.head_dim) {
    static_assert(AKUNU_KV_BLOCK == AKUNU_ATTENTION_CHUNK, "attention_split reads masked rows up to its chunk's end");
    for (const bool values : {false, true}) {
        layout_[values] = kv_layout(kv_side(dtype, values), c.n_kv_heads, max_len, c.head_dim);
        block_layout_[values] = kv_block_layout(kv_side(dtype, values), c.n_kv_heads, c.head_dim);
    }
    size_t in_block = 0;
    for (int l = 0; l < c.n_layers; ++l) {
        sliding_.push_back(c.is_sliding(l));
        const KvRows r = rows(l);
        for (const bool values : {false, true}) {
            block_offset_.push_back(in_block);
            if (r == KvRows::kBlocks && holds(l))
                in_block += align_up(size_t(block_layout_[values].bytes), kBlockAlign);
        }
        if (r == KvRows::kBlocks || !holds(l)) {
            k_.emplace_back();
            v_.emplace_back();
            continue;
        }
        const int n = r == KvRows::kRing ? plan_.ring_rows : max_len;
        k_.push_back(
            Buffer::allocate(device, size_t(kv_layout(kv_side(dtype, false), c.n_kv_heads, n, c.head_dim).bytes)));
        v_.push_back(
            Buffer::allocate(device, size_t(kv_layout(kv_side(dtype, true), c.n_kv_heads, n, c.head_dim).bytes)));
    }
    if (plan_.max_blocks > 0) {
        table_stride_ = align_up(size_t(plan_.max_blocks) * 8, kBlockAlign);
        table_ = Buffer::allocate(device, size_t(plan_.table_bytes));
        reserve(1);
    }
}

// Entries of blocks not yet allocated point at block 0, so that a stray read stays in memory
// (the kernels read no such entry: AKUNU_KV_BLOCK == the attention chunk). They are written a
// page of entries at a time as blocks are allocated: a long context's table costs memory (the
// CPU backend's pages) and time only for the blocks in use.
void KVCache::fill_table_to(size_t blocks) {
    constexpr size_t kPage = 512;  // entries
    if (blocks <= table_filled_) return;
    const size_t to = std::min(size_t(plan_.max_blocks), (blocks + kPage - 1) / kPage * kPage);
    std::vector<uint64_t> entries(to - table_filled_);
    for (size_t ls = 0; ls < block_offset_.size(); ++ls) {
        std::fill(entries.begin(), entries.end(), blocks_[0].address() + block_offset_[ls]);
        table_.write(entries.data(), entries.size() * 8, ls * table_stride_ + table_filled_ * 8);
    }
    table_filled_ = to;
}

void KVCache::reserve(int n) {
    if (plan_.max_blocks == 0) return;
    AKUNU_CHECK(n >= 0 && n <= max_len_, "KV positions [0, " + std::to_string(n) + ") are outside a cache of " +
                                             std::to_string(max_len_) + " positions");
    const size_t want = size_t((n + AKUNU_KV_BLOCK - 1) / AKUNU_KV_BLOCK);
    while (blocks_.size() < want) {
        const size_t b = blocks_.size();
        blocks_.push_back(Buffer::allocate(device_, size_t(plan_.block_bytes), Residency::kAuto, true));
        fill_table_to(b + 1);
        const uint64_t base = blocks_.back().address();
        for (size_t ls = 0; ls < block_offset_.size(); ++ls) {
            if (rows(int(ls / 2)) != KvRows::kBlocks || !holds(int(ls / 2))) continue;
            const uint64_t at = base + block_offset_[ls];
            table_.write(&at, 8, ls * table_stride_ + b * 8);
        }
    }
}

size_t KVCache::bytes() const {
    size_t total = table_ ? table_.size() : 0;
    for (size_t l = 0; l < k_.size(); ++l) total += (k_[l] ? k_[l].size() : 0) + (v_[l] ? v_[l].size() : 0);
    for (const Buffer& b : blocks_) total += b.size();
    return total + recent_.bytes();
}

KvBindings KVCache::bindings(int layer) const {
    KvBindings b = side_bindings(layer);
    const KvRecentPlan& rp = recent_.plan();
    if (rp.window == 0) return b;
    b.recent = uint32_t(rp.window);
    b.recent_rows = uint32_t(rp.rows);
    if (holds(layer)) b.k_recent = Binding(recent_.k(layer)), b.v_recent = Binding(recent_.v(layer));
    return b;
}

KvBindings KVCache::side_bindings(int layer) const {
    const KvRows r = rows(layer);
    if (!holds(layer))  // planned only (the decode plan reads its layout): another part holds it
        return {dtype_,
                {},
                {},
                {},
                {},
                r,
                uint32_t(r == KvRows::kBlocks ? 0 : r == KvRows::kRing ? plan_.ring_rows : max_len_)};
    if (r == KvRows::kBlocks) {
        const size_t k_at = size_t(layer) * 2 * table_stride_;
        return {dtype_,
                Binding(table_, k_at, table_stride_),
                Binding(table_, k_at + table_stride_, table_stride_),
                {},
                {},
                r,
                0};
    }
    const uint32_t n = uint32_t(r == KvRows::kRing ? plan_.ring_rows : max_len_);
    const Buffer &k = k_[size_t(layer)], &v = v_[size_t(layer)];
    if (dtype_ == KvDType::kF16) return {dtype_, Binding(k), Binding(v), {}, {}, r, n};
    const KvLayout lk = kv_layout(kv_side(dtype_, false), n_kv_heads_, int(n), head_dim_);
    const KvLayout lv = kv_layout(kv_side(dtype_, true), n_kv_heads_, int(n), head_dim_);
    return {dtype_,
            Binding(k, 0, size_t(lk.data_bytes)),
            Binding(v, 0, size_t(lv.data_bytes)),
            Binding(k, size_t(lk.scale_offset), size_t(lk.bytes - lk.scale_offset)),
            Binding(v, size_t(lv.scale_offset), size_t(lv.bytes - lv.scale_offset)),
            r,
            n};
}

// ---------------------------------------------------------------------------------------------
// Length and rewind
// ---------------------------------------------------------------------------------------------

void KVCache::reset() {
    length_ = 0;
    sliding_from_ = 0;
    recent_.forget();
}

void KVCache::truncate(int n) {
    AKUNU_CHECK(n >= 0 && n <= length_, "truncate(" + std::to_string(n) + "): the cache holds " +
                                            std::to_string(length_) +
                                            " positions; truncate rewinds to a length from 0 to " +
                                            std::to_string(length_) + " (eval adds positions)");
    if (n == 0) return reset();
    // The next query, at position n, reads the window's keys [n + 1 - window, n).
    const int earliest = sliding_from_ == 0 ? 0 : sliding_from_ + window_ - 1;
    AKUNU_CHECK(n >= earliest, "truncate(" + std::to_string(n) +
                                   "): the sliding-window layers' ring has overwritten positions below " +
                                   std::to_string(sliding_from_) + ", which a query at position " + std::to_string(n) +
                                   " (window " + std::to_string(window_) + ") reads; rewind to a length from " +
                                   std::to_string(earliest) + " to " + std::to_string(length_) +
                                   ", or to 0, or load the model with kv_ring=False to rewind anywhere");
    length_ = n;
    rebuild_recent(n);
}

void KVCache::rebuild_recent(int n) {
    const std::vector<int> missing = recent_.plan().window > 0 ? recent_.missing(n) : std::vector<int>{};
    // Missing positions come in runs; each run is read a head at a time, not a row at a time: on
    // a GPU every read is a trip across the bus.
    for (size_t i = 0; i < missing.size();) {
        size_t j = i + 1;
        while (j < missing.size() && missing[j] == missing[j - 1] + 1) ++j;
        for (int l = plan_.held.first; l < plan_.held.end(n_layers()); ++l)
            for (const bool values : {false, true}) rebuild_recent_rows(l, values, missing[i], missing[j - 1] + 1);
        i = j;
    }
}

// Rows [from, to) of one side of layer l, decoded from the cache's codes into the ring.
void KVCache::rebuild_recent_rows(int l, bool values, int from, int to) {
    std::vector<uint8_t> codes;  // per head, rows ascending (walk_side's order)
    std::vector<uint16_t> scales;
    walk_side(l, values, from, to, [&](const Buffer* b, size_t off, size_t bytes, bool is_scale) {
        std::vector<uint8_t> piece(bytes, 0);
        if (b) b->read(piece.data(), bytes, off);  // a window lies inside every ring: b is set
        if (is_scale)
            for (size_t k = 0; k + 1 < bytes; k += 2) scales.push_back(uint16_t(piece[k] | piece[k + 1] << 8));
        else
            codes.insert(codes.end(), piece.begin(), piece.end());
    });
    const uint32_t f = kv_code_id(kv_side(dtype_, values));
    const size_t words = size_t(head_dim_) / kv_per_word(f), n = size_t(to - from);
    std::vector<uint16_t> row(static_cast<size_t>(head_dim_));
    for (int h = 0; h < n_kv_heads_; ++h)
        for (size_t r = 0; r < n; ++r) {
            const size_t at = size_t(h) * n + r;
            const float scale = half_to_float(scales[at]);
            for (int i = 0; i < head_dim_; ++i) {
                uint32_t w;
                std::memcpy(&w, codes.data() + (at * words + size_t(i) / kv_per_word(f)) * 4, 4);
                row[size_t(i)] = float_to_half(kv_code(w, uint32_t(i) % kv_per_word(f), f) * scale);
            }
            recent_.put(l, values, h, from + int(r), row.data());
        }
}

void KVCache::set_length(int n) {
    AKUNU_CHECK(n >= 0 && n <= max_len_,
                "KV cache length " + std::to_string(n) + " is outside [0, " + std::to_string(max_len_) + "]");
    if (n > length_) recent_.wrote(length_, n);
    length_ = n;
    // Writing position t overwrote t - ring_rows in every ring.
    if (plan_.ring_rows > 0) sliding_from_ = std::max(sliding_from_, n - plan_.ring_rows);
}

// ---------------------------------------------------------------------------------------------
// Copying rows out and in
// ---------------------------------------------------------------------------------------------

void KVCache::walk_side(int layer, bool values, int from, int n,
                        const std::function<void(const Buffer*, size_t, size_t, bool)>& visit) const {
    const KvDType side = kv_side(dtype_, values);
    const size_t row = size_t(head_dim_) * size_t(kv_value_bits(side)) / 8;
    const KvRows r = rows(layer);
    const int ring = plan_.ring_rows;
    for (const bool scales : {false, true}) {
        if (scales && side == KvDType::kF16) break;
        const size_t unit = scales ? 2 : row;
        for (int h = 0; h < n_kv_heads_; ++h)
            for (int t = from; t < n;) {
                // The contiguous run of positions from t, where it lies, and how far it goes.
                const Buffer* buffer = nullptr;
                size_t offset = 0;
                int run = n - t;
                if (r == KvRows::kBlocks) {
                    const int in = t % AKUNU_KV_BLOCK, b = t / AKUNU_KV_BLOCK;
                    const KvLayout& l = block_layout_[values];
                    buffer = &blocks_[size_t(b)];
                    offset = block_offset_[size_t(layer) * 2 + values] + (scales ? size_t(l.scale_offset) : 0) +
                             (size_t(h) * AKUNU_KV_BLOCK + size_t(in)) * unit;
                    run = std::min(run, AKUNU_KV_BLOCK - in);
                } else {
                    const int rows_per_head = r == KvRows::kRing ? ring : max_len_;
                    const KvLayout l = kv_layout(side, n_kv_heads_, rows_per_head, head_dim_);
                    int slot = t;
                    if (r == KvRows::kRing) {
                        if (n - t > ring)
                            run = n - ring - t;  // older than the ring holds: skipped
                        else {
                            slot = t % ring;
                            run = std::min(run, ring - slot);
                        }
                    }
                    if (r != KvRows::kRing || n - t <= ring) {
                        buffer = values ? &v_[size_t(layer)] : &k_[size_t(layer)];
                        offset = (scales ? size_t(l.scale_offset) : 0) +
                                 (size_t(h) * size_t(rows_per_head) + size_t(slot)) * unit;
                    }
                }
                visit(buffer, offset, size_t(run) * unit, scales);
                t += run;
            }
    }
}

void KVCache::walk_rows(int n, int from, const std::function<void(const Buffer*, size_t, size_t)>& visit) const {
    AKUNU_CHECK(n >= 0 && n <= max_len_ && from >= 0 && from <= n, "KV rows [" + std::to_string(from) + ", " +
                                                                       std::to_string(n) + ") are outside a cache of " +
                                                                       std::to_string(max_len_) + " positions");
    for (int l = plan_.held.first; l < plan_.held.end(n_layers()); ++l)
        for (const bool values : {false, true})
            walk_side(l, values, rows_from(l, from), n,
                      [&](const Buffer* b, size_t off, size_t bytes, bool) { visit(b, off, bytes); });
}

std::vector<uint8_t> KVCache::read_side(int layer, bool values, bool scales, int n) const {
    AKUNU_CHECK(layer >= 0 && layer < n_layers(),
                "layer " + std::to_string(layer) + " is out of range (0 to " + std::to_string(n_layers() - 1) + ")");
    AKUNU_CHECK(holds(layer), "layer " + std::to_string(layer) + " is held by another device of the split");
    const KvDType side = kv_side(dtype_, values);
    AKUNU_CHECK(!scales || side != KvDType::kF16, "an f16 KV cache has no row scales");
    const size_t unit = scales ? 2 : size_t(head_dim_) * size_t(kv_value_bits(side)) / 8;
    std::vector<uint8_t> out(size_t(n_kv_heads_) * size_t(n) * unit, 0);
    const int from = rows_from(layer, sliding_from_);
    // Pieces come per head, rows ascending: head h's rows [from, n) land at [h, from : n).
    size_t at = 0, head_bytes = size_t(n - from) * unit, h = 0;
    walk_side(layer, values, from, n, [&](const Buffer* b, size_t off, size_t bytes, bool s) {
        if (s != scales) return;
        if (b) b->read(out.data() + h * size_t(n) * unit + size_t(from) * unit + at, bytes, off);
        at += bytes;
        if (at == head_bytes) at = 0, ++h;
    });
    return out;
}

size_t KVCache::rows_bytes(int n, int from) const {
    size_t total = 0;
    walk_rows(n, from, [&](const Buffer*, size_t, size_t bytes) { total += bytes; });
    return total + recent_.saved_bytes(n);
}

std::vector<uint8_t> KVCache::save_rows(int n) const {
    std::vector<uint8_t> out(rows_bytes(n, sliding_from_));
    size_t at = 0;
    walk_rows(n, sliding_from_, [&](const Buffer* b, size_t offset, size_t bytes) {
        b->read(out.data() + at, bytes, offset);  // a ring holds all of [sliding_from, n)
        at += bytes;
    });
    const std::vector<uint8_t> recent = recent_.save(n);
    std::copy(recent.begin(), recent.end(), out.begin() + ptrdiff_t(at));
    return out;
}

void KVCache::load_rows(const uint8_t* data, size_t size, int n, int from) {
    const size_t want = rows_bytes(n, from);
    AKUNU_CHECK(size == want, "KV rows for " + std::to_string(n) + " positions take " + std::to_string(want) +
                                  " bytes in this cache, not " + std::to_string(size));
    reserve(n);
    size_t at = 0;
    walk_rows(n, from, [&](const Buffer* b, size_t offset, size_t bytes) {
        if (b) const_cast<Buffer*>(b)->write(data + at, bytes, offset);  // one of this cache's own buffers
        at += bytes;
    });
    recent_.load(data + at, n);
    length_ = n;
    sliding_from_ = plan_.ring_rows > 0 ? std::max(from, n - plan_.ring_rows) : from;
}

}  // namespace akunu
