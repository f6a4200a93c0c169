// AVX2/FMA/F16C tile products (tile_dot.h). Built with those instruction sets (CMakeLists.txt)
// and called only when cpuid reports them.
//
// Float tiles: one broadcast of x[i] feeds 32 rows (four 8-lane FMAs on one 64-byte column).
// Integer tiles: 32 bytes hold 4 codes of each of 8 rows, so maddubs/madd leave one row's
// partial sum per 32-bit lane; four registers cover the tile, with no horizontal sums.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "akunu/cpu/fifth_bits_avx2.h"
#include "akunu/cpu/kquant_gemv.h"
#include "akunu/cpu/tile_prefetch.h"
#include "akunu/cpu/tile_dot.h"
#include "akunu/formats/tiles.h"

namespace akunu::cpu {

namespace {

// Eight elements of a float tile, as floats.
template <TensorType T>
__m256 load8(const uint8_t* p) {
    if constexpr (T == TensorType::F32_T32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (T == TensorType::F16_T32) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
}

template <TensorType T>
void gemv_float(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    constexpr size_t e = T == TensorType::F32_T32 ? 4 : 2, column = kTileRows * e;
    // Two sets of accumulators (even and odd columns) keep eight FMA chains in flight.
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m256 b[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    size_t i = 0;
    for (; i + 2 <= k; i += 2) {
        const uint8_t* c = tile + i * column;
        const __m256 x0 = _mm256_broadcast_ss(x.f + i), x1 = _mm256_broadcast_ss(x.f + i + 1);
        for (int g = 0; g < 4; ++g) a[g] = _mm256_fmadd_ps(load8<T>(c + g * 8 * e), x0, a[g]);
        for (int g = 0; g < 4; ++g) b[g] = _mm256_fmadd_ps(load8<T>(c + column + g * 8 * e), x1, b[g]);
    }
    if (i < k) {
        const __m256 x0 = _mm256_broadcast_ss(x.f + i);
        for (int g = 0; g < 4; ++g) a[g] = _mm256_fmadd_ps(load8<T>(tile + i * column + g * 8 * e), x0, a[g]);
    }
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + 8 * g, _mm256_add_ps(a[g], b[g]));
}

__m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Four bytes of x repeated in every 32-bit lane.
__m256i x4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// Eight f16 scales (rows 8g..8g+7 of a header field) as floats.
__m256 scales8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

template <TensorType T>
void gemv_int8(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    constexpr bool q8 = T == TensorType::Q8_0_T32, q4_1 = T == TensorType::Q4_1_T32;
    constexpr size_t bb = q8 ? 34 : q4_1 ? 20 : 18, header = q4_1 ? 128 : 64;
    const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < k / 32; ++b) {
        const uint8_t* column = tile + b * kTileRows * bb;
        const uint8_t* codes = column + header;
        const int8_t* xq = x.q + b * 32;
        __m256i xb[8];
        for (int c = 0; c < 8; ++c) xb[c] = x4(xq + c * 4);
        const __m256 dx = _mm256_set1_ps(x.d[b]);
        for (int g = 0; g < 4; ++g) {
            __m256i s;
            if constexpr (q8) {
                // maddubs takes unsigned weights: |w| times x with w's sign (no int16 overflow).
                s = _mm256_setzero_si256();
                for (int c = 0; c < 8; ++c) {
                    const __m256i w = load32(codes + (c * kTileRows + g * 8) * 4);
                    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xb[c], w));
                    s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
                }
            } else {
                // Nibbles 0..15 times |x| <= 127: eight products per int16 lane stay below 2^15.
                __m256i p = _mm256_setzero_si256();
                for (int j = 0; j < 4; ++j) {
                    const __m256i v = load32(codes + (j * kTileRows + g * 8) * 4);
                    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(v, low4), xb[j]));
                    p = _mm256_add_epi16(
                        p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), xb[4 + j]));
                }
                s = _mm256_madd_epi16(p, ones);
                if constexpr (!q4_1) s = _mm256_sub_epi32(s, _mm256_set1_epi32(8 * x.sum[b]));
            }
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(scales8(column + g * 16), dx), acc[g]);
            if constexpr (q4_1)
                acc[g] =
                    _mm256_fmadd_ps(scales8(column + 64 + g * 16), _mm256_set1_ps(x.d[b] * float(x.sum[b])), acc[g]);
        }
    }
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

