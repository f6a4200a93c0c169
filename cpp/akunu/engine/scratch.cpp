// ScratchBuffers allocation from the shared layout.
#include "akunu/engine/scratch.h"

#include <vector>

#include "akunu/core/error.h"
#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/kernels.h"
#include "params.h"

namespace akunu {

namespace {

// The buffers the CPU writes before each submit (step states, token ids, samplers, scored
// targets) or reads after it (sampled ids, their logprobs, the targets' scores): host memory,
// whatever the device.
bool on_host(const std::string& name) {
    for (const char* n : {"step", "token_ids", "sampled_logprobs", "sampler", "batch_step", "batch_token_ids",
                          "batch_samplers", "batch_sampled", "batch_logprobs", "batch_targets", "batch_target_logprobs",
                          "batch_target_argmax", "batch_tiles"})
        if (name == n) return true;
    return false;
}

}  // namespace

ScratchBuffers::ScratchBuffers(const std::shared_ptr<Device>& device, const ModelConfig& c, int context, int max_chain,
                               int prefill_chunk, bool dequant_weights, int batch_sequences)
    : q_dim_(size_t(c.q_dim)), kv_dim_(size_t(c.kv_dim)) {
    auto allocate = [&](const std::vector<NamedSize>& layout, size_t& total) {
        for (const NamedSize& s : layout) {
            Buffer b = Buffer::allocate(device, s.bytes, on_host(s.name) ? Residency::kHost : Residency::kAuto);
            // The chunk tables' workgroup counts, which the GPU's command processor reads before
            // each dispatch, and the CPU writes: device memory where the CPU maps it (ReBAR),
            // else host memory.
            if ((s.name == "batch_dispatch" || s.name == "step_dispatch") && !b.host_visible())
                b = Buffer::allocate(device, s.bytes, Residency::kHost);
            buffers_.emplace(s.name, std::move(b));
            total += s.bytes;
        }
    };
    allocate(decode_scratch_layout(c, max_chain, context), bytes_);
    std::vector<NamedSize> prefill = prefill_scratch_layout(c, prefill_chunk, dequant_weights);
    if (batch_sequences > 0) {
        const uint64_t rows = uint64_t(prefill_chunk);
        for (NamedSize& s : prefill)
            if (s.name == "batch_step")
                s.bytes = sizeof(StepState) + rows * sizeof(BatchRow);
            else if (s.name == "batch_logits")
                s.bytes = rows * uint64_t(c.vocab_size) * 4;  // every row's (Batch)
        prefill.push_back({"batch_tiles", batch_tile_capacity(rows) * sizeof(BatchTile)});
        prefill.push_back({"batch_samplers", uint64_t(batch_sequences) * sizeof(SamplerState)});
        prefill.push_back({"batch_sampled", rows * 4});
        prefill.push_back({"batch_logprobs", rows * 4});
        prefill.push_back({"batch_targets", rows * 4});
        prefill.push_back({"batch_target_logprobs", rows * 4});
        prefill.push_back({"batch_target_argmax", rows * 4});
        // The rows' split attention (kernels::attention_rows): partials and arrival counters per
        // row and head, where the device takes it for a table of these rows.
        const uint32_t heads = uint32_t(c.n_heads), head_dim = uint32_t(c.head_dim);
        if (kernels::batch_row_split(device->profile(), uint32_t(rows), heads, head_dim, uint32_t(context))) {
            prefill.push_back(
                {"batch_row_partials",
                 kernels::batch_row_partial_floats(uint32_t(rows), heads, head_dim, uint32_t(context)) * 4});
            prefill.push_back({"batch_row_counters", rows * heads * 4});
        }
    }
    allocate(prefill, prefill_bytes_);
    if (auto it = buffers_.find("batch_row_counters"); it != buffers_.end()) {  // zero before the first step
        const std::vector<uint32_t> zeros(it->second.size() / 4, 0u);
        it->second.write(zeros.data(), zeros.size() * 4);
    }
}

const Buffer& ScratchBuffers::get(const std::string& name) const {
    auto it = buffers_.find(name);
    AKUNU_CHECK(it != buffers_.end(), "no scratch buffer named '" + name + "'");
    return it->second;
}

Buffer& ScratchBuffers::get(const std::string& name) {
    return const_cast<Buffer&>(static_cast<const ScratchBuffers&>(*this).get(name));
}

}  // namespace akunu
