// KvPool: the KV cache of a batch (batch.h), blocks of AKUNU_KV_BLOCK positions of every layer's
// K and V in one pool that up to `sequences` sequences draw from, each through its own block
// table. The pool is allocated once; a sequence takes blocks as it grows and returns them when
// it leaves, so joining and leaving allocate nothing (docs/batch.md).
//
//   pool   u8 [blocks, block_bytes]: block b holds, per layer and side, the rows
//          [n_kv, AKUNU_KV_BLOCK, ...] in the cache's format (kv_format.h kv_block_layout)
//   table  u64 [n_layers, 2, sequences, max_blocks] (each (layer, side) on 256 bytes): the device address of each sequence's
//          block j of each (layer, side); the kernels of a batched step read the entry of their
//          row's sequence (shaders/include/kv_rows.glsl KV_BATCH)
//
// Blocks carry reference counts: fork() lets a new sequence use another's blocks as they are
// (its later writes go to blocks of its own: copy-on-write of the block it writes into), and
// full blocks are found again by a hash of the tokens they hold (prefix sharing), so that
// sequences that start alike hold one copy of their common prefix.
//
// A model split by layers across devices (split.h) splits the pool the same way: each device
// holds its layers' rows of every block and its own tables of their addresses, while the blocks'
// bookkeeping (block tables, reference counts, hashes) is one, shared by every part.
//
// A format with a recent window (kv_format.h) adds each sequence's f16 rings (kv_pool_recent.h),
// each part holding its layers' rings.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "akunu/engine/kv_format.h"
#include "akunu/engine/kv_pool_recent.h"
#include "akunu/engine/layer_range.h"
#include "akunu/model/model_config.h"
#include "akunu/vulkan/buffer.h"

namespace akunu {

// The layers of the pool one device holds.
struct KvPoolPart {
    std::shared_ptr<Device> device;
    LayerRange layers;
};

class KvPool : public KvSource {
public:
    // recent: the format's recent window and its rings' rows per head (none by default).
    KvPool(const std::shared_ptr<Device>& device, const ModelConfig& c, int context, KvDType dtype, int sequences,
           int blocks, const KvRecentPlan& recent = {});
    // A pool split by layers over `parts` (consecutive ranges that cover every layer).
    KvPool(const std::vector<KvPoolPart>& parts, const ModelConfig& c, int context, KvDType dtype, int sequences,
           int blocks, const KvRecentPlan& recent = {});

    KvBindings bindings(int layer) const override;
    KvDType dtype() const { return dtype_; }
    int sequences() const { return sequences_; }
    int context() const { return context_; }
    int n_layers() const { return n_layers_; }
    int n_kv_heads() const { return n_kv_heads_; }
    int head_dim() const { return head_dim_; }
    int blocks_total() const { return int(refs_.size()); }
    int blocks_free() const { return int(free_.size()); }
    int blocks_shared() const;  // blocks that more than one sequence's table holds
    size_t block_bytes() const;  // one block's rows on every part
    size_t bytes() const;  // with the recent window's
    // The recent window's rings and the shared blocks' tails (kv_pool_recent.h); 0 without one.
    size_t recent_bytes() const;
    int recent_window() const { return recent_.window; }

    int length(int seq) const { return seqs_[size_t(seq)].length; }
    const std::vector<int>& block_table(int seq) const { return seqs_[size_t(seq)].blocks; }
    // Blocks a write of positions [from, to) of `seq` takes from the pool: those it lacks, and
    // a private copy of each shared one it writes into. For one of a step's writes, `copies`
    // holds per block the copies the step's earlier writes take (zeroed by the caller before the
    // first): the holders of a shared block that all write into it copy it one time fewer than
    // they are, since the last one keeps the block (prepare_write).
    int blocks_needed(int seq, int from, int to, std::vector<int>* copies = nullptr) const;
    // Makes positions [from, to) of `seq` writable: takes the blocks blocks_needed counts
    // (copying the rows of a shared block it writes into). Throws, taking nothing, when the
    // pool has too few free blocks.
    void prepare_write(int seq, int from, int to);
    void set_length(int seq, int n);
    // Returns the sequence's blocks (a shared block goes back to the pool with its last holder).
    void release(int seq);
    // `dst` (empty) holds the first n positions of `src` by sharing its blocks (and a copy of
    // its recent window's rings).
    void share(int dst, int src, int n);

