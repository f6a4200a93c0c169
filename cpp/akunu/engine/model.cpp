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
#include "akunu/engine/table_builder.h"
#include "akunu/engine/validate.h"
#include "params.h"

namespace akunu {

namespace {

// cos/sin of pos * inv_freq[i] for positions [from, to), the angle formed in f32 as
// transformers forms it.
void fill_rope_rows(Buffer& cos_b, Buffer& sin_b, const std::vector<float>& inv_freq, int from, int to) {
    const size_t half = inv_freq.size();
    std::vector<float> c(size_t(to - from) * half), s(c.size());
    for (int pos = from; pos < to; ++pos)
        for (size_t i = 0; i < half; ++i) {
            const float angle = float(pos) * inv_freq[i];
            c[size_t(pos - from) * half + i] = float(std::cos(double(angle)));
            s[size_t(pos - from) * half + i] = float(std::sin(double(angle)));
        }
    cos_b.write(c.data(), c.size() * 4, size_t(from) * half * 4);
    sin_b.write(s.data(), s.size() * 4, size_t(from) * half * 4);
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

void fill_rope_tables(const LoadedModel& b, ScratchBuffers& s, int from, int to) {
    const float* divisors = b.weights.rope_divisors.empty() ? nullptr : b.weights.rope_divisors.data();
    fill_rope_rows(s.get("rope_cos"), s.get("rope_sin"), rope_inv_freq(b.config, false, divisors), from, to);
    if (s.all().count("rope_cos_local"))
        fill_rope_rows(s.get("rope_cos_local"), s.get("rope_sin_local"), rope_inv_freq(b.config, true), from, to);
}

// Positions [0, n) become usable: the KV cache's blocks and the RoPE rows they need. RoPE rows
// are filled kRopeRows at a time as the sequence grows, so that a long context costs memory
// (the CPU backend's pages) only for the positions used.
void Model::reserve(int n) {
    constexpr int kRopeRows = 4096;
    kv_->reserve(n);
    if (n <= rope_rows_) return;
    const int to = std::min(base_->context, (n + kRopeRows - 1) / kRopeRows * kRopeRows);
    fill_rope_tables(*base_, *scratch_, rope_rows_, to);
    rope_rows_ = to;
}

std::shared_ptr<LoadedModel> open_loaded(const std::string& path, const LoadOptions& options) {
    auto b = std::make_shared<LoadedModel>();
    b->files = ModelFiles::open(path);
    AKUNU_CHECK(b->files->has_weights(), "'" + path + "' holds a config but no weights");
    b->config = load_config(*b->files);
    const ArchDescriptor& arch = b->config.arch();
    AKUNU_CHECK(arch.causal, b->config.architecture + " is an encoder; decoding needs a causal language model");
    AKUNU_CHECK(!arch.encoder, path + ": " + b->config.architecture +
                                   " is an encoder-decoder (speech to text); load it with akunu.WhisperModel "
                                   "(WhisperModel::load)");
    validate_model(*b->files, b->config);
    AKUNU_CHECK(options.context > 0, "context must be positive");
    b->context = std::min(options.context, b->config.max_context);
    if (const GgufFile* g = b->files->gguf())
        if (const GgufValue* e = g->find("tokenizer.ggml.eos_token_id"))
            b->eos_id = int(e->as_int("tokenizer.ggml.eos_token_id"));
    b->fingerprint = model_fingerprint(*b->files, b->config);
    return b;
}

void place_loaded(LoadedModel& b, const std::shared_ptr<Device>& device, const LoadOptions& options,
                  const std::string& part) {
    b.device = device;
    // Chain length: long chains amortise a submission on GPUs; lavapipe gains little from them.
    b.chain = options.chain > 0 ? options.chain : (b.device->profile().type == DeviceType::kCpu ? 4 : 16);
    AKUNU_CHECK(b.chain <= 256, "chain length " + std::to_string(b.chain) + " is out of range (1 to 256)");
    b.chain = std::min(b.chain, b.context);
    AKUNU_CHECK(options.prefill_chunk >= 0, "prefill_chunk must be positive (0: the default of 512, 128 on the CPU)");
    // The CPU's GEMMs reach their speed at 64 rows, and its row-wise kernels (activation, norms)
    // run over the whole chunk: a 128-token prompt in a 512-row chunk would pay 4x for them.
    const int default_chunk = b.device->profile().cpu_backend ? 128 : 512;
    b.batch_chunk = options.prefill_chunk > 0 ? options.prefill_chunk : default_chunk;
    b.prefill_chunk = std::min(b.batch_chunk, b.context);
    b.logit_rows = prefill_logit_rows(b.config, b.prefill_chunk);
    PlanOptions po;
    po.context = b.context;
    po.max_chain = b.chain;
    po.prefill_chunk = b.prefill_chunk;
    po.kv_dtype = options.kv_dtype;
    po.kv_recent = options.kv_recent;
    po.kv_blocks = options.kv_blocks;
    po.kv_ring = options.kv_ring;
    po.weight_tiles = b.device->profile().weight_tiles;
    po.layers = b.layers;
    b.plan = with_prefill_dequant(plan_memory(b.config, b.files.get(), po), b.files.get(),
                                  b.device->profile().prefill_dequant_rows);
    const PlanFit fit = check_fit(b.plan, b.device->profile());
    if (!fit.fits) {
        std::string why;
        for (const auto& n : fit.notes) why += "\n  " + n;
        throw Error("the model" + part + " does not fit on '" + b.device->profile().name + "':" + why);
    }
    auto progress = [&](size_t done, size_t total) {
        if (options.progress) options.progress("weights", done, total);
    };
    progress(0, 0);
    b.weights = upload_weights(b.device, *b.files, b.config, progress, b.layers);
}

Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
    auto stage = [&](const char* name) {
        if (options.progress) options.progress(name, 0, 0);
    };
    // The load steps that read headers only (docs/architecture.md, "Loading a model"): format,
    // config, architecture, validation, then the plan, all before anything is allocated on the
    // device.
    stage("format");
    std::shared_ptr<LoadedModel> b = open_loaded(path, options);
    std::unique_ptr<Model> m;
    if (!options.devices.empty()) {
        m = load_split(std::move(b), options);
    } else {
        stage("device");
        place_loaded(*b, Device::create(options.device, options.tuning), options, "");
        m.reset(new Model());
        m->base_ = std::move(b);
        m->create_runtime(options.progress);
    }
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
                                    b.plan.kv.ring_rows, b.layers, b.plan.kv.recent.window,
                                    b.plan.kv.recent.rows - b.plan.kv.recent.window);
    stage("scratch");
    scratch_ = std::make_unique<ScratchBuffers>(b.device, b.config, b.context, b.chain, b.prefill_chunk,
                                                b.plan.options.prefill_dequant);

