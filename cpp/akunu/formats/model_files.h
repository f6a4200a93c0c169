// ModelFiles: a model on disk, whatever its format, opened lazily (headers only).
//
// Format detection (docs/architecture.md, "Loading a model", step 1): a GGUF file (v2/v3);
// Hugging Face safetensors as a single file, a directory with model.safetensors, or a sharded
// model.safetensors.index.json, with config.json beside it; MLX safetensors, which are HF
// safetensors whose config.json carries "quantization": {group_size, bits}. Whisper in
// CTranslate2 form (a directory with model.bin) and whisper.cpp's GGML file ("lmgg") present
// HF tensor names and an HF config (whisper_files.h); legacy llama.cpp GGML files ("ggjt",
// "ggmf", unversioned "ggml") are refused with a clear error.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "akunu/formats/gguf.h"
#include "akunu/formats/json_file.h"
#include "akunu/formats/safetensors.h"
#include "akunu/formats/whisper_files.h"

namespace akunu {

enum class ModelFormat { kGguf, kSafetensors, kMlx, kCt2, kGgml };
const char* model_format_name(ModelFormat format);

struct MlxQuantization {
    int group_size = 0;  // 32, 64 or 128
    int bits = 0;  // 2, 3, 4, 6 or 8
};

class ModelFiles {
public:
    // `path`: a .gguf file, a .safetensors file, a directory, a model.safetensors.index.json,
    // a config.json (a model with no weights, for planning), a CTranslate2 Whisper model.bin or
    // its directory, or a whisper.cpp GGML file.
    static std::shared_ptr<ModelFiles> open(const std::string& path);

    ModelFormat format() const { return format_; }
    const std::string& path() const { return path_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(const std::string& name) const;
    bool has_weights() const { return !tensors_.empty(); }
    // The file that holds `t`'s bytes (a tensor of this model).
    const MappedFile& file_of(const TensorInfo& t) const;
    // Throws akunu::Error when a file has changed size since it was opened (mapped_file.h).
    void check_intact() const;
    // A copy of t's bytes (t.bytes of them), guarded against a file cut while it is read.
    void read_tensor(const TensorInfo& t, void* dst) const { file_of(t).copy_out(t.data, dst, t.bytes); }

    const GgufFile* gguf() const { return gguf_.get(); }  // GGUF only
    // HF/MLX; for CTranslate2 and GGML Whisper files, the HF WhisperConfig they amount to.
    const nlohmann::json* hf_config() const { return config_ ? &*config_ : nullptr; }
    const MlxQuantization& mlx() const { return mlx_; }  // MLX only
    bool is_whisper() const;
    // A Whisper model's [n_mels, 201] f32 mel filter bank: the one a GGML file embeds, else
    // Slaney filters for its num_mel_bins (mel_filters.h). Throws for other models.
    std::vector<float> mel_filters() const;
    // whisper.cpp's embedded vocabulary (GGML only, else null).
    const ByteVocab* byte_vocab() const { return whisper_.vocab.get(); }

private:
    void add_safetensors(const std::string& file, const std::vector<std::string>* only = nullptr);
    void load_config(const std::string& config_path, bool required);
    void set_whisper(WhisperFiles w, ModelFormat format);
    void add_generation_config(const std::string& path);

    ModelFormat format_ = ModelFormat::kSafetensors;
    std::string path_;
    std::shared_ptr<GgufFile> gguf_;
    std::vector<std::shared_ptr<SafetensorsFile>> shards_;
    std::unique_ptr<nlohmann::json> config_;
    MlxQuantization mlx_;
    WhisperFiles whisper_;  // CTranslate2 and GGML Whisper files
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t> index_;
};

}  // namespace akunu
