// Model loading and the per-token dispatch table.
#include "akunu/engine/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <tuple>

#include "akunu/vulkan/device.h"
#include "akunu/core/error.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/model_state.h"
#include "akunu/engine/validate.h"
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

// A layer index as Python reads it: negative ones count from the end.
int layer_index(int layer, int n_layers) { return layer < 0 ? layer + n_layers : layer; }

// The layers `taps` name, ascending and each once; throws for a layer the model lacks.
std::vector<int> tapped_layers(const std::vector<int>& taps, int n_layers) {
    std::vector<int> layers;
    for (int l : taps) {
        AKUNU_CHECK(l >= -n_layers && l < n_layers, "hidden state of layer " + std::to_string(l) + ": the model has " +
                                                        std::to_string(n_layers) + " layers (0 to " +
                                                        std::to_string(n_layers - 1) + ", or -1 to -" +
                                                        std::to_string(n_layers) + " from the end)");
        layers.push_back(layer_index(l, n_layers));
    }
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    return layers;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
    auto stage = [&](const char* name) {
        if (options.progress) options.progress(name, 0, 0);
    };
    auto b = std::make_shared<LoadedModel>();
    // Stages 3, 5, 6, 10: format, config, architecture, validation, then the plan, all before
    // anything is allocated on the device.
    stage("format");
    b->files = ModelFiles::open(path);
    AKUNU_CHECK(b->files->has_weights(), "'" + path + "' holds a config but no weights");
    b->config = load_config(*b->files);
    const ArchDescriptor& arch = b->config.arch();
    AKUNU_CHECK(arch.causal, b->config.architecture + " is an encoder; decoding needs a causal language model");
    validate_model(*b->files, b->config);
    AKUNU_CHECK(options.context > 0, "context must be positive");
    b->context = std::min(options.context, b->config.max_context);
    if (const GgufFile* g = b->files->gguf())
        if (const GgufValue* e = g->find("tokenizer.ggml.eos_token_id")) b->eos_id = int(e->as_int("tokenizer.ggml.eos_token_id"));
    b->fingerprint = model_fingerprint(*b->files, b->config);

    stage("device");
    b->device = Device::create(options.device);
    // Chain length: long chains amortise a submission on GPUs; lavapipe gains little from them.
    b->chain = options.chain > 0 ? options.chain : (b->device->profile().type == DeviceType::kCpu ? 4 : 16);
    AKUNU_CHECK(b->chain <= 256, "chain length " + std::to_string(b->chain) + " is out of range (1 to 256)");
    b->chain = std::min(b->chain, b->context);
    AKUNU_CHECK(options.prefill_chunk >= 0, "prefill_chunk must be positive (0: the default of 512, 128 on the CPU)");
    // The CPU's GEMMs reach their speed at 64 rows, and its row-wise kernels (activation, norms)
    // run over the whole chunk: a 128-token prompt in a 512-row chunk would pay 4x for them.
    const int default_chunk = b->device->is_cpu() ? 128 : 512;
    b->prefill_chunk = std::min(options.prefill_chunk > 0 ? options.prefill_chunk : default_chunk, b->context);
    b->logit_rows = prefill_logit_rows(b->config, b->prefill_chunk);
    PlanOptions po;
    po.context = b->context;
    po.max_chain = b->chain;
    po.prefill_chunk = b->prefill_chunk;
    po.kv_dtype = options.kv_dtype;
    po.kv_blocks = options.kv_blocks;
    po.kv_ring = options.kv_ring;
    po.weight_tiles = b->device->profile().weight_tiles;
    b->plan = with_prefill_dequant(plan_memory(b->config, b->files.get(), po), b->files.get(),
                                   b->device->profile().prefill_dequant_rows);
    const PlanFit fit = check_fit(b->plan, b->device->profile());
    if (!fit.fits) {
        std::string why;
        for (const auto& n : fit.notes) why += "\n  " + n;
        throw Error("the model does not fit on '" + b->device->profile().name + "':" + why);
    }

    stage("weights");
    auto progress = [&](size_t done, size_t total) {
        if (options.progress) options.progress("weights", done, total);
    };
    b->weights = upload_weights(b->device, *b->files, b->config, progress);

    std::unique_ptr<Model> m(new Model());
    m->base_ = std::move(b);
    m->create_runtime(options.progress);
    stage("warmup");
    m->decode(0);  // runs every pipeline once; the cache is then rewound
    m->reset();
    if (m->context() >= 2) m->eval({0, 0});  // and the prefill table
    m->reset();
    return m;
}

// What each model owns beside the shared weights: KV cache, scratch, RoPE tables, the
// dispatch tables and their recordings.
void Model::create_runtime(const std::function<void(const std::string&, size_t, size_t)>& progress) {
    auto stage = [&](const char* name) {
        if (progress) progress(name, 0, 0);
    };
    const LoadedModel& b = *base_;
    stage("kv cache");
    kv_ = std::make_unique<KVCache>(b.device, b.config, b.context, b.plan.options.kv_dtype, b.plan.options.kv_blocks,
                                    b.plan.kv.ring_rows);
    stage("scratch");
    scratch_ = std::make_unique<ScratchBuffers>(b.device, b.config, b.context, b.chain, b.prefill_chunk,
                                                b.plan.options.prefill_dequant);

    stage("rope");
    const ModelConfig& c = b.config;
    const float* divisors = b.weights.rope_divisors.empty() ? nullptr : b.weights.rope_divisors.data();
    fill_rope_tables(scratch_->get("rope_cos"), scratch_->get("rope_sin"), rope_inv_freq(c, false, divisors), b.context);
    if (scratch_->all().count("rope_cos_local"))
        fill_rope_tables(scratch_->get("rope_cos_local"), scratch_->get("rope_sin_local"), rope_inv_freq(c, true), b.context);
    // Decode attention's per-head arrival counters start at zero (kernels::attention).
    const std::vector<uint32_t> zeros(size_t(c.n_heads), 0u);
    scratch_->get("attn_partial").write(zeros.data(), zeros.size() * 4,
                                        kernels::attention_counters_offset(uint32_t(c.n_heads), uint32_t(c.head_dim), uint32_t(b.context)));
    // So do the GEMV hand-off counters (kernels::GemvHandoff).
    Buffer& handoff = scratch_->get("gemv_handoff");
    const std::vector<uint32_t> handoff_zeros(handoff.size() / 4, 0u);
    handoff.write(handoff_zeros.data(), handoff.size());

    stage("dispatch table");
    set_sampler(SamplerState{0.0f, 0, 1.0f, 0.0f, 0, 0, 0, 0});
    // Each step table's attention follows the cache's length: its counts sit in step_dispatch,
    // the single step's first, then chain c's step k at slot 1 + c * chain + k.
    const Buffer& step_counts = scratch_->get("step_dispatch");
    const size_t step_slot = step_counts.size() / size_t(2 * b.chain + 1);
    table_ = build_table({false, 1, 0, false});
    table_->use_counts(step_counts, 0, step_slot);
    step_ = record({table_.get()});
    for (int ci = 0; ci < 2; ++ci) {
        auto& cl = chains_[ci];
        cl = std::make_unique<CommandList>(b.device, 0);
        cl->begin();
        chain_tables_[ci].clear();
        for (int k = 0; k < b.chain; ++k) {
            auto t = build_table({false, 1, ci * b.chain + k, false});
            t->use_counts(step_counts, size_t(1 + ci * b.chain + k) * step_slot, step_slot);
            t->record(*cl);
            chain_tables_[ci].push_back(std::move(t));
        }
        cl->end();
    }
    // The chunk tables' workgroup counts: each half of the planned batch_dispatch.
    const Buffer& counts = scratch_->get("batch_dispatch");
    prefill_table_ = build_table({true, b.prefill_chunk, 0, false});
    prefill_table_->use_counts(counts, 0, counts.size() / 2);
    prefill_cl_ = record({prefill_table_.get()});
    prefill_all_table_ = build_table({true, b.logit_rows, 0, true});
    prefill_all_table_->use_counts(counts, counts.size() / 2, counts.size() / 2);
    prefill_all_cl_ = record({prefill_all_table_.get()});
}