    const ModelConfig& c = b.config;
    // Decode attention's per-head arrival counters start at zero (kernels::attention).
    const std::vector<uint32_t> zeros(size_t(c.n_heads), 0u);
    scratch_->get("attn_partial")
        .write(zeros.data(), zeros.size() * 4,
               kernels::attention_counters_offset(uint32_t(c.n_heads), uint32_t(c.head_dim), uint32_t(b.context)));
    // So do the GEMV hand-off counters (kernels::GemvHandoff).
    Buffer& handoff = scratch_->get("gemv_handoff");
    const std::vector<uint32_t> handoff_zeros(handoff.size() / 4, 0u);
    handoff.write(handoff_zeros.data(), handoff.size());

    // A part of a split model: its residual stream in and out, in host-visible memory.
    const int n_layers = c.n_layers;
    const size_t io_bytes = std::max(handed_bytes(true, size_t(b.prefill_chunk)), handed_bytes(false, 1));
    if (!b.layers.embeds()) split_in_ = Buffer::allocate(b.device, io_bytes, Residency::kHost);
    if (!b.layers.heads(n_layers)) split_out_ = Buffer::allocate(b.device, io_bytes, Residency::kHost);
    // A step's logits row, where the host reads it staged, goes through the device's staging area.
    if (b.layers.heads(n_layers)) b.device->reserve_staging(scratch_->get("logits").size());

