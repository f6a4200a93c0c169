// Products of one 32-row tile (tiles.h) with a vector: the inner loops of the CPU GEMV on
// tile-major weights, scalar and AVX2 (tile_dot_avx2.cpp), chosen at run time.
//
// Every type multiplies x in fp32 by default, as the GPU kernels do; q8_0, q4_0 and q4_1 sum
// each block's codes times x first and scale once (d_r * (sum_j q_j x_j - 8 sum_j x_j) for q4_0,
// plus m_r * sum_j x_j for q4_1), x's block sums coming with x (TileX::fsum).
//
// With integer dot products (tile_gemv_i8, the CPU device's int8 mode), x is first quantized
// to 8 bits per block of 32 (quantize_x: scale max|x| / 127, round half to even, as
// llama.cpp's q8_0), so each block's sum is exact in int32:
//   out[r] += float(sum_j code(r, j) * q_j) * (d_r * d_x)   (q4_0 codes minus 8; q4_1 adds m_r * d_x * sum_j q_j)
// (The offsets stay with the rounded x: q4_0's inside the integer sum, q4_1's minimum through
// x's rounded block sum. Since m is near -8 d, x's rounding errors then meet weights centred
// on zero and partly cancel; taking q4_1's minimum through x's exact sum doubled the error of a
// whole Q4_1 model.)
// That trades x's rounding (about 0.4 % per block) for about twice the weights per cycle.
//
// By default the CPU GEMV rounds x to 16 bits instead (tile_gemv_i16, quantize_x16: scale
// max|x| / 32767), which keeps x within 2^-16 of its block's largest value (1/256 of the int8
// rounding; the products move by about 1e-5 of their scale) and still sums integers: int16
// pairs through madd, about twice the fp32 product's speed.
// The scalar and AVX2 versions of the quantized types do the same operations in the same
// order: their results are equal bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/cpu/cpu_profile.h"
#include "akunu/formats/tensor_types.h"

