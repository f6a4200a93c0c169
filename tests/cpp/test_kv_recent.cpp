// The recent window of a quantized cache (kv_format.h KvFormat, kv_recent.h): its spelling, and
// the ring write (kernels::kv_recent_store) on the Vulkan device and the CPU backend against
// the rule it implements: step row r lands, as f16, in ring row (pos + r) % ring rows of its KV
// head, and a row whose ring row a later row of the same step takes is not written. Odd sizes:
// 3 KV heads of 24, a ring of 5 rows, steps of 2 and 7 rows (the second wraps it), rows padded
// past [q | k | v], and one row past the step's tokens.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "akunu/core/error.h"
#include "akunu/core/half.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/kv_format.h"
#include "akunu/vulkan/command_list.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {
namespace {

class KvRecentTest : public VkTest {};

TEST_F(KvRecentTest, FormatsSpellTheirWindow) {
    const KvFormat f = parse_kv_format("q8/int4+w16");
    EXPECT_EQ(f.dtype, KvDType::kQ8Int4);
    EXPECT_EQ(f.recent, 16);
    EXPECT_EQ(kv_format_name(f), "q8/int4+w16");
    EXPECT_EQ(parse_kv_format("int4h+w").recent, kKvRecentDefault);
    EXPECT_EQ(parse_kv_format("int4h").recent, 0);
    EXPECT_EQ(kv_format_name(parse_kv_format("fp4")), "fp4");
    for (const char* bad : {"f16+w4", "int4+w0", "int4+8", "int4+w1x", "int4+w999", "int4+w1234", "int9+w4"})
        EXPECT_THROW(parse_kv_format(bad), Error) << bad;
}

TEST_F(KvRecentTest, RingWriteKeepsTheLatestRowsOnBothBackends) {
    const uint32_t heads = 2, kv_heads = 3, hd = 24, ring = 5, q_dim = heads * hd, kv_dim = kv_heads * hd;
    const uint32_t stride = q_dim + 2 * kv_dim + 3, rows = 8;
    std::mt19937 rng{7};
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> qkv(size_t(rows) * stride);
    for (float& v : qkv) v = normal(rng);
    for (const auto& d : {device(), Device::create("cpu")}) {
        const char* on = d->is_cpu() ? "cpu" : "vulkan";
        const std::vector<uint16_t> poison(size_t(kv_heads) * ring * hd, 0x7E00);  // NaN: rows not written
        Buffer xb = d->allocate(qkv.data(), qkv.size() * 4);
        Buffer kb = d->allocate(poison.data(), poison.size() * 2), vb = d->allocate(poison.data(), poison.size() * 2);
        std::vector<uint16_t> k_want = poison, v_want = poison;
        KvBindings cache{KvDType::kInt4, {}, {}, {}, {}};
        cache.recent = 3;
        cache.recent_rows = ring;
        cache.k_recent = Binding(kb);
        cache.v_recent = Binding(vb);
        for (const auto& [pos, tokens] : {std::pair<uint32_t, uint32_t>{3, 2}, {5, 7}}) {
            const StepState step{pos, 0, tokens, 0};
            Buffer sb = d->allocate(&step, sizeof(step));
            CommandList cl(d);
            cl.begin();
            kernels::kv_recent_store(cl, &xb, cache, &sb, {heads, kv_heads, hd, 64, false, false, rows, stride});
            cl.end();
            cl.submit_and_wait();
            for (uint32_t r = 0; r < tokens; ++r) {
                if (r + ring < tokens) continue;  // a later row takes its ring row
                for (uint32_t e = 0; e < kv_dim; ++e) {
                    const size_t at = (size_t(e / hd) * ring + (pos + r) % ring) * hd + e % hd;
                    k_want[at] = float_to_half(qkv[size_t(r) * stride + q_dim + e]);
                    v_want[at] = float_to_half(qkv[size_t(r) * stride + q_dim + kv_dim + e]);
                }
            }
            std::vector<uint16_t> k_got(poison.size()), v_got(poison.size());
            kb.read(k_got.data(), k_got.size() * 2);
            vb.read(v_got.data(), v_got.size() * 2);
            for (size_t i = 0; i < poison.size(); ++i) {
                ASSERT_EQ(k_got[i], k_want[i]) << on << " step at " << pos << ": K ring element " << i;
                ASSERT_EQ(v_got[i], v_want[i]) << on << " step at " << pos << ": V ring element " << i;
            }
        }
    }
}

}  // namespace
}  // namespace akunu::test
