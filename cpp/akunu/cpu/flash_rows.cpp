// FlashRows (flash_rows.h): each body compiled for both tiers (vec_tiers.h). Eight floats are
// one GCC vector value; the blocks' fixed sizes are template parameters, so their arrays of
// sums unroll into registers (16 in AVX2: 12 sums, 3 keys and a query for dots; 8 sums, 2
// value vectors and a weight for mix).
#include "akunu/cpu/flash_rows.h"

#include <cstring>

#include "akunu/cpu/vec_tiers.h"

namespace akunu::cpu {

namespace {

typedef float V8 __attribute__((vector_size(32)));
AKUNU_INLINE V8 load8(const float* p) {
    V8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
AKUNU_INLINE void store8(float* p, V8 v) { std::memcpy(p, &v, sizeof v); }
AKUNU_INLINE float sum8(V8 v) { return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7])); }

// The streamed forms ask for the rows kFlashStreamAhead past the block's while they read it (rows of a
// wider K or V row in memory, which the hardware's stride detection follows poorly, as
// vec_math's dots and mix do). Prefetches change no result.
template <bool Stream>
AKUNU_INLINE void prefetch(const float* x, size_t stride, size_t j, size_t rows, size_t n, size_t d) {
    if constexpr (Stream)
        for (size_t r = j + kFlashStreamAhead; r < j + kFlashStreamAhead + rows && r < n; ++r)
            for (size_t i = 0; i < d; i += 16) __builtin_prefetch(x + r * stride + i);
}

// Rows r < R against keys j < J: 8-lane partial sums over i, added up at the end.
template <int R, int J>
AKUNU_INLINE void dots_block(const float* q, size_t qs, const float* k, size_t ks, size_t d, float* s, size_t ss) {
    V8 acc[R][J] = {};
    for (size_t i = 0; i < d; i += 8) {
        V8 kv[J];
#pragma GCC unroll 4
        for (int j = 0; j < J; ++j) kv[j] = load8(k + j * ks + i);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const V8 qv = load8(q + r * qs + i);
#pragma GCC unroll 4
            for (int j = 0; j < J; ++j) acc[r][j] += qv * kv[j];
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int j = 0; j < J; ++j) s[r * ss + j] = sum8(acc[r][j]);
}

template <int R, bool Stream>
AKUNU_INLINE void dots_rows(const float* q, size_t qs, const float* k, size_t ks, size_t d, size_t n, float* s,
                            size_t ss) {
    size_t j = 0;
    for (; j + 3 <= n; j += 3) {
        prefetch<Stream>(k, ks, j, 3, n, d);
        dots_block<R, 3>(q, qs, k + j * ks, ks, d, s + j, ss);
    }
    if (n - j == 2) dots_block<R, 2>(q, qs, k + j * ks, ks, d, s + j, ss);
    if (n - j == 1) dots_block<R, 1>(q, qs, k + j * ks, ks, d, s + j, ss);
}

template <bool Stream>
AKUNU_INLINE void dots_any(const float* q, size_t qs, size_t rows, const float* k, size_t ks, size_t d, size_t n,
                           float* s, size_t ss) {
    switch (rows) {
        case 1: return dots_rows<1, Stream>(q, qs, k, ks, d, n, s, ss);
        case 2: return dots_rows<2, Stream>(q, qs, k, ks, d, n, s, ss);
        case 3: return dots_rows<3, Stream>(q, qs, k, ks, d, n, s, ss);
        default: return dots_rows<4, Stream>(q, qs, k, ks, d, n, s, ss);
    }
}

// Rows r < R, elements [i0, i0 + 8C) of o: scaled by keep, then each value row's share added.
// The first block of a streamed mix prefetches the value rows (d elements each) ahead.
template <int R, int C, bool Stream>
AKUNU_INLINE void mix_block(float* o, size_t os, const float* keep, const float* w, size_t ws, const float* v,
                            size_t vs, size_t n, size_t i0, size_t d) {
    V8 acc[R][C];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) acc[r][c] = load8(o + r * os + i0 + 8 * c) * keep[r];
    for (size_t j = 0; j < n; ++j) {
        if (i0 == 0) prefetch<Stream>(v, vs, j, 1, n, d);
        V8 vv[C];
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) vv[c] = load8(v + j * vs + i0 + 8 * c);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const float wr = w[r * ws + j];
#pragma GCC unroll 2
            for (int c = 0; c < C; ++c) acc[r][c] += wr * vv[c];
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) store8(o + r * os + i0 + 8 * c, acc[r][c]);
}

