// Row dot products: dot(W[row, 0:k], x[0:k]) for one weight row in its file layout, fp32
// accumulation. Scalar versions for every type, and AVX2/FMA/F16C versions (row_dot_avx2.cpp,
// built with those instruction sets) chosen at run time by cpuid (cpu_profile.h use_avx2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/cpu/cpu_profile.h"
#include "akunu/formats/tensor_types.h"

namespace akunu::cpu {

using RowDotFn = float (*)(const uint8_t* row, const float* x, size_t k);

// The GEMM's inner product on one dequantized weight tile stored k-major, wt[kk][64] (the
// tile-major layout: one contiguous load feeds 8 output columns):
// acc[i][j] += sum_kk X[i * ldx + kk] * wt[kk][j] for i < m, j < n (n <= 64; wt columns past n
// are zero), kk < k. acc is [m][64].
using GemmTileFn = void (*)(const float* wt, size_t n, const float* x, size_t ldx, size_t m, size_t k, float* acc);
GemmTileFn gemm_tile();
GemmTileFn gemm_tile_avx2();
GemmTileFn gemm_tile_avx512();
// One tier's version, whatever the processor (tests compare them; call only tiers <= cpu_isa()).
GemmTileFn gemm_tile_for(CpuIsa isa);

// out[0:n] = the f16 values in[0:n] as floats (F16C when available): KV-cache rows.
using HalfRowFn = void (*)(const uint16_t* in, float* out, size_t n);
HalfRowFn half_row();
HalfRowFn half_row_avx2();

// out[0:n] = a KV-cache row of n values as floats (cpu/kv_codes.h KvSide), from its bytes: f16's
// halves, q8's signed bytes in[0:n], or the nibbles of in[0:n/2], low nibble first (n even):
// int4's sign-extended, fp4's through its table (core/kv_codes.h kv_code). Code j of a
// little-endian word sits in its bytes in order, so the codes are read as bytes, not one at a
// time as kv_code reads them.
using CodeRowFn = void (*)(const uint8_t* in, float* out, size_t n);
// The reader of a format (kKvF16, kKvQ8, kKvInt4, kKvFp4): AVX2 where the processor has it.
CodeRowFn kv_row_reader(uint32_t format);
CodeRowFn kv_row_reader_avx2(uint32_t format);
// The scalar readers, whatever the processor (tests compare them).
void f16_row_scalar(const uint8_t* in, float* out, size_t n);
void q8_row_scalar(const uint8_t* in, float* out, size_t n);
void int4_row_scalar(const uint8_t* in, float* out, size_t n);
void fp4_row_scalar(const uint8_t* in, float* out, size_t n);

// The dequantizer (blocks -> floats) the CPU kernels use for `type`: an AVX2 one where there
// is one (f16, q8_0, q4_0), else the traits table's.
DequantFn fast_dequant(TensorType type);
DequantFn dequant_avx2(TensorType type);

// The dot product for rows of `type` (k a whole number of its blocks).
RowDotFn row_dot(TensorType type);
// The scalar version, whatever the processor (tests compare the two).
RowDotFn row_dot_scalar(TensorType type);
// The AVX2 version, or null when this type has none (its scalar version serves).
RowDotFn row_dot_avx2(TensorType type);

}  // namespace akunu::cpu
