// The prefill GEMM on quantized tiles with integer products (gemm_vnni.h): built with
// AVX-512F/BW/VNNI and called only when cpuid reports them (cpu_profile.h use_avx512_vnni).
//
// x is rounded to 16 bits per block of 32 as the GEMV rounds it (tile_dot.h quantize_x16), the
// weights are unpacked per panel of 256 k to int16 codes with one (scale, minimum) per
// sub-block (32 elements; Q6_K's 16), and each sub-block's products sum exactly in int32:
//   Y[t][j] += float(sum_{i in s} q_ji x16_ti) * (scale_js * d_xt) + minimum_js * d_xt * sum_{i in s} x16_ti
// (the minimum meets the rounded x too: the result is the exact product of the rounded x).
// vpdpwssd multiplies two int16 pairs per 32-bit lane and adds them in: twice the multiply-adds
// of an fp32 FMA per instruction, and no conversion of the weights to floats.
//
// Register block: 3 token rows x 64 columns = 12 int32 accumulators, 12 fp32 ones and 4 weight
// registers; the x pairs enter as broadcasts. After each sub-block the int32 sums are scaled
// into the fp32 ones, which meet memory once per chunk (a store per sub-block of 16 or 32
// elements would cost more than the scaling).
#include "akunu/cpu/gemm_vnni.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "akunu/cpu/fifth_bits_avx2.h"
#include "akunu/cpu/gemm_int_runs.h"
#include "akunu/cpu/kquant_quads_avx512.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/cpu/tile_dot.h"
#include "akunu/cpu/vec_math.h"
#include "akunu/core/half.h"
#include "akunu/formats/tiles.h"
#include "params.h"

namespace akunu::cpu {

namespace {

using T = TensorType;

constexpr size_t kChunk = kGemmChunk;  // k per panel: one k-quant super-block, eight 32-element blocks
constexpr size_t kRows = 3;  // token rows per register block: 12 int32 and 12 fp32 sums

// 64 columns of the weights over a chunk of k, as the block multiplies them.
struct IntPanel {
    alignas(64) int16_t q[kChunk / 2][kGemmTile][2];  // q[p][j] = codes 2p, 2p + 1 of column j
    alignas(64) float scale[kChunk / 16][kGemmTile];  // per sub-block and column
    alignas(64) float minimum[kChunk / 16][kGemmTile];
};

// Elements per sub-block: one scale (and minimum) each.
size_t sub_elements(TensorType tiled) { return tiled == T::Q6_K_T32 ? 16 : 32; }
// Whether w = scale q + minimum (else the minimum is zero).
bool has_minimum(TensorType tiled) {
    return tiled == T::Q4_1_T32 || tiled == T::Q5_1_T32 || tiled == T::Q4_K_T32 || tiled == T::Q5_K_T32;
}

// 8 rows' chunk of 4 codes (bytes, as int16 after `offset` is taken off) into panel pairs p
// (codes 0, 1) and p + 1 (codes 2, 3) of columns [j, j + 8).
template <bool Signed>
void put_chunk(IntPanel& w, size_t p, size_t j, __m256i bytes, int offset) {
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i q16 = _mm512_sub_epi16(Signed ? _mm512_cvtepi8_epi16(bytes) : _mm512_cvtepu8_epi16(bytes),
                                         _mm512_set1_epi16(short(offset)));
    const __m512i pairs = _mm512_permutexvar_epi32(idx, q16);  // each row's (0, 1) pairs, then its (2, 3) pairs
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&w.q[p][j][0]), _mm512_castsi512_si256(pairs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&w.q[p + 1][j][0]), _mm512_extracti64x4_epi64(pairs, 1));
}

