// AVX2/FMA/F16C row dot products, read straight from ggml's block layouts. This file alone is
// built with -mavx2 -mfma -mf16c (CMakeLists.txt); row_dot() calls into it only when cpuid
// reports those instruction sets, so the library still runs on processors without them.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "akunu/core/kv_codes.h"
#include "akunu/cpu/row_dot.h"

namespace akunu::cpu {

namespace {

float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

float half(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

// Eight signed bytes as floats.
__m256 i8x8(const void* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))));
}

float dot_f32(const uint8_t* row, const float* x, size_t k) {
    const float* w = reinterpret_cast<const float*>(row);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= k; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < k; ++i) s += w[i] * x[i];
    return s;
}

float dot_f16(const uint8_t* row, const float* x, size_t k) {
    const uint16_t* w = reinterpret_cast<const uint16_t*>(row);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= k; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))),
                             _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8))),
                             _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < k; ++i) s += _cvtsh_ss(w[i]) * x[i];
    return s;
}

float dot_bf16(const uint8_t* row, const float* x, size_t k) {
    const uint16_t* w = reinterpret_cast<const uint16_t*>(row);
    __m256 a0 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256i u =
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i))), 16);
        a0 = _mm256_fmadd_ps(_mm256_castsi256_ps(u), _mm256_loadu_ps(x + i), a0);
    }
    float s = hsum(a0);
    for (; i < k; ++i) {
        const uint32_t u = uint32_t(w[i]) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        s += f * x[i];
    }
    return s;
}

// block_q8_0 {half d; int8 qs[32]}
float dot_q8_0(const uint8_t* row, const float* x, size_t k) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < k / 32; ++b, row += 34, x += 32) {
        const uint8_t* q = row + 2;
        __m256 s = _mm256_mul_ps(i8x8(q), _mm256_loadu_ps(x));
        s = _mm256_fmadd_ps(i8x8(q + 8), _mm256_loadu_ps(x + 8), s);
        s = _mm256_fmadd_ps(i8x8(q + 16), _mm256_loadu_ps(x + 16), s);
        s = _mm256_fmadd_ps(i8x8(q + 24), _mm256_loadu_ps(x + 24), s);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(row)), s, acc);
    }
    return hsum(acc);
}

// Codes of a 32-element block as signed bytes, elements 0..15 in lo and 16..31 in hi.
struct BlockBytes {
    __m128i lo, hi;
};

// The 32 nibbles of a 4-bit block as bytes (low nibbles are elements 0..15, high 16..31), with
// bit j of `high` (a 5-bit block's qh) added as 16 to element j, minus `bias`.
BlockBytes block_bytes(const uint8_t* qs, int bias, uint32_t high = 0) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i mask = _mm_set1_epi8(0x0F), off = _mm_set1_epi8(char(bias));
    __m128i lo = _mm_and_si128(q, mask), hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
    if (high) {  // byte j of 16 takes bit j of 16 bits: 0x10 where it is set
        const __m128i spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        const __m128i bit = _mm_set1_epi64x(int64_t(0x8040201008040201ull)), five = _mm_set1_epi8(0x10);
        const __m128i h = _mm_shuffle_epi8(_mm_cvtsi32_si128(int(high)), spread);
        const __m128i g = _mm_shuffle_epi8(_mm_cvtsi32_si128(int(high >> 16)), spread);
        lo = _mm_or_si128(lo, _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(h, bit), bit), five));
        hi = _mm_or_si128(hi, _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128(g, bit), bit), five));
    }
    return {_mm_sub_epi8(lo, off), _mm_sub_epi8(hi, off)};
}

// sum_j code_j * x_j of a block's 32 codes as 8 partial sums.
__m256 bytes_dot(const BlockBytes& c, const float* x) {
    const __m128i lo = c.lo, hi = c.hi;
    __m256 s = _mm256_mul_ps(i8x8(&lo), _mm256_loadu_ps(x));
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), _mm256_loadu_ps(x + 8), s);
    s = _mm256_fmadd_ps(i8x8(&hi), _mm256_loadu_ps(x + 16), s);
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), _mm256_loadu_ps(x + 24), s);
    return s;
}

__m256 nibble_dot(const uint8_t* qs, const float* x, int bias) { return bytes_dot(block_bytes(qs, bias), x); }

uint32_t qh_at(const uint8_t* p) {
    uint32_t h;
    std::memcpy(&h, p, 4);
    return h;
}

// The sum of x[0:32] as 8 partial sums (the offset of Q4_1's and Q5_1's minimum).
__m256 x_sum32(const float* x) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
                         _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));
}

// block_q4_0 {half d; u8 qs[16]}: d * (q - 8)
float dot_q4_0(const uint8_t* row, const float* x, size_t k) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < k / 32; ++b, row += 18, x += 32)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(row)), nibble_dot(row + 2, x, 8), acc);
    return hsum(acc);
}

