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
    // Runs `ids` one after another (prefill by decode steps).
    void eval(const std::vector<int>& ids);
    void reset() { kv_->reset(); }

private:
    Model() = default;
    std::unique_ptr<DispatchTable> build_table(int step);

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
    int chain_ = 1;
    int context_ = 0;
    int eos_id_ = -1;
};

}  // namespace akunu
