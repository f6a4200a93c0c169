// KvPool (engine/kv_pool.h): blocks taken as sequences grow and returned when they leave, an
// exhausted pool refusing a write without taking anything, shared blocks (fork, prefix hashes)
// counted once, and copy-on-write leaving the other holder's rows as they were. Runs on the CPU
// backend, where a block's device address is its host pointer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "akunu/core/error.h"
#include "akunu/engine/kv_pool.h"
#include "vk_test.h"
#include "params.h"

namespace akunu::test {

namespace {

std::shared_ptr<Device> cpu_device() {
    static std::shared_ptr<Device> d = Device::create("cpu");
    return d;
}

// Writes `value` into every f16 of K's rows of `seq`'s block j of layer 0 (the first side).
void fill_block(const KvPool& pool, int seq, int j, uint16_t value) {
    const KvBindings b = pool.bindings(0);
    const auto* table =
        reinterpret_cast<const uint64_t*>(static_cast<const uint8_t*>(b.k.buffer->contents()) + b.k.offset);
    // The tables of the sequences side by side, 2 entries each (a context of 512 positions).
    auto* rows = reinterpret_cast<uint16_t*>(uintptr_t(table[size_t(seq) * 2 + size_t(j)]));
    for (size_t i = 0; i < size_t(pool.n_kv_heads()) * AKUNU_KV_BLOCK * size_t(pool.head_dim()); ++i) rows[i] = value;
}

}  // namespace

TEST(KvPool, SequencesTakeAndReturnBlocks) {
    const ModelConfig c = attention_config(4, 2, 16);
    KvPool pool(cpu_device(), c, 512, KvDType::kF16, 2, 3);  // 2 blocks per context, 3 in the pool
    EXPECT_EQ(pool.blocks_needed(0, 0, 300), 2);
    pool.prepare_write(0, 0, 300);
    pool.set_length(0, 300);
    EXPECT_EQ(pool.blocks_free(), 1);
    EXPECT_EQ(pool.blocks_needed(1, 0, 300), 2);
    try {
        pool.prepare_write(1, 0, 300);
        FAIL() << "the pool holds one free block";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("pool is exhausted"), std::string::npos) << e.what();
    }
    EXPECT_EQ(pool.blocks_free(), 1);  // nothing taken
    EXPECT_TRUE(pool.block_table(1).empty());
    pool.release(0);
    EXPECT_EQ(pool.blocks_free(), 3);
    EXPECT_EQ(pool.length(0), 0);
}

TEST(KvPool, SharedBlocksAreCopiedOnWrite) {
    const ModelConfig c = attention_config(4, 2, 16);
    KvPool pool(cpu_device(), c, 512, KvDType::kF16, 2, 4);
    pool.prepare_write(0, 0, 100);
    pool.set_length(0, 100);
    fill_block(pool, 0, 0, 0x3C00);  // 1.0
    pool.share(1, 0, 100);
    EXPECT_EQ(pool.block_table(1), pool.block_table(0));
    EXPECT_EQ(pool.blocks_shared(), 1);
    EXPECT_EQ(pool.blocks_needed(1, 100, 101), 1);  // its write into the shared block copies it
    pool.prepare_write(1, 100, 101);
    EXPECT_NE(pool.block_table(1), pool.block_table(0));
    EXPECT_EQ(pool.blocks_shared(), 0);
    fill_block(pool, 1, 0, 0x4000);  // 2.0, in the copy only
    const std::vector<uint8_t> a = pool.read_side(0, 0, false, false), b = pool.read_side(1, 0, false, false);
    uint16_t first_a, first_b;
    std::memcpy(&first_a, a.data(), 2);
    std::memcpy(&first_b, b.data(), 2);
    EXPECT_EQ(first_a, 0x3C00);
    EXPECT_EQ(first_b, 0x4000);
}