std::unique_ptr<CommandList> Model::record(std::initializer_list<const DispatchTable*> tables) const {
    auto cl = std::make_unique<CommandList>(base_->device, 0);
    cl->begin();
    for (const DispatchTable* t : tables) t->record(*cl);
    cl->end();
    return cl;
}

std::unique_ptr<Model> Model::fork() {
    drain();
    const Device& d = device();
    const uint64_t heap = usable_heap_bytes(d.profile());
    const uint64_t need = plan().fork_bytes;
    AKUNU_CHECK(d.allocated_bytes() + need <= heap,
                "fork needs " + std::to_string(need >> 20) + " MiB more (its KV cache and scratch) but '" + d.profile().name +
                    "' has " + std::to_string(d.allocated_bytes() >> 20) + " of " + std::to_string(heap >> 20) +
                    " MiB allocated; load with a smaller context or prefill chunk");
    std::unique_ptr<Model> f(new Model());
    f->base_ = base_;
    f->create_runtime({});
    f->restore_state(capture_state());
    return f;
}

// The table of one pass. A decode step (chained step k) embeds token_ids[k], reads
// StepState[k] and writes its sampled id to token_ids[k + 1], where step k + 1 embeds it. A
// prefill chunk embeds batch_token_ids[0 : n] at batch_step.pos; its buffers are the batch_*
// twins of the decode set, its matrix products GEMMs, its attention causal flash attention; it
// ends with the decode tail on its last row, so the next token is sampled as after a step.
std::unique_ptr<DispatchTable> Model::build_table(const Pass& pass) {
    const ModelConfig& c = base_->config;
    const ArchDescriptor& a = c.arch();
    const bool gguf = base_->files->gguf() != nullptr;
    const float norm_offset = a.norm_plus_one && !gguf ? 1.0f : 0.0f;  // GGUF stores gemma's w + 1
    const ScratchBuffers& s = *scratch_;
    auto table = std::make_unique<DispatchTable>(*base_->device);
    DispatchTable& t = *table;
    const bool prefill = pass.prefill;
    const size_t rows = prefill ? size_t(pass.rows) : 1;
    auto buf = [&](const std::string& name) -> const Buffer& { return s.get(prefill ? "batch_" + name : name); };
    const Buffer &h0 = buf("h0"), &h1 = buf("h1"), &residual = buf("residual"), &qkv = buf("qkv");
    const Buffer &attn_out = buf("attn_out"), &gate = buf("ffn_gate"), &up = buf("ffn_up"), &act = buf("ffn_act");
    const Binding step = prefill ? Binding(s.get("batch_step")) : Binding(s.get("step"), size_t(pass.step_index) * 16, 16);
    // Decode steps embed token_ids[step.token_slot]; a chunk embeds batch_token_ids[0 : n].
    const Buffer& ids = prefill ? s.get("batch_token_ids") : s.get("token_ids");
    const size_t dim = size_t(c.dim), q_dim = size_t(c.q_dim), kv_dim = size_t(c.kv_dim), ffn = size_t(c.ffn_dim);
    const size_t qkv_row = q_dim + 2 * kv_dim;
    auto column = [&](size_t first, size_t width) { return Binding::columns(qkv, first * 4, width * 4, qkv_row * 4); };
    const Binding q = column(0, q_dim), k = column(q_dim, kv_dim), v = column(q_dim + kv_dim, kv_dim);
    const bool local_tables = s.all().count("rope_cos_local") > 0;

    // y[rows, n] (rows ldy floats apart) = x[rows, k] · W^T: GEMV for a step, GEMM for a chunk.
    // A chunk of at least dequant_rows tokens reads a block-format matrix dequantized to f16
    // (dequant_f16, then the f16 GEMM); shorter chunks run the format's own GEMM. Where the
    // device runs short GEMM tiles, a chunk of up to short_rows tokens takes them (one more GEMM
    // with its own row window: only one of a projection's GEMMs has workgroups for a chunk, so
    // they share a barrier interval, CommandList). Each dequantization goes into the next of
    // the f16 buffers (kPrefillF16Weights) and is placed in the table right after the f16 GEMM
    // before its projection, or before its group (Q, K and V after the layer before's down;
    // gate and up after O; DispatchTable::insert_at): its buffer was last read four projections
    // back, behind a barrier by then, so it depends on nothing recorded since and runs beside
    // that GEMM (memory-bound beside compute-bound), also where a norm or the activation comes
    // between, and no GEMM of a group waits for its own weights.
    // AKUNU_DEQUANT_OVERLAP=0: one buffer, each dequantization where its projection is (A/B).
    const uint32_t dequant_rows = t.device().profile().prefill_dequant_rows;
    const uint32_t short_rows = t.device().profile().gemm_short_rows;
    const Buffer* weights_f16[kPrefillF16Weights] = {};
    bool dequant_ahead = false;
    if (prefill && s.all().count(prefill_f16_weights_name(0))) {
        const char* overlap = std::getenv("AKUNU_DEQUANT_OVERLAP");
        dequant_ahead = !(overlap && std::string(overlap) == "0");
        for (int i = 0; i < kPrefillF16Weights; ++i) weights_f16[i] = &s.get(prefill_f16_weights_name(dequant_ahead ? i : 0));
    }
    int turn = 0;                          // which f16 buffer the next dequantization writes
    std::optional<size_t> dequant_at;      // where in the table: right after the last f16 GEMM
    // While a group of projections that share a barrier interval is recorded (Q, K and V; gate
    // and up), their dequantizations all go where the first one's does, so that no GEMM of the
    // group waits for its own: the place moves only past the group's last GEMM.
    bool in_group = false;
    // The format's own GEMM for chunks of fewer than `below` tokens (0: any), in short tiles up
    // to short_rows where the device takes them.
    auto own_gemm = [&](const Weight& w, const Binding& x, const Binding& y, size_t n, size_t kk, size_t ldy, bool accumulate,
                        DType x_dtype, uint32_t below) {
        uint32_t from = 0;
        if (short_rows && rows > short_rows && (below == 0 || below > short_rows + 1)) {
            kernels::gemm(t, w.buffer, w.type, x, y, {rows, n, kk, kk, ldy, 0, short_rows + 1, x_dtype}, step, accumulate);
            from = short_rows + 1;
        }
        kernels::gemm(t, w.buffer, w.type, x, y, {rows, n, kk, kk, ldy, from, below, x_dtype}, step, accumulate);
    };
    // Whether a chunk's GEMMs read `w` dequantized to f16 (for chunks of dequant_rows or more).
    auto reads_dequantized = [&](const Weight& w, size_t n, size_t kk) {
        return prefill && weights_f16[0] && rows >= dequant_rows && kernels::dequantizes_to_f16(w.type) &&
               n * kk * 2 <= std::min<size_t>(weights_f16[0]->size(), t.device().profile().max_storage_buffer_range);
    };
    // `w` dequantized into the next f16 buffer, placed right after the last f16 GEMM.
    auto dequantized = [&](const Weight& w, size_t n, size_t kk) -> const Buffer& {
        const Buffer& f16 = *weights_f16[turn];
        turn = (turn + 1) % kPrefillF16Weights;
        if (dequant_at) t.insert_at(*dequant_at);
        kernels::dequant_f16(t, w.buffer, w.type, f16, n, kk, step, dequant_rows);
        t.end_insert();
        return f16;
    };
    auto f16_gemm_recorded = [&] {
        if (dequant_ahead && !in_group) dequant_at = t.commands().size();
    };
    auto matmul = [&](const Weight& w, const Binding& x, const Binding& y, size_t n, size_t kk, size_t ldy, bool accumulate,
                      const kernels::GemvInput* input = nullptr, DType x_dtype = DType::kF32,
                      const kernels::GemvHandoff* handoff = nullptr, const kernels::GemvNormOut* norm_out = nullptr) {
        if (reads_dequantized(w, n, kk)) {
            const Buffer& f16 = dequantized(w, n, kk);
            own_gemm(w, x, y, n, kk, ldy, accumulate, x_dtype, dequant_rows);
            kernels::gemm(t, f16, TensorType::F16, x, y, {rows, n, kk, kk, ldy, dequant_rows, 0, x_dtype}, step, accumulate);
            f16_gemm_recorded();
        } else if (prefill)
            own_gemm(w, x, y, n, kk, ldy, accumulate, x_dtype, 0);
        else
            kernels::gemv(t, w.buffer, w.type, x, y, n, kk, accumulate, input, kernels::engine_x_rounding(t.device().profile()),
                          handoff, norm_out);
    };
    // The input of a projection: a buffer (f32, or halves for a chunk's GEMMs where they take
    // them), and what the GEMVs that read it fold into x.
    struct ProjectionInput {
        Binding x;
        std::optional<kernels::GemvInput> op;
        DType dtype = DType::kF32;
        const kernels::GemvInput* fold() const { return op ? &*op : nullptr; }
    };
    // A chunk's norms and activation write the halves its GEMMs read, where the GEMM takes them.
    auto half_x = [&](size_t kk) { return prefill && kernels::gemm_takes_half_x(t.device().profile(), kk, kk); };
    // After a pre-norm of `x` (n_rows rows): normed once into `normed` for GEMMs, or folded into
    // each GEMV that reads it, which reads all of x anyway (one dispatch and one barrier fewer
    // per norm). Measured on the H200, folding speeds float weights up (7b f16 161 -> 176 tok/s);
    // gemv.comp's k-quant and MLX paths read x once per row and block, where the norm weight
    // would double those loads, so they keep the separate norm (kernels::gemv_folds_norm).
    auto pre_norm = [&](const Weight& w, TensorType projection_type, const Buffer& x, const Buffer& normed, size_t n_rows,
                        bool read_by_gemv) -> ProjectionInput {
        if (!read_by_gemv && half_x(dim)) {
            kernels::rmsnorm_to_f16(t, x, w.buffer, normed, n_rows, dim, c.norm_eps, norm_offset);
            return {Binding(normed), std::nullopt, DType::kF16};
        }
        if (!read_by_gemv || !kernels::gemv_folds_norm(t.device().profile(), projection_type, dim)) {
            kernels::rmsnorm(t, x, w.buffer, normed, DType::kF32, n_rows, dim, c.norm_eps, norm_offset);
            return {Binding(normed), std::nullopt};
        }
        return {Binding(x), kernels::GemvInput::rmsnorm(Binding(w.buffer), c.norm_eps, norm_offset)};
    };
    // The down projection's input, act(gate) * up: formed by act_* into `act`, or, where the
    // GEMV folds it, by the down GEMV itself from gate and up (one dependent dispatch fewer a
    // layer; the act buffer is then not written).
    auto gated = [&](TensorType projection_type) -> ProjectionInput {
        if (prefill || !kernels::gemv_folds_activation(t.device().profile(), projection_type, ffn)) {
            const DType dtype = half_x(ffn) ? DType::kF16 : DType::kF32;
            kernels::gated_activation(t, a.activation, gate, up, act, rows * ffn, dtype);
            return {Binding(act), std::nullopt, dtype};
        }
        return {Binding(gate), kernels::GemvInput::gated(a.activation, Binding(up))};
    };
    // The next pre-norm handed forward (kernels::GemvNormOut): in a decode step whose GEMVs on
    // both sides are float gemv.comp ones, the GEMV that adds into the residual stream also
    // writes the stream times `norm`'s weight into `residual` and its sums of squares, and the
    // GEMVs after it read those (`ready`) instead of folding the norm: no norm weight loads and
    // no pass over h0 for its mean in every workgroup (4 % of a float decode step, H100).
    // A GEMV that signals a hand-off hands no norm forward (kernels::gemv refuses both).
    std::optional<ProjectionInput> ready;
    auto hand_norm_forward = [&](const Weight& producer, const Weight& norm, std::initializer_list<const Weight*> readers,
                                 const std::optional<kernels::GemvHandoff>& handoff) -> std::optional<kernels::GemvNormOut> {
        if (prefill || (handoff && handoff->signal)) return std::nullopt;
        for (const Weight* r : readers)
            if (!kernels::gemv_hands_norm_forward(t.device().profile(), producer.type, r->type)) return std::nullopt;
        const Binding sums(s.get("norm_sums"));
        const uint32_t partials = kernels::gemv_norm_partials(t.device().profile(), producer.type, dim);
        ready = ProjectionInput{Binding(residual), kernels::GemvInput::rmsnorm_ready(sums, partials, c.norm_eps)};
        return kernels::GemvNormOut{Binding(norm.buffer), norm_offset, Binding(residual), sums};
    };
    // The input of the projections after a pre-norm: handed forward, else pre_norm's.
    auto normed_input = [&](const Weight& w, TensorType projection_type, const Buffer& x, const Buffer& normed, size_t n_rows,
                            bool read_by_gemv) -> ProjectionInput {
        if (ready) {
            ProjectionInput in = *ready;
            ready.reset();
            return in;
        }
        return pre_norm(w, projection_type, x, normed, n_rows, read_by_gemv);
    };
    // h0 += W·x, the output projections of attention and FFN. Without a post-norm the product
    // adds straight into the residual stream; with one (gemma2/3) it is normed in h1 first.
    auto into_residual = [&](const Weight& w, const ProjectionInput& in, size_t kk, const Weight* post_norm,
                             const kernels::GemvHandoff* handoff = nullptr,
                             const std::optional<kernels::GemvNormOut>& norm_out = std::nullopt) {
        if (!post_norm) {
            matmul(w, in.x, h0, dim, kk, dim, true, in.fold(), in.dtype, handoff, norm_out ? &*norm_out : nullptr);
            return;
        }
        AKUNU_CHECK(!handoff || !handoff->signal, "a GEMV whose output is post-normed hands nothing off");
        matmul(w, in.x, h1, dim, kk, dim, false, in.fold(), in.dtype, handoff);
        kernels::rmsnorm(t, h1, post_norm->buffer, h1, DType::kF32, rows, dim, c.norm_eps, norm_offset);
        kernels::add(t, h0, h1, h0, DType::kF32, rows * dim);
    };
    // Projections of `dim` inputs that read the same x, each into its y (rows ldy floats apart):
    // one dispatch where the GEMV multiplies several matrices at once (kernels::gemv_parts,
    // tile-major weights of one type) under the label `fused`, else one matmul each. With
    // `rope`, the fused Q/K/V dispatch also does rope_kv's work; returns whether it did.
    struct Projection {
        const char* label;
        const Weight* w;
        Binding y;
        size_t n, ldy;
    };
    auto project = [&](const std::string& blk, const char* fused, std::initializer_list<Projection> parts,
                       const ProjectionInput& in, const kernels::GemvRopeKv* rope = nullptr,
                       const kernels::GemvHandoff* handoff = nullptr) {
        const TensorType type = parts.begin()->w->type;
        bool fuse = !prefill && parts.size() <= 3 && kernels::gemv_fuses_parts(t.device().profile(), type, dim);
        for (const Projection& p : parts) fuse &= p.w->type == type;
        AKUNU_CHECK(fuse || !handoff, "a hand-off needs the projections fused into one GEMV");
        if (!fuse) {
            size_t left = parts.size();
            for (const Projection& p : parts) {
                t.set_label(blk + p.label);
                in_group = --left > 0;
                matmul(*p.w, in.x, p.y, p.n, dim, p.ldy, false, in.fold(), in.dtype);
            }
            return false;
        }
        std::array<Binding, 3> w, y;
        std::array<size_t, 3> n{};
        size_t i = 0;
        for (const Projection& p : parts) w[i] = Binding(p.w->buffer), y[i] = p.y, n[i++] = p.n;
        t.set_label(blk + fused);
        kernels::gemv_parts(t, w, type, in.x, y, n, dim, in.fold(), rope, kernels::engine_x_rounding(t.device().profile()),
                            handoff);
        return rope != nullptr;
    };
    // Per-head norms of Q or K: n_heads rows of head_dim inside each token's qkv row.
    auto head_norm = [&](const Binding& x, const Weight& w, int heads) {
        kernels::rmsnorm(t, x, w.buffer, x, DType::kF32, rows * size_t(heads), size_t(c.head_dim), c.norm_eps, norm_offset,
                         size_t(heads), qkv_row);
    };

    // Final-logit soft-capping (gemma2) of every logits output, in place before anything reads
    // them; recorded only when the model has a cap, so other models run no extra dispatch.
    auto final_softcap = [&](const Buffer& logits, size_t n_rows) {
        if (c.final_softcap <= 0) return;
        t.set_label("final_softcap");
        kernels::softcap(t, logits, step, n_rows, size_t(c.vocab_size), c.final_softcap);
    };

    // A decode step's GEMVs may take x from the dispatch before through counters instead of a
    // barrier (kernels::GemvHandoff) at four places a layer: attention -> O, O -> gate/up,
    // gate/up -> down and down -> the next layer's Q/K/V, where the GEMVs are one tile GEMV
    // each with nothing between them (norms and the activation folded, no post-norm, no tap)
    // and both sides run at most one workgroup per compute unit (kernels::gemv_hands_off,
    // attention_hands_off); a float O GEMV waits for attention too (gemv_waits_for_attention).
    // Slot 1 + 4 l + j is layer l's j-th. Layer l's O GEMV zeroes the slots of layer l - 1 (of
    // the last layer, for l = 0): every wait on them ended before the barrier ahead of layer l's
    // attention. So every O must take part, and there must be two layers at least (one layer's
    // O would zero its own).
    constexpr uint32_t kSlotsPerLayer = 4;
    const DeviceProfile& profile = t.device().profile();
    const uint32_t o_tiles = kernels::gemv_tiles_groups({dim, 0, 0}), down_tiles = o_tiles;
    const uint32_t gate_up_tiles = kernels::gemv_tiles_groups({ffn, ffn, 0});
    const uint32_t qkv_tiles = kernels::gemv_tiles_groups({q_dim, kv_dim, kv_dim});
    auto fuses_gate_up = [&](const LayerWeights& L) {
        return !prefill && L.up.type == L.gate.type && kernels::gemv_fuses_gate_up(profile, L.gate.type, dim, a.activation);
    };
    auto gemvs_hand_off = [&](std::initializer_list<const Weight*> ws, uint32_t tiles) {
        bool ok = true;
        for (const Weight* w : ws) ok = ok && w->type == (*ws.begin())->type && kernels::gemv_hands_off(profile, w->type, tiles);
        return ok;
    };
    bool zeroers = !prefill && s.all().count("gemv_handoff") > 0 && c.n_layers >= 2;
    for (const LayerWeights& L : base_->weights.layers)
        zeroers = zeroers && kernels::gemv_takes_handoff(profile, L.o.type);
    std::vector<std::array<bool, kSlotsPerLayer>> hands_off(size_t(c.n_layers));
    bool any_handoff = false;
    for (int l = 0; zeroers && l < c.n_layers; ++l) {
        const LayerWeights& L = base_->weights.layers[size_t(l)];
        const LayerWeights* next = l + 1 < c.n_layers ? &base_->weights.layers[size_t(l) + 1] : nullptr;
        const bool tapped = std::find(pass.taps.begin(), pass.taps.end(), l) != pass.taps.end();
        const bool o_few = gemvs_hand_off({&L.o}, o_tiles), down_few = gemvs_hand_off({&L.down}, down_tiles);
        const bool gate_up_few = !fuses_gate_up(L) && gemvs_hand_off({&L.gate, &L.up}, gate_up_tiles);
        auto& h = hands_off[size_t(l)];
        h[0] = (o_few || kernels::gemv_waits_for_attention(profile, L.o.type)) &&
               kernels::attention_hands_off(profile, uint32_t(c.n_heads));
        h[1] = !a.post_attn_norm && o_few && gate_up_few;
        h[2] = gate_up_few && down_few;
        h[3] = next && !tapped && !a.post_ffn_norm && down_few && gemvs_hand_off({&next->q, &next->k, &next->v}, qkv_tiles);
        for (bool b : h) any_handoff = any_handoff || b;
    }
    handoffs_ = handoffs_ || any_handoff;
    const Binding handoff_counters = any_handoff ? Binding(s.get("gemv_handoff")) : Binding();
    kernels::GemvHandoff next_handoff{handoff_counters};  // what the coming GEMV waits for (wait 0: nothing)
    // Layer l's j-th slot where that hand-off is on, else 0.
    auto slot = [&](int l, uint32_t j) { return hands_off[size_t(l)][j] ? uint32_t(1 + kSlotsPerLayer * l + j) : 0u; };
    // The hand-off of the dispatch about to be recorded: the pending wait, a signal in `signal`
    // (then `next_handoff` becomes its wait, for `count` workgroups or heads), and slots from
    // `clear` on to zero.
    auto take_handoff = [&](uint32_t signal = 0, uint32_t count = 0,
                            uint32_t clear = 0) -> std::optional<kernels::GemvHandoff> {
        kernels::GemvHandoff h = next_handoff;
        next_handoff = {handoff_counters};
        if (signal) h.signal = signal, next_handoff.wait = signal, next_handoff.wait_count = count;
        if (clear) h.clear = clear, h.clear_count = kSlotsPerLayer;
        if (!h.signal && !h.wait && !h.clear) return std::nullopt;
        return h;
    };
    auto handoff_ptr = [](const std::optional<kernels::GemvHandoff>& h) { return h ? &*h : nullptr; };

    // A chunk's dispatches up to its tail run over its rows, and their workgroups follow the
    // chunk's token count (set_tokens before each submission): a short prompt pays for its own
    // rows, not a whole chunk's.
    if (prefill) t.set_chunk_rows(uint32_t(rows));
    t.set_label("token_embd");
    kernels::embed(t, base_->weights.token_embd.buffer, base_->weights.token_embd.type, size_t(c.vocab_size), ids, step, h0, dim,
                   c.embed_scale, rows);
    const Weight& head = base_->weights.output ? base_->weights.output : base_->weights.token_embd;  // the LM head
    for (int l = 0; l < c.n_layers; ++l) {
        const LayerWeights& L = base_->weights.layers[size_t(l)];
        const std::string blk = "blk." + std::to_string(l) + ".";
        t.set_label(blk + "attn_norm");
        const ProjectionInput attn_in = normed_input(L.attn_norm, L.q.type, h0, residual, rows, !prefill);
        const bool sliding = c.is_sliding(l);
        const bool local = sliding && local_tables;
        const Buffer &rope_cos = s.get(local ? "rope_cos_local" : "rope_cos"), &rope_sin = s.get(local ? "rope_sin_local" : "rope_sin");
        const RopeStyle style = gguf ? a.rope_gguf : a.rope_hf;
        const KvBindings cache = kv_->bindings(l);
        // A decode step's RoPE and KV write ride on the Q/K/V dispatch where nothing comes
        // between them (no bias, no per-head norm) and the GEMV takes the model's RoPE pairs;
        // project() takes it only where it fuses Q, K and V (decode, one weight type).
        std::optional<kernels::GemvRopeKv> rope_fold;
        const bool half_split = style == RopeStyle::kHalfSplit;
        if (!c.qkv_bias && !a.qk_norm && style != RopeStyle::kNone &&
            kernels::gemv_folds_rope_kv(t.device().profile(), L.q.type, cache, half_split))
            rope_fold = kernels::GemvRopeKv{Binding(rope_cos), Binding(rope_sin), cache, step, uint32_t(c.head_dim),
                                            uint32_t(base_->context), half_split};
        const auto qkv_handoff = take_handoff();  // Q/K/V only waits: its hand-off to attention lost
        const bool roped = project(blk, "attn_qkv", {{"attn_q", &L.q, q, q_dim, qkv_row}, {"attn_k", &L.k, k, kv_dim, qkv_row},
                                                     {"attn_v", &L.v, v, kv_dim, qkv_row}}, attn_in,
                                   rope_fold ? &*rope_fold : nullptr, handoff_ptr(qkv_handoff));
        if (c.qkv_bias) {
            t.set_label(blk + "attn_qkv_bias");
            kernels::add_rows(t, q, L.q_bias.buffer, q, DType::kF32, {q_dim, rows, qkv_row, 0, qkv_row});
            kernels::add_rows(t, k, L.k_bias.buffer, k, DType::kF32, {kv_dim, rows, qkv_row, 0, qkv_row});
            kernels::add_rows(t, v, L.v_bias.buffer, v, DType::kF32, {kv_dim, rows, qkv_row, 0, qkv_row});
        }
        if (a.qk_norm) {
            t.set_label(blk + "attn_qk_norm");
            head_norm(q, L.q_norm, c.n_heads);
            head_norm(k, L.k_norm, c.n_kv_heads);
        }
        if (!roped) {
            t.set_label(blk + "rope_kv");
            kernels::rope_kv(t, qkv, rope_cos, rope_sin, cache, step,
                             {uint32_t(c.n_heads), uint32_t(c.n_kv_heads), uint32_t(c.head_dim), uint32_t(base_->context),
                              style == RopeStyle::kInterleaved, style != RopeStyle::kNone, uint32_t(rows), uint32_t(qkv_row)});
        }
        t.set_label(blk + "attention");
        const kernels::AttentionShape heads{uint32_t(c.n_heads), uint32_t(c.n_kv_heads), uint32_t(c.head_dim), uint32_t(base_->context),
                                   sliding ? uint32_t(c.sliding_window) : 0u, c.attn_scale, c.attn_softcap};
        // A chunk's attention writes the halves its O GEMM reads, where both take them (the
        // O projection then runs on gemm_cm2.comp, not on the f32-X GEMM: 4.3 -> ~2.6 ms a 7b chunk).
        const DType attn_dtype =
            prefill && half_x(q_dim) && kernels::flash_attention_coopmat(t.device().profile(), cache, uint32_t(c.head_dim))
                ? DType::kF16 : DType::kF32;
        if (prefill)
            kernels::flash_attention(t, q, cache, attn_out, step,
                                     {heads, uint32_t(rows), uint32_t(qkv_row), uint32_t(q_dim), attn_dtype});
        else
            kernels::attention(t, q, cache, s.get("attn_partial"), attn_out, step, heads,
                               handoff_ptr(take_handoff(slot(l, 0), uint32_t(c.n_heads))));
        t.set_label(blk + "attn_output");
        const bool fused_gate_up = fuses_gate_up(L);
        // The O GEMV also zeroes the layer before's slots (of the last layer, for l = 0).
        const uint32_t before = uint32_t(1 + kSlotsPerLayer * ((l + c.n_layers - 1) % c.n_layers));
        const auto o_handoff = take_handoff(slot(l, 1), o_tiles, any_handoff ? before : 0);
        into_residual(L.o, {Binding(attn_out), std::nullopt, attn_dtype}, q_dim, a.post_attn_norm ? &L.post_attn_norm : nullptr,
                      handoff_ptr(o_handoff),
                      a.post_attn_norm ? std::nullopt : hand_norm_forward(L.o, L.ffn_norm, {&L.gate, &L.up}, o_handoff));
        t.set_label(blk + "ffn_norm");
        const ProjectionInput ffn_in = normed_input(L.ffn_norm, L.gate.type, h0, residual, rows, !prefill);
        ProjectionInput down_in;
        // A chunk's gated GEMM (below) reads f16 weights from the first chunk length past the
        // short tiles (0: none in this table), block formats dequantized from dequant_rows.
        const bool gate_up_f16 = L.gate.type == TensorType::F16 && L.up.type == TensorType::F16;
        const bool gate_up_dequantized = reads_dequantized(L.gate, ffn, dim) && reads_dequantized(L.up, ffn, dim);
        const uint32_t gated_rows = !gate_up_f16 ? dequant_rows : short_rows && rows > short_rows ? short_rows + 1 : 0;
        if (fused_gate_up) {
            // Float weights: act(gate) * up straight from the gate/up dispatch.
            t.set_label(blk + "ffn_gate_up");
            kernels::gemv_gate_up(t, L.gate.buffer, L.up.buffer, L.gate.type, ffn_in.x, act, ffn, dim, a.activation,
                                  ffn_in.fold());
            down_in = {Binding(act), std::nullopt};
        } else if (prefill && half_x(ffn) && (gate_up_f16 || gate_up_dequantized) &&
                   kernels::gemm_fuses_gated(t.device().profile(), TensorType::F16, a.activation,
                                             {rows, ffn, dim, dim, ffn, gated_rows, 0, ffn_in.dtype})) {
            // The gate and up GEMMs with the activation in their epilogue, on f16 weights or on
            // block formats dequantized to f16: the down projection's halves written from the
            // accumulators (no f32 gate and up, no act_*). Shorter chunks (the short tiles, or
            // the formats' own GEMMs) run those GEMMs and act_* in their own row window, which
            // the gated dispatch shares (only one of them has workgroups for a chunk).
            t.set_label(blk + "ffn_gate");
            const Buffer& w_gate = gate_up_f16 ? L.gate.buffer : dequantized(L.gate, ffn, dim);
            t.set_label(blk + "ffn_up");
            const Buffer& w_up = gate_up_f16 ? L.up.buffer : dequantized(L.up, ffn, dim);
            if (gated_rows) {
                for (const auto& [label, w, y] : {std::tuple{"ffn_gate", &L.gate, &gate}, std::tuple{"ffn_up", &L.up, &up}}) {
                    t.set_label(blk + label);
                    own_gemm(*w, ffn_in.x, *y, ffn, dim, ffn, false, ffn_in.dtype, gated_rows);
                }
                t.set_label(blk + "ffn_act");
                kernels::gated_activation(t, a.activation, gate, up, act, rows * ffn, DType::kF16, gated_rows);
            }
            t.set_label(blk + "ffn_gate_up");
            kernels::gemm_gated(t, a.activation, w_gate, w_up, ffn_in.x, act,
                                {rows, ffn, dim, dim, ffn, gated_rows, 0, ffn_in.dtype}, step);
            f16_gemm_recorded();
            down_in = {Binding(act), std::nullopt, DType::kF16};
        } else {
            const auto gate_up_handoff = take_handoff(slot(l, 2), gate_up_tiles);
            project(blk, "ffn_gate_up", {{"ffn_gate", &L.gate, gate, ffn, ffn}, {"ffn_up", &L.up, up, ffn, ffn}}, ffn_in,
                    nullptr, handoff_ptr(gate_up_handoff));
            t.set_label(blk + "ffn_act");
            down_in = gated(L.down.type);
        }
        t.set_label(blk + "ffn_down");
        const auto down_handoff = take_handoff(slot(l, 3), down_tiles);
        // The next norm: the next layer's attention norm, or after the last layer the output norm.
        const LayerWeights* next = l + 1 < c.n_layers ? &base_->weights.layers[size_t(l) + 1] : nullptr;
        std::optional<kernels::GemvNormOut> down_norm;
        if (!a.post_ffn_norm)
            down_norm = next ? hand_norm_forward(L.down, next->attn_norm, {&next->q, &next->k, &next->v}, down_handoff)
                             : hand_norm_forward(L.down, base_->weights.output_norm, {&head}, down_handoff);
        into_residual(L.down, down_in, ffn, a.post_ffn_norm ? &L.post_ffn_norm : nullptr, handoff_ptr(down_handoff), down_norm);
        // A tap: h0 now holds the residual stream after layer l, for every row of the chunk.
        const auto tap = std::find(pass.taps.begin(), pass.taps.end(), l);
        if (tap != pass.taps.end()) {
            t.set_label(blk + "tap");
            const size_t bytes = rows * dim * 4;
            kernels::copy(t, h0, Binding(*pass.tap_buffer, size_t(tap - pass.taps.begin()) * bytes, bytes), bytes);
        }
    }
    if (prefill && pass.all_logits) {
        t.set_label("output_norm");
        const ProjectionInput all_in = pre_norm(base_->weights.output_norm, head.type, h0, residual, rows, false);
        t.set_label("output");
        matmul(head, all_in.x, s.get("batch_logits"), size_t(c.vocab_size), dim, size_t(c.vocab_size), false, nullptr,
               all_in.dtype);
        final_softcap(s.get("batch_logits"), rows);
    }
    // The decode tail: output norm, LM head and sampling of one row (a chunk's last).
    t.set_chunk_rows(0);
    const Buffer& last = s.get("h0");
    if (prefill) {
        t.set_label("last_row");
        kernels::last_row(t, h0, last, step, rows, dim);
    }
    t.set_label("output_norm");
    const ProjectionInput head_in = normed_input(base_->weights.output_norm, head.type, last, s.get("residual"), 1, true);
    t.set_label("output");
    kernels::gemv(t, head.buffer, head.type, head_in.x, s.get("logits"), size_t(c.vocab_size), dim, false, head_in.fold(),
                  kernels::engine_x_rounding(t.device().profile()));
    final_softcap(s.get("logits"), 1);
    t.set_label("sample");
    kernels::sample(t, s.get("logits"), s.get("token_ids"), s.get("sampled_logprobs"), step, s.get("sampler"),
                    size_t(c.vocab_size), uint32_t(prefill ? 1 : pass.step_index + 1));
    return table;
}

