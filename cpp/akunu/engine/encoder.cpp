// Encoder loading, its dispatch table, and packing texts into batches.
#include "akunu/engine/encoder.h"

#include <algorithm>
#include <numeric>

#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/validate.h"
#include "params.h"

namespace akunu {

static_assert(int(Pooling::kMean) == 0 && int(Pooling::kCls) == 1, "pool.comp reads these values");

std::unique_ptr<Encoder> Encoder::load(const std::string& path, const EncoderOptions& options) {
    auto stage = [&](const char* name) {
        if (options.progress) options.progress(name, 0, 0);
    };
    std::unique_ptr<Encoder> e(new Encoder());
    stage("format");
    e->files_ = ModelFiles::open(path);
    AKUNU_CHECK(e->files_->has_weights(), "'" + path + "' holds a config but no weights");
    e->config_ = load_config(*e->files_);
    const ModelConfig& c = e->config_;
    const ArchDescriptor& a = c.arch();
    AKUNU_CHECK(!a.encoder, path + ": " + c.architecture +
                                " is an encoder-decoder (speech to text); load it with akunu.WhisperModel "
                                "(WhisperModel::load)");
    AKUNU_CHECK(!a.causal, path + ": " + c.architecture +
                               " is a causal language model, not an encoder; it generates text "
                               "(akunu.Model.generate / Model::load) but has no embed()");
    AKUNU_CHECK(
        a.norm == NormKind::kLayer && a.norm_after_residual && !a.gated_ffn,
        path + ": " + c.architecture + ": the encoder runs post-norm LayerNorm blocks with an ungated FFN only");
    AKUNU_CHECK(c.n_kv_heads == c.n_heads, path + ": encoders with grouped K/V heads are not supported");
    AKUNU_CHECK(c.max_context > 0 && c.max_context <= AKUNU_ENCODER_MAX_KEYS,
                path + ": max positions " + std::to_string(c.max_context) +
                    " is outside what the encoder attention holds (1 to " + std::to_string(AKUNU_ENCODER_MAX_KEYS) +
                    ")");
    validate_model(*e->files_, c);
    AKUNU_CHECK(options.batch_tokens >= 0, "batch_tokens must be positive (0: the default)");
    e->rows_ = options.batch_tokens > 0 ? options.batch_tokens : std::max(512, c.max_context);
    AKUNU_CHECK(e->rows_ >= c.max_context, "batch_tokens " + std::to_string(e->rows_) +
                                               " must hold the longest text (" + std::to_string(c.max_context) +
                                               " tokens, the model's max positions)");

    stage("device");
    e->device_ = Device::create(options.device, options.tuning);
    stage("weights");
    const auto items = plan_weight_uploads(*e->files_, c, e->device_->profile().weight_tiles);
    check_weight_types(items, e->device_->profile(), path);
    for (size_t i = 0; i < items.size(); ++i) {
        const UploadItem& it = items[i];
        e->weights_[{it.role, it.layer}] = upload_weight(e->device_, *e->files_, it);
        e->weight_bytes_ += it.bytes;
        if (options.progress) options.progress("weights", i + 1, items.size());
    }

    stage("scratch");
    const size_t rows = size_t(e->rows_), dim = size_t(c.dim), f32 = 4;
    auto alloc = [&](size_t bytes) { return Buffer::allocate(e->device_, bytes); };
    e->ids_ = alloc(rows * 4);
    e->positions_ = alloc(rows * 4);
    e->seq_ = alloc(rows * 2 * 4);
    e->texts_ = alloc((AKUNU_POOL_HEADER + 2 * rows) * 4);
    e->step_ = alloc(sizeof(StepState));
    e->h_ = alloc(rows * dim * f32);
    e->tmp_ = alloc(rows * dim * f32);
    e->qkv_ = alloc(rows * (size_t(c.q_dim) + 2 * size_t(c.kv_dim)) * f32);
    e->attn_ = alloc(rows * size_t(c.q_dim) * f32);
    e->ffn_ = alloc(rows * size_t(c.ffn_dim) * f32);
    e->pooled_ = alloc(rows * dim * f32);
    e->types_ = alloc(rows * 4);
    e->staging_.assign(rows * 3, 0);
    // Token type ids are all 0 (one segment, as transformers' default) and never change.
    const std::vector<uint32_t> zeros(rows, 0);
    e->types_.write(zeros.data(), rows * 4);

    stage("dispatch table");
    e->build_table();
    e->cl_ = std::make_unique<CommandList>(e->device_, 0);
    e->cl_->begin();
    e->table_->record(*e->cl_);
    e->cl_->end();
    stage("warmup");
    std::vector<float> warm(dim);
    e->embed({{0}}, Pooling::kMean, false, warm.data());  // runs every pipeline once
    return e;
}

const Weight& Encoder::weight(TensorRole role, int layer) const {
    const auto it = weights_.find({role, layer});
    AKUNU_CHECK(it != weights_.end(),
                files_->path() + ": tensor " +
                    tensor_name(config_.arch(), role, std::max(layer, 0), files_->gguf() != nullptr) + " is missing");
    return it->second;
}

// The forward pass over `rows_` token rows; every kernel skips rows past step.n_tokens.
void Encoder::build_table() {
    const ModelConfig& c = config_;
    table_ = std::make_unique<DispatchTable>(*device_);
    DispatchTable& t = *table_;
    const size_t rows = size_t(rows_), dim = size_t(c.dim), q_dim = size_t(c.q_dim), ffn = size_t(c.ffn_dim);
    const size_t qkv_row = q_dim + 2 * size_t(c.kv_dim);
    const Binding step(step_);
    using R = TensorRole;
    auto embed = [&](R role, const Buffer& ids, const Buffer& out) {
        const Weight& w = weight(role);
        kernels::embed(t, w.buffer, w.type, size_t(w.shape[0]), ids, step, out, dim, 1.0f, rows);
    };
    // y[rows, n] (+)= x[rows, k] · W^T + bias, y rows ldy floats apart.
    auto linear = [&](R w_role, R b_role, int l, const Binding& x, const Binding& y, size_t n, size_t k, size_t ldy,
                      bool accumulate) {
        const Weight& w = weight(w_role, l);
        kernels::gemm(t, w.buffer, w.type, x, y, {rows, n, k, k, ldy}, step, accumulate);
        kernels::add_rows(t, y, weight(b_role, l).buffer, y, DType::kF32, {n, rows, ldy, 0, ldy});
    };
    auto norm = [&](R w_role, R b_role, int l) {
        kernels::layernorm(t, h_, weight(w_role, l).buffer, weight(b_role, l).buffer, h_, step, rows, dim, c.norm_eps);
    };

    t.set_label("embeddings");
    embed(R::kTokenEmbd, ids_, h_);
    embed(R::kPositionEmbd, positions_, tmp_);
    kernels::add(t, h_, tmp_, h_, DType::kF32, rows * dim);
    if (weights_.count({R::kTokenTypes, -1})) {
        embed(R::kTokenTypes, types_, tmp_);
        kernels::add(t, h_, tmp_, h_, DType::kF32, rows * dim);
    }
    norm(R::kEmbdNorm, R::kEmbdNormBias, -1);
    auto column = [&](size_t first) { return Binding::columns(qkv_, first * 4, q_dim * 4, qkv_row * 4); };
    for (int l = 0; l < c.n_layers; ++l) {
        const std::string blk = "blk." + std::to_string(l) + ".";
        t.set_label(blk + "attn_qkv");
        linear(R::kAttnQ, R::kAttnQBias, l, h_, column(0), q_dim, dim, qkv_row, false);
        linear(R::kAttnK, R::kAttnKBias, l, h_, column(q_dim), q_dim, dim, qkv_row, false);
        linear(R::kAttnV, R::kAttnVBias, l, h_, column(2 * q_dim), q_dim, dim, qkv_row, false);
        t.set_label(blk + "attention");
        kernels::encoder_attention(t, qkv_, qkv_, seq_, step, attn_,
                                   {uint32_t(c.n_heads), uint32_t(c.head_dim), uint32_t(rows), uint32_t(qkv_row),
                                    uint32_t(q_dim), uint32_t(2 * q_dim), uint32_t(q_dim), c.attn_scale});
        t.set_label(blk + "attn_output");
        linear(R::kAttnOutput, R::kAttnOutputBias, l, attn_, h_, dim, q_dim, dim, true);  // the residual add
        norm(R::kPostAttnNorm, R::kPostAttnNormBias, l);
        t.set_label(blk + "ffn");
        linear(R::kFfnUp, R::kFfnUpBias, l, h_, ffn_, ffn, dim, ffn, false);
        kernels::activation(t, c.arch().activation, ffn_, ffn_, rows * ffn);
        linear(R::kFfnDown, R::kFfnDownBias, l, ffn_, h_, dim, ffn, dim, true);
        norm(R::kPostFfnNorm, R::kPostFfnNormBias, l);
    }
    t.set_label("pool");
    kernels::pool(t, h_, texts_, pooled_, rows, dim, rows);
}

void Encoder::embed(const std::vector<std::vector<int>>& texts, Pooling pooling, bool normalize, float* out) {
    // Every text is checked before anything runs, so a bad one leaves nothing half done.
    for (size_t i = 0; i < texts.size(); ++i) {
        const auto& ids = texts[i];
        AKUNU_CHECK(!ids.empty(), "text " + std::to_string(i) + " has no tokens");
        AKUNU_CHECK(int(ids.size()) <= config_.max_context,
                    "text " + std::to_string(i) + " has " + std::to_string(ids.size()) +
                        " tokens; the model takes at most " + std::to_string(config_.max_context) +
                        " (its max positions)");
        for (int id : ids)
            AKUNU_CHECK(id >= 0 && id < config_.vocab_size,
                        "text " + std::to_string(i) + ": token id " + std::to_string(id) +
                            " is out of range for a vocabulary of " + std::to_string(config_.vocab_size));
    }
    // Texts go back to back into batches of up to rows_ token rows (and so up to rows_ texts).
    size_t first = 0, used = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
        const size_t n = texts[i].size();
        if (used + n > size_t(rows_)) {
            run_batch(first, i - first, used, pooling, normalize, out);
            first = i;
            used = 0;
        }
        const uint32_t start = uint32_t(used);
        ids_.write(texts[i].data(), n * 4, used * 4);  // ids are checked non-negative: int and u32 agree
        for (size_t r = 0; r < n; ++r) {
            staging_[2 * (used + r)] = start;
            staging_[2 * (used + r) + 1] = uint32_t(n);
        }
        const uint32_t text[2] = {start, uint32_t(n)};
        texts_.write(text, sizeof text, (AKUNU_POOL_HEADER + 2 * (i - first)) * 4);
        used += n;
    }
    if (used > 0) run_batch(first, texts.size() - first, used, pooling, normalize, out);
}

// Runs the packed rows [0, n_rows) of texts [first_text, first_text + n_texts) and reads their
// embeddings into out[first_text:].
void Encoder::run_batch(size_t first_text, size_t n_texts, size_t n_rows, Pooling pooling, bool normalize, float* out) {
    const uint32_t header[AKUNU_POOL_HEADER] = {uint32_t(n_texts), uint32_t(pooling), normalize ? 1u : 0u, 0};
    texts_.write(header, sizeof header);
    seq_.write(staging_.data(), n_rows * 2 * 4);
    // Positions restart in each text: a row's index minus its text's start.
    uint32_t* positions = staging_.data() + 2 * size_t(rows_);
    for (size_t r = 0; r < n_rows; ++r) positions[r] = uint32_t(r) - staging_[2 * r];
    positions_.write(positions, n_rows * 4);
    const StepState st{0, 0, uint32_t(n_rows), 0};
    step_.write(&st, sizeof st);
    cl_->submit_and_wait();
    pooled_.read(out + first_text * size_t(config_.dim), n_texts * size_t(config_.dim) * 4);
}

}  // namespace akunu
