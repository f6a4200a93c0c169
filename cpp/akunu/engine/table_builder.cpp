// Recording one pass's dispatch table from its plan (table_builder.h): the layer loop and the
// tail (table_builder_impl.h; the matrix products in table_builder_products.cpp).
#include "akunu/engine/table_builder.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "akunu/core/error.h"
#include "akunu/engine/table_builder_impl.h"

namespace akunu {

namespace table_detail {

Builder::Builder(const LoadedModel& m, const ScratchBuffers& s, const KvSource& kv, const DecodePlan& plan,
                 const TablePass& pass)
    : m_(m),
      c_(m.config),
      a_(m.config.arch()),
      s_(s),
      kv_(kv),
      plan_(plan),
      pass_(pass),
      table_(std::make_unique<DispatchTable>(*m.device)),
      t_(*table_),
      prefill_(pass.prefill),
      gguf_(m.files->gguf() != nullptr),
      rows_(plan.rows),
      dim_(size_t(c_.dim)),
      q_dim_(size_t(c_.q_dim)),
      kv_dim_(size_t(c_.kv_dim)),
      ffn_(size_t(c_.ffn_dim)),
      qkv_row_(q_dim_ + 2 * kv_dim_),
      norm_offset_(a_.norm_plus_one && !gguf_ ? 1.0f : 0.0f),  // GGUF stores gemma's w + 1
      h0_(buf("h0")),
      h1_(buf("h1")),
      residual_(buf("residual")),
      qkv_(buf("qkv")),
      attn_out_(buf("attn_out")),
      gate_(buf("ffn_gate")),
      up_(buf("ffn_up")),
      act_(buf("ffn_act")),
      step_(prefill_ ? Binding(s.get("batch_step")) : Binding(s.get("step"), size_t(pass.step_index) * 16, 16)),
      q_(Binding::columns(qkv_, 0, q_dim_ * 4, qkv_row_ * 4)),
      k_(Binding::columns(qkv_, q_dim_ * 4, kv_dim_ * 4, qkv_row_ * 4)),
      v_(Binding::columns(qkv_, (q_dim_ + kv_dim_) * 4, kv_dim_ * 4, qkv_row_ * 4)),
      head_(m.weights.output ? m.weights.output : m.weights.token_embd),
      first_(m.layers.first),
      last_(m.layers.end(m.config.n_layers)) {
    if (plan.dequant_bytes)
        for (int i = 0; i < kPrefillF16Weights; ++i) weights_f16_[i] = &s.get(prefill_f16_weights_name(i));
    if (plan.handoffs) handoff_counters_ = Binding(s.get("gemv_handoff"));
    next_handoff_ = {handoff_counters_};
}

// ---- the layer loop ----------------------------------------------------------------------------

std::unique_ptr<DispatchTable> Builder::build() {
    // A chunk's dispatches up to its tail run over its rows, and their workgroups follow the
    // chunk's token count (set_tokens before each submission): a short prompt pays for its own
    // rows, not a whole chunk's.
    if (prefill_) t_.set_chunk_rows(uint32_t(rows_));
    t_.set_label("token_embd");
    const Buffer& ids = prefill_ ? s_.get("batch_token_ids") : s_.get("token_ids");
    const Weight& embd = m_.weights.token_embd;
    if (first_ > 0)  // a part of a split model after its first
        split_stream(*pass_.split_in, first_ - 1, true);
    else
        for (const WeightWindow& win : weight_windows(embd, t_.device().profile(), "token_embd"))
            kernels::embed(t_, win.w, embd.type, win.rows, ids, step_, h0_, dim_, c_.embed_scale, rows_, win.first_row);
    for (int l = first_; l < last_; ++l) {
        attention(l);
        feed_forward(l);
        tap(l);
    }
    const bool head = last_ == c_.n_layers;  // else a part of a split model before its last
    if (head && prefill_ && pass_.all_logits) all_logits();
    if (!head)
        split_stream(*pass_.split_out, last_ - 1, false);
    else if (pass_.batch_sequences)
        sample_rows();
    else
        tail();
    return std::move(table_);
}

// h0 -> attn_out: the pre-norm, Q/K/V (with bias, per-head norms and RoPE as the model has
// them; K and V stored to the cache), then attention over the cache.
void Builder::attention(int l) {
    const LayerWeights& L = layer(l);
    const LayerPlan& lp = plan_.layers[size_t(l)];
    label(l, "attn_norm");
    const ProjectionInput in = normed_input(L.attn_norm, h0_, residual_, rows_, plan_.gemv, lp.attn_norm_folded);
    const bool sliding = c_.is_sliding(l);
    const bool local = sliding && s_.all().count("rope_cos_local") > 0;
    const Buffer &rope_cos = s_.get(local ? "rope_cos_local" : "rope_cos"),
                 &rope_sin = s_.get(local ? "rope_sin_local" : "rope_sin");
    const RopeStyle style = gguf_ ? a_.rope_gguf : a_.rope_hf;
    KvBindings cache = kv_.bindings(l);
    cache.step_kv = Binding(qkv_);  // a recent window's current rows (kv_recent.glsl)
    cache.step_kv_stride = uint32_t(qkv_row_);
    std::optional<kernels::GemvRopeKv> rope;
    if (lp.rope_folded)
        rope = kernels::GemvRopeKv{Binding(rope_cos),
                                   Binding(rope_sin),
                                   cache,
                                   step_,
                                   uint32_t(c_.head_dim),
                                   uint32_t(m_.context),
                                   style == RopeStyle::kHalfSplit};
    const auto handoff = take_handoff();  // Q/K/V only waits: its hand-off to attention lost
    const bool roped = project(l, "attn_qkv",
                               {{"attn_q", &L.q, q_, q_dim_, qkv_row_},
                                {"attn_k", &L.k, k_, kv_dim_, qkv_row_},
                                {"attn_v", &L.v, v_, kv_dim_, qkv_row_}},
                               in, lp.qkv_fused, rope ? &*rope : nullptr, ptr(handoff));
    const uint32_t heads = uint32_t(c_.n_heads), kv_heads = uint32_t(c_.n_kv_heads), head_dim = uint32_t(c_.head_dim);
    if (c_.qkv_bias) {
        label(l, "attn_qkv_bias");
        kernels::add_rows(t_, q_, L.q_bias.buffer, q_, DType::kF32, {q_dim_, rows_, qkv_row_, 0, qkv_row_});
        kernels::add_rows(t_, k_, L.k_bias.buffer, k_, DType::kF32, {kv_dim_, rows_, qkv_row_, 0, qkv_row_});
        kernels::add_rows(t_, v_, L.v_bias.buffer, v_, DType::kF32, {kv_dim_, rows_, qkv_row_, 0, qkv_row_});
    }
    if (a_.qk_norm) {
        label(l, "attn_qk_norm");
        head_norm(q_, L.q_norm, c_.n_heads);
        head_norm(k_, L.k_norm, c_.n_kv_heads);
    }
    const kernels::RopeKvShape rope_shape{heads,
                                          kv_heads,
                                          head_dim,
                                          uint32_t(m_.context),
                                          style == RopeStyle::kInterleaved,
                                          style != RopeStyle::kNone,
                                          uint32_t(rows_),
                                          uint32_t(qkv_row_)};
    if (!roped) {
        label(l, "rope_kv");
        kernels::rope_kv(t_, qkv_, rope_cos, rope_sin, cache, step_, rope_shape);
    }
    // The one-sequence decode attention (kernels::attention) below, not a batch's or a prompt's.
    const bool decode_attention = !pass_.batch_sequences && !prefill_;
    // A decode step's own row, RoPE applied by the GEMV, packed by the attention that reads it.
    const kernels::AttentionNewest newest =
        roped && decode_attention && rows_ == 1 &&
                kernels::attention_packs_newest(t_.device().profile(), cache, head_dim)
            ? kernels::AttentionNewest::kPacked
            : kernels::AttentionNewest::kInCache;
    if (roped && cache.dtype != KvDType::kF16) {  // the codes are packed here, or the rotation alone
        label(l, "kv_write");
        kernels::kv_write(t_, qkv_, cache, step_, rope_shape, newest);
    }
    label(l, "attention");
    const kernels::AttentionShape shape{
        heads,         kv_heads,       head_dim, uint32_t(m_.context), sliding ? uint32_t(c_.sliding_window) : 0u,
        c_.attn_scale, c_.attn_softcap};
    if (pass_.batch_sequences) {
        const Binding tiles(s_.get("batch_tiles"));
        const bool split = s_.all().count("batch_row_partials") > 0;  // the scratch planned it
        const kernels::RowPartials parts =
            split ? kernels::RowPartials{s_.get("batch_row_partials"), s_.get("batch_row_counters")}
                  : kernels::RowPartials{};
        // A one-row step has no query tile (a tile is a prompt's piece of 2 rows or more).
        kernels::attention_rows(t_, q_, cache, attn_out_, step_,
                                {shape, uint32_t(rows_), uint32_t(qkv_row_), uint32_t(q_dim_), DType::kF32},
                                plan_.gemv ? nullptr : &tiles, split ? &parts : nullptr);
    } else if (prefill_)
        kernels::flash_attention(t_, q_, cache, attn_out_, step_,
                                 {shape, uint32_t(rows_), uint32_t(qkv_row_), uint32_t(q_dim_), lp.attn_out_dtype});
    else
        kernels::attention(t_,
                           newest == kernels::AttentionNewest::kPacked
                               ? Binding::columns(qkv_, 0, (q_dim_ + 2 * kv_dim_) * 4, qkv_row_ * 4)
                               : q_,
                           cache, s_.get("attn_partial"), attn_out_, step_, shape,
                           ptr(take_handoff(lp.handoff_slot[kAttentionToO], heads)), newest);
    if (cache.recent > 0) {  // after attention has read the ring's older rows
        label(l, "kv_recent_store");
        kernels::kv_recent_store(
            t_, qkv_, cache, step_,
            {heads, kv_heads, head_dim, uint32_t(m_.context), false, false, uint32_t(rows_), uint32_t(qkv_row_)});
    }
    // sum p (Hv) back to sum p v, where the decode attention did not (attention_unrotates).
    const bool unrotated = decode_attention && kernels::attention_unrotates(t_.device().profile(), cache);
    if (kv_rotated(cache.dtype) && !unrotated) {
        AKUNU_CHECK(lp.attn_out_dtype == DType::kF32, "attention over a rotated KV cache must write f32 rows");
        label(l, "attn_unrotate");
        kernels::hadamard_rows(t_, attn_out_, step_, rows_, heads, head_dim, q_dim_);
    }
}

// h0 += O·attn_out, then h0 += down·act(gate·x) * (up·x) with x the normed h0.
void Builder::feed_forward(int l) {
    const LayerWeights& L = layer(l);
    const LayerPlan& lp = plan_.layers[size_t(l)];
    label(l, "attn_output");
    // The O GEMV also zeroes the layer before's slots (of the table's last layer, for its first).
    const uint32_t before = 1 + kHandoffSlotsPerLayer * uint32_t(l == first_ ? last_ - 1 : l - 1);
    const auto o_handoff = take_handoff(lp.handoff_slot[kOToGateUp], plan_.o_tiles, plan_.handoffs ? before : 0);
    ProjectionInput o_in{Binding(attn_out_), std::nullopt, lp.attn_out_dtype};
    if (lp.attn_out_to_half) {
        kernels::to_half(t_, attn_out_, act_, rows_ * q_dim_);
        o_in = {Binding(act_), std::nullopt, DType::kF16};
    }
    into_residual(L.o, o_in, q_dim_, a_.post_attn_norm ? &L.post_attn_norm : nullptr, ptr(o_handoff),
                  hand_norm_forward(L.o, L.ffn_norm, lp.o_norm_forward));
    label(l, "ffn_norm");
    const ProjectionInput ffn_in = normed_input(L.ffn_norm, h0_, residual_, rows_, plan_.gemv, lp.ffn_norm_folded);
    const ProjectionInput down_in = gate_up(l, ffn_in);
    label(l, "ffn_down");
    const auto down_handoff = take_handoff(lp.handoff_slot[kDownToNextQkv], plan_.down_tiles);
    // The next norm: the next layer's attention norm, or after the last layer the output norm.
    const Weight& next_norm = l + 1 < c_.n_layers ? layer(l + 1).attn_norm : m_.weights.output_norm;
    const auto down_norm = hand_norm_forward(L.down, next_norm, lp.down_norm_forward);
    into_residual(L.down, down_in, ffn_, a_.post_ffn_norm ? &L.post_ffn_norm : nullptr, ptr(down_handoff), down_norm);
}

// The down projection's input act(gate·x) * (up·x): from one gate/up GEMV (float weights),
// from the gated GEMM's epilogue (a chunk), or from gate and up then act_* or the down GEMV.
ProjectionInput Builder::gate_up(int l, const ProjectionInput& in) {
    const LayerWeights& L = layer(l);
    const LayerPlan& lp = plan_.layers[size_t(l)];
    if (lp.gate_up_fused && !split(L.gate) && !split(L.up)) {
        label(l, "ffn_gate_up");
        kernels::gemv_gate_up(t_, L.gate.buffer, L.up.buffer, L.gate.type, in.x, act_, ffn_, dim_, a_.activation,
                              in.fold());
        return {Binding(act_), std::nullopt};
    }
    if (lp.gemm_gated) return gemm_gated(l, in);
    const auto handoff = take_handoff(lp.handoff_slot[kGateUpToDown], plan_.gate_up_tiles);
    project(l, "ffn_gate_up", {{"ffn_gate", &L.gate, gate_, ffn_, ffn_}, {"ffn_up", &L.up, up_, ffn_, ffn_}}, in,
            lp.gate_up_parts, nullptr, ptr(handoff));
    label(l, "ffn_act");
    return gated(lp.activation_folded);
}

// The gate and up GEMMs with the activation in their epilogue, on f16 weights or on block
// formats dequantized to f16: the down projection's halves written from the accumulators (no
// f32 gate and up, no act_*). Shorter chunks (the short tiles, or the formats' own GEMMs) run
// those GEMMs and act_* in their own row window, which the gated dispatch shares (only one of
// them has workgroups for a chunk).
ProjectionInput Builder::gemm_gated(int l, const ProjectionInput& in) {
    const LayerWeights& L = layer(l);
    const uint32_t from = plan_.layers[size_t(l)].gemm_gated_from;
    const bool f16 = L.gate.type == TensorType::F16 && L.up.type == TensorType::F16;
    label(l, "ffn_gate");
    const Buffer& w_gate = f16 ? L.gate.buffer : dequantized(L.gate, ffn_, dim_);
    label(l, "ffn_up");
    const Buffer& w_up = f16 ? L.up.buffer : dequantized(L.up, ffn_, dim_);
    if (from) {
        for (const auto& [name, w, y] : {std::tuple{"ffn_gate", &L.gate, &gate_}, std::tuple{"ffn_up", &L.up, &up_}}) {
            label(l, name);
            own_gemm(w->buffer, w->type, in.x, *y, ffn_, dim_, ffn_, false, in.dtype, from);
        }
        label(l, "ffn_act");
        kernels::gated_activation(t_, a_.activation, gate_, up_, act_, rows_ * ffn_, DType::kF16, from);
    }
    label(l, "ffn_gate_up");
    kernels::gemm_gated(t_, a_.activation, w_gate, w_up, in.x, act_, {rows_, ffn_, dim_, dim_, ffn_, from, 0, in.dtype},
                        step_);
    f16_gemm_recorded();
    return {Binding(act_), std::nullopt, DType::kF16};
}

// A tap: h0 now holds the residual stream after layer l, for every row of the chunk.
void Builder::tap(int l) {
    const auto at = std::find(pass_.taps.begin(), pass_.taps.end(), l);
    if (at == pass_.taps.end()) return;
    label(l, "tap");
    const size_t bytes = rows_ * dim_ * 4;
    kernels::copy(t_, h0_, Binding(*pass_.tap_buffer, size_t(at - pass_.taps.begin()) * bytes, bytes), bytes);
}

// The residual stream between the parts of a split model after layer l (read `in` by the part
// after, written by the part before): h0's rows, and where l's down GEMV hands the next norm
// forward across the boundary, the normed stream and its sums (so layer l + 1 runs as it does in
// the whole model's table).
void Builder::split_stream(const Buffer& io, int l, bool in) {
    t_.set_label(in ? "split_in" : "split_out");
    const Buffer& sums = s_.get("norm_sums");
    const size_t bytes = rows_ * dim_ * 4;
    const bool norm = !prefill_ && plan_.layers[size_t(l)].down_norm_forward;
    const std::tuple<const Buffer*, size_t, size_t> pieces[] = {
        {&h0_, 0, bytes}, {&residual_, bytes, dim_ * 4}, {&sums, bytes + dim_ * 4, sums.size()}};
    for (const auto& [b, at, n] : pieces) {
        if (b != &h0_ && !norm) break;
        kernels::copy(t_, in ? Binding(io, at, n) : Binding(*b), in ? Binding(*b) : Binding(io, at, n), n);
    }
    if (!in || !norm) return ready_.reset();
    const uint32_t partials = kernels::gemv_norm_partials(t_.device().profile(), layer(l).down.type, dim_);
    ready_ =
        ProjectionInput{Binding(residual_), kernels::GemvInput::rmsnorm_ready(Binding(sums), partials, c_.norm_eps)};
}

// A chunk's logits at every row, into batch_logits.
void Builder::all_logits() {
    t_.set_label("output_norm");
    const ProjectionInput in =
        pre_norm(m_.weights.output_norm, h0_, residual_, rows_, plan_.gemv, plan_.head_norm_folded);
    t_.set_label("output");
    matmul(head_, in.x, s_.get("batch_logits"), size_t(c_.vocab_size), dim_, size_t(c_.vocab_size), false, in.fold(),
           in.dtype);
    final_softcap(s_.get("batch_logits"), rows_);
}

// The decode tail: output norm, LM head and sampling of one row (a chunk's last).
void Builder::tail() {
    t_.set_chunk_rows(0);
    const Buffer& last = s_.get("h0");
    if (prefill_) {
        t_.set_label("last_row");
        kernels::last_row(t_, h0_, last, step_, rows_, dim_);
    }
    t_.set_label("output_norm");
    const ProjectionInput in =
        normed_input(m_.weights.output_norm, last, s_.get("residual"), 1, true, plan_.head_norm_folded);
    t_.set_label("output");
    gemv(head_, in.x, s_.get("logits"), size_t(c_.vocab_size), dim_, false, in.fold());
    final_softcap(s_.get("logits"), 1);
    t_.set_label("sample");
    kernels::sample(t_, s_.get("logits"), s_.get("token_ids"), s_.get("sampled_logprobs"), step_, s_.get("sampler"),
                    size_t(c_.vocab_size), uint32_t(prefill_ ? 1 : pass_.step_index + 1));
}

// A batched step's tail: every row's logits (all_logits) sampled with its sequence's sampler.
void Builder::sample_rows() {
    t_.set_label("sample");
    const kernels::ScoredTargets scored{s_.get("batch_targets"), s_.get("batch_target_logprobs"),
                                        s_.get("batch_target_argmax")};
    kernels::sample(t_, s_.get("batch_logits"), s_.get("batch_sampled"), s_.get("batch_logprobs"), step_,
                    s_.get("batch_samplers"), size_t(c_.vocab_size), 0, rows_, size_t(pass_.batch_sequences), &scored);
    t_.set_chunk_rows(0);
}

}  // namespace table_detail

using table_detail::Builder;

DecodePlan plan_for(const LoadedModel& m, const ScratchBuffers& s, const KvSource& kv, const TablePass& pass) {
    PlanScratch scratch;
    scratch.handoff_counters = s.all().count("gemv_handoff") > 0;
    if (pass.prefill && s.all().count(prefill_f16_weights_name(0)))
        scratch.dequant_bytes = s.get(prefill_f16_weights_name(0)).size();
    DecodePlan p = plan_pass(m.config, m.weights, m.files->gguf() != nullptr, m.device->profile(), kv,
                             {pass.prefill, size_t(pass.rows), pass.taps, pass.gemv, uint32_t(pass.min_rows)}, scratch);
    plan_boundaries(p, m.config.n_layers, m.layers, m.norm_in, m.norm_out);
    return p;
}

std::unique_ptr<DispatchTable> build_table(const LoadedModel& m, const ScratchBuffers& s, const KvSource& kv,
                                           const DecodePlan& plan, const TablePass& pass) {
    return Builder(m, s, kv, plan, pass).build();
}

}  // namespace akunu
