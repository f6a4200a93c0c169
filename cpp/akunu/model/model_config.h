// ModelConfig: every hyperparameter the engine uses, in one flat struct.
//
// Filled from GGUF metadata or a Hugging Face config.json (config_load.cpp); keys the engine
// does not use are ignored. Derived fields are computed in derive() and nowhere else.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "akunu/model/arch.h"

namespace akunu {

class ModelFiles;

enum class RopeScaling { kNone, kLinear, kLlama3 };
const char* rope_scaling_name(RopeScaling s);

struct ModelConfig {
    std::string architecture;  // canonical row name in the arch table
    std::string source;  // the file the config was read from, for error messages

    int n_layers = 0;
    int dim = 0;  // hidden size
    int n_heads = 0;
    int n_kv_heads = 0;
    int head_dim = 0;  // 0: dim / n_heads
    int ffn_dim = 0;
    int vocab_size = 0;
    int max_context = 0;  // trained context length
    int n_token_types = 0;  // bert segment embeddings
    float norm_eps = 1e-5f;

    float rope_theta = 10000.0f;
    float rope_theta_local = 0.0f;  // sliding-window layers (gemma3); 0: rope_theta
    RopeScaling rope_scaling = RopeScaling::kNone;
    float rope_factor = 1.0f;
    float rope_low_freq_factor = 1.0f;  // llama3
    float rope_high_freq_factor = 4.0f;  // llama3
    int rope_original_context = 0;  // llama3
    bool rope_freqs_tensor = false;  // GGUF llama3: per-pair divisors in rope_freqs.weight

    bool tied_embeddings = false;
    bool qkv_bias = false;
    int sliding_window = 0;  // tokens; 0: no sliding-window layers
    std::vector<bool> layer_sliding;  // [n_layers]; empty: from the arch's sliding pattern
    float attn_softcap = -1.0f;  // 0: none; negative: not given, the architecture's default
    float final_softcap = -1.0f;  // 0: none; negative: not given, the architecture's default
    float query_pre_attn_scalar = 0.0f;  // 0: head_dim

    // Encoder-decoders (whisper; ArchDescriptor::encoder): the encoder stack and its audio input.
    int encoder_layers = 0;
    int encoder_heads = 0;
    int encoder_ffn_dim = 0;
    int n_mels = 0;  // mel bins of the input spectrogram
    int audio_ctx = 0;  // encoder positions (max_source_positions): input frames / 2

    // Derived by derive()
    int q_dim = 0;  // n_heads * head_dim
    int kv_dim = 0;  // n_kv_heads * head_dim
    int gqa_ratio = 0;  // n_heads / n_kv_heads
    float attn_scale = 0;  // 1 / sqrt(query_pre_attn_scalar or head_dim)
    float embed_scale = 1;  // sqrt(dim) for gemma, else 1
    int n_sliding_layers = 0;

    const ArchDescriptor& arch() const { return find_arch(architecture); }
    bool is_sliding(int layer) const { return !layer_sliding.empty() && layer_sliding[size_t(layer)]; }
};

// The config of an encoder-decoder's encoder stack (the row ArchDescriptor::encoder names):
// its layers, heads and FFN, audio_ctx positions, derived. Throws for a single-stack config.
ModelConfig encoder_stack(const ModelConfig& c);

// Computes the derived fields, fills defaults and checks consistency; throws naming `source`.
void derive(ModelConfig& c);

// Reads the config of an opened model (GGUF metadata, or config.json) and derives it.
ModelConfig load_config(const ModelFiles& files);
// From a parsed Hugging Face config.json; `files`, when given, lets the weights refine it
// (a missing lm_head means tied embeddings).
ModelConfig config_from_json(const nlohmann::json& config, const std::string& source,
                             const ModelFiles* files = nullptr);

// RoPE inverse frequencies [head_dim / 2] for a global or sliding layer: theta^(-2i/d), then
// the config's scaling (linear: / factor; llama3: by wavelength). `divisors`, when given (GGUF
// rope_freqs.weight), replace the llama3 rule: inv_freq[i] / divisors[i].
std::vector<float> rope_inv_freq(const ModelConfig& c, bool sliding_layer, const float* divisors = nullptr);

}  // namespace akunu