    // Prefix sharing: the block whose positions [0, (j + 1) * AKUNU_KV_BLOCK) hold exactly the
    // tokens hashing to `hash` (a chain hash over whole blocks), if a sequence wrote one.
    int find_block(uint64_t hash) const;
    // `seq` (empty) takes block `block` as its next block, a reference more.
    void adopt(int seq, int block);
    // After adopt() and set_length(): `seq`'s recent window takes its last block's tail.
    void adopted(int seq);
    // Records that `seq`'s block j is full of tokens hashing to `hash` (once it is written).
    // With a recent window, only while `seq`'s rings still hold the block's tail.
    void publish(int seq, int j, uint64_t hash);

    // One side of one layer of `seq`, rows [0, length) gathered in position order: [n_kv,
    // length, row bytes] values or codes, or with `scales` the f16 row scales [n_kv, length].
    // The device must be idle.
    std::vector<uint8_t> read_side(int seq, int layer, bool values, bool scales) const;
    // Writes f16 rows `data` [n_kv, n, head_dim] into positions [from, from + n) of one side of
    // one layer of `seq` (an f16 cache only; the positions' blocks must be writable:
    // prepare_write). The device must be idle.
    void write_side(int seq, int layer, bool values, int from, int n, const uint16_t* data);

private:
    struct Seq {
        std::vector<int> blocks;  // pool indices, position j * AKUNU_KV_BLOCK on in blocks[j]
        int length = 0;
    };
    // One device's share of the pool: its layers' rows of every block, and its tables.
    struct Store {
        std::shared_ptr<Device> device;
        LayerRange layers;
        size_t block_bytes = 0;
        std::vector<size_t> side_offset;  // [(layer - first) * 2 + side]: where a side sits in a block
        // The blocks, in chunks of blocks_per_chunk (one allocation may hold only so much; the
        // kernels find blocks by address, so a block's chunk does not matter to them).
        std::vector<Buffer> chunks;  // [blocks_per_chunk, block_bytes] each, addressable
        size_t blocks_per_chunk = 0;
        Buffer table;  // u64 [its layers, 2, sequences, max_blocks], host memory
        std::unique_ptr<KvPoolRecent> recent;  // its layers' rings; null without a recent window
        // Block b's chunk and its byte offset there.
        std::pair<Buffer*, size_t> locate(int b) const {
            return {const_cast<Buffer*>(&chunks[size_t(b) / blocks_per_chunk]),
                    size_t(b) % blocks_per_chunk * block_bytes};
        }
    };
    Store make_store(const KvPoolPart& part, int blocks) const;
    const Store& store_of(int layer) const;
    int take_block();
    void drop_block(int b);
    void set_entry(int seq, int j, int block);
    void copy_block(int from, int to);

    KvDType dtype_;
    int sequences_, context_, n_layers_, n_kv_heads_, head_dim_, max_blocks_;
    size_t side_stride_ = 0;  // bytes from one (layer, side)'s tables to the next's
    KvLayout block_layout_[2];
    std::vector<Store> stores_;  // in layer order
    std::vector<int> refs_;  // per block: the tables that hold it
    std::vector<int> free_;  // blocks with no reference, taken from the back
    std::vector<Seq> seqs_;
    std::map<uint64_t, int> by_hash_;  // full blocks' token hashes
    std::vector<uint64_t> hash_of_;  // per block: its hash, 0 when none is published
    KvRecentPlan recent_;  // the format's recent window (window 0: none)
};

}  // namespace akunu
