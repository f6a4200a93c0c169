// The GEMM's inner product (row_dot.h GemmTileFn) with AVX-512: built with -mavx512f alone and
// called only when cpuid reports AVX-512F (cpu_profile.h use_avx512).
//
// Register block: 6 X rows x the tile's 64 columns = 24 accumulators + 4 weight vectors of the
// 32 zmm registers; X values enter as broadcast memory operands of the FMAs, so per k, 4 loads
// feed 24 FMAs (the AVX2 block needs 8 loads for 12). On processors that split a 512-bit FMA
// into two 256-bit halves (Zen 4) the FLOP rate equals AVX2's, but half the instructions and
// loads leave the FMA units as the only limit.
#include <immintrin.h>

#include <algorithm>

#include "akunu/cpu/row_dot.h"

namespace akunu::cpu {

namespace {

template <int M>
void gemm_block(const float* wt, const float* x, size_t ldx, size_t k, float* acc) {
    __m512 c[M][4];
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) c[i][j] = _mm512_loadu_ps(acc + i * 64 + 16 * j);
    for (size_t kk = 0; kk < k; ++kk) {
        const float* w = wt + kk * 64;
        const __m512 w0 = _mm512_load_ps(w), w1 = _mm512_load_ps(w + 16), w2 = _mm512_load_ps(w + 32),
                     w3 = _mm512_load_ps(w + 48);
#pragma GCC unroll 6
        for (int i = 0; i < M; ++i) {
            const __m512 xv = _mm512_set1_ps(x[i * ldx + kk]);
            c[i][0] = _mm512_fmadd_ps(xv, w0, c[i][0]);
            c[i][1] = _mm512_fmadd_ps(xv, w1, c[i][1]);
            c[i][2] = _mm512_fmadd_ps(xv, w2, c[i][2]);
            c[i][3] = _mm512_fmadd_ps(xv, w3, c[i][3]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) _mm512_storeu_ps(acc + i * 64 + 16 * j, c[i][j]);
}

// Columns past n are zero in wt, so the block always spans all 64.
void gemm_tile(const float* wt, size_t, const float* x, size_t ldx, size_t m, size_t k, float* acc) {
    using Block = void (*)(const float*, const float*, size_t, size_t, float*);
    static constexpr Block blocks[7] = {nullptr,       gemm_block<1>, gemm_block<2>, gemm_block<3>,
                                        gemm_block<4>, gemm_block<5>, gemm_block<6>};
    for (size_t i0 = 0; i0 < m; i0 += 6) blocks[std::min<size_t>(6, m - i0)](wt, x + i0 * ldx, ldx, k, acc + i0 * 64);
}

}  // namespace

GemmTileFn gemm_tile_avx512() { return gemm_tile; }

}  // namespace akunu::cpu