TEST(KvPool, PublishedBlocksAreFoundByHashAndFreedWithTheirLastHolder) {
    const ModelConfig c = attention_config(4, 2, 16);
    KvPool pool(cpu_device(), c, 512, KvDType::kQ8, 2, 4);
    pool.prepare_write(0, 0, 256);
    pool.set_length(0, 256);
    pool.publish(0, 0, 42);
    const int block = pool.find_block(42);
    ASSERT_EQ(block, pool.block_table(0)[0]);
    pool.adopt(1, block);
    EXPECT_EQ(pool.blocks_shared(), 1);
    pool.release(0);
    EXPECT_EQ(pool.find_block(42), block);  // sequence 1 still holds it
    pool.release(1);
    EXPECT_EQ(pool.find_block(42), -1);
    EXPECT_EQ(pool.blocks_free(), 4);
}

TEST(KvPool, WrittenRowsReadBackAndLeaveThePrefixIndex) {
    ModelConfig c = attention_config(4, 2, 16);
    c.n_layers = 2;
    KvPool pool(cpu_device(), c, 512, KvDType::kF16, 1, 2);
    const int heads = pool.n_kv_heads(), dim = pool.head_dim(), n = 300;  // across a block boundary
    std::vector<uint16_t> rows(size_t(heads) * n * size_t(dim));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint16_t(i * 7 + 1);
    pool.prepare_write(0, 0, n);
    pool.publish(0, 0, 42);
    pool.write_side(0, 1, true, 0, n, rows.data());  // layer 1's values
    pool.set_length(0, n);
    const std::vector<uint8_t> got = pool.read_side(0, 1, true, false);
    ASSERT_EQ(got.size(), rows.size() * 2);
    EXPECT_EQ(std::memcmp(got.data(), rows.data(), got.size()), 0);
    const std::vector<uint8_t> keys = pool.read_side(0, 1, false, false);  // the other side is untouched
    EXPECT_NE(std::memcmp(keys.data(), rows.data(), keys.size()), 0);
    EXPECT_EQ(pool.find_block(42), -1);  // its rows no longer follow the tokens it was published for
}

// A pool split by layers over two devices: one block table, each layer's rows on its own device
// (bindings, reads and writes), copy-on-write copying every device's rows; parts that leave a
// layer out are refused.
TEST(KvPool, SplitByLayersOverDevicesSharesItsBlockTables) {
    ModelConfig c = attention_config(4, 2, 16);
    c.n_layers = 3;
    const std::shared_ptr<Device> other = Device::create("cpu");
    KvPool pool({{cpu_device(), {0, 1}}, {other, {1, 3}}}, c, 512, KvDType::kF16, 2, 4);
    EXPECT_EQ(&pool.bindings(0).k.buffer->device(), cpu_device().get());
    EXPECT_EQ(&pool.bindings(2).v.buffer->device(), other.get());
    const int heads = pool.n_kv_heads(), dim = pool.head_dim(), n = 100;
    std::vector<uint16_t> rows(size_t(heads) * n * size_t(dim));
    pool.prepare_write(0, 0, n);
    for (int layer = 0; layer < 3; ++layer) {
        for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint16_t(i * 3 + size_t(layer) + 1);
        pool.write_side(0, layer, layer == 2, 0, n, rows.data());
    }
    pool.set_length(0, n);
    pool.share(1, 0, n);
    pool.prepare_write(1, n, n + 1);  // the shared block becomes sequence 1's copy, on both devices
    pool.set_length(1, n);
    EXPECT_NE(pool.block_table(1), pool.block_table(0));
    for (int layer = 0; layer < 3; ++layer) {
        for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint16_t(i * 3 + size_t(layer) + 1);
        for (const int seq : {0, 1}) {
            const std::vector<uint8_t> got = pool.read_side(seq, layer, layer == 2, false);
            ASSERT_EQ(got.size(), rows.size() * 2);
            EXPECT_EQ(std::memcmp(got.data(), rows.data(), got.size()), 0) << "layer " << layer << " seq " << seq;
        }
    }
    try {
        KvPool gap({{cpu_device(), {0, 1}}, {other, {2, 3}}}, c, 512, KvDType::kF16, 1, 1);
        FAIL() << "layer 1 is in no part";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("starts at layer 2, expected 1"), std::string::npos) << e.what();
    }
}