// block_q4_1 {half d; half m; u8 qs[16]}: d * q + m
float dot_q4_1(const uint8_t* row, const float* x, size_t k) {
    __m256 acc = _mm256_setzero_ps(), xsum = _mm256_setzero_ps();
    for (size_t b = 0; b < k / 32; ++b, row += 20, x += 32) {
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(row)), nibble_dot(row + 4, x, 0), acc);
        xsum = _mm256_fmadd_ps(_mm256_set1_ps(half(row + 2)), x_sum32(x), xsum);
    }
    return hsum(_mm256_add_ps(acc, xsum));
}

// block_q5_0 {half d; u8 qh[4]; u8 qs[16]}: d * (q - 16), bit j of qh the 5th bit of element j
float dot_q5_0(const uint8_t* row, const float* x, size_t k) {
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < k / 32; ++b, row += 22, x += 32)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(row)), bytes_dot(block_bytes(row + 6, 16, qh_at(row + 2)), x), acc);
    return hsum(acc);
}

// block_q5_1 {half d; half m; u8 qh[4]; u8 qs[16]}: d * q + m
float dot_q5_1(const uint8_t* row, const float* x, size_t k) {
    __m256 acc = _mm256_setzero_ps(), xsum = _mm256_setzero_ps();
    for (size_t b = 0; b < k / 32; ++b, row += 24, x += 32) {
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half(row)), bytes_dot(block_bytes(row + 8, 0, qh_at(row + 4)), x), acc);
        xsum = _mm256_fmadd_ps(_mm256_set1_ps(half(row + 2)), x_sum32(x), xsum);
    }
    return hsum(_mm256_add_ps(acc, xsum));
}

// Register block: 6 X rows x 16 columns, 12 accumulators + 2 weight vectors + 1 broadcast =
// 15 of the 16 ymm registers (a bigger block spills accumulators to the stack). Per k, 2 loads
// and 6 broadcasts feed 12 FMAs. The loops over the block are unrolled so that the
// accumulators live in registers.
template <int M>
void gemm_block(const float* wt, const float* x, size_t ldx, size_t k, float* acc) {
    __m256 c[M][2];
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) c[i][0] = _mm256_loadu_ps(acc + i * 64), c[i][1] = _mm256_loadu_ps(acc + i * 64 + 8);
    for (size_t kk = 0; kk < k; ++kk) {
        const __m256 w0 = _mm256_load_ps(wt + kk * 64), w1 = _mm256_load_ps(wt + kk * 64 + 8);
#pragma GCC unroll 6
        for (int i = 0; i < M; ++i) {
            const __m256 xv = _mm256_broadcast_ss(x + i * ldx + kk);
            c[i][0] = _mm256_fmadd_ps(xv, w0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(xv, w1, c[i][1]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < M; ++i) _mm256_storeu_ps(acc + i * 64, c[i][0]), _mm256_storeu_ps(acc + i * 64 + 8, c[i][1]);
}

void gemm_tile(const float* wt, size_t n, const float* x, size_t ldx, size_t m, size_t k, float* acc) {
    using Block = void (*)(const float*, const float*, size_t, size_t, float*);
    static constexpr Block blocks[7] = {nullptr,       gemm_block<1>, gemm_block<2>, gemm_block<3>,
                                        gemm_block<4>, gemm_block<5>, gemm_block<6>};
    for (size_t j0 = 0; j0 < n; j0 += 16)
        for (size_t i0 = 0; i0 < m; i0 += 6)
            blocks[std::min<size_t>(6, m - i0)](wt + j0, x + i0 * ldx, ldx, k, acc + i0 * 64 + j0);
}

// The k-quants: each 256-element super-block dequantized by the table's (scalar) decoder, then
// an AVX2 dot. Only non-inline functions are called from here, so nothing built with AVX2 can
// be merged into code that runs on other processors.
template <TensorType T>
float dot_superblocks(const uint8_t* row, const float* x, size_t k) {
    const TensorTypeTraits& t = type_traits(T);
    alignas(32) float buf[256];
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < k / 256; ++b, row += t.block_bytes, x += 256) {
        t.dequant(row, buf, 1);
        for (size_t i = 0; i < 256; i += 8) acc = _mm256_fmadd_ps(_mm256_load_ps(buf + i), _mm256_loadu_ps(x + i), acc);
    }
    return hsum(acc);
}

void half_row(const uint16_t* in, float* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    for (; i < n; ++i) out[i] = _cvtsh_ss(in[i]);
}

void q8_row(const uint8_t* in, float* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, i8x8(in + i));
    q8_row_scalar(in + i, out + i, n - i);
}

// Eight bytes give 16 codes: each byte sign-extended to 16 bits, its high nibble by an
// arithmetic shift of 4, its low one by a shift up of 12 and back; interleaved low first.
void int4_row(const uint8_t* in, float* out, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i w = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i / 2)));
        const __m128i hi = _mm_srai_epi16(w, 4), lo = _mm_srai_epi16(_mm_slli_epi16(w, 12), 12);
        _mm256_storeu_ps(out + i, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_unpacklo_epi16(lo, hi))));
        _mm256_storeu_ps(out + i + 8, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_unpackhi_epi16(lo, hi))));
    }
    int4_row_scalar(in + i / 2, out + i, n - i);
}