void Model::check_token(int token) const {
    AKUNU_CHECK(token >= 0 && token < base_->config.vocab_size,
                "token id " + std::to_string(token) + " is out of range for a vocabulary of " + std::to_string(base_->config.vocab_size));
}

void Model::drain() {
    for (int c : in_flight_) chains_[c]->wait();
    in_flight_.clear();
    in_flight_pos_.clear();
}

void Model::reset() {
    drain();
    kv_->reset();
}

void Model::truncate(int length) {
    drain();
    kv_->truncate(length);
}

void check_sampler(const SamplerState& st) {
    AKUNU_CHECK(std::isfinite(st.temperature) && st.temperature >= 0.0f, "temperature must be >= 0 (0: greedy)");
    AKUNU_CHECK(st.top_p > 0.0f && st.top_p <= 1.0f, "top_p must be in (0, 1] (1: off)");
    AKUNU_CHECK(st.min_p >= 0.0f && st.min_p <= 1.0f, "min_p must be in [0, 1] (0: off)");
}

void Model::set_sampler(const SamplerState& st) {
    check_sampler(st);
    drain();
    sampler_ = st;
    scratch_->get("sampler").write(&st, sizeof st);
}

void Model::decode(int token) {
    check_token(token);
    drain();
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos < base_->context, "the context of " + std::to_string(base_->context) + " tokens is full; reset() or truncate() the cache");
    const uint32_t id = uint32_t(token);
    const StepState st{uint32_t(pos), 0, 1, 0};
    scratch_->get("token_ids").write(&id, 4);
    scratch_->get("step").write(&st, sizeof st);
    table_->set_position(uint32_t(pos));
    kv_->reserve(pos + 1);
    step_->submit_and_wait();
    kv_->set_length(pos + 1);
    check_handoffs();
}

