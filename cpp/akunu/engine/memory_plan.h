// The memory plan: what a model will take on a device, computed from headers alone, before
// anything is allocated ("know whether it fits before loading").
//
// The KV-cache and scratch sizes come from the same layout functions the engine allocates
// with, so the plan and Model.memory_report() cannot drift apart.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "akunu/vulkan/device_profile.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/engine/kv_format.h"
#include "akunu/engine/layer_range.h"
#include "akunu/model/model_config.h"
#include "akunu/formats/model_files.h"

namespace akunu {

struct NamedSize {
    std::string name;
    uint64_t bytes;
};

// The scratch buffers (docs/architecture.md, "Memory plan"): the decode set and the prefill set
// ([prefill_chunk, ...]). Activations are f32 in both, though an f16 prefill set would be half
// the size: the residual stream keeps the decode path's precision, so prefill and decode logits
// agree, and NumPy users read them. Beside the activations the Vulkan kernels need attention
// partials, the step state and the RoPE cos/sin tables (a second pair for sliding layers with
// their own theta); the prefill set adds the chunk's token ids, its step state and a block of
// all-position logits.
std::vector<NamedSize> decode_scratch_layout(const ModelConfig& c, int max_chain, int context);
// dequant_weights adds kPrefillF16Weights buffers (prefill_f16_weights_name), each the largest
// layer projection as f16 (PlanOptions::prefill_dequant), which a chunk's projections use in
// turn: the dequantizations of the next projections run beside this one's GEMM, three at once
// ahead of Q, K and V, into buffers whose GEMMs are done (model.cpp).
constexpr int kPrefillF16Weights = 4;
inline std::string prefill_f16_weights_name(int i) { return "batch_weights_f16_" + std::to_string(i); }
std::vector<NamedSize> prefill_scratch_layout(const ModelConfig& c, int prefill_chunk, bool dequant_weights = false);
// Rows of all-position logits one prefill submission produces (as many as fit `budget` bytes,
// at most the chunk): eval(all_logits=True) runs chunks of this many tokens. A Batch's steps
// compute every row's logits (score_batch scores each row), so its budget is larger: a step of
// fewer rows multiplies each weight for fewer tokens and leaves tensor units idle
// (bench/NOTES.md, "score_batch's steps of a prefill chunk's rows"). 128 MiB is the storage
// binding every Vulkan device allows.
constexpr uint64_t kPrefillLogitBytes = 32ull << 20;
constexpr uint64_t kBatchLogitBytes = 128ull << 20;
int prefill_logit_rows(const ModelConfig& c, int prefill_chunk, uint64_t budget = kPrefillLogitBytes);

struct PlanOptions {
    int context = 0;  // 0: the model's trained context
    int prefill_chunk = 512;  // tokens per prefill submission; clipped to the context
    int max_chain = 64;  // tokens per chain-decode submission
    int max_sequences = 8;  // encoder-decoders (whisper): sequence slots and windows per encode
    int whisper_chain = -1;  // whisper: tuning whisper_chain, the greedy chain's steps (-1 auto, 0 off)
    KvDType kv_dtype = KvDType::kF16;
    int kv_recent = 0;  // the format's recent window (kv_format.h KvFormat); rings of it + 2 max_chain rows
    bool kv_blocks = false;  // the KV cache grows in blocks of 256 positions (kv_cache.h)
    bool kv_ring = false;  // sliding-window layers keep a ring of window + max(prefill_chunk, 2 max_chain) rows
    std::string weights_dtype = "F16";  // for config-only plans: the type of the 2-D weights
    WeightTiles weight_tiles =
        WeightTiles::kNone;  // the device's (DeviceProfile): tile-major matrices, a tied embedding twice
    // Long prefill chunks dequantize block-format projections to f16 scratch first
    // (DeviceProfile::prefill_dequant_rows): the scratch holds the largest one.
    bool prefill_dequant = false;
    // The device's profile, where the plan is for one: a weight type its kernels cannot run is
    // then an error, as it is when a Model loads (check_weight_types).
    std::optional<DeviceProfile> device;
    // A part of a model split across devices (split.h): the weights and KV cache of these
    // layers (with the embedding or the head where the range starts or ends the model).
    LayerRange layers;
};

struct MemoryPlan {
    ModelConfig config;
    PlanOptions options;
    std::vector<NamedSize> weights_by_dtype;  // "Q4_0", "F32", ...
    uint64_t weights_bytes = 0;
    bool weights_estimated = false;  // true for config-only plans
    uint64_t largest_tensor_bytes = 0;
    // The KV cache as loaded: everything for a pre-allocated cache; for a cache in blocks, its
    // pre-allocated layers (rings), the block tables and the first block. It grows by
    // kv.block_bytes per 256 positions up to kv_max_bytes; kv_full_bytes is what pre-allocating
    // every layer for the whole context would take.
    uint64_t kv_bytes = 0;
    uint64_t kv_max_bytes = 0;
    uint64_t kv_full_bytes = 0;
    uint64_t kv_bytes_per_layer = 0;  // K and V of one fully pre-allocated layer
    KvCachePlan kv;
    std::vector<NamedSize> decode_scratch;
    std::vector<NamedSize> prefill_scratch;
    uint64_t decode_scratch_bytes = 0;
    uint64_t prefill_scratch_bytes = 0;
    uint64_t total_bytes = 0;
    // What each Model::fork() adds: its own KV cache (as loaded) and scratch (the weights are shared).
    uint64_t fork_bytes = 0;
};

// `plan` again with PlanOptions::prefill_dequant where a device that dequantizes block-format
// prefill projections from chunks of `dequant_rows` tokens (DeviceProfile::prefill_dequant_rows,
// 0: never) would: the chunk can be that long and the weights hold a block format.
MemoryPlan with_prefill_dequant(const MemoryPlan& plan, const ModelFiles* files, uint32_t dequant_rows);

MemoryPlan plan_memory(const ModelConfig& c, const ModelFiles* files, const PlanOptions& options);

struct PlanFit {
    bool fits;
    std::vector<std::string> notes;  // why not, or what to watch (binding limits)
};
PlanFit check_fit(const MemoryPlan& plan, const DeviceProfile& device);
// The heap a model's buffers come from: the largest device-local one, else the largest.
uint64_t usable_heap_bytes(const DeviceProfile& device);

}  // namespace akunu
