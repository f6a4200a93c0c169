// The GEMM on float tiles with bf16 pair products (gemm_bf16.h): built with AVX-512F/BW/BF16
// and called only when cpuid reports them (cpu_profile.h use_avx512_bf16).
//
// Per chunk of 256 k, the two 32-row tiles of a 64-column block become one panel of bf16 pairs
// w[p][j] = (W[j][2p], W[j][2p + 1]), rounded to nearest even once for all the rows of a run;
// X is rounded the same way once per call. vdpbf16ps adds the two exact products of each pair
// to an fp32 lane: twice the multiply-adds of an fp32 FMA per instruction.
//
// Register block: 6 X rows x 64 columns = 24 fp32 accumulators + 4 panel registers; each row's
// pair enters as a broadcast, as in the fp32 tile (gemm_avx512.cpp).
#include "akunu/cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "akunu/cpu/gemm_int_runs.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/formats/tiles.h"
#include "params.h"

namespace akunu::cpu {

namespace {

using T = TensorType;

constexpr size_t kRows = 6;  // X rows per register block

// c += the bf16 pair products of a and b, in place (an asm statement ties the accumulator to
// the destination, as gemm_vnni.cpp's dpwssd does).
inline void dpbf16(__m512& c, __m512i a, __m512i b) { asm("vdpbf16ps %2, %1, %0" : "+v"(c) : "v"(a), "v"(b)); }

template <int M>
void block(const uint32_t (*w)[kGemmTile], size_t pairs, const uint32_t* x, size_t ldx, float* acc) {
    __m512 c[M][4];
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) c[i][j] = _mm512_loadu_ps(acc + i * kGemmTile + 16 * j);
    for (size_t p = 0; p < pairs; ++p) {
        const __m512i w0 = _mm512_load_si512(w[p]), w1 = _mm512_load_si512(w[p] + 16),
                      w2 = _mm512_load_si512(w[p] + 32), w3 = _mm512_load_si512(w[p] + 48);
#pragma GCC unroll 6
        for (int i = 0; i < M; ++i) {
            const __m512i xv = _mm512_set1_epi32(int(x[i * ldx + p]));
            dpbf16(c[i][0], w0, xv);
            dpbf16(c[i][1], w1, xv);
            dpbf16(c[i][2], w2, xv);
            dpbf16(c[i][3], w3, xv);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) _mm512_storeu_ps(acc + i * kGemmTile + 16 * j, c[i][j]);
}

// 16 values of a float tile's element row e (columns [16 h, 16 h + 16)) as fp32.
template <TensorType Tt>
__m512 tile_row16(const uint8_t* tile, size_t e, size_t h) {
    const size_t at = e * kTileRows + 16 * h;
    if constexpr (Tt == T::F32_T32) return _mm512_loadu_ps(reinterpret_cast<const float*>(tile) + at);
    const __m256i v =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(tile) + at));
    if constexpr (Tt == T::F16_T32) return _mm512_cvtph_ps(v);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// Two vectors of 16 values rounded to bf16 and interleaved: lane j = (lo[j], hi[j]).
inline __m512i interleave_bf16(__m512 lo, __m512 hi) {
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                         5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

// Elements [k0, k0 + kc) of a tile's 32 rows into panel columns [c0, c0 + 32) as pairs; an odd
// kc's last pair has a zero high half.
template <TensorType Tt>
void fill_pairs(const uint8_t* tile, size_t k0, size_t kc, uint32_t (*w)[kGemmTile], size_t c0) {
    for (size_t p = 0; p < (kc + 1) / 2; ++p) {
        const size_t e = k0 + 2 * p;
        const bool whole = 2 * p + 1 < kc;
        for (size_t h = 0; h < 2; ++h) {
            const __m512 hi = whole ? tile_row16<Tt>(tile, e + 1, h) : _mm512_setzero_ps();
            _mm512_store_si512(w[p] + c0 + 16 * h, interleave_bf16(tile_row16<Tt>(tile, e, h), hi));
        }
    }
}

using FillFn = void (*)(const uint8_t* tile, size_t k0, size_t kc, uint32_t (*w)[kGemmTile], size_t c0);

FillFn pair_fill(TensorType tiled) {
    switch (tiled) {
        case T::F32_T32: return fill_pairs<T::F32_T32>;
        case T::F16_T32: return fill_pairs<T::F16_T32>;
        case T::BF16_T32: return fill_pairs<T::BF16_T32>;
        default: return nullptr;
    }
}

// Rows [m0, m1) of X as bf16 pairs in a per-thread buffer, (k + 1) / 2 pairs a row.
struct Bf16Rows {
    const uint32_t* x;
    size_t pairs;
};

Bf16Rows round_rows(const CpuArgs& a, size_t m0, size_t m1) {
    const auto& p = a.p<GemmParams>();
    const size_t pairs = (p.k + 1) / 2;
    thread_local std::vector<uint32_t> x;
    if (x.size() < (m1 - m0) * pairs) x.resize((m1 - m0) * pairs);
    for (size_t i = m0; i < m1; ++i) bf16_pairs(a.at<const float>(1) + i * p.ldx, p.k, x.data() + (i - m0) * pairs);
    return {x.data(), pairs};
}

// The bf16 form of int_gemm_items (gemm_int_runs.h): float tiles have one element a block.
struct Bf16Form {
    FillFn fill;
    uint32_t (*w)[kGemmTile];

    Bf16Rows quantize(const CpuArgs& a, size_t m0, size_t m1) const { return round_rows(a, m0, m1); }
    void unpack(const uint8_t* tile, size_t k0, size_t kc, size_t c0) const { fill(tile, k0, kc, w, c0); }
    void zero(size_t c0, size_t kc) const {
        for (size_t q = 0; q < (kc + 1) / 2; ++q) std::memset(w[q] + c0, 0, kTileRows * sizeof(uint32_t));
    }
    void product(const Bf16Rows& x, size_t row, size_t m, size_t k0, size_t kc, float* acc) const {
        bf16_tile(w, (kc + 1) / 2, x.x + row * x.pairs + k0 / 2, x.pairs, m, acc);
    }
};

}  // namespace

void bf16_pairs(const float* in, size_t n, uint32_t* out) {
    for (size_t i = 0; i < n; i += 32) {
        const size_t left = std::min<size_t>(32, n - i);
        const __mmask16 lo = __mmask16((1u << std::min<size_t>(16, left)) - 1),
                        hi = __mmask16(left > 16 ? (1u << (left - 16)) - 1 : 0);
        const __m512bh v =
            _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, in + i + 16), _mm512_maskz_loadu_ps(lo, in + i));
        _mm512_mask_storeu_epi32(out + i / 2, __mmask16((1u << ((left + 1) / 2)) - 1), (__m512i)v);
    }
}

