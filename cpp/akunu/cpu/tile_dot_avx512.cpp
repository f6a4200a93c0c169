// The CPU GEMV's 16-bit products with AVX-512 VNNI (tile_dot.h), 16 rows a vector.
//
// q8_0, q4_0, q4_1, q5_0 and q5_1: as the AVX2 products (tile_dot_avx2.cpp gemv_int16), 64 bytes at a time (4
// codes of 16 rows) and vpdpwssd in place of madd and add; the same int32 sums and the same
// float operations per row, so equal results.
//
// k-quants (kquant_gemv.h): each 32-bit word of 4 codes is gathered from 16 rows' super-blocks into one vector
// (kquant_quads_avx512.h), its bytes put in the order 0 2 1 3 so that the even and odd ones are
// the int16 pairs (c0, c1) and (c2, c3), and vpdpwssd adds their products with x's pairs
// (x0, x1) and (x2, x3) into each row's lane: the sums of every sub-block stay exact in int32
// and are scaled as the one-row product scales them, in the same float operations and order
// (results equal to the scalar and AVX2 tiers'). Decoding a super-block per row and summing
// its sub-blocks with horizontal adds took most of the one-row product's time
// (bench/NOTES.md, "CPU backend: k-quant GEMVs 16 rows at a time").
#include <immintrin.h>

#include <algorithm>

#include "akunu/cpu/kquant_quads_avx512.h"
#include "akunu/cpu/tile_dot.h"
#include "akunu/cpu/tile_prefetch.h"

namespace akunu::cpu {

namespace {

using kquant::kBlockBytes;
using kquant::kSub;

// Sixteen f16 header fields (rows 16g .. 16g + 15 of one field) as floats.
__m512 fields16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

__m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }

// fifth_bits_avx2.h's fifth_bits on 16 rows: m holds 16 rows' qh shifted down by 4c; byte e
// of each lane becomes 16 where bit e of the lane's byte `at` is set, else 0.
__m512i fifth_bits16(__m512i m, int at) {
    const __m512i spread = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
    const __m512i bytes = _mm512_shuffle_epi8(m, _mm512_add_epi8(spread, _mm512_set1_epi8(char(at))));
    return _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(bytes, _mm512_set1_epi32(0x08040201)), _mm512_set1_epi8(0x10));
}

// Chunk c (4 codes of each row) of 16 rows of a block column as int16 pairs: dec[d] holds the
// even or odd codes' pairs that meet x's word word_of(c, d) (q8_0 2 of them, the 4-bit types 4:
// low nibbles are elements 4c + e, high ones 16 + 4c + e).
template <TensorType T>
int decode_chunk(const uint8_t* column, int c, int g, __m512i* dec) {
    using B = Block32<T>;
    const __m512i v = load64(column + B::qs + (c * kTileRows + g * 16) * 4);
    if constexpr (B::q8) {  // signed bytes 0 and 2, then 1 and 3, sign-extended to 16 bits
        dec[0] = _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8);
        dec[1] = _mm512_srai_epi16(v, 8);
        return 2;
    } else if constexpr (B::fifth) {  // 5-bit codes as bytes, then bytes 0 and 2, 1 and 3
        const __m512i nibbles = _mm512_set1_epi8(0x0F), even = _mm512_set1_epi16(0x00FF);
        const __m512i m = _mm512_srli_epi32(load64(column + B::header + g * 64), 4 * c);
        const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, nibbles), fifth_bits16(m, 0));
        const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), nibbles), fifth_bits16(m, 2));
        dec[0] = _mm512_and_si512(lo, even), dec[1] = _mm512_srli_epi16(lo, 8);
        dec[2] = _mm512_and_si512(hi, even), dec[3] = _mm512_srli_epi16(hi, 8);
        return 4;
    } else {
        const __m512i low4 = _mm512_set1_epi16(0x000F);
        dec[0] = _mm512_and_si512(v, low4), dec[1] = _mm512_and_si512(_mm512_srli_epi16(v, 8), low4);
        dec[2] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4), dec[3] = _mm512_srli_epi16(v, 12);
        return 4;
    }
}
constexpr int word_of(int c, int d) { return d < 2 ? 2 * c + d : 8 + 2 * c + (d - 2); }

