// k-quant super-blocks as integers, and the CPU GEMV's product of a k-quant tile with x in 16
// bits (tile_dot.h, XForm::kInt16), its default for Q4_K, Q5_K and Q6_K. A k-quant tile keeps
// each row's super-blocks whole (tiles.h), so the product goes row by row: each super-block is
// decoded to int16 codes and per-sub-block (scale, minimum) floats, w = scale * q + minimum,
// then each sub-block's code sum against x is an exact int32, scaled once:
//   out[r] += sum_s float(sum_{i in s} q_i x16_i) * (scale_s * d_x) + minimum_s * sum_{i in s} x_i
// (the float sum over s in four interleaved partial sums).
// Included by tile_dot.cpp (scalar) and tile_dot_avx2.cpp (built with AVX2, where the decoding
// loops vectorize); everything here has internal linkage, so each keeps its own copy. Both
// tiers do the same float operations in the same order (std::fma): equal results.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "akunu/cpu/tile_dot.h"
#include "akunu/formats/tiles.h"
#include "akunu/core/half.h"

namespace akunu::cpu::kquant {

using T = TensorType;

// One super-block as integers: element i of sub-block s is scale[s] * q[i] + minimum[s].
struct KBlock {
    alignas(32) int16_t q[256];
    float scale[16], minimum[16];
};

template <T Base>
constexpr size_t kBlockBytes = Base == T::Q4_K   ? 144
                               : Base == T::Q5_K ? 176
                                                 : 210;
template <T Base>
constexpr size_t kSub = Base == T::Q6_K ? 16 : 32;  // elements per sub-block

// The 6-bit scales (bytes 0-7 of out) and minimums (8-15) of a Q4_K/Q5_K super-block, packed
// in 12 bytes: ggml's get_scale_min_k4 for all eight sub-blocks at once, in 32-bit words.
static inline void scales_mins(const uint8_t* packed, uint8_t out[16]) {
    uint32_t u[4];
    std::memcpy(u, packed, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    u[3] = ((u[2] >> 4) & m4) | (((u[1] >> 6) & m2) << 4);  // minimums 4-7
    const uint32_t mins_low = u[1] & m6;  // minimums 0-3
    u[1] = (u[2] & m4) | (((u[0] >> 6) & m2) << 4);  // scales 4-7
    u[2] = mins_low;
    u[0] &= m6;  // scales 0-3
    std::memcpy(out, u, 16);
}

// Q4_K {d, dmin, scales[12], qs[128]}; Q5_K {d, dmin, scales[12], qh[32], qs[128]}: 64
// elements per 32 bytes of qs, low nibbles first; Q5_K's fifth bit from qh, two bits per 64.
template <T Base>
static inline void decode_k4(const uint8_t* b, KBlock& o) {
    const float d = half_at(b), dmin = half_at(b + 2);
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + (Base == T::Q5_K ? 48 : 16);
    for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
            const uint8_t v = qs[32 * j + l];
            int lo = v & 15, hi = v >> 4;
            if constexpr (Base == T::Q5_K) lo += ((qh[l] >> (2 * j)) & 1) << 4, hi += ((qh[l] >> (2 * j + 1)) & 1) << 4;
            o.q[64 * j + l] = int16_t(lo), o.q[64 * j + 32 + l] = int16_t(hi);
        }
    uint8_t sm[16];
    scales_mins(b + 4, sm);
    for (int s = 0; s < 8; ++s) o.scale[s] = d * float(sm[s]), o.minimum[s] = -dmin * float(sm[8 + s]);
}

// Q6_K {ql[128], qh[64], scales[16] (int8), d}: codes (low 4 bits from ql, high 2 from qh)
// minus 32, 16 sub-blocks of 16 with their own scales.
static inline void decode_q6_k(const uint8_t* b, KBlock& o) {
    const float d = half_at(b + 208);
    for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b + 64 * h;
        const uint8_t* qh = b + 128 + 32 * h;
        int16_t* q = o.q + 128 * h;
        for (int l = 0; l < 32; ++l) {
            q[l] = int16_t(((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32);
            q[l + 32] = int16_t(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = int16_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = int16_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
    for (int s = 0; s < 16; ++s) o.scale[s] = d * float(int8_t(b[192 + s])), o.minimum[s] = 0.0f;
}

// The product of one tile, row by row. dot(q, x, sums) writes the exact int32 sum of each
// sub-block's products of int16 codes and int16 x, sums[s] for the 256 / kSub<Base> sub-blocks:
// the one step the two tiers write differently.
template <T Base, class Dot>
static inline void kquant_gemv16(const uint8_t* tile, const TileX& x, size_t k, float* out, Dot dot) {
    constexpr size_t sub = kSub<Base>, subs = 256 / sub;
    KBlock kb;
    for (size_t r = 0; r < kTileRows; ++r) out[r] = 0.0f;
    for (size_t b = 0; b < k / 256; ++b) {
        const int16_t* xq = x.q16 + b * 256;
        const float* dx = x.d + b * 8;  // per 32 elements
        const float* fsum = x.fsum + b * 16;  // per 16 elements
        for (size_t r = 0; r < kTileRows; ++r) {
            const uint8_t* block = tile + (b * kTileRows + r) * kBlockBytes<Base>;
            if constexpr (Base == T::Q6_K)
                decode_q6_k(block, kb);
            else
                decode_k4<Base>(block, kb);
            // (Four partial sums: independent chains of FMAs.)
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            int32_t isum[16];
            dot(kb.q, xq, isum);
            for (size_t s = 0; s < subs; ++s) {
                part[s % 4] = std::fma(float(isum[s]), kb.scale[s] * dx[s * sub / 32], part[s % 4]);
                if constexpr (Base != T::Q6_K)
                    part[s % 4] = std::fma(kb.minimum[s], fsum[2 * s] + fsum[2 * s + 1], part[s % 4]);
            }
            out[r] += (part[0] + part[1]) + (part[2] + part[3]);
        }
    }
}

}  // namespace akunu::cpu::kquant
