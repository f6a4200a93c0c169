// WhisperModel's dispatch tables (whisper_model.h): the encoder over all windows, the decoder
// over the rows of one step, and the K/V copies. Built once at load; every kernel skips rows
// past its step's n_tokens.
#include <functional>

#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/whisper_model.h"
#include "akunu/formats/tiles.h"
#include "params.h"

namespace akunu {

namespace {

using R = TensorRole;

// The building blocks both stacks share, over `rows` rows of `step`.
struct StackOps {
    DispatchTable& t;
    const ModelConfig& c;
    std::function<const Weight&(R, int)> w;
    Binding step;
    size_t rows;

    // y[rows, n] (+)= x[rows, k] · W^T + bias, y rows ldy floats apart; b_role == w_role: no bias.
    void linear(R w_role, R b_role, int l, const Binding& x, size_t ldx, const Binding& y, size_t n, size_t k,
                size_t ldy, bool accumulate) const {
        const Weight& m = w(w_role, l);
        kernels::gemm(t, m.buffer, m.type, x, y, {rows, n, k, ldx, ldy}, step, accumulate);
        if (b_role != w_role) kernels::add_rows(t, y, w(b_role, l).buffer, y, DType::kF32, {n, rows, ldy, 0, ldy});
    }
    void norm(R w_role, R b_role, int l, const Buffer& x, const Buffer& y) const {
        kernels::layernorm(t, x, w(w_role, l).buffer, w(b_role, l).buffer, y, step, rows, size_t(c.dim), c.norm_eps);
    }
    // The FFN block: h += fc2(gelu(fc1(LN(h)) + b1)) + b2, through xn and ffn.
    void ffn(int l, const Buffer& h, const Buffer& xn, const Buffer& ffn_buf) const {
        const size_t d = size_t(c.dim), f = size_t(c.ffn_dim);
        norm(R::kFfnNorm, R::kFfnNormBias, l, h, xn);
        linear(R::kFfnUp, R::kFfnUpBias, l, xn, d, ffn_buf, f, d, f, false);
        kernels::activation(t, Activation::kGelu, ffn_buf, ffn_buf, rows * f);
        linear(R::kFfnDown, R::kFfnDownBias, l, ffn_buf, f, h, d, f, d, true);
    }
    // Q, K, V of LN(h) into the columns of qkv [rows, 3 d]; K has no bias unless the file has one.
    void qkv(int l, const Buffer& h, const Buffer& xn, const Buffer& qkv_buf, bool k_bias) const {
        const size_t d = size_t(c.dim);
        auto column = [&](size_t first) { return Binding::columns(qkv_buf, first * 4, d * 4, 3 * d * 4); };
        norm(R::kAttnNorm, R::kAttnNormBias, l, h, xn);
        linear(R::kAttnQ, R::kAttnQBias, l, xn, d, column(0), d, d, 3 * d, false);
        linear(R::kAttnK, k_bias ? R::kAttnKBias : R::kAttnK, l, xn, d, column(d), d, d, 3 * d, false);
        linear(R::kAttnV, R::kAttnVBias, l, xn, d, column(2 * d), d, d, 3 * d, false);
    }
    kernels::EncoderAttentionShape heads(size_t q_stride, uint32_t k_offset, uint32_t kv_stride) const {
        const uint32_t d = uint32_t(c.dim);
        return {uint32_t(c.n_heads),
                uint32_t(c.head_dim),
                uint32_t(rows),
                uint32_t(q_stride),
                k_offset,
                k_offset + d,
                d,
                c.attn_scale,
                kv_stride,
                0};
    }
};

}  // namespace

// The encoder over up to `e` windows (at most slots_, which the buffers hold).
std::unique_ptr<DispatchTable> WhisperModel::build_encoder_table(size_t e) {
    const ModelConfig& c = enc_config_;
    auto table = std::make_unique<DispatchTable>(*device_);
    DispatchTable& t = *table;
    const size_t frames = size_t(n_frames()), tt = size_t(c.max_context), d = size_t(c.dim);
    const size_t mels = size_t(c.n_mels), rows = e * tt;
    // Workgroup counts follow the windows of a call (DispatchTable::set_tokens(windows)).
    t.set_chunk_rows(uint32_t(e));
    auto w = [&](R role, int l) -> const Weight& { return weight(true, role, l); };
    const StackOps conv1{t, c, w, Binding(enc_step_conv_), e * frames};
    const StackOps ops{t, c, w, Binding(enc_step_), rows};

    t.set_label("conv1");
    const uint32_t f32 = uint32_t(frames), t32 = uint32_t(tt), d32 = uint32_t(d), m32 = uint32_t(mels);
    kernels::conv_gather(t, mel_, cols_, enc_step_conv_,
                         {uint32_t(e * frames), m32, 3, 1, 1, f32, f32, m32 * f32, f32, 1});
    conv1.linear(R::kConv1, R::kConv1Bias, -1, cols_, 3 * mels, conv_, d, 3 * mels, d, false);
    kernels::activation(t, Activation::kGelu, conv_, conv_, e * frames * d);
    t.set_label("conv2");
    kernels::conv_gather(t, conv_, cols_, enc_step_, {uint32_t(rows), d32, 3, 2, 1, f32, t32, f32 * d32, 1, d32});
    ops.linear(R::kConv2, R::kConv2Bias, -1, cols_, 3 * d, h_, d, 3 * d, d, false);
    kernels::activation(t, Activation::kGelu, h_, h_, rows * d);
    t.set_label("positions");
    const Weight& pos = w(R::kPositionEmbd, -1);
    kernels::embed(t, pos.buffer, pos.type, tt, enc_pos_, enc_step_, attn_, d, 1.0f, rows);
    kernels::add(t, h_, attn_, h_, DType::kF32, rows * d);
    const bool k_bias = enc_w_.count({R::kAttnKBias, 0}) > 0;
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string blk = "enc." + std::to_string(l) + ".";
        t.set_label(blk + "attn");
        ops.qkv(l, h_, xn_, qkv_, k_bias);
        kernels::window_attention(t, qkv_, qkv_, enc_seq_, enc_step_, attn_, ops.heads(3 * d, d32, 3 * d32), t32);
        ops.linear(R::kAttnOutput, R::kAttnOutputBias, l, attn_, d, h_, d, d, d, true);
        t.set_label(blk + "ffn");
        ops.ffn(l, h_, xn_, ffn_);
    }
    t.set_label("enc.output_norm");
    ops.norm(R::kOutputNorm, R::kOutputNormBias, -1, h_, enc_out_);
    // Each decoder layer's cross-attention K | V of every window, once per encode.
    const StackOps dec{t, config_, [&](R role, int l) -> const Weight& { return weight(false, role, l); },
                       Binding(enc_step_), rows};
    for (int l = 0; l < config_.n_layers; ++l) {
        t.set_label("dec." + std::to_string(l) + ".cross_kv");
        const Buffer& kv = win_kv_[size_t(l)];
        dec.linear(R::kCrossK, R::kCrossK, l, enc_out_, d, Binding::columns(kv, 0, d * 4, 8 * d), d, d, 2 * d, false);
        dec.linear(R::kCrossV, R::kCrossVBias, l, enc_out_, d, Binding::columns(kv, d * 4, d * 4, 8 * d), d, d, 2 * d,
                   false);
    }
    t.set_chunk_rows(0);
    return table;
}