// x in 16 bits (tile_dot.h quantize_x16): per 4-byte chunk, the codes become int16 pairs
// (2i, 2i + 2) and (2i + 1, 2i + 3) within each row's 32-bit lane (no lane crossing), and one
// madd against the matching pair of x words sums two products per row. Block sums stay exact
// in int32 (32 codes x 32767 x 31 < 2^31).
template <TensorType T>
void gemv_int16(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    using B = Block32<T>;
    const __m256i low4 = _mm256_set1_epi16(0x000F), nibbles = _mm256_set1_epi8(0x0F), even = _mm256_set1_epi16(0x00FF);
    const int32_t* words = reinterpret_cast<const int32_t*>(x.q16);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < k / 32; ++b) {
        const uint8_t* column = tile + b * kTileRows * B::bytes;
        if constexpr (!B::q8) prefetch_column(column + kPrefetchColumns * kTileRows * B::bytes, kTileRows * B::bytes);
        const uint8_t* codes = column + B::qs;
        const int32_t* xw = words + b * 16;  // word 2c: x(4c), x(4c + 2); word 2c + 1: x(4c + 1), x(4c + 3)
        __m256i s[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int c = 0; c < (B::q8 ? 8 : 4); ++c) {
            const __m256i xe = _mm256_set1_epi32(xw[2 * c]), xo = _mm256_set1_epi32(xw[2 * c + 1]);
            for (int g = 0; g < 4; ++g) {
                const __m256i v = load32(codes + (c * kTileRows + g * 8) * 4);
                __m256i p;
                if constexpr (B::q8) {  // signed bytes 0 and 2, then 1 and 3, sign-extended to 16 bits
                    p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8), xe),
                                         _mm256_madd_epi16(_mm256_srai_epi16(v, 8), xo));
                } else {  // the high nibbles are elements 16 + 4c + e: words 2 (4 + c) and 2 (4 + c) + 1
                    const __m256i he = _mm256_set1_epi32(xw[2 * (4 + c)]), ho = _mm256_set1_epi32(xw[2 * (4 + c) + 1]);
                    if constexpr (B::fifth) {  // 5-bit codes as bytes, then bytes 0 and 2, 1 and 3
                        const __m256i m = _mm256_srli_epi32(load32(column + B::header + g * 32), 4 * c);
                        const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, nibbles), fifth_bits(m, 0));
                        const __m256i hi =
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), nibbles), fifth_bits(m, 2));
                        p = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(_mm256_and_si256(lo, even), xe),
                                                              _mm256_madd_epi16(_mm256_srli_epi16(lo, 8), xo)),
                                             _mm256_add_epi32(_mm256_madd_epi16(_mm256_and_si256(hi, even), he),
                                                              _mm256_madd_epi16(_mm256_srli_epi16(hi, 8), ho)));
                    } else {
                        const __m256i lo =
                            _mm256_add_epi32(_mm256_madd_epi16(_mm256_and_si256(v, low4), xe),
                                             _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 8), low4), xo));
                        const __m256i hi =
                            _mm256_add_epi32(_mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), he),
                                             _mm256_madd_epi16(_mm256_srli_epi16(v, 12), ho));
                        p = _mm256_add_epi32(lo, hi);
                    }
                }
                s[g] = _mm256_add_epi32(s[g], p);
            }
        }
        const __m256 dx = _mm256_set1_ps(x.d[b]);
        for (int g = 0; g < 4; ++g) {
            if constexpr (B::offset != 0) s[g] = _mm256_sub_epi32(s[g], _mm256_set1_epi32(B::offset * x.sum[b]));
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[g]), _mm256_mul_ps(scales8(column + g * 16), dx), acc[g]);
            if constexpr (B::minimum)
                acc[g] = _mm256_fmadd_ps(scales8(column + 64 + g * 16), _mm256_set1_ps(x.fsum[b]), acc[g]);
        }
    }
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

// k-quants with x in 16 bits (kquant_gemv.h): madds leave 8 partial sums per sub-block, and
// an hadd tree turns 8 sub-blocks' vectors into their 8 totals at once (exact in int32, as in
// the scalar loops).
__m256i madd16(const int16_t* q, const int16_t* x) {
    return _mm256_madd_epi16(load32(reinterpret_cast<const uint8_t*>(q)), load32(reinterpret_cast<const uint8_t*>(x)));
}

// sums[0:8] = the lane totals of v[0:8].
void totals8(const __m256i v[8], int32_t* sums) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sums),
                     _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sums + 4),
                     _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
}

