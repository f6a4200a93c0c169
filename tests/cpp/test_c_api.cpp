// The C API: a model loads, evaluates and generates through opaque handles, and every failure
// is a status with a message, never an abort.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "akunu/api/akunu.h"
#include "vk_test.h"

namespace akunu::test {

static const std::string kFixtures = fixtures_dir();
static const std::string kLlamaGguf = kFixtures + "/trained-code-llama/gguf/trained-code-llama-q8_0.gguf";
static const std::string kLlamaHf = kFixtures + "/trained-code-llama/hf";

using CApiTest = VkTest;

TEST_F(CApiTest, LoadEvalGenerate) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    AKUNU_REQUIRE_FIXTURE(kLlamaGguf);
    akunu_model* raw = nullptr;
    const std::string& path = kLlamaGguf;
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

// Whatever sits at the path (nothing, an empty file, bytes that are no model, a directory
// without one), creating a model or an encoder returns a status and a message naming the
// path, and a NULL handle's getters answer without touching it.
TEST_F(CApiTest, MissingAndBrokenFilesAreStatuses) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / "akunu_c_api_broken";
    fs::remove_all(dir);
    fs::create_directories(dir / "empty_dir");
    std::ofstream(dir / "empty.gguf").close();
    std::ofstream(dir / "junk.gguf") << "GGUF but nothing that follows is a header";
    const akunu_model_options o = akunu_model_options_default();
    for (const fs::path& path :
         {dir / "missing.gguf", dir / "empty.gguf", dir / "junk.gguf", dir / "empty_dir", dir / "missing_dir/"}) {
        int poison = 0;  // what the handles hold before: a failed create leaves them NULL
        akunu_model* m = reinterpret_cast<akunu_model*>(&poison);
        EXPECT_EQ(akunu_model_create_with(path.c_str(), &o, &m), AKUNU_ERROR) << path;
        EXPECT_EQ(m, nullptr) << path;
        const std::string error = akunu_last_error();
        EXPECT_NE(error.find(path.filename().empty() ? path.parent_path().string() : path.string()), std::string::npos)
            << path << ": " << error;
        akunu_encoder* e = reinterpret_cast<akunu_encoder*>(&poison);
        EXPECT_EQ(akunu_encoder_create(path.c_str(), &e), AKUNU_ERROR) << path;
        EXPECT_EQ(e, nullptr) << path;
        EXPECT_FALSE(std::string(akunu_last_error()).empty()) << path;
    }
    EXPECT_EQ(akunu_model_logits(nullptr), nullptr);
    EXPECT_EQ(akunu_model_vocab_size(nullptr), 0);
    EXPECT_EQ(akunu_model_kv_length(nullptr), 0);
    EXPECT_EQ(akunu_encoder_dim(nullptr), 0);
    akunu_model_reset(nullptr);
    akunu_model_free(nullptr);
    akunu_encoder_free(nullptr);
    fs::remove_all(dir);
}

namespace {

UniqueModel load_model(const std::string& path, int context = 128) {
    akunu_model* raw = nullptr;
    EXPECT_EQ(akunu_model_create(path.c_str(), context, &raw), AKUNU_OK) << akunu_last_error();
    return UniqueModel(raw);
}

std::vector<int32_t> tokenize(akunu_model* m, const std::string& text) {
    size_t n = 0;
    const akunu_status sizing = akunu_model_tokenize(m, text.data(), text.size(), 1, nullptr, 0, &n);
    EXPECT_EQ(sizing, n ? AKUNU_BUFFER_TOO_SMALL : AKUNU_OK);
    std::vector<int32_t> ids(n);
    EXPECT_EQ(akunu_model_tokenize(m, text.data(), text.size(), 1, ids.data(), n, &n), AKUNU_OK) << akunu_last_error();
    return ids;
}

}  // namespace

