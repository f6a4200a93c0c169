// Renaming Whisper tensors to HF names, and Whisper's special tokens (whisper_files.h).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "akunu/core/error.h"
#include "akunu/formats/whisper_files.h"

namespace akunu {

namespace {

// `name` matches `pattern` ("encoder/layer_{}/ffn/linear_0/weight"), the layer number going to `layer`.
bool match(const std::string& pattern, const std::string& name, std::string& layer) {
    const size_t hole = pattern.find("{}");
    if (hole == std::string::npos) return layer.clear(), name == pattern;
    const std::string pre = pattern.substr(0, hole), post = pattern.substr(hole + 2);
    if (name.size() <= pre.size() + post.size() || name.compare(0, pre.size(), pre) != 0 ||
        name.compare(name.size() - post.size(), post.size(), post) != 0)
        return false;
    layer = name.substr(pre.size(), name.size() - pre.size() - post.size());
    return layer.size() <= 4 && std::all_of(layer.begin(), layer.end(), [](char c) { return std::isdigit(c); });
}

std::string fill(std::string pattern, const std::string& layer) {
    const size_t hole = pattern.find("{}");
    return hole == std::string::npos ? pattern : pattern.replace(hole, 2, layer);
}

bool all_zero(const TensorInfo& t) {
    std::vector<float> v(t.n_elements);
    dequantize(*t.type, t.data, v.data(), t.n_elements, t.name);
    return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
}

// Row block `part` of `parts` of `t`, named `name`: a view into the same bytes.
TensorInfo row_block(const TensorInfo& t, size_t part, size_t parts, const std::string& name, const std::string& path) {
    AKUNU_CHECK(!t.shape.empty() && t.shape[0] % parts == 0,
                path + ": variable " + t.name + " has shape " + shape_string(t.shape) + "; its " +
                    (t.shape.empty() ? std::string("0") : std::to_string(t.shape[0])) + " rows do not split into " +
                    std::to_string(parts) + " equal blocks (fused projections)");
    TensorInfo b = t;
    b.name = name;
    b.shape[0] /= parts;
    b.n_elements /= parts;
    b.bytes /= parts;
    b.data = t.data + part * b.bytes;
    return b;
}

}  // namespace

std::vector<TensorInfo> rename_whisper_tensors(const std::vector<TensorInfo>& src,
                                               const std::vector<WhisperRename>& rules, const std::string& path,
                                               bool skip_unmatched_scalars) {
    std::vector<TensorInfo> out;
    for (const TensorInfo& t : src) {
        const WhisperRename* rule = nullptr;
        std::string layer;
        for (const auto& r : rules)
            if (match(r.src, t.name, layer)) {
                rule = &r;
                break;
            }
        if (!rule) {
            if (skip_unmatched_scalars && t.shape.empty()) continue;
            throw Error(path + ": tensor " + t.name + " (" + t.type->name + " " + shape_string(t.shape) +
                        ") is not part of a Whisper model akunu knows");
        }
        for (size_t i = 0; i < rule->dst.size(); ++i) {
            const bool optional = rule->dst[i][0] == '?';
            TensorInfo b = row_block(t, i, rule->dst.size(), fill(rule->dst[i].substr(optional), layer), path);
            if (optional && all_zero(b)) continue;
            out.push_back(std::move(b));
        }
    }
    std::sort(out.begin(), out.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    return out;
}

std::vector<std::pair<int, std::string>> whisper_special_tokens(int n_file, int n_vocab, const std::string& path) {
    // HF's language codes in token order; the 100th ("yue") only in large-v3's vocabulary.
    static const char* kLanguages[] = {
        "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt",  "tr", "pl", "ca", "nl", "ar", "sv", "it", "id",
        "hi", "fi", "vi", "iw", "uk", "el", "ms", "cs", "ro",  "da", "hu", "ta", "no", "th", "ur", "hr", "bg",
        "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv",  "bn", "sr", "az", "sl", "kn", "et", "mk", "br",
        "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",  "gl", "mr", "pa", "si", "km", "sn", "yo", "so",
        "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi",  "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt",
        "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue"};
    constexpr int kTimestamps = 1501;  // <|0.00|> .. <|30.00|>
    constexpr int kTaskTokens = 7;  // sot, translate, transcribe, startoflm, startofprev, nocaptions, notimestamps
    const int n_languages = n_vocab - n_file - kTaskTokens - kTimestamps;
    AKUNU_CHECK(n_languages >= 0 && n_languages <= int(std::size(kLanguages)),
                path + ": n_vocab " + std::to_string(n_vocab) + " with " + std::to_string(n_file) +
                    " vocabulary tokens leaves room for " + std::to_string(n_languages) +
                    " language tokens; Whisper models have 0 to 100");
    std::vector<std::pair<int, std::string>> s;
    int id = n_file;
    s.emplace_back(id++, "<|startoftranscript|>");
    for (int i = 0; i < n_languages; ++i) s.emplace_back(id++, std::string("<|") + kLanguages[i] + "|>");
    for (const char* t : {"translate", "transcribe", "startoflm", "startofprev", "nocaptions", "notimestamps"})
        s.emplace_back(id++, std::string("<|") + t + "|>");
    for (int i = 0; i < kTimestamps; ++i) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "<|%d.%02d|>", i / 50, (i % 50) * 2);
        s.emplace_back(id++, buf);
    }
    return s;
}

}  // namespace akunu

