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
// The scalar and AVX2 versions of the quantized types do the same operations in the same
// order: their results are equal bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/tensor_types.h"

namespace akunu::cpu {

// x as the tile products read it: floats, and for integer-dot types its 8-bit blocks.
struct TileX {
    const float* f = nullptr;       // [k]
    const int8_t* q = nullptr;      // [k]
    const float* d = nullptr;       // [k / 32] block scales
    const int32_t* sum = nullptr;   // [k / 32] sums of each block's q
    const float* fsum = nullptr;    // [k / 32] sums of each block of f (block_sums)
};

// fsum[b] = x[32 b] + ... + x[32 b + 31], in that order (k a multiple of 32).
void block_sums(const float* x, size_t k, float* fsum);

// q, d and sum of x[0:k] (k a multiple of 32).
void quantize_x(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);

// out[0:32] = tile . x over k elements (k a whole number of the type's blocks).
using TileGemvFn = void (*)(const uint8_t* tile, const TileX& x, size_t k, float* out);

// The fp32 product for a *_T32 type (TileX::f, and fsum for the quantized types).
TileGemvFn tile_gemv(TensorType tiled);
// The integer-dot product (TileX::q, d, sum), or null for types without one.
TileGemvFn tile_gemv_i8(TensorType tiled);
// Whether the fp32 product reads TileX::fsum (q4_0's offset of 8, q4_1's minimum).
bool tile_wants_block_sums(TensorType tiled);

// Scalar and AVX2 versions (tests compare them); the AVX2 ones are null where none exists.
TileGemvFn tile_gemv_scalar(TensorType tiled, bool int8);
TileGemvFn tile_gemv_avx2(TensorType tiled, bool int8);
using QuantizeFn = void (*)(const float* x, size_t k, int8_t* q, float* d, int32_t* sum);
QuantizeFn quantize_x_scalar();
QuantizeFn quantize_x_avx2();

}  // namespace akunu::cpu
