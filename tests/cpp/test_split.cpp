// A model split by layers (engine/split.h) in C++ (the Python suite,
// tests/python/test_split_devices.py, covers every architecture): the layers each device takes,
// parts' KV caches whose rows are the whole cache's, and a split decode whose logits are the
// single-device ones bit for bit.
#include <gtest/gtest.h>

#include <cstdlib>

#include "akunu/core/error.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/engine/model.h"
#include "akunu/engine/split.h"
#include "vk_test.h"

namespace akunu::test {

static const std::string kFixtures = fixtures_dir();

using SplitTest = VkTest;

TEST(SplitLayers, CountsProportionsAndFreeMemory) {
    auto spans = [](const std::vector<LayerRange>& rs) {
        std::vector<std::pair<int, int>> out;
        for (const LayerRange& r : rs) out.push_back({r.first, r.last});
        return out;
    };
    using V = std::vector<std::pair<int, int>>;
    EXPECT_EQ(spans(split_layers(32, {24, 8}, {1, 1})), (V{{0, 24}, {24, 32}}));  // counts
    EXPECT_EQ(spans(split_layers(32, {3, 1}, {1, 1})), (V{{0, 24}, {24, 32}}));  // proportions
    EXPECT_EQ(spans(split_layers(7, {}, {100, 200, 400})), (V{{0, 1}, {1, 3}, {3, 7}}));  // free memory
    EXPECT_EQ(spans(split_layers(5, {}, {0, 0})), (V{{0, 3}, {3, 5}}));  // nothing reported: even
    EXPECT_THROW(split_layers(2, {}, {1, 1, 1}), Error);  // more devices than layers
    EXPECT_THROW(split_layers(4, {4, 0}, {1, 1}), Error);  // a device without layers
    EXPECT_THROW(split_layers(4, {0.99, 0.01}, {1, 1}), Error);  // a share that rounds to none
    EXPECT_THROW(split_layers(4, {1, 1, 1}, {1, 1}), Error);  // an entry per device
}

// The parts' saved rows, in layer order, are the whole cache's; a part allocates its layers only.
TEST_F(SplitTest, PartsOfACacheSaveTheWholeCachesRows) {
    ModelConfig c;
    c.n_layers = 3;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    KVCache whole(device(), c, 8), front(device(), c, 8, KvDType::kF16, false, 0, {0, 1}),
        back(device(), c, 8, KvDType::kF16, false, 0, {1, 3});
    std::vector<uint8_t> rows(whole.rows_bytes(5));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint8_t(i * 13 + i / 7);
    whole.load_rows(rows.data(), rows.size(), 5);
    const size_t cut = front.rows_bytes(5);
    ASSERT_EQ(cut + back.rows_bytes(5), rows.size());
    front.load_rows(rows.data(), cut, 5);
    back.load_rows(rows.data() + cut, rows.size() - cut, 5);
    EXPECT_EQ(front.read_side(0, true, false, 5), whole.read_side(0, true, false, 5));
    EXPECT_EQ(back.read_side(2, false, false, 5), whole.read_side(2, false, false, 5));
    EXPECT_THROW(front.read_side(1, false, false, 5), Error);
    EXPECT_EQ(front.bytes() + back.bytes(), whole.bytes());
}

TEST_F(SplitTest, TwoLogicalDevicesDecodeTheSingleDeviceLogits) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    const std::string path = kFixtures + "/trained-code-llama/gguf/trained-code-llama-q8_0.gguf";
    LoadOptions o;
    o.context = 32;
    o.device = test_selector();
    auto single = Model::load(path, o);
    o.device.clear();
    o.devices = {test_selector(), test_selector()};
    o.split = {2, 4};
    auto split = Model::load(path, o);
    ASSERT_EQ(split->parts().size(), 2u);
    EXPECT_EQ(split->parts()[0]->layers().end(6), 2);
    const size_t vocab = size_t(single->config().vocab_size);
    std::vector<float> a(vocab), b(vocab);
    for (int token : {1, 17, 300, 5}) {
        single->decode(token);
        split->decode(token);
        single->scratch().get("logits").read(a.data(), vocab * 4);
        split->scratch().get("logits").read(b.data(), vocab * 4);
        ASSERT_EQ(a, b) << "token " << token;
        EXPECT_EQ(split->sampled_token(), single->sampled_token());
    }
}

}  // namespace akunu::test
