// Pieces the CPU GEMV/GEMM kernels share, whatever the weight layout (row-major files or tiles).
#pragma once

#include <cstddef>

#include "akunu/vulkan/cpu_kernel.h"

namespace akunu::cpu {

constexpr size_t kGemmTile = 64;  // gemm.comp BM = BN (the launcher's workgroup geometry)
constexpr size_t kGemmChunk = 256;  // k elements dequantized at a time: a multiple of every block

// A GEMV's x as the products read it (GemvParams.x_op): through the norm weight when a norm is
// fused (its 1/rms scale, returned in *inv_rms, is applied to the finished sums, as gemv.comp
// does), or the gated activation act(x) * up. The formed copy lives in a per-thread buffer,
// sized once.
const float* gemv_input(const CpuArgs& a, float* inv_rms);

// Y[i][j] (=|+=) acc[i][j] for i < m, j < n; acc rows are acc_stride apart, Y rows ldy.
void store_tile(const float* acc, size_t acc_stride, size_t m, size_t n, bool accumulate, float* y, size_t ldy);

// The CPU GEMM (gemm.comp's semantics): workgroup (x, y) computes Y[64 y : +64, 64 x : +64]
// for rows below step.n_tokens (the items of [begin, end) are numbered column-major, so that
// neighbouring items share weights). Per chunk of k, `fill` writes the weight tile of rows
// [n0, n0 + nt), elements [k0, k0 + kc), k-major as floats (wt[kk][j], zero for j >= nt), once
// for all the token rows of a run; gemm_tile() multiplies it in.
// The runs of a GEMM's items [begin, end), numbered column-major (item g: columns
// 64 (g / row_blocks), rows 64 (g % row_blocks)): f(n0, nt, m0, m1) for each run of row blocks
// under one column block, its columns [n0, n0 + nt) of n and rows [m0, m1) below m_end, in
// order; runs with no rows are skipped.
template <class F>
void for_each_gemm_run(size_t begin, size_t end, size_t row_blocks, size_t n, size_t m_end, F f) {
    for (size_t g = begin; g < end;) {
        const size_t nb = g / row_blocks, run_end = end < (nb + 1) * row_blocks ? end : (nb + 1) * row_blocks;
        const size_t n0 = nb * kGemmTile, m0 = (g % row_blocks) * kGemmTile;
        const size_t m1 =
            (run_end - nb * row_blocks) * kGemmTile < m_end ? (run_end - nb * row_blocks) * kGemmTile : m_end;
        g = run_end;
        if (m0 < m1) f(n0, n - n0 < kGemmTile ? n - n0 : kGemmTile, m0, m1);
    }
}

// The same for items numbered row-major (item g: rows 64 (g / col_blocks), columns
// 64 (g % col_blocks)): the items of [begin, end) under column block c are one run of row blocks,
// f(n0, nt, m0, m1) for each column block in order.
template <class F>
void for_each_gemm_run_rows_first(size_t begin, size_t end, size_t col_blocks, size_t n, size_t m_end, F f) {
    for (size_t c = 0; c < col_blocks && c < end; ++c) {
        const size_t r0 = begin <= c ? 0 : (begin - c + col_blocks - 1) / col_blocks,
                     r1 = (end - 1 - c) / col_blocks + 1;
        const size_t m0 = r0 * kGemmTile, m1 = r1 * kGemmTile < m_end ? r1 * kGemmTile : m_end, n0 = c * kGemmTile;
        if (m0 < m1) f(n0, n - n0 < kGemmTile ? n - n0 : kGemmTile, m0, m1);
    }
}

using GemmFillFn = void (*)(const CpuArgs& a, size_t n0, size_t nt, size_t k0, size_t kc, float (*wt)[kGemmTile]);
void gemm_workgroups(const CpuArgs& a, size_t begin, size_t end, GemmFillFn fill);

}  // namespace akunu::cpu
