// Model: a loaded model ready to decode (its load steps: docs/architecture.md, "Loading a model").
//
// Loading: device, shaders (pipelines are made as the table is built), format, weights,
// config, architecture, device profile, quirks (GGUF vs HF RoPE order, gemma's stored norm + 1),
// RoPE tables, validation, KV cache, scratch, dispatch table, recording, warmup. Decoding a
// token then costs the CPU two small writes (token id, position) and one submit of the
// recorded command buffer; nothing is allocated.
//
// A model is two parts: what load() opens, plans and uploads once (files, config, weights),
// which fork() shares, and what each Model owns (KV cache, scratch, RoPE tables, dispatch
// tables). Its state (cache contents and length, sampler, last sampled token, its logprob and
// logits) can be saved to bytes and loaded back (model_state.cpp).
//
// A model split by layers across devices (split.h) is a Model for its last part (the head and
// sampler) holding Models for the parts before it; each call runs the parts in turn and hands
// the residual stream from one to the next.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "akunu/vulkan/command_list.h"
#include "akunu/engine/model_use.h"
#include "akunu/engine/profile.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/engine/memory_plan.h"
#include "akunu/formats/model_files.h"
#include "akunu/engine/scratch.h"
#include "akunu/engine/table_builder.h"
#include "akunu/engine/weights.h"
#include "params.h"

namespace akunu {

struct LoadOptions {
    int context = 4096;  // KV-cache length; clipped to the model's trained context
    std::string device;  // selector, as Device::create
    // Split by layers (split.h): a selector per part, in layer order, and the layers each takes
    // (counts or proportions; empty: in proportion to the devices' free memory).
    std::vector<std::string> devices;
    std::vector<double> split;
    std::string tuning;  // "key=value,..." over AKUNU_TUNE (core/tuning.h)
    int chain = 0;  // decode steps per submission; 0: from the device profile
    int prefill_chunk = 0;  // prompt tokens per submission; 0: 512 (clipped to the context)
    KvDType kv_dtype = KvDType::kF16;  // the KV cache's storage format (kv_format.h)
    int kv_recent = 0;  // its recent window (kv_format.h KvFormat): positions read in f16
    // The KV cache's layout (kv_cache.h): kv_blocks grows it in blocks of 256 positions instead
    // of pre-allocating the context; kv_ring keeps sliding-window layers in a ring of
    // window + max(prefill_chunk, 2 chain) positions (then truncate rewinds only so far).
    bool kv_blocks = false;
    bool kv_ring = false;
    std::function<void(const std::string& stage, size_t done, size_t total)> progress;
};

// Throws for sampler settings out of range (temperature < 0, top_p outside (0, 1], ...).
void check_sampler(const SamplerState& sampler);

struct LoadedModel;
// Fills rows [from, to) of a scratch set's RoPE tables (rope_cos, rope_sin and the local ones).
void fill_rope_tables(const LoadedModel& model, ScratchBuffers& scratch, int from, int to);

// What load() reads, plans and uploads once; a model and its forks share it, read-only.
struct LoadedModel {
    std::shared_ptr<Device> device;
    std::shared_ptr<ModelFiles> files;
    ModelConfig config;
    MemoryPlan plan;
    ModelWeights weights;
    uint64_t fingerprint = 0;  // model_fingerprint(): tells saved states of other models apart
    int context = 0;  // KV-cache positions
    int chain = 1;  // decode steps per chain submission
    int prefill_chunk = 1;  // prompt tokens per prefill submission
    int batch_chunk = 1;  // the prefill chunk asked for, before clipping to the context (a Batch's rows)
    int logit_rows = 1;  // rows per all-position-logits submission
    int eos_id = -1;  // -1 when the file names none
    // A part of a split model (split.h): its layers, and whether the residual stream handed in
    // from the part before (out to the part after) carries a norm handed forward, as it does
    // where the two parts' devices run the same kernels and the decode plan hands it forward.
    LayerRange layers;
    bool norm_in = false, norm_out = false;
};

// The load steps a model and each part of a split one share: the headers (files, config,
// validation, context, fingerprint), then a part's place on a device (chain, prefill chunk,
// memory plan and fit, the weights of its layers). `part` names it in errors ("" when whole).
std::shared_ptr<LoadedModel> open_loaded(const std::string& path, const LoadOptions& options);
void place_loaded(LoadedModel& b, const std::shared_ptr<Device>& device, const LoadOptions& options,
                  const std::string& part);

// A copy of everything decoding continues from (save_state, load_state, fork).
struct ModelState {
    int length = 0;  // KV-cache positions held
    SamplerState sampler{};  // with the seed: (seed, position) is the sampler's RNG counter
    uint32_t token = 0;  // token_ids[1]: the id sampled after the last step
    float logprob = 0;  // sampled_logprobs[1]
    std::vector<float> logits;  // [vocab] f32, scratch "logits"
    int kv_from = 0;  // KVCache::sliding_from(): sliding-window layers hold rows from here
    std::vector<uint8_t> kv;  // KVCache::save_rows(length)
};

class Model {
public:
    static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);
    ~Model();
    // A second model on the same device and weights (nothing is read or uploaded again) with
    // its own KV cache, scratch buffers and dispatch tables, holding a copy of this one's state:
    // decoding either leaves the other unchanged. It adds plan().fork_bytes of device memory.
    std::unique_ptr<Model> fork();

