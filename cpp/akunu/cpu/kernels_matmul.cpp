// CPU GEMV (decode) and GEMM (prefill) for every weight type, with gemv.comp's and gemm.comp's
// semantics: fp32 accumulation, the optional fused RMSNorm on the GEMV input, accumulate into
// Y, and GEMM rows past step.n_tokens neither computed nor written.
//
// Weights stay in ggml's row layouts. The row dot products come from row_dot.h, which picks
// the AVX2/FMA/F16C versions at run time when the processor has them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "akunu/cpu/cpu_kernel.h"
#include "akunu/cpu/row_dot.h"
#include "akunu/cpu/weight_rows.h"
#include "params.h"

namespace akunu::cpu {

namespace {

// x as the products read it: through the norm weight when one is fused (its 1/rms scale is
// applied to the finished sums, as gemv.comp does). Per thread, sized once.
const float* gemv_input(const CpuArgs& a, float* inv_rms) {
    const auto& p = a.p<GemvParams>();
    const float* x = a.at<const float>(1);
    *inv_rms = 1.0f;
    if (!p.norm) return x;
    thread_local std::vector<float> xw;
    if (xw.size() < p.k) xw.resize(p.k);
    const float* g = a.at<const float>(3);
    float ss = 0.0f;
    for (size_t i = 0; i < p.k; ++i) {
        xw[i] = x[i] * (g[i] + p.weight_offset);
        ss += x[i] * x[i];
    }
    *inv_rms = 1.0f / std::sqrt(ss / float(p.k) + p.eps);
    return xw.data();
}

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

constexpr size_t kTile = 64;   // gemm.comp BM = BN (the launcher's workgroup geometry)
constexpr size_t kChunk = 256; // k elements dequantized at a time: a multiple of every block

// Workgroup (x, y) computes Y[64 y : +64, 64 x : +64]. Per chunk of k, the weight tile is
// dequantized once into k-major order (wt[kk][j], the tile-major layout) for gemm_tile().
void gemm(const CpuArgs& a, size_t begin, size_t end) {
    const auto& p = a.p<GemmParams>();
    const auto& step = *a.at<const StepState>(3);
    const size_t m_end = std::min(p.m, step.n_tokens);
    const WeightType& w = weight_type(a.variant);
    const GemmTileFn tile = gemm_tile();
    const float* X = a.at<const float>(1);
    float* Y = a.at<float>(2);
    alignas(32) float row[kChunk];
    alignas(32) float wt[kChunk][kTile];
    alignas(32) float acc[kTile][kTile];
    for (size_t g = begin; g < end; ++g) {
        const size_t n0 = (g % a.groups[0]) * kTile, m0 = (g / a.groups[0]) * kTile;
        if (m0 >= m_end) continue;
        const size_t nt = std::min<size_t>(kTile, p.n - n0), mt = std::min(kTile, m_end - m0);
        std::fill(&acc[0][0], &acc[0][0] + kTile * kTile, 0.0f);
        for (size_t k0 = 0; k0 < p.k; k0 += kChunk) {
            const size_t kc = std::min<size_t>(kChunk, p.k - k0);
            for (size_t j = 0; j < kTile; ++j) {
                if (j < nt) dequant_range(w, w.row(a.b[0], n0 + j, p.k), k0, k0 + kc, row);
                for (size_t kk = 0; kk < kc; ++kk) wt[kk][j] = j < nt ? row[kk] : 0.0f;
            }
            tile(&wt[0][0], nt, X + m0 * p.ldx + k0, p.ldx, mt, kc, &acc[0][0]);
        }
        for (size_t i = 0; i < mt; ++i) {
            float* y = Y + (m0 + i) * p.ldy + n0;
            for (size_t j = 0; j < nt; ++j) y[j] = p.accumulate ? y[j] + acc[i][j] : acc[i][j];
        }
    }
}

}  // namespace

void register_matmul(void (*add_row)(const KernelRow&)) {
    for (const WeightType& w : weight_types()) {
        add_row({w.gemv_kernel, {gemv, uint32_t(w.type), 4}});
        add_row({w.gemm_kernel, {gemm, uint32_t(w.type), 1}});
    }
}

}  // namespace akunu::cpu