    stage("dispatch table");
    set_sampler(SamplerState{0.0f, 0, 1.0f, 0.0f, 0, 0, 0, 0});
    // Each step table's attention follows the cache's length: its counts sit in step_dispatch,
    // the single step's first, then chain c's step k at slot 1 + c * chain + k.
    const Buffer& step_counts = scratch_->get("step_dispatch");
    const size_t step_slot = step_counts.size() / size_t(2 * b.chain + 1);
    table_ = build_table({false, 1, 0, false});
    table_->use_counts(step_counts, 0, step_slot);
    step_ = record({table_.get()});
    // A split model's chains take the per-step path (split_chain): no chain tables.
    for (int ci = 0; ci < 2 && b.layers.whole(n_layers); ++ci) {
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
    ModelUse::Scope in_use(use_);
    drain();
    const Device& d = device();
    const uint64_t heap = usable_heap_bytes(d.profile());
    const uint64_t need = plan().fork_bytes;
    AKUNU_CHECK(d.allocated_bytes() + need <= heap,
                "fork needs " + std::to_string(need >> 20) + " MiB more (its KV cache and scratch) but '" +
                    d.profile().name + "' has " + std::to_string(d.allocated_bytes() >> 20) + " of " +
                    std::to_string(heap >> 20) + " MiB allocated; load with a smaller context or prefill chunk");
    std::unique_ptr<Model> f = with_runtime(base_);
    for (const auto& part : front_) f->front_.push_back(with_runtime(part->base_));
    f->restore_state(capture_state());
    return f;
}

std::unique_ptr<DispatchTable> Model::build_table(const Pass& given) {
    Pass pass = given;
    if (split_in_) pass.split_in = &split_in_;
    if (split_out_) pass.split_out = &split_out_;
    const DecodePlan plan = plan_for(*base_, *scratch_, *kv_, pass);
    handoffs_ = handoffs_ || plan.handoffs;
    return akunu::build_table(*base_, *scratch_, *kv_, plan, pass);
}

DecodePlan Model::pass_plan(bool prefill) const {
    return plan_for(*base_, *scratch_, *kv_, {prefill, prefill ? base_->prefill_chunk : 1, 0, false});
}

void Model::check_token(int token) const {
    AKUNU_CHECK(token >= 0 && token < base_->config.vocab_size, "token id " + std::to_string(token) +
                                                                    " is out of range for a vocabulary of " +
                                                                    std::to_string(base_->config.vocab_size));
}

void Model::drain() {
    for (int c : in_flight_) chains_[c]->wait();
    in_flight_.clear();
    in_flight_pos_.clear();
    done_chains_.clear();
    owed_chains_ = 0;
}

void Model::reset() {
    ModelUse::Scope in_use(use_);
    drain();
    for (Model* p : all_parts()) p->kv_->reset();
}

void Model::truncate(int length) {
    ModelUse::Scope in_use(use_);
    drain();
    kv_->truncate(length);  // checks first: every part's cache has the same length and window
    for (const auto& p : front_) p->kv_->truncate(length);
}

void check_sampler(const SamplerState& st) {
    AKUNU_CHECK(std::isfinite(st.temperature) && st.temperature >= 0.0f, "temperature must be >= 0 (0: greedy)");
    AKUNU_CHECK(st.top_p > 0.0f && st.top_p <= 1.0f, "top_p must be in (0, 1] (1: off)");
    AKUNU_CHECK(st.min_p >= 0.0f && st.min_p <= 1.0f, "min_p must be in [0, 1] (0: off)");
}

void Model::set_sampler(const SamplerState& st) {
    ModelUse::Scope in_use(use_);
    check_sampler(st);
    drain();
    sampler_ = st;
    scratch_->get("sampler").write(&st, sizeof st);
}

void Model::decode(int token) {
    ModelUse::Scope in_use(use_);
    check_token(token);
    drain();
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos < base_->context, "the context of " + std::to_string(base_->context) +
                                          " tokens is full; reset() or truncate() the cache");
    step_all(token);
}

void Model::step(int token) {
    const int pos = kv_->current_length();
    const uint32_t id = uint32_t(token);
    const StepState st{uint32_t(pos), 0, 1, 0};
    scratch_->get("token_ids").write(&id, 4);
    scratch_->get("step").write(&st, sizeof st);
    table_->set_position(uint32_t(pos));
    reserve(pos + 1);
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
                "logits and KV cache rows are wrong. Load the model again with tuning gemv_handoff=0 "
                "(AKUNU_TUNE=gemv_handoff=0).");
}

