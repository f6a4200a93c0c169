// flash_rows.h's streamed forms with AVX-512 (built with -mavx512f; called only when cpuid
// reports it, through flash_rows()): the key and value rows of a span of a wider K | V buffer,
// a head of 16 to 64 elements being one to four zmm registers.
//
// Scores: each row's products with 16 keys at a time sit in 16 registers, one per key, and one
// transposing reduction adds each register's lanes into one lane of the result (about three
// shuffles and adds per key, where a horizontal sum per key costs eight). Mixes: up to four
// rows' sums over the head stay in registers while each value row is read once for them.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>

#include "akunu/cpu/flash_rows.h"

namespace akunu::cpu {

namespace {

constexpr size_t kKeys = 16;  // keys per block of scores: one result register

// Lane i of the result: the sum of the 16 lanes of v[i].
__m512 lane_sums(const __m512 (&v)[kKeys]) {
    __m512 g[4];  // 128-bit lane L of g[a]: the sums over lane L of v[4a .. 4a + 3]
    for (int a = 0; a < 4; ++a) {
        const __m512* x = v + 4 * a;
        const __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
        const __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
        g[a] = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    const __m512 u01 = _mm512_add_ps(_mm512_shuffle_f32x4(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_f32x4(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 u23 = _mm512_add_ps(_mm512_shuffle_f32x4(g[2], g[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_f32x4(g[2], g[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
}

void prefetch_rows(const float* x, size_t stride, size_t from, size_t to, size_t c) {
    for (size_t j = from; j < to; ++j)
        for (size_t i = 0; i < c; ++i)
            _mm_prefetch(reinterpret_cast<const char*>(x + j * stride + 16 * i), _MM_HINT_T0);
}

// d = 16 C.
template <int C>
void dots_c(const float* q, size_t qs, size_t rows, const float* k, size_t ks, size_t n, float* s, size_t ss) {
    for (size_t j0 = 0; j0 < n; j0 += kKeys) {
        const size_t nb = std::min(kKeys, n - j0);
        prefetch_rows(k, ks, j0 + kFlashStreamAhead, std::min(n, j0 + kFlashStreamAhead + kKeys), C);
        for (size_t r = 0; r < rows; ++r) {
            __m512 qv[C];
            for (int c = 0; c < C; ++c) qv[c] = _mm512_loadu_ps(q + r * qs + 16 * c);
            __m512 acc[kKeys];
            for (size_t j = 0; j < kKeys; ++j) {
                if (j >= nb) {
                    acc[j] = _mm512_setzero_ps();
                    continue;
                }
                const float* kj = k + (j0 + j) * ks;
                __m512 a = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kj));
                for (int c = 1; c < C; ++c) a = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kj + 16 * c), a);
                acc[j] = a;
            }
            _mm512_mask_storeu_ps(s + r * ss + j0, __mmask16((1u << nb) - 1), lane_sums(acc));
        }
    }
}

template <int C, int R>
void mix_rows(float* o, size_t os, const float* keep, const float* w, size_t ws, const float* v, size_t vs, size_t n) {
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            acc[r][c] = _mm512_mul_ps(_mm512_loadu_ps(o + r * os + 16 * c), _mm512_set1_ps(keep[r]));
    for (size_t j = 0; j < n; ++j) {
        if (j + kFlashStreamAhead < n) prefetch_rows(v, vs, j + kFlashStreamAhead, j + kFlashStreamAhead + 1, C);
        __m512 vv[C];
        for (int c = 0; c < C; ++c) vv[c] = _mm512_loadu_ps(v + j * vs + 16 * c);
        for (int r = 0; r < R; ++r) {
            const __m512 wr = _mm512_set1_ps(w[r * ws + j]);
            for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(wr, vv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(o + r * os + 16 * c, acc[r][c]);
}

template <int C>
void mix_c(float* o, size_t os, const float* keep, const float* w, size_t ws, size_t rows, const float* v, size_t vs,
           size_t n) {
    switch (rows) {
        case 1: return mix_rows<C, 1>(o, os, keep, w, ws, v, vs, n);
        case 2: return mix_rows<C, 2>(o, os, keep, w, ws, v, vs, n);
        case 3: return mix_rows<C, 3>(o, os, keep, w, ws, v, vs, n);
        default: return mix_rows<C, 4>(o, os, keep, w, ws, v, vs, n);
    }
}

}  // namespace

bool flash_rows_avx512_fits(size_t d) { return d % 16 == 0 && d >= 16 && d <= 64; }

void dots_streamed_avx512(const float* q, size_t qs, size_t rows, const float* k, size_t ks, size_t d, size_t n,
                          float* s, size_t ss) {
    using Fn = void (*)(const float*, size_t, size_t, const float*, size_t, size_t, float*, size_t);
    static constexpr Fn by_c[4] = {dots_c<1>, dots_c<2>, dots_c<3>, dots_c<4>};
    by_c[d / 16 - 1](q, qs, rows, k, ks, n, s, ss);
}

void mix_streamed_avx512(float* o, size_t os, const float* keep, const float* w, size_t ws, size_t rows, const float* v,
                         size_t vs, size_t n, size_t d) {
    using Fn = void (*)(float*, size_t, const float*, const float*, size_t, size_t, const float*, size_t, size_t);
    static constexpr Fn by_c[4] = {mix_c<1>, mix_c<2>, mix_c<3>, mix_c<4>};
    by_c[d / 16 - 1](o, os, keep, w, ws, rows, v, vs, n);
}

}  // namespace akunu::cpu
