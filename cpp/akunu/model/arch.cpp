// The architecture table. Each row is data; the name tables give each role its GGUF name
// (llama.cpp's converter) and its Hugging Face name (transformers' modules).
#include "akunu/model/arch.h"

#include "akunu/core/error.h"

namespace akunu {

namespace {

using R = TensorRole;

// Llama-family decoders: llama, mistral, qwen2, qwen3. HF's "post_attention_layernorm" is the
// pre-FFN norm here (GGUF ffn_norm).
const std::vector<TensorName> kLlamaNames = {
    {R::kTokenEmbd, "token_embd.weight", "model.embed_tokens.weight", false},
    {R::kOutputNorm, "output_norm.weight", "model.norm.weight", false},
    {R::kOutput, "output.weight", "lm_head.weight", false},
    {R::kRopeFreqs, "rope_freqs.weight", nullptr, false},
    {R::kAttnNorm, "blk.{L}.attn_norm.weight", "model.layers.{L}.input_layernorm.weight", true},
    {R::kAttnQ, "blk.{L}.attn_q.weight", "model.layers.{L}.self_attn.q_proj.weight", true},
    {R::kAttnK, "blk.{L}.attn_k.weight", "model.layers.{L}.self_attn.k_proj.weight", true},
    {R::kAttnV, "blk.{L}.attn_v.weight", "model.layers.{L}.self_attn.v_proj.weight", true},
    {R::kAttnQBias, "blk.{L}.attn_q.bias", "model.layers.{L}.self_attn.q_proj.bias", true},
    {R::kAttnKBias, "blk.{L}.attn_k.bias", "model.layers.{L}.self_attn.k_proj.bias", true},
    {R::kAttnVBias, "blk.{L}.attn_v.bias", "model.layers.{L}.self_attn.v_proj.bias", true},
    {R::kAttnOutput, "blk.{L}.attn_output.weight", "model.layers.{L}.self_attn.o_proj.weight", true},
    {R::kAttnQNorm, "blk.{L}.attn_q_norm.weight", "model.layers.{L}.self_attn.q_norm.weight", true},
    {R::kAttnKNorm, "blk.{L}.attn_k_norm.weight", "model.layers.{L}.self_attn.k_norm.weight", true},
    {R::kFfnNorm, "blk.{L}.ffn_norm.weight", "model.layers.{L}.post_attention_layernorm.weight", true},
    {R::kFfnGate, "blk.{L}.ffn_gate.weight", "model.layers.{L}.mlp.gate_proj.weight", true},
    {R::kFfnUp, "blk.{L}.ffn_up.weight", "model.layers.{L}.mlp.up_proj.weight", true},
    {R::kFfnDown, "blk.{L}.ffn_down.weight", "model.layers.{L}.mlp.down_proj.weight", true},
};

// Gemma 1/2/3: HF's "post_attention_layernorm" is a real post-attention norm, and the pre-FFN
// norm is "pre_feedforward_layernorm" (gemma2/3; gemma 1 names it post_attention_layernorm).
const std::vector<TensorName> kGemmaNames = {
    {R::kTokenEmbd, "token_embd.weight", "model.embed_tokens.weight", false},
    {R::kOutputNorm, "output_norm.weight", "model.norm.weight", false},
    {R::kOutput, "output.weight", "lm_head.weight", false},
    {R::kAttnNorm, "blk.{L}.attn_norm.weight", "model.layers.{L}.input_layernorm.weight", true},
    {R::kAttnQ, "blk.{L}.attn_q.weight", "model.layers.{L}.self_attn.q_proj.weight", true},
    {R::kAttnK, "blk.{L}.attn_k.weight", "model.layers.{L}.self_attn.k_proj.weight", true},
    {R::kAttnV, "blk.{L}.attn_v.weight", "model.layers.{L}.self_attn.v_proj.weight", true},
    {R::kAttnOutput, "blk.{L}.attn_output.weight", "model.layers.{L}.self_attn.o_proj.weight", true},
    {R::kAttnQNorm, "blk.{L}.attn_q_norm.weight", "model.layers.{L}.self_attn.q_norm.weight", true},
    {R::kAttnKNorm, "blk.{L}.attn_k_norm.weight", "model.layers.{L}.self_attn.k_norm.weight", true},
    {R::kPostAttnNorm, "blk.{L}.post_attention_norm.weight", "model.layers.{L}.post_attention_layernorm.weight", true},
    {R::kFfnNorm, "blk.{L}.ffn_norm.weight", "model.layers.{L}.pre_feedforward_layernorm.weight", true},
    {R::kFfnGate, "blk.{L}.ffn_gate.weight", "model.layers.{L}.mlp.gate_proj.weight", true},
    {R::kFfnUp, "blk.{L}.ffn_up.weight", "model.layers.{L}.mlp.up_proj.weight", true},
    {R::kFfnDown, "blk.{L}.ffn_down.weight", "model.layers.{L}.mlp.down_proj.weight", true},
    {R::kPostFfnNorm, "blk.{L}.post_ffw_norm.weight", "model.layers.{L}.post_feedforward_layernorm.weight", true},
};

// Gemma 1 has no post norms, so its pre-FFN norm keeps the llama name in HF files.
const std::vector<TensorName> kGemma1Names = [] {
    std::vector<TensorName> names;
    for (TensorName n : kGemmaNames) {
        if (n.role == R::kPostAttnNorm || n.role == R::kPostFfnNorm || n.role == R::kAttnQNorm ||
            n.role == R::kAttnKNorm)
            continue;
        if (n.role == R::kFfnNorm) n.hf = "model.layers.{L}.post_attention_layernorm.weight";
        names.push_back(n);
    }
    return names;
}();

// BERT encoders (post-norm, LayerNorm with biases, learned positions, GELU).
const std::vector<TensorName> kBertNames = {
    {R::kTokenEmbd, "token_embd.weight", "embeddings.word_embeddings.weight", false},
    {R::kPositionEmbd, "position_embd.weight", "embeddings.position_embeddings.weight", false},
    {R::kPositionIds, nullptr, "embeddings.position_ids", false},
    {R::kTokenTypes, "token_types.weight", "embeddings.token_type_embeddings.weight", false},
    {R::kEmbdNorm, "token_embd_norm.weight", "embeddings.LayerNorm.weight", false},
    {R::kEmbdNormBias, "token_embd_norm.bias", "embeddings.LayerNorm.bias", false},
    {R::kAttnQ, "blk.{L}.attn_q.weight", "encoder.layer.{L}.attention.self.query.weight", true},
    {R::kAttnQBias, "blk.{L}.attn_q.bias", "encoder.layer.{L}.attention.self.query.bias", true},
    {R::kAttnK, "blk.{L}.attn_k.weight", "encoder.layer.{L}.attention.self.key.weight", true},
    {R::kAttnKBias, "blk.{L}.attn_k.bias", "encoder.layer.{L}.attention.self.key.bias", true},
    {R::kAttnV, "blk.{L}.attn_v.weight", "encoder.layer.{L}.attention.self.value.weight", true},
    {R::kAttnVBias, "blk.{L}.attn_v.bias", "encoder.layer.{L}.attention.self.value.bias", true},
    {R::kAttnOutput, "blk.{L}.attn_output.weight", "encoder.layer.{L}.attention.output.dense.weight", true},
    {R::kAttnOutputBias, "blk.{L}.attn_output.bias", "encoder.layer.{L}.attention.output.dense.bias", true},
    {R::kPostAttnNorm, "blk.{L}.attn_output_norm.weight", "encoder.layer.{L}.attention.output.LayerNorm.weight", true},
    {R::kPostAttnNormBias, "blk.{L}.attn_output_norm.bias", "encoder.layer.{L}.attention.output.LayerNorm.bias", true},
    {R::kFfnUp, "blk.{L}.ffn_up.weight", "encoder.layer.{L}.intermediate.dense.weight", true},
    {R::kFfnUpBias, "blk.{L}.ffn_up.bias", "encoder.layer.{L}.intermediate.dense.bias", true},
    {R::kFfnDown, "blk.{L}.ffn_down.weight", "encoder.layer.{L}.output.dense.weight", true},
    {R::kFfnDownBias, "blk.{L}.ffn_down.bias", "encoder.layer.{L}.output.dense.bias", true},
    {R::kPostFfnNorm, "blk.{L}.layer_output_norm.weight", "encoder.layer.{L}.output.LayerNorm.weight", true},
    {R::kPostFfnNormBias, "blk.{L}.layer_output_norm.bias", "encoder.layer.{L}.output.LayerNorm.bias", true},
};

// Whisper (transformers' WhisperForConditionalGeneration): pre-norm LayerNorm blocks with
// biases (K has none), GELU, learned positions. The decoder stack, with cross-attention and a
// head tied to its embedding, is the "whisper" row; the encoder stack, behind two Conv1d, is
// "whisper_encoder". No GGUF names: whisper.cpp's files present HF names (ModelFiles).
// One block of a stack ("encoder" or "decoder"): its layers, positions and final norm.
#define WHISPER_STACK(stack)                                                                       \
    {R::kAttnNorm, nullptr, "model." stack ".layers.{L}.self_attn_layer_norm.weight", true},       \
        {R::kAttnNormBias, nullptr, "model." stack ".layers.{L}.self_attn_layer_norm.bias", true}, \
        {R::kAttnQ, nullptr, "model." stack ".layers.{L}.self_attn.q_proj.weight", true},          \
        {R::kAttnQBias, nullptr, "model." stack ".layers.{L}.self_attn.q_proj.bias", true},        \
        {R::kAttnK, nullptr, "model." stack ".layers.{L}.self_attn.k_proj.weight", true},          \
        {R::kAttnKBias, nullptr, "model." stack ".layers.{L}.self_attn.k_proj.bias", true},        \
        {R::kAttnV, nullptr, "model." stack ".layers.{L}.self_attn.v_proj.weight", true},          \
        {R::kAttnVBias, nullptr, "model." stack ".layers.{L}.self_attn.v_proj.bias", true},        \
        {R::kAttnOutput, nullptr, "model." stack ".layers.{L}.self_attn.out_proj.weight", true},   \
        {R::kAttnOutputBias, nullptr, "model." stack ".layers.{L}.self_attn.out_proj.bias", true}, \
        {R::kFfnNorm, nullptr, "model." stack ".layers.{L}.final_layer_norm.weight", true},        \
        {R::kFfnNormBias, nullptr, "model." stack ".layers.{L}.final_layer_norm.bias", true},      \
        {R::kFfnUp, nullptr, "model." stack ".layers.{L}.fc1.weight", true},                       \
        {R::kFfnUpBias, nullptr, "model." stack ".layers.{L}.fc1.bias", true},                     \
        {R::kFfnDown, nullptr, "model." stack ".layers.{L}.fc2.weight", true},                     \
        {R::kFfnDownBias, nullptr, "model." stack ".layers.{L}.fc2.bias", true},                   \
        {R::kPositionEmbd, nullptr, "model." stack ".embed_positions.weight", false},              \
        {R::kOutputNorm, nullptr, "model." stack ".layer_norm.weight", false},                     \
        {R::kOutputNormBias, nullptr, "model." stack ".layer_norm.bias", false},

const std::vector<TensorName> kWhisperDecoderNames = {
    {R::kTokenEmbd, nullptr, "model.decoder.embed_tokens.weight", false},
    {R::kOutput, nullptr, "proj_out.weight", false},
    {R::kCrossNorm, nullptr, "model.decoder.layers.{L}.encoder_attn_layer_norm.weight", true},
    {R::kCrossNormBias, nullptr, "model.decoder.layers.{L}.encoder_attn_layer_norm.bias", true},
    {R::kCrossQ, nullptr, "model.decoder.layers.{L}.encoder_attn.q_proj.weight", true},
    {R::kCrossQBias, nullptr, "model.decoder.layers.{L}.encoder_attn.q_proj.bias", true},
    {R::kCrossK, nullptr, "model.decoder.layers.{L}.encoder_attn.k_proj.weight", true},
    {R::kCrossV, nullptr, "model.decoder.layers.{L}.encoder_attn.v_proj.weight", true},
    {R::kCrossVBias, nullptr, "model.decoder.layers.{L}.encoder_attn.v_proj.bias", true},
    {R::kCrossOutput, nullptr, "model.decoder.layers.{L}.encoder_attn.out_proj.weight", true},
    {R::kCrossOutputBias, nullptr, "model.decoder.layers.{L}.encoder_attn.out_proj.bias", true},
    WHISPER_STACK("decoder")};

const std::vector<TensorName> kWhisperEncoderNames = {{R::kConv1, nullptr, "model.encoder.conv1.weight", false},
                                                      {R::kConv1Bias, nullptr, "model.encoder.conv1.bias", false},
                                                      {R::kConv2, nullptr, "model.encoder.conv2.weight", false},
                                                      {R::kConv2Bias, nullptr, "model.encoder.conv2.bias", false},
                                                      WHISPER_STACK("encoder")};
#undef WHISPER_STACK

// The decoder stack's sizes under WhisperConfig's names.
const std::vector<std::pair<const char*, const char*>> kWhisperKeys = {
    {"num_hidden_layers", "decoder_layers"},
    {"hidden_size", "d_model"},
    {"num_attention_heads", "decoder_attention_heads"},
    {"intermediate_size", "decoder_ffn_dim"},
    {"max_position_embeddings", "max_target_positions"},
};

using N = NormKind;
using A = Activation;
using S = RopeStyle;

// Defaults per family (ArchDefaults): transformers' config classes and llama.cpp's loader.
constexpr ArchDefaults kLlamaDefaults = {.max_context = 2048};
constexpr ArchDefaults kQwenDefaults = {.max_context = 32768, .hf_window_needs_flag = true};
constexpr ArchDefaults kQwen3Defaults = {.max_context = 32768, .head_dim_hf = 128, .hf_window_needs_flag = true};
constexpr ArchDefaults kGemmaDefaults = {.max_context = 8192, .head_dim_hf = 256};
constexpr ArchDefaults kGemma2Defaults = {.max_context = 8192,
                                          .head_dim_hf = 256,
                                          .query_pre_attn_scalar_hf = 256,
                                          .sliding_window_gguf = 4096,
                                          .sliding_window_hf = 4096,
                                          .gguf_27b_layers = 46};
constexpr ArchDefaults kGemma3Defaults = {.rope_theta_hf = 1000000.0f,
                                          .rope_theta_local = 10000.0f,
                                          .max_context = 131072,
                                          .head_dim_hf = 256,
                                          .query_pre_attn_scalar_hf = 256,
                                          .sliding_window_hf = 4096,
                                          .gguf_27b_layers = 62};
constexpr ArchDefaults kWhisperDefaults = {.norm_eps = 1e-5f, .max_context = 448};
constexpr ArchDefaults kBertDefaults = {.norm_eps = 1e-12f, .max_context = 512, .n_token_types_hf = 2};

// One row per line, aligned under the header: the table reads as data, which clang-format's
// bin packing would scatter over a column per field.
// clang-format off
//  name      norm      +1     act           gated  rope_gguf        rope_hf        qknorm postA  postF  sqrtd  tied   qkvb   causal acap fcap period per names          norm_after_residual defaults
const std::vector<ArchDescriptor> kArchs = {
    {"llama",  N::kRms,   false, A::kSilu,     true,  S::kInterleaved, S::kHalfSplit, false, false, false, false, false, false, true,  0,   0,   1,     1,  &kLlamaNames,  false, kLlamaDefaults},
    {"qwen2",  N::kRms,   false, A::kSilu,     true,  S::kHalfSplit,   S::kHalfSplit, false, false, false, false, false, true,  true,  0,   0,   1,     1,  &kLlamaNames,  false, kQwenDefaults},
    {"qwen3",  N::kRms,   false, A::kSilu,     true,  S::kHalfSplit,   S::kHalfSplit, true,  false, false, false, false, false, true,  0,   0,   1,     1,  &kLlamaNames,  false, kQwen3Defaults},
    {"gemma",  N::kRms,   true,  A::kGeluTanh, true,  S::kHalfSplit,   S::kHalfSplit, false, false, false, true,  true,  false, true,  0,   0,   0,     0,  &kGemma1Names, false, kGemmaDefaults},
    {"gemma2", N::kRms,   true,  A::kGeluTanh, true,  S::kHalfSplit,   S::kHalfSplit, false, true,  true,  true,  true,  false, true,  50,  30,  2,     1,  &kGemmaNames,  false, kGemma2Defaults},
    {"gemma3", N::kRms,   true,  A::kGeluTanh, true,  S::kHalfSplit,   S::kHalfSplit, true,  true,  true,  true,  true,  false, true,  0,   0,   6,     5,  &kGemmaNames,  false, kGemma3Defaults},
    {"bert",   N::kLayer, false, A::kGelu,     false, S::kNone,        S::kNone,      false, true,  true,  false, true,  true,  false, 0,   0,   0,     0,  &kBertNames,   true,  kBertDefaults},
    {"whisper", N::kLayer, false, A::kGelu,     false, S::kNone,        S::kNone,      false, false, false, false, true,  true,  true,  0,   0,   0,     0,  &kWhisperDecoderNames, false, kWhisperDefaults, "whisper_encoder", false, &kWhisperKeys},
    {"whisper_encoder", N::kLayer, false, A::kGelu, false, S::kNone,    S::kNone,      false, false, false, false, false, true,  false, 0,   0,   0,     0,  &kWhisperEncoderNames, false, kWhisperDefaults, nullptr, true},
};
// clang-format on

// Other names for rows above, as HF config.json "model_type" or GGUF general.architecture.
const struct {
    const char* alias;
    const char* name;
} kAliases[] = {
    {"mistral", "llama"},
    {"gemma3_text", "gemma3"},
};

}  // namespace

const char* tensor_role_name(TensorRole role) {
    static const char* kNames[] = {
        "token_embd",
        "position_embd",
        "token_types",
        "embd_norm",
        "embd_norm_bias",
        "output_norm",
        "output",
        "attn_norm",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_q_bias",
        "attn_k_bias",
        "attn_v_bias",
        "attn_output",
        "attn_output_bias",
        "attn_q_norm",
        "attn_k_norm",
        "post_attn_norm",
        "post_attn_norm_bias",
        "ffn_norm",
        "ffn_gate",
        "ffn_up",
        "ffn_up_bias",
        "ffn_down",
        "ffn_down_bias",
        "post_ffn_norm",
        "post_ffn_norm_bias",
        "rope_freqs",
        "position_ids",
        "attn_norm_bias",
        "ffn_norm_bias",
        "output_norm_bias",
        "cross_norm",
        "cross_norm_bias",
        "cross_q",
        "cross_q_bias",
        "cross_k",
        "cross_v",
        "cross_v_bias",
        "cross_output",
        "cross_output_bias",
        "conv1",
        "conv1_bias",
        "conv2",
        "conv2_bias",
    };
    static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(TensorRole::kConv2Bias) + 1, "a name per role");
    return kNames[int(role)];
}

const std::vector<ArchDescriptor>& arch_table() { return kArchs; }

std::vector<std::string> supported_arch_names() {
    std::vector<std::string> names;
    for (const auto& a : kArchs)
        if (!a.part_of_model) names.emplace_back(a.name);
    for (const auto& a : kAliases) names.emplace_back(a.alias);
    return names;
}

const ArchDescriptor& find_arch(const std::string& name_in) {
    std::string name = name_in;
    for (const auto& a : kAliases)
        if (name == a.alias) name = a.name;
    for (const auto& a : kArchs)
        if (name == a.name) return a;
    std::string known;
    for (const auto& n : supported_arch_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("unknown architecture '" + name_in + "'; akunu supports: " + known);
}

std::string tensor_name(const ArchDescriptor& arch, TensorRole role, int layer, bool gguf) {
    for (const auto& n : *arch.names) {
        if (n.role != role) continue;
        const char* templ = gguf ? n.gguf : n.hf;
        if (!templ) return "";
        std::string s = templ;
        const size_t at = s.find("{L}");
        if (at != std::string::npos) s.replace(at, 3, std::to_string(layer));
        return s;
    }
    return "";
}

}  // namespace akunu