void Model::submit_chain(int c, uint32_t input_slot) {
    const int pos = kv_->current_length();
    StepState* steps = static_cast<StepState*>(scratch_->get("step").contents());
    for (int k = 0; k < base_->chain; ++k) {
        const uint32_t slot = k == 0 ? input_slot : uint32_t(c * base_->chain + k);
        steps[c * base_->chain + k] = StepState{uint32_t(pos + k), slot, 1, 0};
        chain_tables_[c][size_t(k)]->set_position(uint32_t(pos + k));
    }
    reserve(pos + base_->chain);  // blocks exist before the submission writes them
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
    AKUNU_CHECK(pos + base_->chain <= base_->context, "a chain of " + std::to_string(base_->chain) +
                                                          " steps does not fit: " + std::to_string(pos) + " of " +
                                                          std::to_string(base_->context) + " positions are used");
    if (!front_.empty()) return split_chain(token);
    const uint32_t id = uint32_t(token);
    scratch_->get("token_ids").write(&id, 4);
    submit_chain(0, 0);
}

void Model::chain_start(int token) {
    ModelUse::Scope in_use(use_);
    start_first_chain(token);
    if (kv_->current_length() + base_->chain > base_->context) return;
    if (!front_.empty()) {
        owed_chains_ = 1;
        owed_from_ = done_chains_.back().ids.back();
        return;
    }
    submit_chain(1, last_slot_);
}

bool Model::chain_next(std::vector<int>& ids, std::vector<float>& logprobs, int& first_pos, bool more) {
    ModelUse::Scope in_use(use_);
    if (!front_.empty()) return split_chain_next(ids, logprobs, first_pos, more);
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
    ModelUse::Scope in_use(use_);
    start_first_chain(token);
    std::vector<int> ids;
    std::vector<float> lp;
    int first = 0;
    chain_next(ids, lp, first, false);
    if (logprobs) *logprobs = std::move(lp);
    return ids;
}

std::vector<Model::ProfileRow> Model::profile(int tokens) {
    ModelUse::Scope in_use(use_);
    drain();
    AKUNU_CHECK(base_->device->profile().timestamps,
                "'" + base_->device->profile().name + "' has no GPU timestamps to profile with");
    AKUNU_CHECK(tokens >= 1 && tokens <= base_->prefill_chunk,
                "profile: tokens must be 1 (a decode step) up to the prefill chunk (" +
                    std::to_string(base_->prefill_chunk) + ")");
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos + tokens <= base_->context,
                "profile: " + std::to_string(tokens) + " tokens do not fit the context");
    DispatchTable& table = tokens == 1 ? *table_ : *prefill_table_;
    if (tokens > 1)
        table.set_tokens(uint32_t(tokens));
    else
        table.set_position(uint32_t(pos));
    const std::vector<uint32_t> zeros(size_t(tokens), 0);
    scratch_->get(tokens == 1 ? "token_ids" : "batch_token_ids").write(zeros.data(), zeros.size() * 4);
    const StepState st{uint32_t(pos), 0, uint32_t(tokens), 0};
    scratch_->get(tokens == 1 ? "step" : "batch_step").write(&st, sizeof st);
    reserve(pos + tokens);
    std::vector<ProfileRow> rows;  // a split model's parts before this one first, in layer order
    for (const auto& part : front_) {
        const std::vector<ProfileRow> front = part->profile(tokens);
        rows.insert(rows.end(), front.begin(), front.end());
    }
    const std::vector<ProfileRow> own = profile_table(base_->device, table);
    rows.insert(rows.end(), own.begin(), own.end());
    return rows;
}

int Model::sampled_token() const {
    ModelUse::Scope in_use(use_);
    uint32_t id = 0;
    scratch_->get("token_ids").read(&id, 4, 4);
    return int(id);
}

float Model::sampled_logprob() const {
    ModelUse::Scope in_use(use_);
    float lp = 0;
    scratch_->get("sampled_logprobs").read(&lp, 4, 4);
    return lp;
}

