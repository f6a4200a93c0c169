// Up to four query rows against one attention tile at once (flash_attention's inner loops):
// each key and value row of the tile is read once for all of them and their sums stay in
// registers, where a loop per row reads the whole tile again for every row. Compiled for both
// tiers as vec_math.h's loops (vec_tiers.h); flash_rows() picks the version use_avx2() allows.
#pragma once

#include <cstddef>

#include "akunu/cpu/cpu_profile.h"

namespace akunu::cpu {

constexpr size_t kFlashRowsAtOnce = 4;  // query rows per call, at most

struct FlashRows {
    // s[r * s_stride + j] = sum_i q[r * q_stride + i] * k[j * k_stride + i], for r < rows,
    // j < n, i < d; rows <= kFlashRowsAtOnce, d a multiple of 8.
    void (*dots)(const float* q, size_t q_stride, size_t rows, const float* k, size_t k_stride, size_t d, size_t n,
                 float* s, size_t s_stride);
    // o[r * o_stride + i] = o[r * o_stride + i] * keep[r] + sum_j w[r * w_stride + j] * v[j * v_stride + i],
    // for r < rows, i < d, j < n (in the order of j); rows <= kFlashRowsAtOnce, d a multiple of 8.
    void (*mix)(float* o, size_t o_stride, const float* keep, const float* w, size_t w_stride, size_t rows,
                const float* v, size_t v_stride, size_t n, size_t d);
};

const FlashRows& flash_rows();
const FlashRows& flash_rows_for(CpuIsa isa);  // kScalar or kAvx2 (and kAvx512, which uses AVX2's)

}  // namespace akunu::cpu
