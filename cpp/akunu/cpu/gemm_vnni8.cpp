// The prefill GEMM on quantized tiles with byte products (gemm_vnni.h gemm_vnni8): built with
// AVX-512F/BW/VNNI and registered only when cpuid reports them.
//
// x is rounded to 8 bits per block of 32 as llama.cpp's q8_0 (tile_dot.h quantize_x); the
// weights are unpacked per panel of 256 k to their unsigned codes u = q + offset (q8_0's signed
// codes plus 128), four to a 32-bit lane, with one (scale, minimum) per sub-block (32 elements;
// Q6_K's 16). vpdpbusd multiplies four unsigned weight bytes by four signed x bytes per lane:
// twice the products of vpdpwssd per instruction. Each sub-block's sum is exact in int32, the
// offset taken off through the sub-block's sum of x codes:
//   Y[t][j] += float(sum_s u_js x8_t - offset sum_s x8_t) * (scale_js d_xt) + minimum_js d_xt sum_s x8_t
// (the result is the exact product of the weights with the rounded x; the integer sums start at
// -offset sum_s x8_t).
//
// Register block: 6 token rows x 64 columns = 24 int32 accumulators + 4 weight registers; the
// x quads enter as broadcasts. After each sub-block the sums are scaled into the fp32 rows.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "akunu/cpu/gemm_int_runs.h"
#include "akunu/cpu/gemm_vnni.h"
#include "akunu/cpu/kquant_quads_avx512.h"
#include "akunu/cpu/matmul_parts.h"
#include "akunu/cpu/tile_dot.h"
#include "akunu/formats/tiles.h"
#include "params.h"

namespace akunu::cpu {

namespace {

using T = TensorType;

constexpr size_t kChunk = kGemmChunk;  // k per panel: one k-quant super-block, eight 32-element blocks
constexpr size_t kRows = 6;  // token rows per register block

// 64 columns of the weights over a chunk of k, as the block multiplies them.
struct BytePanel {
    alignas(64) uint32_t q[kChunk / 4][kGemmTile];  // q[p][j]: unsigned codes 4p..4p + 3 of column j, a byte each
    alignas(64) float scale[kChunk / 16][kGemmTile];  // per sub-block and column
    alignas(64) float minimum[kChunk / 16][kGemmTile];
};

// How a type's codes meet x: w = scale (u - offset), or w = scale u + minimum.
struct CodeForm {
    size_t sub;  // elements per sub-block (one scale, and minimum, each)
    int offset;  // taken off the unsigned codes
    bool minimum;
};

CodeForm code_form(TensorType tiled) {
    switch (tiled) {
        case T::Q8_0_T32: return {32, 128, false};
        case T::Q4_0_T32: return {32, 8, false};
        case T::Q5_0_T32: return {32, 16, false};
        case T::Q6_K_T32: return {16, 32, false};
        default: return {32, 0, true};  // Q4_1, Q5_1, Q4_K, Q5_K
    }
}

// 16 rows' qh (one 32-bit lane each) shifted down by 4c: byte e of each lane becomes 16 where
// bit e of the lane's byte `at` (0: the low nibbles' bits, 2: the high ones') is set, else 0.
inline __m512i fifth_bits16(__m512i m, int at) {
    const __m512i spread = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0);
    const __m512i lanes = _mm512_shuffle_epi8(m, _mm512_add_epi8(spread, _mm512_set1_epi8(char(at))));
    return _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(lanes, _mm512_set1_epi32(0x08040201)), _mm512_set1_epi8(0x10));
}

// Blocks [b0, b0 + nb) of the 32 rows of a Block32 tile into panel columns [c0, c0 + 32). A
// row's 4-byte chunk c holds elements 4c..4c + 3 in its low nibbles (q8: its bytes) and
// 16 + 4c.. in its high ones: each chunk of 16 rows is a panel row of 16 lanes.
template <TensorType Tt>
void unpack_block32(const uint8_t* tile, size_t b0, size_t nb, BytePanel& w, size_t c0) {
    using B = Block32<Tt>;
    const __m512i nibble = _mm512_set1_epi8(0x0F);
    for (size_t b = 0; b < nb; ++b) {
        const uint8_t* column = tile + (b0 + b) * kTileRows * B::bytes;
        for (size_t h = 0; h < 2; ++h) {
            const size_t j = c0 + 16 * h;
            auto load = [&](size_t at) { return _mm512_loadu_si512(column + at + 64 * h); };
            _mm512_store_ps(&w.scale[b][j],
                            _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + 32 * h))));
            const __m512 m =
                B::minimum ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(column + 64 + 32 * h)))
                           : _mm512_setzero_ps();
            _mm512_store_ps(&w.minimum[b][j], m);
            for (size_t c = 0; c < (B::q8 ? 8 : 4); ++c) {
                const __m512i v = load(B::qs + c * kTileRows * 4);
                if constexpr (B::q8) {
                    _mm512_store_si512(&w.q[8 * b + c][j], _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80))));
                    continue;
                }
                __m512i lo = _mm512_and_si512(v, nibble), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
                if constexpr (B::fifth) {
                    const __m512i qh = _mm512_srli_epi32(load(B::header), int(4 * c));
                    lo = _mm512_or_si512(lo, fifth_bits16(qh, 0)), hi = _mm512_or_si512(hi, fifth_bits16(qh, 2));
                }
                _mm512_store_si512(&w.q[8 * b + c][j], lo);
                _mm512_store_si512(&w.q[8 * b + 4 + c][j], hi);
            }
        }
    }
}