// fp4's 16 codes: the magnitude from the low three bits through a table of eight
// (permutevar8x32 reads an index's low three bits), the sign from bit 3.
void fp4_row(const uint8_t* in, float* out, size_t n) {
    const __m256 magnitudes = _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f);
    auto eight = [&](__m128i codes16, float* dst) {
        const __m256i c = _mm256_cvtepu16_epi32(codes16);
        const __m256 mag = _mm256_permutevar8x32_ps(magnitudes, c);
        const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
        _mm256_storeu_ps(dst, _mm256_xor_ps(mag, _mm256_castsi256_ps(sign)));
    };
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i / 2)));
        const __m128i lo = _mm_and_si128(w, _mm_set1_epi16(15)), hi = _mm_srli_epi16(w, 4);
        eight(_mm_unpacklo_epi16(lo, hi), out + i);
        eight(_mm_unpackhi_epi16(lo, hi), out + i + 8);
    }
    fp4_row_scalar(in + i / 2, out + i, n - i);
}

void dequant_f16(const uint8_t* src, float* dst, size_t n) { half_row(reinterpret_cast<const uint16_t*>(src), dst, n); }

void dequant_q8_0(const uint8_t* src, float* dst, size_t blocks) {
    for (size_t b = 0; b < blocks; ++b, src += 34, dst += 32) {
        const __m256 d = _mm256_set1_ps(half(src));
        for (int i = 0; i < 32; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(d, i8x8(src + 2 + i)));
    }
}

void dequant_q4_0(const uint8_t* src, float* dst, size_t blocks) {
    const __m128i mask = _mm_set1_epi8(0x0F), off = _mm_set1_epi8(8);
    for (size_t b = 0; b < blocks; ++b, src += 18, dst += 32) {
        const __m256 d = _mm256_set1_ps(half(src));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2));
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(q, mask), off);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), mask), off);
        _mm256_storeu_ps(dst, _mm256_mul_ps(d, i8x8(&lo)));
        _mm256_storeu_ps(dst + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
        _mm256_storeu_ps(dst + 16, _mm256_mul_ps(d, i8x8(&hi)));
        _mm256_storeu_ps(dst + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
    }
}

// Q5_0 (d (q - 16)) and Q5_1 (d q + m, kMin) blocks as floats. The products are exact (an
// f16 scale times a 5-bit code), so these equal the scalar dequantizers bit for bit.
template <bool kMin>
void dequant_q5(const uint8_t* src, float* dst, size_t blocks) {
    constexpr size_t head = kMin ? 4 : 2;
    for (size_t b = 0; b < blocks; ++b, src += head + 20, dst += 32) {
        const __m256 d = _mm256_set1_ps(half(src)), m = _mm256_set1_ps(kMin ? half(src + 2) : 0.0f);
        const BlockBytes c = block_bytes(src + head + 4, kMin ? 0 : 16, qh_at(src + head));
        const __m128i parts[4] = {c.lo, _mm_srli_si128(c.lo, 8), c.hi, _mm_srli_si128(c.hi, 8)};
        for (int i = 0; i < 4; ++i) _mm256_storeu_ps(dst + 8 * i, _mm256_fmadd_ps(d, i8x8(&parts[i]), m));
    }
}

}  // namespace

DequantFn dequant_avx2(TensorType type) {
    switch (type) {
        case TensorType::F16: return dequant_f16;
        case TensorType::Q8_0: return dequant_q8_0;
        case TensorType::Q4_0: return dequant_q4_0;
        case TensorType::Q5_0: return dequant_q5<false>;
        case TensorType::Q5_1: return dequant_q5<true>;
        default: return nullptr;
    }
}

HalfRowFn half_row_avx2() { return half_row; }
CodeRowFn kv_row_reader_avx2(uint32_t format) {
    return format == kKvF16 ? dequant_f16 : format == kKvQ8 ? q8_row : format == kKvInt4 ? int4_row : fp4_row;
}

GemmTileFn gemm_tile_avx2() { return gemm_tile; }

RowDotFn row_dot_avx2(TensorType type) {
    switch (type) {
        case TensorType::F32: return dot_f32;
        case TensorType::F16: return dot_f16;
        case TensorType::BF16: return dot_bf16;
        case TensorType::Q8_0: return dot_q8_0;
        case TensorType::Q4_0: return dot_q4_0;
        case TensorType::Q4_1: return dot_q4_1;
        case TensorType::Q5_0: return dot_q5_0;
        case TensorType::Q5_1: return dot_q5_1;
        case TensorType::Q4_K: return dot_superblocks<TensorType::Q4_K>;
        case TensorType::Q5_K: return dot_superblocks<TensorType::Q5_K>;
        case TensorType::Q6_K: return dot_superblocks<TensorType::Q6_K>;
        default: return nullptr;
    }
}

}  // namespace akunu::cpu
