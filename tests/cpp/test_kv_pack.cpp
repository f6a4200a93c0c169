// kv_store's rows against the format's definition on the host (kv_format.glsl, core/kv_codes.h):
// the scale max|x| / qmax rounded to the nearest half, codes formed with the rounded scale.
// Then decode attention that packs the step's own K and V row into a quantized cache
// (kernels::AttentionNewest::kPacked, attention_split.comp's KV_PACK) against kv_write's
// kv_store followed by attention over the cache: the cache's words and scales are the same
// bytes, and the outputs agree to 1e-5 (the packed row starts its team's online softmax, not
// in its place among the rows: the sums' order differs). Every quantized format, full rows
// and blocks, without and with a recent window of 8 rows (whose step row is scored from its f16
// copy), query-head groups of 1 and 2 (the group's first head writes the row), positions at 0,
// at the end and the start of a chunk and inside the third, on the suite's device. Last, the
// attention that rotates a rotated cache's output back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "akunu/core/error.h"
#include "akunu/core/half.h"
#include "akunu/core/kv_codes.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/engine/kv_format.h"
#include "akunu/vulkan/command_list.h"
#include "kernel_buffers.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {
namespace {

class KvPackTest : public VkTest {};

struct Heads {
    uint32_t n_heads, n_kv, head_dim;
};

// Attention at `pos` over rows [0, pos] of qkv ([q | k | v] rows), rows before pos written by
// kv_write; row pos by kv_write too (kInCache) or by the attention (kPacked). Returns the output.
std::vector<float> attend(const std::shared_ptr<Device>& dev, KVCache& kv, const Buffer& qkv, const Heads& h,
                          uint32_t pos, kernels::AttentionNewest newest) {
    const uint32_t q_dim = h.n_heads * h.head_dim, row = q_dim + 2 * h.n_kv * h.head_dim, max_len = 600;
    const kernels::RopeKvShape before{h.n_heads, h.n_kv, h.head_dim, max_len, false, false, pos, row};
    const kernels::RopeKvShape own{h.n_heads, h.n_kv, h.head_dim, max_len, false, false, 1, row};
    const StepState fill{0, 0, pos, 0}, step{pos, 0, 1, 0};
    Buffer fill_b = dev->allocate(&fill, sizeof(fill)), step_b = dev->allocate(&step, sizeof(step));
    const std::vector<float> zeros(kernels::attention_partial_floats(h.n_heads, h.head_dim, max_len), 0.0f);
    Buffer partial = dev->allocate(zeros.data(), zeros.size() * 4);
    Buffer out = poisoned(dev, q_dim, DType::kF32);
    const bool packs = newest == kernels::AttentionNewest::kPacked;
    const Binding own_row(&qkv, size_t(pos) * row * 4, size_t(packs ? row : q_dim) * 4);
    const kernels::AttentionShape shape{h.n_heads, h.n_kv, h.head_dim, max_len, 0, 0.125f, 0.0f};
    // A recent window reads the step's own row from its [q | k | v] row, the older ones from the
    // rings that kv_recent_store fills.
    KvBindings cache = kv.bindings(0), fill_cache = cache;
    cache.step_kv = Binding(&qkv, size_t(pos) * row * 4);
    cache.step_kv_stride = fill_cache.step_kv_stride = row;
    fill_cache.step_kv = Binding(&qkv);
    CommandList cl(dev);
    cl.begin();
    if (pos > 0) kernels::kv_write(cl, &qkv, fill_cache, &fill_b, before);
    if (pos > 0 && cache.recent > 0) kernels::kv_recent_store(cl, &qkv, fill_cache, &fill_b, before);
    if (!packs) kernels::kv_write(cl, Binding(&qkv, size_t(pos) * row * 4), cache, &step_b, own);
    kernels::attention(cl, own_row, cache, &partial, &out, &step_b, shape, nullptr, newest);
    cl.end();
    cl.submit_and_wait();
    return download(out, q_dim, DType::kF32);
}

TEST_F(KvPackTest, AttentionPacksTheStepsRowAsKvStoreDoes) {
    auto dev = device();
    int ran = 0;
    for (const KvDType dtype : {KvDType::kQ8, KvDType::kInt4, KvDType::kFp4, KvDType::kQ8Int4, KvDType::kQ8Fp4})
        for (const bool blocks : {false, true})
            for (const Heads h : {Heads{4, 2, 64}, Heads{3, 3, 32}})
                for (const uint32_t pos : {0u, 255u, 256u, 517u})
                    for (const int recent : {0, 8}) {
                        if (recent > 0 && h.n_kv == h.n_heads) continue;  // windows: one shape is enough
                        const ModelConfig c = attention_config(int(h.n_heads), int(h.n_kv), int(h.head_dim));
                        KVCache want(dev, c, 600, dtype, blocks, 0, {}, recent, 1),
                            got(dev, c, 600, dtype, blocks, 0, {}, recent, 1);
                        if (!kernels::attention_packs_newest(dev->profile(), got.bindings(0), h.head_dim)) continue;
                        want.reserve(int(pos + 1));
                        got.reserve(int(pos + 1));
                        const uint32_t row = (h.n_heads + 2 * h.n_kv) * h.head_dim;
                        const std::vector<float> rows = random_floats(size_t(pos + 1) * row, 7 + pos, -2.0f, 2.0f);
                        Buffer qkv = dev->allocate(rows.data(), rows.size() * 4);
                        const std::string what = std::string(kv_dtype_name(dtype)) + (blocks ? " blocks" : " full") +
                                                 " heads " + std::to_string(h.n_heads) + "/" + std::to_string(h.n_kv) +
                                                 " x " + std::to_string(h.head_dim) + " pos " + std::to_string(pos) +
                                                 " window " + std::to_string(recent);
                        const auto a = attend(dev, want, qkv, h, pos, kernels::AttentionNewest::kInCache);
                        const auto b = attend(dev, got, qkv, h, pos, kernels::AttentionNewest::kPacked);
                        expect_close(b, a, 1e-5f, 1e-5f, what);
                        for (const bool values : {false, true})
                            for (const bool scales : {false, true}) {
                                const auto bytes = got.read_side(0, values, scales, int(pos + 1));
                                EXPECT_EQ(bytes, want.read_side(0, values, scales, int(pos + 1)))
                                    << what << (values ? " V" : " K") << (scales ? " scales" : " codes");
                                EXPECT_NE(bytes, std::vector<uint8_t>(bytes.size(), 0)) << what;  // written
                            }
                        ++ran;
                    }
    if (dev->profile().cpu_backend)
        EXPECT_EQ(ran, 0) << "the CPU backend reads every row from the cache";
    else
        EXPECT_GT(ran, 0) << "no shape packs its row on this device";
}

// kv_store's scales are the host's halves bit for bit, and its codes the host's, where x / scale
// is not within 1e-5 of a rounding boundary (a device's division may be an ulp off there). Rows:
// random, zeros, tiny values (a subnormal half scale) and larger values; every format, on the
// suite's device and the CPU backend.
// Whether y = x / scale lies within 1e-5 of a boundary between two codes of format f.
bool near_boundary(float y, uint32_t f) {
    const float a = std::fabs(y), tol = 1e-5f * std::fmax(1.0f, a);
    if (f != kKvFp4) return std::fabs(a - std::floor(a) - 0.5f) < tol;
    for (const float b : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f})
        if (std::fabs(a - b) < tol) return true;
    return false;
}

