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

template <int R>
AKUNU_INLINE void dots_rows(const float* q, size_t qs, const float* k, size_t ks, size_t d, size_t n, float* s,
                            size_t ss) {
    size_t j = 0;
    for (; j + 3 <= n; j += 3) dots_block<R, 3>(q, qs, k + j * ks, ks, d, s + j, ss);
    if (n - j == 2) dots_block<R, 2>(q, qs, k + j * ks, ks, d, s + j, ss);
    if (n - j == 1) dots_block<R, 1>(q, qs, k + j * ks, ks, d, s + j, ss);
}

AKUNU_INLINE void dots_body(const float* q, size_t qs, size_t rows, const float* k, size_t ks, size_t d, size_t n,
                            float* s, size_t ss) {
    switch (rows) {
        case 1: return dots_rows<1>(q, qs, k, ks, d, n, s, ss);
        case 2: return dots_rows<2>(q, qs, k, ks, d, n, s, ss);
        case 3: return dots_rows<3>(q, qs, k, ks, d, n, s, ss);
        default: return dots_rows<4>(q, qs, k, ks, d, n, s, ss);
    }
}

// Rows r < R, elements [i0, i0 + 8C) of o: scaled by keep, then each value row's share added.
template <int R, int C>
AKUNU_INLINE void mix_block(float* o, size_t os, const float* keep, const float* w, size_t ws, const float* v,
                            size_t vs, size_t n, size_t i0) {
    V8 acc[R][C];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int c = 0; c < C; ++c) acc[r][c] = load8(o + r * os + i0 + 8 * c) * keep[r];
    for (size_t j = 0; j < n; ++j) {
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

template <int R>
AKUNU_INLINE void mix_rows(float* o, size_t os, const float* keep, const float* w, size_t ws, const float* v, size_t vs,
                           size_t n, size_t d) {
    size_t i = 0;
    for (; i + 16 <= d; i += 16) mix_block<R, 2>(o, os, keep, w, ws, v, vs, n, i);
    if (i < d) mix_block<R, 1>(o, os, keep, w, ws, v, vs, n, i);
}

AKUNU_INLINE void mix_body(float* o, size_t os, const float* keep, const float* w, size_t ws, size_t rows,
                           const float* v, size_t vs, size_t n, size_t d) {
    switch (rows) {
        case 1: return mix_rows<1>(o, os, keep, w, ws, v, vs, n, d);
        case 2: return mix_rows<2>(o, os, keep, w, ws, v, vs, n, d);
        case 3: return mix_rows<3>(o, os, keep, w, ws, v, vs, n, d);
        default: return mix_rows<4>(o, os, keep, w, ws, v, vs, n, d);
    }
}

AKUNU_VEC_TIERS(dots, void,
                (const float* q, size_t qs, size_t rows, const float* k, size_t ks, size_t d, size_t n, float* s,
                 size_t ss),
                (q, qs, rows, k, ks, d, n, s, ss))
AKUNU_VEC_TIERS(mix, void,
                (float* o, size_t os, const float* keep, const float* w, size_t ws, size_t rows, const float* v,
                 size_t vs, size_t n, size_t d),
                (o, os, keep, w, ws, rows, v, vs, n, d))

const FlashRows kBase{dots_base, mix_base};
const FlashRows kV3{dots_v3, mix_v3};

}  // namespace

const FlashRows& flash_rows_for(CpuIsa isa) { return isa >= CpuIsa::kAvx2 ? kV3 : kBase; }

const FlashRows& flash_rows() { return flash_rows_for(cpu_isa()); }

}  // namespace akunu::cpu
