// KvPool: the block pool of a batch, its block tables, reference counts and shared blocks.
#include "akunu/engine/kv_pool.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "akunu/core/error.h"
#include "params.h"

namespace akunu {

namespace {

constexpr size_t kBlockAlign = 256;  // where each side of a layer starts inside a block
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
int blocks_for(int n) { return (n + AKUNU_KV_BLOCK - 1) / AKUNU_KV_BLOCK; }

}  // namespace

KvPool::KvPool(const std::shared_ptr<Device>& device, const ModelConfig& c, int context, KvDType dtype, int sequences,
               int blocks)
    : device_(device),
      dtype_(dtype),
      sequences_(sequences),
      context_(context),
      n_layers_(c.n_layers),
      n_kv_heads_(c.n_kv_heads),
      head_dim_(c.head_dim),
      max_blocks_(blocks_for(context)) {
    AKUNU_CHECK(sequences >= 1, "a batch needs max_sequences >= 1, not " + std::to_string(sequences));
    AKUNU_CHECK(blocks >= 1, "a batch needs at least one KV block, not " + std::to_string(blocks));
    for (const bool values : {false, true})
        block_layout_[values] = kv_block_layout(kv_side(dtype, values), c.n_kv_heads, c.head_dim);
    for (int l = 0; l < n_layers_; ++l)
        for (const bool values : {false, true}) {
            side_offset_.push_back(block_bytes_);
            block_bytes_ += align_up(size_t(block_layout_[values].bytes), kBlockAlign);
        }
    const uint64_t most = device->profile().max_memory_allocation_bytes;
    blocks_per_chunk_ = std::max<size_t>(1, most ? size_t(most / block_bytes_) : size_t(blocks));
    for (size_t first = 0; first < size_t(blocks); first += blocks_per_chunk_) {
        const size_t n = std::min(blocks_per_chunk_, size_t(blocks) - first);
        chunks_.push_back(Buffer::allocate(device, block_bytes_ * n, Residency::kAuto, true));
    }
    // Each (layer, side) starts on kBlockAlign bytes, the bindings' offset alignment.
    side_stride_ = align_up(size_t(sequences) * size_t(max_blocks_) * 8, kBlockAlign);
    table_ = Buffer::allocate(device, size_t(n_layers_) * 2 * side_stride_, Residency::kHost);
    // Entries of blocks a sequence does not hold point at block 0: a stray read stays in memory
    // (the kernels read no such entry: a row reads its own sequence's positions up to its own).
    for (int s = 0; s < sequences; ++s)
        for (int j = 0; j < max_blocks_; ++j) set_entry(s, j, 0);
    refs_.assign(size_t(blocks), 0);
    hash_of_.assign(size_t(blocks), 0);
    for (int b = blocks - 1; b >= 0; --b) free_.push_back(b);
    seqs_.resize(size_t(sequences));
}

KvBindings KvPool::bindings(int layer) const {
    const size_t per_side = size_t(sequences_) * size_t(max_blocks_) * 8;
    const size_t k_at = size_t(layer) * 2 * side_stride_;
    return {dtype_,
            Binding(table_, k_at, per_side),
            Binding(table_, k_at + side_stride_, per_side),
            {},
            {},
            KvRows::kBatch,
            0,
            uint32_t(sequences_)};
}

void KvPool::set_entry(int seq, int j, int block) {
    auto* entries = static_cast<uint64_t*>(table_.contents());
    const auto [chunk, offset] = locate(block);
    const uint64_t base = chunk->address() + offset;
    for (size_t ls = 0; ls < side_offset_.size(); ++ls)
        entries[ls * side_stride_ / 8 + size_t(seq) * size_t(max_blocks_) + size_t(j)] = base + side_offset_[ls];
}

int KvPool::blocks_shared() const {
    return int(std::count_if(refs_.begin(), refs_.end(), [](int r) { return r > 1; }));
}

int KvPool::blocks_needed(int seq, int from, int to) const {
    const Seq& s = seqs_[size_t(seq)];
    int need = std::max(0, blocks_for(to) - int(s.blocks.size()));
    for (int j = from / AKUNU_KV_BLOCK; j < std::min(blocks_for(to), int(s.blocks.size())); ++j)
        need += refs_[size_t(s.blocks[size_t(j)])] > 1 ? 1 : 0;
    return from < to ? need : 0;
}

int KvPool::take_block() {
    const int b = free_.back();
    free_.pop_back();
    refs_[size_t(b)] = 1;
    return b;
}

void KvPool::drop_block(int b) {
    if (--refs_[size_t(b)] > 0) return;
    if (hash_of_[size_t(b)]) by_hash_.erase(hash_of_[size_t(b)]);
    hash_of_[size_t(b)] = 0;
    free_.push_back(b);
}

void KvPool::copy_block(int from, int to) {
    const auto [src, src_at] = locate(from);
    const auto [dst, dst_at] = locate(to);
    if (src->host_visible() && dst->host_visible()) {
        std::memcpy(static_cast<uint8_t*>(dst->contents()) + dst_at,
                    static_cast<const uint8_t*>(src->contents()) + src_at, block_bytes_);
        return;
    }
    std::vector<uint8_t> rows(block_bytes_);
    src->read(rows.data(), block_bytes_, src_at);
    dst->write(rows.data(), block_bytes_, dst_at);
}

void KvPool::prepare_write(int seq, int from, int to) {
    AKUNU_CHECK(to <= context_, "sequence " + std::to_string(seq) + ": positions up to " + std::to_string(to) +
                                    " do not fit the context of " + std::to_string(context_));
    const int need = blocks_needed(seq, from, to);
    AKUNU_CHECK(need <= blocks_free(), "the KV block pool is exhausted: sequence " + std::to_string(seq) + " needs " +
                                           std::to_string(need) + " more block(s) of " +
                                           std::to_string(AKUNU_KV_BLOCK) + " positions but " +
                                           std::to_string(blocks_free()) + " of " + std::to_string(blocks_total()) +
                                           " are free; remove a sequence, or make the batch with more blocks");
    if (from >= to) return;
    Seq& s = seqs_[size_t(seq)];
    // Copy-on-write: a shared block this write reaches becomes the sequence's own copy.
    for (int j = from / AKUNU_KV_BLOCK; j < std::min(blocks_for(to), int(s.blocks.size())); ++j) {
        const int b = s.blocks[size_t(j)];
        if (refs_[size_t(b)] == 1) continue;
        const int own = take_block();
        copy_block(b, own);
        drop_block(b);
        s.blocks[size_t(j)] = own;
        set_entry(seq, j, own);
    }
    while (int(s.blocks.size()) < blocks_for(to)) {
        s.blocks.push_back(take_block());
        set_entry(seq, int(s.blocks.size()) - 1, s.blocks.back());
    }
}

void KvPool::set_length(int seq, int n) { seqs_[size_t(seq)].length = n; }

void KvPool::release(int seq) {
    Seq& s = seqs_[size_t(seq)];
    for (int b : s.blocks) drop_block(b);
    for (int j = 0; j < int(s.blocks.size()); ++j) set_entry(seq, j, 0);
    s = Seq{};
}

void KvPool::share(int dst, int src, int n) {
    AKUNU_CHECK(seqs_[size_t(dst)].blocks.empty(), "share: the sequence must be empty");
    const Seq& from = seqs_[size_t(src)];
    AKUNU_CHECK(n <= from.length, "share: sequence " + std::to_string(src) + " holds " + std::to_string(from.length) +
                                      " positions, not " + std::to_string(n));
    for (int j = 0; j < blocks_for(n); ++j) adopt(dst, from.blocks[size_t(j)]);
    seqs_[size_t(dst)].length = n;
}

int KvPool::find_block(uint64_t hash) const {
    const auto it = by_hash_.find(hash);
    return it == by_hash_.end() ? -1 : it->second;
}

void KvPool::adopt(int seq, int block) {
    Seq& s = seqs_[size_t(seq)];
    AKUNU_CHECK(int(s.blocks.size()) < max_blocks_, "adopt: the sequence's block table is full");
    ++refs_[size_t(block)];
    s.blocks.push_back(block);
    set_entry(seq, int(s.blocks.size()) - 1, block);
}

void KvPool::publish(int seq, int j, uint64_t hash) {
    const int b = seqs_[size_t(seq)].blocks[size_t(j)];
    if (hash_of_[size_t(b)] || by_hash_.count(hash)) return;
    hash_of_[size_t(b)] = hash;
    by_hash_[hash] = b;
}

std::vector<uint8_t> KvPool::read_side(int seq, int layer, bool values, bool scales) const {
    const Seq& s = seqs_[size_t(seq)];
    const KvDType side = kv_side(dtype_, values);
    AKUNU_CHECK(!scales || side != KvDType::kF16, "an f16 KV cache has no row scales");
    const size_t row = scales ? 2 : size_t(kv_row_bytes(side, head_dim_)) - (side == KvDType::kF16 ? 0 : 2);
    const size_t n = size_t(s.length), heads = size_t(n_kv_heads_);
    std::vector<uint8_t> out(heads * n * row);
    const size_t at = side_offset_[size_t(layer) * 2 + (values ? 1 : 0)];
    const size_t scale_base = size_t(block_layout_[values].scale_offset);
    std::vector<uint8_t> block(block_bytes_);
    for (size_t j = 0; j * AKUNU_KV_BLOCK < n; ++j) {
        const auto [chunk, offset] = locate(s.blocks[j]);
        chunk->read(block.data(), block_bytes_, offset);
        const size_t rows = std::min<size_t>(AKUNU_KV_BLOCK, n - j * AKUNU_KV_BLOCK);
        for (size_t h = 0; h < heads; ++h) {
            const size_t src = at + (scales ? scale_base : 0) + h * AKUNU_KV_BLOCK * row;
            std::memcpy(out.data() + (h * n + j * AKUNU_KV_BLOCK) * row, block.data() + src, rows * row);
        }
    }
    return out;
}

void KvPool::write_side(int seq, int layer, bool values, int from, int n, const uint16_t* data) {
    const Seq& s = seqs_[size_t(seq)];
    const size_t row = size_t(head_dim_) * 2, heads = size_t(n_kv_heads_);
    const size_t at = side_offset_[size_t(layer) * 2 + (values ? 1 : 0)];
    for (int p = from; p < from + n;) {
        const size_t j = size_t(p) / AKUNU_KV_BLOCK, in = size_t(p) % AKUNU_KV_BLOCK;
        AKUNU_CHECK(j < s.blocks.size(), "position " + std::to_string(p) + " has no block (prepare_write first)");
        const size_t rows = std::min<size_t>(AKUNU_KV_BLOCK - in, size_t(from + n - p));
        const int b = s.blocks[j];
        if (hash_of_[size_t(b)]) by_hash_.erase(hash_of_[size_t(b)]);  // its rows no longer follow its tokens
        hash_of_[size_t(b)] = 0;
        const auto [chunk, offset] = locate(b);
        for (size_t h = 0; h < heads; ++h)
            chunk->write(data + (h * size_t(n) + size_t(p - from)) * size_t(head_dim_), rows * row,
                         offset + at + (h * AKUNU_KV_BLOCK + in) * row);
        p += int(rows);
    }
}

}  // namespace akunu