namespace akunu::cpu {

// x as the tile products read it: floats, and for integer-dot types its 8-bit blocks.
struct TileX {
    const float* f = nullptr;  // [k]
    const int8_t* q = nullptr;  // [k] 8-bit x (the int8 mode)
    const int16_t* q16 = nullptr;  // [k] 16-bit x (quantize_x16; groups of 4 as x0 x2 x1 x3 but for k-quants)
    const float* d = nullptr;  // [k / 32] block scales (of q or q16, whichever x carries)
    const int32_t* sum = nullptr;  // [k / 32] sums of each block's q or q16
    const float* fsum = nullptr;  // sums of each block of f (block_sums): of 32, of 16 for k-quants
};

// fsum[b] = x[n b] + ... + x[n b + n - 1], in that order (k a multiple of n).
void block_sums(const float* x, size_t k, size_t n, float* fsum);
// The elements per block_sums block that a product of `tiled` reads: 16 for k-quants (Q6_K's
// sub-blocks), else 32.
size_t tile_sum_block(TensorType tiled);

// q, d and sum of x[0:k] (k a multiple of 32).
void quantize_x(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);
// q16, d and sum of x[0:k] (k a multiple of 32). For q8_0/q4_0/q4_1 (interleave) each group of
// 4 is stored in the order 0 2 1 3, so that one 32-bit word holds the pair an int16 madd
// multiplies into codes (2i, 2i + 2) or (2i + 1, 2i + 3) of a 4-byte tile chunk; k-quants read
// x in order.
void quantize_x16(const float* x, size_t k, int16_t* q16, float* d, int32_t* sum, bool interleave);
constexpr size_t kX16Order[4] = {0, 2, 1, 3};  // q16[4 c + kX16Order[e]] = x[4 c + e]

// Where a block column of a 32-element block tile keeps what (tiles.h), per type: q8_0, q4_0,
// q4_1, q5_0 and q5_1. Q5 blocks keep their 32 fifth bits (qh, bit i for element i) as the
// first 4-byte chunk, then their nibbles as q4's.
template <TensorType T>
struct Block32 {
    static constexpr bool q8 = T == TensorType::Q8_0_T32;
    static constexpr bool minimum = T == TensorType::Q4_1_T32 || T == TensorType::Q5_1_T32;  // w = d q + m
    static constexpr bool fifth = T == TensorType::Q5_0_T32 || T == TensorType::Q5_1_T32;
    static constexpr size_t header = minimum ? 128 : 64;  // the f16 fields of the 32 rows
    static constexpr size_t bytes = q8 ? 34 : 18 + (minimum ? 2 : 0) + (fifth ? 4 : 0);  // per row and block
    static constexpr size_t qs = header + (fifth ? 128 : 0);  // the codes after the qh chunk
    static constexpr int offset = q8 || minimum ? 0 : fifth ? 16 : 8;  // w = d (q - offset)
};

// out[0:32] = tile . x over k elements (k a whole number of the type's blocks).
using TileGemvFn = void (*)(const uint8_t* tile, const TileX& x, size_t k, float* out);

// How x enters the products: fp32 (TileX::f, and fsum for the quantized types), or rounded
// per block of 32 to 16 bits (q16, d, sum; fsum for q4_1) or 8 bits (q, d, sum).
enum class XForm { kFloat, kInt16, kInt8 };

// The product for a *_T32 type with x in `form`, or null where the type has none (the integer
// forms exist for q8_0, q4_0 and q4_1; the 16-bit one for q5_0, q5_1 and the k-quants too).
TileGemvFn tile_gemv(TensorType tiled, XForm form = XForm::kFloat);
// Whether the product reads TileX::fsum (fp32: the offsets of q4_0 and q5_0 and the minimums of
// q4_1 and q5_1; 16-bit: the minimums of q4_1, q5_1 and the k-quants).
bool tile_wants_block_sums(TensorType tiled, XForm form);

// Scalar, AVX2 and AVX-512 VNNI versions (tests compare them); the AVX2 and AVX-512 ones are
// null where none exists (AVX-512: the 16-bit products, tile_dot_avx512.cpp).
TileGemvFn tile_gemv_scalar(TensorType tiled, XForm form);
TileGemvFn tile_gemv_avx2(TensorType tiled, XForm form);
TileGemvFn tile_gemv_avx512(TensorType tiled, XForm form);

// out[i * 32 + r] = tile(row r) . x[i * ldx : + k] for the m rows of x: a short GEMM (beam
// search's decoder steps) on one float tile (F32_T32, F16_T32, BF16_T32). Each column of the
// tile is loaded and converted once for a block of rows (AVX2 3, AVX-512 8), which the
// one-row product would redo per row. Null for the other types.
using TileRowsFn = void (*)(const uint8_t* tile, const float* x, size_t ldx, size_t m, size_t k, float* out);
TileRowsFn tile_rows(TensorType tiled);
// One tier's version, whatever the processor (tests compare them; call only tiers <= cpu_isa()).
TileRowsFn tile_rows_for(TensorType tiled, CpuIsa isa);
TileRowsFn tile_rows_avx2(TensorType tiled);
TileRowsFn tile_rows_avx512(TensorType tiled);
// out[i * 32 + r] = tile(row r) . x[i] for m rows of x in 16 bits (XForm::kInt16): a short
// integer GEMM (a batch step of a few rows) on one q8_0, q4_0, q4_1, q5_0 or q5_1 tile, each
// 4-byte chunk decoded once for every row, each row's result equal to the one-row product's.
// AVX-512 VNNI only (null otherwise, and for the other types).
using TileIntRowsFn = void (*)(const uint8_t* tile, const TileX* x, size_t m, size_t k, float* out);
TileIntRowsFn tile_int_rows(TensorType tiled);
TileIntRowsFn tile_int_rows_avx512(TensorType tiled);
using QuantizeFn = void (*)(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);
QuantizeFn quantize_x_scalar();
QuantizeFn quantize_x_avx2();

}  // namespace akunu::cpu
