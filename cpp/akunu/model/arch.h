// ArchDescriptor: what distinguishes one transformer architecture from another, as data.
//
// One row per architecture in arch.cpp, plus an alias map ("mistral" -> "llama",
// "gemma3_text" -> "gemma3"). Code elsewhere reads these fields and never compares
// architecture names; an unknown name is an error that lists the supported ones.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace akunu {

enum class NormKind { kRms, kLayer };
enum class Activation { kSilu, kGeluTanh, kGelu };

// How RoPE pairs a head's dims. HF checkpoints rotate (i, i + head_dim/2) ("half-split", NeoX).
// llama.cpp's converter permutes the rows of llama-arch Q and K weights per head
// (reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2)) so that a GGUF llama rotates adjacent
// pairs (2i, 2i+1) ("interleaved", GPT-J) and its cached K holds head dims in that permuted
// order; other GGUF archs (qwen, gemma) keep HF's row order and half-split RoPE.
enum class RopeStyle { kNone, kInterleaved, kHalfSplit };

// Per-tensor roles; each architecture maps them to GGUF and HF names.
enum class TensorRole {
    kTokenEmbd,
    kPositionEmbd,
    kTokenTypes,
    kEmbdNorm,
    kEmbdNormBias,
    kOutputNorm,
    kOutput,
    kAttnNorm,
    kAttnQ,
    kAttnK,
    kAttnV,
    kAttnQBias,
    kAttnKBias,
    kAttnVBias,
    kAttnOutput,
    kAttnOutputBias,
    kAttnQNorm,
    kAttnKNorm,
    kPostAttnNorm,
    kPostAttnNormBias,
    kFfnNorm,
    kFfnGate,
    kFfnUp,
    kFfnUpBias,
    kFfnDown,
    kFfnDownBias,
    kPostFfnNorm,
    kPostFfnNormBias,
    kRopeFreqs,
    kPositionIds,  // not a weight: HF's position-id buffer (bert), checked to count 0, 1, 2, ...
    // LayerNorm biases of the pre-norms and the final norm (whisper).
    kAttnNormBias,
    kFfnNormBias,
    kOutputNormBias,
    // Cross-attention of an encoder-decoder's decoder layers (whisper): its pre-norm, Q from the
    // decoder rows, K and V from the encoder output, and the output projection.
    kCrossNorm,
    kCrossNormBias,
    kCrossQ,
    kCrossQBias,
    kCrossK,
    kCrossV,
    kCrossVBias,
    kCrossOutput,
    kCrossOutputBias,
    // The convolutional front end of an audio encoder (whisper): two Conv1d of kernel 3,
    // weights [out channels, in channels, 3].
    kConv1,
    kConv1Bias,
    kConv2,
    kConv2Bias,
};
const char* tensor_role_name(TensorRole role);

// A role's names, with "{L}" standing for the layer index; hf == nullptr: none in HF files.
struct TensorName {
    TensorRole role;
    const char* gguf;
    const char* hf;
    bool per_layer;
};

// What akunu assumes for a key a file leaves out. config.json: the defaults of transformers'
// config class; GGUF: llama.cpp's loader where it has a default, else transformers' (llama.cpp
// refuses such a file). tests/python/test_arch_defaults.py holds each value with its source.
struct ArchDefaults {
    float norm_eps = 1e-6f;  // rms_norm_eps / layer_norm_eps (llama.cpp requires the key)
    float rope_theta_hf = 10000.0f;  // config.json rope_theta (GGUF: llama.cpp's 10000 for every arch)
    float rope_theta_local = 0.0f;  // sliding layers, both formats; 0: the global base
    int max_context = 2048;  // max_position_embeddings (llama.cpp requires context_length)
    int head_dim_hf = 0;  // config.json head_dim; 0: hidden_size / heads (GGUF: llama.cpp's dim / heads)
    float query_pre_attn_scalar_hf = 0.0f;  // 0: head_dim
    int sliding_window_gguf = 0;  // gemma2: 4096 (llama.cpp)
    int sliding_window_hf = 0;  // gemma2/3: 4096
    bool hf_window_needs_flag = false;  // qwen2/3: the window slides only with use_sliding_window
    int n_token_types_hf = 0;  // bert: type_vocab_size 2
    // llama.cpp scales the attention of gemma2/3's 27B (known by its layer count) by
    // 1/sqrt(dim / n_heads) rather than 1/sqrt(head_dim), as Google's reference does; 0: never.
    int gguf_27b_layers = 0;
};

struct ArchDescriptor {
    const char* name;  // canonical: "llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "bert"
    NormKind norm;
    bool norm_plus_one;  // gemma: scale is (1 + w); HF stores w, GGUF stores w + 1
    Activation activation;
    bool gated_ffn;  // act(gate) * up, else act(up)
    RopeStyle rope_gguf;
    RopeStyle rope_hf;
    bool qk_norm;  // per-head RMSNorm on Q and K before RoPE (qwen3, gemma3)
    bool post_attn_norm;  // norm on the attention output before the residual (gemma2/3)
    bool post_ffn_norm;  // norm on the FFN output before the residual (gemma2/3)
    bool embed_scale_sqrt_dim;  // embeddings multiplied by sqrt(dim) (gemma)
    bool tied_embeddings;  // default when the file does not say (inferred from a missing output)
    bool qkv_bias;  // Q, K, V projections carry biases (qwen2, bert)
    bool causal;  // false for encoders (bert)
    float default_attn_softcap;  // 0: none (gemma2: 50)
    float default_final_softcap;  // 0: none (gemma2: 30)
    // Sliding-window layers: within each period of layers, the first `sliding_per_period` slide.
    // {1, 1}: every layer slides when the model has a window (mistral); {2, 1}: even layers
    // (gemma2); {6, 5}: five local then one global (gemma3); {0, 0}: never.
    int sliding_period;
    int sliding_per_period;
    const std::vector<TensorName>* names;
    // Post-norm residuals (bert): x = norm(x + f(x)), the post-norms applied after the residual
    // add; false: x = x + post_norm(f(x)) where a post-norm exists (gemma2/3).
    bool norm_after_residual = false;
    ArchDefaults defaults = {};
    // An encoder-decoder (whisper): this row describes the decoder stack, and `encoder` names
    // the row of its encoder stack (nullptr: a single stack). A row that is only such a stack
    // (part_of_model) is not an architecture a config names.
    const char* encoder = nullptr;
    bool part_of_model = false;
    // config.json keys this architecture spells otherwise, as transformers' attribute_map:
    // {akunu's key, the file's key} ("num_hidden_layers" is whisper's "decoder_layers").
    const std::vector<std::pair<const char*, const char*>>* hf_keys = nullptr;
};

// The descriptor for `name` after aliases; throws listing the supported architectures.
const ArchDescriptor& find_arch(const std::string& name);
std::vector<std::string> supported_arch_names();  // canonical names and aliases
const std::vector<ArchDescriptor>& arch_table();

// The role's tensor name for `layer` in GGUF or HF naming; "" when the format has no such tensor.
std::string tensor_name(const ArchDescriptor& arch, TensorRole role, int layer, bool gguf);

}  // namespace akunu
