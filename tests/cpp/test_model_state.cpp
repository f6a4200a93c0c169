// Model state in C++ (the Python suite, tests/python/test_model_state.py, covers the cases in
// full): KV rows copied out and into caches of other lengths, a saved state that continues bit
// for bit, a fork that is independent of its original, and damaged bytes refused unchanged.
#include <gtest/gtest.h>

#include <cstring>

#include "akunu/core/error.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/engine/model.h"
#include "vk_test.h"

namespace akunu::test {

static const std::string kFixtures = fixtures_dir();

using ModelStateTest = VkTest;

TEST_F(ModelStateTest, KvRowsRoundTripBetweenCachesOfOtherLengths) {
    ModelConfig c;
    c.n_layers = 2;
    c.n_kv_heads = 3;
    c.head_dim = 8;
    KVCache a(device(), c, 16), b(device(), c, 5);
    const size_t row = 8 * 2;  // head_dim f16
    std::vector<uint8_t> all(a.rows_bytes(16));
    ASSERT_EQ(all.size(), 2u * 2 * 3 * 16 * row);  // layers, K and V, heads, positions
    for (size_t i = 0; i < all.size(); ++i) all[i] = uint8_t(i * 7 + i / 251);
    a.load_rows(all.data(), all.size(), 16);
    a.truncate(4);
    const std::vector<uint8_t> rows = a.save_rows(4);
    ASSERT_EQ(rows.size(), 2u * 2 * 3 * 4 * row);
    b.load_rows(rows.data(), rows.size(), 4);
    EXPECT_EQ(b.current_length(), 4);
    EXPECT_EQ(b.save_rows(4), rows);
    // Layer 1's V, head 1, rows [0, 4): piece 2 * 3 + 3 + 1 of 16 rows each in the saved order,
    // and at head 1 of [3, 5, 8] in b.
    std::vector<uint8_t> in_b(4 * row);
    b.v(1).read(in_b.data(), in_b.size(), 1 * 5 * row);
    const uint8_t* want = all.data() + (2 * 3 + 3 + 1) * 16 * row;
    EXPECT_EQ(in_b, std::vector<uint8_t>(want, want + 4 * row));
    EXPECT_THROW(b.load_rows(rows.data(), rows.size() - 1, 4), Error);
    EXPECT_THROW(b.save_rows(6), Error);
    EXPECT_EQ(b.current_length(), 4);
}

// A cache in blocks keeps the saved order: rows round-trip with a pre-allocated cache, across
// block boundaries, and blocks are allocated only as positions reach them.
TEST_F(ModelStateTest, KvRowsRoundTripBetweenBlocksAndFullCaches) {
    if (!device()->profile().buffer_device_address) GTEST_SKIP() << "no bufferDeviceAddress";
    ModelConfig c;
    c.n_layers = 2;
    c.n_kv_heads = 3;
    c.head_dim = 8;
    for (const KvDType dtype : {KvDType::kF16, KvDType::kQ8Int4}) {
        KVCache full(device(), c, 700, dtype), blocks(device(), c, 700, dtype, true);
        EXPECT_EQ(blocks.blocks_allocated(), 1);
        const uint64_t before = device()->allocations_total();
        blocks.reserve(256);
        EXPECT_EQ(device()->allocations_total(), before);
        std::vector<uint8_t> all(full.rows_bytes(600));
        ASSERT_EQ(all.size(), blocks.rows_bytes(600));
        for (size_t i = 0; i < all.size(); ++i) all[i] = uint8_t(i * 7 + i / 251);
        full.load_rows(all.data(), all.size(), 600);
        blocks.load_rows(all.data(), all.size(), 600);
        EXPECT_EQ(blocks.blocks_allocated(), 3);
        EXPECT_EQ(device()->allocations_total(), before + 2);
        EXPECT_EQ(blocks.save_rows(600), all);
        EXPECT_EQ(blocks.save_rows(300), full.save_rows(300));
        for (const bool scales : {false, true}) {
            if (scales && dtype == KvDType::kF16) continue;
            EXPECT_EQ(blocks.read_side(1, true, scales, 600), full.read_side(1, true, scales, 600));
        }
    }
}

// A sliding layer's ring keeps the newest rows across its wrap, saves rows [sliding_from, n),
// and refuses a rewind whose window reaches an overwritten row.
TEST_F(ModelStateTest, RingsKeepTheNewestRowsAndBoundRewinds) {
    ModelConfig c;
    c.n_layers = 2;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    c.sliding_window = 4;
    c.layer_sliding = {true, false};
    c.n_sliding_layers = 1;
    KVCache full(device(), c, 16), ring(device(), c, 16, KvDType::kF16, false, 6);
    EXPECT_EQ(ring.rows(0), KvRows::kRing);
    EXPECT_EQ(ring.rows(1), KvRows::kFull);
    std::vector<uint8_t> all(full.rows_bytes(10));
    for (size_t i = 0; i < all.size(); ++i) all[i] = uint8_t(i * 13 + i / 199);
    full.load_rows(all.data(), all.size(), 10);
    ring.load_rows(all.data(), all.size(), 10);  // the ring keeps positions [4, 10): slots 4, 5, 0, 1, 2, 3
    EXPECT_EQ(ring.sliding_from(), 4);
    const std::vector<uint8_t> kept = ring.save_rows(10);
    EXPECT_EQ(kept.size(), full.rows_bytes(10, 4));
    KVCache other(device(), c, 16);
    other.load_rows(kept.data(), kept.size(), 10, 4);
    EXPECT_EQ(other.save_rows(10), kept);
    for (const bool values : {false, true}) {
        const std::vector<uint8_t> a = ring.read_side(0, values, false, 10), b = full.read_side(0, values, false, 10);
        const size_t row = 16;
        for (size_t h = 0; h < 2; ++h)  // rows [4, 10) as written, rows [0, 4) zeros
            for (size_t t = 0; t < 10; ++t)
                EXPECT_EQ(std::memcmp(a.data() + (h * 10 + t) * row,
                                      t < 4 ? std::vector<uint8_t>(row).data() : b.data() + (h * 10 + t) * row, row),
                          0);
    }
    EXPECT_THROW(ring.truncate(6), Error);  // the window of position 6 reads 3, overwritten
    EXPECT_EQ(ring.current_length(), 10);
    ring.truncate(7);
    EXPECT_THROW(other.truncate(6), Error);  // loaded from the ring's rows: the same limit
    ring.truncate(0);
    EXPECT_EQ(ring.sliding_from(), 0);
}

static std::vector<float> logits_of(const Model& m) {
    std::vector<float> v(size_t(m.config().vocab_size));
    m.scratch().get("logits").read(v.data(), v.size() * 4);
    return v;
}

// n decode steps from the model's state: the ids and the logits each was sampled from.
static std::pair<std::vector<int>, std::vector<float>> run(Model& m, int n) {
    std::vector<int> ids;
    std::vector<float> logits;
    for (int i = 0; i < n; ++i) {
        ids.push_back(m.sampled_token());
        const auto l = logits_of(m);
        logits.insert(logits.end(), l.begin(), l.end());
        m.decode(ids.back());
    }
    return {ids, logits};
}

TEST_F(ModelStateTest, SavedStatesAndForksContinueBitIdentically) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    LoadOptions o;
    o.context = 64;
    o.device = test_selector();
    auto m = Model::load(kFixtures + "/tiny-llama3-random/gguf/tiny-llama3-random-f16.gguf", o);
    m->set_sampler(SamplerState{0.9f, 20, 0.95f, 0.0f, 7, 0, 0, 0});
    m->eval({2040, 17, 300, 5, 999});
    const std::vector<uint8_t> state = m->save_state();
    auto fork = m->fork();
    EXPECT_EQ(m->weight_sharers(), 2);
    const auto want = run(*m, 12);

    m->reset();
    m->eval({1, 2, 3});
    std::vector<uint8_t> damaged = state;
    damaged[damaged.size() / 2] ^= 1;
    EXPECT_THROW(m->load_state(damaged.data(), damaged.size()), Error);
    EXPECT_EQ(m->kv_cache().current_length(), 3);
    m->load_state(state.data(), state.size());
    EXPECT_EQ(m->kv_cache().current_length(), 5);
    EXPECT_EQ(run(*m, 12), want);
    EXPECT_EQ(fork->kv_cache().current_length(), 5);  // the original's steps did not reach it
    EXPECT_EQ(run(*fork, 12), want);
}

}  // namespace akunu::test