// The decoder over up to `rows` rows (at most rows_, which the buffers hold).
std::unique_ptr<DispatchTable> WhisperModel::build_decoder_table(size_t rows) {
    const ModelConfig& c = config_;
    auto table = std::make_unique<DispatchTable>(*device_);
    DispatchTable& t = *table;
    const size_t d = size_t(c.dim), d2 = 2 * d;
    const uint32_t d32 = uint32_t(d);
    t.set_chunk_rows(uint32_t(rows));  // counts follow the rows of a call (set_tokens)
    auto w = [&](R role, int l) -> const Weight& { return weight(false, role, l); };
    const StackOps ops{t, c, w, Binding(dec_step_), rows};
    const Binding step(dec_step_);

    t.set_label("embeddings");
    const Weight& tok = w(R::kTokenEmbd, -1);
    const Weight& pos = w(R::kPositionEmbd, -1);
    kernels::embed(t, tok.buffer, tok.type, size_t(c.vocab_size), ids_, step, hd_, d, 1.0f, rows);
    kernels::embed(t, pos.buffer, pos.type, size_t(c.max_context), pos_, step, xd_, d, 1.0f, rows);
    kernels::add(t, hd_, xd_, hd_, DType::kF32, rows * d);
    const bool k_bias = dec_w_.count({R::kAttnKBias, 0}) > 0;
    const size_t self_rows = size_t(slots_) * size_t(c.max_context);
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string blk = "dec." + std::to_string(l) + ".";
        const Buffer& self_kv = self_kv_[size_t(l)];
        t.set_label(blk + "self_attn");
        ops.qkv(l, hd_, xd_, qkvd_, k_bias);
        // The rows' K | V into their slots' caches, then each row attends its slot's rows 0..pos.
        kernels::copy_rows(t, Binding::columns(qkvd_, d * 4, d2 * 4, 3 * d * 4), index_, self_kv, kv_rows_, step,
                           {uint32_t(rows), uint32_t(d2), uint32_t(3 * d), uint32_t(d2)}, rows, self_rows);
        kernels::encoder_attention(t, qkvd_, self_kv, self_seq_, step, attnd_, ops.heads(3 * d, 0, 2 * d32));
        ops.linear(R::kAttnOutput, R::kAttnOutputBias, l, attnd_, d, hd_, d, d, d, true);
        t.set_label(blk + "cross_attn");
        ops.norm(R::kCrossNorm, R::kCrossNormBias, l, hd_, xd_);
        ops.linear(R::kCrossQ, R::kCrossQBias, l, xd_, d, qd_, d, d, d, false);
        kernels::EncoderAttentionShape cross = ops.heads(d, 0, 2 * d32);
        cross.weights_stride = uint32_t(c.audio_ctx);
        const Binding weights(xattn_[size_t(l)]);
        // A step's few rows split each row's audio over chunks of keys; a prompt's rows, enough
        // workgroups already, one workgroup per (row, head).
        if (rows <= size_t(short_rows_))
            kernels::span_attention_split(t, qd_, cross_kv_[size_t(l)], cross_seq_, step, attnd_, cross, weights,
                                          xsplit_);
        else
            kernels::encoder_attention(t, qd_, cross_kv_[size_t(l)], cross_seq_, step, attnd_, cross, &weights);
        ops.linear(R::kCrossOutput, R::kCrossOutputBias, l, attnd_, d, hd_, d, d, d, true);
        t.set_label(blk + "ffn");
        ops.ffn(l, hd_, xd_, ffnd_);
    }
    t.set_label("output");
    ops.norm(R::kOutputNorm, R::kOutputNormBias, -1, hd_, xd_);
    // Logits only for the rows asked for (head_rows), gathered into xh.
    kernels::copy_rows(t, xd_, head_rows_, xh_, index_, head_step_, {uint32_t(rows), d32, d32, d32}, rows, rows);
    const auto head = dec_w_.find({R::kOutput, -1});
    const Weight& out = head != dec_w_.end() ? head->second : tok;
    const size_t vocab = size_t(c.vocab_size), text = text_head_ ? size_t(text_head_.shape[0]) : 0;
    if (text > 0)  // the text tokens' logits through the Q8_0 copy (text_head_), the rest as stored
        kernels::gemm(t, text_head_.buffer, text_head_.type, xh_, logits_, {rows, text, d, d, vocab}, head_step_);
    const size_t skipped = text > 0 ? text / cpu::kTileRows * cpu::tile_bytes(*cpu::tile_layout(out.type), d) : 0;
    kernels::gemm(t, Binding(out.buffer, skipped), out.type, xh_, Binding(logits_, text * 4),
                  {rows, vocab - text, d, d, vocab}, head_step_);
    t.set_chunk_rows(0);
    return table;
}

