// Encoder: a loaded BERT-family encoder that turns texts (token ids) into embeddings.
//
// An encoder has no KV cache and no sampling: one forward pass over a batch of token rows,
// then pooling. Texts are packed back to back into the batch (no padding): each token row
// carries its position inside its text and its text's row range, attention stays inside that
// range, and pooling reads each text's rows. The forward pass is one dispatch table, built and
// recorded once at load for `batch_tokens` rows; a call writes the ids and row metadata, sets
// n_tokens, and replays it, once per batch that fills up. Nothing is allocated per call.
//
// Layout (ArchDescriptor "bert": LayerNorm with biases, GELU, not causal, post-norm residuals):
//   h = LayerNorm(tok[id] + pos[p] + type[0])
//   per layer: h = LayerNorm(h + O(attn(Q h, K h, V h)) + bo); h = LayerNorm(h + D(gelu(U h + bu)) + bd)
//   out = mean or [CLS] row of each text's h, optionally L2-normalized.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "akunu/vulkan/command_list.h"
#include "akunu/model/model_config.h"
#include "akunu/formats/model_files.h"
#include "akunu/engine/weights.h"

namespace akunu {

struct EncoderOptions {
    std::string device;  // selector, as Device::create
    std::string tuning;  // "key=value,..." over AKUNU_TUNE (core/tuning.h)
    int batch_tokens = 0;  // token rows per submission; 0: max(512, the model's max positions)
    std::function<void(const std::string& stage, size_t done, size_t total)> progress;
};

enum class Pooling { kMean = 0, kCls = 1 };  // the values the pool kernel reads

class Encoder {
public:
    // Throws for a causal (decoder) architecture, naming Model::load as the way to run it.
    static std::unique_ptr<Encoder> load(const std::string& path, const EncoderOptions& options);

    const ModelConfig& config() const { return config_; }
    const ModelFiles& files() const { return *files_; }
    Device& device() const { return *device_; }
    const std::shared_ptr<Device>& device_ptr() const { return device_; }
    const DispatchTable& dispatch_table() const { return *table_; }
    int max_tokens() const { return config_.max_context; }  // the model's position embeddings
    int batch_tokens() const { return rows_; }
    size_t weight_bytes() const { return weight_bytes_; }

    // out[texts.size(), dim] f32: one embedding per text of token ids (special tokens
    // included, as the tokenizer's template adds them). Throws, writing nothing, for an empty
    // text, one longer than max_tokens(), or an id outside the vocabulary.
    void embed(const std::vector<std::vector<int>>& texts, Pooling pooling, bool normalize, float* out);

private:
    Encoder() = default;
    const Weight& weight(TensorRole role, int layer = -1) const;
    void build_table();
    void run_batch(size_t first_text, size_t n_texts, size_t n_rows, Pooling pooling, bool normalize, float* out);

    std::shared_ptr<Device> device_;
    std::shared_ptr<ModelFiles> files_;
    ModelConfig config_;
    std::map<std::pair<TensorRole, int>, Weight> weights_;  // (role, layer; -1: model-level)
    size_t weight_bytes_ = 0;
    int rows_ = 0;  // batch capacity in token rows (and in texts)

    // Per-batch inputs, written by the CPU before each replay.
    Buffer ids_;  // [rows] u32 token ids
    Buffer positions_;  // [rows] u32 position of each row inside its text
    Buffer types_;  // [rows] u32 token type ids, all 0
    Buffer seq_;  // [rows, 2] u32 (start, len) of each row's text
    Buffer texts_;  // [AKUNU_POOL_HEADER + 2 rows] u32 header, then (start, len) per text
    Buffer step_;  // StepState: n_tokens = rows used
    // Activations.
    Buffer h_;  // [rows, dim] f32 the hidden state
    Buffer tmp_;  // [rows, dim] f32 position embeddings
    Buffer qkv_;  // [rows, 3 dim] f32
    Buffer attn_;  // [rows, dim] f32
    Buffer ffn_;  // [rows, ffn_dim] f32
    Buffer pooled_;  // [rows, dim] f32 one embedding per text
    std::vector<uint32_t> staging_;  // [3 rows] seq_ pairs, then positions_ (sized once)

    std::unique_ptr<DispatchTable> table_;
    std::unique_ptr<CommandList> cl_;
};

}  // namespace akunu
