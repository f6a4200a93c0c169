// The tokenizer that belongs to a model's files: a GGUF's vocabulary, or the tokenizer.json
// (with tokenizer_config.json, when present) beside safetensors weights, a CTranslate2 model.bin
// or a config; whisper.cpp GGML's embedded vocabulary.
#include <sys/stat.h>

#include <cerrno>

#include "akunu/core/error.h"
#include "akunu/formats/json_file.h"
#include "akunu/formats/model_files.h"
#include "akunu/tokenizer/tokenizer.h"

namespace akunu {

namespace {

bool present(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 || errno == ELOOP;  // a loop is reported by the read
}

std::string folder_of(const ModelFiles& files) {
    struct stat st;
    const std::string& p = files.path();
    if (stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return p;
    const size_t slash = p.find_last_of('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : p.substr(0, slash));
}

}  // namespace

std::shared_ptr<Tokenizer> Tokenizer::from_model(const ModelFiles& files) {
    if (files.gguf()) return from_gguf(*files.gguf());
    if (files.byte_vocab()) return from_byte_vocab(*files.byte_vocab());
    const std::string folder = folder_of(files);
    const std::string path = folder + "/tokenizer.json";
    AKUNU_CHECK(present(path), "'" + folder + "' has no tokenizer.json beside the model");
    const nlohmann::json tokenizer = read_json_file(path);
    const std::string config_path = folder + "/tokenizer_config.json";
    if (!present(config_path)) return from_json(tokenizer, nullptr, path);
    const nlohmann::json config = read_json_file(config_path);
    return from_json(tokenizer, &config, path);
}

}  // namespace akunu
