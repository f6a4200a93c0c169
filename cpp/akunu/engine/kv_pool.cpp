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
               int blocks, const KvRecentPlan& recent)
    : KvPool(std::vector<KvPoolPart>{{device, {0, c.n_layers}}}, c, context, dtype, sequences, blocks, recent) {}

KvPool::KvPool(const std::vector<KvPoolPart>& parts, const ModelConfig& c, int context, KvDType dtype, int sequences,
               int blocks, const KvRecentPlan& recent)
    : dtype_(dtype),
      sequences_(sequences),
      context_(context),
      n_layers_(c.n_layers),
      n_kv_heads_(c.n_kv_heads),
      head_dim_(c.head_dim),
      max_blocks_(blocks_for(context)),
      recent_(recent) {
    AKUNU_CHECK(sequences >= 1, "a batch needs max_sequences >= 1, not " + std::to_string(sequences));
    AKUNU_CHECK(blocks >= 1, "a batch needs at least one KV block, not " + std::to_string(blocks));
    for (const bool values : {false, true})
        block_layout_[values] = kv_block_layout(kv_side(dtype, values), c.n_kv_heads, c.head_dim);
    // Each (layer, side) starts on kBlockAlign bytes, the bindings' offset alignment.
    side_stride_ = align_up(size_t(sequences) * size_t(max_blocks_) * 8, kBlockAlign);
    int next = 0;
    for (const KvPoolPart& part : parts) {
        AKUNU_CHECK(part.layers.first == next && part.layers.end(n_layers_) > next,
                    "a KV pool's parts must cover the layers in order: a part starts at layer " +
                        std::to_string(part.layers.first) + ", expected " + std::to_string(next));
        next = part.layers.end(n_layers_);
        stores_.push_back(make_store(part, blocks));
    }
    AKUNU_CHECK(next == n_layers_,
                "a KV pool's parts end at layer " + std::to_string(next) + " of " + std::to_string(n_layers_));
    // Entries of blocks a sequence does not hold point at block 0: a stray read stays in memory
    // (the kernels read no such entry: a row reads its own sequence's positions up to its own).
    for (int s = 0; s < sequences; ++s)
        for (int j = 0; j < max_blocks_; ++j) set_entry(s, j, 0);
    refs_.assign(size_t(blocks), 0);
    hash_of_.assign(size_t(blocks), 0);
    for (int b = blocks - 1; b >= 0; --b) free_.push_back(b);
    seqs_.resize(size_t(sequences));
}

// One device's rows of every block (its layers' K and V) and its tables.
KvPool::Store KvPool::make_store(const KvPoolPart& part, int blocks) const {
    Store st{part.device, part.layers};
    const int first = part.layers.first, last = part.layers.end(n_layers_);
    for (int l = first; l < last; ++l)
        for (const bool values : {false, true}) {
            st.side_offset.push_back(st.block_bytes);
            st.block_bytes += align_up(size_t(block_layout_[values].bytes), kBlockAlign);
        }
    const uint64_t most = part.device->profile().max_memory_allocation_bytes;
    st.blocks_per_chunk = std::max<size_t>(1, most ? size_t(most / st.block_bytes) : size_t(blocks));
    for (size_t from = 0; from < size_t(blocks); from += st.blocks_per_chunk) {
        const size_t n = std::min(st.blocks_per_chunk, size_t(blocks) - from);
        st.chunks.push_back(Buffer::allocate(part.device, st.block_bytes * n, Residency::kAuto, true));
    }
    st.table = Buffer::allocate(part.device, size_t(last - first) * 2 * side_stride_, Residency::kHost);
    if (recent_.window > 0)
        st.recent =
            std::make_unique<KvPoolRecent>(part.device, recent_, last - first, n_kv_heads_, head_dim_, sequences_);
    return st;
}

const KvPool::Store& KvPool::store_of(int layer) const {
    for (const Store& st : stores_)
        if (st.layers.holds(layer, n_layers_)) return st;
    throw Error("layer " + std::to_string(layer) + " is out of range (0 to " + std::to_string(n_layers_ - 1) + ")");
}

size_t KvPool::block_bytes() const {
    size_t total = 0;
    for (const Store& st : stores_) total += st.block_bytes;
    return total;
}

size_t KvPool::bytes() const {
    size_t total = 0;
    for (const Store& st : stores_) total += st.block_bytes * refs_.size() + st.table.size();
    return total + recent_bytes();
}

size_t KvPool::recent_bytes() const {
    size_t total = 0;
    for (const Store& st : stores_)
        if (st.recent) total += st.recent->ring_bytes() + st.recent->tail_bytes();
    return total;
}

KvBindings KvPool::bindings(int layer) const {
    const Store& st = store_of(layer);
    const size_t per_side = size_t(sequences_) * size_t(max_blocks_) * 8;
    const size_t k_at = size_t(layer - st.layers.first) * 2 * side_stride_;
    KvBindings b{dtype_,
                 Binding(st.table, k_at, per_side),
                 Binding(st.table, k_at + side_stride_, per_side),
                 {},
                 {},
                 KvRows::kBatch,
                 0,
                 uint32_t(sequences_)};
    if (st.recent) st.recent->bind(b, layer - st.layers.first);
    return b;
}

