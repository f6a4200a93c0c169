// Model files from C++: the fixtures open, configs derive, validation passes, and the memory
// plan of LLaMA-3.1-8B matches its buffers counted by hand.
#include <gtest/gtest.h>

#include "vk_test.h"

#include <cmath>

#include "akunu/core/error.h"
#include "akunu/engine/memory_plan.h"
#include "akunu/formats/model_files.h"
#include "akunu/engine/validate.h"
#include "akunu/engine/weights.h"

namespace akunu::test {

static const std::string kFixtures = fixtures_dir();

TEST(ModelFiles, FixturesOpenValidateAndPlan) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    for (const char* model : {"tiny-llama3-random", "tiny-qwen3-random", "tiny-gemma3-random", "trained-code-llama"}) {
        for (const std::string& path :
             {kFixtures + "/" + model + "/hf", kFixtures + "/" + model + "/gguf/" + model + "-q8_0.gguf"}) {
            auto files = ModelFiles::open(path);
            ASSERT_TRUE(files->has_weights()) << path;
            const ModelConfig c = load_config(*files);
            EXPECT_NO_THROW(validate_model(*files, c)) << path;
            PlanOptions o;
            o.context = 256;
            const MemoryPlan p = plan_memory(c, files.get(), o);
            EXPECT_GT(p.weights_bytes, 0u);
            EXPECT_EQ(p.kv_bytes, 2ull * c.n_layers * c.n_kv_heads * 256 * c.head_dim * 2);
        }
    }
}

TEST(ModelFiles, PlanForADeviceRefusesWeightTypesItsKernelsCannotRun) {
    // A stand-in for a readable type without kernels: a matrix the plan would upload as Q2_K.
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    auto files = ModelFiles::open(kFixtures + "/trained-code-llama/gguf/trained-code-llama-q8_0.gguf");
    const DeviceProfile cpu = list_devices().back().profile;
    std::vector<UploadItem> items = plan_weight_uploads(*files, load_config(*files));
    EXPECT_NO_THROW(check_weight_types(items, cpu, files->path()));
    TensorInfo matrix = *items.front().tensor;
    matrix.type = &type_traits(TensorType::Q2_K);
    matrix.shape = {256, 256};
    items.front().tensor = &matrix;
    items.front().device_type = TensorType::Q2_K;
    EXPECT_THROW(check_weight_types(items, cpu, files->path()), Error);
    PlanOptions o;
    o.device = cpu;  // the fixture's own types run there: the plan goes through
    EXPECT_GT(plan_memory(load_config(*files), files.get(), o).weights_bytes, 0u);
}

TEST(ModelFiles, GgufMetadataAndTensorLayout) {
    AKUNU_REQUIRE_FIXTURES(kFixtures);
    auto files = ModelFiles::open(kFixtures + "/tiny-qwen3-random/gguf/tiny-qwen3-random-f16.gguf");
    const GgufFile* g = files->gguf();
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->version(), 3u);
    EXPECT_EQ(g->find("general.architecture")->as_string("general.architecture"), "qwen3");
    EXPECT_EQ(g->find("tokenizer.ggml.tokens")->as_array("tokenizer.ggml.tokens").items.size(), 2048u);
    const TensorInfo* q = files->find("blk.0.attn_q.weight");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->shape, (std::vector<uint64_t>{512, 256}));  // NumPy order: [out, in]
    EXPECT_EQ(std::string(q->type->name), "F16");
    EXPECT_EQ(q->bytes, 512u * 256 * 2);
    EXPECT_EQ(uintptr_t(q->data - g->tensors()[0].data) % g->alignment(), 0u);
}

TEST(ModelFiles, UnknownArchitectureListsTheSupportedOnes) {
    try {
        find_arch("mamba");
        FAIL();
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("unknown architecture 'mamba'"), std::string::npos);
        for (const char* name : {"llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "bert", "mistral"})
            EXPECT_NE(what.find(name), std::string::npos) << name;
    }
}

TEST(MemoryPlan, FiguresForLlama31_8B) {
    ModelConfig c;
    c.architecture = "llama";
    c.source = "llama-3.1-8b";
    c.n_layers = 32;
    c.dim = 4096;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.ffn_dim = 14336;
    c.vocab_size = 128256;
    c.max_context = 131072;
    derive(c);
    PlanOptions o;
    o.context = 4096;
    o.prefill_chunk = 4096;
    const MemoryPlan p = plan_memory(c, nullptr, o);
    EXPECT_EQ(p.kv_bytes, 512ull << 20);
    // Eleven prefill buffers of a 4,096-token chunk in f16 (h0, h1, residual, q, k, v, attn_out,
    // post_norm, ffn_gate, ffn_up, ffn_act: 69,632 halves a row) sum to 570,425,344 bytes; akunu
    // holds them in f32 without post_norm, plus token ids, step state, 64 rows of logits and the
    // workgroup counts of two chunk tables (12 bytes for each of 64 dispatches a layer and 8).
    const uint64_t activations = 2 * (570425344ull - 4096ull * 4096 * 2);
    const uint64_t counts = 2 * (64 * 32 + 8) * 12;
    EXPECT_EQ(p.prefill_scratch_bytes, activations + 64ull * 128256 * 4 + 4096 * 4 + 16 + counts);
}

TEST(Rope, DefaultThetaClosedForm) {
    ModelConfig c;
    c.architecture = "qwen3";
    c.n_layers = 1;
    c.dim = 64;
    c.n_heads = 2;
    c.ffn_dim = 8;
    c.vocab_size = 8;
    c.rope_theta = 1e6f;
    derive(c);
    const auto f = rope_inv_freq(c, false);
    ASSERT_EQ(f.size(), 16u);
    for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(f[size_t(i)], float(std::pow(1e6, -2.0 * i / 32)));
}

}  // namespace akunu::test
