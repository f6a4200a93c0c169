// DecodePlan: every choice a dispatch table is built from, made once per pass before anything is
// recorded (docs/architecture.md, "Decode plan").
//
// The plan reads the model's config and weight types, the device profile (and through it the
// device's Tuning) and the KV cache's layout. It decides which projections fuse, which norms
// and activations fold into the GEMVs that read them, which GEMVs hand the next norm forward,
// where hand-offs replace barriers, whether RoPE and the KV write ride on the Q/K/V GEMV, and
// which block-format matrices a chunk reads dequantized to f16. The table builder
// (table_builder.h) then only follows it, and Model.plan() shows it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "akunu/engine/kernel_policy.h"
#include "akunu/engine/kv_cache.h"
#include "akunu/engine/layer_range.h"
#include "akunu/engine/weights.h"
#include "akunu/model/model_config.h"
#include "akunu/vulkan/device_profile.h"

namespace akunu {

// Hand-off slots a layer has: attention -> O, O -> gate/up, gate/up -> down, down -> the next
// layer's Q/K/V. Layer l's j-th is counter 1 + kHandoffSlotsPerLayer * l + j.
constexpr uint32_t kHandoffSlotsPerLayer = 4;
enum HandoffPlace : uint32_t { kAttentionToO, kOToGateUp, kGateUpToDown, kDownToNextQkv };

struct LayerPlan {
    // Decode: the pre-norms folded into the GEMVs that read them (else one dispatch each).
    bool attn_norm_folded = false, ffn_norm_folded = false;
    bool qkv_fused = false;  // Q, K and V in one GEMV dispatch (gemv_parts)
    bool rope_folded = false;  // that dispatch also does rope_kv's work
    bool gate_up_fused = false;  // act(gate) * up from one GEMV (float weights)
    bool gate_up_parts = false;  // gate and up in one GEMV dispatch (gemv_parts)
    bool activation_folded = false;  // the down GEMV forms act(gate) * up itself
    // Decode: the O and down GEMVs hand the next pre-norm forward (kernels::GemvNormOut).
    bool o_norm_forward = false, down_norm_forward = false;
    // Decode: the counter slot of each hand-off place (HandoffPlace), 0 where a barrier stands.
    std::array<uint32_t, kHandoffSlotsPerLayer> handoff_slot{};
    // Prefill: the gate and up GEMMs with the activation in their epilogue (gemm_gated), and
    // the first chunk length that takes them (0: any); attention's output as halves for O,
    // or, where attention writes f32 and the O GEMM takes halves, converted (to_half) first.
    bool gemm_gated = false;
    uint32_t gemm_gated_from = 0;
    DType attn_out_dtype = DType::kF32;
    bool attn_out_to_half = false;
};

struct DecodePlan {
    bool prefill = false;
    size_t rows = 1;  // a chunk's capacity, 1 for a decode step
    // The matrix products are GEMVs, planned as a decode step's (fusions and folds): a decode
    // step, or a chunk of one row that asks for them (PassShape::gemv: a batch's one-row table,
    // batch_pipeline.h), where a GEMM's row tiles would carry one live row.
    bool gemv = true;
    kernels::XRounding x_rounding = kernels::XRounding::kFloat;  // how the GEMVs of block formats hold x
    // Prefill: the chunk's norms and activation write halves where the GEMMs take them, by k.
    bool half_x_dim = false, half_x_ffn = false;
    uint32_t short_rows = 0;  // chunks of up to this many tokens run short GEMM tiles
    uint32_t tile_rows = 0;  // ... and of tile-major weights, up to this many in tile GEMVs of several rows
    uint32_t narrow_rows = 0;  // ... and up to this many in the narrow short tiles (cooperative matrices)
    uint32_t min_rows = 0;  // no chunk of fewer rows runs: the row windows below it are not recorded
    uint32_t dequant_rows = 0;  // chunks of this many tokens or more read dequantized weights
    size_t dequant_bytes = 0;  // capacity of each f16 buffer (0: no dequantization)
    bool head_norm_folded = false;  // the output norm folded into the LM head's GEMV
    bool handoffs = false;  // any hand-off slot in use
    uint32_t o_tiles = 0, gate_up_tiles = 0, down_tiles = 0;  // workgroups a waiting GEMV counts
    std::vector<LayerPlan> layers;

    // Whether a chunk's GEMMs read `type` [n, k] dequantized to f16.
    bool reads_dequantized(TensorType type, size_t n, size_t k) const;
};

// What a pass is: a decode step, or a prefill chunk of up to `rows` tokens (with layer taps,
// after which no hand-off may cross).
struct PassShape {
    bool prefill = false;
    size_t rows = 1;
    std::vector<int> taps;
    bool gemv = false;  // prefill of one row with GEMVs (DecodePlan::gemv)
    uint32_t min_rows = 0;  // prefill: the fewest rows its steps run (TablePass::min_rows)
};

// The scratch a model planned (memory_plan.h), as far as the choices depend on it.
struct PlanScratch {
    bool handoff_counters = false;  // "gemv_handoff"
    size_t dequant_bytes = 0;  // the bytes one binding of a "batch_weights_f16_*" buffer covers; 0: none
};

DecodePlan plan_pass(const ModelConfig& c, const ModelWeights& w, bool gguf, const DeviceProfile& d, const KvSource& kv,
                     const PassShape& pass, const PlanScratch& scratch);

// A part of a split model holding `layers` (split.h): no hand-off crosses its boundaries (each
// part has its own counters), and the down GEMV of the layer before a boundary hands the next
// norm forward across it only where both parts take it (norm_in, norm_out: LoadedModel).
// Both parts change the row of that layer alike, so they agree on what passes between them.
void plan_boundaries(DecodePlan& p, int n_layers, LayerRange layers, bool norm_in, bool norm_out);

}  // namespace akunu
