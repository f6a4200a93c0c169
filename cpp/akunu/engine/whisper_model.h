// WhisperModel: a loaded Whisper encoder-decoder (ArchDescriptor "whisper" and its encoder
// stack "whisper_encoder"), run as three recorded dispatch tables.
//
// The encoder table turns up to max_sequences windows of log-mel frames [n_mels, 2 T] into
// encoder states [T, dim] (T = audio_ctx), all windows' rows in each GEMM:
//   x = gelu(conv2(gelu(conv1(mel))))  (Conv1d k3: stride 1, then stride 2; im2col + GEMM)
//   h = x + pos[t];  per layer: h += O(attn(LN(h)));  h += fc2(gelu(fc1(LN(h))))
//   out = LN(h);  and per decoder layer the cross-attention K and V of every window.
// The decoder table runs the rows of one step over up to max_sequences sequence slots: each
// row carries its token, slot and position, so that rows of different slots (and several rows
// of one slot, a prompt) share every GEMM:
//   h = tok[id] + pos[p];  per layer: h += O(self_attn(LN(h)) over the slot's cache rows 0..p)
//   h += O(cross_attn(LN(h)) over the slot's audio);  h += fc2(gelu(fc1(LN(h))))
//   logits = LN(h) · tok^T  (the head tied to the embedding), for the rows asked for.
// The copy table moves K/V rows: a window's cross K/V into a slot (set_audio), one slot's
// caches into another (copy_sequence). Per call the host writes row metadata and step states
// and replays; nothing is allocated.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "akunu/engine/profile.h"
#include "akunu/engine/weights.h"
#include "akunu/engine/whisper_chain.h"
#include "akunu/engine/whisper_mel.h"
#include "akunu/formats/model_files.h"
#include "akunu/model/model_config.h"
#include "akunu/vulkan/command_list.h"

namespace akunu {

struct WhisperOptions {
    std::string device;  // selector, as Device::create
    std::string tuning;  // "key=value,..." over AKUNU_TUNE (core/tuning.h)
    int max_sequences = 8;  // decoder slots, and windows one encode() takes
    std::function<void(const std::string& stage, size_t done, size_t total)> progress;
};

// Buffer sizes of a Whisper model with `slots` sequence slots and `rows` decoder rows per
// submission: what WhisperModel allocates and akunu.plan() reports.
struct WhisperLayout {
    std::vector<std::pair<std::string, uint64_t>> encoder;  // activations of `slots` windows
    std::vector<std::pair<std::string, uint64_t>> decoder;  // activations of `rows` rows
    std::vector<std::pair<std::string, uint64_t>> kv;  // self and cross K/V, per-window K/V
};
WhisperLayout whisper_layout(const ModelConfig& c, int slots, int rows);
// Rows of the short decoder table (a step of every slot): at most `rows`.
int whisper_short_rows(int slots, int rows);

// What WhisperModel uploads for one stack (the encoder's where `encoder`) on `d`, and what
// akunu.plan() counts: the file's tensors in the device's layout, with tuning encoder_q8 (CPU
// backend) the matrices that run on every row of the encoder's windows as Q8_0 tiles
// (in_q8_tiles): the encoder's matrices and the decoder's cross-attention K and V, where their
// rows fit whole blocks (conv1's 3 x 80 do not).
std::vector<UploadItem> whisper_uploads(const DeviceProfile& d, const ModelFiles& files, const ModelConfig& c,
                                        bool encoder);
// Tuning head_q8 (CPU backend): the head among a decoder's `items` (a float head in tiles) and
// how many of its rows get a Q8_0 copy beside it: the text tokens', ids below the model's
// <|endoftext|>, in whole tiles; rows 0 (and no head) for none.
struct WhisperHeadCopy {
    const UploadItem* head = nullptr;
    size_t rows = 0;
};
WhisperHeadCopy whisper_head_q8(const DeviceProfile& d, const ModelFiles& files, const std::vector<UploadItem>& items);

class WhisperModel {
public:
    static std::unique_ptr<WhisperModel> load(const std::string& path, const WhisperOptions& options);

    const ModelConfig& config() const { return config_; }  // the decoder stack, with the encoder's sizes
    const ModelConfig& encoder_config() const { return enc_config_; }
    const ModelFiles& files() const { return *files_; }
    Device& device() const { return *device_; }
    const std::shared_ptr<Device>& device_ptr() const { return device_; }
    int max_sequences() const { return slots_; }
    int decode_rows() const { return rows_; }  // rows one decoder submission takes
    int audio_ctx() const { return config_.audio_ctx; }
    int n_frames() const { return 2 * config_.audio_ctx; }  // mel frames of a window
    size_t weight_bytes() const { return weight_bytes_; }
    const DispatchTable& encoder_table() const { return *enc_table_; }
    // The HF config (config.json, with generation_config.json's keys where config.json has
    // none) plus akunu's names: n_mels, n_audio_ctx, n_text_ctx, d_model, n_vocab,
    // encoder_layers, decoder_layers, heads, encoder_heads, sot, eos, format, max_sequences.
    nlohmann::json config_json() const;
    const DispatchTable& decoder_table() const { return *dec_table_; }