// k-quant super-blocks (one per chunk): codes 16 rows at a time, scales row by row.
template <TensorType Base>
void unpack_kquant(const uint8_t* tile, size_t b0, size_t, BytePanel& w, size_t c0) {
    const uint8_t* first = tile + b0 * kTileRows * kquant::kBlockBytes<Base>;
    for (size_t r0 = 0; r0 < kTileRows; r0 += 16)
        kquant::quads16<Base>(first + r0 * kquant::kBlockBytes<Base>,
                              [&](size_t p, kquant::Words v) { std::memcpy(&w.q[p][c0 + r0], &v, 64); });
    kquant::panel_scales<Base>(first, w, c0);
}

using UnpackFn = void (*)(const uint8_t* tile, size_t b0, size_t nb, BytePanel& w, size_t c0);

struct Unpackers {  // for int_unpack_for
    template <TensorType Tt>
    static constexpr UnpackFn block32 = unpack_block32<Tt>;
    template <TensorType Base>
    static constexpr UnpackFn kquant = unpack_kquant<Base>;
};

UnpackFn byte_unpack(TensorType tiled) { return int_unpack_for<Unpackers>(tiled); }

// x rows as the block reads them: 8-bit codes, per block of 32 their scale, and per 16 the sum
// of the codes (what the offsets and minimums multiply).
struct ByteRows {
    const int8_t* q;  // [m][k]
    const float* d;  // [m][k / 32]
    const int32_t* sum16;  // [m][k / 16]
    size_t k;
};

// c += the products of a's unsigned bytes with b's signed ones, four per lane, in place (as
// gemm_vnni.cpp's dpwssd: GCC 12 copies the accumulator around the intrinsic).
inline void dpbusd(__m512i& c, __m512i a, __m512i b) { asm("vpdpbusd %2, %1, %0" : "+v"(c) : "v"(a), "v"(b)); }

// acc[i][0:64] += the chunk's products of rows i < M (from row `row`, elements from k0) with
// the panel's `subs` sub-blocks of `sub` elements.
template <int M, bool Offset, bool Minimum>
void block(const BytePanel& w, size_t subs, size_t sub, int offset, const ByteRows& x, size_t row, size_t k0,
           float* acc) {
    const int32_t* xr[M];  // each row's x quads from k0
    for (int i = 0; i < M; ++i) xr[i] = reinterpret_cast<const int32_t*>(x.q + (row + i) * x.k + k0);
    for (size_t s = 0; s < subs; ++s) {
        const size_t e0 = k0 + s * sub;  // the sub-block's first element of x
        int32_t xs[M];  // each row's sum of x codes over the sub-block
        __m512i c[M][4];  // starting at -offset * xs: the offset's part of the sum
#pragma GCC unroll 6
        for (int i = 0; i < M; ++i) {
            const int32_t* s16 = x.sum16 + (row + i) * (x.k / 16) + e0 / 16;
            xs[i] = sub == 16 ? s16[0] : s16[0] + s16[1];
            const __m512i start = _mm512_set1_epi32(Offset ? -offset * xs[i] : 0);
#pragma GCC unroll 6
            for (int j = 0; j < 4; ++j) c[i][j] = start;
        }
        for (size_t p = s * sub / 4; p < (s + 1) * sub / 4; ++p) {
            const uint32_t* wp = w.q[p];
            const __m512i w0 = _mm512_load_si512(wp), w1 = _mm512_load_si512(wp + 16), w2 = _mm512_load_si512(wp + 32),
                          w3 = _mm512_load_si512(wp + 48);
#pragma GCC unroll 6
            for (int i = 0; i < M; ++i) {
                const __m512i xv = _mm512_set1_epi32(xr[i][p]);
                dpbusd(c[i][0], w0, xv);
                dpbusd(c[i][1], w1, xv);
                dpbusd(c[i][2], w2, xv);
                dpbusd(c[i][3], w3, xv);
            }
        }
#pragma GCC unroll 6
        for (int i = 0; i < M; ++i) {
            const float dx = x.d[(row + i) * (x.k / 32) + e0 / 32];
            const __m512 vdx = _mm512_set1_ps(dx), fs = _mm512_set1_ps(Minimum ? dx * float(xs[i]) : 0.0f);
#pragma GCC unroll 6
            for (int j = 0; j < 4; ++j) {
                float* out = acc + i * kGemmTile + 16 * j;
                const __m512 scale = _mm512_mul_ps(_mm512_load_ps(&w.scale[s][16 * j]), vdx);
                __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c[i][j]), scale, _mm512_loadu_ps(out));
                if constexpr (Minimum) a = _mm512_fmadd_ps(_mm512_load_ps(&w.minimum[s][16 * j]), fs, a);
                _mm512_storeu_ps(out, a);
            }
        }
    }
}