void Model::check_handoffs() {
    if (!handoffs_) return;
    Buffer& counters = scratch_->get("gemv_handoff");
    uint32_t timeouts = 0;
    counters.read(&timeouts, 4);
    if (timeouts == 0) return;
    const uint32_t zero = 0;
    counters.write(&zero, 4);
    throw Error("a decode step's GEMV hand-off timed out " + std::to_string(timeouts) +
                " time(s): this device did not start the waited-for GEMV's workgroups first, so the step's "
                "logits and KV cache rows are wrong. Load the model again with AKUNU_GEMV_HANDOFF=0.");
}

void Model::submit_chain(int c, uint32_t input_slot) {
    const int pos = kv_->current_length();
    StepState* steps = static_cast<StepState*>(scratch_->get("step").contents());
    for (int k = 0; k < base_->chain; ++k) {
        const uint32_t slot = k == 0 ? input_slot : uint32_t(c * base_->chain + k);
        steps[c * base_->chain + k] = StepState{uint32_t(pos + k), slot, 1, 0};
        chain_tables_[c][size_t(k)]->set_position(uint32_t(pos + k));
    }
    kv_->reserve(pos + base_->chain);  // blocks exist before the submission writes them
    chains_[c]->submit();
    kv_->set_length(pos + base_->chain);
    in_flight_.push_back(c);
    in_flight_pos_.push_back(pos);
    last_slot_ = uint32_t(c * base_->chain + base_->chain);
}