void KvPool::set_entry(int seq, int j, int block) {
    for (Store& st : stores_) {
        auto* entries = static_cast<uint64_t*>(st.table.contents());
        const auto [chunk, offset] = st.locate(block);
        const uint64_t base = chunk->address() + offset;
        for (size_t ls = 0; ls < st.side_offset.size(); ++ls)
            entries[ls * side_stride_ / 8 + size_t(seq) * size_t(max_blocks_) + size_t(j)] = base + st.side_offset[ls];
    }
}

int KvPool::blocks_shared() const {
    return int(std::count_if(refs_.begin(), refs_.end(), [](int r) { return r > 1; }));
}

int KvPool::blocks_needed(int seq, int from, int to, std::vector<int>* copies) const {
    if (from >= to) return 0;
    const Seq& s = seqs_[size_t(seq)];
    int need = std::max(0, blocks_for(to) - int(s.blocks.size()));
    for (int j = from / AKUNU_KV_BLOCK; j < std::min(blocks_for(to), int(s.blocks.size())); ++j) {
        const size_t b = size_t(s.blocks[size_t(j)]);
        if (refs_[b] - (copies ? (*copies)[b] : 0) <= 1) continue;  // its own, or the last holder's to keep
        ++need;
        if (copies) ++(*copies)[b];
    }
    return need;
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
    for (Store& st : stores_)
        if (st.recent) st.recent->drop_tail(b);
    free_.push_back(b);
}

void KvPool::copy_block(int from, int to) {
    for (const Store& st : stores_) {
        const auto [src, src_at] = st.locate(from);
        const auto [dst, dst_at] = st.locate(to);
        if (src->host_visible() && dst->host_visible()) {
            std::memcpy(static_cast<uint8_t*>(dst->contents()) + dst_at,
                        static_cast<const uint8_t*>(src->contents()) + src_at, st.block_bytes);
            continue;
        }
        std::vector<uint8_t> rows(st.block_bytes);
        src->read(rows.data(), st.block_bytes, src_at);
        dst->write(rows.data(), st.block_bytes, dst_at);
    }
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
    for (Store& st : stores_)
        if (st.recent) st.recent->copy(dst, src);
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

void KvPool::adopted(int seq) {
    const Seq& s = seqs_[size_t(seq)];
    if (recent_.window == 0 || s.length == 0) return;
    for (Store& st : stores_) st.recent->restore_tail(s.blocks[size_t(s.length - 1) / AKUNU_KV_BLOCK], seq, s.length);
}

void KvPool::publish(int seq, int j, uint64_t hash) {
    const int b = seqs_[size_t(seq)].blocks[size_t(j)];
    if (hash_of_[size_t(b)] || by_hash_.count(hash)) return;
    const int end = (j + 1) * AKUNU_KV_BLOCK;
    if (recent_.window > 0) {
        if (!stores_[0].recent->holds_tail(seqs_[size_t(seq)].length, end)) return;
        for (Store& st : stores_) st.recent->keep_tail(b, seq, end);
    }
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
    const Store& st = store_of(layer);
    const size_t at = st.side_offset[size_t(layer - st.layers.first) * 2 + (values ? 1 : 0)];
    const size_t scale_base = size_t(block_layout_[values].scale_offset);
    std::vector<uint8_t> block(st.block_bytes);
    for (size_t j = 0; j * AKUNU_KV_BLOCK < n; ++j) {
        const auto [chunk, offset] = st.locate(s.blocks[j]);
        chunk->read(block.data(), st.block_bytes, offset);
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
    const Store& st = store_of(layer);
    const size_t at = st.side_offset[size_t(layer - st.layers.first) * 2 + (values ? 1 : 0)];
    for (int p = from; p < from + n;) {
        const size_t j = size_t(p) / AKUNU_KV_BLOCK, in = size_t(p) % AKUNU_KV_BLOCK;
        AKUNU_CHECK(j < s.blocks.size(), "position " + std::to_string(p) + " has no block (prepare_write first)");
        const size_t rows = std::min<size_t>(AKUNU_KV_BLOCK - in, size_t(from + n - p));
        const int b = s.blocks[j];
        if (hash_of_[size_t(b)]) by_hash_.erase(hash_of_[size_t(b)]);  // its rows no longer follow its tokens
        hash_of_[size_t(b)] = 0;
        const auto [chunk, offset] = st.locate(b);
        for (size_t h = 0; h < heads; ++h)
            chunk->write(data + (h * size_t(n) + size_t(p - from)) * size_t(head_dim_), rows * row,
                         offset + at + (h * AKUNU_KV_BLOCK + in) * row);
        p += int(rows);
    }
}

}  // namespace akunu
