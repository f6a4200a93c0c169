// Row dot products: dot(W[row, 0:k], x[0:k]) for one weight row in its file layout, fp32
// accumulation. Scalar versions for every type, and AVX2/FMA/F16C versions (row_dot_avx2.cpp,
// built with those instruction sets) chosen at run time by cpuid (cpu_profile.h use_avx2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "akunu/tensor_types.h"

namespace akunu::cpu {

using RowDotFn = float (*)(const uint8_t* row, const float* x, size_t k);

// acc[j] += dot(w[j * ldw : +k], x[0 : k]) for j < n: a block of f32 weight rows (a
// dequantized GEMM tile) against one X row.
using TileDotFn = void (*)(const float* w, size_t ldw, size_t n, const float* x, size_t k, float* acc);
TileDotFn tile_dot();
TileDotFn tile_dot_avx2();

// out[0:n] = the f16 values in[0:n] as floats (F16C when available): KV-cache rows.
using HalfRowFn = void (*)(const uint16_t* in, float* out, size_t n);
HalfRowFn half_row();
HalfRowFn half_row_avx2();

// The dot product for rows of `type` (k a whole number of its blocks).
RowDotFn row_dot(TensorType type);
// The scalar version, whatever the processor (tests compare the two).
RowDotFn row_dot_scalar(TensorType type);
// The AVX2 version, or null when this type has none (its scalar version serves).
RowDotFn row_dot_avx2(TensorType type);

}  // namespace akunu::cpu