void Model::start_first_chain(int token) {
    check_token(token);
    drain();
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos + base_->chain <= base_->context, "a chain of " + std::to_string(base_->chain) + " steps does not fit: " +
                                              std::to_string(pos) + " of " + std::to_string(base_->context) + " positions are used");
    const uint32_t id = uint32_t(token);
    scratch_->get("token_ids").write(&id, 4);
    submit_chain(0, 0);
}

void Model::chain_start(int token) {
    start_first_chain(token);
    if (kv_->current_length() + base_->chain <= base_->context) submit_chain(1, last_slot_);
}

bool Model::chain_next(std::vector<int>& ids, std::vector<float>& logprobs, int& first_pos, bool more) {
    if (in_flight_.empty()) return false;
    const int c = in_flight_.front();
    first_pos = in_flight_pos_.front();
    chains_[c]->wait();
    in_flight_.erase(in_flight_.begin());
    in_flight_pos_.erase(in_flight_pos_.begin());
    check_handoffs();
    ids.resize(size_t(base_->chain));
    logprobs.resize(size_t(base_->chain));
    const size_t first_slot = size_t(c * base_->chain + 1) * 4;
    scratch_->get("token_ids").read(ids.data(), ids.size() * 4, first_slot);  // u32 ids < vocab: int agrees
    scratch_->get("sampled_logprobs").read(logprobs.data(), logprobs.size() * 4, first_slot);
    // Chain c is free again: it continues from the newest chain's last id, on the GPU.
    if (more && kv_->current_length() + base_->chain <= base_->context) submit_chain(c, last_slot_);
    return true;
}

