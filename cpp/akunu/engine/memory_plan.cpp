// Sizes of weights, KV cache and scratch, and the fit against a device's heaps.
#include "akunu/engine/memory_plan.h"

#include <algorithm>
#include <map>

#include "akunu/vulkan/dispatch.h"
#include "akunu/core/error.h"
#include "akunu/engine/validate.h"
#include "akunu/engine/weights.h"
#include "akunu/engine/kernels.h"
#include "akunu/engine/whisper_chain.h"
#include "akunu/engine/whisper_model.h"

namespace akunu {

std::vector<NamedSize> decode_scratch_layout(const ModelConfig& c, int max_chain, int context) {
    const uint64_t f32 = 4, dim = uint64_t(c.dim), ffn = uint64_t(c.ffn_dim), ctx = uint64_t(context);
    const uint64_t table = ctx * uint64_t(c.head_dim / 2) * f32;
    std::vector<NamedSize> out = {
        {"h0", dim * f32},
        {"h1", dim * f32},
        {"residual", dim * f32},
        // A norm handed forward: a sum of squares per workgroup of the GEMV that wrote the
        // residual stream (kernels::GemvNormOut), at most one per row.
        {"norm_sums", dim * f32},
        {"qkv", uint64_t(c.q_dim + 2 * c.kv_dim) * f32},
        {"attn_out", uint64_t(std::max(c.q_dim, c.dim)) * f32},
        {"ffn_gate", ffn * f32},
        {"ffn_up", ffn * f32},
        {"ffn_act", ffn * f32},
        {"logits", uint64_t(c.vocab_size) * f32},
        // Two pipelined chains: the CPU's input token, then one sampled id (and its logprob) per
        // step of each chain.
        {"token_ids", uint64_t(2 * max_chain + 1) * 4},
        {"sampled_logprobs", uint64_t(2 * max_chain + 1) * 4},
        {"sampler", 32},
        {"attn_partial",
         uint64_t(kernels::attention_partial_floats(uint32_t(c.n_heads), uint32_t(c.head_dim), uint32_t(context))) *
             f32},
        {"step", uint64_t(2 * max_chain) * 16},  // one StepState (16-byte aligned) per chained step
        // Four hand-offs a layer (kernels::GemvHandoff).
        {"gemv_handoff", uint64_t(kernels::handoff_counters_bytes(uint32_t(4 * c.n_layers)))},
        // The workgroup counts of the step tables (attention's follow the position): the
        // single step's and each chained step's.
        {"step_dispatch", uint64_t(2 * max_chain + 1) * step_dispatch_bound(c.n_layers) * 12},
        {"rope_cos", table},
        {"rope_sin", table},
    };
    if (c.n_sliding_layers > 0 && c.rope_theta_local != c.rope_theta) {
        out.push_back({"rope_cos_local", table});
        out.push_back({"rope_sin_local", table});
    }
    return out;
}

int prefill_logit_rows(const ModelConfig& c, int chunk, uint64_t budget) {
    const uint64_t row = uint64_t(c.vocab_size) * 4;
    uint64_t rows = std::max<uint64_t>(1, budget / row);
    if (rows >= 16) rows -= rows % 16;
    return int(std::min<uint64_t>(rows, uint64_t(chunk)));
}

std::vector<NamedSize> prefill_scratch_layout(const ModelConfig& c, int chunk, bool dequant_weights) {
    const uint64_t f32 = 4, n = uint64_t(chunk);
    std::vector<NamedSize> layout = {
        {"batch_h0", n * uint64_t(c.dim) * f32},
        {"batch_h1", n * uint64_t(c.dim) * f32},
        {"batch_residual", n * uint64_t(c.dim) * f32},
        {"batch_qkv", n * uint64_t(c.q_dim + 2 * c.kv_dim) * f32},
        {"batch_attn_out", n * uint64_t(c.q_dim) * f32},
        {"batch_ffn_gate", n * uint64_t(c.ffn_dim) * f32},
        {"batch_ffn_up", n * uint64_t(c.ffn_dim) * f32},
        {"batch_ffn_act", n * uint64_t(c.ffn_dim) * f32},
        {"batch_logits", uint64_t(prefill_logit_rows(c, chunk)) * uint64_t(c.vocab_size) * f32},
        {"batch_token_ids", n * 4},
        {"batch_step", 16},
        // The workgroup counts of the prefill table and of the all-position-logits one.
        {"batch_dispatch", 2 * chunk_dispatch_bound(c.n_layers) * 12},
    };
    // Q, K, V, O, gate, up and down: each is dim x (q_dim, kv_dim or ffn_dim).
    const uint64_t widest = std::max({c.q_dim, c.kv_dim, c.ffn_dim});
    if (dequant_weights)
        for (int i = 0; i < kPrefillF16Weights; ++i)
            layout.push_back({prefill_f16_weights_name(i), widest * uint64_t(c.dim) * 2});
    return layout;
}

static uint64_t sum(const std::vector<NamedSize>& v) {
    uint64_t s = 0;
    for (const auto& x : v) s += x.bytes;
    return s;
}

// An encoder-decoder (whisper), weights counted: the buffers WhisperModel allocates for
// max_sequences slots (whisper_layout), its K/V (each slot's self and cross K/V, each window's
// cross K/V) as the KV cache, the decoder's rows and the greedy chain's buffers
// (whisper_chain_layout) as the decode scratch and the encoder's windows as the prefill scratch.
static MemoryPlan plan_encoder_decoder(MemoryPlan p) {
    AKUNU_CHECK(p.options.max_sequences >= 1 && p.options.max_sequences <= 256, "max_sequences must be in 1..256");
    const int slots = p.options.max_sequences;
    const WhisperLayout l = whisper_layout(p.config, slots, std::max(p.config.max_context, slots));
    auto named = [](const std::vector<std::pair<std::string, uint64_t>>& v) {
        std::vector<NamedSize> out;
        for (const auto& [name, bytes] : v) out.push_back({name, bytes});
        return out;
    };
    p.options.context = p.config.max_context;
    p.options.prefill_chunk = p.config.audio_ctx;
    for (const NamedSize& kv : named(l.kv)) p.kv_bytes += kv.bytes;
    p.kv_max_bytes = p.kv_full_bytes = p.kv_bytes;
    p.kv_bytes_per_layer = p.kv_bytes / uint64_t(p.config.n_layers);
    p.decode_scratch = named(l.decoder);
    const int steps = whisper_chain_steps(p.options.whisper_chain, p.config.max_context);
    for (const NamedSize& b : named(whisper_chain_layout(p.config.vocab_size, slots, steps)))
        p.decode_scratch.push_back(b);
    p.prefill_scratch = named(l.encoder);
    p.decode_scratch_bytes = sum(p.decode_scratch);
    p.prefill_scratch_bytes = sum(p.prefill_scratch);
    p.fork_bytes = p.kv_bytes + p.decode_scratch_bytes + p.prefill_scratch_bytes;
    p.total_bytes = p.weights_bytes + p.fork_bytes;
    return p;
}

// The weights of one stack as `p`'s options upload them (or, for a config alone, estimate
// them), by type into by_type. `whisper`: a stack of an encoder-decoder, its encoder's where
// `encoder`, which on a device uploads what WhisperModel does (whisper_uploads), with the head's
// Q8_0 copy (whisper_head_q8) as one more item.
static void count_weights(const ModelConfig& c, const ModelFiles* files, MemoryPlan& p,
                          std::map<std::string, uint64_t>& by_type, bool whisper, bool encoder) {
    const PlanOptions& o = p.options;
    if (files && files->has_weights()) {
        const bool as_whisper = o.device && whisper;
        std::vector<UploadItem> items = as_whisper ? whisper_uploads(*o.device, *files, c, encoder)
                                                   : plan_weight_uploads(*files, c, o.weight_tiles);
        if (o.device) check_weight_types(items, *o.device, files->path());
        if (as_whisper && !encoder)
            if (const WhisperHeadCopy copy = whisper_head_q8(*o.device, *files, items); copy.rows > 0) {
                const UploadItem q8 = in_q8_tiles(*copy.head, copy.rows);  // before the push moves items
                items.push_back(q8);
            }
        for (const UploadItem& u : items) {
            if (!part_uploads(items, u, c.n_layers, o.layers)) continue;
            by_type[type_traits(u.device_type).name] += u.bytes;
            p.largest_tensor_bytes = std::max<uint64_t>(p.largest_tensor_bytes, u.bytes);
        }
    } else {
        // No weights: 2-D matrices in weights_dtype, 1-D tensors (norms, biases) in F32.
        const TensorTypeTraits* wt = find_type_by_name(o.weights_dtype);
        AKUNU_CHECK(wt, "unknown weights_dtype '" + o.weights_dtype + "' (use a ggml type name such as F16 or Q4_0)");
        p.weights_estimated = true;
        std::vector<UploadItem> roles;  // what part_uploads reads: role and layer
        for (const ExpectedTensor& e : expected_tensors(c))
            if (e.required) roles.push_back({e.role, e.layer, nullptr, TensorType::F32, 0});
        for (const ExpectedTensor& e : expected_tensors(c)) {
            if (!e.required ||
                !part_uploads(roles, {e.role, e.layer, nullptr, TensorType::F32, 0}, c.n_layers, o.layers))
                continue;
            uint64_t n = 1;
            for (uint64_t d : e.shape) n *= d;
            const bool matrix = e.shape.size() == 2 && e.shape.back() % wt->block_size == 0;
            const TensorTypeTraits& t = matrix ? *wt : type_traits(TensorType::F32);
            const uint64_t bytes = tensor_bytes(t, n, tensor_role_name(e.role));
            by_type[t.name] += bytes;
            p.largest_tensor_bytes = std::max(p.largest_tensor_bytes, bytes);
        }
    }
}

MemoryPlan plan_memory(const ModelConfig& c, const ModelFiles* files, const PlanOptions& options) {
    MemoryPlan p;
    p.config = c;
    p.options = options;
    if (p.options.context <= 0) p.options.context = c.max_context;
    AKUNU_CHECK(p.options.context <= (1 << 24),
                "context " + std::to_string(p.options.context) + " is out of range (up to 2^24)");
    AKUNU_CHECK(p.options.prefill_chunk > 0, "prefill_chunk must be positive");
    AKUNU_CHECK(p.options.max_chain > 0 && p.options.max_chain <= 65536, "max_chain must be in 1..65536");
    p.options.prefill_chunk = std::min(p.options.prefill_chunk, p.options.context);

    std::map<std::string, uint64_t> by_type;
    const bool whisper = c.arch().encoder;
    count_weights(c, files, p, by_type, whisper, false);
    if (whisper) count_weights(encoder_stack(c), files, p, by_type, whisper, true);
    for (const auto& [name, bytes] : by_type) {
        p.weights_by_dtype.push_back({name, bytes});
        p.weights_bytes += bytes;
    }

    if (c.arch().encoder) return plan_encoder_decoder(p);
    // K and V per layer, each as kv_format.h lays it out, in the layouts kv_cache.h picks.
    for (const bool values : {false, true})
        p.kv_bytes_per_layer +=
            kv_layout(kv_side(p.options.kv_dtype, values), c.n_kv_heads, p.options.context, c.head_dim).bytes;
    const LayerRange held = p.options.layers;
    AKUNU_CHECK(held.first >= 0 && held.first < held.end(c.n_layers) && held.end(c.n_layers) <= c.n_layers,
                "layers [" + std::to_string(held.first) + ", " + std::to_string(held.end(c.n_layers)) +
                    ") are not a range of the model's " + std::to_string(c.n_layers) + " layers");
    p.kv_full_bytes = p.kv_bytes_per_layer * uint64_t(held.end(c.n_layers) - held.first);
    // A ring of window + max(chunk, two chains) rows: see kv_cache.h.
    const int ring_rows =
        p.options.kv_ring ? c.sliding_window + std::max(p.options.prefill_chunk, 2 * p.options.max_chain) : 0;
    // The recent window's rings keep two chains more than the window: the rewind generate()
    // may take back (kv_recent.h).
    p.kv = plan_kv_cache(c, p.options.context, p.options.kv_dtype, p.options.kv_blocks, ring_rows, held,
                         p.options.kv_recent, 2 * p.options.max_chain);
    p.kv_full_bytes += p.kv.recent.bytes;  // a recent window's rings are allocated up front in every layout
    p.kv_bytes = p.kv.initial_bytes();
    p.kv_max_bytes = p.kv.max_bytes();
    p.decode_scratch = decode_scratch_layout(c, p.options.max_chain, p.options.context);
    p.prefill_scratch = prefill_scratch_layout(c, p.options.prefill_chunk, p.options.prefill_dequant);
    p.decode_scratch_bytes = sum(p.decode_scratch);
    p.prefill_scratch_bytes = sum(p.prefill_scratch);
    p.fork_bytes = p.kv_bytes + p.decode_scratch_bytes + p.prefill_scratch_bytes;
    p.total_bytes = p.weights_bytes + p.fork_bytes;
    return p;
}

MemoryPlan with_prefill_dequant(const MemoryPlan& plan, const ModelFiles* files, uint32_t dequant_rows) {
    bool block_weights = false;
    for (const NamedSize& t : plan.weights_by_dtype) {
        const TensorTypeTraits* tt = find_type_by_name(t.name);
        block_weights |= tt && kernels::dequantizes_to_f16(tt->type);
    }
    if (dequant_rows == 0 || uint64_t(plan.options.prefill_chunk) < dequant_rows || !block_weights) return plan;
    PlanOptions o = plan.options;
    o.prefill_dequant = true;
    return plan_memory(plan.config, files, o);
}

static std::string mib(uint64_t b) { return std::to_string((b + (1 << 19)) >> 20) + " MiB"; }

uint64_t usable_heap_bytes(const DeviceProfile& d) {
    uint64_t heap = d.device_local_bytes;
    if (heap == 0)
        for (const auto& h : d.heaps) heap = std::max(heap, h.size_bytes);
    return heap;
}

PlanFit check_fit(const MemoryPlan& plan, const DeviceProfile& d) {
    PlanFit fit{true, {}};
    const uint64_t heap = usable_heap_bytes(d);
    if (plan.kv_max_bytes > plan.kv_bytes && plan.total_bytes - plan.kv_bytes + plan.kv_max_bytes > heap &&
        plan.total_bytes <= heap)
        fit.notes.push_back("the KV cache grows in blocks to " + mib(plan.kv_max_bytes) +
                            " at the full context, more than '" + d.name +
                            "' holds: a long sequence fails when a block cannot be allocated");
    if (plan.total_bytes > heap) {
        fit.fits = false;
        fit.notes.push_back("needs " + mib(plan.total_bytes) + " but the largest device heap of '" + d.name +
                            "' holds " + mib(heap) +
                            "; use a smaller context, prefill chunk, kv_dtype or a quantized model");
    } else if (d.available_bytes > 0 && plan.total_bytes > d.available_bytes) {
        fit.fits = false;
        fit.notes.push_back("needs " + mib(plan.total_bytes) + " but only " + mib(d.available_bytes) + " of the " +
                            mib(heap) + " of '" + d.name +
                            "' are available now; use a smaller context, prefill chunk, kv_dtype or a quantized "
                            "model, or free memory");
    }
    const bool any_full = std::count(plan.kv.layers.begin(), plan.kv.layers.end(), KvRows::kFull) > 0;
    uint64_t largest =
        std::max({plan.largest_tensor_bytes, any_full ? plan.kv_bytes_per_layer / 2 : 0, plan.kv.block_bytes});
    for (const auto& s : plan.prefill_scratch) largest = std::max(largest, s.bytes);
    if (largest > d.max_memory_allocation_bytes) {
        fit.fits = false;
        fit.notes.push_back("one buffer needs " + mib(largest) + " but '" + d.name + "' allocates at most " +
                            mib(d.max_memory_allocation_bytes) + " at once");
    }
    if (largest > d.max_storage_buffer_range)
        fit.notes.push_back("the largest buffer (" + mib(largest) + ") exceeds one binding of " +
                            mib(d.max_storage_buffer_range) + " on '" + d.name + "': it is bound in ranges");
    return fit;
}

}  // namespace akunu