TEST_F(KvPackTest, KvStoreWritesTheFormatsScalesAndCodes) {
    const Heads h{2, 2, 64};
    const uint32_t rows = 5, row = (h.n_heads + 2 * h.n_kv) * h.head_dim, q_dim = h.n_heads * h.head_dim;
    std::vector<float> qkv = random_floats(size_t(rows) * row, 3, -2.0f, 2.0f);
    for (uint32_t i = 0; i < row; ++i) {
        qkv[row + i] = 0.0f;
        qkv[2 * row + i] *= 1e-6f;
        qkv[3 * row + i] *= 3.7f;
        qkv[4 * row + i] *= 100.0f;
    }
    const StepState st{0, 0, rows, 0};
    for (const bool cpu : {false, true})
        for (const KvDType dtype : {KvDType::kQ8, KvDType::kInt4, KvDType::kFp4, KvDType::kQ8Int4, KvDType::kQ8Fp4}) {
            auto dev = cpu ? Device::create("cpu") : device();
            const ModelConfig c = attention_config(int(h.n_heads), int(h.n_kv), int(h.head_dim));
            KVCache kv(dev, c, 16, dtype);
            Buffer qkv_b = dev->allocate(qkv.data(), qkv.size() * 4), step = dev->allocate(&st, sizeof(st));
            CommandList cl(dev);
            cl.begin();
            kernels::kv_write(cl, &qkv_b, kv.bindings(0), &step,
                              {h.n_heads, h.n_kv, h.head_dim, 16, false, false, rows, row});
            cl.end();
            cl.submit_and_wait();
            for (const bool values : {false, true}) {
                const uint32_t f = kv_code_id(kv_side(dtype, values));
                const uint32_t per = kv_per_word(f), words = h.head_dim / per;
                const auto codes = kv.read_side(0, values, false, int(rows)),
                           scales = kv.read_side(0, values, true, int(rows));
                for (uint32_t k = 0; k < h.n_kv; ++k)
                    for (uint32_t r = 0; r < rows; ++r) {
                        const float* x = &qkv[r * row + q_dim + (values ? h.n_kv * h.head_dim : 0) + k * h.head_dim];
                        float amax = 0.0f;
                        for (uint32_t i = 0; i < h.head_dim; ++i) amax = std::fmax(amax, std::fabs(x[i]));
                        uint16_t want_scale = float_to_half(amax / kv_qmax(f));
                        uint16_t got_scale;
                        std::memcpy(&got_scale, scales.data() + 2 * (k * rows + r), 2);
                        const std::string what = std::string(cpu ? "cpu " : "") + kv_dtype_name(dtype) +
                                                 (values ? " V" : " K") + " head " + std::to_string(k) + " row " +
                                                 std::to_string(r);
                        // A quotient within 1e-6 of a tie between two halves may round either way
                        // after a device's division.
                        const float q = amax / kv_qmax(f);
                        if (float_to_half(q * (1.0f - 1e-6f)) == float_to_half(q * (1.0f + 1e-6f)))
                            ASSERT_EQ(got_scale, want_scale) << what;
                        else
                            want_scale = got_scale;
                        const float scale = half_to_float(want_scale), inv = scale > 0.0f ? 1.0f / scale : 0.0f;
                        for (uint32_t i = 0; i < h.head_dim; ++i) {
                            uint32_t word;
                            std::memcpy(&word, codes.data() + 4 * ((size_t(k) * rows + r) * words + i / per), 4);
                            const uint32_t got = (word >> ((i % per) * kv_bits(f))) & ((1u << kv_bits(f)) - 1u);
                            const float y = x[i] * inv;
                            if (near_boundary(y, f)) continue;
                            EXPECT_EQ(got, kv_encode(y, f)) << what << " dim " << i << " y " << y;
                        }
                    }
            }
        }
}

