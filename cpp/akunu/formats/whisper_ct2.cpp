// A CTranslate2 Whisper model directory (model.bin, config.json, vocabulary.txt or
// tokenizer.json) presented with HF names and an HF config (whisper_files.h).
#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "akunu/core/error.h"
#include "akunu/core/half.h"
#include "akunu/formats/ct2_file.h"
#include "akunu/formats/json_file.h"
#include "akunu/formats/whisper_files.h"

namespace akunu {

namespace {

// CTranslate2's WhisperSpec names -> HF names. The encoder and decoder layers share their
// self-attention and FFN rules; the decoder adds cross-attention (q, fused k|v, out).
std::vector<WhisperRename> ct2_rules() {
    std::vector<WhisperRename> r = {
        {"encoder/conv1/weight", {"model.encoder.conv1.weight"}},
        {"encoder/conv1/bias", {"model.encoder.conv1.bias"}},
        {"encoder/conv2/weight", {"model.encoder.conv2.weight"}},
        {"encoder/conv2/bias", {"model.encoder.conv2.bias"}},
        {"encoder/position_encodings/encodings", {"model.encoder.embed_positions.weight"}},
        {"decoder/embeddings/weight", {"model.decoder.embed_tokens.weight"}},
        {"decoder/position_encodings/encodings", {"model.decoder.embed_positions.weight"}},
    };
    const std::pair<const char*, const char*> plain[] = {
        {"self_attention/linear_1/weight", "self_attn.out_proj.weight"},
        {"self_attention/linear_1/bias", "self_attn.out_proj.bias"},
        {"self_attention/layer_norm/gamma", "self_attn_layer_norm.weight"},
        {"self_attention/layer_norm/beta", "self_attn_layer_norm.bias"},
        {"ffn/linear_0/weight", "fc1.weight"},
        {"ffn/linear_0/bias", "fc1.bias"},
        {"ffn/linear_1/weight", "fc2.weight"},
        {"ffn/linear_1/bias", "fc2.bias"},
        {"ffn/layer_norm/gamma", "final_layer_norm.weight"},
        {"ffn/layer_norm/beta", "final_layer_norm.bias"},
        {"attention/linear_0/weight", "encoder_attn.q_proj.weight"},
        {"attention/linear_0/bias", "encoder_attn.q_proj.bias"},
        {"attention/linear_2/weight", "encoder_attn.out_proj.weight"},
        {"attention/linear_2/bias", "encoder_attn.out_proj.bias"},
        {"attention/layer_norm/gamma", "encoder_attn_layer_norm.weight"},
        {"attention/layer_norm/beta", "encoder_attn_layer_norm.bias"},
    };
    for (const std::string s : {"encoder", "decoder"}) {
        const std::string l = s + "/layer_{}/", m = "model." + s + ".layers.{}.";
        r.push_back({s + "/layer_norm/gamma", {"model." + s + ".layer_norm.weight"}});
        r.push_back({s + "/layer_norm/beta", {"model." + s + ".layer_norm.bias"}});
        for (const auto& [a, b] : plain) r.push_back({l + a, {m + b}});
        r.push_back({l + "self_attention/linear_0/weight",
                     {m + "self_attn.q_proj.weight", m + "self_attn.k_proj.weight", m + "self_attn.v_proj.weight"}});
        r.push_back({l + "self_attention/linear_0/bias",
                     {m + "self_attn.q_proj.bias", "?" + m + "self_attn.k_proj.bias", m + "self_attn.v_proj.bias"}});
    }
    const std::string l = "decoder/layer_{}/attention/", m = "model.decoder.layers.{}.encoder_attn.";
    r.push_back({l + "linear_1/weight", {m + "k_proj.weight", m + "v_proj.weight"}});
    r.push_back({l + "linear_1/bias", {"?" + m + "k_proj.bias", m + "v_proj.bias"}});
    return r;
}

// The float type quantized weights become: float32 where the file's float variables are all
// float32 (CTranslate2's int8_float32), else f16 (int8_float16, int8_bfloat16, or int8 of a
// half-precision checkpoint).
TensorType dequantized_type(const Ct2File& ct2) {
    for (const TensorInfo& t : ct2.variables())
        if (!t.shape.empty() && (t.type->type == TensorType::F16 || t.type->type == TensorType::BF16))
            return TensorType::F16;
    return TensorType::F32;
}

// CTranslate2's quantized weights (int8 with a float scale per output row, int16 with one scale
// for the tensor; `name_scale` beside `name`: w = q / scale) as float tensors (dequantized_type)
// whose values live in `store`; the scales are consumed. Every other integer variable is a
// rank-0 setting.
std::vector<TensorInfo> dequantize_ct2(const Ct2File& ct2, const std::string& path,
                                       std::vector<std::vector<uint32_t>>& store) {
    const TensorType to = dequantized_type(ct2);
    std::vector<TensorInfo> out;
    for (const TensorInfo& t : ct2.variables()) {
        const TensorType ty = t.type->type;
        const bool scale_of_weight = t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, "_scale") == 0 &&
                                     ct2.find(t.name.substr(0, t.name.size() - 6)) != nullptr;
        if (scale_of_weight) continue;
        if ((ty != TensorType::I8 && ty != TensorType::I16) || t.shape.empty()) {
            out.push_back(t);
            continue;
        }
        const TensorInfo* scale = ct2.find(t.name + "_scale");
        const uint64_t rows = t.shape[0], cols = t.n_elements / rows;
        AKUNU_CHECK(scale != nullptr, path + ": tensor " + t.name + " is " + t.type->name + " without " + t.name +
                                          "_scale; akunu reads CTranslate2's quantized "
                                          "weights (int8, int16) with their scales, and float32, float16 and "
                                          "bfloat16 ones");
        AKUNU_CHECK(scale->type->type == TensorType::F32 && (scale->n_elements == rows || scale->n_elements == 1),
                    path + ": " + scale->name + " is " + scale->type->name + " " + shape_string(scale->shape) +
                        "; expected float32 [" + std::to_string(rows) + "] (int8) or a float32 scalar (int16)");
        std::vector<float> scales(scale->n_elements);
        std::memcpy(scales.data(), scale->data, scales.size() * 4);
        const size_t width = to == TensorType::F32 ? 4 : 2;
        std::vector<uint32_t>& v = store.emplace_back((t.n_elements * width + 3) / 4);
        float* f32 = reinterpret_cast<float*>(v.data());
        uint16_t* f16 = reinterpret_cast<uint16_t*>(v.data());
        for (uint64_t r = 0; r < rows; ++r) {
            const float s = scales[scales.size() == 1 ? 0 : r];
            for (uint64_t c = 0; c < cols; ++c) {
                const uint64_t i = r * cols + c;
                const float q = ty == TensorType::I8 ? float(reinterpret_cast<const int8_t*>(t.data)[i])
                                                     : float(reinterpret_cast<const int16_t*>(t.data)[i]);
                if (width == 4)
                    f32[i] = q / s;
                else
                    f16[i] = float_to_half(q / s);
            }
        }
        TensorInfo f = t;
        f.type = &type_traits(to);
        f.bytes = t.n_elements * width;
        f.data = reinterpret_cast<const uint8_t*>(v.data());
        out.push_back(std::move(f));
    }
    return out;
}

// Token ids by name, from vocabulary.txt (one token a line) or tokenizer.json's added tokens.
std::map<std::string, int> special_ids(const std::string& dir) {
    std::map<std::string, int> ids;
    std::ifstream vocab(dir + "/vocabulary.txt");
    if (vocab) {
        std::string line;
        for (int id = 0; std::getline(vocab, line); ++id)
            if (line.size() > 4 && line.compare(0, 2, "<|") == 0) ids[line] = id;
        return ids;
    }
    const nlohmann::json t = read_json_file(dir + "/tokenizer.json");
    AKUNU_CHECK(t.is_object() && t.contains("added_tokens") && t["added_tokens"].is_array(),
                dir + "/tokenizer.json: expected \"added_tokens\" (a list of {id, content})");
    for (const auto& a : t["added_tokens"])
        if (a.is_object() && a.contains("id") && a.contains("content") && a["id"].is_number_integer() &&
            a["content"].is_string())
            ids[a["content"].get<std::string>()] = a["id"].get<int>();
    return ids;
}

}  // namespace