// q8_0, q4_0, q4_1, q5_0 and q5_1 for M rows of x at once (out[i * 32 + r]), each chunk decoded
// once for all of them. x in 16 bits, its groups of 4 stored 0 2 1 3 (tile_dot.h
// quantize_x16): word 2c holds x(4c) and x(4c + 2), word 2c + 1 x(4c + 1) and x(4c + 3), the
// pairs of a chunk's even and odd bytes. Each row's sums and float operations are the one-row
// product's.
template <TensorType T, int M>
void rows_block32(const uint8_t* tile, const TileX* x, size_t k, float* out) {
    using B = Block32<T>;
    const int32_t* words[M];
    for (int i = 0; i < M; ++i) words[i] = reinterpret_cast<const int32_t*>(x[i].q16);
    __m512 acc[M][2];
    for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (size_t b = 0; b < k / 32; ++b) {
        const uint8_t* column = tile + b * kTileRows * B::bytes;
        prefetch_column(column + kPrefetchColumns * kTileRows * B::bytes, kTileRows * B::bytes);
        __m512i s[M][2];
        for (int i = 0; i < M; ++i) s[i][0] = s[i][1] = _mm512_setzero_si512();
        for (int c = 0; c < (B::q8 ? 8 : 4); ++c)
            for (int g = 0; g < 2; ++g) {
                __m512i dec[4];
                const int n = decode_chunk<T>(column, c, g, dec);
                for (int d = 0; d < n; ++d)
                    for (int i = 0; i < M; ++i)
                        s[i][g] =
                            _mm512_dpwssd_epi32(s[i][g], dec[d], _mm512_set1_epi32(words[i][b * 16 + word_of(c, d)]));
            }
        for (int g = 0; g < 2; ++g) {
            const __m512 scale = fields16(column + g * 32);
            for (int i = 0; i < M; ++i) {
                if constexpr (B::offset != 0)
                    s[i][g] = _mm512_sub_epi32(s[i][g], _mm512_set1_epi32(B::offset * x[i].sum[b]));
                acc[i][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i][g]),
                                            _mm512_mul_ps(scale, _mm512_set1_ps(x[i].d[b])), acc[i][g]);
                if constexpr (B::minimum)
                    acc[i][g] =
                        _mm512_fmadd_ps(fields16(column + 64 + g * 32), _mm512_set1_ps(x[i].fsum[b]), acc[i][g]);
            }
        }
    }
    for (int i = 0; i < M; ++i) {
        _mm512_storeu_ps(out + i * kTileRows, acc[i][0]);
        _mm512_storeu_ps(out + i * kTileRows + 16, acc[i][1]);
    }
}

template <TensorType T>
void gemv_block32(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    rows_block32<T, 1>(tile, &x, k, out);
}

// m rows of x, up to 4 a pass over the tile (the sums of 4 rows fill half the vector registers).
template <TensorType T>
void int_rows_block32(const uint8_t* tile, const TileX* x, size_t m, size_t k, float* out) {
    for (size_t i = 0; i < m; i += 4) {
        const TileX* xi = x + i;
        float* o = out + i * kTileRows;
        switch (std::min<size_t>(4, m - i)) {
            case 1: rows_block32<T, 1>(tile, xi, k, o); break;
            case 2: rows_block32<T, 2>(tile, xi, k, o); break;
            case 3: rows_block32<T, 3>(tile, xi, k, o); break;
            default: rows_block32<T, 4>(tile, xi, k, o); break;
        }
    }
}

// 16 rows' sub-block scales and minimums of one super-block (w = scale q + minimum, q the
// code less Q6_K's offset), one lane a row, as panel_scales computes them row by row.
struct Scales16 {
    __m512 scale[16], minimum[16];
};

// The f16 in the low (high = false) or high half of each lane, as floats.
__m512 halves(kquant::Words w, bool high) {
    const __m512i h = high ? _mm512_srli_epi32(__m512i(w), 16) : __m512i(w);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
}

// Byte `i` of each lane of `w` (signed: as int8) as floats.
__m512 byte_floats(kquant::Words w, int i, bool is_signed) {
    const __m512i v = _mm512_slli_epi32(__m512i(w), 24 - 8 * i);
    return _mm512_cvtepi32_ps(is_signed ? _mm512_srai_epi32(v, 24) : _mm512_srli_epi32(v, 24));
}

template <TensorType Base>
void scales16(const uint8_t* first, Scales16& o) {
    using kquant::gather;
    if constexpr (Base == TensorType::Q6_K) {
        const __m512 d = halves(gather<Base>(first, 206), true);  // d is the block's last 2 bytes
        for (int w = 0; w < 4; ++w) {
            const kquant::Words sc = gather<Base>(first, 192 + 4 * w);
            for (int i = 0; i < 4; ++i)
                o.scale[4 * w + i] = _mm512_mul_ps(d, byte_floats(sc, i, true)),
                                o.minimum[4 * w + i] = _mm512_setzero_ps();
        }
    } else {  // ggml's get_scale_min_k4 on each lane's 12 bytes (kquant::scales_mins)
        const kquant::Words dd = gather<Base>(first, 0);
        const __m512 d = halves(dd, false), dmin = halves(dd, true);
        const kquant::Words u0 = gather<Base>(first, 4), u1 = gather<Base>(first, 8), u2 = gather<Base>(first, 12);
        const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
        const kquant::Words scales[2] = {u0 & m6, (u2 & m4) | (((u0 >> 6) & m2) << 4)};
        const kquant::Words mins[2] = {u1 & m6, ((u2 >> 4) & m4) | (((u1 >> 6) & m2) << 4)};
        for (int s = 0; s < 8; ++s) {
            o.scale[s] = _mm512_mul_ps(d, byte_floats(scales[s / 4], s % 4, false));
            o.minimum[s] =
                _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), dmin), byte_floats(mins[s / 4], s % 4, false));
        }
    }
}