TEST_F(CApiTest, TokenizeAndDetokenizeWithTheModelsTokenizer) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    AKUNU_REQUIRE_FIXTURE(kLlamaGguf);
    AKUNU_REQUIRE_FIXTURE(kLlamaHf);
    const std::string text = "import numpy as np\n\n\ndef ";
    for (const std::string& path : {kLlamaGguf, kLlamaHf}) {
        UniqueModel m = load_model(path);
        ASSERT_TRUE(m) << path;
        const std::vector<int32_t> ids = tokenize(m.get(), text);  // with <|begin_of_text|>
        EXPECT_EQ(ids, (std::vector<int32_t>{4092, 873, 1477, 364, 492, 625, 322, 220})) << path;
        size_t n = 0;
        char small[4];
        EXPECT_EQ(akunu_model_detokenize(m.get(), ids.data(), ids.size(), 1, small, sizeof small, &n),
                  AKUNU_BUFFER_TOO_SMALL);
        EXPECT_EQ(n, text.size());
        EXPECT_NE(std::string(akunu_last_error()).find("needs"), std::string::npos);
        std::vector<char> out(n + 1, 'x');
        ASSERT_EQ(akunu_model_detokenize(m.get(), ids.data(), ids.size(), 1, out.data(), out.size(), &n), AKUNU_OK);
        EXPECT_EQ(std::string(out.data()), text);
        const int32_t bad[] = {-1};
        EXPECT_EQ(akunu_model_detokenize(m.get(), bad, 1, 0, out.data(), out.size(), &n), AKUNU_ERROR);
        EXPECT_NE(std::string(akunu_last_error()).find("out of range"), std::string::npos);
        EXPECT_EQ(akunu_model_tokenize(m.get(), "\xff", 1, 0, nullptr, 0, &n), AKUNU_ERROR);  // invalid UTF-8
    }
}

TEST_F(CApiTest, GenerateStopsAtTheStopIds) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    AKUNU_REQUIRE_FIXTURE(kLlamaHf);
    UniqueModel m = load_model(kLlamaHf);
    ASSERT_TRUE(m);
    size_t n = 0;
    EXPECT_EQ(akunu_model_stop_ids(m.get(), nullptr, 0, &n), AKUNU_BUFFER_TOO_SMALL);
    int32_t stops[4];
    ASSERT_EQ(akunu_model_stop_ids(m.get(), stops, 4, &n), AKUNU_OK);
    ASSERT_EQ(n, 1u);  // the tokenizer's <|end_of_text|>: HF models used to never stop
    EXPECT_EQ(stops[0], 4093);
    const std::vector<int32_t> prompt = tokenize(m.get(), "import numpy as np\n\n\ndef ");
    ASSERT_EQ(akunu_model_eval(m.get(), prompt.data(), prompt.size()), AKUNU_OK);
    int32_t out[8];
    ASSERT_EQ(akunu_model_generate(m.get(), out, 8, &n), AKUNU_OK);
    ASSERT_EQ(n, 8u);
    const int32_t stop[] = {out[2]};  // stop at the third greedy token, which is returned
    ASSERT_EQ(akunu_model_set_stop_ids(m.get(), stop, 1), AKUNU_OK);
    akunu_model_reset(m.get());
    ASSERT_EQ(akunu_model_eval(m.get(), prompt.data(), prompt.size()), AKUNU_OK);
    int32_t again[8];
    ASSERT_EQ(akunu_model_generate(m.get(), again, 8, &n), AKUNU_OK);
    EXPECT_EQ(n, 3u);
    EXPECT_EQ(again[2], out[2]);
    const int32_t outside[] = {1 << 30};
    EXPECT_EQ(akunu_model_set_stop_ids(m.get(), outside, 1), AKUNU_INVALID_ARGUMENT);
}

