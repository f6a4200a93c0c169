// CPU GEMV (decode) and GEMM (prefill) for every weight type, with gemv.comp's and gemm.comp's
// semantics: fp32 accumulation, the optional fused RMSNorm on the GEMV input, accumulate into
// Y, and GEMM rows past step.n_tokens neither computed nor written.
//
// Weights stay in ggml's row layouts. The row dot products come from row_dot.h, which picks
// the AVX2/FMA/F16C versions at run time when the processor has them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "akunu/vulkan/cpu_kernel.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/cpu/row_dot.h"
#include "akunu/cpu/weight_rows.h"
#include "params.h"

namespace akunu::cpu {

namespace {

// Workgroups of spec[1] rows (gemv.comp ROWS).
void gemv(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<GemvParams>();
    const size_t rows_per_group = a.spec[1] ? a.spec[1] : 4;
    const size_t r0 = begin * rows_per_group, r1 = std::min<size_t>(end * rows_per_group, p.rows);
    if (r0 >= r1) return;
    const WeightType& w = weight_type(a.variant);
    const RowDotFn dot = row_dot(w.type);
    float inv_rms;
    const float* x = gemv_input(a, &inv_rms);
    float* y = a.at<float>(2);
    const uint8_t* W = a.b[0];
    for (size_t r = r0; r < r1; ++r) {
        const float v = dot(w.row(W, r, p.k), x, p.k) * inv_rms;
        y[r] = p.accumulate ? y[r] + v : v;
    }
}

// Rows [n0, n0 + nt) of W, elements [k0, k0 + kc), into wt[kk][j] (zero past nt).
void fill_rows(const CpuArgs& a, size_t n0, size_t nt, size_t k0, size_t kc, float (*wt)[kGemmTile]) {
    const auto& p = a.p<GemmParams>();
    const WeightType& w = weight_type(a.variant);
    alignas(32) float row[kGemmChunk];
    for (size_t j = 0; j < kGemmTile; ++j) {
        if (j < nt) dequant_range(w, w.row(a.b[0], n0 + j, p.k), k0, k0 + kc, row);
        for (size_t kk = 0; kk < kc; ++kk) wt[kk][j] = j < nt ? row[kk] : 0.0f;
    }
}

void gemm(const CpuArgs& a, size_t begin, size_t end) { gemm_workgroups(a, begin, end, fill_rows); }

}  // namespace

void register_matmul(void (*add_row)(const KernelRow&)) {
    for (const WeightType& w : weight_types()) {
        add_row({w.gemv_kernel, {gemv, uint32_t(w.type), 4}});
        add_row({w.gemm_kernel, {gemm, uint32_t(w.type), 1}});
    }
}

}  // namespace akunu::cpu