void bf16_panel(const float* rows, size_t n, uint32_t (*out)[64]) {
    for (size_t p = 0; p < (n + 1) / 2; ++p) {
        const float* lo = rows + 2 * p * kGemmTile;
        const bool whole = 2 * p + 1 < n;
        for (size_t h = 0; h < kGemmTile; h += 16) {
            const __m512 hi = whole ? _mm512_loadu_ps(lo + kGemmTile + h) : _mm512_setzero_ps();
            _mm512_store_si512(out[p] + h, interleave_bf16(_mm512_loadu_ps(lo + h), hi));
        }
    }
}

void bf16_tile(const uint32_t (*w)[64], size_t pairs, const uint32_t* x, size_t ldx, size_t m, float* acc) {
    using Block = void (*)(const uint32_t (*)[kGemmTile], size_t, const uint32_t*, size_t, float*);
    static constexpr Block blocks[kRows + 1] = {nullptr, block<1>, block<2>, block<3>, block<4>, block<5>, block<6>};
    for (size_t i0 = 0; i0 < m; i0 += kRows)
        blocks[std::min(kRows, m - i0)](w, pairs, x + i0 * ldx, ldx, acc + i0 * kGemmTile);
}

void gemm_bf16(const CpuArgs& a, size_t begin, size_t end) {
    alignas(64) static thread_local uint32_t w[kGemmChunk / 2][kGemmTile];
    Bf16Form form{pair_fill(TensorType(a.variant)), w};
    int_gemm_items(a, begin, end, form);
}

}  // namespace akunu::cpu