std::vector<int> Model::decode_chain(int token, std::vector<float>* logprobs) {
    start_first_chain(token);
    std::vector<int> ids;
    std::vector<float> lp;
    int first = 0;
    chain_next(ids, lp, first, false);
    if (logprobs) *logprobs = std::move(lp);
    return ids;
}

// How many untimed replays of `table` a profile runs before its timed one, in the same
// submission: enough to keep the GPU busy for kProfileWarmMs by one run's time. A GPU left idle
// for a moment clocks down (an H100 from 1,980 to 345 MHz within seconds), and a lone step does
// not bring it back: timed alone, a 7b f16 decode step read 13.0 ms where decode runs 5.4 ms a
// step, 5.7 after 20 replays (bench/NOTES.md). CPUs (lavapipe, the CPU backend) replay none;
// AKUNU_PROFILE_WARM_MS sets the time anywhere (0: none).
namespace {
int replays_to_warm(const std::shared_ptr<Device>& device, const DispatchTable& table) {
    constexpr double kProfileWarmMs = 400.0;
    const bool gpu = device->profile().type != DeviceType::kCpu && !device->is_cpu();
    const char* env = std::getenv("AKUNU_PROFILE_WARM_MS");
    const double warm_ms = env && *env ? std::atof(env) : gpu ? kProfileWarmMs : 0.0;
    if (warm_ms <= 0) return 0;
    CommandList once(device);
    once.begin();
    table.record(once);
    once.end();
    const auto t0 = std::chrono::steady_clock::now();
    once.submit_and_wait();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return int(std::clamp(std::ceil(warm_ms / std::max(ms, 1e-3)), 1.0, 256.0));
}
}  // namespace

