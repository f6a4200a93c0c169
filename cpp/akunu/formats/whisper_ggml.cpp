// A whisper.cpp GGML file presented with HF names and an HF config (whisper_files.h), with
// its embedded mel filter bank and vocabulary.
#include "akunu/core/error.h"
#include "akunu/formats/ggml_whisper.h"
#include "akunu/formats/whisper_files.h"

namespace akunu {

namespace {

// whisper.cpp's names (OpenAI's) -> HF names; both stacks share the per-layer rules.
std::vector<WhisperRename> ggml_rules() {
    std::vector<WhisperRename> r = {
        {"encoder.conv1.weight", {"model.encoder.conv1.weight"}},
        {"encoder.conv1.bias", {"model.encoder.conv1.bias"}},
        {"encoder.conv2.weight", {"model.encoder.conv2.weight"}},
        {"encoder.conv2.bias", {"model.encoder.conv2.bias"}},
        {"encoder.positional_embedding", {"model.encoder.embed_positions.weight"}},
        {"encoder.ln_post.weight", {"model.encoder.layer_norm.weight"}},
        {"encoder.ln_post.bias", {"model.encoder.layer_norm.bias"}},
        {"decoder.token_embedding.weight", {"model.decoder.embed_tokens.weight"}},
        {"decoder.positional_embedding", {"model.decoder.embed_positions.weight"}},
        {"decoder.ln.weight", {"model.decoder.layer_norm.weight"}},
        {"decoder.ln.bias", {"model.decoder.layer_norm.bias"}},
    };
    const std::pair<const char*, const char*> blocks[] = {
        {"attn.query", "self_attn.q_proj"},
        {"attn.key", "self_attn.k_proj"},
        {"attn.value", "self_attn.v_proj"},
        {"attn.out", "self_attn.out_proj"},
        {"attn_ln", "self_attn_layer_norm"},
        {"cross_attn.query", "encoder_attn.q_proj"},
        {"cross_attn.key", "encoder_attn.k_proj"},
        {"cross_attn.value", "encoder_attn.v_proj"},
        {"cross_attn.out", "encoder_attn.out_proj"},
        {"cross_attn_ln", "encoder_attn_layer_norm"},
        {"mlp.0", "fc1"},
        {"mlp.2", "fc2"},
        {"mlp_ln", "final_layer_norm"},
    };
    for (const std::string s : {"encoder", "decoder"})
        for (const auto& [a, b] : blocks)
            for (const std::string p : {".weight", ".bias"})
                r.push_back({s + ".blocks.{}." + a + p, {"model." + s + ".layers.{}." + b + p}});
    return r;
}

}  // namespace

WhisperFiles read_ggml_whisper(std::shared_ptr<MappedFile> file) {
    auto g = GgmlWhisperFile::open(file);
    const std::string& path = file->path();
    const WhisperHparams& h = g->hparams();
    std::vector<TensorInfo> src = g->tensors();
    for (TensorInfo& t : src)  // whisper.cpp stores the conv biases as [n, 1]
        if (t.shape.size() == 2 && t.shape[1] == 1 && t.name.size() > 5 &&
            t.name.compare(t.name.size() - 5, 5, ".bias") == 0)
            t.shape.pop_back();

    WhisperFiles w;
    w.file = file;
    w.tensors = rename_whisper_tensors(src, ggml_rules(), path, false);
    w.config = whisper_config(w.tensors, h.n_audio_head, h.n_text_head, path);
    const std::pair<const char*, int> dims[] = {
        {"vocab_size", h.n_vocab},
        {"max_source_positions", h.n_audio_ctx},
        {"d_model", h.n_audio_state},
        {"encoder_layers", h.n_audio_layer},
        {"max_target_positions", h.n_text_ctx},
        {"d_model", h.n_text_state},
        {"decoder_layers", h.n_text_layer},
        {"num_mel_bins", h.n_mels},
    };
    for (const auto& [key, value] : dims)
        AKUNU_CHECK(w.config[key].get<int>() == value, path + ": hyper-parameter for " + key + " is " +
                                                           std::to_string(value) + " but the tensors give " +
                                                           w.config[key].dump());
    w.mel_filters = g->mel_filters();

    auto vocab = std::make_shared<ByteVocab>();
    vocab->tokens = g->tokens();
    vocab->source = path;
    const int n_file = int(vocab->tokens.size());
    AKUNU_CHECK(vocab->tokens.back() == "<|endoftext|>",
                path + ": the vocabulary's last token should be <|endoftext|> (Whisper's layout)");
    vocab->eos_id = n_file - 1;
    vocab->specials = whisper_special_tokens(n_file, h.n_vocab, path);
    vocab->specials.insert(vocab->specials.begin(), {vocab->eos_id, "<|endoftext|>"});
    w.config["eos_token_id"] = w.config["bos_token_id"] = w.config["pad_token_id"] = vocab->eos_id;
    w.config["decoder_start_token_id"] = n_file;
    for (const auto& [id, name] : vocab->specials)
        if (name == "<|notimestamps|>") w.config["no_timestamps_token_id"] = id;
    w.config["is_multilingual"] = h.n_vocab >= 51865;
    w.config["begin_suppress_tokens"] = {220, vocab->eos_id};
    w.config["suppress_tokens"] = nullptr;
    w.vocab = std::move(vocab);
    return w;
}

}  // namespace akunu
