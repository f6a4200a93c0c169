// The recorder of one pass's dispatch table (table_builder.h), shared by its two source files:
// table_builder.cpp records the layer loop and the tail, table_builder_products.cpp the matrix
// products, norms and hand-offs they are made of. Private to the engine.
#pragma once

#include <optional>
#include <string>

#include "akunu/engine/kernels.h"
#include "akunu/engine/model.h"
#include "akunu/engine/table_builder.h"
#include "akunu/engine/weight_windows.h"

namespace akunu::table_detail {

// `b` starting `bytes` further on: the output rows of a weight's row window.
inline Binding offset_by(Binding b, size_t bytes) {
    b.offset += bytes;
    if (b.range) b.range -= bytes;
    return b;
}

// The input of a projection: a buffer (f32, or halves for a chunk's GEMMs where they take
// them), and what the GEMVs that read it fold into x.
struct ProjectionInput {
    Binding x;
    std::optional<kernels::GemvInput> op;
    DType dtype = DType::kF32;
    const kernels::GemvInput* fold() const { return op ? &*op : nullptr; }
};

// One of several projections that read the same x: its y, rows ldy floats apart.
struct Projection {
    const char* label;
    const Weight* w;
    Binding y;
    size_t n, ldy;
};

inline const kernels::GemvHandoff* ptr(const std::optional<kernels::GemvHandoff>& h) { return h ? &*h : nullptr; }

class Builder {
public:
    Builder(const LoadedModel& m, const ScratchBuffers& s, const KvSource& kv, const DecodePlan& plan,
            const TablePass& pass);
    std::unique_ptr<DispatchTable> build();

private:
    // ---- the layer loop ----
    void attention(int l);
    void feed_forward(int l);
    ProjectionInput gate_up(int l, const ProjectionInput& in);
    ProjectionInput gemm_gated(int l, const ProjectionInput& in);
    void tap(int l);
    void split_stream(const Buffer& io, int l, bool in);
    void all_logits();
    void tail();
    void sample_rows();
    // ---- matrix products ----
    void own_gemm(const Binding& w, TensorType type, const Binding& x, const Binding& y, size_t n, size_t kk,
                  size_t ldy, bool accumulate, DType x_dtype, uint32_t below);
    void gemv(const Weight& w, const Binding& x, const Binding& y, size_t n, size_t kk, bool accumulate,
              const kernels::GemvInput* input, const kernels::GemvHandoff* handoff = nullptr,
              const kernels::GemvNormOut* norm_out = nullptr);
    const Buffer& dequantized(const Weight& w, size_t n, size_t kk);
    void f16_gemm_recorded();
    void matmul(const Weight& w, const Binding& x, const Binding& y, size_t n, size_t kk, size_t ldy, bool accumulate,
                const kernels::GemvInput* input = nullptr, DType x_dtype = DType::kF32,
                const kernels::GemvHandoff* handoff = nullptr, const kernels::GemvNormOut* norm_out = nullptr);
    bool project(int l, const char* fused_label, std::initializer_list<Projection> parts, const ProjectionInput& in,
                 bool fuse, const kernels::GemvRopeKv* rope = nullptr, const kernels::GemvHandoff* handoff = nullptr);
    void into_residual(const Weight& w, const ProjectionInput& in, size_t kk, const Weight* post_norm,
                       const kernels::GemvHandoff* handoff = nullptr,
                       const std::optional<kernels::GemvNormOut>& norm_out = std::nullopt);
    // ---- norms ----
    ProjectionInput pre_norm(const Weight& w, const Buffer& x, const Buffer& normed, size_t n_rows, bool read_by_gemv,
                             bool folds);
    ProjectionInput normed_input(const Weight& w, const Buffer& x, const Buffer& normed, size_t n_rows,
                                 bool read_by_gemv, bool folds);
    std::optional<kernels::GemvNormOut> hand_norm_forward(const Weight& producer, const Weight& norm, bool on);
    ProjectionInput gated(bool folded);
    void head_norm(const Binding& x, const Weight& w, int heads);
    void final_softcap(const Buffer& logits, size_t n_rows);
    // ---- hand-offs ----
    std::optional<kernels::GemvHandoff> take_handoff(uint32_t signal = 0, uint32_t count = 0, uint32_t clear = 0);

    // Whether `w` is bound in more than one row window (weight_windows.h): such a matrix is
    // multiplied on its own, with nothing fused, handed off or handed forward.
    bool split(const Weight& w) const { return weight_binding_limit(t_.device().profile()) < w.buffer.size(); }
    void label(int l, const char* name) { t_.set_label("blk." + std::to_string(l) + "." + name); }
    const Buffer& buf(const std::string& name) const { return s_.get(prefill_ ? "batch_" + name : name); }
    const LayerWeights& layer(int l) const { return m_.weights.layers[size_t(l)]; }

    const LoadedModel& m_;
    const ModelConfig& c_;
    const ArchDescriptor& a_;
    const ScratchBuffers& s_;
    const KvSource& kv_;
    const DecodePlan& plan_;
    const TablePass& pass_;
    std::unique_ptr<DispatchTable> table_;
    DispatchTable& t_;
    const bool prefill_, gguf_;
    const size_t rows_, dim_, q_dim_, kv_dim_, ffn_, qkv_row_;
    const float norm_offset_;
    const Buffer &h0_, &h1_, &residual_, &qkv_, &attn_out_, &gate_, &up_, &act_;
    const Binding step_, q_, k_, v_;
    const Weight& head_;  // the LM head: output, or the tied embeddings
    const int first_, last_;  // the layers this table runs (LoadedModel::layers)
    // Prefill: the f16 buffers block-format weights are dequantized into, in turn. Each
    // dequantization goes into the next one and is placed in the table right after the f16
    // GEMM before its projection, or before its group (Q, K and V after the layer before's
    // down; gate and up after O; DispatchTable::insert_at): its buffer was last read four
    // projections back, behind a barrier by then, so it depends on nothing recorded since and
    // runs beside that GEMM (memory-bound beside compute-bound), and no GEMM of a group waits
    // for its own weights.
    const Buffer* weights_f16_[kPrefillF16Weights] = {};
    int turn_ = 0;  // which f16 buffer the next dequantization writes
    std::optional<size_t> dequant_at_;  // where in the table: right after the last f16 GEMM
    bool in_group_ = false;  // a group's GEMMs are being recorded (the place stays)
    std::optional<ProjectionInput> ready_;  // the next pre-norm, handed forward
    Binding handoff_counters_;  // "gemv_handoff" where any slot is in use
    kernels::GemvHandoff next_handoff_;  // what the coming GEMV waits for (wait 0: nothing)
};

}  // namespace akunu::table_detail
