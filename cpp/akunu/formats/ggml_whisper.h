// GgmlWhisperFile: whisper.cpp's GGML model file (magic "lmgg", written by its converters).
//
// Layout (little-endian i32 unless noted): the magic 0x67676d6c; hyper-parameters n_vocab,
// n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state,
// n_text_head, n_text_layer, n_mels, ftype; the mel filter bank (n_mel, n_fft, then n_mel x
// n_fft f32); the vocabulary (count, then per token a u32 length and its bytes); then tensors
// until the end: n_dims, name length, ggml type, ne[n_dims] (innermost first), the name and the
// data, unpadded. Tensor names are whisper.cpp's ("decoder.blocks.0.cross_attn.key.weight").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "akunu/formats/mapped_file.h"
#include "akunu/formats/tensor_info.h"

namespace akunu {

struct WhisperHparams {
    int n_vocab = 0, n_audio_ctx = 0, n_audio_state = 0, n_audio_head = 0, n_audio_layer = 0;
    int n_text_ctx = 0, n_text_state = 0, n_text_head = 0, n_text_layer = 0, n_mels = 0, ftype = 0;
};

class GgmlWhisperFile {
public:
    // True when the file starts as whisper.cpp writes it (the magic, then a mel bank of n_mels rows).
    static bool looks_like(const MappedFile& file);
    // Throws akunu::Error naming the file and the field for any malformed input.
    static std::shared_ptr<GgmlWhisperFile> open(std::shared_ptr<MappedFile> file);

    const WhisperHparams& hparams() const { return h_; }
    const std::vector<float>& mel_filters() const { return filters_; }  // [n_mels, n_fft] f32
    int n_fft_bins() const { return n_fft_; }
    const std::vector<std::string>& tokens() const { return tokens_; }  // raw bytes, ids 0..
    const std::vector<TensorInfo>& tensors() const { return tensors_; }  // whisper.cpp names, NumPy shapes
    const std::shared_ptr<MappedFile>& file() const { return file_; }

private:
    std::shared_ptr<MappedFile> file_;
    WhisperHparams h_;
    int n_fft_ = 0;
    std::vector<float> filters_;
    std::vector<std::string> tokens_;
    std::vector<TensorInfo> tensors_;
};

}  // namespace akunu
