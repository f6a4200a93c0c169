// What the prefill GEMMs on tiles with narrow products share (gemm_vnni.cpp with x in 16 bits,
// gemm_vnni8.cpp with x in 8, gemm_bf16.cpp on float tiles in bf16): the loop over a call's items that rounds x once, unpacks each panel of 256 k once per run for all its rows and adds
// the panel's products into the run's rows. Included only by files built with AVX-512; its
// templates are instantiated with each file's own (internal) types.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "akunu/cpu/matmul_parts.h"
#include "akunu/formats/tiles.h"
#include "params.h"

namespace akunu::cpu {

// The unpacker of each quantized tile type, or null for other types: U::block32<tiled> for the
// 32-element block tiles, U::kquant<base> for the k-quant ones (U holds a file's unpackers as
// variable templates of function pointers).
template <class U>
auto int_unpack_for(TensorType tiled) -> decltype(U::template block32<TensorType::Q8_0_T32>) {
    using T = TensorType;
    switch (tiled) {
        case T::Q8_0_T32: return U::template block32<T::Q8_0_T32>;
        case T::Q4_0_T32: return U::template block32<T::Q4_0_T32>;
        case T::Q4_1_T32: return U::template block32<T::Q4_1_T32>;
        case T::Q5_0_T32: return U::template block32<T::Q5_0_T32>;
        case T::Q5_1_T32: return U::template block32<T::Q5_1_T32>;
        case T::Q4_K_T32: return U::template kquant<T::Q4_K>;
        case T::Q5_K_T32: return U::template kquant<T::Q5_K>;
        case T::Q6_K_T32: return U::template kquant<T::Q6_K>;
        default: return nullptr;
    }
}

// Panel columns [c0, c0 + 32) past the last tile: zero codes (each panel row w.q[p] holds one
// entry per column), and zero scales and minimums for `subs` sub-blocks.
template <class Panel>
void zero_panel_columns(Panel& w, size_t c0, size_t subs) {
    for (auto& row : w.q) std::memset(&row[c0], 0, kTileRows * sizeof(row[0]));
    for (size_t s = 0; s < subs; ++s)
        for (size_t j = c0; j < c0 + kTileRows; ++j) w.scale[s][j] = w.minimum[s][j] = 0.0f;
}

// Items [begin, end) of a GEMM (gemm.comp's semantics, numbered as matmul_parts.h's
// for_each_gemm_run). The form F says how x and the weights meet:
//   F::Rows quantize(const CpuArgs&, m0, m1)   rows [m0, m1) of X rounded, row i being m0 + i
//   void unpack(tile, b0, nb, c0)              blocks [b0, b0 + nb) of a tile into panel columns c0..c0 + 31
//   void zero(c0, kc)                          panel columns c0..c0 + 31 past the last tile, kc elements
//   void product(rows, row, m, k0, kc, acc)    acc[m][64] += rows [row, row + m) times the panel
template <class F>
void int_gemm_items(const CpuArgs& a, size_t begin, size_t end, F& form) {
    const auto& p = a.p<GemmParams>();
    const auto& step = *a.at<const StepState>(3);
    if (!AKUNU_ROWS_IN_WINDOW(step.n_tokens, p.min_rows, p.max_rows) || begin >= end) return;
    const size_t m_end = std::min(p.m, step.n_tokens);
    const TileLayout& l = *tile_layout(TensorType(a.variant));
    const size_t bs = type_traits(l.base).block_size, bytes = tile_bytes(l, p.k);
    const size_t tiles = (p.n + kTileRows - 1) / kTileRows;
    thread_local std::vector<float> acc;
    // X is rounded once per call, for the rows the call's items cover, and each run unpacks its
    // panels once: with more rows than columns (an audio window's GEMMs) the items go rows first,
    // so that a thread's share of the call rounds only its own rows (column-major, each share
    // spanning several column blocks would round every row of X); otherwise columns first, so
    // that a share unpacks only its own columns' weights.
    const size_t row_blocks = a.groups[1], col_blocks = a.groups[0];
    const bool rows_first = m_end > p.n;
    size_t x0 = 0, x1 = m_end;
    if (rows_first)
        x0 = begin / col_blocks * kGemmTile, x1 = std::min(((end - 1) / col_blocks + 1) * kGemmTile, m_end);
    else if (begin / row_blocks == (end - 1) / row_blocks)
        x0 = (begin % row_blocks) * kGemmTile, x1 = std::min(((end - 1) % row_blocks + 1) * kGemmTile, m_end);
    if (x0 >= x1) return;
    const auto x = form.quantize(a, x0, x1);
    auto runs = [&](auto f) {
        if (rows_first)
            for_each_gemm_run_rows_first(begin, end, col_blocks, p.n, m_end, f);
        else
            for_each_gemm_run(begin, end, row_blocks, p.n, m_end, f);
    };
    runs([&](size_t n0, size_t nt, size_t m0, size_t m1) {
        const size_t mt = m1 - m0;
        if (acc.size() < mt * kGemmTile) acc.resize(mt * kGemmTile);
        std::fill(acc.begin(), acc.begin() + mt * kGemmTile, 0.0f);
        for (size_t k0 = 0; k0 < p.k; k0 += kGemmChunk) {
            const size_t kc = std::min(kGemmChunk, p.k - k0);
            for (size_t c0 = 0; c0 < kGemmTile; c0 += kTileRows) {
                const size_t t = (n0 + c0) / kTileRows;
                if (t < tiles)
                    form.unpack(a.b[0] + t * bytes, k0 / bs, kc / bs, c0);
                else
                    form.zero(c0, kc);
            }
            form.product(x, m0 - x0, mt, k0, kc, acc.data());
        }
        store_tile(acc.data(), kGemmTile, mt, nt, p.accumulate, a.at<float>(2) + m0 * p.ldy + n0, p.ldy);
    });
}

}  // namespace akunu::cpu