Model::TapVariant& Model::tap_variant(const std::vector<int>& layers, bool all_logits) {
    auto it = tap_variants_.find({layers, all_logits});
    if (it != tap_variants_.end()) {
        it->second.used = ++tap_clock_;
        return it->second;
    }
    if (tap_variants_.size() >= kMaxTapVariants)  // every table is idle here: eval drained
        tap_variants_.erase(
            std::min_element(tap_variants_.begin(), tap_variants_.end(),
                             [](const auto& a, const auto& b) { return a.second.used < b.second.used; }));
    const int rows = all_logits ? base_->logit_rows : base_->prefill_chunk;
    Buffer taps = Buffer::allocate(base_->device, layers.size() * size_t(rows) * size_t(config().dim) * 4);
    // The table keeps a pointer to the taps buffer: build it once the buffer has its place.
    TapVariant& v =
        tap_variants_.emplace(std::make_pair(layers, all_logits), TapVariant{std::move(taps), {}, {}, ++tap_clock_})
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
    ModelUse::Scope in_use(use_);
    AKUNU_CHECK(!ids.empty(), "eval needs at least one token");
    const int pos = kv_->current_length();
    AKUNU_CHECK(pos + int(ids.size()) <= base_->context, "a prompt of " + std::to_string(ids.size()) +
                                                             " tokens does not fit: " + std::to_string(pos) + " of " +
                                                             std::to_string(base_->context) + " positions are used");
    for (int id : ids)
        AKUNU_CHECK(id >= 0 && id < base_->config.vocab_size, "token id " + std::to_string(id) +
                                                                  " is out of range for a vocabulary of " +
                                                                  std::to_string(base_->config.vocab_size));
    const int n_layers = config().n_layers;
    const std::vector<int> layers = tapped_layers(taps, n_layers);
    AKUNU_CHECK(layers.empty() || tap_out, "eval: taps need an output array");
    if (ids.size() == 1 && !all_logits && layers.empty()) {
        decode(ids[0]);
        return;
    }
    drain();
    // Each part runs the chunk in turn (one part unless split), with a tap variant where it
    // holds tapped layers, and hands the residual stream to the next.
    const std::vector<Model*> parts = all_parts();
    std::vector<std::vector<int>> held(parts.size());
    std::vector<TapVariant*> tapped(parts.size(), nullptr);
    for (size_t i = 0; i < parts.size(); ++i) {
        for (int l : layers)
            if (parts[i]->layers().holds(l, n_layers)) held[i].push_back(l);
        if (!held[i].empty()) tapped[i] = &parts[i]->tap_variant(held[i], all_logits != nullptr);
        parts[i]->reserve(pos + int(ids.size()));
    }
    // Chunks of up to prefill_chunk tokens (logit_rows with all-position logits), each one
    // submission of a recorded table per part; the last chunk is shorter and its tables skip
    // the rest.
    const size_t chunk = size_t(all_logits ? base_->logit_rows : base_->prefill_chunk);
    const size_t vocab = size_t(base_->config.vocab_size), dim = size_t(config().dim);
    for (size_t at = 0; at < ids.size(); at += chunk) {
        const size_t n = std::min(chunk, ids.size() - at);
        try {
            for (size_t i = 0; i < parts.size(); ++i) {
                parts[i]->run_chunk(ids.data() + at, n, all_logits != nullptr, tapped[i]);
                if (i + 1 < parts.size()) parts[i]->hand_to(*parts[i + 1], parts[i]->handed_bytes(true, n));
            }
        } catch (...) {
            align_parts();
            throw;
        }
        if (all_logits) scratch_->get("batch_logits").read(all_logits + at * vocab, n * vocab * 4);
        // tap_out[i, at : at + n, :] = taps[slot of layer taps[i], 0 : n, :] of the part holding it
        for (size_t i = 0; i < taps.size(); ++i) {
            const int l = layer_index(taps[i], n_layers);
            size_t p = 0;
            while (!parts[p]->layers().holds(l, n_layers)) ++p;
            const size_t slot = size_t(std::lower_bound(held[p].begin(), held[p].end(), l) - held[p].begin());
            tapped[p]->taps.read(tap_out + (i * ids.size() + at) * dim, n * dim * 4, slot * chunk * dim * 4);
        }
    }
}

void Model::run_chunk(const int* ids, size_t n, bool all_logits, TapVariant* tapped) {
    CommandList& cl = tapped ? *tapped->cl : all_logits ? *prefill_all_cl_ : *prefill_cl_;
    DispatchTable& table = tapped ? *tapped->table : all_logits ? *prefill_all_table_ : *prefill_table_;
    const int first = kv_->current_length();
    scratch_->get("batch_token_ids").write(ids, n * 4);  // ids are checked non-negative: int and u32 agree
    const StepState st{uint32_t(first), 0, uint32_t(n), 0};
    scratch_->get("batch_step").write(&st, sizeof st);
    table.set_tokens(uint32_t(n));
    cl.submit_and_wait();
    kv_->set_length(first + int(n));
}

}  // namespace akunu