// The exact int32 sum of each sub-block's products, for 16 rows from `first` (one lane a row).
template <TensorType Base>
void subblock_sums(const uint8_t* first, const int16_t* xq, __m512i* sums) {
    constexpr size_t quads_per_sub = kSub<Base> / 4, subs = 256 / kSub<Base>;
    // Bytes 0 2 1 3 of each lane (vpshufb indexes within each 128-bit quarter).
    const __m512i order = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15));
    const __m512i even = _mm512_set1_epi32(0x00FF00FF);
    const __m512i offset = _mm512_set1_epi16(Base == TensorType::Q6_K ? 32 : 0);  // Q6_K's codes less 32
    for (size_t s = 0; s < subs; ++s) sums[s] = _mm512_setzero_si512();
    const int32_t* xw = reinterpret_cast<const int32_t*>(xq);
    kquant::quads16<Base>(first, [&](size_t p, kquant::Words v) {
        const __m512i c = _mm512_shuffle_epi8(__m512i(v), order);
        const __m512i c01 = _mm512_sub_epi16(_mm512_and_si512(c, even), offset);
        const __m512i c23 = _mm512_sub_epi16(_mm512_srli_epi16(c, 8), offset);
        __m512i& s = sums[p / quads_per_sub];
        s = _mm512_dpwssd_epi32(s, c01, _mm512_set1_epi32(xw[2 * p]));
        s = _mm512_dpwssd_epi32(s, c23, _mm512_set1_epi32(xw[2 * p + 1]));
    });
}

template <TensorType Base>
void gemv_kquant16(const uint8_t* tile, const TileX& x, size_t k, float* out) {
    constexpr size_t sub = kSub<Base>, subs = 256 / sub;
    Scales16 w;
    __m512i sums[16];
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (size_t b = 0; b < k / 256; ++b) {
        const float* dx = x.d + b * 8;  // per 32 elements
        const float* fsum = x.fsum + b * 16;  // per 16 elements
        for (size_t h = 0; h < 2; ++h) {
            const uint8_t* first = tile + (b * kTileRows + 16 * h) * kBlockBytes<Base>;
            scales16<Base>(first, w);
            subblock_sums<Base>(first, x.q16 + b * 256, sums);
            // (Four partial sums, as the one-row product keeps them.)
            __m512 part[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (size_t s = 0; s < subs; ++s) {
                const __m512 scale = _mm512_mul_ps(w.scale[s], _mm512_set1_ps(dx[s * sub / 32]));
                part[s % 4] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[s]), scale, part[s % 4]);
                if constexpr (Base != TensorType::Q6_K)
                    part[s % 4] =
                        _mm512_fmadd_ps(w.minimum[s], _mm512_set1_ps(fsum[2 * s] + fsum[2 * s + 1]), part[s % 4]);
            }
            acc[h] =
                _mm512_add_ps(acc[h], _mm512_add_ps(_mm512_add_ps(part[0], part[1]), _mm512_add_ps(part[2], part[3])));
        }
    }
    _mm512_storeu_ps(out, acc[0]);
    _mm512_storeu_ps(out + 16, acc[1]);
}

}  // namespace

TileIntRowsFn tile_int_rows_avx512(TensorType tiled) {
    switch (tiled) {
        case TensorType::Q8_0_T32: return int_rows_block32<TensorType::Q8_0_T32>;
        case TensorType::Q4_0_T32: return int_rows_block32<TensorType::Q4_0_T32>;
        case TensorType::Q4_1_T32: return int_rows_block32<TensorType::Q4_1_T32>;
        case TensorType::Q5_0_T32: return int_rows_block32<TensorType::Q5_0_T32>;
        case TensorType::Q5_1_T32: return int_rows_block32<TensorType::Q5_1_T32>;
        default: return nullptr;
    }
}

TileGemvFn tile_gemv_avx512(TensorType tiled, XForm form) {
    if (form != XForm::kInt16) return nullptr;
    switch (tiled) {
        case TensorType::Q8_0_T32: return gemv_block32<TensorType::Q8_0_T32>;
        case TensorType::Q4_0_T32: return gemv_block32<TensorType::Q4_0_T32>;
        case TensorType::Q4_1_T32: return gemv_block32<TensorType::Q4_1_T32>;
        case TensorType::Q5_0_T32: return gemv_block32<TensorType::Q5_0_T32>;
        case TensorType::Q5_1_T32: return gemv_block32<TensorType::Q5_1_T32>;
        case TensorType::Q4_K_T32: return gemv_kquant16<TensorType::Q4_K>;
        case TensorType::Q5_K_T32: return gemv_kquant16<TensorType::Q5_K>;
        case TensorType::Q6_K_T32: return gemv_kquant16<TensorType::Q6_K>;
        default: return nullptr;
    }
}

}  // namespace akunu::cpu