WhisperFiles read_ct2_whisper(const std::string& model_bin) {
    const size_t slash = model_bin.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : model_bin.substr(0, std::max<size_t>(slash, 1));
    auto ct2 = Ct2File::open(MappedFile::open(model_bin));
    AKUNU_CHECK(ct2->spec() == "WhisperSpec",
                model_bin + ": a CTranslate2 " + ct2->spec() + " model; akunu reads CTranslate2 Whisper models only");
    WhisperFiles w;
    w.file = ct2->file();
    w.tensors = rename_whisper_tensors(dequantize_ct2(*ct2, model_bin, w.dequantized), ct2_rules(), model_bin, true);
    for (const TensorInfo& t : w.tensors) {
        const TensorType ty = t.type->type;
        AKUNU_CHECK(ty == TensorType::F32 || ty == TensorType::F16 || ty == TensorType::BF16,
                    model_bin + ": tensor " + t.name + " is " + t.type->name +
                        "; akunu reads CTranslate2 weights in float32, float16, bfloat16, and int8 or int16 "
                        "with their scales");
    }
    w.config = whisper_config(w.tensors, int(ct2->scalar("encoder/num_heads")), int(ct2->scalar("decoder/num_heads")),
                              model_bin);

    const std::map<std::string, int> ids = special_ids(dir);
    auto id = [&](const char* token) {
        auto it = ids.find(token);
        AKUNU_CHECK(it != ids.end(), dir + ": the vocabulary has no " + token + " token");
        return it->second;
    };
    w.config["eos_token_id"] = w.config["bos_token_id"] = w.config["pad_token_id"] = id("<|endoftext|>");
    w.config["decoder_start_token_id"] = id("<|startoftranscript|>");
    w.config["no_timestamps_token_id"] = id("<|notimestamps|>");
    w.config["is_multilingual"] = w.config["vocab_size"].get<int>() >= 51865;

    const std::string cfg_path = dir + "/config.json";
    const nlohmann::json cfg = read_json_file(cfg_path);
    AKUNU_CHECK(cfg.is_object(), cfg_path + ": expected a JSON object");
    const std::pair<const char*, const char*> keys[] = {{"alignment_heads", "alignment_heads"},
                                                        {"suppress_ids", "suppress_tokens"},
                                                        {"suppress_ids_begin", "begin_suppress_tokens"},
                                                        {"lang_ids", "lang_ids"}};
    for (const auto& [ct2_key, hf_key] : keys)
        if (cfg.contains(ct2_key)) {
            AKUNU_CHECK(cfg[ct2_key].is_array(), cfg_path + ": \"" + ct2_key + "\" should be a list");
            w.config[hf_key] = cfg[ct2_key];
        }
    return w;
}

}  // namespace akunu
