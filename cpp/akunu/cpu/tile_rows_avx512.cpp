// The short GEMM on a float tile (tile_dot.h tile_rows) with AVX-512: built with -mavx512f
// and called only when cpuid reports AVX-512F (cpu_profile.h use_avx512).
//
// A tile column (32 rows) is two zmm registers: converted once, they feed the FMAs of up to 8
// rows of x (16 accumulators, x entering as broadcast memory operands). Blocks of 4 rows or
// fewer keep two sets of accumulators (even and odd columns), so that at least 8 FMA chains
// are in flight.
#include <immintrin.h>

#include <algorithm>

#include "akunu/cpu/tile_dot.h"
#include "akunu/formats/tiles.h"

namespace akunu::cpu {

namespace {

// Sixteen elements of a float tile's column, as floats.
template <TensorType T>
__m512 load16(const uint8_t* p) {
    if constexpr (T == TensorType::F32_T32) {
        return _mm512_loadu_ps(p);
    } else if constexpr (T == TensorType::F16_T32) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
}

template <TensorType T, int M>
void rows_block(const uint8_t* tile, const float* x, size_t ldx, size_t k, float* out) {
    constexpr size_t e = T == TensorType::F32_T32 ? 4 : 2, column = kTileRows * e;
    constexpr int P = M <= 4 ? 2 : 1;  // accumulator sets, by column parity
    __m512 acc[P][M][2];
    for (int p = 0; p < P; ++p)
        for (int i = 0; i < M; ++i) acc[p][i][0] = acc[p][i][1] = _mm512_setzero_ps();
    auto column_step = [&](size_t kk, int p) {
        const uint8_t* c = tile + kk * column;
        const __m512 w0 = load16<T>(c), w1 = load16<T>(c + 16 * e);
        for (int i = 0; i < M; ++i) {
            const __m512 xv = _mm512_set1_ps(x[i * ldx + kk]);
            acc[p][i][0] = _mm512_fmadd_ps(w0, xv, acc[p][i][0]);
            acc[p][i][1] = _mm512_fmadd_ps(w1, xv, acc[p][i][1]);
        }
    };
    size_t kk = 0;
    for (; kk + P <= k; kk += P)
        for (int p = 0; p < P; ++p) column_step(kk + p, p);
    for (; kk < k; ++kk) column_step(kk, 0);
    for (int i = 0; i < M; ++i)
        for (int h = 0; h < 2; ++h) {
            __m512 s = acc[0][i][h];
            if constexpr (P == 2) s = _mm512_add_ps(s, acc[P - 1][i][h]);
            _mm512_storeu_ps(out + i * kTileRows + 16 * h, s);
        }
}

template <TensorType T>
void rows_float(const uint8_t* tile, const float* x, size_t ldx, size_t m, size_t k, float* out) {
    using Block = void (*)(const uint8_t*, const float*, size_t, size_t, float*);
    static constexpr Block blocks[9] = {nullptr,          rows_block<T, 1>, rows_block<T, 2>,
                                        rows_block<T, 3>, rows_block<T, 4>, rows_block<T, 5>,
                                        rows_block<T, 6>, rows_block<T, 7>, rows_block<T, 8>};
    for (size_t i0 = 0; i0 < m; i0 += 8)
        blocks[std::min<size_t>(8, m - i0)](tile, x + i0 * ldx, ldx, k, out + i0 * kTileRows);
}

}  // namespace

TileRowsFn tile_rows_avx512(TensorType tiled) {
    switch (tiled) {
        case TensorType::F32_T32: return rows_float<TensorType::F32_T32>;
        case TensorType::F16_T32: return rows_float<TensorType::F16_T32>;
        case TensorType::BF16_T32: return rows_float<TensorType::BF16_T32>;
        default: return nullptr;
    }
}

}  // namespace akunu::cpu
