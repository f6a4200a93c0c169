// The int4h rotation (kernels::hadamard_rows, kv_format.h) on the Vulkan device and the CPU
// backend against the Walsh-Hadamard matrix in double: whole-head blocks (head_dim 64) and a
// block-diagonal one (head_dim 24: blocks of 8), rows padded past their heads, and a step that
// covers fewer rows than the dispatch (the rest must stay untouched). H is its own inverse.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/kv_format.h"
#include "akunu/vulkan/command_list.h"
#include "params.h"
#include "vk_test.h"

namespace akunu::test {
namespace {

// Rows [rows, stride] with `heads` heads of head_dim each multiplied by the block-diagonal
// Sylvester-Hadamard matrix, in double.
std::vector<float> rotated(const std::vector<float>& x, size_t rows, size_t heads, size_t head_dim, size_t stride) {
    const size_t n = size_t(kv_rotation_block(int(head_dim)));
    std::vector<float> out = x;
    for (size_t r = 0; r < rows; ++r)
        for (size_t h = 0; h < heads; ++h)
            for (size_t i = 0; i < head_dim; ++i) {
                const size_t b = i / n * n;  // the block of element i
                double acc = 0;
                for (size_t j = 0; j < n; ++j)
                    acc += (__builtin_popcountll((i - b) & j) % 2 ? -1.0 : 1.0) * x[r * stride + h * head_dim + b + j];
                out[r * stride + h * head_dim + i] = float(acc / std::sqrt(double(n)));
            }
    return out;
}

std::vector<float> run(const std::shared_ptr<Device>& d, const std::vector<float>& x, uint32_t tokens, size_t rows,
                       size_t heads, size_t head_dim, size_t stride, int times) {
    Buffer xb = d->allocate(x.data(), x.size() * 4);
    const StepState step{0, 0, tokens, 0};
    Buffer sb = d->allocate(&step, sizeof(step));
    CommandList cl(d);
    cl.begin();
    for (int i = 0; i < times; ++i) kernels::hadamard_rows(cl, &xb, &sb, rows, heads, head_dim, stride);
    cl.end();
    cl.submit_and_wait();
    std::vector<float> out(x.size());
    xb.read(out.data(), out.size() * 4);
    return out;
}

class KvRotation : public VkTest {};

TEST_F(KvRotation, HadamardRowsMatchTheMatrixOnBothBackends) {
    EXPECT_EQ(kv_rotation_block(64), 64);
    EXPECT_EQ(kv_rotation_block(24), 8);
    EXPECT_EQ(kv_rotation_block(768), 256);
    for (const size_t head_dim : {size_t(64), size_t(24)}) {
        const size_t rows = 4, heads = 3, stride = heads * head_dim + 5;
        const uint32_t tokens = 3;  // row 3 lies past the step's tokens
        std::mt19937 rng{uint32_t(head_dim)};
        std::normal_distribution<float> normal(0.0f, 2.0f);
        std::vector<float> x(rows * stride);
        for (float& v : x) v = normal(rng);
        std::vector<float> want = rotated(x, tokens, heads, head_dim, stride);
        for (const auto& d : {device(), Device::create("cpu")}) {
            const char* on = d->is_cpu() ? "cpu" : "vulkan";
            const std::vector<float> got = run(d, x, tokens, rows, heads, head_dim, stride, 1);
            for (size_t i = 0; i < x.size(); ++i)
                ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
                    << on << " head_dim " << head_dim << " at " << i;
            const std::vector<float> twice = run(d, x, tokens, rows, heads, head_dim, stride, 2);
            for (size_t i = 0; i < x.size(); ++i)
                ASSERT_NEAR(twice[i], x[i], 1e-5f * (1.0f + std::fabs(x[i]))) << on << " H H != I at " << i;
        }
    }
}

TEST_F(KvRotation, RotatedFormatsStoreTheirBaseRowsAndNameThemselves) {
    struct Case {
        const char* name;
        KvDType rotated, base;
        const char* suffix;
    };
    for (const Case& c :
         {Case{"int4h", KvDType::kInt4H, KvDType::kInt4, "int4"}, Case{"fp4h", KvDType::kFp4H, KvDType::kFp4, "fp4"}}) {
        SCOPED_TRACE(c.name);
        EXPECT_EQ(parse_kv_dtype(c.name), c.rotated);
        EXPECT_STREQ(kv_dtype_name(c.rotated), c.name);
        EXPECT_EQ(kv_variant_suffix(c.rotated), c.suffix);
        EXPECT_EQ(kv_side(c.rotated, false), c.base);
        EXPECT_EQ(kv_side(c.rotated, true), c.base);
        EXPECT_TRUE(kv_rotated(c.rotated));
        EXPECT_FALSE(kv_rotated(c.base));
    }
    CommandList cl(Device::create("cpu"));
    cl.begin();
    EXPECT_THROW(kernels::hadamard_rows(cl, {}, {}, 1, 1, 300, 300), Error);  // head_dim over 256
}

}  // namespace
}  // namespace akunu::test