    const ModelConfig& config() const { return base_->config; }
    const ModelFiles& files() const { return *base_->files; }
    Device& device() const { return *base_->device; }
    const std::shared_ptr<Device>& device_ptr() const { return base_->device; }
    KVCache& kv_cache() { return *kv_; }
    const KVCache& kv_cache() const { return *kv_; }
    const ScratchBuffers& scratch() const { return *scratch_; }
    const DispatchTable& dispatch_table() const { return *table_; }
    const DispatchTable& prefill_table() const { return *prefill_table_; }  // a prefill chunk's
    // The barriers the recorded decode step (or prefill chunk) waits at between its dispatches.
    uint32_t barrier_count(bool prefill) const { return (prefill ? prefill_cl_ : step_)->barrier_count(); }
    const MemoryPlan& plan() const { return base_->plan; }
    // What this model shares with its forks and batches: files, config, weights, device.
    const std::shared_ptr<const LoadedModel>& loaded() const { return base_; }
    size_t weight_bytes() const { return base_->weights.bytes; }
    // Models that share these weights (this one, the one it was forked from, its forks).
    long weight_sharers() const { return base_.use_count(); }
    uint64_t fingerprint() const { return base_->fingerprint; }
    int context() const { return base_->context; }
    int eos_id() const { return base_->eos_id; }  // -1 when the file names none

    // Runs one token at the next position; logits land in scratch "logits" and the sampled next
    // token in token_ids[1]. Throws (changing nothing) when the context is full or the id is
    // out of range.
    void decode(int token);
    // The token sampled after the last decode() or eval(), and its log-probability under the
    // model's unfiltered distribution.
    int sampled_token() const;
    float sampled_logprob() const;
    // The sampler every table ends with (greedy by default); see shaders/sample.comp.
    void set_sampler(const SamplerState& sampler);
    const SamplerState& sampler() const { return sampler_; }

    // Chain decode: feeds `token`, then each sampled id to the next step, chain() steps in one
    // submission with no CPU work between steps. Returns the chain() sampled ids (and their
    // logprobs); the cache grows by chain() positions (rewind with truncate() to drop steps
    // after a stop token).
    std::vector<int> decode_chain(int token, std::vector<float>* logprobs = nullptr);
    int chain() const { return base_->chain; }