void WhisperModel::build_copy_table() {
    copy_table_ = std::make_unique<DispatchTable>(*device_);
    DispatchTable& t = *copy_table_;
    const uint32_t d2 = uint32_t(2 * config_.dim), ctx = uint32_t(config_.max_context);
    const uint32_t tt = uint32_t(config_.audio_ctx), s = uint32_t(slots_);
    for (int l = 0; l < config_.n_layers; ++l) {
        t.set_label("dec." + std::to_string(l) + ".copy");
        const Buffer &self = self_kv_[size_t(l)], &cross = cross_kv_[size_t(l)];
        kernels::copy_rows(t, self, self_src_, self, self_dst_, self_step_, {ctx, d2, d2, d2}, s * ctx, s * ctx);
        kernels::copy_rows(t, cross, cross_src_, cross, cross_dst_, cross_step_, {tt, d2, d2, d2}, s * tt, s * tt);
        kernels::copy_rows(t, win_kv_[size_t(l)], cross_src_, cross, cross_dst_, audio_step_, {tt, d2, d2, d2}, s * tt,
                           s * tt);
    }
}

// ---- decode ----------------------------------------------------------------------------------

void WhisperModel::decode(const std::vector<int>& seqs, const std::vector<std::vector<int>>& tokens, bool all_logits,
                          float* out) {
    AKUNU_CHECK(seqs.size() == tokens.size(), "decode: " + std::to_string(seqs.size()) + " sequences but " +
                                                  std::to_string(tokens.size()) + " token lists");
    AKUNU_CHECK(!seqs.empty(), "decode: no sequences");
    std::vector<bool> seen(size_t(slots_), false);
    for (size_t i = 0; i < seqs.size(); ++i) {
        const int s = seqs[i];
        check_slot(s, "decode");
        AKUNU_CHECK(!seen[size_t(s)], "decode: sequence " + std::to_string(s) + " is listed twice");
        seen[size_t(s)] = true;
        AKUNU_CHECK(audio_[size_t(s)] >= 0, "decode: sequence " + std::to_string(s) +
                                                " has no audio; call set_audio(seq, window) after encode() first");
        AKUNU_CHECK(!tokens[i].empty(), "decode: the token list of sequence " + std::to_string(s) + " is empty");
        AKUNU_CHECK(lengths_[size_t(s)] + int(tokens[i].size()) <= config_.max_context,
                    "decode: sequence " + std::to_string(s) + " would hold " +
                        std::to_string(lengths_[size_t(s)] + tokens[i].size()) + " positions; the decoder has " +
                        std::to_string(config_.max_context) + " (n_text_ctx)");
        for (int id : tokens[i])
            AKUNU_CHECK(id >= 0 && id < config_.vocab_size, "decode: token id " + std::to_string(id) +
                                                                " is out of range for a vocabulary of " +
                                                                std::to_string(config_.vocab_size));
    }
    // Rows go in order, a submission of up to rows_ at a time; logits rows follow them.
    const size_t vocab = size_t(config_.vocab_size);
    std::vector<size_t> heads;
    heads.reserve(size_t(rows_));
    size_t used = 0, out_row = 0;
    auto flush = [&] {
        run_rows(0, used, heads);
        logits_.read(out + out_row * vocab, heads.size() * vocab * 4);
        out_row += heads.size();
        used = 0;
        heads.clear();
    };
    uint32_t* ids = staging_.data();
    uint32_t *pos = ids + rows_, *kv = pos + rows_, *self = kv + rows_, *cross = self + 2 * rows_;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const uint32_t s = uint32_t(seqs[i]);
        // The first slot that holds the same audio (beams of one window hold copies): rows of
        // one window then read one span, which the attention kernels read once for them all.
        uint32_t audio = 0;
        while (audio_[audio] != audio_[s]) ++audio;
        for (size_t j = 0; j < tokens[i].size(); ++j) {
            if (used == size_t(rows_)) flush();
            const uint32_t p = uint32_t(lengths_[s]++);
            ids[used] = uint32_t(tokens[i][j]);
            pos[used] = p;
            kv[used] = s * uint32_t(config_.max_context) + p;
            self[2 * used] = s * uint32_t(config_.max_context);
            self[2 * used + 1] = p + 1;
            cross[2 * used] = audio * uint32_t(config_.audio_ctx);
            cross[2 * used + 1] = uint32_t(config_.audio_ctx);
            if (all_logits || j + 1 == tokens[i].size()) heads.push_back(used);
            ++used;
        }
    }
    if (used > 0) flush();
}

