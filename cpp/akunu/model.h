// Model: a loaded model ready to decode (the seed's 18-stage loader, on Vulkan).
//
// Loading: device, shaders (pipelines are made as the table is built), format, weights,
// config, architecture, device profile, quirks (GGUF vs HF RoPE order, gemma's stored norm + 1),
// RoPE tables, validation, KV cache, scratch, dispatch table, recording, warmup. Decoding a
// token then costs the CPU two small writes (token id, position) and one submit of the
// recorded command buffer; nothing is allocated.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "akunu/command_list.h"
#include "akunu/kv_cache.h"
#include "akunu/memory_plan.h"
#include "akunu/model_files.h"
#include "akunu/scratch.h"
#include "akunu/weights.h"
#include "params.h"

namespace akunu {

struct LoadOptions {
    int context = 4096;           // KV-cache length; clipped to the model's trained context
    std::string device;           // selector, as Device::create
    int chain = 0;                // decode steps per submission; 0: from the device profile
    int prefill_chunk = 0;        // prompt tokens per submission; 0: 512 (clipped to the context)
    KvDType kv_dtype = KvDType::kF16;  // the KV cache's storage format (kv_format.h)
    std::function<void(const std::string& stage, size_t done, size_t total)> progress;
};

class Model {
public:
    static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);

    const ModelConfig& config() const { return config_; }
    const ModelFiles& files() const { return *files_; }
    Device& device() const { return *device_; }
    const std::shared_ptr<Device>& device_ptr() const { return device_; }
    KVCache& kv_cache() { return *kv_; }
    const KVCache& kv_cache() const { return *kv_; }
    const ScratchBuffers& scratch() const { return *scratch_; }
    const DispatchTable& dispatch_table() const { return *table_; }
    const MemoryPlan& plan() const { return plan_; }
    size_t weight_bytes() const { return weights_.bytes; }
    int context() const { return context_; }
    int eos_id() const { return eos_id_; }  // -1 when the file names none

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
    int chain() const { return chain_; }

    // Pipelined chains: the GPU runs chain n + 1 while the caller reads chain n. chain_start
    // feeds `token` and submits up to two chains (as many as the context holds); chain_next
    // waits for the oldest, returns its ids (logprobs, and the position its first step fed),
    // then submits one more chain if `more` and the context has room; it returns false when
    // nothing is in flight. The next chain continues from the last id on the GPU. The cache
    // length counts every submitted step; any other call first waits for chains in flight.
    void chain_start(int token);
    bool chain_next(std::vector<int>& ids, std::vector<float>& logprobs, int& first_pos, bool more);
    int chains_in_flight() const { return int(in_flight_.size()); }

    void reset();
    void truncate(int length);

    // GPU time of every command of a decode step (tokens = 1) or of a prefill chunk of
    // `tokens` tokens, run once at the next positions (the cache length does not change).
    struct ProfileRow {
        const DispatchCmd* cmd;
        double ms;
    };
    std::vector<ProfileRow> profile(int tokens);
    // Runs `ids` at the next positions in prefill chunks (GEMMs and flash attention); the last
    // position's logits land in scratch "logits" and its argmax in token_ids[1], as after
    // decode(). With all_logits ([ids.size(), vocab] floats) every position's logits are
    // written there. Throws (changing nothing) when the prompt does not fit or an id is out
    // of range.
    void eval(const std::vector<int>& ids, float* all_logits = nullptr);
    int prefill_chunk() const { return prefill_chunk_; }

private:
    // What one recorded table computes: a decode step or a prefill chunk of up to `rows` tokens.
    struct Pass {
        bool prefill;
        int rows;         // prefill: the chunk's capacity
        int step_index;   // decode: the chained step (StepState slot, token_ids slot)
        bool all_logits;  // prefill: the LM head over every row, into batch_logits
    };
    Model() = default;
    std::unique_ptr<DispatchTable> build_table(const Pass& pass);
    void check_token(int token) const;
    void submit_chain(int c, uint32_t input_slot);
    void start_first_chain(int token);  // checks, feeds `token` to chain 0 and submits it
    void drain();  // waits for chains in flight

    std::shared_ptr<Device> device_;
    std::shared_ptr<ModelFiles> files_;
    ModelConfig config_;
    MemoryPlan plan_;
    ModelWeights weights_;
    std::unique_ptr<KVCache> kv_;
    std::unique_ptr<ScratchBuffers> scratch_;
    std::unique_ptr<DispatchTable> table_;
    std::unique_ptr<CommandList> step_;   // one decode step (table 0)
    // Two recorded chains of chain_ steps: chain c's step k reads StepState[c * chain_ + k] and
    // writes its sampled id to token_ids[c * chain_ + k + 1]; slot 0 holds the CPU's token.
    std::unique_ptr<CommandList> chains_[2];
    std::vector<int> in_flight_;  // chain indices, oldest first
    std::vector<int> in_flight_pos_;
    uint32_t last_slot_ = 0;      // token_ids slot of the last id the newest submitted chain samples
    SamplerState sampler_{};
    std::unique_ptr<DispatchTable> prefill_table_, prefill_all_table_;
    std::unique_ptr<CommandList> prefill_cl_, prefill_all_cl_;
    int prefill_chunk_ = 1;
    int logit_rows_ = 1;
    int chain_ = 1;
    int context_ = 0;
    int eos_id_ = -1;
};

}  // namespace akunu
