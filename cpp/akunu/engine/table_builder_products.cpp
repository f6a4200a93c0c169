// The matrix products, norms and hand-offs a dispatch table's layers are recorded from
// (table_builder_impl.h).
#include <algorithm>
#include <optional>
#include <tuple>

#include "akunu/core/error.h"
#include "akunu/engine/table_builder_impl.h"

namespace akunu::table_detail {

// ---- matrix products ---------------------------------------------------------------------------

// The format's own GEMM for chunks of fewer than `below` tokens (0: any): in the tile GEMV of
// several rows up to the plan's tile_rows where the weights take it, in short tiles up to
// short_rows where the device takes them (narrow ones up to narrow_rows), then wide. Each is a GEMM with its own row window:
// only one of a projection's GEMMs has workgroups for a chunk, so they share a barrier interval.
// Windows wholly below the plan's min_rows are not recorded: no chunk of theirs runs.
void Builder::own_gemm(const Binding& w, TensorType type, const Binding& x, const Binding& y, size_t n, size_t kk,
                       size_t ldy, bool accumulate, DType x_dtype, uint32_t below) {
    const uint32_t tile_rows = std::min(plan_.tile_rows, kernels::gemm_tile_rows(t_.device().profile(), type));
    uint32_t from = 0;
    for (const uint32_t bound : {tile_rows, plan_.narrow_rows, plan_.short_rows}) {
        if (bound == 0 || bound + 1 <= from || rows_ <= bound || (below != 0 && below <= bound + 1)) continue;
        if (bound < plan_.min_rows) continue;
        kernels::gemm(t_, w, type, x, y, {rows_, n, kk, kk, ldy, from, bound + 1, x_dtype}, step_, accumulate);
        from = bound + 1;
    }
    kernels::gemm(t_, w, type, x, y, {rows_, n, kk, kk, ldy, from, below, x_dtype}, step_, accumulate);
}

// `w` dequantized into the next f16 buffer, placed right after the last f16 GEMM.
const Buffer& Builder::dequantized(const Weight& w, size_t n, size_t kk) {
    const Buffer& f16 = *weights_f16_[turn_];
    turn_ = (turn_ + 1) % kPrefillF16Weights;
    if (dequant_at_) t_.insert_at(*dequant_at_);
    kernels::dequant_f16(t_, w.buffer, w.type, f16, n, kk, step_, plan_.dequant_rows);
    t_.end_insert();
    return f16;
}

// While a group of projections that share a barrier interval is recorded (Q, K and V; gate
// and up), their dequantizations all go where the first one's does: the place moves only past
// the group's last GEMM.
void Builder::f16_gemm_recorded() {
    if (weights_f16_[0] && !in_group_) dequant_at_ = t_.commands().size();
}

// y[rows, n] (rows ldy floats apart) = x[rows, k] · W^T: GEMV for a step or a chunk of one row,
// GEMM for a longer chunk. A chunk of at least dequant_rows tokens reads a block-format matrix
// dequantized to f16; shorter chunks run the format's own GEMM.
void Builder::matmul(const Weight& w, const Binding& x, const Binding& y, size_t n, size_t kk, size_t ldy,
                     bool accumulate, const kernels::GemvInput* input, DType x_dtype,
                     const kernels::GemvHandoff* handoff, const kernels::GemvNormOut* norm_out) {
    if (plan_.gemv) return gemv(w, x, y, n, kk, accumulate, input, handoff, norm_out);
    const std::vector<WeightWindow> windows = weight_windows(w, t_.device().profile(), t_.label().c_str());
    if (windows.size() > 1) {  // the format's own GEMM per window, into its columns of y
        for (const WeightWindow& win : windows)
            own_gemm(win.w, w.type, x, offset_by(y, win.first_row * 4), win.rows, kk, ldy, accumulate, x_dtype, 0);
    } else if (plan_.reads_dequantized(w.type, n, kk)) {
        const Buffer& f16 = dequantized(w, n, kk);
        own_gemm(w.buffer, w.type, x, y, n, kk, ldy, accumulate, x_dtype, plan_.dequant_rows);
        kernels::gemm(t_, f16, TensorType::F16, x, y, {rows_, n, kk, kk, ldy, plan_.dequant_rows, 0, x_dtype}, step_,
                      accumulate);
        f16_gemm_recorded();
    } else {
        own_gemm(w.buffer, w.type, x, y, n, kk, ldy, accumulate, x_dtype, 0);
    }
}

// y[n] = W·x as a GEMV, once per row window of W (weight_windows.h) where W is more than the
// device binds at once.
void Builder::gemv(const Weight& w, const Binding& x, const Binding& y, size_t n, size_t kk, bool accumulate,
                   const kernels::GemvInput* input, const kernels::GemvHandoff* handoff,
                   const kernels::GemvNormOut* norm_out) {
    const std::vector<WeightWindow> windows = weight_windows(w, t_.device().profile(), t_.label().c_str());
    if (windows.size() == 1)
        return kernels::gemv(t_, w.buffer, w.type, x, y, n, kk, accumulate, input, plan_.x_rounding, handoff, norm_out);
    AKUNU_CHECK(!handoff && !norm_out, t_.label() + ": a GEMV bound in row windows hands nothing off");
    for (const WeightWindow& win : windows)
        kernels::gemv(t_, win.w, w.type, x, offset_by(y, win.first_row * 4), win.rows, kk, accumulate, input,
                      plan_.x_rounding);
}

// Projections of `dim` inputs that read the same x: one dispatch under `fused_label` where the
// plan fuses them (kernels::gemv_parts), with RoPE folded where `rope` is given; else one matmul
// each. Returns whether RoPE was folded.
bool Builder::project(int l, const char* fused_label, std::initializer_list<Projection> parts,
                      const ProjectionInput& in, bool fuse, const kernels::GemvRopeKv* rope,
                      const kernels::GemvHandoff* handoff) {
    AKUNU_CHECK(fuse || !handoff, "a hand-off needs the projections fused into one GEMV");
    for (const Projection& p : parts) fuse = fuse && (handoff || !split(*p.w));
    if (!fuse) {
        size_t left = parts.size();
        for (const Projection& p : parts) {
            label(l, p.label);
            in_group_ = --left > 0;
            matmul(*p.w, in.x, p.y, p.n, dim_, p.ldy, false, in.fold(), in.dtype);
        }
        return false;
    }
    std::array<Binding, 3> w, y;
    std::array<size_t, 3> n{};
    size_t i = 0;
    for (const Projection& p : parts) w[i] = Binding(p.w->buffer), y[i] = p.y, n[i++] = p.n;
    label(l, fused_label);
    kernels::gemv_parts(t_, w, parts.begin()->w->type, in.x, y, n, dim_, in.fold(), rope, plan_.x_rounding, handoff);
    return rope != nullptr;
}

// h0 += W·x, the output projections of attention and FFN. Without a post-norm the product adds
// straight into the residual stream; with one (gemma2/3) it is normed in h1 first.
void Builder::into_residual(const Weight& w, const ProjectionInput& in, size_t kk, const Weight* post_norm,
                            const kernels::GemvHandoff* handoff, const std::optional<kernels::GemvNormOut>& norm_out) {
    if (!post_norm) {
        matmul(w, in.x, h0_, dim_, kk, dim_, true, in.fold(), in.dtype, handoff, norm_out ? &*norm_out : nullptr);
        return;
    }
    AKUNU_CHECK(!handoff || !handoff->signal, "a GEMV whose output is post-normed hands nothing off");
    matmul(w, in.x, h1_, dim_, kk, dim_, false, in.fold(), in.dtype, handoff);
    kernels::rmsnorm(t_, h1_, post_norm->buffer, h1_, DType::kF32, rows_, dim_, c_.norm_eps, norm_offset_);
    kernels::add(t_, h0_, h1_, h0_, DType::kF32, rows_ * dim_);
}

// ---- norms -------------------------------------------------------------------------------------

// After a pre-norm of `x` (n_rows rows): normed once into `normed` (as halves where a chunk's
// GEMMs take them), or folded into each GEMV that reads it where the plan folds it (one
// dispatch and one barrier fewer per norm).
ProjectionInput Builder::pre_norm(const Weight& w, const Buffer& x, const Buffer& normed, size_t n_rows,
                                  bool read_by_gemv, bool folds) {
    if (!read_by_gemv && plan_.half_x_dim) {
        kernels::rmsnorm_to_f16(t_, x, w.buffer, normed, n_rows, dim_, c_.norm_eps, norm_offset_);
        return {Binding(normed), std::nullopt, DType::kF16};
    }
    if (!read_by_gemv || !folds) {
        kernels::rmsnorm(t_, x, w.buffer, normed, DType::kF32, n_rows, dim_, c_.norm_eps, norm_offset_);
        return {Binding(normed), std::nullopt};
    }
    return {Binding(x), kernels::GemvInput::rmsnorm(Binding(w.buffer), c_.norm_eps, norm_offset_)};
}

// The input of the projections after a pre-norm: handed forward, else pre_norm's.
ProjectionInput Builder::normed_input(const Weight& w, const Buffer& x, const Buffer& normed, size_t n_rows,
                                      bool read_by_gemv, bool folds) {
    if (ready_) {
        ProjectionInput in = *ready_;
        ready_.reset();
        return in;
    }
    return pre_norm(w, x, normed, n_rows, read_by_gemv, folds);
}

// The next pre-norm handed forward (kernels::GemvNormOut) where the plan says so: the GEMV that
// adds into the residual stream also writes the stream times `norm`'s weight into `residual`
// and its sums of squares, and the GEMVs after it read those instead of folding the norm.
std::optional<kernels::GemvNormOut> Builder::hand_norm_forward(const Weight& producer, const Weight& norm, bool on) {
    if (!on || split(producer)) return std::nullopt;
    const Binding sums(s_.get("norm_sums"));
    const uint32_t partials = kernels::gemv_norm_partials(t_.device().profile(), producer.type, dim_);
    ready_ = ProjectionInput{Binding(residual_), kernels::GemvInput::rmsnorm_ready(sums, partials, c_.norm_eps)};
    return kernels::GemvNormOut{Binding(norm.buffer), norm_offset_, Binding(residual_), sums};
}

// The down projection's input, act(gate) * up: formed by act_* into `act`, or, where the plan
// folds it, by the down GEMV itself from gate and up (one dependent dispatch fewer a layer).
ProjectionInput Builder::gated(bool folded) {
    if (!folded) {
        const DType dtype = plan_.half_x_ffn ? DType::kF16 : DType::kF32;
        kernels::gated_activation(t_, a_.activation, gate_, up_, act_, rows_ * ffn_, dtype);
        return {Binding(act_), std::nullopt, dtype};
    }
    return {Binding(gate_), kernels::GemvInput::gated(a_.activation, Binding(up_))};
}

// Per-head norms of Q or K: n_heads rows of head_dim inside each token's qkv row.
void Builder::head_norm(const Binding& x, const Weight& w, int heads) {
    kernels::rmsnorm(t_, x, w.buffer, x, DType::kF32, rows_ * size_t(heads), size_t(c_.head_dim), c_.norm_eps,
                     norm_offset_, size_t(heads), qkv_row_);
}

// Final-logit soft-capping (gemma2), in place before anything reads the logits; recorded only
// when the model has a cap.
void Builder::final_softcap(const Buffer& logits, size_t n_rows) {
    if (c_.final_softcap <= 0) return;
    t_.set_label("final_softcap");
    kernels::softcap(t_, logits, step_, n_rows, size_t(c_.vocab_size), c_.final_softcap);
}

// ---- hand-offs ---------------------------------------------------------------------------------

// The hand-off of the dispatch about to be recorded: the pending wait, a signal in `signal`
// (then the next dispatch waits for it, for `count` workgroups or heads), and slots from
// `clear` on to zero.
std::optional<kernels::GemvHandoff> Builder::take_handoff(uint32_t signal, uint32_t count, uint32_t clear) {
    kernels::GemvHandoff h = next_handoff_;
    next_handoff_ = {handoff_counters_};
    if (signal) h.signal = signal, next_handoff_.wait = signal, next_handoff_.wait_count = count;
    if (clear) h.clear = clear, h.clear_count = kHandoffSlotsPerLayer;
    if (!h.signal && !h.wait && !h.clear) return std::nullopt;
    return h;
}

}  // namespace akunu::table_detail
