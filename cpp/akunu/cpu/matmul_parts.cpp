// Shared GEMV/GEMM pieces (matmul_parts.h).
#include "akunu/cpu/matmul_parts.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "akunu/cpu/row_dot.h"
#include "akunu/cpu/vec_math.h"
#include "params.h"

namespace akunu::cpu {

const float* gemv_input(const CpuArgs& a, float* inv_rms) {
    const auto& p = a.p<GemvParams>();
    const float* x = a.at<const float>(1);
    *inv_rms = 1.0f;
    if (p.x_op == AKUNU_GEMV_X) return x;
    thread_local std::vector<float> xw;
    if (xw.size() < p.k) xw.resize(p.k);
    const float* g = a.at<const float>(3);
    if (p.x_op != AKUNU_GEMV_RMSNORM) {  // the gated activation, as act_silu / act_gelu_tanh form it
        const VecMath& vm = vec_math();
        (p.x_op == AKUNU_GEMV_SILU_GATE ? vm.silu_mul : vm.gelu_tanh_mul)(x, g, xw.data(), p.k);
        return xw.data();
    }
    float ss = 0.0f;
    for (size_t i = 0; i < p.k; ++i) {
        xw[i] = x[i] * (g[i] + p.weight_offset);
        ss += x[i] * x[i];
    }
    *inv_rms = 1.0f / std::sqrt(ss / float(p.k) + p.eps);
    return xw.data();
}

void store_tile(const float* acc, size_t acc_stride, size_t m, size_t n, bool accumulate, float* y, size_t ldy) {
    for (size_t i = 0; i < m; ++i, y += ldy, acc += acc_stride)
        for (size_t j = 0; j < n; ++j) y[j] = accumulate ? y[j] + acc[j] : acc[j];
}

void gemm_workgroups(const CpuArgs& a, size_t begin, size_t end, GemmFillFn fill) {
    const auto& p = a.p<GemmParams>();
    const auto& step = *a.at<const StepState>(3);
    if (!AKUNU_ROWS_IN_WINDOW(step.n_tokens, p.min_rows, p.max_rows)) return;
    const size_t m_end = std::min(p.m, step.n_tokens);
    const GemmTileFn tile = gemm_tile();
    const float* X = a.at<const float>(1);
    float* Y = a.at<float>(2);
    alignas(64) float wt[kGemmChunk][kGemmTile];  // 64: the AVX-512 block loads whole cache lines
    // Items run column block by column block (item g: columns 64 (g / row_blocks), rows
    // 64 (g % row_blocks)), so a thread's range holds runs of row blocks under one column block.
    // Each run dequantizes each weight panel once for all its rows: with per-item panels, a
    // 128-token chunk paid for every dequantization twice.
    const size_t row_blocks = a.groups[1];
    thread_local std::vector<float> acc;
    for_each_gemm_run(begin, end, row_blocks, p.n, m_end, [&](size_t n0, size_t nt, size_t m0, size_t m1) {
        const size_t mt = m1 - m0;
        if (acc.size() < mt * kGemmTile) acc.resize(mt * kGemmTile);  // once: the largest chunk
        std::fill(acc.begin(), acc.begin() + mt * kGemmTile, 0.0f);
        for (size_t k0 = 0; k0 < p.k; k0 += kGemmChunk) {
            const size_t kc = std::min<size_t>(kGemmChunk, p.k - k0);
            fill(a, n0, nt, k0, kc, wt);
            tile(&wt[0][0], nt, X + m0 * p.ldx + k0, p.ldx, mt, kc, acc.data());
        }
        store_tile(acc.data(), kGemmTile, mt, nt, p.accumulate, Y + m0 * p.ldy + n0, p.ldy);
    });
}

}  // namespace akunu::cpu