// A rotated cache's decode attention rotates its output back itself (attention_unrotates):
// against attention over an unrotated cache holding the same codes (kv_write rotated Q, K and V
// in place, then the same rows were packed into an int4 cache), followed by the host's
// orthonormal Walsh-Hadamard transform per head. Heads of 64 (one block of 64, rows read as
// vectors) and of 80 (blocks of 16, one value at a time), at positions in one chunk (the
// output written by the chunk) and past it (by the merge).
void hadamard_host(std::vector<float>& x, uint32_t head_dim) {
    const uint32_t block = uint32_t(kv_rotation_block(int(head_dim)));
    for (size_t b = 0; b < x.size(); b += block) {
        for (uint32_t h = 1; h < block; h *= 2)
            for (uint32_t i = 0; i < block / 2; ++i) {
                const size_t a = b + (i / h) * 2 * h + i % h;
                const float u = x[a], v = x[a + h];
                x[a] = u + v, x[a + h] = u - v;
            }
        for (uint32_t i = 0; i < block; ++i) x[b + i] /= std::sqrt(float(block));
    }
}

TEST_F(KvPackTest, AttentionRotatesARotatedCachesOutputBack) {
    auto dev = device();
    for (const Heads h : {Heads{4, 2, 64}, Heads{2, 1, 80}})
        for (const uint32_t pos : {0u, 100u, 300u, 517u}) {
            const ModelConfig c = attention_config(int(h.n_heads), int(h.n_kv), int(h.head_dim));
            KVCache rotated(dev, c, 600, KvDType::kInt4H), plain(dev, c, 600, KvDType::kInt4);
            if (!kernels::attention_unrotates(dev->profile(), rotated.bindings(0))) {
                EXPECT_TRUE(dev->profile().cpu_backend) << "a Vulkan device rotates the output back in attention";
                return;
            }
            rotated.reserve(int(pos + 1));
            plain.reserve(int(pos + 1));
            const uint32_t row = (h.n_heads + 2 * h.n_kv) * h.head_dim;
            const std::vector<float> rows = random_floats(size_t(pos + 1) * row, 11 + pos, -2.0f, 2.0f);
            Buffer qkv = dev->allocate(rows.data(), rows.size() * 4);
            const auto got = attend(dev, rotated, qkv, h, pos, kernels::AttentionNewest::kInCache);
            auto want = attend(dev, plain, qkv, h, pos, kernels::AttentionNewest::kInCache);  // qkv rotated now
            hadamard_host(want, h.head_dim);
            expect_close(got, want, 1e-5f, 1e-5f,
                         "heads " + std::to_string(h.n_heads) + " x " + std::to_string(h.head_dim) + " pos " +
                             std::to_string(pos));
        }
}

// Where the device or cache does not take it, a packed attention is refused before anything is
// recorded: the CPU backend and f16.
TEST_F(KvPackTest, PackingWhereItDoesNotApplyIsRefused) {
    for (const bool cpu : {false, true}) {
        auto dev = cpu ? Device::create("cpu") : device();
        const ModelConfig c = attention_config(2, 2, 64);
        for (const KvDType dtype : {KvDType::kF16, KvDType::kInt4}) {
            KVCache kv(dev, c, 64, dtype);
            if (kernels::attention_packs_newest(dev->profile(), kv.bindings(0), 64)) continue;
            Buffer big = dev->allocate(1 << 16);
            CommandList cl(dev);
            cl.begin();
            try {
                kernels::attention(cl, &big, kv.bindings(0), &big, &big, &big, {2, 2, 64, 64, 0, 0.125f, 0.0f}, nullptr,
                                   kernels::AttentionNewest::kPacked);
                FAIL() << "expected an error for " << kv_dtype_name(dtype);
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("not packed by attention"), std::string::npos) << e.what();
            }
            EXPECT_EQ(cl.dispatch_count(), 0u);
            cl.end();
        }
    }
}

}  // namespace
}  // namespace akunu::test
