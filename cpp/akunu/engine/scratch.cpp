// ScratchBuffers allocation from the shared layout.
#include "akunu/engine/scratch.h"

#include "akunu/core/error.h"

namespace akunu {

ScratchBuffers::ScratchBuffers(const std::shared_ptr<Device>& device, const ModelConfig& c, int context, int max_chain,
                               int prefill_chunk, bool dequant_weights)
    : q_dim_(size_t(c.q_dim)), kv_dim_(size_t(c.kv_dim)) {
    auto allocate = [&](const std::vector<NamedSize>& layout, size_t& total) {
        for (const NamedSize& s : layout) {
            // The CPU writes step states and token ids before each submit and reads the
            // sampled ids after it: host memory, whatever the device.
            const bool host = s.name == "step" || s.name == "token_ids" || s.name == "sampled_logprobs" ||
                              s.name == "sampler" || s.name == "batch_step" || s.name == "batch_token_ids";
            Buffer b = Buffer::allocate(device, s.bytes, host ? Residency::kHost : Residency::kAuto);
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
    allocate(prefill_scratch_layout(c, prefill_chunk, dequant_weights), prefill_bytes_);
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