namespace akunu {

nlohmann::json whisper_config(const std::vector<TensorInfo>& t, int encoder_heads, int decoder_heads,
                              const std::string& path) {
    auto shape = [&](const std::string& name) -> const std::vector<uint64_t>& {
        auto it = std::find_if(t.begin(), t.end(), [&](const TensorInfo& x) { return x.name == name; });
        AKUNU_CHECK(it != t.end(), path + ": tensor " + name + " is missing (a Whisper model needs it)");
        return it->shape;
    };
    auto layers = [&](const std::string& prefix) {
        int n = 0;
        for (const TensorInfo& x : t)
            if (x.name.compare(0, prefix.size(), prefix) == 0)
                n = std::max(n, std::atoi(x.name.c_str() + prefix.size()) + 1);
        return n;
    };
    const auto& embed = shape("model.decoder.embed_tokens.weight");
    AKUNU_CHECK(embed.size() == 2,
                path + ": model.decoder.embed_tokens.weight should be 2-D, found " + shape_string(embed));
    const int d_model = int(embed[1]);
    for (int heads : {encoder_heads, decoder_heads})
        AKUNU_CHECK(
            heads > 0 && d_model % heads == 0,
            path + ": " + std::to_string(heads) + " attention heads do not divide d_model " + std::to_string(d_model));
    nlohmann::json c;
    c["model_type"] = "whisper";
    c["architectures"] = {"WhisperForConditionalGeneration"};
    c["d_model"] = d_model;
    c["vocab_size"] = embed[0];
    c["encoder_layers"] = layers("model.encoder.layers.");
    c["decoder_layers"] = layers("model.decoder.layers.");
    // Every tensor of every layer, so that a file cut between two tensors is not taken for a model.
    const char* kLayer[] = {"self_attn.q_proj.weight",
                            "self_attn.q_proj.bias",
                            "self_attn.k_proj.weight",
                            "self_attn.v_proj.weight",
                            "self_attn.v_proj.bias",
                            "self_attn.out_proj.weight",
                            "self_attn.out_proj.bias",
                            "self_attn_layer_norm.weight",
                            "self_attn_layer_norm.bias",
                            "fc1.weight",
                            "fc1.bias",
                            "fc2.weight",
                            "fc2.bias",
                            "final_layer_norm.weight",
                            "final_layer_norm.bias"};
    const char* kCross[] = {"q_proj.weight",   "q_proj.bias",   "k_proj.weight",      "v_proj.weight",   "v_proj.bias",
                            "out_proj.weight", "out_proj.bias", "_layer_norm.weight", "_layer_norm.bias"};
    std::vector<std::string> required = {"model.encoder.conv1.bias", "model.encoder.conv2.weight",
                                         "model.encoder.conv2.bias"};
    for (const std::string stack : {"encoder", "decoder"}) {
        required.push_back("model." + stack + ".layer_norm.weight");
        required.push_back("model." + stack + ".layer_norm.bias");
        for (int l = 0; l < c[stack + "_layers"].get<int>(); ++l) {
            const std::string prefix = "model." + stack + ".layers." + std::to_string(l) + ".";
            for (const char* name : kLayer) required.push_back(prefix + name);
            if (stack == "decoder")
                for (const char* name : kCross)
                    required.push_back(prefix + "encoder_attn" + (name[0] == '_' ? "" : ".") + name);
        }
    }
    for (const std::string& name : required) shape(name);
    c["encoder_attention_heads"] = encoder_heads;
    c["decoder_attention_heads"] = decoder_heads;
    c["encoder_ffn_dim"] = shape("model.encoder.layers.0.fc1.weight")[0];
    c["decoder_ffn_dim"] = shape("model.decoder.layers.0.fc1.weight")[0];
    c["num_mel_bins"] = shape("model.encoder.conv1.weight").at(1);
    c["max_source_positions"] = shape("model.encoder.embed_positions.weight")[0];
    c["max_target_positions"] = shape("model.decoder.embed_positions.weight")[0];
    c["activation_function"] = "gelu";
    c["scale_embedding"] = false;
    c["tie_word_embeddings"] = true;
    c["is_encoder_decoder"] = true;
    return c;
}

}  // namespace akunu