std::vector<Model::ProfileRow> Model::profile(int tokens) {
    drain();
    AKUNU_CHECK(base_->device->profile().timestamps, "'" + base_->device->profile().name + "' has no GPU timestamps to profile with");
    AKUNU_CHECK(tokens >= 1 && tokens <= base_->prefill_chunk,
                "profile: tokens must be 1 (a decode step) up to the prefill chunk (" + std::to_string(base_->prefill_chunk) + ")");
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos + tokens <= base_->context, "profile: " + std::to_string(tokens) + " tokens do not fit the context");
    DispatchTable& table = tokens == 1 ? *table_ : *prefill_table_;
    if (tokens > 1)
        table.set_tokens(uint32_t(tokens));
    else
        table.set_position(uint32_t(pos));
    const std::vector<uint32_t> zeros(size_t(tokens), 0);
    scratch_->get(tokens == 1 ? "token_ids" : "batch_token_ids").write(zeros.data(), zeros.size() * 4);
    const StepState st{uint32_t(pos), 0, uint32_t(tokens), 0};
    scratch_->get(tokens == 1 ? "step" : "batch_step").write(&st, sizeof st);
    kv_->reserve(pos + tokens);
    const int replays = replays_to_warm(base_->device, table);
    CommandList cl(base_->device, uint32_t(table.commands().size() + 1));
    std::vector<int> ts;
    cl.begin();
    for (int i = 0; i < replays; ++i) table.record(cl);
    table.record(cl, &ts);
    cl.end();
    cl.submit_and_wait();
    std::vector<ProfileRow> rows;
    for (size_t i = 0; i < table.commands().size(); ++i) rows.push_back({&table.commands()[i], cl.elapsed_ms(ts[i], ts[i + 1])});
    return rows;
}