    // Pipelined chains: the GPU runs chain n + 1 while the caller reads chain n. chain_start
    // feeds `token` and submits up to two chains (as many as the context holds); chain_next
    // waits for the oldest, returns its ids (logprobs, and the position its first step fed),
    // then submits one more chain if `more` and the context has room; it returns false when
    // nothing is in flight. The next chain continues from the last id on the GPU. The cache
    // length counts every submitted step; any other call first waits for chains in flight.
    // A split model runs its steps one submission each, so it gains nothing by running ahead:
    // it counts the chains it owes and runs each only when chain_next is asked for it.
    void chain_start(int token);
    bool chain_next(std::vector<int>& ids, std::vector<float>& logprobs, int& first_pos, bool more);
    int chains_in_flight() const { return int(in_flight_.size() + done_chains_.size() + owed_chains_); }

    void reset();
    void truncate(int length);  // throws unless 0 <= length <= the cache length

    // The state as bytes: a versioned header (magic, format version, model fingerprint, KV
    // dtype, shapes, length, context), the state, and a checksum (model_state.h). load_state
    // validates all of it first and throws, changing nothing, when the bytes are damaged or
    // belong to another model; after it the model continues exactly as the saved one would.
    std::vector<uint8_t> save_state();
    void load_state(const uint8_t* data, size_t size);
    ModelState capture_state();
    void restore_state(const ModelState& state);  // a state of this model (checked sizes)

    // GPU time of every command of a decode step (tokens = 1) or of a prefill chunk of
    // `tokens` tokens, run once at the next positions (the cache length does not change).
    using ProfileRow = akunu::ProfileRow;
    std::vector<ProfileRow> profile(int tokens);
    // Runs `ids` at the next positions in prefill chunks (GEMMs and flash attention); the last
    // position's logits land in scratch "logits" and its argmax in token_ids[1], as after
    // decode(). With all_logits ([ids.size(), vocab] floats) every position's logits are
    // written there. Throws (changing nothing) when the prompt does not fit or an id is out
    // of range.
    //
    // With `taps` (layer indices, negative from the end as in Python), the residual stream
    // after each of those layers is copied into tap_out, [taps.size(), ids.size(), dim] f32 in
    // the order given. Taps run a variant of the prefill table, built on first use for that
    // set of layers and kept; without taps nothing changes and nothing is copied.
    void eval(const std::vector<int>& ids, float* all_logits = nullptr, const std::vector<int>& taps = {},
              float* tap_out = nullptr);
    int prefill_chunk() const { return base_->prefill_chunk; }
    // Calls that ran or changed this model so far (model_use.h): a paused caller compares it.
    uint64_t uses() const { return use_.uses(); }
    // For a caller that makes several calls as one use (a generate step): a scope on use().
    ModelUse& use() const { return use_; }
    // The choices the decode step's (or the prefill chunk's) table is built from (plan.h).
    DecodePlan pass_plan(bool prefill) const;