template <int R, bool Stream>
AKUNU_INLINE void mix_rows(float* o, size_t os, const float* keep, const float* w, size_t ws, const float* v, size_t vs,
                           size_t n, size_t d) {
    size_t i = 0;
    for (; i + 16 <= d; i += 16) mix_block<R, 2, Stream>(o, os, keep, w, ws, v, vs, n, i, d);
    if (i < d) mix_block<R, 1, Stream>(o, os, keep, w, ws, v, vs, n, i, d);
}

template <bool Stream>
AKUNU_INLINE void mix_any(float* o, size_t os, const float* keep, const float* w, size_t ws, size_t rows,
                          const float* v, size_t vs, size_t n, size_t d) {
    switch (rows) {
        case 1: return mix_rows<1, Stream>(o, os, keep, w, ws, v, vs, n, d);
        case 2: return mix_rows<2, Stream>(o, os, keep, w, ws, v, vs, n, d);
        case 3: return mix_rows<3, Stream>(o, os, keep, w, ws, v, vs, n, d);
        default: return mix_rows<4, Stream>(o, os, keep, w, ws, v, vs, n, d);
    }
}

#define AKUNU_FLASH_DOTS_PARAMS \
    (const float* q, size_t qs, size_t rows, const float* k, size_t ks, size_t d, size_t n, float* s, size_t ss)
#define AKUNU_FLASH_DOTS_ARGS (q, qs, rows, k, ks, d, n, s, ss)
#define AKUNU_FLASH_MIX_PARAMS                                                                                  \
    (float* o, size_t os, const float* keep, const float* w, size_t ws, size_t rows, const float* v, size_t vs, \
     size_t n, size_t d)
#define AKUNU_FLASH_MIX_ARGS (o, os, keep, w, ws, rows, v, vs, n, d)
AKUNU_INLINE void dots_body AKUNU_FLASH_DOTS_PARAMS { dots_any<false> AKUNU_FLASH_DOTS_ARGS; }
AKUNU_INLINE void dots_streamed_body AKUNU_FLASH_DOTS_PARAMS { dots_any<true> AKUNU_FLASH_DOTS_ARGS; }
AKUNU_INLINE void mix_body AKUNU_FLASH_MIX_PARAMS { mix_any<false> AKUNU_FLASH_MIX_ARGS; }
AKUNU_INLINE void mix_streamed_body AKUNU_FLASH_MIX_PARAMS { mix_any<true> AKUNU_FLASH_MIX_ARGS; }

AKUNU_VEC_TIERS(dots, void, AKUNU_FLASH_DOTS_PARAMS, AKUNU_FLASH_DOTS_ARGS)
AKUNU_VEC_TIERS(dots_streamed, void, AKUNU_FLASH_DOTS_PARAMS, AKUNU_FLASH_DOTS_ARGS)
AKUNU_VEC_TIERS(mix, void, AKUNU_FLASH_MIX_PARAMS, AKUNU_FLASH_MIX_ARGS)
AKUNU_VEC_TIERS(mix_streamed, void, AKUNU_FLASH_MIX_PARAMS, AKUNU_FLASH_MIX_ARGS)

// AVX-512's streamed forms where the head fits them (flash_rows_avx512.cpp), else AVX2's.
void dots_streamed_v4 AKUNU_FLASH_DOTS_PARAMS {
    (flash_rows_avx512_fits(d) ? dots_streamed_avx512 : dots_streamed_v3) AKUNU_FLASH_DOTS_ARGS;
}
void mix_streamed_v4 AKUNU_FLASH_MIX_PARAMS {
    (flash_rows_avx512_fits(d) ? mix_streamed_avx512 : mix_streamed_v3) AKUNU_FLASH_MIX_ARGS;
}

const FlashRows kBase{dots_base, mix_base, dots_streamed_base, mix_streamed_base};
const FlashRows kV3{dots_v3, mix_v3, dots_streamed_v3, mix_streamed_v3};
const FlashRows kV4{dots_v3, mix_v3, dots_streamed_v4, mix_streamed_v4};

}  // namespace

const FlashRows& flash_rows_for(CpuIsa isa) {
    return isa >= CpuIsa::kAvx512 ? kV4 : isa >= CpuIsa::kAvx2 ? kV3 : kBase;
}

const FlashRows& flash_rows() { return flash_rows_for(cpu_isa()); }

}  // namespace akunu::cpu