// Writes the staged metadata of rows [first, first + n) and replays the decoder table, with
// logits for the rows in `heads`.
void WhisperModel::run_rows(size_t first, size_t n, const std::vector<size_t>& heads) {
    uint32_t* ids = staging_.data();
    uint32_t *pos = ids + rows_, *kv = pos + rows_, *self = kv + rows_, *cross = self + 2 * rows_;
    uint32_t* head = cross + 2 * rows_;
    for (size_t i = 0; i < heads.size(); ++i) head[i] = uint32_t(heads[i]);
    ids_.write(ids + first, n * 4);
    pos_.write(pos + first, n * 4);
    kv_rows_.write(kv + first, n * 4);
    self_seq_.write(self + 2 * first, n * 8);
    cross_seq_.write(cross + 2 * first, n * 8);
    if (!heads.empty()) head_rows_.write(head, heads.size() * 4);
    const StepState rows{0, 0, uint32_t(n), 0}, logit_rows{0, 0, uint32_t(heads.size()), 0};
    dec_step_.write(&rows, sizeof rows);
    head_step_.write(&logit_rows, sizeof logit_rows);
    const bool short_step = n <= size_t(short_rows_);
    (short_step ? dec_short_table_ : dec_table_)->set_tokens(uint32_t(n));
    (short_step ? dec_short_cl_ : dec_cl_)->submit_and_wait();
    last_rows_ = int(n);
    last_short_ = short_step;
}

}  // namespace akunu