TEST_F(CApiTest, SeededSamplingRepeatsAndSettingsAreChecked) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    AKUNU_REQUIRE_FIXTURE(kLlamaGguf);
    UniqueModel m = load_model(kLlamaGguf);
    ASSERT_TRUE(m);
    ASSERT_EQ(akunu_model_set_stop_ids(m.get(), nullptr, 0), AKUNU_OK);  // never stop early
    akunu_sampling s = akunu_sampling_greedy();
    s.temperature = 1.5f;
    s.top_k = 50;
    s.seed = 7;
    auto run = [&](akunu_sampling settings) {
        EXPECT_EQ(akunu_model_set_sampling(m.get(), &settings), AKUNU_OK) << akunu_last_error();
        akunu_model_reset(m.get());
        const int32_t ids[] = {4092, 873, 1477, 364};
        EXPECT_EQ(akunu_model_eval(m.get(), ids, 4), AKUNU_OK);
        std::vector<int32_t> out(16);
        size_t n = 0;
        EXPECT_EQ(akunu_model_generate(m.get(), out.data(), out.size(), &n), AKUNU_OK);
        out.resize(n);
        return out;
    };
    const std::vector<int32_t> a = run(s), b = run(s);
    EXPECT_EQ(a, b);
    s.seed = 8;
    EXPECT_NE(run(s), a);  // 16 draws at temperature 1.5 over 50 candidates
    EXPECT_EQ(run(akunu_sampling_greedy()).front(), 492);  // "as", the prompt's own next token
    akunu_sampling bad = akunu_sampling_greedy();
    bad.top_p = 0.0f;
    EXPECT_EQ(akunu_model_set_sampling(m.get(), &bad), AKUNU_ERROR);
    EXPECT_NE(std::string(akunu_last_error()).find("top_p"), std::string::npos);
    bad = akunu_sampling_greedy();
    bad.top_k = -1;
    EXPECT_EQ(akunu_model_set_sampling(m.get(), &bad), AKUNU_INVALID_ARGUMENT);
}

TEST_F(CApiTest, MemoryUsage) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    AKUNU_REQUIRE_FIXTURE(kLlamaGguf);
    UniqueModel m = load_model(kLlamaGguf);
    ASSERT_TRUE(m);
    akunu_memory mem{};
    ASSERT_EQ(akunu_model_memory(m.get(), &mem), AKUNU_OK);
    const uint64_t file = std::filesystem::file_size(kLlamaGguf);
    EXPECT_GT(mem.weights, file / 2);  // q8_0 matrices as in the file, small tensors as f32
    EXPECT_LT(mem.weights, file * 3);
    EXPECT_GT(mem.kv_cache, 0u);
    EXPECT_GT(mem.scratch, 0u);
    EXPECT_EQ(mem.total, mem.weights + mem.kv_cache + mem.scratch);
    EXPECT_EQ(akunu_model_memory(m.get(), nullptr), AKUNU_INVALID_ARGUMENT);
}

