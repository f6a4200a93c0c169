// WhisperModel loading, its buffers, and the calls that fill row metadata and replay a table
// (the tables themselves: whisper_tables.cpp).
#include "akunu/engine/whisper_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/validate.h"
#include "akunu/formats/tiles.h"
#include "akunu/vulkan/device.h"
#include "params.h"

namespace akunu {

int whisper_short_rows(int slots, int rows) { return std::min(rows, std::max(16, slots)); }

WhisperLayout whisper_layout(const ModelConfig& c, int slots, int rows) {
    const uint64_t f = 4, e = uint64_t(slots), r = uint64_t(rows), d = uint64_t(c.dim), t = uint64_t(c.audio_ctx);
    const uint64_t frames = 2 * t, mels = uint64_t(c.n_mels), ctx = uint64_t(c.max_context), step = 16;
    WhisperLayout l;
    l.encoder = {
        {"mel", e * mels * frames * f},
        {"cols", std::max(e * frames * 3 * mels, e * t * 3 * d) * f},
        {"conv", e * frames * d * f},
        {"h", e * t * d * f},
        {"xn", e * t * d * f},
        {"attn", e * t * d * f},
        {"qkv", e * t * 3 * d * f},
        {"ffn", e * t * uint64_t(c.encoder_ffn_dim) * f},
        {"enc_seq", e * t * 2 * 4},
        {"enc_pos", e * t * 4},
        {"enc_out", e * t * d * f},
        {"enc_step_conv", step},
        {"enc_step", step},
    };
    l.decoder = {
        {"ids", r * 4},
        {"pos", r * 4},
        {"self_seq", r * 8},
        {"cross_seq", r * 8},
        {"kv_rows", r * 4},
        {"head_rows", r * 4},
        {"index", std::max({r, ctx, t}) * 4},
        {"dec_step", step},
        {"head_step", step},
        {"hd", r * d * f},
        {"xd", r * d * f},
        {"qd", r * d * f},
        {"attnd", r * d * f},
        {"xh", r * d * f},
        {"qkvd", r * 3 * d * f},
        {"ffnd", r * uint64_t(c.ffn_dim) * f},
        {"logits", r * uint64_t(c.vocab_size) * f},
        {"xsplit",
         kernels::span_partial_floats(size_t(whisper_short_rows(slots, rows)), size_t(c.n_heads), size_t(c.head_dim)) *
             f},
        {"self_src", ctx * 4},
        {"self_dst", ctx * 4},
        {"cross_src", t * 4},
        {"cross_dst", t * 4},
        {"self_step", step},
        {"cross_step", step},
        {"audio_step", step},
    };
    for (int layer = 0; layer < c.n_layers; ++layer) {
        const std::string n = "." + std::to_string(layer);
        l.decoder.push_back({"cross_attn" + n, r * uint64_t(c.n_heads) * t * f});
        l.kv.push_back({"self_kv" + n, e * ctx * 2 * d * f});
        l.kv.push_back({"cross_kv" + n, e * t * 2 * d * f});
        l.kv.push_back({"win_kv" + n, e * t * 2 * d * f});
    }
    return l;
}

std::unique_ptr<WhisperModel> WhisperModel::load(const std::string& path, const WhisperOptions& options) {
    auto stage = [&](const char* name) {
        if (options.progress) options.progress(name, 0, 0);
    };
    std::unique_ptr<WhisperModel> m(new WhisperModel());
    stage("format");
    m->files_ = ModelFiles::open(path);
    AKUNU_CHECK(m->files_->has_weights(), "'" + path + "' holds a config but no weights");
    m->config_ = load_config(*m->files_);
    const ModelConfig& c = m->config_;
    AKUNU_CHECK(c.arch().encoder, path + ": " + c.architecture +
                                      " is not an encoder-decoder; WhisperModel loads Whisper models "
                                      "(akunu.Model loads decoders, akunu.Encoder encoders)");
    m->enc_config_ = encoder_stack(c);
    AKUNU_CHECK(c.audio_ctx <= AKUNU_ENCODER_MAX_KEYS && c.max_context <= AKUNU_ENCODER_MAX_KEYS,
                path + ": " + std::to_string(c.audio_ctx) + " audio and " + std::to_string(c.max_context) +
                    " text positions: the attention kernel holds at most " + std::to_string(AKUNU_ENCODER_MAX_KEYS));
    AKUNU_CHECK(c.n_heads == c.n_kv_heads, path + ": Whisper decoders with grouped K/V heads are not supported");
    validate_model(*m->files_, c);
    m->filters_ = m->files_->mel_filters();
    AKUNU_CHECK(options.max_sequences >= 1 && options.max_sequences <= 256,
                "max_sequences must be in 1..256, not " + std::to_string(options.max_sequences));
    m->slots_ = options.max_sequences;
    // A decoder submission holds every position of one sequence (a whole prompt, or the rows
    // whose cross-attention a word alignment reads) and one step of every slot.
    m->rows_ = std::max(c.max_context, m->slots_);
    m->short_rows_ = whisper_short_rows(m->slots_, m->rows_);
    m->lengths_.assign(size_t(m->slots_), 0);
    m->audio_.assign(size_t(m->slots_), -1);

    stage("device");
    m->device_ = Device::create(options.device, options.tuning);
    stage("weights");
    m->upload(true, m->enc_config_, options);
    m->upload(false, c, options);
    stage("scratch");
    m->allocate();
    stage("dispatch table");
    m->enc_table_ = m->build_encoder_table(size_t(m->slots_));
    m->enc_one_table_ = m->build_encoder_table(1);
    m->dec_table_ = m->build_decoder_table(size_t(m->rows_));
    m->dec_short_table_ = m->build_decoder_table(size_t(m->short_rows_));
    m->build_copy_table();
    auto record = [&](const DispatchTable& t) {
        auto cl = std::make_unique<CommandList>(m->device_, 0);
        cl->begin();
        t.record(*cl);
        cl->end();
        return cl;
    };
    m->enc_cl_ = record(*m->enc_table_);
    m->enc_one_cl_ = record(*m->enc_one_table_);
    m->dec_cl_ = record(*m->dec_table_);
    m->dec_short_cl_ = record(*m->dec_short_table_);
    m->copy_cl_ = record(*m->copy_table_);
    m->allocate_chain();
    return m;
}

// HF's config.json of the model, with what generation_config.json beside it adds (the token ids
// config.json leaves out or null).
static nlohmann::json whisper_hf_config(const ModelFiles& files) {
    nlohmann::json j = files.hf_config() ? *files.hf_config() : nlohmann::json::object();
    namespace fs = std::filesystem;
    const fs::path path(files.path());
    const fs::path generation = (fs::is_directory(path) ? path : path.parent_path()) / "generation_config.json";
    if (fs::is_regular_file(generation)) {
        const nlohmann::json g = read_json_file(generation.string());
        for (const auto& [key, value] : g.items())
            if (!j.contains(key) || j[key].is_null()) j[key] = value;
    }
    return j;
}

std::vector<UploadItem> whisper_uploads(const DeviceProfile& d, const ModelFiles& files, const ModelConfig& c,
                                        bool encoder) {
    std::vector<UploadItem> items = plan_weight_uploads(files, c, d.weight_tiles);
    for (UploadItem& it : items) {
        const bool on_windows = encoder || it.role == TensorRole::kCrossK || it.role == TensorRole::kCrossV;
        if (d.cpu_backend && d.tuning.encoder_q8 && on_windows && q8_tiles_fit(it)) it = in_q8_tiles(it);
    }
    return items;
}

WhisperHeadCopy whisper_head_q8(const DeviceProfile& d, const ModelFiles& files, const std::vector<UploadItem>& items) {
    if (!d.cpu_backend || !d.tuning.head_q8) return {};
    const nlohmann::json eos = whisper_hf_config(files).value("eos_token_id", nlohmann::json(nullptr));
    if (!eos.is_number_integer() || eos.get<int64_t>() <= 0) return {};
    for (const UploadItem& it : items)
        if (it.role == TensorRole::kOutput && cpu::tile_layout(it.device_type) &&
            type_traits(it.device_type).block_size == 1)  // a float head in tiles
            return {&it, size_t(eos.get<int64_t>()) / cpu::kTileRows * cpu::kTileRows};  // whole tiles
    return {};
}

void WhisperModel::upload(bool encoder, const ModelConfig& c, const WhisperOptions& options) {
    const std::vector<UploadItem> items = whisper_uploads(device_->profile(), *files_, c, encoder);
    check_weight_types(items, device_->profile(), files_->path());
    auto& to = encoder ? enc_w_ : dec_w_;
    for (size_t i = 0; i < items.size(); ++i) {
        const UploadItem& it = items[i];
        to[{it.role, it.layer}] = upload_weight(device_, *files_, it);
        weight_bytes_ += it.bytes;
        if (options.progress) options.progress("weights", i + 1, items.size());
    }
    if (encoder) return;
    if (const WhisperHeadCopy copy = whisper_head_q8(device_->profile(), *files_, items); copy.rows > 0) {
        text_head_ = upload_q8_rows(device_, *copy.head->tensor, copy.rows);
        weight_bytes_ += text_head_.buffer.size();
    }
}

const Weight& WhisperModel::weight(bool encoder, TensorRole role, int layer) const {
    const auto& from = encoder ? enc_w_ : dec_w_;
    const auto it = from.find({role, layer});
    AKUNU_CHECK(it != from.end(),
                files_->path() + ": tensor " +
                    tensor_name((encoder ? enc_config_ : config_).arch(), role, std::max(layer, 0), false) +
                    " is missing");
    return it->second;
}

void WhisperModel::allocate() {
    const WhisperLayout l = whisper_layout(config_, slots_, rows_);
    const std::map<std::string, Buffer*> named = {
        {"mel", &mel_},
        {"cols", &cols_},
        {"conv", &conv_},
        {"h", &h_},
        {"xn", &xn_},
        {"attn", &attn_},
        {"qkv", &qkv_},
        {"ffn", &ffn_},
        {"enc_seq", &enc_seq_},
        {"enc_pos", &enc_pos_},
        {"enc_out", &enc_out_},
        {"enc_step_conv", &enc_step_conv_},
        {"enc_step", &enc_step_},
        {"ids", &ids_},
        {"pos", &pos_},
        {"self_seq", &self_seq_},
        {"cross_seq", &cross_seq_},
        {"kv_rows", &kv_rows_},
        {"head_rows", &head_rows_},
        {"index", &index_},
        {"dec_step", &dec_step_},
        {"head_step", &head_step_},
        {"hd", &hd_},
        {"xd", &xd_},
        {"qd", &qd_},
        {"attnd", &attnd_},
        {"xh", &xh_},
        {"qkvd", &qkvd_},
        {"ffnd", &ffnd_},
        {"logits", &logits_},
        {"xsplit", &xsplit_},
        {"self_src", &self_src_},
        {"self_dst", &self_dst_},
        {"cross_src", &cross_src_},
        {"cross_dst", &cross_dst_},
        {"self_step", &self_step_},
        {"cross_step", &cross_step_},
        {"audio_step", &audio_step_},
    };
    const std::map<std::string, std::vector<Buffer>*> per_layer = {
        {"cross_attn", &xattn_}, {"self_kv", &self_kv_}, {"cross_kv", &cross_kv_}, {"win_kv", &win_kv_}};
    // Inputs the host writes per call live in host memory: a write is a copy, never a staging buffer.
    const std::vector<std::string> host = {"ids",           "pos",       "self_seq",  "cross_seq",  "kv_rows",
                                           "head_rows",     "dec_step",  "head_step", "self_src",   "self_dst",
                                           "cross_src",     "cross_dst", "self_step", "cross_step", "audio_step",
                                           "enc_step_conv", "enc_step"};
    for (const auto* part : {&l.encoder, &l.decoder, &l.kv})
        for (const auto& [name, bytes] : *part) {
            const bool in_host = std::find(host.begin(), host.end(), name) != host.end();
            Buffer b = Buffer::allocate(device_, bytes, in_host ? Residency::kHost : Residency::kAuto);
            const size_t dot = name.find('.');
            if (dot == std::string::npos)
                *named.at(name) = std::move(b);
            else
                per_layer.at(name.substr(0, dot))->push_back(std::move(b));
        }
    // Row metadata that never changes: row indices, and each encoder row's window and position.
    const size_t t = size_t(config_.audio_ctx), e_rows = size_t(slots_) * t;
    std::vector<uint32_t> index(index_.size() / 4);
    std::iota(index.begin(), index.end(), 0u);
    index_.write(index.data(), index_.size());
    // The cross-attention split's arrival counters start at zero (kernels::span_attention_split).
    xsplit_.write(std::vector<uint8_t>(xsplit_.size(), 0).data(), xsplit_.size());
    std::vector<uint32_t> seq(2 * e_rows), pos(e_rows);
    for (size_t r = 0; r < e_rows; ++r) {
        seq[2 * r] = uint32_t(r / t * t);
        seq[2 * r + 1] = uint32_t(t);
        pos[r] = uint32_t(r % t);
    }
    enc_seq_.write(seq.data(), seq.size() * 4);
    enc_pos_.write(pos.data(), pos.size() * 4);
    staging_.assign(8 * size_t(rows_) + 2 * t, 0);
    // A decoder step's logits (a row per slot), where the host reads them staged, go through
    // the device's staging area.
    device_->reserve_staging(size_t(slots_) * size_t(config_.vocab_size) * 4);
}

nlohmann::json WhisperModel::config_json() const {
    nlohmann::json j = whisper_hf_config(*files_);
    const ModelConfig& c = config_;
    j["n_mels"] = c.n_mels;
    j["n_audio_ctx"] = c.audio_ctx;
    j["n_text_ctx"] = c.max_context;
    j["d_model"] = c.dim;
    j["n_vocab"] = c.vocab_size;
    j["encoder_layers"] = c.encoder_layers;
    j["decoder_layers"] = c.n_layers;
    j["heads"] = c.n_heads;
    j["encoder_heads"] = c.encoder_heads;
    j["sot"] = j.value("decoder_start_token_id", nlohmann::json(nullptr));
    j["eos"] = j.value("eos_token_id", nlohmann::json(nullptr));
    j["format"] = model_format_name(files_->format());
    j["max_sequences"] = slots_;
    return j;
}

std::vector<ProfileRow> WhisperModel::profile(const std::string& what) {
    AKUNU_CHECK(what == "encoder" || what == "decoder",
                "profile takes \"encoder\" or \"decoder\", not \"" + what + "\"");
    if (what == "encoder") {
        AKUNU_CHECK(encoded_ > 0, "profile(\"encoder\") replays the last encode(): encode a window first");
        return profile_table(device_, encoded_ == 1 ? *enc_one_table_ : *enc_table_);
    }
    AKUNU_CHECK(last_rows_ > 0, "profile(\"decoder\") replays the last decoder step: decode a token first");
    return profile_table(device_, last_short_ ? *dec_short_table_ : *dec_table_);
}

void WhisperModel::encode(const float* mel, int windows, float* out) {
    AKUNU_CHECK(windows >= 1 && windows <= slots_, "encode takes 1 to " + std::to_string(slots_) +
                                                       " windows (max_sequences), not " + std::to_string(windows));
    const size_t frames = size_t(n_frames()), t = size_t(config_.audio_ctx), d = size_t(config_.dim);
    const size_t values = size_t(windows) * size_t(config_.n_mels) * frames;
    // A NaN or infinity would spread through every encoder state of its window, and through
    // cross-attention into each sequence that decodes it.
    for (size_t i = 0; i < values; ++i)
        AKUNU_CHECK(std::isfinite(mel[i]), "encode: mel value " + std::to_string(i % (values / size_t(windows))) +
                                               " of window " + std::to_string(i / (values / size_t(windows))) +
                                               " is not finite");
    mel_.write(mel, values * 4);
    const StepState conv{0, 0, uint32_t(size_t(windows) * frames), 0}, rows{0, 0, uint32_t(size_t(windows) * t), 0};
    enc_step_conv_.write(&conv, sizeof conv);
    enc_step_.write(&rows, sizeof rows);
    (windows == 1 ? enc_one_table_ : enc_table_)->set_tokens(uint32_t(windows));
    (windows == 1 ? enc_one_cl_ : enc_cl_)->submit_and_wait();
    encoded_ = windows;
    ++encodes_;
    enc_out_.read(out, size_t(windows) * t * d * 4);
}

void WhisperModel::check_slot(int seq, const char* what) const {
    AKUNU_CHECK(seq >= 0 && seq < slots_, std::string(what) + ": sequence " + std::to_string(seq) +
                                              " is out of range (max_sequences is " + std::to_string(slots_) + ")");
}

int WhisperModel::length(int seq) const {
    check_slot(seq, "length");
    return lengths_[size_t(seq)];
}

void WhisperModel::reset(int seq) {
    check_slot(seq, "reset");
    lengths_[size_t(seq)] = 0;
}

void WhisperModel::truncate(int seq, int n) {
    check_slot(seq, "truncate");
    AKUNU_CHECK(n >= 0 && n <= lengths_[size_t(seq)], "truncate: sequence " + std::to_string(seq) + " holds " +
                                                          std::to_string(lengths_[size_t(seq)]) +
                                                          " positions; cannot keep " + std::to_string(n));
    lengths_[size_t(seq)] = n;
}

// Replays the copy table with the given row counts (0: that copy does nothing); the index
// buffers hold the rows.
void WhisperModel::run_copies(uint32_t self_rows, uint32_t cross_rows, uint32_t audio_rows) {
    const StepState self{0, 0, self_rows, 0}, cross{0, 0, cross_rows, 0}, audio{0, 0, audio_rows, 0};
    self_step_.write(&self, sizeof self);
    cross_step_.write(&cross, sizeof cross);
    audio_step_.write(&audio, sizeof audio);
    copy_cl_->submit_and_wait();
}

void WhisperModel::set_audio(int seq, int window) {
    check_slot(seq, "set_audio");
    AKUNU_CHECK(window >= 0 && window < encoded_, "set_audio: window " + std::to_string(window) +
                                                      " is not one of the " + std::to_string(encoded_) +
                                                      " windows of the last encode()");
    const uint32_t t = uint32_t(config_.audio_ctx);
    uint32_t* src = staging_.data();
    uint32_t* dst = src + t;
    for (uint32_t i = 0; i < t; ++i) {
        src[i] = uint32_t(window) * t + i;
        dst[i] = uint32_t(seq) * t + i;
    }
    cross_src_.write(src, t * 4);
    cross_dst_.write(dst, t * 4);
    run_copies(0, 0, t);
    audio_[size_t(seq)] = encodes_ * slots_ + window;
}

void WhisperModel::copy_sequence(int src_seq, int dst_seq) {
    check_slot(src_seq, "copy_sequence");
    check_slot(dst_seq, "copy_sequence");
    if (src_seq == dst_seq) return;
    const uint32_t t = uint32_t(config_.audio_ctx), ctx = uint32_t(config_.max_context);
    const uint32_t n = uint32_t(lengths_[size_t(src_seq)]);
    uint32_t* p = staging_.data();
    for (uint32_t i = 0; i < n; ++i) {
        p[i] = uint32_t(src_seq) * ctx + i;
        p[n + i] = uint32_t(dst_seq) * ctx + i;
    }
    if (n > 0) {
        self_src_.write(p, n * 4);
        self_dst_.write(p + n, n * 4);
    }
    // The cross-attention K/V (the audio's 1500 rows in every layer) is copied only where the
    // destination does not hold the same window of the same encode already: beams of one
    // window, which reorder every step, copy only their own tokens' rows.
    const bool audio = audio_[size_t(src_seq)] >= 0 && audio_[size_t(dst_seq)] != audio_[size_t(src_seq)];
    for (uint32_t i = 0; i < t; ++i) {
        p[i] = uint32_t(src_seq) * t + i;
        p[t + i] = uint32_t(dst_seq) * t + i;
    }
    cross_src_.write(p, t * 4);
    cross_dst_.write(p + t, t * 4);
    run_copies(n, audio ? t : 0, 0);
    lengths_[size_t(dst_seq)] = int(n);
    audio_[size_t(dst_seq)] = audio_[size_t(src_seq)];
}

void WhisperModel::cross_attention(int layer, float* out) const {
    AKUNU_CHECK(layer >= 0 && layer < config_.n_layers, "cross_attention: layer " + std::to_string(layer) +
                                                            " is out of range (" + std::to_string(config_.n_layers) +
                                                            " decoder layers)");
    xattn_[size_t(layer)].read(out, size_t(last_rows_) * size_t(config_.n_heads) * size_t(config_.audio_ctx) * 4);
}

void WhisperModel::read_kv(int seq, int layer, float* out) const {
    check_slot(seq, "kv");
    AKUNU_CHECK(layer >= 0 && layer < config_.n_layers, "kv: layer " + std::to_string(layer) + " is out of range (" +
                                                            std::to_string(config_.n_layers) + " decoder layers)");
    const size_t row = 2 * size_t(config_.dim) * 4;
    self_kv_[size_t(layer)].read(out, size_t(lengths_[size_t(seq)]) * row,
                                 size_t(seq) * size_t(config_.max_context) * row);
}

}  // namespace akunu

namespace akunu {

void WhisperModel::mel(const float* samples, size_t n, float* out) {
    const size_t thirty_seconds = size_t(2 * config_.audio_ctx) * WhisperMel::kHop;
    if (!spectrogram_ || spectrogram_->max_samples() < n)
        spectrogram_ = std::make_unique<WhisperMel>(device_, filters_, std::max(n, thirty_seconds));
    spectrogram_->run(samples, n, out);
}

}  // namespace akunu