    // out[windows, audio_ctx, dim] = the encoder states of mel[windows, n_mels, n_frames]; each
    // window's cross-attention K/V are kept for set_audio. 1 <= windows <= max_sequences.
    void encode(const float* mel, int windows, float* out);
    int encoded_windows() const { return encoded_; }
    // Slot `seq` attends to window `window` of the last encode() from now on.
    void set_audio(int seq, int window);
    void reset(int seq);  // length 0 (the audio stays)
    int length(int seq) const;
    void truncate(int seq, int n);  // keeps the first n positions
    void copy_sequence(int src, int dst);  // dst's caches, length and audio become src's

    // Appends tokens[i] to slot seqs[i] (distinct slots with audio) and computes logits:
    // out[seqs.size(), n_vocab] for the last row of each, or with all_logits out[sum of rows,
    // n_vocab] for every row in order. Checks everything before anything runs.
    void decode(const std::vector<int>& seqs, const std::vector<std::vector<int>>& tokens, bool all_logits, float* out);
    // Greedy decoding in chains (whisper_chain.h): each request's slot feeds its token, then
    // picks under its rules until <|endoftext|>, max_new picks or a full cache, chain_steps()
    // steps per submission. Slots are distinct and have audio; checks everything before anything
    // runs. Throws when chain_steps() is 0 (tuning whisper_chain=0).
    std::vector<GreedyResult> decode_greedy(const std::vector<GreedyRequest>& requests, const GreedySpecials& specials);
    int chain_steps() const { return chain_.steps; }
    // Beam search's step (whisper_beams.cpp): each request's slot feeds its token, and the top_k
    // likeliest ids of its row under its rules after its history come back, picked on the device
    // (the logits stay there). Slots are distinct and have audio; top_k is 1 to
    // min(16, chain_steps()); checks everything before anything runs.
    std::vector<TopCandidates> decode_top(const std::vector<BeamRequest>& requests, int top_k,
                                          const GreedySpecials& specials);
    // out[n_mels, n / 160]: the log-mel spectrogram of n 16-kHz samples (whisper_mel.h) with the
    // model's filter bank. The spectrogram's buffers are made on first use for at least 30 s
    // and grow to the longest clip asked for (they scale with its length).
    void mel(const float* samples, size_t n, float* out);
    const std::vector<float>& mel_filters() const { return filters_; }  // [n_mels, 201] f32

    // Device time of each command of the last encode() ("encoder") or of the last decoder
    // submission ("decoder"), replayed with timestamps after untimed replays that keep a GPU at
    // its clocks (profile_table): the replay computes what that call computed, into the same
    // rows, so no state changes. Throws before the first such call.
    std::vector<ProfileRow> profile(const std::string& what);

    // Rows of the last decoder submission (the last decode(), or its last part when it took
    // more than decode_rows() rows).
    int last_rows() const { return last_rows_; }
    // out[last_rows(), heads, audio_ctx]: the cross-attention softmax of `layer` for those rows.
    void cross_attention(int layer, float* out) const;
    // out[length(seq), 2, dim]: K then V of each cached position of `seq` in `layer`.
    void read_kv(int seq, int layer, float* out) const;

private:
    WhisperModel() = default;
    const Weight& weight(bool encoder, TensorRole role, int layer = -1) const;
    void upload(bool encoder, const ModelConfig& c, const WhisperOptions& options);
    void allocate();
    std::unique_ptr<DispatchTable> build_encoder_table(size_t windows);
    std::unique_ptr<DispatchTable> build_decoder_table(size_t rows);
    void build_copy_table();
    void check_slot(int seq, const char* what) const;
    void run_copies(uint32_t self_rows, uint32_t cross_rows, uint32_t audio_rows);
    void run_rows(size_t first, size_t n, const std::vector<size_t>& heads);
    void allocate_chain();  // whisper_chain.cpp
    void record_chain(const GreedySpecials& specials);
    std::unique_ptr<CommandList> record_picks(const GreedySpecials& specials, int steps, uint32_t top_k) const;
    void check_greedy(const std::vector<GreedyRequest>& requests, const GreedySpecials& specials,
                      const std::string& what = "decode_greedy") const;
    void start_greedy(const std::vector<GreedyRequest>& requests);