// Blocks [b0, b0 + nb) of the 32 rows of a Block32 tile into panel columns [c0, c0 + 32):
// codes minus the type's offset, the scale d and the minimum m (zero where the type has none).
template <TensorType Tt>
void unpack_block32(const uint8_t* tile, size_t b0, size_t nb, IntPanel& w, size_t c0) {
    using B = Block32<Tt>;
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    for (size_t b = 0; b < nb; ++b) {
        const uint8_t* column = tile + (b0 + b) * kTileRows * B::bytes;
        const uint8_t* qs = column + B::qs;
        const size_t p0 = b * 16;  // the block's first pair
        for (size_t h = 0; h < 2; ++h) {
            const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + 32 * h));
            _mm512_store_ps(&w.scale[b][c0 + 16 * h], _mm512_cvtph_ps(d));
            const __m512 m =
                B::minimum ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + 64 + 32 * h)))
                           : _mm512_setzero_ps();
            _mm512_store_ps(&w.minimum[b][c0 + 16 * h], m);
        }
        for (size_t r0 = 0; r0 < kTileRows; r0 += 8) {
            auto load = [&](size_t c) {
                return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + (c * kTileRows + r0) * 4));
            };
            if constexpr (B::q8) {
                for (size_t c = 0; c < 8; ++c) put_chunk<true>(w, p0 + 2 * c, c0 + r0, load(c), 0);
                continue;
            }
            const __m256i qh = B::fifth
                                   ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + B::header + 4 * r0))
                                   : _mm256_setzero_si256();
            for (size_t c = 0; c < 4; ++c) {
                const __m256i v = load(c);
                __m256i lo = _mm256_and_si256(v, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
                if constexpr (B::fifth) {
                    const __m256i m = _mm256_srli_epi32(qh, int(4 * c));
                    lo = _mm256_or_si256(lo, fifth_bits(m, 0)), hi = _mm256_or_si256(hi, fifth_bits(m, 2));
                }
                put_chunk<false>(w, p0 + 2 * c, c0 + r0, lo, B::offset);
                put_chunk<false>(w, p0 + 8 + 2 * c, c0 + r0, hi, B::offset);
            }
        }
    }
}

// k-quant super-blocks (one per chunk): codes 16 rows at a time (kquant_quads_avx512.h), each
// quad of codes two int16 pairs (Q6_K's less its offset), scales row by row.
template <TensorType Base>
void unpack_kquant(const uint8_t* tile, size_t b0, size_t, IntPanel& w, size_t c0) {
    const uint8_t* first = tile + b0 * kTileRows * kquant::kBlockBytes<Base>;
    const int offset = Base == T::Q6_K ? 32 : 0;
    for (size_t r0 = 0; r0 < kTileRows; r0 += 16)
        kquant::quads16<Base>(first + r0 * kquant::kBlockBytes<Base>, [&](size_t p, kquant::Words v) {
            const __m512i quads = (__m512i)v;
            put_chunk<false>(w, 2 * p, c0 + r0, _mm512_castsi512_si256(quads), offset);
            put_chunk<false>(w, 2 * p, c0 + r0 + 8, _mm512_extracti64x4_epi64(quads, 1), offset);
        });
    kquant::panel_scales<Base>(first, w, c0);
}

using UnpackFn = void (*)(const uint8_t* tile, size_t b0, size_t nb, IntPanel& w, size_t c0);

struct Unpackers {  // for int_unpack_for
    template <TensorType Tt>
    static constexpr UnpackFn block32 = unpack_block32<Tt>;
    template <TensorType Base>
    static constexpr UnpackFn kquant = unpack_kquant<Base>;
};

UnpackFn int_unpack(TensorType tiled) { return int_unpack_for<Unpackers>(tiled); }

// x rows as the block reads them: 16-bit codes, and per block of 32 their scale and the scaled
// sum of the codes (the rounded x's block sum, which the minimums multiply).
struct IntRows {
    const int16_t* q;  // [m][k]
    const float* d;  // [m][k / 32]
    const float* dsum;  // [m][k / 32]
    size_t k;
};

