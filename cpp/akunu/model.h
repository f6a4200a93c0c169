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

namespace akunu {

struct LoadOptions {
    int context = 4096;           // KV-cache length; clipped to the model's trained context
    std::string device;           // selector, as Device::create
    int chain = 0;                // decode steps per submission; 0: from the device profile
    int prefill_chunk = 0;        // prompt tokens per submission; 0: 512 (clipped to the context)
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

    // Runs one token at the next position; logits land in scratch "logits" and the argmax in
    // token_ids[1]. Throws (changing nothing) when the context is full or the id is out of range.
    void decode(int token);
    // The greedy next token after the last decode.
    int argmax_token() const;
    // Chain decode: feeds `token`, then each sampled id to the next step, chain() steps in one
    // submission with no CPU work between steps. Returns the chain() sampled ids; the cache
    // grows by chain() positions (rewind with truncate() to drop steps after a stop token).
    std::vector<int> decode_chain(int token);
    int chain() const { return chain_; }
    // Runs `ids` at the next positions in prefill chunks (GEMMs and flash attention); the last
    // position's logits land in scratch "logits" and its argmax in token_ids[1], as after
    // decode(). With all_logits ([ids.size(), vocab] floats) every position's logits are
    // written there. Throws (changing nothing) when the prompt does not fit or an id is out
    // of range.
    void eval(const std::vector<int>& ids, float* all_logits = nullptr);
    int prefill_chunk() const { return prefill_chunk_; }
    void reset() { kv_->reset(); }

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

    std::shared_ptr<Device> device_;
    std::shared_ptr<ModelFiles> files_;
    ModelConfig config_;
    MemoryPlan plan_;
    ModelWeights weights_;
    std::unique_ptr<KVCache> kv_;
    std::unique_ptr<ScratchBuffers> scratch_;
    std::unique_ptr<DispatchTable> table_;
    std::unique_ptr<CommandList> step_;   // one decode step (table 0)
    std::unique_ptr<CommandList> chain_cl_;  // chain_ steps
    std::unique_ptr<DispatchTable> prefill_table_, prefill_all_table_;
    std::unique_ptr<CommandList> prefill_cl_, prefill_all_cl_;
    int prefill_chunk_ = 1;
    int logit_rows_ = 1;
    int chain_ = 1;
    int context_ = 0;
    int eos_id_ = -1;
};

}  // namespace akunu