template <TensorType Base>
void gemv_kquant16(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    constexpr size_t sub = kquant::kSub<Base>;
    kquant::kquant_gemv16<Base>(tile, x, k, out, [](const int16_t* q, const int16_t* xq, int32_t* sums) {
        for (size_t g = 0; g < 256 / sub / 8; ++g, q += 8 * sub, xq += 8 * sub, sums += 8) {
            __m256i v[8];
            for (size_t s = 0; s < 8; ++s) {
                v[s] = madd16(q + s * sub, xq + s * sub);
                if constexpr (sub == 32) v[s] = _mm256_add_epi32(v[s], madd16(q + s * sub + 16, xq + s * sub + 16));
            }
            totals8(v, sums);
        }
    });
}

// q8_0, q4_0, q4_1 in fp32 (tile_dot.cpp gemv_quant, same order): byte e of each 32-bit lane
// is code 4c + e of that lane's row; shifts move it down, a convert makes it a float. Each row
// group keeps two sums (q4: low and high nibbles; q8: bytes 0-1 and 2-3), so eight independent
// FMA chains are in flight rather than one.
template <TensorType T>
void gemv_quant(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    constexpr bool q8 = T == TensorType::Q8_0_T32, q4_1 = T == TensorType::Q4_1_T32;
    constexpr size_t bb = q8 ? 34 : q4_1 ? 20 : 18, header = q4_1 ? 128 : 64;
    const __m256i low4 = _mm256_set1_epi32(0x0F);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < k / 32; ++b) {
        const uint8_t* column = tile + b * kTileRows * bb;
        const uint8_t* codes = column + header;
        const float* xb = x.f + b * 32;
        __m256 sa[4], sb[4];
        for (int g = 0; g < 4; ++g) sa[g] = sb[g] = _mm256_setzero_ps();
        for (int c = 0; c < (q8 ? 8 : 4); ++c) {
            __m256i v[4];
            for (int g = 0; g < 4; ++g) v[g] = load32(codes + (c * kTileRows + g * 8) * 4);
            if constexpr (q8) {
                const __m256 x0 = _mm256_broadcast_ss(xb + c * 4), x1 = _mm256_broadcast_ss(xb + c * 4 + 1);
                const __m256 x2 = _mm256_broadcast_ss(xb + c * 4 + 2), x3 = _mm256_broadcast_ss(xb + c * 4 + 3);
                for (int g = 0; g < 4; ++g) {
                    sa[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v[g], 24), 24)), x0,
                                            sa[g]);
                    sb[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v[g], 8), 24)), x2,
                                            sb[g]);
                    sa[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(v[g], 16), 24)), x1,
                                            sa[g]);
                    sb[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(v[g], 24)), x3, sb[g]);
                }
            } else {
                for (int e = 0; e < 4; ++e) {
                    const __m256 xl = _mm256_broadcast_ss(xb + c * 4 + e),
                                 xh = _mm256_broadcast_ss(xb + 16 + c * 4 + e);
                    for (int g = 0; g < 4; ++g) {
                        const __m256i lo = _mm256_and_si256(_mm256_srli_epi32(v[g], 8 * e), low4);
                        const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(v[g], 8 * e + 4), low4);
                        sa[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), xl, sa[g]);
                        sb[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), xh, sb[g]);
                    }
                }
            }
        }
        for (int g = 0; g < 4; ++g) {
            __m256 s = _mm256_add_ps(sa[g], sb[g]);
            if constexpr (!q8 && !q4_1) s = _mm256_fmadd_ps(_mm256_set1_ps(-8.0f), _mm256_set1_ps(x.fsum[b]), s);
            acc[g] = _mm256_fmadd_ps(s, scales8(column + g * 16), acc[g]);
            if constexpr (q4_1)
                acc[g] = _mm256_fmadd_ps(scales8(column + 64 + g * 16), _mm256_set1_ps(x.fsum[b]), acc[g]);
        }
    }
    for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + 8 * g, acc[g]);
}

float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

void quantize(const float* x, size_t k, int8_t* q, float* d, int32_t* sum) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (size_t b = 0; b < k / 32; ++b, x += 32, q += 32) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int i = 0; i < 4; ++i) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
        }
        const float amax = hmax(m);
        d[b] = amax / 127.0f;
        const __m256 inv = _mm256_set1_ps(amax != 0.0f ? 1.0f / d[b] : 0.0f);
        __m256i n[4];
        for (int i = 0; i < 4; ++i) n[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));  // half to even
        // Pack to bytes; packs works within 128-bit halves, so restore the element order after.
        const __m256i w01 = _mm256_packs_epi32(n[0], n[1]), w23 = _mm256_packs_epi32(n[2], n[3]);
        const __m256i bytes =
            _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), bytes);
        const __m256i s = _mm256_add_epi32(_mm256_add_epi32(n[0], n[1]), _mm256_add_epi32(n[2], n[3]));
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
        sum[b] = _mm_cvtsi128_si32(t);
    }
}

}  // namespace

