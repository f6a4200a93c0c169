// Format detection and the per-format openers behind ModelFiles.
#include "akunu/formats/model_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "akunu/core/error.h"
#include "akunu/formats/ggml_whisper.h"
#include "akunu/formats/json_file.h"
#include "akunu/formats/mel_filters.h"

namespace akunu {

const char* model_format_name(ModelFormat format) {
    switch (format) {
        case ModelFormat::kGguf: return "gguf";
        case ModelFormat::kSafetensors: return "safetensors";
        case ModelFormat::kMlx: return "mlx";
        case ModelFormat::kCt2: return "ct2";
        case ModelFormat::kGgml: return "ggml";
    }
    return "?";
}

namespace {

bool is_directory(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
// A symlink loop counts as present, so that reading it reports the loop.
bool exists(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 || errno == ELOOP;
}
std::string dirname_of(const std::string& p) {
    const size_t slash = p.find_last_of('/');
    return slash == std::string::npos ? "." : (slash == 0 ? "/" : p.substr(0, slash));
}
std::string basename_of(const std::string& p) {
    const size_t slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}
bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

void ModelFiles::load_config(const std::string& config_path, bool required) {
    if (!exists(config_path)) {
        AKUNU_CHECK(!required,
                    "'" + config_path + "' is missing; a Hugging Face model needs config.json beside its weights");
        return;
    }
    config_ = std::make_unique<nlohmann::json>(read_json_file(config_path));
    AKUNU_CHECK(config_->is_object(), config_path + ": expected a JSON object");
    if (config_->contains("quantization")) {
        const auto& q = (*config_)["quantization"];
        AKUNU_CHECK(q.is_object() && q.contains("group_size") && q.contains("bits") &&
                        q["group_size"].is_number_integer() && q["bits"].is_number_integer(),
                    config_path + ": \"quantization\" must hold integer group_size and bits (MLX format)");
        mlx_.group_size = q["group_size"].get<int>();
        mlx_.bits = q["bits"].get<int>();
        const std::set<int> groups = {32, 64, 128}, bits = {2, 3, 4, 6, 8};
        AKUNU_CHECK(groups.count(mlx_.group_size) && bits.count(mlx_.bits),
                    config_path + ": MLX quantization group_size " + std::to_string(mlx_.group_size) + " / bits " +
                        std::to_string(mlx_.bits) + " is not one of group_size 32/64/128, bits 2/3/4/6/8");
        format_ = ModelFormat::kMlx;
    }
    if (is_whisper()) add_generation_config(dirname_of(config_path) + "/generation_config.json");
}

// HF keeps Whisper's decoding settings in generation_config.json; they join the config (where it
// has none) so that an HF directory describes itself as the CTranslate2 and GGML readers do.
void ModelFiles::add_generation_config(const std::string& path) {
    if (!exists(path)) return;
    const nlohmann::json g = read_json_file(path);
    AKUNU_CHECK(g.is_object(), path + ": expected a JSON object");
    for (const char* key : {"alignment_heads", "suppress_tokens", "begin_suppress_tokens", "no_timestamps_token_id",
                            "is_multilingual", "lang_to_id", "task_to_id", "prev_sot_token_id"})
        if (g.contains(key) && (!config_->contains(key) || (*config_)[key].is_null())) (*config_)[key] = g[key];
}

void ModelFiles::set_whisper(WhisperFiles w, ModelFormat format) {
    format_ = format;
    whisper_ = std::move(w);
    tensors_ = whisper_.tensors;
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].name] = i;
    config_ = std::make_unique<nlohmann::json>(whisper_.config);
}

bool ModelFiles::is_whisper() const {
    return config_ && config_->value("model_type", nlohmann::json()).is_string() &&
           (*config_)["model_type"].get<std::string>() == "whisper";
}

std::vector<float> ModelFiles::mel_filters() const {
    if (!whisper_.mel_filters.empty()) return whisper_.mel_filters;
    AKUNU_CHECK(is_whisper(), path_ + " is not a Whisper model (its config has no \"model_type\": \"whisper\")");
    const auto& bins = (*config_)["num_mel_bins"];
    AKUNU_CHECK(config_->contains("num_mel_bins") && bins.is_number_integer(),
                path_ + ": the config's num_mel_bins is missing or not an integer");
    return whisper_mel_filters(bins.get<int>());
}

const MappedFile& ModelFiles::file_of(const TensorInfo& t) const {
    if (gguf_) return gguf_->file();
    if (whisper_.file) return *whisper_.file;
    for (const auto& s : shards_)
        if (s->path() == t.file) return s->file();
    throw Error("tensor " + t.name + " is not in a file of " + path_);
}

void ModelFiles::check_intact() const {
    if (gguf_) gguf_->file().check_intact();
    if (whisper_.file) whisper_.file->check_intact();
    for (const auto& s : shards_) s->file().check_intact();
}

void ModelFiles::add_safetensors(const std::string& file, const std::vector<std::string>* only) {
    auto st = SafetensorsFile::open(MappedFile::open(file));
    std::set<std::string> wanted;
    if (only) wanted.insert(only->begin(), only->end());
    for (const auto& t : st->tensors()) {
        if (only && !wanted.count(t.name)) continue;
        AKUNU_CHECK(!index_.count(t.name),
                    "tensor " + t.name + " appears in both " + tensors_[index_[t.name]].file + " and " + file);
        index_[t.name] = tensors_.size();
        tensors_.push_back(t);
    }
    if (only)
        for (const auto& name : *only)
            AKUNU_CHECK(index_.count(name),
                        "the index lists tensor " + name + " in " + file + ", which does not hold it");
    shards_.push_back(std::move(st));
}

std::shared_ptr<ModelFiles> ModelFiles::open(const std::string& path_in) {
    auto m = std::shared_ptr<ModelFiles>(new ModelFiles());
    std::string path = path_in;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    m->path_ = path;
    struct stat st;
    if (stat(path.c_str(), &st) != 0)
        throw Error("'" + path + "' " + (errno == ELOOP ? "is a symlink loop" : "does not exist"));

    std::string dir = is_directory(path) ? path : dirname_of(path);
    std::string index_path, single_path;
    if (is_directory(path)) {
        if (exists(dir + "/model.safetensors.index.json"))
            index_path = dir + "/model.safetensors.index.json";
        else if (exists(dir + "/model.safetensors"))
            single_path = dir + "/model.safetensors";
        else if (exists(dir + "/model.bin")) {
            m->set_whisper(read_ct2_whisper(dir + "/model.bin"), ModelFormat::kCt2);
            return m;
        } else {
            m->load_config(dir + "/config.json", false);
            AKUNU_CHECK(m->config_,
                        "'" + path + "' holds no model.safetensors, model.safetensors.index.json or config.json");
            return m;  // config only: a model planned without weights
        }
    } else if (basename_of(path) == "config.json") {
        m->load_config(path, true);
        return m;
    } else if (ends_with(path, ".index.json")) {
        index_path = path;
    } else {
        // A single file: decide by its first bytes, not its name.
        auto f = MappedFile::open(path);
        const uint8_t* d = f->data();
        if (f->size() >= 4 && std::memcmp(d, "GGUF", 4) == 0) {
            m->format_ = ModelFormat::kGguf;
            m->gguf_ = GgufFile::open(f);
            for (const auto& t : m->gguf_->tensors()) {
                m->index_[t.name] = m->tensors_.size();
                m->tensors_.push_back(t);
            }
            return m;
        }
        if (GgmlWhisperFile::looks_like(*f)) {
            m->set_whisper(read_ggml_whisper(f), ModelFormat::kGgml);
            return m;
        }
        if (f->size() >= 4 && (std::memcmp(d, "lmgg", 4) == 0 || std::memcmp(d, "fmgg", 4) == 0 ||
                               std::memcmp(d, "tjgg", 4) == 0 || std::memcmp(d, "ggjt", 4) == 0))
            throw Error("'" + path +
                        "' is a legacy llama.cpp GGML file (ggml/ggmf/ggjt); that format is not supported. "
                        "Convert the model to GGUF.");
        if (basename_of(path) == "model.bin") {
            m->set_whisper(read_ct2_whisper(path), ModelFormat::kCt2);
            return m;
        }
        // Safetensors: an 8-byte length, then a JSON header (an object, which a broken file may
        // not be), or the name says so.
        if (ends_with(path, ".safetensors") || (f->size() >= 9 && (d[8] == '{' || d[8] == '[')))
            single_path = path;
        else
            throw Error("'" + path + "' is neither GGUF nor safetensors (its first bytes match no known format)");
    }

    if (!index_path.empty()) {
        const nlohmann::json index = read_json_file(index_path);
        AKUNU_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
                    index_path + ": expected {\"weight_map\": {tensor: shard file}}");
        std::map<std::string, std::vector<std::string>> by_shard;
        for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
            AKUNU_CHECK(it.value().is_string(),
                        index_path + ": the shard of tensor " + it.key() + " is not a file name");
            const std::string shard = it.value().get<std::string>();
            AKUNU_CHECK(shard.find('/') == std::string::npos && shard != "..",
                        index_path + ": shard name '" + shard + "' must be a file beside the index");
            by_shard[dirname_of(index_path) + "/" + shard].push_back(it.key());
        }
        AKUNU_CHECK(!by_shard.empty(), index_path + ": the weight_map is empty");
        for (const auto& [shard, names] : by_shard) {
            AKUNU_CHECK(exists(shard), index_path + " names shard '" + basename_of(shard) + "', which is missing");
            m->add_safetensors(shard, &names);
        }
    } else {
        m->add_safetensors(single_path);
    }
    m->load_config(dir + "/config.json", false);
    return m;
}

const TensorInfo* ModelFiles::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace akunu
