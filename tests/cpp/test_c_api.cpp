// The C API: a model loads, evaluates and generates through opaque handles, and every failure
// is a status with a message, never an abort.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "akunu/api/akunu.h"
#include "vk_test.h"

namespace akunu::test {

static const std::string kFixtures = AKUNU_FIXTURES;

using CApiTest = VkTest;

TEST_F(CApiTest, LoadEvalGenerate) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    akunu_model* raw = nullptr;
    const std::string path = kFixtures + "/trained-code-llama/gguf/trained-code-llama-q8_0.gguf";
    ASSERT_EQ(akunu_model_create(path.c_str(), 128, &raw), AKUNU_OK) << akunu_last_error();
    UniqueModel m(raw);
    int32_t early[4];
    size_t n_early = 0;  // straight after create: no prompt, so no tokens (not the warm-up's)
    EXPECT_EQ(akunu_model_generate(m.get(), early, 4, &n_early), AKUNU_ERROR);
    EXPECT_EQ(n_early, 0u);
    EXPECT_NE(std::string(akunu_last_error()).find("evaluate a prompt first"), std::string::npos);
    const int32_t ids[] = {4092, 873, 1477, 364, 492, 625, 322, 220};  // "import numpy as np\n\n\ndef "
    ASSERT_EQ(akunu_model_eval(m.get(), ids, 8), AKUNU_OK) << akunu_last_error();
    EXPECT_EQ(akunu_model_kv_length(m.get()), 8);
    const float* logits = akunu_model_logits(m.get());
    if (logits) {
        int best = 0;
        for (int i = 1; i < akunu_model_vocab_size(m.get()); ++i)
            if (logits[i] > logits[best]) best = i;
        EXPECT_EQ(best, 1554);  // "zeros", the reference's greedy token
    }
    int32_t out[4];
    size_t n = 0;
    ASSERT_EQ(akunu_model_generate(m.get(), out, 4, &n), AKUNU_OK) << akunu_last_error();
    EXPECT_EQ(n, 4u);
    EXPECT_EQ(out[0], 1554);
    EXPECT_EQ(out[1], 2019);
    const int32_t bad[] = {999999};
    EXPECT_EQ(akunu_model_eval(m.get(), bad, 1), AKUNU_ERROR);
    EXPECT_NE(std::string(akunu_last_error()).find("out of range"), std::string::npos);
}

TEST_F(CApiTest, ErrorsAreStatuses) {
    akunu_model* m = nullptr;
    EXPECT_EQ(akunu_model_create("/nonexistent/model.gguf", 64, &m), AKUNU_ERROR);
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(std::string(akunu_last_error()).find("does not exist"), std::string::npos);
    EXPECT_EQ(akunu_model_create(nullptr, 64, &m), AKUNU_INVALID_ARGUMENT);
    EXPECT_EQ(akunu_model_eval(nullptr, nullptr, 0), AKUNU_INVALID_ARGUMENT);
}

}  // namespace akunu::test