// c += the int16 pair products of a and b, in place. (GCC 12 copies the accumulator around
// _mm512_dpwssd_epi32 instead of tying it to the destination, a register move per product.)
inline void dpwssd(__m512i& c, __m512i a, __m512i b) { asm("vpdpwssd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b)); }

// acc[i][0:64] += the chunk's products of rows i < M (from row `row`, elements from k0) with
// the panel's `subs` sub-blocks of `sub` elements (32 where the type has minimums). The rows'
// fp32 sums stay in registers over the chunk (loaded once, stored once): each sub-block's
// int32 sums are scaled into them in the same order as into memory, so the result is the same.
template <int M, bool Minimum>
void block(const IntPanel& w, size_t subs, size_t sub, const IntRows& x, size_t row, size_t k0, float* acc) {
    const int32_t* xr[M];  // each row's x pairs from k0
    for (int i = 0; i < M; ++i) xr[i] = reinterpret_cast<const int32_t*>(x.q + (row + i) * x.k + k0);
    __m512 y[M][4];
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) y[i][j] = _mm512_loadu_ps(acc + i * kGemmTile + 16 * j);
    for (size_t s = 0; s < subs; ++s) {
        __m512i c[M][4];
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) c[i][j] = _mm512_setzero_si512();
        const size_t e0 = k0 + s * sub;  // the sub-block's first element of x
        for (size_t p = s * sub / 2; p < (s + 1) * sub / 2; ++p) {
            const int16_t* wp = &w.q[p][0][0];
            const __m512i w0 = _mm512_load_si512(wp), w1 = _mm512_load_si512(wp + 32), w2 = _mm512_load_si512(wp + 64),
                          w3 = _mm512_load_si512(wp + 96);
#pragma GCC unroll 4
            for (int i = 0; i < M; ++i) {
                const __m512i xv = _mm512_set1_epi32(xr[i][p]);
                dpwssd(c[i][0], w0, xv);
                dpwssd(c[i][1], w1, xv);
                dpwssd(c[i][2], w2, xv);
                dpwssd(c[i][3], w3, xv);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) {
            const __m512 dx = _mm512_set1_ps(x.d[(row + i) * (x.k / 32) + e0 / 32]);
            const __m512 fs = _mm512_set1_ps(Minimum ? x.dsum[(row + i) * (x.k / 32) + e0 / 32] : 0.0f);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) {
                const __m512 scale = _mm512_mul_ps(_mm512_load_ps(&w.scale[s][16 * j]), dx);
                y[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c[i][j]), scale, y[i][j]);
                if constexpr (Minimum) y[i][j] = _mm512_fmadd_ps(_mm512_load_ps(&w.minimum[s][16 * j]), fs, y[i][j]);
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) _mm512_storeu_ps(acc + i * kGemmTile + 16 * j, y[i][j]);
}

// Rows [0, m) of x (from row `row`) times the panel, into acc [m][64].
template <bool Minimum>
void panel_product(const IntPanel& w, size_t subs, size_t sub, const IntRows& x, size_t row, size_t m, size_t k0,
                   float* acc) {
    using Block = void (*)(const IntPanel&, size_t, size_t, const IntRows&, size_t, size_t, float*);
    static constexpr Block blocks[kRows + 1] = {nullptr, block<1, Minimum>, block<2, Minimum>, block<3, Minimum>};
    for (size_t i0 = 0; i0 < m; i0 += kRows)
        blocks[std::min(kRows, m - i0)](w, subs, sub, x, row + i0, k0, acc + i0 * kGemmTile);
}

// Rows [m0, m1) of X rounded to 16 bits (a NaN or infinity makes its block's scale NaN), into
// per-thread buffers; row i of the result is row m0 + i.
IntRows quantize_rows(const CpuArgs& a, size_t m0, size_t m1) {
    const auto& p = a.p<GemmParams>();
    thread_local std::vector<int16_t> q;
    thread_local std::vector<float> d, dsum;
    thread_local std::vector<int32_t> sum;
    const size_t mt = m1 - m0, k = p.k;
    if (q.size() < mt * k) q.resize(mt * k), d.resize(mt * k / 32), dsum.resize(mt * k / 32), sum.resize(mt * k / 32);
    const auto quantize16 = vec_math().quantize16;
    for (size_t i = 0; i < mt; ++i)
        quantize16(a.at<const float>(1) + (m0 + i) * p.ldx, k, q.data() + i * k, d.data() + i * (k / 32),
                   sum.data() + i * (k / 32), false);
    for (size_t b = 0; b < mt * k / 32; ++b) dsum[b] = d[b] * float(sum[b]);
    return {q.data(), d.data(), dsum.data(), k};
}

// The 16-bit form of int_gemm_items (gemm_int_runs.h) for one GEMM's tile type.
struct PairForm {
    UnpackFn unpack_fn;
    size_t sub;
    bool minimum;
    IntPanel& w;

    IntRows quantize(const CpuArgs& a, size_t m0, size_t m1) const { return quantize_rows(a, m0, m1); }
    void unpack(const uint8_t* tile, size_t b0, size_t nb, size_t c0) const { unpack_fn(tile, b0, nb, w, c0); }
    void zero(size_t c0, size_t kc) const { zero_panel_columns(w, c0, kc / sub); }
    void product(const IntRows& x, size_t row, size_t m, size_t k0, size_t kc, float* acc) const {
        (minimum ? panel_product<true> : panel_product<false>)(w, kc / sub, sub, x, row, m, k0, acc);
    }
};

}  // namespace

void gemm_vnni(const CpuArgs& a, size_t begin, size_t end) {
    const TensorType type = TensorType(a.variant);
    thread_local IntPanel w;
    PairForm form{int_unpack(type), sub_elements(type), has_minimum(type), w};
    int_gemm_items(a, begin, end, form);
}

}  // namespace akunu::cpu
