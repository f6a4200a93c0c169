// k-quant super-blocks decoded 16 rows at a time for the integer prefill GEMMs (gemm_vnni.cpp,
// gemm_vnni8.cpp; included only by files built with AVX-512): a k-quant tile keeps each row's
// super-blocks whole (tiles.h), so each 32-bit word of 4 codes is gathered from 16 rows into one
// vector and decoded there, the same code as one row's word would take (GCC's vector extension).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "akunu/cpu/kquant_gemv.h"

namespace akunu::cpu::kquant {

// 16 rows' 32-bit words as one vector.
using Words = uint32_t __attribute__((vector_size(64)));

// The word `at` bytes into each of 16 consecutive rows' super-blocks, from the first's.
template <TensorType Base>
inline Words gather(const uint8_t* first, size_t at) {
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(int(kBlockBytes<Base>)));
    return (Words)_mm512_i32gather_epi32(rows, first + at, 1);
}

// The unsigned codes of a super-block of 16 rows, four to a lane: put(p, v) for each quad p of
// 64 (elements 4p..4p + 3, a byte each, Q6_K's without its offset of 32). Q4_K/Q5_K keep 64
// elements per 32 bytes of qs, low nibbles first, Q5_K's fifth bit in qh (two bits per 64);
// Q6_K its low 4 bits in ql, its high 2 in qh.
template <TensorType Base, class Put>
void quads16(const uint8_t* first, Put put) {
    const uint32_t low4 = 0x0F0F0F0F, low2 = 0x03030303, bit = 0x01010101;
    for (size_t g = 0; g < 8; ++g) {  // words of 4 elements: g of each 32
        if constexpr (Base == T::Q6_K) {
            for (size_t h = 0; h < 2; ++h) {
                const Words ql0 = gather<Base>(first, 64 * h + 4 * g), ql1 = gather<Base>(first, 64 * h + 32 + 4 * g);
                const Words qh = gather<Base>(first, 128 + 32 * h + 4 * g);
                put(32 * h + g, (ql0 & low4) | ((qh & low2) << 4));
                put(32 * h + 8 + g, (ql1 & low4) | (((qh >> 2) & low2) << 4));
                put(32 * h + 16 + g, ((ql0 >> 4) & low4) | (((qh >> 4) & low2) << 4));
                put(32 * h + 24 + g, ((ql1 >> 4) & low4) | (((qh >> 6) & low2) << 4));
            }
            continue;
        }
        const Words qh = Base == T::Q5_K ? gather<Base>(first, 16 + 4 * g) : Words{};
        for (size_t q = 0; q < 4; ++q) {
            const Words v = gather<Base>(first, (Base == T::Q5_K ? 48 : 16) + 32 * q + 4 * g);
            Words lo = v & low4, hi = (v >> 4) & low4;
            if constexpr (Base == T::Q5_K)
                lo |= ((qh >> int(2 * q)) & bit) << 4, hi |= ((qh >> int(2 * q + 1)) & bit) << 4;
            put(16 * q + g, lo), put(16 * q + 8 + g, hi);
        }
    }
}

// Each of the 32 rows' sub-block scales and minimums (w = scale q + minimum, q the unsigned
// code less Q6_K's offset) into w.scale[s][c0 + r] and w.minimum[s][c0 + r].
template <TensorType Base, class Panel>
void panel_scales(const uint8_t* first, Panel& w, size_t c0) {
    for (size_t r = 0; r < kTileRows; ++r) {
        const uint8_t* b = first + r * kBlockBytes<Base>;
        if constexpr (Base == T::Q6_K) {
            const float d = half_at(b + 208);
            for (size_t s = 0; s < 16; ++s)
                w.scale[s][c0 + r] = d * float(int8_t(b[192 + s])), w.minimum[s][c0 + r] = 0;
        } else {
            uint8_t sm[16];
            scales_mins(b + 4, sm);
            const float d = half_at(b), dmin = half_at(b + 2);
            for (size_t s = 0; s < 8; ++s)
                w.scale[s][c0 + r] = d * float(sm[s]), w.minimum[s][c0 + r] = -dmin * float(sm[8 + s]);
        }
    }
}

}  // namespace akunu::cpu::kquant