// Options: a split by layers over two CPU-backend devices gives the single device's logits and
// greedy tokens bit for bit (as the Python split tests check for every fixture), a KV format
// and tuning pass through, and bad options fail with statuses and messages.
TEST_F(CApiTest, CreateWithOptionsSplitsAcrossDevices) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    AKUNU_REQUIRE_FIXTURE(kLlamaGguf);
    const std::string& path = kLlamaGguf;
    const int32_t ids[] = {4092, 873, 1477, 364, 492, 625, 322, 220};
    auto run = [&](const akunu_model_options& o, std::vector<float>& logits, std::vector<int32_t>& out) {
        akunu_model* raw = nullptr;
        ASSERT_EQ(akunu_model_create_with(path.c_str(), &o, &raw), AKUNU_OK) << akunu_last_error();
        UniqueModel m(raw);
        ASSERT_EQ(akunu_model_eval(m.get(), ids, 8), AKUNU_OK) << akunu_last_error();
        const float* l = akunu_model_logits(m.get());
        ASSERT_NE(l, nullptr);
        logits.assign(l, l + akunu_model_vocab_size(m.get()));
        out.resize(6);
        size_t n = 0;
        ASSERT_EQ(akunu_model_generate(m.get(), out.data(), out.size(), &n), AKUNU_OK) << akunu_last_error();
        out.resize(n);
    };
    akunu_model_options one = akunu_model_options_default();
    EXPECT_EQ(one.context, 4096);
    one.context = 64;
    one.device = "cpu";
    akunu_model_options two = one;
    const char* const devices[] = {"cpu", "cpu"};
    const double split[] = {4, 2};
    two.device = nullptr;
    two.devices = devices;
    two.n_devices = 2;
    two.split = split;
    two.n_split = 2;
    std::vector<float> want, got;
    std::vector<int32_t> want_ids, got_ids;
    ASSERT_NO_FATAL_FAILURE(run(one, want, want_ids));
    ASSERT_NO_FATAL_FAILURE(run(two, got, got_ids));
    EXPECT_EQ(want, got);
    EXPECT_EQ(want_ids, got_ids);
    ASSERT_EQ(want_ids.size(), 6u);

    akunu_model_options q8 = one;
    q8.kv_dtype = "q8";
    q8.tuning = "float_x=1";
    ASSERT_NO_FATAL_FAILURE(run(q8, got, got_ids));
    ASSERT_FALSE(got_ids.empty());
    EXPECT_EQ(got_ids.front(), want_ids.front());
    // A recent window (kv_format.h KvFormat): each part keeps its layers' rings.
    akunu_model_options window_one = one, window_two = two;
    window_one.kv_dtype = window_two.kv_dtype = "int4h+w4";
    ASSERT_NO_FATAL_FAILURE(run(window_one, want, want_ids));
    ASSERT_NO_FATAL_FAILURE(run(window_two, got, got_ids));
    EXPECT_EQ(want, got);
    EXPECT_EQ(want_ids, got_ids);

    akunu_model* m = nullptr;
    auto fails = [&](const akunu_model_options& o, akunu_status status, const char* message) {
        EXPECT_EQ(akunu_model_create_with(path.c_str(), &o, &m), status);
        EXPECT_EQ(m, nullptr);
        EXPECT_NE(std::string(akunu_last_error()).find(message), std::string::npos) << akunu_last_error();
    };
    akunu_model_options bad = two;
    bad.device = "cpu";
    fails(bad, AKUNU_ERROR, "not both");
    bad = two;
    bad.n_split = 1;
    fails(bad, AKUNU_ERROR, "split has 1 entries for 2 devices");
    bad = two;
    bad.devices = nullptr;
    fails(bad, AKUNU_INVALID_ARGUMENT, "devices (split) is NULL");
    const char* const holes[] = {"cpu", nullptr};
    bad.devices = holes;
    fails(bad, AKUNU_INVALID_ARGUMENT, "devices[1] is NULL");
    bad = one;
    bad.kv_dtype = "int3";
    fails(bad, AKUNU_ERROR, "int3");
    bad.kv_dtype = "f16+w4";
    fails(bad, AKUNU_ERROR, "an f16 cache has none");
    bad = one;
    bad.tuning = "warp_speed=1";
    fails(bad, AKUNU_ERROR, "warp_speed");
    EXPECT_EQ(akunu_model_create_with(path.c_str(), nullptr, &m), AKUNU_INVALID_ARGUMENT);
}

namespace {

// A tiny random BERT as an HF directory: safetensors (f32), config.json and a WordPiece
// tokenizer.json, enough to drive the encoder through the C API.
std::string write_tiny_bert(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir);
    const int d = 16, ffn = 32, pos = 32;
    const std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "a", "b"};
    const int v = int(vocab.size());
    std::vector<std::pair<std::string, std::vector<int>>> shapes = {{"embeddings.word_embeddings.weight", {v, d}},
                                                                    {"embeddings.position_embeddings.weight", {pos, d}},
                                                                    {"embeddings.token_type_embeddings.weight", {2, d}},
                                                                    {"embeddings.LayerNorm.weight", {d}},
                                                                    {"embeddings.LayerNorm.bias", {d}}};
    const std::string l = "encoder.layer.0.";
    for (const char* n :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
        shapes.push_back({l + n + ".weight", {d, d}});
        shapes.push_back({l + n + ".bias", {d}});
    }
    shapes.push_back({l + "intermediate.dense.weight", {ffn, d}});
    shapes.push_back({l + "intermediate.dense.bias", {ffn}});
    shapes.push_back({l + "output.dense.weight", {d, ffn}});
    shapes.push_back({l + "output.dense.bias", {d}});
    for (const std::string n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
        shapes.push_back({l + n + ".weight", {d}});
        shapes.push_back({l + n + ".bias", {d}});
    }
    std::string header = "{";
    std::vector<float> data;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    for (const auto& [name, shape] : shapes) {
        size_t n = 1;
        std::string dims;
        for (int x : shape) n *= size_t(x), dims += (dims.empty() ? "" : ",") + std::to_string(x);
        header += (header.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"F32\",\"shape\":[" +
                  dims + "],\"data_offsets\":[" + std::to_string(data.size() * 4) + "," +
                  std::to_string((data.size() + n) * 4) + "]}";
        for (size_t i = 0; i < n; ++i) data.push_back(normal(rng));
    }
    header += "}";
    std::ofstream st(dir / "model.safetensors", std::ios::binary);
    const uint64_t hn = header.size();
    st.write(reinterpret_cast<const char*>(&hn), 8).write(header.data(), std::streamsize(hn));
    st.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * 4));
    std::ofstream(dir / "config.json")
        << "{\"model_type\":\"bert\",\"hidden_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
           "\"intermediate_size\":32,\"max_position_embeddings\":32,\"vocab_size\":8,\"type_vocab_size\":2,"
           "\"layer_norm_eps\":1e-12,\"hidden_act\":\"gelu\"}";
    std::string words;
    for (int i = 0; i < v; ++i)
        words += (i ? "," : "") + std::string("\"") + vocab[size_t(i)] + "\":" + std::to_string(i);
    std::ofstream(dir / "tokenizer.json")
        << "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true},"
           "{\"id\":1,\"content\":\"[UNK]\",\"special\":true},{\"id\":2,\"content\":\"[CLS]\",\"special\":true},"
           "{\"id\":3,\"content\":\"[SEP]\",\"special\":true}],"
           "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
           "\"strip_accents\":null,\"lowercase\":true},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
           "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]},"
           "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
           "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\","
           "\"max_input_chars_per_word\":100,\"vocab\":{"
        << words << "}}}";
    return dir.string();
}

}  // namespace