// A recent window over a split pool: each part holds its layers' rings, [sequences, n_kv, rows,
// head_dim] f16, on its own device; a fork copies every part's rings, and a sequence that adopts
// a published block restores every part's from the block's kept tail.
TEST(KvPool, SplitRingsAreCopiedAndRestoredOnEveryPart) {
    ModelConfig c = attention_config(4, 2, 16);
    c.n_layers = 3;
    const std::shared_ptr<Device> other = Device::create("cpu");
    const KvRecentPlan plan{4, 6, 0};
    KvPool pool({{cpu_device(), {0, 1}}, {other, {1, 3}}}, c, 512, KvDType::kQ8, 3, 4, plan);
    EXPECT_EQ(pool.recent_window(), 4);
    EXPECT_EQ(pool.bindings(1).recent_rows, 6u);
    EXPECT_EQ(&pool.bindings(0).k_recent.buffer->device(), cpu_device().get());
    EXPECT_EQ(&pool.bindings(2).v_recent.buffer->device(), other.get());
    const size_t heads = size_t(pool.n_kv_heads()), dim = size_t(pool.head_dim()), per_seq = heads * 6 * dim;
    EXPECT_EQ(pool.recent_bytes(), 3 * 2 * 3 * per_seq * 2);  // layers, sides, sequences
    const auto ring = [&](int layer, bool values, int seq) {
        const KvBindings b = pool.bindings(layer);
        auto* rows = static_cast<uint16_t*>((values ? b.v_recent : b.k_recent).buffer->contents());
        return rows + size_t(seq) * per_seq;
    };
    const auto value = [](int layer, bool values, size_t i) {
        return uint16_t(i * 7 + size_t(layer) * 2 + values + 1);
    };
    for (int layer = 0; layer < 3; ++layer)
        for (const bool values : {false, true}) {
            for (size_t i = 0; i < per_seq; ++i) ring(layer, values, 0)[i] = value(layer, values, i);
            std::fill_n(ring(layer, values, 2), per_seq, uint16_t(0));
        }
    pool.prepare_write(0, 0, AKUNU_KV_BLOCK);
    pool.set_length(0, AKUNU_KV_BLOCK);
    pool.publish(0, 0, 42);  // keeps the block's last window - 1 positions of every part's rings
    pool.share(1, 0, AKUNU_KV_BLOCK);
    pool.adopt(2, pool.find_block(42));
    pool.set_length(2, AKUNU_KV_BLOCK);
    pool.adopted(2);
    for (int layer = 0; layer < 3; ++layer)
        for (const bool values : {false, true}) {
            EXPECT_EQ(std::memcmp(ring(layer, values, 1), ring(layer, values, 0), per_seq * 2), 0) << "layer " << layer;
            for (size_t h = 0; h < heads; ++h)
                for (int t = AKUNU_KV_BLOCK - 6; t < AKUNU_KV_BLOCK; ++t) {
                    const size_t at = (h * 6 + size_t(t % 6)) * dim;
                    const bool kept = t >= AKUNU_KV_BLOCK - 3;
                    EXPECT_EQ(ring(layer, values, 2)[at], kept ? value(layer, values, at) : 0)
                        << "layer " << layer << " head " << h << " position " << t;
                }
        }
    pool.release(0);
    pool.release(1);
    pool.release(2);
    EXPECT_EQ(pool.recent_bytes(), 3 * 2 * 3 * per_seq * 2);  // the kept tail went with its block
}

}  // namespace akunu::test
