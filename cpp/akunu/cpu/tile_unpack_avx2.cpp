// AVX2/F16C tile unpacking (tile_unpack.h); built with -mavx2 -mfma -mf16c and called only
// after cpuid says so (cpu_profile.h). Same values as the scalar version: q4_0's d * (q - 8) is
// formed as fma(q, d, -8 d), which rounds the same exact value once.
#include <immintrin.h>

#include "akunu/cpu/fifth_bits_avx2.h"
#include "akunu/cpu/tile_dot.h"
#include "akunu/cpu/tile_unpack.h"
#include "akunu/formats/tiles.h"

namespace akunu::cpu {

namespace {

// f16 tiles are [K][32] halves: each element column is one contiguous row of the panel.
void unpack_f16(TensorType, const uint8_t* tile, size_t b0, size_t nb, float (*wt)[kGemmTile], size_t c0) {
    const __m128i* src = reinterpret_cast<const __m128i*>(tile + b0 * kTileRows * 2);
    for (size_t b = 0; b < nb; ++b, src += 4)
        for (int i = 0; i < 4; ++i) _mm256_storeu_ps(wt[b] + c0 + 8 * i, _mm256_cvtph_ps(_mm_loadu_si128(src + i)));
}

// One 4-byte chunk of 8 rows ([r0: 4 bytes][r1: 4 bytes]...) regrouped by byte: the result's
// 64-bit lane e holds byte e of rows 0..7, in row order.
__m256i rows_by_byte(__m256i v) {
    const __m256i by_byte = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,  //
                                             0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, by_byte), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Lane e of rows_by_byte's result as 8 floats (signed or unsigned bytes).
template <bool Signed>
__m256 lane(__m256i v, int e) {
    const __m128i half = e < 2 ? _mm256_castsi256_si128(v) : _mm256_extracti128_si256(v, 1);
    const __m128i bytes = e % 2 ? _mm_srli_si128(half, 8) : half;
    return _mm256_cvtepi32_ps(Signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes));
}

__m256 halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// The 32-element block tiles (tile_dot.h Block32): a block column holds the rows' f16 scales
// (and minimums), q5's fifth bits, then chunks of 4 codes per row (tiles.h). Each pass handles
// 8 rows.
template <TensorType T>
void unpack_blocks(TensorType, const uint8_t* tile, size_t b0, size_t nb, float (*wt)[kGemmTile], size_t c0) {
    using B = Block32<T>;
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    for (size_t b = 0; b < nb; ++b) {
        const uint8_t* column = tile + (b0 + b) * kTileRows * B::bytes;
        const uint8_t* codes = column + B::qs;
        float (*w)[kGemmTile] = wt + b * 32;
        for (size_t r0 = 0; r0 < kTileRows; r0 += 8) {
            const __m256 d = halves(column + 2 * r0);
            float* out = &w[0][c0 + r0];
            if constexpr (B::q8) {
                for (size_t c = 0; c < 8; ++c) {
                    const __m256i v = rows_by_byte(
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (c * kTileRows + r0) * 4)));
                    for (int e = 0; e < 4; ++e)
                        _mm256_storeu_ps(out + (c * 4 + e) * kGemmTile, _mm256_mul_ps(d, lane<true>(v, e)));
                }
            } else {
                // d q + m with m = -offset d (exact) or the stored minimum.
                const __m256 m =
                    B::minimum ? halves(column + 64 + 2 * r0) : _mm256_mul_ps(d, _mm256_set1_ps(-float(B::offset)));
                const __m256i qh =
                    B::fifth ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + B::header + 4 * r0))
                             : _mm256_setzero_si256();
                for (size_t j = 0; j < 4; ++j) {
                    const __m256i v =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + (j * kTileRows + r0) * 4));
                    __m256i lo = _mm256_and_si256(v, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
                    if constexpr (B::fifth) {
                        const __m256i mq = _mm256_srli_epi32(qh, int(4 * j));
                        lo = _mm256_or_si256(lo, fifth_bits(mq, 0));
                        hi = _mm256_or_si256(hi, fifth_bits(mq, 2));
                    }
                    lo = rows_by_byte(lo), hi = rows_by_byte(hi);
                    for (int e = 0; e < 4; ++e) {
                        _mm256_storeu_ps(out + (j * 4 + e) * kGemmTile, _mm256_fmadd_ps(lane<false>(lo, e), d, m));
                        _mm256_storeu_ps(out + (16 + j * 4 + e) * kGemmTile, _mm256_fmadd_ps(lane<false>(hi, e), d, m));
                    }
                }
            }
        }
    }
}

}  // namespace

TileUnpackFn tile_unpack_avx2(TensorType tiled) {
    switch (tiled) {
        case TensorType::F16_T32: return unpack_f16;
        case TensorType::Q8_0_T32: return unpack_blocks<TensorType::Q8_0_T32>;
        case TensorType::Q4_0_T32: return unpack_blocks<TensorType::Q4_0_T32>;
        case TensorType::Q4_1_T32: return unpack_blocks<TensorType::Q4_1_T32>;
        case TensorType::Q5_0_T32: return unpack_blocks<TensorType::Q5_0_T32>;
        case TensorType::Q5_1_T32: return unpack_blocks<TensorType::Q5_1_T32>;
        default: return nullptr;
    }
}

}  // namespace akunu::cpu