TEST_F(CApiTest, EncoderEmbedsTexts) {
    const std::string dir = write_tiny_bert(std::filesystem::temp_directory_path() / "akunu_c_api_bert");
    akunu_encoder* raw = nullptr;
    ASSERT_EQ(akunu_encoder_create(dir.c_str(), &raw), AKUNU_OK) << akunu_last_error();
    UniqueEncoder e(raw);
    ASSERT_EQ(akunu_encoder_dim(e.get()), 16);
    const char* texts[] = {"hello world", "a b a", "Hello  WORLD"};
    std::vector<float> out(3 * 16, NAN);
    ASSERT_EQ(akunu_encoder_embed(e.get(), texts, 3, 0, 1, out.data()), AKUNU_OK) << akunu_last_error();
    float norm = 0.0f, diff = 0.0f, other = 0.0f;
    for (int i = 0; i < 16; ++i) {
        norm += out[size_t(i)] * out[size_t(i)];
        diff = std::max(diff, std::fabs(out[size_t(i)] - out[size_t(32 + i)]));  // lowercased: the same ids
        other = std::max(other, std::fabs(out[size_t(i)] - out[size_t(16 + i)]));
    }
    EXPECT_NEAR(norm, 1.0f, 1e-4f);
    EXPECT_LT(diff, 1e-6f);
    EXPECT_GT(other, 1e-3f);
    std::vector<float> cls(16);
    ASSERT_EQ(akunu_encoder_embed(e.get(), texts, 1, 1, 0, cls.data()), AKUNU_OK);
    EXPECT_NE(cls[0], out[0]);
    std::string long_text;
    for (int i = 0; i < 40; ++i) long_text += "a ";
    const char* too_long[] = {long_text.c_str()};
    EXPECT_EQ(akunu_encoder_embed(e.get(), too_long, 1, 0, 1, cls.data()), AKUNU_ERROR);
    EXPECT_NE(std::string(akunu_last_error()).find("at most 32"), std::string::npos) << akunu_last_error();
    EXPECT_EQ(akunu_encoder_embed(e.get(), texts, 1, 2, 1, cls.data()), AKUNU_INVALID_ARGUMENT);
    const char* null_text[] = {nullptr};
    EXPECT_EQ(akunu_encoder_embed(e.get(), null_text, 1, 0, 1, cls.data()), AKUNU_INVALID_ARGUMENT);
    akunu_model* model = nullptr;  // a decoder handle refuses an encoder's files
    EXPECT_EQ(akunu_model_create(dir.c_str(), 32, &model), AKUNU_ERROR);
    EXPECT_EQ(model, nullptr);
    std::filesystem::remove_all(dir);
}

}  // namespace akunu::test