    // Split by layers (split.h): the parts in layer order (this model alone, or the parts before
    // it, then it), the layers this one holds, and the cache of the part that holds `layer`.
    std::vector<const Model*> parts() const;
    LayerRange layers() const { return base_->layers; }
    const KVCache& layer_cache(int layer) const;

private:
    using Pass = TablePass;
    // A prefill table with taps, built on first use per (layers, all_logits). At most
    // kMaxTapVariants are kept; a new one replaces the least recently used.
    struct TapVariant {
        Buffer taps;  // [layers, rows, dim] f32
        std::unique_ptr<DispatchTable> table;
        std::unique_ptr<CommandList> cl;
        uint64_t used = 0;  // tap_clock_ at its last use
    };
    static constexpr size_t kMaxTapVariants = 8;
    uint64_t tap_clock_ = 0;
    Model() = default;
    void create_runtime(const std::function<void(const std::string&, size_t, size_t)>& progress);
    std::unique_ptr<DispatchTable> build_table(const Pass& pass);
    std::unique_ptr<CommandList> record(std::initializer_list<const DispatchTable*> tables) const;
    TapVariant& tap_variant(const std::vector<int>& layers, bool all_logits);
    // ---- split by layers (split.cpp) ----
    static std::unique_ptr<Model> load_split(std::shared_ptr<LoadedModel> headers, const LoadOptions& options);
    static std::unique_ptr<Model> with_runtime(std::shared_ptr<const LoadedModel> base);
    std::vector<Model*> all_parts();
    // One decode step of this part at the cache's next position (checked by the caller), and
    // one of every part in turn.
    void step(int token);
    void step_all(int token);
    // After a part failed mid-step: every part back to the shortest cache length among them.
    void align_parts();
    // One prefill chunk of this part: ids[0 : n] at the cache's next positions, by the table
    // for all-position logits or not, or a tap variant's.
    void run_chunk(const int* ids, size_t n, bool all_logits, TapVariant* tapped);
    // Copies this part's output residual stream (its first `bytes`) into the next part's input.
    void hand_to(Model& next, size_t bytes) const;
    size_t handed_bytes(bool prefill, size_t rows) const;  // what a step or chunk hands on
    // The split's per-step path for chain decode: `chain` steps run at once, kept until read;
    // split_chain_next is chain_next's split form.
    void split_chain(int token);
    bool split_chain_next(std::vector<int>& ids, std::vector<float>& logprobs, int& first_pos, bool more);
    // The KV rows of every part, in layer order (the saved-state order of the whole cache).
    size_t kv_rows_bytes(int n, int from) const;
    std::vector<uint8_t> save_kv_rows(int n) const;
    void load_kv_rows(const uint8_t* data, size_t size, int n, int from);
    void check_token(int token) const;
    void reserve(int n);  // KV blocks and RoPE rows for positions [0, n)
    int rope_rows_ = 0;  // RoPE rows filled
    void submit_chain(int c, uint32_t input_slot);
    void start_first_chain(int token);  // checks, feeds `token` to chain 0 and submits it
    void drain();  // waits for chains in flight
    // Raises if a GEMV hand-off of the steps just waited for timed out (kernels::GemvHandoff).
    void check_handoffs();
    bool handoffs_ = false;  // whether a decode table hands x off between GEMVs

    std::shared_ptr<const LoadedModel> base_;
    std::unique_ptr<KVCache> kv_;
    std::unique_ptr<ScratchBuffers> scratch_;
    std::unique_ptr<DispatchTable> table_;
    std::unique_ptr<CommandList> step_;  // one decode step (table 0)
    // Two recorded chains of chain_ steps: chain c's step k reads StepState[c * chain_ + k] and
    // writes its sampled id to token_ids[c * chain_ + k + 1]; slot 0 holds the CPU's token.
    std::unique_ptr<CommandList> chains_[2];
    // Their steps' tables, kept for their workgroup counts (set_position at each submission).
    std::vector<std::unique_ptr<DispatchTable>> chain_tables_[2];
    std::vector<int> in_flight_;  // chain indices, oldest first
    std::vector<int> in_flight_pos_;
    uint32_t last_slot_ = 0;  // token_ids slot of the last id the newest submitted chain samples
    SamplerState sampler_{};
    std::unique_ptr<DispatchTable> prefill_table_, prefill_all_table_;
    std::unique_ptr<CommandList> prefill_cl_, prefill_all_cl_;
    std::map<std::pair<std::vector<int>, bool>, TapVariant> tap_variants_;
    mutable ModelUse use_;
    // Split by layers: the parts before this one (layer order), and this part's residual stream
    // in and out, host-visible: [prefill_chunk, dim] f32 rows, then a handed-forward norm's
    // residual [dim] f32 and norm_sums.
    std::vector<std::unique_ptr<Model>> front_;
    Buffer split_in_, split_out_;
    struct DoneChain {
        std::vector<int> ids;
        std::vector<float> logprobs;
        int first_pos;
    };
    std::vector<DoneChain> done_chains_;  // the per-step path's chains, oldest first
    int owed_chains_ = 0;  // a split's chains started but not yet run (split_chain_next)
    int owed_from_ = 0;  // the id the first of them starts from
};

}  // namespace akunu
