// load_config(): ModelConfig from GGUF metadata ("<arch>.block_count", ...) or from a Hugging
// Face config.json (transformers 4.x and 5.x spellings, including rope_parameters).
#include <cmath>

#include "akunu/core/error.h"
#include "akunu/model/model_config.h"
#include "akunu/formats/model_files.h"

namespace akunu {

namespace {

// ---------------------------------------------------------------------------------------------
// GGUF
// ---------------------------------------------------------------------------------------------

class GgufKeys {
public:
    GgufKeys(const GgufFile& g, std::string arch) : g_(g), arch_(std::move(arch)) {}
    const GgufValue* find(const std::string& suffix) const { return g_.find(arch_ + "." + suffix); }
    int integer(const std::string& suffix, int fallback, bool required = false) const {
        const std::string key = arch_ + "." + suffix;
        const GgufValue* v = g_.find(key);
        if (!v) {
            AKUNU_CHECK(!required, g_.path() + ": required metadata key " + key + " is missing");
            return fallback;
        }
        const int64_t x = v->as_int(key);
        AKUNU_CHECK(x >= INT32_MIN && x <= INT32_MAX,
                    g_.path() + ": metadata key " + key + " = " + std::to_string(x) + " is out of range");
        return int(x);
    }
    float number(const std::string& suffix, float fallback) const {
        const GgufValue* v = find(suffix);
        return v ? float(v->as_double(arch_ + "." + suffix)) : fallback;
    }

private:
    const GgufFile& g_;
    std::string arch_;
};

ModelConfig from_gguf(const ModelFiles& files) {
    const GgufFile& g = *files.gguf();
    ModelConfig c;
    c.source = g.path();
    const GgufValue* arch_key = g.find("general.architecture");
    AKUNU_CHECK(arch_key, g.path() + ": metadata key general.architecture is missing");
    const std::string arch_name = arch_key->as_string("general.architecture");
    c.architecture = arch_name;
    const ArchDescriptor& arch = find_arch(arch_name);  // unknown: lists the supported ones
    GgufKeys k(g, arch_name);

    c.n_layers = k.integer("block_count", 0, true);
    c.dim = k.integer("embedding_length", 0, true);
    c.n_heads = k.integer("attention.head_count", 0, true);
    c.n_kv_heads = k.integer("attention.head_count_kv", c.n_heads);
    c.ffn_dim = k.integer("feed_forward_length", 0, true);
    c.head_dim = k.integer("attention.key_length", 0);
    const ArchDefaults& d = arch.defaults;
    c.max_context = k.integer("context_length", 0);
    // Learned positions (bert) size the context when the key is missing.
    if (const TensorInfo* pos = files.find(tensor_name(arch, TensorRole::kPositionEmbd, 0, true));
        pos && !c.max_context)
        c.max_context = int(pos->shape[0]);
    if (c.max_context == 0) c.max_context = d.max_context;
    c.norm_eps =
        k.number(arch.norm == NormKind::kLayer ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon",
                 d.norm_eps);
    c.rope_theta = k.number("rope.freq_base", 10000.0f);
    c.rope_theta_local = k.number("rope.freq_base_swa", d.rope_theta_local);
    c.sliding_window = k.integer("attention.sliding_window", d.sliding_window_gguf);
    if (d.gguf_27b_layers == c.n_layers) c.query_pre_attn_scalar = float(c.dim / c.n_heads);
    c.attn_softcap = k.number("attn_logit_softcapping", -1.0f);  // absent: the architecture's default
    c.final_softcap = k.number("final_logit_softcapping", -1.0f);
    // llama.cpp's converter writes the segment count under the tokenizer's keys.
    const GgufValue* types = g.find("tokenizer.ggml.token_type_count");
    c.n_token_types = types ? int(types->as_int("tokenizer.ggml.token_type_count")) : k.integer("token_type_count", 0);
    if (const TensorInfo* tt = files.find(tensor_name(arch, TensorRole::kTokenTypes, 0, true));
        tt && !types && !k.find("token_type_count"))
        c.n_token_types = int(tt->shape[0]);
    // As llama.cpp: the type defaults to linear, and the factor may sit under its older key.
    const GgufValue* t = k.find("rope.scaling.type");
    const std::string type = t ? t->as_string(arch_name + ".rope.scaling.type") : "linear";
    AKUNU_CHECK(type == "linear" || type == "none",
                g.path() + ": rope scaling '" + type + "' is not supported (linear, llama3)");
    const float factor = k.number("rope.scaling.factor", k.number("rope.scale_linear", 0.0f));
    if (type == "linear" && factor != 0.0f && factor != 1.0f) {
        c.rope_scaling = RopeScaling::kLinear;
        c.rope_factor = factor;
    }
    // llama3 scaling is not stored as keys: the converter writes per-pair divisors instead.
    c.rope_freqs_tensor = files.find(tensor_name(arch, TensorRole::kRopeFreqs, 0, true)) != nullptr;

    c.vocab_size = k.integer("vocab_size", 0);
    if (const TensorInfo* e = files.find(tensor_name(arch, TensorRole::kTokenEmbd, 0, true)); e && c.vocab_size == 0)
        c.vocab_size = int(e->shape[0]);
    if (c.vocab_size == 0)
        if (const GgufValue* tokens = g.find("tokenizer.ggml.tokens"))
            c.vocab_size = int(tokens->as_array("tokenizer.ggml.tokens").items.size());
    // Tied embeddings are not a key: the converter omits output.weight.
    c.tied_embeddings = files.has_weights() ? files.find(tensor_name(arch, TensorRole::kOutput, 0, true)) == nullptr
                                            : arch.tied_embeddings;
    c.qkv_bias = files.find(tensor_name(arch, TensorRole::kAttnQBias, 0, true)) != nullptr ||
                 (arch.qkv_bias && !files.has_weights());
    derive(c);
    return c;
}

// ---------------------------------------------------------------------------------------------
// Hugging Face config.json
// ---------------------------------------------------------------------------------------------

class Json {
public:
    Json(const nlohmann::json& j, std::string source) : j_(j), source_(std::move(source)) {}
    const nlohmann::json* find(const char* key) const {
        auto it = j_.find(key);
        return it == j_.end() || it->is_null() ? nullptr : &*it;
    }
    int integer(const char* key, int fallback, bool required = false) const {
        const nlohmann::json* v = find(key);
        if (!v) {
            AKUNU_CHECK(!required, source_ + ": required key \"" + key + "\" is missing");
            return fallback;
        }
        AKUNU_CHECK(v->is_number_integer(), source_ + ": \"" + key + "\" must be an integer, found " + v->dump());
        const int64_t x = v->get<int64_t>();
        AKUNU_CHECK(x >= INT32_MIN && x <= INT32_MAX,
                    source_ + ": \"" + key + "\" = " + std::to_string(x) + " is out of range");
        return int(x);
    }
    float number(const char* key, float fallback) const {
        const nlohmann::json* v = find(key);
        if (!v) return fallback;
        AKUNU_CHECK(v->is_number(), source_ + ": \"" + key + "\" must be a number, found " + v->dump());
        return v->get<float>();
    }

private:
    const nlohmann::json& j_;
    std::string source_;
};

void read_rope_parameters(ModelConfig& c, const nlohmann::json& p, const std::string& source) {
    Json r(p, source);
    c.rope_theta = r.number("rope_theta", c.rope_theta);
    const nlohmann::json* type = r.find("rope_type");
    if (!type) type = r.find("type");
    const std::string t = type && type->is_string() ? type->get<std::string>() : "default";
    if (t == "llama3") {
        c.rope_scaling = RopeScaling::kLlama3;
        c.rope_factor = r.number("factor", 8.0f);
        c.rope_low_freq_factor = r.number("low_freq_factor", 1.0f);
        c.rope_high_freq_factor = r.number("high_freq_factor", 4.0f);
        c.rope_original_context = r.integer("original_max_position_embeddings", 8192);
    } else if (t == "linear") {
        c.rope_scaling = RopeScaling::kLinear;
        c.rope_factor = r.number("factor", 1.0f);
    } else {
        AKUNU_CHECK(t == "default", source + ": rope type '" + t + "' is not supported (default, linear, llama3)");
    }
}

}  // namespace

// The keys an architecture spells otherwise (ArchDescriptor::hf_keys) under akunu's names.
static nlohmann::json with_hf_keys(const nlohmann::json& in, const ArchDescriptor& arch) {
    nlohmann::json j = in;
    if (arch.hf_keys)
        for (const auto& [ours, theirs] : *arch.hf_keys)
            if (!j.contains(ours) && j.contains(theirs)) j[ours] = j[theirs];
    return j;
}

// An encoder-decoder's encoder stack and audio input (whisper's WhisperConfig keys).
static void read_encoder_keys(ModelConfig& c, const nlohmann::json& j, const std::string& source) {
    Json k(j, source);
    c.encoder_layers = k.integer("encoder_layers", 0, true);
    c.encoder_heads = k.integer("encoder_attention_heads", 0, true);
    c.encoder_ffn_dim = k.integer("encoder_ffn_dim", 0, true);
    c.n_mels = k.integer("num_mel_bins", 80);
    c.audio_ctx = k.integer("max_source_positions", 1500);
}

ModelConfig config_from_json(const nlohmann::json& file_json, const std::string& source, const ModelFiles* files) {
    AKUNU_CHECK(file_json.is_object(), source + ": a model config must be a JSON object");
    ModelConfig c;
    c.source = source;
    const nlohmann::json* type = Json(file_json, source).find("model_type");
    AKUNU_CHECK(type && type->is_string(), source + ": config.json has no \"model_type\"");
    c.architecture = type->get<std::string>();
    const ArchDescriptor& arch = find_arch(c.architecture);
    const nlohmann::json j = with_hf_keys(file_json, arch);
    Json k(j, source);
    if (arch.encoder) read_encoder_keys(c, j, source);

    c.n_layers = k.integer("num_hidden_layers", 0, true);
    c.dim = k.integer("hidden_size", 0, true);
    c.n_heads = k.integer("num_attention_heads", 0, true);
    c.n_kv_heads = k.integer("num_key_value_heads", c.n_heads);
    c.ffn_dim = k.integer("intermediate_size", 0, true);
    const ArchDefaults& d = arch.defaults;
    c.head_dim = k.integer("head_dim", d.head_dim_hf);
    c.vocab_size = k.integer("vocab_size", 0, true);
    c.max_context = k.integer("max_position_embeddings", d.max_context);
    c.norm_eps = k.number(arch.norm == NormKind::kLayer ? "layer_norm_eps" : "rms_norm_eps", d.norm_eps);
    c.n_token_types = k.integer("type_vocab_size", d.n_token_types_hf);
    c.rope_theta = k.number("rope_theta", d.rope_theta_hf);
    c.rope_theta_local = k.number("rope_local_base_freq", d.rope_theta_local);  // gemma3, transformers 4.x
    if (const nlohmann::json* s = k.find("rope_scaling")) read_rope_parameters(c, *s, source);
    if (const nlohmann::json* p = k.find("rope_parameters")) {
        // transformers 5: one dict, or one per attention kind (gemma3).
        if (p->contains("full_attention") || p->contains("sliding_attention")) {
            if (p->contains("full_attention")) read_rope_parameters(c, (*p)["full_attention"], source);
            if (p->contains("sliding_attention")) {
                ModelConfig local = c;
                read_rope_parameters(local, (*p)["sliding_attention"], source);
                c.rope_theta_local = local.rope_theta;
            }
        } else {
            read_rope_parameters(c, *p, source);
        }
    }
    // null: no window; absent: the architecture's. Qwen2/3 write a window they use only with
    // use_sliding_window true.
    c.sliding_window = j.contains("sliding_window") ? k.integer("sliding_window", 0) : d.sliding_window_hf;
    if (const nlohmann::json* use = k.find("use_sliding_window"); use && use->is_boolean() && !use->get<bool>())
        c.sliding_window = 0;
    else if (d.hf_window_needs_flag && !use)
        c.sliding_window = 0;
    if (const nlohmann::json* types = k.find("layer_types")) {
        AKUNU_CHECK(types->is_array(), source + ": \"layer_types\" must be a list");
        for (const auto& t : *types) {
            AKUNU_CHECK(t.is_string(), source + ": \"layer_types\" holds a non-string");
            const std::string type = t.get<std::string>();
            AKUNU_CHECK(type == "sliding_attention" || type == "full_attention",
                        source + ": layer type '" + type + "' is not supported (full_attention, sliding_attention)");
            c.layer_sliding.push_back(type == "sliding_attention");
        }
    } else if (k.find("max_window_layers") && c.sliding_window > 0) {
        // Qwen2 configs without layer_types: layers from max_window_layers on slide.
        const int from = k.integer("max_window_layers", 0);
        for (int l = 0; l < c.n_layers; ++l) c.layer_sliding.push_back(l >= from);
    }
    // Absent: the architecture's default (-1); null: off, as transformers reads it.
    c.attn_softcap = j.contains("attn_logit_softcapping") ? k.number("attn_logit_softcapping", 0.0f) : -1.0f;
    c.final_softcap = j.contains("final_logit_softcapping") ? k.number("final_logit_softcapping", 0.0f) : -1.0f;
    c.query_pre_attn_scalar = k.number("query_pre_attn_scalar", d.query_pre_attn_scalar_hf);
    const nlohmann::json* tie = k.find("tie_word_embeddings");
    c.tied_embeddings = tie && tie->is_boolean() ? tie->get<bool>() : arch.tied_embeddings;
    if (files && files->has_weights() && !files->find(tensor_name(arch, TensorRole::kOutput, 0, false)))
        c.tied_embeddings = true;
    const nlohmann::json* bias = k.find("attention_bias");
    c.qkv_bias = bias && bias->is_boolean() ? bias->get<bool>() : arch.qkv_bias;
    derive(c);
    return c;
}

ModelConfig load_config(const ModelFiles& files) {
    if (files.gguf()) return from_gguf(files);
    AKUNU_CHECK(files.hf_config(), files.path() +
                                       ": no config.json beside the weights; akunu needs it for "
                                       "safetensors models");
    return config_from_json(*files.hf_config(), files.path(), &files);
}

}  // namespace akunu
