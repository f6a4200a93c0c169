// Model loading and the per-token dispatch table.
#include "akunu/model.h"

#include <cmath>
#include <cstring>

#include "akunu/device.h"
#include "akunu/error.h"
#include "akunu/kernels.h"
#include "akunu/validate.h"
#include "params.h"

namespace akunu {

namespace {

// cos/sin of pos * inv_freq[i], the angle formed in f32 as transformers forms it.
void fill_rope_tables(Buffer& cos_b, Buffer& sin_b, const std::vector<float>& inv_freq, int context) {
    const size_t half = inv_freq.size();
    std::vector<float> c(size_t(context) * half), s(c.size());
    for (int pos = 0; pos < context; ++pos)
        for (size_t i = 0; i < half; ++i) {
            const float angle = float(pos) * inv_freq[i];
            c[size_t(pos) * half + i] = float(std::cos(double(angle)));
            s[size_t(pos) * half + i] = float(std::sin(double(angle)));
        }
    cos_b.write(c.data(), c.size() * 4);
    sin_b.write(s.data(), s.size() * 4);
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
    std::unique_ptr<Model> m(new Model());
    auto stage = [&](const char* name) {
        if (options.progress) options.progress(name, 0, 0);
    };
    // Stages 3, 5, 6, 10: format, config, architecture, validation, then the plan, all before
    // anything is allocated on the device.
    stage("format");
    m->files_ = ModelFiles::open(path);
    AKUNU_CHECK(m->files_->has_weights(), "'" + path + "' holds a config but no weights");
    m->config_ = load_config(*m->files_);
    const ArchDescriptor& arch = m->config_.arch();
    AKUNU_CHECK(arch.causal, m->config_.architecture + " is an encoder; decoding needs a causal language model");
    AKUNU_CHECK(m->config_.final_softcap == 0, m->config_.architecture + ": final-logit soft-capping is not implemented yet");
    validate_model(*m->files_, m->config_);
    AKUNU_CHECK(options.context > 0, "context must be positive");
    m->context_ = std::min(options.context, m->config_.max_context);
    if (const GgufFile* g = m->files_->gguf())
        if (const GgufValue* e = g->find("tokenizer.ggml.eos_token_id")) m->eos_id_ = int(e->as_int("tokenizer.ggml.eos_token_id"));

    stage("device");
    m->device_ = Device::create(options.device);
    // Chain length: long chains amortise a submission on GPUs; lavapipe gains little from them.
    m->chain_ = options.chain > 0 ? options.chain : (m->device_->profile().type == DeviceType::kCpu ? 4 : 16);
    AKUNU_CHECK(m->chain_ <= 256, "chain length " + std::to_string(m->chain_) + " is out of range (1 to 256)");
    m->chain_ = std::min(m->chain_, m->context_);
    PlanOptions po;
    po.context = m->context_;
    po.max_chain = m->chain_;
    po.prefill_chunk = 1;
    m->plan_ = plan_memory(m->config_, m->files_.get(), po);
    const PlanFit fit = check_fit(m->plan_, m->device_->profile());
    if (!fit.fits) {
        std::string why;
        for (const auto& n : fit.notes) why += "\n  " + n;
        throw Error("the model does not fit on '" + m->device_->profile().name + "':" + why);
    }

    stage("weights");
    auto progress = [&](size_t done, size_t total) {
        if (options.progress) options.progress("weights", done, total);
    };
    m->weights_ = upload_weights(m->device_, *m->files_, m->config_, progress);

    stage("kv cache");
    m->kv_ = std::make_unique<KVCache>(m->device_, m->config_, m->context_);
    stage("scratch");
    m->scratch_ = std::make_unique<ScratchBuffers>(m->device_, m->config_, m->context_, m->chain_);

    stage("rope");
    const ModelConfig& c = m->config_;
    const float* divisors = m->weights_.rope_divisors.empty() ? nullptr : m->weights_.rope_divisors.data();
    fill_rope_tables(m->scratch_->get("rope_cos"), m->scratch_->get("rope_sin"), rope_inv_freq(c, false, divisors), m->context_);
    if (m->scratch_->all().count("rope_cos_local"))
        fill_rope_tables(m->scratch_->get("rope_cos_local"), m->scratch_->get("rope_sin_local"), rope_inv_freq(c, true),
                         m->context_);

    stage("dispatch table");
    m->table_ = m->build_table(0);
    m->step_ = std::make_unique<CommandList>(m->device_, 0);
    m->step_->begin();
    m->table_->record(*m->step_);
    m->step_->end();
    m->chain_cl_ = std::make_unique<CommandList>(m->device_, 0);
    m->chain_cl_->begin();
    m->table_->record(*m->chain_cl_);
    for (int k = 1; k < m->chain_; ++k) m->build_table(k)->record(*m->chain_cl_);
    m->chain_cl_->end();

    stage("warmup");
    m->decode(0);  // runs every pipeline once; the cache is then rewound
    m->reset();
    return m;
}

// The table of chained step `step`: it embeds token_ids[step], reads StepState[step] and
// writes its argmax to token_ids[step + 1], where step + 1 embeds it.
std::unique_ptr<DispatchTable> Model::build_table(int step_index) {
    const ModelConfig& c = config_;
    const ArchDescriptor& a = c.arch();
    const bool gguf = files_->gguf() != nullptr;
    const float norm_offset = a.norm_plus_one && !gguf ? 1.0f : 0.0f;  // GGUF stores gemma's w + 1
    const ScratchBuffers& s = *scratch_;
    auto table = std::make_unique<DispatchTable>(*device_);
    DispatchTable& t = *table;
    const Buffer &h0 = s.get("h0"), &h1 = s.get("h1"), &residual = s.get("residual"), &qkv = s.get("qkv");
    const Buffer &attn_out = s.get("attn_out"), &gate = s.get("ffn_gate"), &up = s.get("ffn_up"), &act = s.get("ffn_act");
    const Buffer &logits = s.get("logits"), &ids = s.get("token_ids"), &partial = s.get("attn_partial");
    const Binding step(s.get("step"), size_t(step_index) * 16, 16);
    const size_t dim = size_t(c.dim), q_dim = size_t(c.q_dim), kv_dim = size_t(c.kv_dim), ffn = size_t(c.ffn_dim);
    const Binding q(qkv, s.q_offset(), q_dim * 4), k(qkv, s.k_offset(), kv_dim * 4), v(qkv, s.v_offset(), kv_dim * 4);
    const bool local_tables = s.all().count("rope_cos_local") > 0;

    // h0 += W·x, the output projections of attention and FFN. Without a post-norm the GEMV adds
    // straight into the residual stream; with one (gemma2/3) the projection is normed in h1 first.
    auto into_residual = [&](const Weight& w, const Binding& x, size_t k, const Weight* post_norm) {
        if (!post_norm) {
            kernels::gemv(t, w.buffer, w.type, x, h0, dim, k, true);
            return;
        }
        kernels::gemv(t, w.buffer, w.type, x, h1, dim, k);
        kernels::rmsnorm(t, h1, post_norm->buffer, h1, DType::kF32, 1, dim, c.norm_eps, norm_offset);
        kernels::add(t, h0, h1, h0, DType::kF32, dim);
    };

    t.set_label("token_embd");
    kernels::embed(t, weights_.token_embd.buffer, weights_.token_embd.type, size_t(c.vocab_size), ids, step, h0, dim,
                   c.embed_scale);
    for (int l = 0; l < c.n_layers; ++l) {
        const LayerWeights& L = weights_.layers[size_t(l)];
        const std::string blk = "blk." + std::to_string(l) + ".";
        t.set_label(blk + "attn_norm");
        kernels::rmsnorm(t, h0, L.attn_norm.buffer, residual, DType::kF32, 1, dim, c.norm_eps, norm_offset);
        t.set_label(blk + "attn_q");
        kernels::gemv(t, L.q.buffer, L.q.type, residual, q, q_dim, dim);
        t.set_label(blk + "attn_k");
        kernels::gemv(t, L.k.buffer, L.k.type, residual, k, kv_dim, dim);
        t.set_label(blk + "attn_v");
        kernels::gemv(t, L.v.buffer, L.v.type, residual, v, kv_dim, dim);
        if (c.qkv_bias) {
            t.set_label(blk + "attn_qkv_bias");
            kernels::add(t, q, L.q_bias.buffer, q, DType::kF32, q_dim);
            kernels::add(t, k, L.k_bias.buffer, k, DType::kF32, kv_dim);
            kernels::add(t, v, L.v_bias.buffer, v, DType::kF32, kv_dim);
        }
        if (a.qk_norm) {
            t.set_label(blk + "attn_qk_norm");
            kernels::rmsnorm(t, q, L.q_norm.buffer, q, DType::kF32, size_t(c.n_heads), size_t(c.head_dim), c.norm_eps, norm_offset);
            kernels::rmsnorm(t, k, L.k_norm.buffer, k, DType::kF32, size_t(c.n_kv_heads), size_t(c.head_dim), c.norm_eps,
                             norm_offset);
        }
        const bool sliding = c.is_sliding(l);
        const bool local = sliding && local_tables;
        t.set_label(blk + "rope_kv");
        const RopeStyle style = gguf ? a.rope_gguf : a.rope_hf;
        kernels::rope_kv(t, qkv, s.get(local ? "rope_cos_local" : "rope_cos"), s.get(local ? "rope_sin_local" : "rope_sin"),
                         kv_->k(l), kv_->v(l), step,
                         {uint32_t(c.n_heads), uint32_t(c.n_kv_heads), uint32_t(c.head_dim), uint32_t(context_),
                          style == RopeStyle::kInterleaved, style != RopeStyle::kNone});
        t.set_label(blk + "attention");
        kernels::attention(t, q, kv_->k(l), kv_->v(l), partial, attn_out, step,
                           {uint32_t(c.n_heads), uint32_t(c.n_kv_heads), uint32_t(c.head_dim), uint32_t(context_),
                            sliding ? uint32_t(c.sliding_window) : 0u, c.attn_scale, c.attn_softcap});
        t.set_label(blk + "attn_output");
        into_residual(L.o, Binding(attn_out, 0, q_dim * 4), q_dim, a.post_attn_norm ? &L.post_attn_norm : nullptr);
        t.set_label(blk + "ffn_norm");
        kernels::rmsnorm(t, h0, L.ffn_norm.buffer, residual, DType::kF32, 1, dim, c.norm_eps, norm_offset);
        t.set_label(blk + "ffn_gate");
        kernels::gemv(t, L.gate.buffer, L.gate.type, residual, gate, ffn, dim);
        t.set_label(blk + "ffn_up");
        kernels::gemv(t, L.up.buffer, L.up.type, residual, up, ffn, dim);
        t.set_label(blk + "ffn_act");
        kernels::gated_activation(t, a.activation, gate, up, act, ffn);
        t.set_label(blk + "ffn_down");
        into_residual(L.down, act, ffn, a.post_ffn_norm ? &L.post_ffn_norm : nullptr);
    }
    t.set_label("output_norm");
    kernels::rmsnorm(t, h0, weights_.output_norm.buffer, residual, DType::kF32, 1, dim, c.norm_eps, norm_offset);
    const Weight& head = weights_.output ? weights_.output : weights_.token_embd;
    t.set_label("output");
    kernels::gemv(t, head.buffer, head.type, residual, logits, size_t(c.vocab_size), dim);
    t.set_label("argmax");
    kernels::argmax(t, logits, ids, size_t(c.vocab_size), uint32_t(step_index + 1));
    return table;
}

void Model::decode(int token) {
    AKUNU_CHECK(token >= 0 && token < config_.vocab_size,
                "token id " + std::to_string(token) + " is out of range for a vocabulary of " + std::to_string(config_.vocab_size));
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos < context_, "the context of " + std::to_string(context_) + " tokens is full; reset() or truncate() the cache");
    const uint32_t id = uint32_t(token);
    const StepState st{uint32_t(pos), 0};
    scratch_->get("token_ids").write(&id, 4);
    scratch_->get("step").write(&st, sizeof st);
    step_->submit_and_wait();
    kv_->set_length(pos + 1);
}

std::vector<int> Model::decode_chain(int token) {
    AKUNU_CHECK(token >= 0 && token < config_.vocab_size,
                "token id " + std::to_string(token) + " is out of range for a vocabulary of " + std::to_string(config_.vocab_size));
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos + chain_ <= context_, "a chain of " + std::to_string(chain_) + " steps does not fit: " +
                                              std::to_string(pos) + " of " + std::to_string(context_) + " positions are used");
    const uint32_t id = uint32_t(token);
    scratch_->get("token_ids").write(&id, 4);
    // One StepState {pos, token_slot} per step, 16 bytes apart (storage-buffer offset alignment).
    std::vector<uint32_t> packed(size_t(chain_) * 4, 0);
    for (int k = 0; k < chain_; ++k) {
        packed[size_t(k) * 4] = uint32_t(pos + k);
        packed[size_t(k) * 4 + 1] = uint32_t(k);
    }
    scratch_->get("step").write(packed.data(), packed.size() * 4);
    chain_cl_->submit_and_wait();
    kv_->set_length(pos + chain_);
    std::vector<uint32_t> out(static_cast<size_t>(chain_));
    scratch_->get("token_ids").read(out.data(), out.size() * 4, 4);
    return std::vector<int>(out.begin(), out.end());
}

int Model::argmax_token() const {
    uint32_t id = 0;
    scratch_->get("token_ids").read(&id, 4, 4);
    return int(id);
}

void Model::eval(const std::vector<int>& ids) {
    AKUNU_CHECK(!ids.empty(), "eval needs at least one token");
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos + int(ids.size()) <= context_,
                "a prompt of " + std::to_string(ids.size()) + " tokens does not fit: " + std::to_string(pos) + " of " +
                    std::to_string(context_) + " positions are used");
    for (int id : ids)
        AKUNU_CHECK(id >= 0 && id < config_.vocab_size,
                    "token id " + std::to_string(id) + " is out of range for a vocabulary of " + std::to_string(config_.vocab_size));
    for (int id : ids) decode(id);
}

}  // namespace akunu
