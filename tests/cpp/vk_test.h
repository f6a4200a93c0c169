// The fixture every GPU test uses: one shared device, and a check after each test that the
// Khronos validation layer (enabled by ctest through AKUNU_VALIDATION=1) said nothing.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "akunu/vulkan/buffer.h"
#include "akunu/vulkan/device.h"
#include "akunu/vulkan/instance.h"
#include "akunu/model/model_config.h"

namespace akunu::test {

// The device the suite tests: the best Vulkan device (lavapipe on a machine without a GPU,
// which is not the default there but is what the kernels are validated on), else the CPU
// backend where Vulkan is missing.
inline std::string test_selector() { return list_devices().front().backend == Backend::kVulkan ? "vulkan" : ""; }

class VkTest : public ::testing::Test {
protected:
    static std::shared_ptr<Device> device() {
        static std::shared_ptr<Device> shared = Device::create(test_selector());
        return shared;
    }
    void SetUp() override { clear_validation_messages(); }
    void TearDown() override {
        const auto messages = validation_messages();
        std::string text;
        for (const auto& m : messages) text += m + "\n";
        EXPECT_TRUE(messages.empty()) << "validation messages:\n" << text;
    }
};

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// The reference fixtures, or a skip where AKUNU_ALLOW_MISSING_FIXTURES=1 says the machine has
// none (the GPU machine receives the checkout without ../shared).
#define AKUNU_REQUIRE_FIXTURES(dir)                                                                \
    do {                                                                                           \
        const char* allow = std::getenv("AKUNU_ALLOW_MISSING_FIXTURES");                           \
        if (allow && std::string(allow) == "1" && !std::ifstream(std::string(dir) + "/README.md")) \
            GTEST_SKIP() << "the reference fixtures (" << dir << ") are not on this machine";      \
    } while (0)

// The reference fixtures: where AKUNU_FIXTURES says (as the Python suite reads it), else beside
// the checkout.
inline std::string fixtures_dir() {
    const char* dir = std::getenv("AKUNU_FIXTURES");
    return dir && *dir ? dir : AKUNU_FIXTURES;
}

// One fixture file or directory a test reads, or a skip that names it where it is missing (a
// test that went on would fail on a null handle, or read past an empty result).
#define AKUNU_REQUIRE_FIXTURE(path)                                                                        \
    do {                                                                                                   \
        if (!std::filesystem::exists(path))                                                                \
            GTEST_SKIP() << "fixture " << (path) << " is missing (../shared/fixtures; see its README.md)"; \
    } while (0)

inline constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

// One layer of attention heads, for the cache and attention kernel tests.
inline ModelConfig attention_config(int n_heads, int n_kv_heads, int head_dim) {
    ModelConfig c;
    c.n_layers = 1;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.head_dim = head_dim;
    return c;
}

}  // namespace akunu::test
