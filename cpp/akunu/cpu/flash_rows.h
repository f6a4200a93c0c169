// Up to four query rows against one attention tile at once (flash_attention's inner loops, and
// the rows of a short run on one span in encoder_attention): each key and value row is read
// once for all of them and their sums stay in registers, where a loop per row reads the whole
// tile again for every row. Compiled for both
// tiers as vec_math.h's loops (vec_tiers.h); flash_rows() picks the version use_avx2() allows.
#pragma once

#include <cstddef>

#include "akunu/cpu/cpu_profile.h"

namespace akunu::cpu {

constexpr size_t kFlashRowsAtOnce = 4;  // query rows per call, at most
// The streamed forms prefetch the key and value rows this many rows past the ones they read.
constexpr size_t kFlashStreamAhead = 16;

struct FlashRows {
    // s[r * s_stride + j] = sum_i q[r * q_stride + i] * k[j * k_stride + i], for r < rows,
    // j < n, i < d; rows <= kFlashRowsAtOnce, d a multiple of 8.
    void (*dots)(const float* q, size_t q_stride, size_t rows, const float* k, size_t k_stride, size_t d, size_t n,
                 float* s, size_t s_stride);
    // o[r * o_stride + i] = o[r * o_stride + i] * keep[r] + sum_j w[r * w_stride + j] * v[j * v_stride + i],
    // for r < rows, i < d, j < n (in the order of j); rows <= kFlashRowsAtOnce, d a multiple of 8.
    void (*mix)(float* o, size_t o_stride, const float* keep, const float* w, size_t w_stride, size_t rows,
                const float* v, size_t v_stride, size_t n, size_t d);
    // The same for key and value rows read from memory rather than a tile in cache (a span of a
    // wider K | V buffer): the rows a few blocks ahead are prefetched. Equal results.
    void (*dots_streamed)(const float* q, size_t q_stride, size_t rows, const float* k, size_t k_stride, size_t d,
                          size_t n, float* s, size_t s_stride);
    void (*mix_streamed)(float* o, size_t o_stride, const float* keep, const float* w, size_t w_stride, size_t rows,
                         const float* v, size_t v_stride, size_t n, size_t d);
};

const FlashRows& flash_rows();
// kScalar, kAvx2 or kAvx512 (whose streamed forms take heads of 16, 32, 48 or 64 elements in zmm
// registers, summing each score's lanes in another order; other heads and the other forms are
// AVX2's). Call only tiers <= cpu_isa().
const FlashRows& flash_rows_for(CpuIsa isa);

// flash_rows_avx512.cpp (built with AVX-512): the streamed forms for heads that fit.
bool flash_rows_avx512_fits(size_t d);
void dots_streamed_avx512(const float* q, size_t q_stride, size_t rows, const float* k, size_t k_stride, size_t d,
                          size_t n, float* s, size_t s_stride);
void mix_streamed_avx512(float* o, size_t o_stride, const float* keep, const float* w, size_t w_stride, size_t rows,
                         const float* v, size_t v_stride, size_t n, size_t d);

}  // namespace akunu::cpu
