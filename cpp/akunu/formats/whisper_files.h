// Whisper checkpoints in CTranslate2 and whisper.cpp GGML form, presented as a Hugging Face
// Whisper directory is: tensors under HF names ("model.decoder.layers.0.encoder_attn.k_proj.weight")
// and an HF WhisperConfig-style JSON with "model_type": "whisper". Fused CTranslate2 rows
// (self-attention q|k|v, cross-attention k|v) become views into the same mapped bytes; a k bias
// that is all zeros (CTranslate2 stores one, HF has none) is left out.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "akunu/formats/mapped_file.h"
#include "akunu/formats/tensor_info.h"

namespace akunu {

// A vocabulary given as byte strings (whisper.cpp's embedded one): tokens[id] for the file's
// ids, plus the special tokens Whisper defines past them, named as HF names them.
struct ByteVocab {
    std::vector<std::string> tokens;  // raw bytes
    std::vector<std::pair<int, std::string>> specials;  // (id, "<|startoftranscript|>"), ...
    int eos_id = -1;
    std::string source;
};

struct WhisperFiles {
    std::shared_ptr<MappedFile> file;
    std::vector<TensorInfo> tensors;  // HF names
    nlohmann::json config;  // HF WhisperConfig keys
    std::vector<float> mel_filters;  // [n_mels, 201] when the file embeds them, else empty
    std::shared_ptr<const ByteVocab> vocab;  // GGML only
    // Weights dequantized at load (CTranslate2's int8 and int16): the f32 or f16 values the
    // tensors of those names point into (u32 words: aligned for either).
    std::vector<std::vector<uint32_t>> dequantized;
};

// `model_bin`: a CTranslate2 Whisper model.bin, with config.json and vocabulary.txt (or
// tokenizer.json) beside it.
WhisperFiles read_ct2_whisper(const std::string& model_bin);
WhisperFiles read_ggml_whisper(std::shared_ptr<MappedFile> file);

// ---- shared by both readers (whisper_names.cpp) ----------------------------------------------

// One renaming: `src` with at most one "{}" standing for a layer number; `dst` the HF names of
// its row blocks in order ("{}" likewise), one name for a plain rename. A dst starting with '?'
// is left out when its rows are all zeros.
struct WhisperRename {
    std::string src;
    std::vector<std::string> dst;
};
// The source tensors renamed (and split) by `rules`; a tensor no rule matches is an error that
// names it, unless `skip_unmatched_scalars` and it has rank 0.
std::vector<TensorInfo> rename_whisper_tensors(const std::vector<TensorInfo>& src,
                                               const std::vector<WhisperRename>& rules, const std::string& path,
                                               bool skip_unmatched_scalars);
// The Whisper special tokens that follow a byte vocabulary of `n_file` tokens in a model of
// `n_vocab` ids (languages, task tokens, <|notimestamps|>, the timestamps).
std::vector<std::pair<int, std::string>> whisper_special_tokens(int n_file, int n_vocab, const std::string& path);
// The HF config keys that follow from HF-named tensors (dimensions, layer counts, positions)
// plus the head counts, which no tensor shape gives.
nlohmann::json whisper_config(const std::vector<TensorInfo>& hf_tensors, int encoder_heads, int decoder_heads,
                              const std::string& path);

}  // namespace akunu
