// ScratchBuffers: the decode and prefill sets of activations (h0/h1 ping-pong, residual, packed
// qkv with offsets, attn_out, ffn_gate/up/act, logits, token_ids) plus what the Vulkan kernels
// need beside them (attention scores, the step state, RoPE tables); docs/architecture.md,
// "Memory plan", describes them. Sizes come from decode_scratch_layout() and
// prefill_scratch_layout(), which the memory plan uses too. Everything is allocated once.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "akunu/vulkan/buffer.h"
#include "akunu/engine/memory_plan.h"

namespace akunu {

class ScratchBuffers {
public:
    // With batch_sequences > 0 (a batch's scratch, batch.h), batch_step also holds a BatchRow per
    // row of the chunk, and batch_samplers [batch_sequences] SamplerState, batch_sampled u32
    // [prefill_chunk] and batch_logprobs f32 [prefill_chunk] hold each sequence's sampler and
    // each row's sampled id and its logprob; batch_target_logprobs f32 and batch_target_argmax
    // u32 [prefill_chunk] the log-probability of each row's batch_targets u32 entry (a token id, or
    // AKUNU_NO_TARGET).
    ScratchBuffers(const std::shared_ptr<Device>& device, const ModelConfig& c, int context, int max_chain,
                   int prefill_chunk, bool dequant_weights = false, int batch_sequences = 0);

    const Buffer& get(const std::string& name) const;  // throws for unknown names
    Buffer& get(const std::string& name);
    const std::map<std::string, Buffer>& all() const { return buffers_; }
    size_t bytes() const { return bytes_; }  // the decode set
    size_t prefill_bytes() const { return prefill_bytes_; }  // the prefill set

    // Byte offsets of Q, K and V inside "qkv" (f32).
    size_t q_offset() const { return 0; }
    size_t k_offset() const { return q_dim_ * 4; }
    size_t v_offset() const { return (q_dim_ + kv_dim_) * 4; }

private:
    std::map<std::string, Buffer> buffers_;
    size_t bytes_ = 0, prefill_bytes_ = 0;
    size_t q_dim_, kv_dim_;
};

}  // namespace akunu