// Rows [0, m) of x (from row `row`) times the panel, into acc [m][64].
template <bool Offset, bool Minimum>
void panel_product(const BytePanel& w, size_t subs, const CodeForm& f, const ByteRows& x, size_t row, size_t m,
                   size_t k0, float* acc) {
    using Block = void (*)(const BytePanel&, size_t, size_t, int, const ByteRows&, size_t, size_t, float*);
    static constexpr Block blocks[kRows + 1] = {nullptr,
                                                block<1, Offset, Minimum>,
                                                block<2, Offset, Minimum>,
                                                block<3, Offset, Minimum>,
                                                block<4, Offset, Minimum>,
                                                block<5, Offset, Minimum>,
                                                block<6, Offset, Minimum>};
    for (size_t i0 = 0; i0 < m; i0 += kRows)
        blocks[std::min(kRows, m - i0)](w, subs, f.sub, f.offset, x, row + i0, k0, acc + i0 * kGemmTile);
}

using PanelProductFn = void (*)(const BytePanel&, size_t, const CodeForm&, const ByteRows&, size_t, size_t, size_t,
                                float*);
PanelProductFn panel_product_for(const CodeForm& f) {
    return f.minimum ? panel_product<false, true> : f.offset ? panel_product<true, false> : panel_product<false, false>;
}

// Rows [m0, m1) of X rounded to 8 bits (a NaN or infinity makes its block's scale NaN), into
// per-thread buffers; row i of the result is row m0 + i.
ByteRows quantize_rows(const CpuArgs& a, size_t m0, size_t m1) {
    const auto& p = a.p<GemmParams>();
    thread_local std::vector<int8_t> q;
    thread_local std::vector<float> d;
    thread_local std::vector<int32_t> sum, sum16;
    const size_t mt = m1 - m0, k = p.k;
    if (q.size() < mt * k) q.resize(mt * k), d.resize(mt * k / 32), sum.resize(mt * k / 32), sum16.resize(mt * k / 16);
    for (size_t i = 0; i < mt; ++i)
        quantize_x(a.at<const float>(1) + (m0 + i) * p.ldx, k, q.data() + i * k, d.data() + i * (k / 32),
                   sum.data() + i * (k / 32));
    for (size_t b = 0; b < mt * k / 16; ++b) {
        int32_t s = 0;
        for (size_t e = 0; e < 16; ++e) s += q[16 * b + e];
        sum16[b] = s;
    }
    return {q.data(), d.data(), sum16.data(), k};
}

// The 8-bit form of int_gemm_items (gemm_int_runs.h) for one GEMM's tile type.
struct ByteForm {
    UnpackFn unpack_fn;
    CodeForm codes;
    PanelProductFn product_fn;
    BytePanel& w;

    ByteRows quantize(const CpuArgs& a, size_t m0, size_t m1) const { return quantize_rows(a, m0, m1); }
    void unpack(const uint8_t* tile, size_t b0, size_t nb, size_t c0) const { unpack_fn(tile, b0, nb, w, c0); }
    void zero(size_t c0, size_t kc) const { zero_panel_columns(w, c0, kc / codes.sub); }
    void product(const ByteRows& x, size_t row, size_t m, size_t k0, size_t kc, float* acc) const {
        product_fn(w, kc / codes.sub, codes, x, row, m, k0, acc);
    }
};

}  // namespace

void gemm_vnni8(const CpuArgs& a, size_t begin, size_t end) {
    const TensorType type = TensorType(a.variant);
    thread_local BytePanel w;
    ByteForm form{byte_unpack(type), code_form(type), panel_product_for(code_form(type)), w};
    int_gemm_items(a, begin, end, form);
}

}  // namespace akunu::cpu