namespace {

// The short GEMM (tile_dot.h tile_rows) on blocks of M <= 3 rows: 4 M accumulators, M
// broadcasts and the converted weights fill the 16 registers; each column is converted once
// per block.
template <TensorType T, int M>
void rows_block(const uint8_t* tile, const float* x, size_t ldx, size_t k, float* out) {
    constexpr size_t e = T == TensorType::F32_T32 ? 4 : 2, column = kTileRows * e;
    __m256 acc[M][4];
    for (int i = 0; i < M; ++i)
        for (int g = 0; g < 4; ++g) acc[i][g] = _mm256_setzero_ps();
    for (size_t kk = 0; kk < k; ++kk) {
        const uint8_t* c = tile + kk * column;
        __m256 xv[M];
        for (int i = 0; i < M; ++i) xv[i] = _mm256_broadcast_ss(x + i * ldx + kk);
        for (int g = 0; g < 4; ++g) {
            const __m256 w = load8<T>(c + g * 8 * e);
            for (int i = 0; i < M; ++i) acc[i][g] = _mm256_fmadd_ps(w, xv[i], acc[i][g]);
        }
    }
    for (int i = 0; i < M; ++i)
        for (int g = 0; g < 4; ++g) _mm256_storeu_ps(out + i * kTileRows + 8 * g, acc[i][g]);
}

template <TensorType T>
void rows_float(const uint8_t* tile, const float* x, size_t ldx, size_t m, size_t k, float* out) {
    using Block = void (*)(const uint8_t*, const float*, size_t, size_t, float*);
    static constexpr Block blocks[4] = {nullptr, rows_block<T, 1>, rows_block<T, 2>, rows_block<T, 3>};
    for (size_t i0 = 0; i0 < m; i0 += 3)
        blocks[std::min<size_t>(3, m - i0)](tile, x + i0 * ldx, ldx, k, out + i0 * kTileRows);
}

}  // namespace

TileRowsFn tile_rows_avx2(TensorType tiled) {
    switch (tiled) {
        case TensorType::F32_T32: return rows_float<TensorType::F32_T32>;
        case TensorType::F16_T32: return rows_float<TensorType::F16_T32>;
        case TensorType::BF16_T32: return rows_float<TensorType::BF16_T32>;
        default: return nullptr;
    }
}

TileGemvFn tile_gemv_avx2(TensorType tiled, XForm form) {
    using T = TensorType;
    // The three block types, each with its fp32, 16-bit and 8-bit product.
    struct Forms {
        TileGemvFn f32, i16, i8;
    };
    auto forms = [&]() -> Forms {
        switch (tiled) {
            case T::Q8_0_T32: return {gemv_quant<T::Q8_0_T32>, gemv_int16<T::Q8_0_T32>, gemv_int8<T::Q8_0_T32>};
            case T::Q4_0_T32: return {gemv_quant<T::Q4_0_T32>, gemv_int16<T::Q4_0_T32>, gemv_int8<T::Q4_0_T32>};
            case T::Q4_1_T32: return {gemv_quant<T::Q4_1_T32>, gemv_int16<T::Q4_1_T32>, gemv_int8<T::Q4_1_T32>};
            case T::F32_T32: return {gemv_float<T::F32_T32>, nullptr, nullptr};
            case T::F16_T32: return {gemv_float<T::F16_T32>, nullptr, nullptr};
            case T::BF16_T32: return {gemv_float<T::BF16_T32>, nullptr, nullptr};
            case T::Q5_0_T32: return {nullptr, gemv_int16<T::Q5_0_T32>, nullptr};
            case T::Q5_1_T32: return {nullptr, gemv_int16<T::Q5_1_T32>, nullptr};
            case T::Q4_K_T32: return {nullptr, gemv_kquant16<T::Q4_K>, nullptr};
            case T::Q5_K_T32: return {nullptr, gemv_kquant16<T::Q5_K>, nullptr};
            case T::Q6_K_T32: return {nullptr, gemv_kquant16<T::Q6_K>, nullptr};
            default: return {nullptr, nullptr, nullptr};
        }
    }();
    return form == XForm::kInt8 ? forms.i8 : form == XForm::kInt16 ? forms.i16 : forms.f32;
}

QuantizeFn quantize_x_avx2() { return quantize; }

}  // namespace akunu::cpu
