// The choices of one pass (plan.h): fusions and folds, norms handed forward, hand-off slots,
// and a chunk's dequantized weights and half-precision inputs.
#include "akunu/engine/plan.h"

#include <algorithm>

#include "akunu/core/error.h"

#include "gemm_tiles.h"

namespace akunu {

namespace {

struct Inputs {
    const ModelConfig& c;
    const ModelWeights& w;
    const DeviceProfile& d;
    const KvSource& kv;
    const PassShape& pass;
    bool gguf;
};

bool same_type(std::initializer_list<const Weight*> ws) {
    for (const Weight* w : ws)
        if (w->type != (*ws.begin())->type) return false;
    return true;
}

// A decode step's projections: which fuse into one dispatch, and what their GEMVs fold.
void plan_decode_layer(const Inputs& in, int l, LayerPlan& lp) {
    const ModelConfig& c = in.c;
    const ArchDescriptor& a = c.arch();
    const LayerWeights& L = in.w.layers[size_t(l)];
    const size_t dim = size_t(c.dim), ffn = size_t(c.ffn_dim);
    lp.attn_norm_folded = kernels::gemv_folds_norm(in.d, L.q.type, dim);
    lp.ffn_norm_folded = kernels::gemv_folds_norm(in.d, L.gate.type, dim);
    lp.qkv_fused = same_type({&L.q, &L.k, &L.v}) && kernels::gemv_fuses_parts(in.d, L.q.type, dim);
    // RoPE and the KV write ride on the fused Q/K/V dispatch where nothing comes between them
    // (no bias, no per-head norm) and the GEMV takes the model's RoPE pairs.
    const RopeStyle style = in.gguf ? a.rope_gguf : a.rope_hf;
    lp.rope_folded = lp.qkv_fused && !c.qkv_bias && !a.qk_norm && style != RopeStyle::kNone &&
                     kernels::gemv_folds_rope_kv(in.d, L.q.type, in.kv.bindings(l), style == RopeStyle::kHalfSplit);
    lp.gate_up_fused = L.up.type == L.gate.type && kernels::gemv_fuses_gate_up(in.d, L.gate.type, dim, a.activation);
    lp.gate_up_parts =
        !lp.gate_up_fused && same_type({&L.gate, &L.up}) && kernels::gemv_fuses_parts(in.d, L.gate.type, dim);
    lp.activation_folded = !lp.gate_up_fused && kernels::gemv_folds_activation(in.d, L.down.type, ffn);
}

// A chunk's halves and the gated GEMM: the gate and up GEMMs with the activation in their
// epilogue, on f16 weights or on block formats dequantized to f16.
void plan_prefill_layer(const Inputs& in, const DecodePlan& p, int l, LayerPlan& lp) {
    const ModelConfig& c = in.c;
    const LayerWeights& L = in.w.layers[size_t(l)];
    const size_t dim = size_t(c.dim), ffn = size_t(c.ffn_dim), q_dim = size_t(c.q_dim);
    const bool half_q = kernels::gemm_takes_half_x(in.d, q_dim, q_dim);
    const bool flash_halves = kernels::flash_attention_coopmat(in.d, in.kv.bindings(l), uint32_t(c.head_dim));
    lp.attn_out_dtype = half_q && flash_halves ? DType::kF16 : DType::kF32;
    // The other attention kernels write f32; their rows converted to halves (into the FFN's
    // activation buffer, free until the gate and up write it) let O run the GEMM that reads
    // halves, which on cooperative matrix 2 is the fast one (bench/NOTES.md, "score_batch's
    // O projection on halves"). Not in tables of no more rows than the short tiles take (a
    // batch's two-row and short tables), whose GEMMs gain nothing from halves.
    lp.attn_out_to_half = half_q && !flash_halves && q_dim <= 2 * ffn && p.rows > p.short_rows;
    const bool f16 = L.gate.type == TensorType::F16 && L.up.type == TensorType::F16;
    const bool dequantized = p.reads_dequantized(L.gate.type, ffn, dim) && p.reads_dequantized(L.up.type, ffn, dim);
    // Shorter chunks run the short tiles (f16), or the formats' own GEMMs below dequant_rows.
    const uint32_t from = !f16 ? p.dequant_rows : p.short_rows && p.rows > p.short_rows ? p.short_rows + 1 : 0;
    const DType x_dtype = p.half_x_dim ? DType::kF16 : DType::kF32;
    lp.gemm_gated = p.half_x_ffn && (f16 || dequantized) &&
                    kernels::gemm_fuses_gated(in.d, TensorType::F16, c.arch().activation,
                                              {p.rows, ffn, dim, dim, ffn, from, 0, x_dtype});
    lp.gemm_gated_from = from;
}

// Hand-offs (kernels::GemvHandoff) at four places a layer, where the GEMVs on both sides are
// one tile GEMV each with nothing between them (norms and the activation folded, no post-norm,
// no tap) and both run at most one workgroup per compute unit (gemv_hands_off,
// attention_hands_off); a float O GEMV waits for attention too (gemv_waits_for_attention).
// Layer l's O GEMV zeroes the slots of layer l - 1 (of the last layer, for l = 0): every wait on
// them ended before the barrier ahead of layer l's attention. So every O must take part, and
// there must be two layers at least (one layer's O would zero its own). A rotated cache
// (int4h) puts hadamard_rows between attention and O: no hand-off there.
void plan_handoffs(const Inputs& in, DecodePlan& p) {
    const ModelConfig& c = in.c;
    const ArchDescriptor& a = c.arch();
    const DeviceProfile& d = in.d;
    const uint32_t qkv_tiles = kernels::gemv_tiles_groups({size_t(c.q_dim), size_t(c.kv_dim), size_t(c.kv_dim)});
    auto hand_off = [&](std::initializer_list<const Weight*> ws, uint32_t tiles) {
        bool ok = same_type(ws);
        for (const Weight* w : ws) ok = ok && kernels::gemv_hands_off(d, w->type, tiles);
        return ok;
    };
    bool every_o = c.n_layers >= 2;
    for (const LayerWeights& L : in.w.layers) every_o = every_o && kernels::gemv_takes_handoff(d, L.o.type);
    if (!every_o) return;
    for (int l = 0; l < c.n_layers; ++l) {
        const LayerWeights& L = in.w.layers[size_t(l)];
        const LayerWeights* next = l + 1 < c.n_layers ? &in.w.layers[size_t(l) + 1] : nullptr;
        LayerPlan& lp = p.layers[size_t(l)];
        const bool tapped = std::find(in.pass.taps.begin(), in.pass.taps.end(), l) != in.pass.taps.end();
        const bool o_few = hand_off({&L.o}, p.o_tiles), down_few = hand_off({&L.down}, p.down_tiles);
        const bool gate_up_few = !lp.gate_up_fused && hand_off({&L.gate, &L.up}, p.gate_up_tiles);
        const bool on[kHandoffSlotsPerLayer] = {
            (o_few || kernels::gemv_waits_for_attention(d, L.o.type)) &&
                kernels::attention_hands_off(d, uint32_t(c.n_heads)) && !kv_rotated(in.kv.bindings(l).dtype) &&
                in.kv.bindings(l).recent == 0,  // a ring write follows; a rotated cache's is untried
            !a.post_attn_norm && o_few && gate_up_few,
            gate_up_few && down_few,
            next && !tapped && !a.post_ffn_norm && down_few && hand_off({&next->q, &next->k, &next->v}, qkv_tiles),
        };
        for (uint32_t j = 0; j < kHandoffSlotsPerLayer; ++j) {
            lp.handoff_slot[j] = on[j] ? 1 + kHandoffSlotsPerLayer * uint32_t(l) + j : 0;
            p.handoffs = p.handoffs || on[j];
        }
    }
}

// The next pre-norm handed forward (kernels::GemvNormOut) by the O and down GEMVs, where they
// and every GEMV reading that norm's output are float gemv_core.glsl ones, no post-norm comes
// between, and the GEMV signals no hand-off (kernels::gemv refuses both).
void plan_norm_forward(const Inputs& in, DecodePlan& p) {
    const ModelConfig& c = in.c;
    const ArchDescriptor& a = c.arch();
    const Weight& head = in.w.output ? in.w.output : in.w.token_embd;
    auto hands = [&](const Weight& producer, std::initializer_list<const Weight*> readers) {
        for (const Weight* r : readers)
            if (!kernels::gemv_hands_norm_forward(in.d, producer.type, r->type)) return false;
        return true;
    };
    for (int l = 0; l < c.n_layers; ++l) {
        const LayerWeights& L = in.w.layers[size_t(l)];
        LayerPlan& lp = p.layers[size_t(l)];
        lp.o_norm_forward = !a.post_attn_norm && !lp.handoff_slot[kOToGateUp] && hands(L.o, {&L.gate, &L.up});
        const LayerWeights* next = l + 1 < c.n_layers ? &in.w.layers[size_t(l) + 1] : nullptr;
        lp.down_norm_forward = !a.post_ffn_norm && !lp.handoff_slot[kDownToNextQkv] &&
                               (next ? hands(L.down, {&next->q, &next->k, &next->v}) : hands(L.down, {&head}));
    }
}

}  // namespace

bool DecodePlan::reads_dequantized(TensorType type, size_t n, size_t k) const {
    return prefill && !gemv && dequant_bytes && rows >= dequant_rows && kernels::dequantizes_to_f16(type) &&
           n * k * 2 <= dequant_bytes;
}

DecodePlan plan_pass(const ModelConfig& c, const ModelWeights& w, bool gguf, const DeviceProfile& d, const KvSource& kv,
                     const PassShape& pass, const PlanScratch& scratch) {
    const Inputs in{c, w, d, kv, pass, gguf};
    const size_t dim = size_t(c.dim), ffn = size_t(c.ffn_dim);
    DecodePlan p;
    p.prefill = pass.prefill;
    p.rows = pass.prefill ? pass.rows : 1;
    AKUNU_CHECK(!pass.gemv || (pass.prefill && pass.rows == 1), "a chunk's products are GEMVs only for one row");
    p.gemv = !pass.prefill || pass.gemv;
    p.x_rounding = kernels::engine_x_rounding(d);
    p.short_rows = d.gemm_short_rows;
    p.tile_rows = d.gemm_tile_rows;
    p.narrow_rows =
        d.gemm_coopmat && d.gemm_short_rows > AKUNU_GEMM_CM_SHORT_NARROW_ROWS ? AKUNU_GEMM_CM_SHORT_NARROW_ROWS : 0;
    p.dequant_rows = d.prefill_dequant_rows;
    p.min_rows = pass.prefill ? pass.min_rows : 0;
    p.dequant_bytes = pass.prefill ? std::min<size_t>(scratch.dequant_bytes, d.max_storage_buffer_range) : 0;
    p.half_x_dim = !p.gemv && kernels::gemm_takes_half_x(d, dim, dim);
    p.half_x_ffn = !p.gemv && kernels::gemm_takes_half_x(d, ffn, ffn);
    const Weight& head = w.output ? w.output : w.token_embd;
    p.head_norm_folded = kernels::gemv_folds_norm(d, head.type, dim);
    p.o_tiles = p.down_tiles = kernels::gemv_tiles_groups({dim, 0, 0});
    p.gate_up_tiles = kernels::gemv_tiles_groups({ffn, ffn, 0});
    p.layers.resize(size_t(c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) {
        if (p.gemv)
            plan_decode_layer(in, l, p.layers[size_t(l)]);
        else
            plan_prefill_layer(in, p, l, p.layers[size_t(l)]);
    }
    if (!pass.prefill) {
        if (scratch.handoff_counters) plan_handoffs(in, p);
        plan_norm_forward(in, p);
    }
    return p;
}

void plan_boundaries(DecodePlan& p, int n_layers, LayerRange layers, bool norm_in, bool norm_out) {
    if (p.prefill) return;
    // A part of one layer has no layer before its first whose slots its O GEMV could zero (it
    // would zero its own, as a model of one layer would): no hand-offs there.
    if (layers.end(n_layers) - layers.first == 1 && n_layers > 1) p.layers[size_t(layers.first)].handoff_slot = {};
    for (const auto& [l, carries] : {std::pair{layers.first - 1, norm_in}, {layers.end(n_layers) - 1, norm_out}}) {
        if (l < 0 || l + 1 >= n_layers) continue;  // the model's first or last layer: no boundary
        p.layers[size_t(l)].handoff_slot[kDownToNextQkv] = 0;
        p.layers[size_t(l)].down_norm_forward = p.layers[size_t(l)].down_norm_forward && carries;
    }
}

}  // namespace akunu