int Model::sampled_token() const {
    uint32_t id = 0;
    scratch_->get("token_ids").read(&id, 4, 4);
    return int(id);
}

float Model::sampled_logprob() const {
    float lp = 0;
    scratch_->get("sampled_logprobs").read(&lp, 4, 4);
    return lp;
}

Model::TapVariant& Model::tap_variant(const std::vector<int>& layers, bool all_logits) {
    auto it = tap_variants_.find({layers, all_logits});
    if (it != tap_variants_.end()) return it->second;
    const int rows = all_logits ? base_->logit_rows : base_->prefill_chunk;
    Buffer taps = Buffer::allocate(base_->device, layers.size() * size_t(rows) * size_t(config().dim) * 4);
    // The table keeps a pointer to the taps buffer: build it once the buffer has its place.
    TapVariant& v = tap_variants_.emplace(std::make_pair(layers, all_logits), TapVariant{std::move(taps), {}, {}})
                        .first->second;
    try {
        v.table = build_table({true, rows, 0, all_logits, layers, &v.taps});
        v.cl = record({v.table.get()});
    } catch (...) {
        tap_variants_.erase({layers, all_logits});
        throw;
    }
    return v;
}

void Model::eval(const std::vector<int>& ids, float* all_logits, const std::vector<int>& taps, float* tap_out) {
    AKUNU_CHECK(!ids.empty(), "eval needs at least one token");
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos + int(ids.size()) <= base_->context,
                "a prompt of " + std::to_string(ids.size()) + " tokens does not fit: " + std::to_string(pos) + " of " +
                    std::to_string(base_->context) + " positions are used");
    for (int id : ids)
        AKUNU_CHECK(id >= 0 && id < base_->config.vocab_size,
                    "token id " + std::to_string(id) + " is out of range for a vocabulary of " + std::to_string(base_->config.vocab_size));
    const int n_layers = config().n_layers;
    const std::vector<int> layers = tapped_layers(taps, n_layers);
    AKUNU_CHECK(layers.empty() || tap_out, "eval: taps need an output array");
    if (ids.size() == 1 && !all_logits && layers.empty()) {
        decode(ids[0]);
        return;
    }
    drain();
    kv_->reserve(pos + int(ids.size()));
    // Chunks of up to prefill_chunk tokens (logit_rows with all-position logits), each one
    // submission of a recorded table; the last chunk is shorter and its table skips the rest.
    const size_t chunk = size_t(all_logits ? base_->logit_rows : base_->prefill_chunk);
    TapVariant* tapped = layers.empty() ? nullptr : &tap_variant(layers, all_logits != nullptr);
    CommandList& cl = tapped ? *tapped->cl : all_logits ? *prefill_all_cl_ : *prefill_cl_;
    DispatchTable& table = tapped ? *tapped->table : all_logits ? *prefill_all_table_ : *prefill_table_;
    const size_t vocab = size_t(base_->config.vocab_size), dim = size_t(config().dim);
    Buffer &batch_ids = scratch_->get("batch_token_ids"), &batch_step = scratch_->get("batch_step");
    for (size_t at = 0; at < ids.size(); at += chunk) {
        const size_t n = std::min(chunk, ids.size() - at);
        const int first = kv_->current_length();
        batch_ids.write(ids.data() + at, n * 4);  // ids are checked non-negative: int and u32 agree
        const StepState st{uint32_t(first), 0, uint32_t(n), 0};
        batch_step.write(&st, sizeof st);
        table.set_tokens(uint32_t(n));
        cl.submit_and_wait();
        kv_->set_length(first + int(n));
        if (all_logits) scratch_->get("batch_logits").read(all_logits + at * vocab, n * vocab * 4);
        // tap_out[i, at : at + n, :] = taps[slot of layer taps[i], 0 : n, :]
        for (size_t i = 0; i < taps.size(); ++i) {
            const int l = layer_index(taps[i], n_layers);
            const size_t slot = size_t(std::lower_bound(layers.begin(), layers.end(), l) - layers.begin());
            tapped->taps.read(tap_out + (i * ids.size() + at) * dim, n * dim * 4, slot * chunk * dim * 4);
        }
    }
}

}  // namespace akunu