    std::shared_ptr<Device> device_;
    std::shared_ptr<ModelFiles> files_;
    ModelConfig config_, enc_config_;
    std::map<std::pair<TensorRole, int>, Weight> dec_w_, enc_w_;  // (role, layer; -1: stack-level)
    // Tuning head_q8 (CPU backend): the head's rows of the text tokens (ids below <|endoftext|>,
    // in whole tiles) as Q8_0 tiles; the logits of the special and timestamp tokens, which the
    // rules and the timestamps compare among themselves, keep the head as stored.
    Weight text_head_;
    size_t weight_bytes_ = 0;
    int slots_ = 0;  // sequence slots and encoder windows
    int rows_ = 0;  // decoder rows per submission
    int short_rows_ = 0;  // rows of the short decoder table, which a step of every slot takes
    int encoded_ = 0;  // windows of the last encode()
    int last_rows_ = 0;
    bool last_short_ = false;  // the last decoder submission ran the short table
    std::vector<int> lengths_;  // [slots] cached positions
    // [slots] the audio each slot attends to: -1 none, else encodes_ * slots_ + window at its
    // set_audio (slots with equal ids hold equal cross K/V).
    std::vector<int64_t> audio_;
    int64_t encodes_ = 0;  // encode() calls so far

    // Encoder (E = slots windows, F = n_frames, T = audio_ctx, d = dim).
    Buffer mel_;  // [E, n_mels, F] f32
    Buffer enc_step_conv_, enc_step_;  // StepState: n_tokens = windows * F, windows * T
    Buffer cols_;  // [E F, 3 n_mels] or [E T, 3 d] f32 im2col columns
    Buffer conv_;  // [E F, d] f32 conv1's output
    Buffer h_, xn_, attn_;  // [E T, d] f32 residual stream, normed rows, attention output
    Buffer qkv_;  // [E T, 3 d] f32
    Buffer ffn_;  // [E T, encoder ffn] f32
    Buffer enc_seq_;  // [E T, 2] u32 (window start, T)
    Buffer enc_pos_;  // [E T] u32 t
    Buffer enc_out_;  // [E T, d] f32
    std::vector<Buffer> win_kv_;  // [decoder layers] [E T, 2 d] f32 cross K | V of each window
    // Decoder (R = rows_, S = slots, C = n_text_ctx).
    Buffer ids_, pos_, self_seq_, cross_seq_, kv_rows_, head_rows_;  // [R] u32, [R, 2] u32 for *_seq
    Buffer index_;  // [max(R, C, T)] u32 0, 1, 2, ...
    Buffer dec_step_, head_step_;  // StepState: n_tokens = rows, rows with logits
    Buffer hd_, xd_, qd_, attnd_, xh_;  // [R, d] f32
    Buffer qkvd_;  // [R, 3 d] f32
    Buffer ffnd_;  // [R, decoder ffn] f32
    Buffer logits_;  // [R, vocab] f32
    Buffer xsplit_;  // [short rows, heads, AKUNU_SPAN_MAX_CHUNKS, head_dim + 2] f32 cross-attention chunk sums
    std::vector<Buffer> self_kv_;  // [decoder layers] [S C, 2 d] f32 K | V per slot and position
    std::vector<Buffer> cross_kv_;  // [decoder layers] [S T, 2 d] f32
    std::vector<Buffer> xattn_;  // [decoder layers] [R, heads, T] f32 cross-attention weights
    // Copies (copy table): self rows, then cross rows from a slot or from a window.
    Buffer self_src_, self_dst_;  // [C] u32
    Buffer cross_src_, cross_dst_;  // [T] u32
    Buffer self_step_, cross_step_, audio_step_;  // StepState: n_tokens = rows to copy
    std::vector<uint32_t> staging_;  // [8 R + 2 T] u32 row metadata (sized once)

    // The decoder twice: for rows_ rows, and for short_rows_ (a step: the kernels whose work the
    // CPU backend runs at its recorded size, elementwise ones, then cover those rows only).
    // Likewise the encoder for max_sequences windows and for one.
    std::unique_ptr<DispatchTable> enc_table_, enc_one_table_, dec_table_, dec_short_table_, copy_table_;
    std::unique_ptr<CommandList> enc_cl_, enc_one_cl_, dec_cl_, dec_short_cl_, copy_cl_;

    WhisperChain chain_;  // greedy chains (whisper_chain.cpp)

    std::vector<float> filters_;  // the mel filter bank (ModelFiles::mel_filters)
    std::unique_ptr<WhisperMel> spectrogram_;  // made on the first mel()
};

}  // namespace akunu
