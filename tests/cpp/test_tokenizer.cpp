// Tokenizers from C++: the tiny fixtures' tokenizer.json and GGUF vocabularies reproduce the
// prompt ids recorded by Hugging Face, and decode them back.
#include <gtest/gtest.h>

#include "vk_test.h"

#include "akunu/core/error.h"
#include "akunu/formats/model_files.h"
#include "akunu/tokenizer/tokenizer.h"

namespace akunu::test {

static const std::string kFixtures = fixtures_dir();

TEST(Tokenizer, FixturePromptsFromJsonAndGguf) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    for (const char* model : {"tiny-llama3-random", "tiny-qwen3-random", "tiny-gemma3-random", "trained-code-llama"}) {
        const std::string dir = kFixtures + "/" + model;
        const nlohmann::json manifest = read_json_file(dir + "/manifest.json");
        const nlohmann::json config = read_json_file(dir + "/hf/tokenizer_config.json");
        auto from_json = Tokenizer::from_json(read_json_file(dir + "/hf/tokenizer.json"), &config, model);
        auto files = ModelFiles::open(dir + "/gguf/" + model + "-f16.gguf");
        auto from_gguf = Tokenizer::from_gguf(*files->gguf());
        for (const auto& p : manifest["prompts"]) {
            const std::string text = p["text"].get<std::string>();
            const std::vector<int> want = p["ids"].get<std::vector<int>>();
            EXPECT_EQ(from_json->encode(text), want) << model;
            EXPECT_EQ(from_gguf->encode(text), want) << model;
            EXPECT_EQ(from_gguf->decode(want, true), from_json->decode(want, true)) << model;
        }
        EXPECT_THROW(from_gguf->decode({from_gguf->vocab_size()}), Error);
    }
}

}  // namespace akunu::test
